#!/usr/bin/env python
"""Run the BCN runs of the CoVe-T comparison (`benchmarks/results/classification.json`) still needed, N at a time,
then collect them with benchmarks/collect_results.py --merge. Tasks, columns, seeds and which cells run:
`instruments.classification_table` (a cell the table holds from a CPU run is not run again; one that ran on the
H200 is).

    python benchmarks/run_classification_table.py --data-dir DATA --dry-run        # the commands, the CPU-hours
    python benchmarks/run_classification_table.py --data-dir DATA --parallel 2 --deadline-minutes 600   # 2 cores
    python benchmarks/run_classification_table.py --data-dir DATA --tasks trec6 --columns cove-t   # one cell's seeds

Run it from the repository root: the encoders are named as the table's runs name them (runs/vocab-all,
runs/cove-small/encoder), and a table cell never mixes encoder folders. Before: those checkpoints, CoVe-T
(cove-train-mt --preset cove-t ... --output-dir runs/cove-t) and the 5-epoch CoVe-S (runs/cove-small-5ep); runs whose
encoder is missing are skipped. DATA: a local data folder laid out as docs/data.md describes. Each run writes
runs/bcn/<task>/<column>-seed<N>/ and its log beside it; cove-train-classifier cannot resume, so a run stopped by the
deadline starts afresh next time.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.classification_table import (COLUMN_ENCODERS, DEFAULT_ENCODERS, OPTIONAL, PLAN, cpu_hours,
                                              run_finished, split_by_table, table_runs)
from instruments.run_pool import PoolArguments, report, run_pool
from modeling_cove.training.common.cli import REQUIRED, option, parse_options

REPO = Path(__file__).resolve().parents[1]


@dataclass
class RunClassificationTableArguments:
    """The flags of run_classification_table.py."""

    data_dir: str = option("a local data folder (docs/data.md)", REQUIRED)
    runs_dir: str = option("where the runs go (what collect_results.py reads)", "runs/bcn")
    table: str = option("the classification.json whose CPU runs are not run again",
                        str(REPO / "benchmarks" / "results" / "classification.json"))
    vocab: str = option("the word-vector checkpoint of the vectors column", DEFAULT_ENCODERS["vocab"])
    cove_s: str = option("CoVe-S, the encoder of vectors+cove and cove", DEFAULT_ENCODERS["cove_s"])
    cove_t: str = option("CoVe-T, the encoder of vectors+cove-t and cove-t", DEFAULT_ENCODERS["cove_t"])
    cove_s_5_epochs: str = option("the 5-epoch CoVe-S of vectors+cove-s-5-epochs", DEFAULT_ENCODERS["cove_s_5_epochs"])
    trec50: bool = option(f"also TREC-50 ({', '.join(OPTIONAL['trec50'])}, 3 seeds each)", False)
    tasks: Optional[list[str]] = option("only these tasks", choices=[*PLAN, *OPTIONAL])
    columns: Optional[list[str]] = option("only these columns", choices=list(COLUMN_ENCODERS))


def main(argv=None):
    args, pool = parse_options((RunClassificationTableArguments, PoolArguments), argv, description=__doc__)
    table = json.loads(Path(args.table).read_text()) if Path(args.table).is_file() else {}
    encoders = {role: getattr(args, role) for role in DEFAULT_ENCODERS}
    needed, in_table = split_by_table(table_runs(encoders, args.tasks, args.columns, args.trec50), table)
    outcome = run_pool(needed, args.runs_dir, args.data_dir, run_finished, parallel=pool.parallel,
                       threads=pool.threads, deadline_minutes=pool.deadline_minutes, dry_run=pool.dry_run)
    outcome["in_table"] = in_table
    if pool.dry_run:  # and the CPU-hours of what is left
        left = [run for run in needed if run.folder in outcome["not_started"] + outcome["skipped"]]
        hours, unknown = cpu_hours(left, table)
        print(f"about {hours:.1f} CPU-hours at most for the {len(left) - len(unknown)} runs left with a CPU record of "
              f"their task and input" + (f"; no CPU record for {' '.join(unknown)}" if unknown else ""))
    report(outcome, "python benchmarks/collect_results.py --merge")


if __name__ == "__main__":
    main()
