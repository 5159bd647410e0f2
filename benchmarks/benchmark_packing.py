#!/usr/bin/env python
"""When should the encoder pack? An A/B of the MT-LSTM's execution paths on the same batches, in one process.
Writes benchmarks/results/packing.json.

    python benchmarks/benchmark_packing.py --data-dir DATA --threads 2
    python benchmarks/benchmark_packing.py --data-dir DATA --quick      # smoke run

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
unpacked path sorts the rows inside and runs them in time segments, so "unpacked as one group" is that), and so on a
single CPU thread in float32 (the segments share reordered weights); on a GPU, or one CPU thread under bf16 autocast,
when real tokens >= UNPACKED_MIN_FILL (0.7) x the padded batch.
Each figure: seconds for the whole set, best of `--repeats` interleaved repeats; random weights (speed only).
`--device cuda` asks the same of cuDNN (writes packing_cuda.json).

`--training` (writes packing_training.json) asks it of the heads' biLSTMs where autograd records them: per batch of
CoNLL-2000 training lengths scaled to a mean of 5-24 tokens, one training step (forward, backward, Adam) of the tagger
and of the BCN at real sizes with every biLSTM packed vs unpacked, and what "auto" ran there (`unpacked_by_default`:
unpacked from a mean length of UNPACKED_TRAINING_MIN_MEAN_LENGTH per row; docs/lstm_kernels.md).

    python benchmarks/benchmark_packing.py --data-dir DATA --training --threads 2
    python benchmarks/benchmark_packing.py --data-dir DATA --training --threads 1 \
        --output benchmarks/results/packing_training_1thread.json
`--ragged` (writes packing_ragged.json) asks where a ragged batch loses against the roofline's uniform one, for one
biLSTM layer at the heads' size on the same texts in arrival-order batches: the roofline, "reference" and "unpacked"
under several segment-call costs of the planner, measured; and a cost table of the fused kernel (one step and the fixed
part of one call, by row count) that accounts for them (docs/lstm_kernels.md, "The heads: where the time goes").

    python benchmarks/benchmark_packing.py --data-dir DATA --ragged --threads 1 \
        --output benchmarks/results/packing_ragged_1thread.json
"""

from dataclasses import dataclass
from typing import ClassVar

from instruments.common import EncoderBenchmarkArguments, write_report
from instruments.encoder import prepare_encoder_benchmark
from instruments.packing import TRAINING_MEANS, bench_packing, bench_ragged, bench_training_packing
from modeling_cove.training.common.cli import option, parse_options


@dataclass
class PackingArguments(EncoderBenchmarkArguments):
    """The flags of benchmark_packing.py (the encoder benchmarks' own)."""

    training: bool = option("time training steps of the heads' biLSTMs instead (packing_training.json)", False)
    ragged: bool = option("where ragged batches lose against uniform ones, one head biLSTM (packing_ragged.json)",
                          False)

    output_file: ClassVar[str] = "packing.json"

    def output_name(self) -> str:
        if self.ragged:
            return "packing_ragged.json"
        return "packing_training.json" if self.training else self.output_file


def main(argv=None):
    args = parse_options(PackingArguments, argv, description=__doc__)
    if args.training and args.ragged:
        raise SystemExit("benchmark_packing.py: --training and --ragged are two different benchmarks; give one")
    if args.ragged and args.device != "cpu":
        raise SystemExit(f"benchmark_packing.py: --ragged measures oneDNN's CPU kernel, got --device {args.device}")
    if args.training:
        return main_training(args, argv)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    bench = bench_ragged if args.ragged else bench_packing
    results = {}
    for name, group in texts.items():
        results[name] = bench(list(group), model, tokenizer, args.batch_size, args.repeats)
        print(name, results[name], flush=True)
    write_report(args.output, argv, args.quick,
                 {"threads": args.threads, "batch_size": args.batch_size, "device": str(device)}, results)


def main_training(args, argv):
    import torch

    from modeling_cove.training.data.tagging import load_tagging_splits

    torch.set_num_threads(args.threads)
    lengths = [len(words) for words in load_tagging_splits("conll2000", args.data_dir)["train"]["words"]]
    means = (7, 24) if args.quick else TRAINING_MEANS
    repeats = args.repeats or (1 if args.quick else 3)
    rows = bench_training_packing(lengths, args.batch_size, repeats, 1 if args.quick else 3, means)
    write_report(args.output, argv, args.quick, {"threads": args.threads, "batch_size": args.batch_size,
                                                 "lengths_from": "CoNLL-2000 training sentences, scaled"},
                 {"batches": rows})


if __name__ == "__main__":
    main()
