#!/usr/bin/env python
"""When should the encoder pack? An A/B of the MT-LSTM's execution paths on the same batches, in one process.
Writes benchmarks/results/packing.json.

    python scripts/benchmark_packing.py --data-dir ../shared/data --threads 2
    python scripts/benchmark_packing.py --data-dir ../shared/data --quick      # smoke run

1. Batches of 64 in arrival order (what `pipeline("feature-extraction")` and a plain DataLoader send): widely mixed
   lengths. Paths: packed (`CoveEncoder.forward(..., final_states=True)`); unpacked as one group (every row runs
   to the longest); unpacked in groups of near-equal length (`length_bucketed_batches` with ratio r inside the
   batch, each group cut to its longest row, results put back in order).
   Also each batch packed or unpacked by a per-batch rule (`PACKING_RULES`): the earlier rule (unpacked only when
   every row is >= 0.75 x the longest) and the fill rule (unpacked when real tokens >= f x the padded batch).
2. Length-sorted batches cut by size (what `CoveModel.encode` sends; most hold near-equal lengths): unpacked (the
   default without final states; on CPU in time segments, `plan_time_segments`) vs packed.
The model's rule (`lstm_kernels.unpacked_by_default`, "auto"): with more than one CPU thread always unpacked (on CPU the
unpacked path sorts the rows inside and runs them in time segments, so "unpacked as one group" is that); on a GPU or
a single CPU thread when real tokens >= UNPACKED_MIN_FILL (0.7) x the padded batch.
Each figure: seconds for the whole set, best of `--repeats` interleaved repeats; random weights (speed only).
`--device cuda` asks the same of cuDNN (writes packing_cuda.json).
"""

import os

# OpenMP reads OMP_WAIT_POLICY once, when torch loads it: PASSIVE (idle threads sleep at once) unless the caller
# sets it, for steady timings on a shared machine; "default" leaves OpenMP's own policy (docs/benchmarks.md)
if os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE").lower() == "default":
    del os.environ["OMP_WAIT_POLICY"]

from modeling_cove.benchmarking.common import benchmark_arguments, parse_benchmark_args, write_report  # noqa: E402
from modeling_cove.benchmarking.encoder import prepare_encoder_benchmark  # noqa: E402
from modeling_cove.benchmarking.packing import bench_packing  # noqa: E402


def main(argv=None):
    args = parse_benchmark_args(benchmark_arguments(__doc__, "packing.json"), argv)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    results = {}
    for name, group in texts.items():
        results[name] = bench_packing(list(group), model, tokenizer, args.batch_size, args.repeats)
        print(name, results[name], flush=True)
    write_report(args.output, argv, args.quick,
                 {"threads": args.threads, "batch_size": args.batch_size, "device": str(device)}, results)


if __name__ == "__main__":
    main()
