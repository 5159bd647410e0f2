#!/usr/bin/env python
"""Collect the tagging runs of `cove-train-tagger` under runs/tag into benchmarks/results/tagging.json: per task and
column mean ± std over seeds, each column minus supervised paired by seed with a 95% t interval, the small-data
(conll2000-10pct) and multi-task rows, and the Cross-View Training paper's figures beside ours.

    python benchmarks/collect_tagging.py                 # runs/tag -> benchmarks/results/tagging.json
    python benchmarks/collect_tagging.py --merge         # keep the runs of the file there whose folders are not here
    python benchmarks/collect_tagging.py --markdown      # also print the table for RESULTS.md
    python benchmarks/collect_tagging.py --data-dir DATA --encoder runs/vocab-tagging   # + tokenization mismatch rates

What is read where: `instruments.tagging`.
"""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.tagging import collect_tagging, markdown_table, tokenization_mismatches
from modeling_cove.training.common.cli import option, parse_options
from modeling_cove.training.common.run_info import command_line

REPO = Path(__file__).resolve().parents[1]


@dataclass
class CollectTaggingArguments:
    """The flags of collect_tagging.py."""

    runs_dir: str = option("the tagging runs folder to read (default: the repository's runs/tag)",
                           str(REPO / "runs" / "tag"))
    output: str = option("the JSON file to write (default: the repository's benchmarks/results/tagging.json)",
                         str(REPO / "benchmarks" / "results" / "tagging.json"))
    merge: bool = option("keep the runs of the existing output file whose run folders were not collected now (runs of "
                         "an earlier session or another machine); a run collected now replaces its old entry", False)
    markdown: bool = option("print the Markdown table for RESULTS.md after writing", False)
    data_dir: Optional[str] = option("with --encoder: also measure how often the test sets' pre-split words and raw "
                                     "text tokenize differently (a local data folder, docs/tagging.md)")
    encoder: Optional[str] = option("the encoder checkpoint whose tokenizer the runs used (with --data-dir)")


def main(argv=None):
    args = parse_options(CollectTaggingArguments, argv, description=__doc__)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    mismatch = tokenization_mismatches(args.data_dir, args.encoder) if args.data_dir and args.encoder else None
    report = collect_tagging(args.runs_dir, args.output, merge=args.merge, command=command_line(), mismatch=mismatch)
    if report is None:
        print("no tagging runs found under", args.runs_dir)
        return
    print("wrote", args.output)
    if args.markdown:
        print(markdown_table(report))


if __name__ == "__main__":
    main()
