#!/usr/bin/env python
"""Collect the real-run outputs under runs/ into benchmarks/results/*.json (figures only, each file with the command
and commit that collected it; each run keeps its own). benchmarks/RESULTS.md is written by hand from these files.

    python benchmarks/collect_results.py          # classification.json (mean ± std over seeds, each column minus the
                                               # vectors paired by seed), mt_multi30k.json, squad.json,
                                               # main_cove_small.json, main_embedded.json,
                                               # bilm_pretraining.json (+ .png), sample_efficiency.png
    python benchmarks/collect_results.py --merge  # add runs/' BCN runs to the classification.json there is

The CoVe-T comparison's runs (runs/bcn-cove-t, `run_classification_table.py`) go to classification.json's own section
`cove_t_comparison` (with --merge: a run found replaces that section's run of the same task, column and seed, the
others stay), never into the table's `results`; without runs of it in runs/, the section the file has stays.

What is read where: `instruments.results`.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from modeling_cove.training.common.cli import fail, option, parse_options
from instruments.results import collect_results
from modeling_cove.training.common.run_info import command_line

REPO = Path(__file__).resolve().parents[1]


@dataclass
class CollectArguments:
    """The flags of collect_results.py."""

    runs: str = option("the runs folder to read (default: the repository's runs/)", str(REPO / "runs"))
    out: str = option("where the result files go (default: the repository's benchmarks/results/)",
                      str(REPO / "benchmarks" / "results"))
    merge: bool = option("add to the existing classification.json instead of replacing it: a run found in runs/ "
                         "replaces the one of the same task, column and seed, the other runs are kept, and the means "
                         "are computed again (runs/ of an earlier session gone, runs made on another machine)", False)


def main(argv=None):
    args = parse_options(CollectArguments, argv, description=__doc__)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        written = collect_results(Path(args.runs), Path(args.out), merge=args.merge, command=command_line())
    except ValueError as err:  # runs the collection refuses to pool or to record (the message names them)
        fail(err)
    for path in written:
        print("wrote", path)


if __name__ == "__main__":
    main()
