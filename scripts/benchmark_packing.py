#!/usr/bin/env python
"""When should the encoder pack? An A/B of the MT-LSTM's execution paths on the same batches, in one process.
Writes benchmarks/results/packing.json.

    python scripts/benchmark_packing.py --data-dir DATA --threads 2
    python scripts/benchmark_packing.py --data-dir DATA --quick      # smoke run

DATA: a local data folder laid out as docs/data.md describes (default: $COVE_DATA_DIR). OpenMP threads wait
passively unless OMP_WAIT_POLICY says otherwise (`OMP_WAIT_POLICY=default`: OpenMP's own policy; docs/commands.md).

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

from dataclasses import dataclass
from typing import ClassVar

from modeling_cove.benchmarking.common import EncoderBenchmarkArguments, write_report
from modeling_cove.benchmarking.encoder import prepare_encoder_benchmark
from modeling_cove.benchmarking.packing import bench_packing
from modeling_cove.training.cli import parse_options


@dataclass
class PackingArguments(EncoderBenchmarkArguments):
    """The flags of benchmark_packing.py (the encoder benchmarks' own)."""

    output_file: ClassVar[str] = "packing.json"


def main(argv=None):
    args = parse_options(PackingArguments, argv, description=__doc__)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    results = {}
    for name, group in texts.items():
        results[name] = bench_packing(list(group), model, tokenizer, args.batch_size, args.repeats)
        print(name, results[name], flush=True)
    write_report(args.output, argv, args.quick,
                 {"threads": args.threads, "batch_size": args.batch_size, "device": str(device)}, results)


if __name__ == "__main__":
    main()
