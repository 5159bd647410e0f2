#!/usr/bin/env python
"""Run the CoVe-T comparison's BCN runs (classification.json's section `cove_t_comparison`) not finished yet, N at a
time, then collect them with benchmarks/collect_results.py --merge. Tasks, columns, seeds, encoders and when a run
counts as finished: `instruments.classification_table`.

    python benchmarks/run_classification_table.py --data-dir DATA --dry-run        # the commands, the CPU-hours
    python benchmarks/run_classification_table.py --data-dir DATA --parallel 2 --deadline-minutes 600   # 2 cores
    python benchmarks/run_classification_table.py --data-dir DATA --tasks trec6 --columns cove-t   # one cell's seeds

Run it from the repository root (the encoder folders are recorded as given). Before: the checkpoints of its four
roles, made afresh for it: the word vectors (runs/vocab-all), CoVe-S with CoVe-T's test-sentence exclusion
(runs/cove-s-dedup) and its 5-epoch counterpart (runs/cove-s-dedup-5ep, a run of its own whose first 3 epochs are
runs/cove-s-dedup's; their commands:
`instruments.classification_table`), CoVe-T (cove-train-mt --preset cove-t ... --output-dir runs/cove-t); runs whose
encoder is missing are skipped, and two roles over the same weights stop the command. DATA: a local data folder laid
out as docs/data.md describes. Each run writes runs/bcn-cove-t/<task>/<column>-seed<N>/ and its log beside it; a
finished run over the same checkpoint is not run again; one stopped by the deadline (or a machine gone) resumes from
its last checkpoint next time.
"""

import functools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.classification_table import (COLUMN_ENCODERS, DEFAULT_ENCODERS, OPTIONAL, PLAN, can_resume,
                                              check_distinct_encoders, check_one_vocabulary, cpu_hours, run_finished,
                                              table_runs)
from instruments.results import COVE_T_FOLDER
from instruments.run_pool import PoolArguments, folder_flag, report, run_pool
from modeling_cove.training.common.cli import REQUIRED, fail, option, parse_options

REPO = Path(__file__).resolve().parents[1]


@dataclass
class RunClassificationTableArguments:
    """The flags of run_classification_table.py."""

    data_dir: str = option("a local data folder (docs/data.md)", REQUIRED)
    runs_dir: str = option(f"where the runs go, a folder named {COVE_T_FOLDER} (collect_results.py reads "
                           f"<its --runs>/{COVE_T_FOLDER})", f"runs/{COVE_T_FOLDER}")
    table: str = option("the classification.json whose CPU runs estimate the CPU-hours (--dry-run)",
                        str(REPO / "benchmarks" / "results" / "classification.json"))
    vocab: str = option("the word-vector checkpoint of the vectors column", DEFAULT_ENCODERS["vocab"])
    cove_s: str = option("CoVe-S, the encoder of vectors+cove and cove", DEFAULT_ENCODERS["cove_s"])
    cove_t: str = option("CoVe-T, the encoder of vectors+cove-t and cove-t", DEFAULT_ENCODERS["cove_t"])
    cove_s_5_epochs: str = option("the 5-epoch CoVe-S of vectors+cove-s-5-epochs", DEFAULT_ENCODERS["cove_s_5_epochs"])
    trec50: bool = option(f"also TREC-50 ({', '.join(OPTIONAL['trec50'])}, 3 seeds each; --tasks trec50 "
                          "implies it)", False)
    tasks: Optional[list[str]] = option("only these tasks", choices=[*PLAN, *OPTIONAL])
    columns: Optional[list[str]] = option("only these columns", choices=list(COLUMN_ENCODERS))


def main(argv=None):
    args, pool = parse_options((RunClassificationTableArguments, PoolArguments), argv, description=__doc__)
    runs_dir = Path(args.runs_dir)
    if runs_dir.name != COVE_T_FOLDER:
        fail(f"--runs-dir {args.runs_dir}: the comparison's runs go to a folder named {COVE_T_FOLDER}, the one "
             "collect_results.py reads")
    encoders = {role: getattr(args, role) for role in DEFAULT_ENCODERS}
    used = {COLUMN_ENCODERS[column] for column in args.columns or COLUMN_ENCODERS}
    try:
        check_distinct_encoders({role: folder for role, folder in encoders.items() if role in used})
        check_one_vocabulary(encoders)  # every column, the pairs' vectors column too
    except ValueError as err:
        fail(str(err))
    runs = table_runs(encoders, args.tasks, args.columns, args.trec50 or "trec50" in (args.tasks or ()))
    table = read_table(args.table) if pool.dry_run else {}
    resumable = functools.partial(can_resume, data_dir=args.data_dir)
    outcome = run_pool(runs, runs_dir, args.data_dir, run_finished, resumable, parallel=pool.parallel,
                       threads=pool.threads, deadline_minutes=pool.deadline_minutes, dry_run=pool.dry_run)
    if pool.dry_run:  # and the CPU-hours of what is left
        left = [run for run in runs if run.folder in outcome["not_started"] + outcome["skipped"]]
        hours, unknown = cpu_hours(left, table)
        print(f"about {hours:.1f} CPU-hours at most for the {len(left) - len(unknown)} runs left with a CPU record of "
              f"their task and input" + (f"; no CPU record for {' '.join(unknown)}" if unknown else ""))
    report(outcome, shlex.join(["python", "benchmarks/collect_results.py", "--merge",
                                *folder_flag("--runs", runs_dir.parent, "runs")]))


def read_table(path: str) -> dict:
    """The classification.json at `path` whose CPU runs estimate the CPU-hours, {} where there is none; a file that
    is not a JSON object ends the command in one line naming it (exit 2)."""
    if not Path(path).is_file():
        return {}
    try:
        table = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        fail(f"--table {path} is not valid JSON ({err})")
    if not isinstance(table, dict):
        fail(f"--table {path} is not a classification.json: a JSON {type(table).__name__}, not an object")
    return table


if __name__ == "__main__":
    main()
