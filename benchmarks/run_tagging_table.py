#!/usr/bin/env python
"""Run the tagging table's runs (`benchmarks/results/tagging.json`) that have not finished yet, N at a time, then
collect them with benchmarks/collect_tagging.py. Rows, columns and seeds: `instruments.tagging_table`.

    python benchmarks/run_tagging_table.py --data-dir DATA --dry-run              # the commands still to run
    python benchmarks/run_tagging_table.py --data-dir DATA --parallel 2 --deadline-minutes 120     # 2 CPU cores
    python benchmarks/run_tagging_table.py --data-dir DATA --parallel 14 --rows conll2000 wnut17   # one GPU, 16 cores

Before: the word vectors (cove-build-vocab ... --output-dir runs/vocab-tagging, docs/tagging.md) and, for the
contextual columns, CoVe-S (cove-train-mt) and the biLM (cove-train-bilm); runs whose encoder is missing are skipped.
DATA: a local data folder laid out as docs/data.md describes. Each run writes runs/tag/<row>/<column>-seed<N>/ and its
log beside it; a finished run is never run again, one cut short by the deadline starts afresh next time.
"""

import sys
from dataclasses import dataclass
from typing import Optional

from instruments.tagging_table import COLUMN_FLAGS, ROW_COLUMNS, run_table, table_runs
from modeling_cove.training.common.cli import REQUIRED, option, parse_options


@dataclass
class RunTaggingTableArguments:
    """The flags of run_tagging_table.py."""

    data_dir: str = option("a local data folder (docs/data.md)", REQUIRED)
    runs_dir: str = option("where the runs go", "runs/tag")
    vocab: str = option("the word-vector checkpoint of the vectors-only columns", "runs/vocab-tagging")
    cove_encoder: str = option("the CoVe-S encoder of the vectors+cove column", "runs/cove-small/encoder")
    bilm_encoder: str = option("the biLM encoder of the vectors+bilm column", "runs/bilm/encoder")
    rows: Optional[list[str]] = option("only these rows", choices=list(ROW_COLUMNS))
    columns: Optional[list[str]] = option("only these columns", choices=list(COLUMN_FLAGS))
    parallel: int = option("runs at a time", 2)
    threads: int = option("torch intra-op threads per run", 1)
    deadline_minutes: Optional[float] = option("stop the runs still going after this many minutes")
    dry_run: bool = option("print the commands still to run, run nothing", False)


def main(argv=None):
    args = parse_options(RunTaggingTableArguments, argv, description=__doc__)
    runs = table_runs(args.vocab, args.cove_encoder, args.bilm_encoder, args.rows, args.columns)
    outcome = run_table(runs, args.runs_dir, args.data_dir, args.parallel, args.threads, args.deadline_minutes,
                        args.dry_run)
    print({key: len(folders) for key, folders in outcome.items()})
    print("then: python benchmarks/collect_tagging.py --merge --markdown")
    if outcome["failed"]:
        print("failed (see <folder>.log):", " ".join(outcome["failed"]))
        sys.exit(1)


if __name__ == "__main__":
    main()
