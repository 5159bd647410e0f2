#!/usr/bin/env python
"""Training-loop overhead: our training code vs a plain PyTorch loop of the same model on the same batches, in one
process (ratios are what count). Writes benchmarks/results/training.json.

    python benchmarks/benchmark_training.py --data-dir DATA            # ~6 min on 2 idle cores
    python benchmarks/benchmark_training.py --data-dir DATA --quick    # smoke run (~1 min)

DATA: a local data folder laid out as docs/data.md describes (default: $COVE_DATA_DIR). OpenMP threads wait
passively unless OMP_WAIT_POLICY says otherwise (`OMP_WAIT_POLICY=default`: OpenMP's own policy; docs/commands.md).

- MT: `modeling_cove.training.commands.train_mt.train_mt` (Accelerate; the cove-small preset, Adam) for N steps on Multi30k, target
  tokens/s as the trainer reports it (the sum of its step times: collate, forward, backward, clipping, optimizer,
  the cross-process loss reduction and bookkeeping), vs a plain loop (collate -> forward -> backward -> clip -> step)
  over the same epoch batches (`pretraining.epoch_batches`, length-grouped), timed as a whole.
- BCN: `transformers.Trainer` as `modeling_cove.training.commands.train_classifier` builds it (TREC-6, vectors + CoVe from the
  feature cache, no evaluation or saving during the timed steps) vs a plain loop (DataLoader with the same collator,
  the same fused AdamW, clipping): examples/s; and the Trainer with length-grouped sampling (`group_by_length`).
- `--trainer-variants`: also the Trainer with one setting of `classifier.make_training_arguments` switched (pinned
  DataLoader batches; the NaN/Inf loss filter, which reads the loss back at every step).
- `--mt-epoch`: also one whole Multi30k training epoch (cove-small preset, all 29k pairs), its wall time and target
  tokens/s.
The models hold random weights (a checkpoint built from the data's own vocabulary): speed does not depend on them.
Each side runs `--repeats` times, interleaved; the best time is kept. Overhead = 1 - ours / plain.

`--device cuda` runs both sides on the GPU (1-GPU Accelerate / Trainer overhead) and writes training_cuda.json:

    python benchmarks/benchmark_training.py --data-dir DATA --device cuda --mt-epoch
"""

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal, Optional

from instruments.common import BenchmarkArguments, write_report
from instruments.training import TrainingBenchmark, bench_bcn, bench_mt, bench_mt_epoch
from modeling_cove.training.common.cli import option, parse_options


@dataclass
class TrainingArguments(BenchmarkArguments):
    """The flags of benchmark_training.py."""

    only: Optional[Literal["mt", "bcn"]] = option("time only this loop (default: both)")
    mt_epoch: bool = option("also time one whole Multi30k epoch of MT training", False)
    bcn_steps: Optional[int] = option("BCN steps per run (default 40 on CPU, 200 on a GPU)")
    trainer_variants: bool = option("also time the BCN Trainer with pinned batches and the NaN/Inf loss filter "
                                    "switched", False)

    output_file: ClassVar[str] = "training.json"

    def __post_init__(self):
        super().__post_init__()
        if not Path(self.data_dir).is_dir():
            raise ValueError(f"--data-dir {self.data_dir} is not a directory")


def main(argv=None):
    import numpy as np
    import torch
    import transformers

    args = parse_options(TrainingArguments, argv, description=__doc__)
    bench = TrainingBenchmark(args.data_dir, args.device, args.threads, args.quick, args.repeats, args.bcn_steps,
                              args.trainer_variants)
    torch.set_num_threads(args.threads)
    np.random.seed(0)
    transformers.logging.set_verbosity_error()  # the heads' "newly initialised" load reports, once per model
    results = {}
    with tempfile.TemporaryDirectory(prefix="cove-bench-training-") as tmp:
        for name, run, wanted in (("mt", bench_mt, args.only in (None, "mt")),
                                  ("bcn", bench_bcn, args.only in (None, "bcn")),
                                  ("mt_epoch", bench_mt_epoch, args.mt_epoch)):
            if wanted:
                results[name] = run(bench, Path(tmp))
                print(name, json.dumps(results[name], indent=1), flush=True)
    write_report(args.output, argv, args.quick,
                 {"target": "overhead of our Accelerate / Trainer loops vs a plain PyTorch loop <= 10%",
                  "device": args.device}, results)


if __name__ == "__main__":
    main()
