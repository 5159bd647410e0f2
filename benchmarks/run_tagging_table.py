#!/usr/bin/env python
"""Run the tagging table's runs (`benchmarks/results/tagging.json`) that have not finished yet, N at a time, then
collect them with benchmarks/collect_tagging.py. Rows, columns and seeds: `instruments.tagging_table`.

    python benchmarks/run_tagging_table.py --data-dir DATA --dry-run              # the commands still to run
    python benchmarks/run_tagging_table.py --data-dir DATA --parallel 2 --deadline-minutes 120     # 2 CPU cores
    python benchmarks/run_tagging_table.py --data-dir DATA --parallel 14 --rows conll2000 wnut17   # one GPU, 16 cores
    python benchmarks/run_tagging_table.py --data-dir DATA --seeds 1 2 3 --rows conll2000          # a machine's share

Before: the word vectors (cove-build-vocab ... --output-dir runs/vocab-tagging, docs/tagging.md) and, for the
contextual columns, CoVe-S (cove-train-mt) and the biLM (cove-train-bilm); runs whose encoder is missing are skipped.
DATA: a local data folder laid out as docs/data.md describes. Each run writes runs/tag/<row>/<column>-seed<N>/ and its
log beside it; a finished run is never run again, one cut short by the deadline resumes next time. With --recipe, a run
that tagging_cvt.json already records with the planned settings is done too (collected in an earlier session whose runs
folder is gone; --record names another file, or none), and the collection's --merge keeps it.

The CVT table on a chosen recipe (`benchmarks/results/tagging_cvt.json`; rows, seeds and the unlabelled text of each
row: `instruments.tagging_recipe`): supervised vs CVT with the same tagging preset and hyperparameter overrides,
runs in runs/tag-recipe, then `python benchmarks/collect_tagging.py --recipe --markdown`:

    python benchmarks/run_tagging_table.py --data-dir DATA --recipe cvt-paper --dry-run
    python benchmarks/run_tagging_table.py --data-dir DATA --recipe cvt-paper --parallel 14 \
        --recipe-overrides '{"label_scheme": "bio"}'          # a recipe without one of cvt-paper's options

The CoVe-T comparison (tagging.json's section `cove_t_comparison`; plan: `instruments.tagging_table.cove_t_runs`):
CoNLL-2000 supervised, vectors+cove over CoVe-S and vectors+cove-t over CoVe-T, seeds 1-5, the table's flags, both CoVe
checkpoints pretrained again for it (CoVe-S with CoVe-T's test-sentence exclusion, the BCN comparison's:
`instruments.classification_table`), every column over the one vocabulary the encoders were pretrained over
(runs/vocab-all, as the BCN comparison's; a checkpoint of another vocabulary is refused, and a CoVe-T holding CoVe-S's
weights); runs in runs/tag-cove-t, then
`python benchmarks/collect_tagging.py --cove-t --merge`:

    python benchmarks/run_tagging_table.py --data-dir DATA --cove-t-encoder runs/cove-t/encoder --dry-run
"""

import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.classification_table import DEFAULT_ENCODERS, check_distinct_encoders, check_one_vocabulary
from instruments.run_pool import PoolArguments, folder_flag, report
from instruments.tagging import read_report, records_of
from instruments.tagging_recipe import RECIPE_KEYS, recipe_runs, resolved_recipes
from instruments.tagging_table import COLUMN_FLAGS, COVE_T_ROW_COLUMNS, ROW_COLUMNS, cove_t_runs, run_table, table_runs
from modeling_cove.training.common.cli import REQUIRED, fail, option, parse_options

REPO = Path(__file__).resolve().parents[1]
COMPARISON_COVE_S = DEFAULT_ENCODERS["cove_s"]  # CoVe-S with CoVe-T's exclusion, as the BCN comparison reads it
TABLE_VOCAB = "runs/vocab-tagging"  # the tagging table's and the recipe table's word vectors (docs/tagging.md)
COLUMNS = list(dict.fromkeys([*COLUMN_FLAGS, *(c for names in COVE_T_ROW_COLUMNS.values() for c in names)]))


@dataclass
class RunTaggingTableArguments:
    """The flags of run_tagging_table.py."""

    data_dir: str = option("a local data folder (docs/data.md)", REQUIRED)
    runs_dir: Optional[str] = option("where the runs go (default: runs/tag, with --recipe runs/tag-recipe, with "
                                     "--cove-t-encoder runs/tag-cove-t)")
    vocab: Optional[str] = option("the word-vector checkpoint of the vectors-only columns (default: "
                                  f"{TABLE_VOCAB}; with --cove-t-encoder the one both encoders were pretrained over, "
                                  f"{DEFAULT_ENCODERS['vocab']})")
    cove_encoder: Optional[str] = option("the CoVe-S encoder of the vectors+cove column (default: runs/cove-small/"
                                         "encoder; with --cove-t-encoder the comparison's CoVe-S, "
                                         f"{COMPARISON_COVE_S})")
    bilm_encoder: str = option("the biLM encoder of the vectors+bilm column", "runs/bilm/encoder")
    rows: Optional[list[str]] = option("only these rows", choices=list(ROW_COLUMNS))
    columns: Optional[list[str]] = option("only these columns", choices=COLUMNS)
    seeds: Optional[list[int]] = option("only these seeds (a table split over machines: each runs its own seeds)")
    recipe: Optional[str] = option("run the CVT table on this tagging preset instead (cvt-paper, or a .yaml/.json "
                                   "file): rows and columns of instruments.tagging_recipe, supervised and cvt only")
    recipe_overrides: Optional[str] = option("with --recipe: a JSON object of hyperparameters over the preset, "
                                             "given to every run as --hyperparameters, e.g. '{\"label_scheme\": "
                                             "\"bio\"}'")
    record: Optional[str] = option("with --recipe: the collected table whose runs count as done, not run again "
                                   "(runs of an earlier session or another machine; default: the repository's "
                                   "benchmarks/results/tagging_cvt.json; 'none' for no record)")
    cove_t_encoder: Optional[str] = option("run the CoVe-T comparison instead (instruments.tagging_table.cove_t_runs):"
                                           " CoNLL-2000 supervised, vectors+cove over --cove-encoder and "
                                           "vectors+cove-t over this CoVe-T encoder")


def collect_command(flag: str, runs_dir: str, default: str) -> str:
    """The collect_tagging.py command of a table selected by `flag` (--recipe, --cove-t) whose runs went to
    `runs_dir` (relative to the working folder): its --runs-dir, as an absolute path, unless that is the repository's
    `default` folder, the one the collector reads by default."""
    return shlex.join(["python", "benchmarks/collect_tagging.py", flag, "--merge",
                       *folder_flag("--runs-dir", runs_dir, default)])


def plan(args: RunTaggingTableArguments) -> tuple:
    """(runs, runs folder, the collect command) of the table the flags ask for, only the --seeds asked for; with
    --recipe the recipe's hyperparameters are resolved first (a bad preset or override fails here) and printed."""
    runs, runs_dir, collect = table_plan(args)
    if args.seeds:
        unknown = sorted(set(args.seeds) - {run.seed for run in runs})
        if unknown:
            raise ValueError(f"--seeds {' '.join(map(str, unknown))}: no run of the table asked for has that seed")
        runs = [run for run in runs if run.seed in args.seeds]
    return runs, runs_dir, collect


def table_plan(args: RunTaggingTableArguments) -> tuple:
    """(runs, runs folder, the collect command) of the table the flags ask for, every seed."""
    if args.recipe is None and args.recipe_overrides is not None:
        raise ValueError("--recipe-overrides goes with --recipe")
    if args.recipe is not None and args.cove_t_encoder is not None:
        raise ValueError("--recipe and --cove-t-encoder each select a table of their own: give one")
    if args.cove_t_encoder is not None:  # its columns over one vocabulary, the encoders' (the BCN comparison's)
        encoders = {"vocab": args.vocab or DEFAULT_ENCODERS["vocab"], "cove_s": args.cove_encoder or COMPARISON_COVE_S,
                    "cove_t": args.cove_t_encoder}
        check_one_vocabulary(encoders)
        check_distinct_encoders({role: encoders[role] for role in ("cove_s", "cove_t")})
        runs = cove_t_runs(encoders["vocab"], encoders["cove_s"], encoders["cove_t"], args.rows, args.columns)
        runs_dir = args.runs_dir or "runs/tag-cove-t"
        return runs, runs_dir, collect_command("--cove-t", runs_dir, "runs/tag-cove-t")
    vocab = args.vocab or TABLE_VOCAB
    if args.recipe is None:
        encoders = {"vocab": vocab, "cove_s": args.cove_encoder or "runs/cove-small/encoder", "bilm": args.bilm_encoder}
        check_one_vocabulary(encoders)
        runs = table_runs(encoders["vocab"], encoders["cove_s"], encoders["bilm"], args.rows, args.columns)
        return runs, args.runs_dir or "runs/tag", "python benchmarks/collect_tagging.py --merge --markdown"
    runs = recipe_runs(vocab, args.data_dir, args.recipe, args.recipe_overrides, args.rows, args.columns)
    rows_of = {}  # the rows resolving to each recipe: one group when the preset holds for every task
    for row, hp in resolved_recipes(runs).items():
        rows_of.setdefault(json.dumps(hp, sort_keys=True), []).append(row)
    for hp, rows in rows_of.items():
        print(f"the hyperparameters of {', '.join(rows)}: {hp}")
    runs_dir = args.runs_dir or "runs/tag-recipe"
    output = f" --output {shlex.quote(args.record)}" if args.record not in (None, "none") else ""
    return runs, runs_dir, collect_command("--recipe", runs_dir, "runs/tag-recipe") + output + " --markdown"


def recorded_runs(args: RunTaggingTableArguments) -> list:
    """The run records of the collected recipe table (--record) that the runner counts as done; none without
    --recipe, with --record none, or before the first collection."""
    if args.recipe is None:
        if args.record is not None:
            raise ValueError("--record goes with --recipe")
        return []
    if args.record == "none":
        return []
    path = Path(args.record or REPO / "benchmarks" / "results" / "tagging_cvt.json")
    return records_of(read_report(path, RECIPE_KEYS, "recipe table (tagging_cvt.json)"))


def main(argv=None):
    args, pool = parse_options((RunTaggingTableArguments, PoolArguments), argv, description=__doc__)
    try:
        runs, runs_dir, collect = plan(args)
        recorded = recorded_runs(args)
    except ValueError as err:  # a bad recipe, override, row or column: one line, exit 2
        fail(err)
    outcome = run_table(runs, runs_dir, args.data_dir, pool.parallel, pool.threads, pool.deadline_minutes,
                        pool.dry_run, recorded=recorded)
    report(outcome, collect)


if __name__ == "__main__":
    main()
