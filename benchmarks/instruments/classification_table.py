"""The CoVe-T comparison's BCN runs (classification.json's section `cove_t_comparison`), planned and run N at a time
(`run_pool`). Command line: `benchmarks/run_classification_table.py`.

The comparison: vectors, vectors + CoVe-S and vectors + CoVe-T paired by seed, on TREC-6 (10 seeds), SNLI (5) and
SST-2 (3), TREC-50 (3) when asked; on TREC-6 also CoVe-T alone beside CoVe-S alone (3 seeds) and the 5-epoch CoVe-S
(`vectors+cove-s-5-epochs`, 10 seeds), the control for training length. Each cell (task, column, seed) is one
`cove-train-classifier` command writing `<runs>/<task>/<column>-seed<N>/` (<runs>: runs/bcn-cove-t, the family
`results.COVE_T_FOLDER` the collector reads, each run's column from its folder: `results.ENCODER_COLUMNS`); the epochs
are the task yaml's (TREC-6 and TREC-50 15, SNLI 8, SST-2 2: those of the table's runs).

A family of its own: the checkpoints the table's runs read (CoVe-S in runs/cove-small/encoder, the 5-epoch CoVe-S)
are gone. CoVe-S is pretrained again for it with CoVe-T's test-sentence exclusion (Multi30k's training captions
that are SNLI test premises go from both), into folders of its own (the table's record of its CoVe-S,
runs/cove-small, stays the table's). The two then differ in their corpora and in how long they train (CoVe-S its
table run's 3 epochs, CoVe-T up to 8 of its mixture: configuration/models/cove-t.json); the 5-epoch CoVe-S is the
control for the length. Every column reads one vocabulary, runs/vocab-all's, the encoders pretrained over it
(`check_one_vocabulary`):

    cove-train-mt --preset cove-small --data-dir DATA --init-from runs/vocab-all --output-dir runs/cove-s-dedup \\
        --num-threads 2 --max-epochs 3 --start-decay-at 5 --optimizer adam --lr 0.001 --min-lr 0.00003 \\
        --exclude-test-sentences trec6 trec50 sst2 sst5 snli multi30k conll2000 ewt_upos wnut17
    cove-train-mt ... --output-dir runs/cove-s-dedup-5ep --max-epochs 5 --start-decay-at 4   # the same flags else

The 5-epoch CoVe-S is the table's variant's schedule (its 5th epoch at half the lr) as one run, not a resume of the
3-epoch one (a resume keeps the first run's schedule): CPU pretraining is deterministic, so its first 3 epochs are
runs/cove-s-dedup's.

No run of the table joins a cell or a pair here. Every cell of the plan is run, on one kind of machine, over the
same checkpoints (one per role: DEFAULT_ENCODERS, each with weights of its own: `check_distinct_encoders`), but
- those whose folder holds a finished run of the cell (not a smoke run, not on random subsets, same task, input, seed,
  the hyperparameters the task yaml gives now, the encoder folder, and the weights' sha256 that checkpoint has now):
  done;
- those whose encoder checkpoint is missing: skipped and named.
A run stopped (the deadline, a machine gone) continues from its last checkpoint next time (`can_resume`:
cove-train-classifier --resume), or starts afresh when its settings are no longer the plan's.

Seeds go first: every cell gets seed 1 before any gets seed 2, so a plan cut short by its deadline has its columns
evenly filled.
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from modeling_cove.training.commands.train_classifier import (HYPERPARAMETER_DEFAULTS, NOT_HYPERPARAMETERS,
                                                             ClassifierOptions, ResumeError, load_hyperparameters,
                                                             resume_checkpoint, run_hyperparameters, run_settings)
from modeling_cove.training.common.cli import parse_options
from modeling_cove.training.common.presets import PresetError
from modeling_cove.training.loops.accelerate_loop import RUN_SETTINGS_FILE, same_with_defaults
from modeling_cove.training.publishing.cards_record import CheckpointError

from .results import COVE_T_SECTION, ENCODER_COLUMNS, TABLE_COLUMNS, checkpoint_weights, smoke_run
from .run_pool import read_json

COMPARED = ("vectors", "vectors+cove", "vectors+cove-t")
PLAN = {  # task -> column -> seeds
    "trec6": {**{column: 10 for column in (*COMPARED, "vectors+cove-s-5-epochs")}, "cove": 3, "cove-t": 3},
    "snli": {column: 5 for column in COMPARED},
    "sst2": {column: 3 for column in COMPARED},
}
OPTIONAL = {"trec50": {column: 3 for column in COMPARED}}  # if time allows
COLUMN_ENCODERS = {"vectors": "vocab", "vectors+cove": "cove_s", "cove": "cove_s", "vectors+cove-t": "cove_t",
                   "cove-t": "cove_t", "vectors+cove-s-5-epochs": "cove_s_5_epochs"}  # column -> its encoder
DEFAULT_ENCODERS = {"vocab": "runs/vocab-all", "cove_s": "runs/cove-s-dedup/encoder", "cove_t": "runs/cove-t/encoder",
                    "cove_s_5_epochs": "runs/cove-s-dedup-5ep/encoder"}  # CoVe-S's 5-epoch run


def bcn_input(column: str) -> str:
    """The --bcn-input of a table column (ENCODER_COLUMNS, TABLE_COLUMNS; else the column's own name)."""
    inputs = {**{column: bcn for (bcn, _), column in TABLE_COLUMNS.items()}, **ENCODER_COLUMNS}
    return inputs.get(column, column)


@dataclass(frozen=True)
class BcnRun:
    """One cell of the plan: a BCN run of `column` on `task` with `seed`, reading `encoder`."""

    task: str
    column: str
    seed: int
    encoder: str

    @property
    def folder(self) -> str:
        return f"{self.task}/{self.column}-seed{self.seed}"

    def command(self, data_dir: str, runs_dir: Path | str, threads: int, resume: bool = False) -> list:
        """The cove-train-classifier command of the cell: continuing its stopped run (`resume`) or afresh."""
        return [sys.executable, "-m", "modeling_cove.training.commands.train_classifier",
                *self.arguments(data_dir, runs_dir, threads, resume)]

    def arguments(self, data_dir: str, runs_dir: Path | str, threads: int, resume: bool = False) -> list:
        """The flags of its command."""
        return ["--task", self.task, "--encoder", self.encoder, "--bcn-input", bcn_input(self.column), "--seed",
                str(self.seed), "--data-dir", str(data_dir), "--threads", str(threads), "--output-dir",
                str(Path(runs_dir) / self.folder), "--resume" if resume else "--overwrite", "--no-save-model"]

    def settings(self) -> dict:
        """What the run's metrics.json records of this cell (train_classifier: task, column = --bcn-input, seed,
        encoder)."""
        return {"task": self.task, "column": bcn_input(self.column), "seed": self.seed, "encoder": self.encoder}


def table_runs(encoders: dict | None = None, tasks=None, columns=None, trec50: bool = False) -> list:
    """Every cell of the plan (PLAN, with OPTIONAL's when `trec50`), seed-major, restricted to `tasks` / `columns`
    when given. `encoders`: role -> checkpoint folder, over DEFAULT_ENCODERS (roles: COLUMN_ENCODERS' values)."""
    plan = {**PLAN, **(OPTIONAL if trec50 else {})}
    encoders = {**DEFAULT_ENCODERS, **(encoders or {})}
    unknown = sorted(set(tasks or ()) - set(plan)) + sorted(set(columns or ()) - set(COLUMN_ENCODERS)) + sorted(
        set(encoders) - set(DEFAULT_ENCODERS))
    if unknown:
        raise ValueError(f"unknown tasks/columns/encoders {unknown}: tasks are {list(plan)}, columns "
                         f"{list(COLUMN_ENCODERS)}, encoders {list(DEFAULT_ENCODERS)}")
    runs = []
    for seed in range(1, max(n for cells in plan.values() for n in cells.values()) + 1):
        for task, cells in plan.items():
            for column, seeds in cells.items():
                if seed <= seeds and (not tasks or task in tasks) and (not columns or column in columns):
                    runs.append(BcnRun(task, column, seed, encoders[COLUMN_ENCODERS[column]]))
    return runs


def check_distinct_encoders(encoders: dict) -> None:
    """A ValueError when two roles' checkpoints (role -> folder, those there) hold the same weights (sha256): a
    5-epoch copy not trained on since it was copied, say, would pass for the control of training length."""
    seen = {}
    for role, folder in encoders.items():
        weights = checkpoint_weights(Path(folder).resolve())
        if weights is not None and seen.setdefault(weights, role) != role:
            raise ValueError(f"{folder} ({role}) holds the same weights as {encoders[seen[weights]]} "
                             f"({seen[weights]}): each role needs its own checkpoint")


def check_one_vocabulary(encoders: dict) -> None:
    """A ValueError when two roles' checkpoints (role -> folder, those there) hold different vocabularies (their
    config's `vocabulary_fingerprint`): a comparison's columns must differ in the encoder alone, so the word vectors
    of the vectors-only column and the encoders' must be one checkpoint's (the encoders pretrained --init-from it)."""
    first = {}  # fingerprint -> the first role holding it
    for role, folder in encoders.items():
        fingerprint = (read_json(Path(folder) / "config.json") or {}).get("vocabulary_fingerprint")
        if fingerprint is not None:
            first.setdefault(fingerprint, role)
    if len(first) > 1:
        held = "; ".join(f"{encoders[role]} ({role}): {fingerprint}" for fingerprint, role in first.items())
        raise ValueError(f"the columns read different vocabularies ({held}): pretrain the encoders --init-from the "
                         "word-vector checkpoint the vectors-only column reads, or give that one")


def run_finished(runs_dir: Path | str, run: BcnRun) -> bool:
    """Whether `run`'s folder holds its finished run: a metrics.json with test figures (train_classifier writes it
    once the run is done) of a full run (not a smoke run, not on random subsets) with the cell's input, task, seed,
    the hyperparameters its task yaml gives now (an edited yaml makes the run stale, as its resume would be refused)
    and encoder folder, and, where that checkpoint is there, the sha256 of its weights now (a checkpoint pretrained
    again since makes the run stale)."""
    metrics = read_json(Path(runs_dir) / run.folder / "metrics.json")
    if not metrics or "test" not in metrics or smoke_run(metrics) or metrics.get("subsample"):
        return False
    planned = run.settings()
    if any(metrics.get(key) != planned[key] for key in ("task", "column", "seed")):
        return False
    hyperparameters = {k: v for k, v in load_hyperparameters(run.task).items() if k not in NOT_HYPERPARAMETERS}
    if not same_with_defaults(metrics.get("hyperparameters") or {}, hyperparameters, HYPERPARAMETER_DEFAULTS):
        return False
    if metrics.get("encoder") is None or Path(metrics["encoder"]).resolve() != Path(run.encoder).resolve():
        return False
    weights = checkpoint_weights(Path(run.encoder).resolve())
    return weights is None or metrics.get("encoder_weights") == weights


def can_resume(runs_dir: Path | str, run: BcnRun, data_dir: str) -> bool:
    """Whether an unfinished `run` (planned over `data_dir`) continues from where it stopped: cove-train-classifier's
    own check (`resume_checkpoint`) takes its command with --resume, on one process on this machine's kind of device
    (the settings its folder's run_settings.json recorded, the hyperparameters the task yaml gives now, the encoder's
    weights as that checkpoint has them now); else it starts afresh, as it does when its folder holds a metrics.json
    that `run_finished` did not take (cut short, or a run of other settings: cove-train-classifier refuses to resume
    a folder holding one)."""
    folder = Path(runs_dir) / run.folder
    if not (folder / RUN_SETTINGS_FILE).is_file() or (folder / "metrics.json").exists():
        return False  # never started, or a run ended there
    options = parse_options(ClassifierOptions, run.arguments(data_dir, runs_dir, 1, resume=True))
    try:
        planned = run_settings(options, run_hyperparameters(options), world_size=1,
                               device="cuda" if torch.cuda.is_available() else "cpu")
        resume_checkpoint(options, Path(options.output_dir), planned)
    except (CheckpointError, ResumeError, PresetError, OSError):  # the run started afresh names the problem
        return False
    return True


# The runs of the table (classification.json's results) that ran on the H200 record no machine; the code commits the
# H200 sessions ran tell them (no CPU run ran these: seeds 4-10 of vectors, vectors+cove and TREC-6 random, TREC-50
# seeds 1-3, the cove-s-h200 IMDb runs). The CPU-hours estimate leaves them out.
H200_RUN_COMMITS = ("e63d667ddaae229de8136628aef1d8b7120319a3", "dccbe58013914003c972e10bc75f7252220a41d7",
                    "0c64d53a0ca94634d67691d720bfd62d5ace4647")


def cpu_record(record: dict) -> bool:
    """Whether a run record of classification.json ran on a CPU: by the machine it names (`results.machine_label`
    adds " + <GPU>" for a GPU), else by its code commit (H200_RUN_COMMITS)."""
    if record.get("machine"):
        return " + " not in record["machine"]
    commit = record.get("commit")
    sha = commit.get("commit") if isinstance(commit, dict) else commit
    return not (isinstance(sha, str) and sha[:40] in H200_RUN_COMMITS)


def cpu_hours(runs: list, report: dict) -> tuple[float, list]:
    """About how many CPU-hours `runs` take, at most (each to its yaml's last epoch; early stopping ends most
    sooner): per run the mean seconds per epoch of classification.json's CPU runs (`report`: its table, its encoder
    variants and the comparison's own section) of the same task and --bcn-input, times the yaml's epochs. Returns
    (hours, the runs with no such CPU run)."""
    tables = ([report.get("results", {}), report.get(COVE_T_SECTION, {}).get("results", {})]
              + [variant.get("results", {}) for variant in report.get("encoder_variants", {}).values()])
    seconds = {}
    for table in tables:
        for task, columns in table.items():
            for column, cell in columns.items():
                seconds.setdefault((task, bcn_input(column)), []).extend(
                    r["seconds_per_epoch_mean"] for r in cell["runs"]
                    if cpu_record(r) and r.get("seconds_per_epoch_mean"))
    total, unknown = 0.0, []
    for run in runs:
        found = seconds.get((run.task, bcn_input(run.column)))
        if found:
            total += statistics.mean(found) * load_hyperparameters(run.task)["epochs"]
        else:
            unknown.append(run.folder)
    return total / 3600, unknown
