#!/usr/bin/env python
"""Collect the tagging runs of `cove-train-tagger` under runs/tag into benchmarks/results/tagging.json: per task and
column mean ± std over seeds, each column minus supervised paired by seed with a 95% t interval, the small-data
(conll2000-10pct) and multi-task rows, and the Cross-View Training paper's figures beside ours.

    python benchmarks/collect_tagging.py                 # runs/tag -> benchmarks/results/tagging.json
    python benchmarks/collect_tagging.py --merge         # keep the runs of the file there whose folders are not here
    python benchmarks/collect_tagging.py --markdown      # also print the table for RESULTS.md
    python benchmarks/collect_tagging.py --data-dir DATA --encoder runs/vocab-tagging   # + tokenization mismatch rates
    python benchmarks/collect_tagging.py --recipe --merge --markdown   # the CVT table on a chosen recipe (below)

--cove-t collects the CoVe-T comparison that `run_tagging_table.py --cove-t-encoder` ran: runs/tag-cove-t ->
tagging.json's own section `cove_t_comparison` (CoNLL-2000 supervised, vectors+cove and vectors+cove-t; vectors+cove-t
- supervised, vectors+cove - supervised and vectors+cove-t - vectors+cove paired by seed), the rest of the file kept:

    python benchmarks/collect_tagging.py --cove-t --merge

--recipe collects the CVT table that `run_tagging_table.py --recipe` ran: runs/tag-recipe ->
benchmarks/results/tagging_cvt.json (supervised vs CVT per row, paired by seed; the recipe the runs recorded) and its
validation curves beside it (tagging_cvt_curves.png); --markdown then prints that table.

What is read where: `instruments.tagging` (`instruments.tagging_recipe` with --recipe).
"""

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.tagging import collect_cove_t, collect_tagging, markdown_table, tokenization_mismatches
from instruments.tagging_recipe import collect_recipe, curves_path, recipe_markdown
from modeling_cove.training.common.cli import fail, option, parse_options
from modeling_cove.training.common.run_info import command_line

REPO = Path(__file__).resolve().parents[1]


@dataclass
class CollectTaggingArguments:
    """The flags of collect_tagging.py."""

    runs_dir: Optional[str] = option("the tagging runs folder to read (default: the repository's runs/tag, with "
                                     "--recipe runs/tag-recipe, with --cove-t runs/tag-cove-t)")
    output: Optional[str] = option("the JSON file to write (default: the repository's benchmarks/results/"
                                   "tagging.json, with --recipe tagging_cvt.json)")
    recipe: bool = option("collect the CVT table on a chosen recipe (run_tagging_table.py --recipe) and draw its "
                          "validation curves beside the JSON (<output stem>_curves.png)", False)
    cove_t: bool = option("collect the CoVe-T comparison (run_tagging_table.py --cove-t-encoder) into the output's "
                          "section cove_t_comparison, the rest of the file kept", False)
    merge: bool = option("keep the runs of the existing output file whose run folders were not collected now (runs of "
                         "an earlier session or another machine); a run collected now replaces its old entry", False)
    markdown: bool = option("print the Markdown table for RESULTS.md after writing", False)
    data_dir: Optional[str] = option("with --encoder: also measure how often the test sets' pre-split words and raw "
                                     "text tokenize differently (a local data folder, docs/tagging.md)")
    encoder: Optional[str] = option("the encoder checkpoint whose tokenizer the runs used (with --data-dir)")


def main(argv=None):
    args = parse_options(CollectTaggingArguments, argv, description=__doc__)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if args.recipe and args.cove_t:
        fail("--recipe and --cove-t each collect a table of their own: give one")
    try:
        if args.recipe:
            collect_recipe_table(args)
        elif args.cove_t:
            collect_cove_t_table(args)
        else:
            collect_main_table(args)
    except ValueError as err:  # runs that do not belong in one cell, an output of another kind: one line, exit 2
        fail(err)


def collect_main_table(args: CollectTaggingArguments) -> None:
    args.runs_dir = args.runs_dir or str(REPO / "runs" / "tag")
    args.output = args.output or str(REPO / "benchmarks" / "results" / "tagging.json")
    mismatch = tokenization_mismatches(args.data_dir, args.encoder) if args.data_dir and args.encoder else None
    report = collect_tagging(args.runs_dir, args.output, merge=args.merge, command=command_line(), mismatch=mismatch)
    if report is None:
        print("no tagging runs found under", args.runs_dir)
        return
    print("wrote", args.output)
    if args.markdown:
        print(markdown_table(report))


def collect_cove_t_table(args: CollectTaggingArguments) -> None:
    if args.data_dir or args.encoder or args.markdown:
        fail("--data-dir/--encoder/--markdown are the first table's: not with --cove-t")
    runs_dir = args.runs_dir or str(REPO / "runs" / "tag-cove-t")
    output = args.output or str(REPO / "benchmarks" / "results" / "tagging.json")
    if collect_cove_t(runs_dir, output, merge=args.merge, command=command_line()) is None:
        print("no tagging runs found under", runs_dir)
        return
    print("wrote the section cove_t_comparison of", output)


def collect_recipe_table(args: CollectTaggingArguments) -> None:
    if args.data_dir or args.encoder:
        fail("--data-dir/--encoder measure the first table's tokenization mismatch: not with --recipe")
    runs_dir = args.runs_dir or str(REPO / "runs" / "tag-recipe")
    output = args.output or str(REPO / "benchmarks" / "results" / "tagging_cvt.json")
    report = collect_recipe(runs_dir, output, merge=args.merge, command=command_line())
    if report is None:
        print("no tagging runs found under", runs_dir)
        return
    print("wrote", output, "and", curves_path(output))
    if args.markdown:
        print(recipe_markdown(report))


if __name__ == "__main__":
    main()
