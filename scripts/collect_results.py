#!/usr/bin/env python
"""Collect the real-run outputs under runs/ into benchmarks/results/*.json (figures only, each file with the command
and commit that collected it; each run keeps its own). benchmarks/RESULTS.md is written by hand from these files.

    python scripts/collect_results.py          # classification.json (mean ± std over seeds, each column minus the
                                               # vectors paired by seed), mt_multi30k.json, squad.json,
                                               # main_cove_small.json, main_embedded.json (+ .md),
                                               # bilm_pretraining.json (+ .png), sample_efficiency.png
    python scripts/collect_results.py --merge  # add runs/' BCN runs to the classification.json there is

What is read where: `modeling_cove.training.results`.
"""

import argparse
import logging
from pathlib import Path

from modeling_cove.training.results import collect_results
from modeling_cove.training.run_info import command_line

REPO = Path(__file__).resolve().parents[1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", default=str(REPO / "runs"))
    p.add_argument("--out", default=str(REPO / "benchmarks" / "results"))
    p.add_argument("--merge", action="store_true",
                   help="add to the existing classification.json instead of replacing it: a run found in runs/ "
                        "replaces the one of the same task, column and seed, the other runs are kept, and the means "
                        "are computed again (runs/ of an earlier session gone, runs made on another machine)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    for path in collect_results(Path(args.runs), Path(args.out), merge=args.merge, command=command_line()):
        print("wrote", path)


if __name__ == "__main__":
    main()
