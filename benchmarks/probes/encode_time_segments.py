"""Probe (issue 7, CPU): `CoveModel.encode` with its time segments (`plan_time_segments`: the long rows of a batch go
on alone once the short ones end) and without (each batch one segment, padding run to the batch's longest), against
the raw-LSTM roofline and the reference encoder (sort -> pack -> LSTM -> unpack -> unsort), in one process:
interleaved repeats, best of each. Same data, batches and random weights as scripts/benchmark.py.

    python benchmarks/probes/encode_time_segments.py --data-dir ../shared/data --repeats 7 \\
        --output benchmarks/results/encode_time_segments.json
    OMP_WAIT_POLICY=default python benchmarks/probes/encode_time_segments.py ...   # OpenMP's own wait policy
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import wait_policy  # noqa: E402, F401, I001  (before torch)
import torch  # noqa: E402

import modeling_cove.lstm_kernels as modeling  # noqa: E402  (the strategies and their planner)
from benchmark import (benchmark_arguments, prepare_encoder_benchmark, reference_encode, roofline,  # noqa: E402
                       write_report)


def one_segment(lengths, time_steps):
    return [(0, time_steps, len(lengths))]


def main(argv=None):
    args = benchmark_arguments(__doc__, "encode_time_segments.json").parse_args(argv)
    args.repeats = args.repeats or (1 if args.quick else 7)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    planner = modeling.plan_time_segments

    def run_encode(plan, ids):
        def run():
            modeling.plan_time_segments = plan
            try:
                return model.encode(ids, batch_size=args.batch_size)
            finally:
                modeling.plan_time_segments = planner
        return run

    results = {}
    for name, group in texts.items():
        ids = [x for x in tokenizer(group)["input_ids"] if x]
        tokens = sum(len(x) for x in ids)
        lengths = [len(x) for x in ids]
        batches = modeling.length_bucketed_batches(lengths, args.batch_size, min_ratio=0.0)
        plans = [planner([lengths[i] for i in batch], lengths[batch[0]]) for batch in batches]
        padded = sum(len(batch) * lengths[batch[0]] for batch in batches)
        segmented = sum((end - start) * rows for plan in plans for start, end, rows in plan)
        roof, roof_tokens = roofline(tokens, tokens / len(ids), args.batch_size, device)
        fns = {"segments": run_encode(planner, ids), "one_segment": run_encode(one_segment, ids),
               "roofline": roof, "reference": reference_encode(model, ids, args.batch_size)}
        outputs = {key: fns[key]() for key in ("segments", "one_segment")}
        best = {key: float("inf") for key in fns}
        for _ in range(args.repeats):  # interleaved, best of
            for key, run in fns.items():
                start = time.perf_counter()
                run()
                best[key] = min(best[key], time.perf_counter() - start)
        tps = {key: (roof_tokens if key == "roofline" else tokens) / seconds for key, seconds in best.items()}
        results[name] = {
            "batches": len(batches),
            "segments": sum(len(plan) for plan in plans),
            "row_steps_per_token": {"one_segment": round(padded / tokens, 4), "segments": round(segmented / tokens, 4)},
            "tokens_per_s": {key: round(v, 1) for key, v in tps.items()},
            **{f"ratio_{ours}_to_{base}": round(tps[ours] / tps[base], 3)
               for base in ("roofline", "reference") for ours in ("segments", "one_segment")},
            "speedup_segments": round(tps["segments"] / tps["one_segment"], 3),
            "max_abs_diff": max((a - b).abs().max().item()
                                for a, b in zip(outputs["segments"], outputs["one_segment"])),
        }
        print(name, results[name], flush=True)
    write_report(args.output, argv, args.quick,
                 {"batch_size": args.batch_size, "device": str(device), "threads": torch.get_num_threads(),
                  "repeats": args.repeats}, results)


if __name__ == "__main__":
    main()
