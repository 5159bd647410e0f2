"""The runs of the tagging table (`benchmarks/results/tagging.json`), planned and run N at a time.

`table_runs` lists every run the table asks for: per row (a task, the small-data row, the multi-task row) its columns
and seeds (`SEEDS`), each as a `cove-train-tagger` command line writing `<runs>/<row>/<column>-seed<N>/`, the folders
`tagging.read_runs` collects. `run_table` runs those not finished yet (a finished run's metrics.json has its results)
with `run_pool`, `parallel` at a time, each on `threads` intra-op threads, until they are done or a deadline passes. A
run counts as finished when its metrics.json holds results of the settings planned (not a smoke run, not other flags;
not the data folder: the unlabelled files inside it compare by their path there, `same_settings`); a run cut short
resumes from its last checkpoint next time (`--resume` where its run_settings.json matches the plan, else
`--overwrite`). A run the table's JSON already records with the planned settings counts as finished too
(`run_recorded`): a machine that ran it is gone with its runs folder, the record stays. Runs whose encoder checkpoint
is missing (CoVe-S from `cove-train-mt`, the biLM from `cove-train-bilm`) are skipped and named. Command line:
`benchmarks/run_tagging_table.py`.

`cove_t_runs` plans the table's CoVe-T comparison beside it: CoNLL-2000, supervised, vectors+cove over CoVe-S and
vectors+cove-t over CoVe-T (both pretrained again for it), seeds 1-5, into their own folder (runs/tag-cove-t), which
`tagging.collect_cove_t` collects into tagging.json's section cove_t_comparison; `run_table` runs it alike.

Seeds go first: every cell gets seed 1 before any gets seed 2, so a table cut short by its deadline has its columns
evenly filled.
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from pathlib import Path

from modeling_cove.training.data.texts import is_text_file

from .results import checkpoint_weights
from .run_pool import read_json, run_pool
from .tagging import MULTITASK, SMALL_DATA, TASKS, smoke_reason

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

    def command(self, data_dir: str, runs_dir: Path | str, threads: int, resume: bool = False) -> list:
        return [sys.executable, "-m", "modeling_cove.training.commands.train_tagger", "--data-dir", str(data_dir),
                *self.arguments(runs_dir, threads, resume)]

    def arguments(self, runs_dir: Path | str, threads: int, resume: bool = False) -> list:
        """cove-train-tagger's flags of this run but `--data-dir`."""
        return ["--encoder", self.encoder, "--seed", str(self.seed), "--output-dir", str(Path(runs_dir) / self.folder),
                "--resume" if resume else "--overwrite", "--threads", str(threads), "--no-save-model", *self.flags]

    def parsed(self):
        """The `TaggerSettings` cove-train-tagger makes of this run's command line, less the data folder (no setting
        of the cell, `settings`; the flag would be checked to be a folder that exists here)."""
        from modeling_cove.training.common.cli import RunArguments, parse_options
        from modeling_cove.training.commands.train_tagger import TaggerSettings

        settings, _ = parse_options((TaggerSettings, RunArguments), self.arguments("runs", 1))
        return settings

    def settings(self) -> dict:
        """The settings the run will record (metrics.json's "settings"), those that make it this cell's run:
        cove-train-tagger's resume keys but the data folder (a copy of the data elsewhere is the same data)."""
        return {key: value for key, value in self.parsed().resume_settings().items() if key != "data_dir"}

    def hyperparameters(self) -> dict:
        """The hyperparameters the run will train with (metrics.json's "hyperparameters"), resolved as
        cove-train-tagger resolves them: defaults < the preset < --hyperparameters < the command line's overrides."""
        from modeling_cove.training.commands.train_tagger import load_hyperparameters

        return load_hyperparameters(self.parsed())


def same_settings(recorded: dict, planned: dict, data_dir=None) -> bool:
    """Whether a run's recorded settings are the planned ones (`TableRun.settings`, planned over the data folder
    `data_dir`); encoder paths compared resolved, the unlabelled text by `same_unlabeled` (a copy of the data elsewhere
    is the same data), a setting the run does not record (older than that flag) taken at its default."""
    import dataclasses

    from modeling_cove.training.commands.train_tagger import RESUME_SAME, TaggerSettings

    defaults = {f.name: f.default for f in dataclasses.fields(TaggerSettings)}
    for key, value in planned.items():
        mine = recorded.get(key, defaults.get(key))
        if key == "encoder":
            if not RESUME_SAME["encoder"](mine, value):  # the same place, as cove-train-tagger's resume compares it
                return False
        elif key == "unlabeled":
            if not same_unlabeled(mine or [], recorded.get("data_dir"), value or [], data_dir):
                return False
        elif mine != value:
            return False
    return True


def same_unlabeled(recorded: list, recorded_data_dir, planned: list, planned_data_dir) -> bool:
    """Whether two `--unlabeled` lists read the same text, each over its own data folder: a name without a path (a
    local corpus, train-rest, hf:<id>) as it is; a file path resolved, equal when it names the same file or the same
    path inside each side's data folder (a relative and an absolute spelling of the data folder, or a copy of it)."""
    if len(recorded) != len(planned):
        return False
    for mine, theirs in zip(recorded, planned):
        if not is_text_file(mine) or not is_text_file(theirs):
            if mine != theirs:
                return False
            continue
        mine_path, their_path = Path(mine).resolve(), Path(theirs).resolve()
        if mine_path == their_path:
            continue
        inside = [inside_folder(path, folder) for path, folder in ((mine_path, recorded_data_dir),
                                                                   (their_path, planned_data_dir))]
        if inside[0] is None or inside[0] != inside[1]:
            return False
    return True


def inside_folder(path: Path, folder) -> str | None:
    """`path` (resolved) relative to `folder` (resolved) as a POSIX path, None without a folder or outside it."""
    if not folder:
        return None
    try:
        return path.relative_to(Path(folder).resolve()).as_posix()
    except ValueError:
        return None


def table_runs(vocab: str, cove_encoder: str, bilm_encoder: str, rows=None, columns=None) -> list:
    """Every run of the table, seed-major (all cells' seed 1, then seed 2, ...), restricted to `rows` / `columns`
    when given. `vocab`: the word-vector checkpoint of the vectors-only columns (cove-build-vocab's output);
    `cove_encoder`, `bilm_encoder`: the encoders of the contextual columns."""
    encoders = {"supervised": vocab, "cvt": vocab, "supervised+case": vocab, "vectors+cove": cove_encoder,
                "vectors+bilm": bilm_encoder}

    def make(row, column, seed):
        flags = ROW_FLAGS[row] + COLUMN_FLAGS[column]
        if row == SMALL_DATA and column == "cvt":
            flags += ("--unlabeled", "train-rest")  # the unlabelled text: the other 90% of train
        return TableRun(row, column, seed, encoders[column], flags)

    return seed_major(SEEDS, ROW_COLUMNS, make, rows, columns)


# The tagging table's CoVe-T comparison (tagging.json's section cove_t_comparison; runs in runs/tag-cove-t): CoNLL-2000
# with the table's supervised and vectors+cove columns and vectors+cove-t, the vectors+cove column's flags over CoVe-T
COVE_T_SEEDS = {"conll2000": 5}
COVE_T_ROW_COLUMNS = {"conll2000": ("supervised", "vectors+cove", "vectors+cove-t")}


def cove_t_runs(vocab: str, cove_encoder: str, cove_t_encoder: str, rows=None, columns=None) -> list:
    """Every run of the CoVe-T comparison (COVE_T_SEEDS, COVE_T_ROW_COLUMNS), seed-major, with the table's flags
    (ROW_FLAGS, COLUMN_FLAGS; vectors+cove-t takes vectors+cove's `--input vectors+cove`), restricted to `rows` /
    `columns` when given. `vocab`: the word vectors of supervised; `cove_encoder`, `cove_t_encoder`: CoVe-S and
    CoVe-T, pretrained for this comparison (the table's CoVe-S checkpoint is gone)."""
    encoders = {"supervised": vocab, "vectors+cove": cove_encoder, "vectors+cove-t": cove_t_encoder}
    flags = {**COLUMN_FLAGS, "vectors+cove-t": COLUMN_FLAGS["vectors+cove"]}

    def make(row, column, seed):
        return TableRun(row, column, seed, encoders[column], ROW_FLAGS[row] + flags[column])

    return seed_major(COVE_T_SEEDS, COVE_T_ROW_COLUMNS, make, rows, columns)


def seed_major(seeds: dict, row_columns: dict, make, rows=None, columns=None) -> list:
    """The runs of a table whose rows have `seeds[row]` seeds and the columns `row_columns[row]`, each made by
    `make(row, column, seed)`, seed-major (every cell's seed 1 before any seed 2), restricted to `rows` / `columns`
    when given (a name the table does not have is a ValueError listing the ones it has)."""
    known_columns = list(dict.fromkeys(c for names in row_columns.values() for c in names))
    unknown = sorted(set(rows or ()) - set(row_columns)) + sorted(set(columns or ()) - set(known_columns))
    if unknown:
        raise ValueError(f"unknown rows/columns {unknown}: rows are {list(row_columns)}, columns {known_columns}")
    runs = []
    for seed in range(1, max(seeds.values()) + 1):
        for row, row_column_names in row_columns.items():
            if seed > seeds[row] or (rows and row not in rows):
                continue
            runs += [make(row, column, seed) for column in row_column_names if not columns or column in columns]
    return runs


def other_weights(metrics: dict | None, run: TableRun) -> bool:
    """Whether a run's metrics.json (`metrics`) records the sha256 of other weights than `run`'s encoder checkpoint
    has now (`results.checkpoint_weights`: a checkpoint pretrained again since); a run older than that record, or a
    checkpoint not there, compares by the encoder's path alone (`same_settings`)."""
    recorded = (metrics or {}).get("encoder_weights")
    now = checkpoint_weights(Path(run.encoder).resolve()) if recorded else None
    return now is not None and recorded != now


def run_finished(runs_dir: Path | str, run: TableRun, data_dir=None) -> bool:
    """Whether `run` (planned over the data folder `data_dir`) has finished as planned: its metrics.json holds
    results (a run in progress writes one without them), of a full run (not a smoke run) with the planned settings
    and hyperparameters (`same_recipe`), over the encoder's weights as they are now (`other_weights`)."""
    metrics = read_json(Path(runs_dir) / run.folder / "metrics.json")
    if not metrics or "results" not in metrics:
        return False
    recorded = metrics.get("settings") or {}
    return (smoke_reason(recorded) is None and same_settings(recorded, run.settings(), data_dir)
            and same_recipe(metrics.get("hyperparameters"), run) and not other_weights(metrics, run))


def run_recorded(records: list, run: TableRun, data_dir=None) -> bool:
    """Whether the table's record already holds `run` as planned (over the data folder `data_dir`): a record of its
    folder (`tagging.read_runs` with detail, read back from the collected JSON) with the planned settings and
    hyperparameters, over the encoder's weights as they are now. Such a run was collected in an earlier session or on
    another machine, its folder gone: it is not run again, and the collection's --merge keeps it."""
    for record in records:
        if record.get("folder") != run.folder or "settings" not in record:
            continue
        weights = record.get("encoder_weights")
        if (same_settings(record["settings"], run.settings(), data_dir)
                and same_recipe(record.get("hyperparameters"), run)
                and (weights is None or weights == checkpoint_weights(Path(run.encoder).resolve()))):
            return True
    return False


def same_recipe(recorded: dict | None, run: TableRun) -> bool:
    """Whether a run trained (or began training) with the hyperparameters `run` resolves to now: its preset's
    file unchanged since (`train_tagger.RESUME_SAME`'s rule; a run that recorded none is taken as it is)."""
    from modeling_cove.training.commands.train_tagger import RESUME_SAME, resolved_hyperparameters

    if recorded is None:
        return True
    same = RESUME_SAME["resolved_hyperparameters"]
    return same(resolved_hyperparameters(recorded), resolved_hyperparameters(run.hyperparameters()))


def can_resume(runs_dir: Path | str, run: TableRun, data_dir=None) -> bool:
    """Whether an unfinished `run` (planned over `data_dir`) can continue from its checkpoint: it started with the
    planned settings and hyperparameters (`same_recipe`), over the encoder's weights as they are now (as far as its
    metrics.json so far records them), and cove-train-tagger's own resume check takes it: the data folder and the
    unlabelled files at the same places (`train_tagger.RESUME_SAME`: another spelling of a place, not a copy of the
    data elsewhere)."""
    from modeling_cove.training.commands.train_tagger import RESUME_SAME

    folder = Path(runs_dir) / run.folder
    started = read_json(folder / "run_settings.json")
    if (started is None or not same_settings(started, run.settings(), data_dir)
            or not same_recipe(started.get("resolved_hyperparameters"), run)):
        return False
    planned = {"unlabeled": run.settings().get("unlabeled"), **({"data_dir": data_dir} if data_dir else {}),
               "encoder_weights": checkpoint_weights(Path(run.encoder).resolve()),  # as the tagger hashes it now
               "processes": 1}  # the runner launches each run as one process
    return (all(RESUME_SAME[key](started.get(key), value) for key, value in planned.items())
            and not other_weights(read_json(folder / "metrics.json"), run))


def run_table(runs: list, runs_dir: Path | str, data_dir: str, parallel: int = 2, threads: int = 1,
              deadline_minutes: float | None = None, dry_run: bool = False, log=None, recorded=()) -> dict:
    """Run the unfinished `runs` (`run_finished`) with `run_pool`, `parallel` at a time (each `cove-train-tagger`
    process on `threads` threads, its output in `<runs_dir>/<folder>.log`), until all are done or `deadline_minutes`
    pass (then the running ones are stopped; they resume next time: `can_resume`). Returns the folders by outcome:
    "done_before" (finished already), "finished", "failed" (exit status not 0, or no results), "skipped" (no
    encoder), "stopped" (at the deadline), "not_started"; `dry_run` only logs the commands. `data_dir`: the data
    folder the runs read, the one their unlabelled text was planned under. `recorded`: the run records of the table's
    JSON; a run they hold (`run_recorded`) counts as finished before."""

    def finished(runs_dir, run):
        return run_finished(runs_dir, run, data_dir) or run_recorded(recorded, run, data_dir)

    return run_pool(runs, runs_dir, data_dir, finished,
                    functools.partial(can_resume, data_dir=data_dir), parallel, threads, deadline_minutes, dry_run,
                    log)
