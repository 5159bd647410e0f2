"""The runs of the tagging table (`benchmarks/results/tagging.json`), planned and run N at a time.

`table_runs` lists every run the table asks for: per row (a task, the small-data row, the multi-task row) its columns
and seeds (`SEEDS`), each as a `cove-train-tagger` command line writing `<runs>/<row>/<column>-seed<N>/`, the folders
`tagging.read_runs` collects. `run_table` runs those not finished yet (a finished run's metrics.json has its results),
`parallel` at a time, each on `threads` intra-op threads, until they are done or a deadline passes; a run cut short
by the deadline is started afresh next time (`--overwrite`). Runs whose encoder checkpoint is missing (CoVe-S from
`cove-train-mt`, the biLM from `cove-train-bilm`) are skipped and named. Command line: `scripts/run_tagging_table.py`.

Seeds go first: every cell gets seed 1 before any gets seed 2, so a table cut short by its deadline has its columns
evenly filled.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .tagging import MULTITASK, SMALL_DATA, TASKS

SEEDS = {"conll2000": 5, "wnut17": 5, "ewt_upos": 3, SMALL_DATA: 3, MULTITASK: 3}  # the fewest seeds each row needs
ROW_COLUMNS = {
    **{task: ("supervised", "vectors+cove", "vectors+bilm", "cvt") for task in TASKS},
    "wnut17": ("supervised", "vectors+cove", "vectors+bilm", "cvt", "supervised+case"),  # casing matters for NER
    SMALL_DATA: ("supervised", "cvt"),
    MULTITASK: ("cvt",),
}
ROW_FLAGS = {
    **{task: ("--task", task) for task in TASKS},
    # 10% of CoNLL-2000 labelled (13 steps an epoch: 40 epochs, early stopping as ever), the other 90% unlabelled
    SMALL_DATA: ("--task", "conll2000", "--train-fraction", "0.1", "--epochs", "40"),
    MULTITASK: ("--task", "conll2000", "ewt_upos"),
}
COLUMN_FLAGS = {
    "supervised": (),
    "cvt": ("--cvt",),
    "supervised+case": ("--case-dim", "16"),
    "vectors+cove": ("--input", "vectors+cove"),
    "vectors+bilm": ("--input", "vectors+scalar_mix"),  # ELMo's [x; mix] over the frozen biLM
}


@dataclass(frozen=True)
class TableRun:
    """One run of the table: where it goes and the cove-train-tagger flags that make it (besides the data folder,
    the output folder and the threads, which `command` adds)."""

    row: str
    column: str
    seed: int
    encoder: str
    flags: tuple

    @property
    def folder(self) -> str:
        return f"{self.row}/{self.column}-seed{self.seed}"

    def command(self, data_dir: str, runs_dir: Path | str, threads: int) -> list:
        return [sys.executable, "-m", "modeling_cove.training.tagger", "--data-dir", str(data_dir),
                "--encoder", self.encoder, "--seed", str(self.seed), "--output-dir", str(Path(runs_dir) / self.folder),
                "--overwrite", "--threads", str(threads), "--no-save-model", *self.flags]


def table_runs(vocab: str, cove_encoder: str, bilm_encoder: str, rows=None, columns=None) -> list:
    """Every run of the table, seed-major (all cells' seed 1, then seed 2, ...), restricted to `rows` / `columns`
    when given. `vocab`: the word-vector checkpoint of the vectors-only columns (cove-build-vocab's output);
    `cove_encoder`, `bilm_encoder`: the encoders of the contextual columns."""
    encoders = {"supervised": vocab, "cvt": vocab, "supervised+case": vocab, "vectors+cove": cove_encoder,
                "vectors+bilm": bilm_encoder}
    unknown = sorted(set(rows or ()) - set(ROW_COLUMNS)) + sorted(set(columns or ()) - set(COLUMN_FLAGS))
    if unknown:
        raise ValueError(f"unknown rows/columns {unknown}: rows are {list(ROW_COLUMNS)}, columns {list(COLUMN_FLAGS)}")
    runs = []
    for seed in range(1, max(SEEDS.values()) + 1):
        for row, row_columns in ROW_COLUMNS.items():
            if seed > SEEDS[row] or (rows and row not in rows):
                continue
            for column in row_columns:
                if columns and column not in columns:
                    continue
                flags = ROW_FLAGS[row] + COLUMN_FLAGS[column]
                if row == SMALL_DATA and column == "cvt":
                    flags += ("--unlabeled", "train-rest")  # the unlabelled text: the other 90% of train
                runs.append(TableRun(row, column, seed, encoders[column], flags))
    return runs


def run_finished(runs_dir: Path | str, run: TableRun) -> bool:
    """Whether `run` has finished: its metrics.json holds results (a run in progress writes one without them)."""
    path = Path(runs_dir) / run.folder / "metrics.json"
    if not path.is_file():
        return False
    try:
        return "results" in json.loads(path.read_text())
    except json.JSONDecodeError:  # being written right now, or cut off
        return False


def run_table(runs: list, runs_dir: Path | str, data_dir: str, parallel: int = 2, threads: int = 1,
              deadline_minutes: float | None = None, dry_run: bool = False, log=print) -> dict:
    """Run the unfinished `runs`, `parallel` at a time (each `cove-train-tagger` process on `threads` threads, its
    output in `<runs_dir>/<folder>.log`), until all are done or `deadline_minutes` pass (then the running ones are
    stopped). Returns {"finished": [...], "failed": [...], "skipped": [...], "stopped": [...], "not_started": [...]}
    of folders; `dry_run` only logs the commands."""
    if parallel < 1 or threads < 1:
        raise ValueError(f"parallel and threads must be at least 1, got {parallel} and {threads}")
    outcome = {key: [] for key in ("finished", "failed", "skipped", "stopped", "not_started", "done_before")}
    queue = []
    for run in runs:
        if run_finished(runs_dir, run):
            outcome["done_before"].append(run.folder)
        elif not (Path(run.encoder) / "config.json").is_file():
            outcome["skipped"].append(run.folder)
            log(f"skip {run.folder}: no encoder checkpoint at {run.encoder}")
        else:
            queue.append(run)
    if dry_run:
        for run in queue:
            log(" ".join(run.command(data_dir, runs_dir, threads)))
        outcome["not_started"] = [run.folder for run in queue]
        return outcome
    deadline = None if deadline_minutes is None else time.monotonic() + 60 * deadline_minutes
    running = {}  # folder -> (process, log file)
    while queue or running:
        out_of_time = deadline is not None and time.monotonic() > deadline
        while queue and len(running) < parallel and not out_of_time:
            run = queue.pop(0)
            folder = Path(runs_dir) / run.folder
            folder.parent.mkdir(parents=True, exist_ok=True)
            log_file = open(f"{folder}.log", "w")
            running[run.folder] = (subprocess.Popen(run.command(data_dir, runs_dir, threads), stdout=log_file,
                                                    stderr=subprocess.STDOUT), log_file)
            log(f"start {run.folder}")
        if out_of_time:
            for name, (process, log_file) in running.items():
                process.terminate()
                process.wait()
                log_file.close()
                outcome["stopped"].append(name)
                log(f"stopped {name} at the deadline")
            outcome["not_started"] = [run.folder for run in queue]
            break
        for name, (process, log_file) in list(running.items()):
            if process.poll() is not None:
                log_file.close()
                del running[name]
                ok = process.returncode == 0 and run_finished(runs_dir, next(r for r in runs if r.folder == name))
                outcome["finished" if ok else "failed"].append(name)
                log(f"{'end' if ok else 'FAILED'} {name} (exit {process.returncode})")
        time.sleep(1)
    return outcome
