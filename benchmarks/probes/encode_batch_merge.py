"""Probe (issue 7, CPU): `CoveModel.encode` with and without `merge_small_batches` (the few-row batches of a sparse
tail of short inputs joined where one batch is estimated cheaper), against the raw-LSTM roofline, in one process:
interleaved repeats, best of each. Same data and random weights as scripts/benchmark.py.

    python benchmarks/probes/encode_batch_merge.py --data-dir ../shared/data --repeats 9 \\
        --output benchmarks/results/encode_batch_merge.json
"""

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import modeling_cove.modeling_cove as modeling  # noqa: E402
from benchmark import benchmark_arguments, prepare_encoder_benchmark, roofline, write_report  # noqa: E402


def main(argv=None):
    args = benchmark_arguments(__doc__, "encode_batch_merge.json").parse_args(argv)
    args.repeats = args.repeats or (1 if args.quick else 9)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    merge = modeling.merge_small_batches

    def without_merge(batches, lengths, batch_size):
        return batches

    results = {}
    for name, group in texts.items():
        ids = [x for x in tokenizer(group)["input_ids"] if x]
        tokens = sum(len(x) for x in ids)
        lengths = [len(x) for x in ids]
        ratio_batches = modeling.length_bucketed_batches(lengths, args.batch_size)
        roof, roof_tokens = roofline(tokens, tokens / len(ids), args.batch_size, device)
        variants = {"merged": merge, "not_merged": without_merge}
        outputs = {}
        for key, fn in variants.items():
            modeling.merge_small_batches = fn
            outputs[key] = model.encode(ids, batch_size=args.batch_size)
        best = {"merged": float("inf"), "not_merged": float("inf"), "roofline": float("inf")}
        for _ in range(args.repeats):  # interleaved, best of
            for key in best:
                if key == "roofline":
                    run = roof
                else:
                    modeling.merge_small_batches = variants[key]
                    run = lambda: model.encode(ids, batch_size=args.batch_size)  # noqa: E731
                start = time.perf_counter()
                run()
                best[key] = min(best[key], time.perf_counter() - start)
        modeling.merge_small_batches = merge
        tps = {key: (roof_tokens if key == "roofline" else tokens) / seconds for key, seconds in best.items()}
        results[name] = {
            "batches_not_merged": len(ratio_batches),
            "batches_merged": len(merge(ratio_batches, lengths, args.batch_size)),
            "tokens_per_s": {key: round(v, 1) for key, v in tps.items()},
            "ratio_merged_to_roofline": round(tps["merged"] / tps["roofline"], 3),
            "ratio_not_merged_to_roofline": round(tps["not_merged"] / tps["roofline"], 3),
            "speedup_merged": round(tps["merged"] / tps["not_merged"], 3),
            "max_abs_diff": max((a - b).abs().max().item() for a, b in zip(outputs["merged"], outputs["not_merged"])),
        }
        print(name, results[name], flush=True)
    write_report(args.output or "benchmarks/results/encode_batch_merge.json", argv, args.quick,
                 {"batch_size": args.batch_size, "device": str(device), "threads": torch.get_num_threads(),
                  "repeats": args.repeats}, results)


if __name__ == "__main__":
    main()
