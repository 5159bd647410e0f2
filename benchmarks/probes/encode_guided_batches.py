"""Probe (issue 7, CPU): how `CoveModel.encode` cuts its batches for the host workers (`run_on_cpu_workers`).
One worker (`num_workers=1`: batches of `batch_size`, one at a time on every intra-op thread) against the workers
with batches cut by size alone (the code of 97e6f8f) and with the guided cut (`length_bucketed_batches(workers=W)`:
past `min_rows` rows a batch holds at most 1/W of the tokens still to batch) for several floors `min_rows`. On short
lists (the first 50, 100, 200 inputs) and whole sets, in one process: interleaved repeats, best of each. Same data,
random weights and batch size as scripts/benchmark.py.

    OMP_WAIT_POLICY=default python benchmarks/probes/encode_guided_batches.py --data-dir ../shared/data --repeats 7 \\
        --output benchmarks/results/encode_guided_batches_default.json
    python benchmarks/probes/encode_guided_batches.py ...   # PASSIVE, what the scripts set unless told otherwise
"""

import functools
import sys
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import wait_policy  # noqa: E402, F401, I001  (before torch)
import torch  # noqa: E402

import modeling_cove.lstm_kernels as modeling  # noqa: E402  (encode's batching)
from benchmark import (benchmark_arguments, interleaved_best, prepare_encoder_benchmark,  # noqa: E402
                       write_report)

CUT = modeling.length_bucketed_batches  # the code's own, before any patching below
FLOORS = (1, 8, 16, 32)
FIRST = (50, 100, 200)


def by_size(lengths, batch_size, min_ratio=0.0, workers=1, min_rows=0):
    """The cut before the guided one: by size (and ratio) alone, whatever the workers."""
    return CUT(lengths, batch_size, min_ratio)


def main(argv=None):
    args = benchmark_arguments(__doc__, "encode_guided_batches.json").parse_args(argv)
    args.repeats = args.repeats or (1 if args.quick else 7)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    if device.type != "cpu":
        raise SystemExit("the workers run on CPU only")
    workers = modeling.cpu_worker_count(device)
    variants = {"one_worker": (CUT, 1), "by_size": (by_size, workers)}
    variants.update({f"guided_min{m}": (functools.partial(CUT, min_rows=m), workers) for m in FLOORS})

    def run_encode(batcher, num_workers, ids):
        def run():
            with mock.patch.object(modeling, "length_bucketed_batches", batcher):
                return model.encode(ids, batch_size=args.batch_size, num_workers=num_workers)
        return run

    results = {}
    for name, group in texts.items():
        all_ids = [x for x in tokenizer(group)["input_ids"] if x]
        for first in FIRST + (None,):
            ids = all_ids if first is None else all_ids[:first]
            if first is not None and first >= len(all_ids):
                continue
            lengths = [len(x) for x in ids]
            fns = {key: run_encode(batcher, w, ids) for key, (batcher, w) in variants.items()}
            outputs = {key: fns[key]() for key in ("one_worker", "guided_min8")}
            best = interleaved_best(fns, args.repeats)
            case = name if first is None else f"{name}_first{first}"
            results[case] = {
                "inputs": len(ids),
                "tokens": sum(lengths),
                "batches": {key: len(batcher(lengths, args.batch_size, min_ratio=0.0, workers=w))
                            for key, (batcher, w) in variants.items()},
                "seconds": {key: round(v, 4) for key, v in best.items()},
                **{f"ratio_{key}_to_one_worker": round(best["one_worker"] / best[key], 3)
                   for key in variants if key != "one_worker"},
                "max_abs_diff_guided_min8_vs_one_worker": max(
                    (a - b).abs().max().item() for a, b in zip(outputs["guided_min8"], outputs["one_worker"])),
            }
            print(case, results[case], flush=True)
    write_report(args.output, argv, args.quick,
                 {"batch_size": args.batch_size, "device": str(device), "threads": torch.get_num_threads(),
                  "workers": workers, "repeats": args.repeats}, results)


if __name__ == "__main__":
    main()
