#!/usr/bin/env python
"""Collect the tagging runs of `cove-train-tagger` under runs/tag into benchmarks/results/tagging.json: per task and
column mean ± std over seeds, each column minus supervised paired by seed with a 95% t interval, the small-data
(conll2000-10pct) and multi-task rows, and the Cross-View Training paper's figures beside ours.

    python scripts/collect_tagging.py                 # runs/tag -> benchmarks/results/tagging.json
    python scripts/collect_tagging.py --merge         # keep the runs of the file there whose folders are not here
    python scripts/collect_tagging.py --markdown      # also print the table for RESULTS.md

What is read where: `modeling_cove.benchmarking.tagging`.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from modeling_cove.benchmarking.tagging import collect_tagging, markdown_table
from modeling_cove.training.cli import option, parse_options
from modeling_cove.training.run_info import command_line

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


def main(argv=None):
    args = parse_options(CollectTaggingArguments, argv, description=__doc__)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    report = collect_tagging(args.runs_dir, args.output, merge=args.merge, command=command_line())
    if report is None:
        print("no tagging runs found under", args.runs_dir)
        return
    print("wrote", args.output)
    if args.markdown:
        print(markdown_table(report))


if __name__ == "__main__":
    main()
