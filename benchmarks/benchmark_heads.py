#!/usr/bin/env python
"""Speed figures of the task heads (BCN classification, DCN question answering, the tagger) against a plain-PyTorch roofline of
the same layers, measured side by side in one process (ratios are what count; absolute numbers move with the machine
and its load). Writes benchmarks/results/heads.json.

    python benchmarks/benchmark_heads.py --data-dir DATA                 # full run, threads 1 and 2
    python benchmarks/benchmark_heads.py --data-dir DATA --quick --threads 1    # smoke run (~2 min on 2 cores)

DATA: a local data folder laid out as docs/data.md describes (default: $COVE_DATA_DIR). OpenMP threads wait
passively unless OMP_WAIT_POLICY says otherwise (`OMP_WAIT_POLICY=default`: OpenMP's own policy; docs/commands.md).

Sections (random weights, a checkpoint over the data's own words: speed does not depend on them):
- bcn_single: BCN on the first 1,024 SST-2 test sentences (96 with --quick);
- bcn_pair: a pair BCN (`bcn_pair_input`, 3 labels) on the first 1,024 SNLI test pairs (96 with --quick);
- dcn: the DCN of the QA CLI's default preset on the windows of the first 256 SQuAD held-out questions (32 with
  --quick);
- tagger: the tagger of cove-train-tagger's CoNLL-2000 preset (input vectors) on the first 1,024 CoNLL-2000 test
  sentences (96 with --quick); the pipeline is "cove-token-classification" on the raw text, `sorted` reads pre-split
  words; besides, on our side alone in tokens/s, a Cross-View Training step pair (labelled + unlabelled) on that
  tagger and one as the CVT table trains (the cvt-paper preset with the ablation's chosen overrides, over a
  vocabulary of the table's size: 43,194 words, 2,000 with --quick).
Each section times (a) `pipeline` inference as a user calls it, in arrival order; (b) `sorted`: length-sorted batches
through `model(**batch)` under inference_mode; (c) `train`: training steps on the CLI's batches (its batch size; the
BCN's in arrival order, the DCN's and the tagger's grouped by length, as their CLIs sample) on cached CoVe features
(forward with labels, backward, clipping, the optimizer step: the Trainer's; the tagger's, its CLI's). Every one
on three sides, run in interleaved rounds (`--repeats`, default 3, 1 with --quick): ours with `lstm_implementation`
"auto" and "reference", and the roofline (`benchmarks/instruments/heads.py`: raw nn.LSTMs and the same Linear / bmm
/ softmax / pooling / maxout / batch norm on uniform-length batches holding the same tokens; the DCN decoder for as
many iterations as the model ran). Per side: best, median and spread of the rounds, real tokens/s; ratio = roofline
time / our time. Each thread count of `--threads` (default "1,2") is measured in turn, for both sides alike.

`--device cuda` runs everything on the GPU and writes benchmarks/results/heads_cuda.json.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

from instruments.common import BenchmarkArguments, write_report
from instruments.heads import SECTIONS, bench_heads, summary_table
from modeling_cove.training.common.cli import option, parse_options


@dataclass
class HeadsArguments(BenchmarkArguments):
    """The flags of benchmark_heads.py."""

    threads: str = option("comma-separated torch intra-op thread counts, each measured in turn", "1,2")
    texts: Optional[int] = option("texts per BCN section, SQuAD questions a quarter of it (default: 1,024; 96 with "
                                  "--quick)")
    sections: str = option(f"comma-separated sections to measure, of {', '.join(SECTIONS)}; the others are kept "
                           "from the existing report, each with the command, commit and date it was measured at",
                           ",".join(SECTIONS))

    output_file: ClassVar[str] = "heads.json"

    def __post_init__(self):
        super().__post_init__()
        try:
            self.thread_counts = [int(t) for t in self.threads.split(",") if t.strip()]
        except ValueError:
            raise ValueError(f"--threads {self.threads!r}: comma-separated positive integers, e.g. 1,2") from None
        if not self.thread_counts or min(self.thread_counts) < 1:
            raise ValueError(f"--threads {self.threads!r}: comma-separated positive integers, e.g. 1,2")
        self.repeats = self.repeats or (1 if self.quick else 3)
        self.section_names = [name.strip() for name in self.sections.split(",") if name.strip()]
        unknown = [name for name in self.section_names if name not in SECTIONS]
        if unknown or not self.section_names:
            raise ValueError(f"--sections {self.sections!r}: comma-separated names of {', '.join(SECTIONS)}")


def main(argv=None):
    args = parse_options(HeadsArguments, argv, description=__doc__)
    sizes = None if args.texts is None else {"sst2": args.texts, "snli": args.texts, "squad": max(args.texts // 4, 1),
                                             "conll2000": args.texts}
    settings, results = bench_heads(args.data_dir, args.device, args.quick, args.repeats, args.thread_counts, sizes,
                                    sections=args.section_names)
    for name, section in results.items():
        print(name, json.dumps(section, indent=1), flush=True)
    print(summary_table(results, args.thread_counts))
    kept = keep_sections(Path(args.output), args.section_names)
    if kept:
        settings["sections_kept"] = {name: provenance for name, (provenance, _) in kept.items()}
        results = {**{name: section for name, (_, section) in kept.items()}, **results}
    write_report(args.output, argv, args.quick, settings, results)


def keep_sections(path: Path, measured: list) -> dict:
    """The sections of the existing report at `path` that were not measured now: name -> (where they come from:
    command, commit, date, machine's CPU; the section's figures). A section kept before keeps its first provenance."""
    if not path.is_file():
        return {}
    old = json.loads(path.read_text())
    earlier = old.get("sections_kept", {})
    header = {key: old.get(key) for key in ("command", "commit", "date")}
    header["cpu_model"] = (old.get("machine") or {}).get("cpu_model")
    return {name: (earlier.get(name, header), section) for name, section in old.get("results", {}).items()
            if name not in measured}


if __name__ == "__main__":
    main()
