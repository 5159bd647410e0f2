"""The main job (`scripts/main.py`): text data -> word vectors -> vocabulary -> pretrained CoVe (MT-LSTM) -> BCN
classifier -> evaluation, model card and Hub-ready folder -> loaded back and used for predictions.

    from modeling_cove.training.pipeline import JobOptions, run_main_job
    report = run_main_job(JobOptions(preset="embedded", run_dir="runs/main"))

Stages, each in its own folder under the run folder (`STAGES`):
    vectors     PPMI+SVD word vectors from the shipped training text (`modeling_cove.training.ppmi`), or a check of
                the given vectors file
    vocab       vocabulary + fixed word-vector matrix + a fresh MT-LSTM of the preset's size
                (`modeling_cove.training.vocab`)
    pretrain    `scripts/train_mt.py --init-from vocab/checkpoint`: MT pretraining, BLEU, encoder export
    classifier  `scripts/train_classifier.py` per task and BCN input column (several at once where the preset's
                `classifier.concurrent_runs` and the cores allow)
    publish     evaluation JSON, model card and Hub-ready folder (`scripts/push_to_hub.py --dry-run`) of the column
                with the best validation accuracy
    predict     the Hub-ready folder loaded with AutoModel and pipeline("text-classification")
Then `report.json`, `curves/*.png` and `REPORT.md` (ours beside the paper's numbers) in the run folder.

The training stages run the project's CLIs as subprocesses: each gets its own interpreter (thread settings, no state
leaking between stages), can be killed on its own, and is exactly the command a user would type (printed before it
runs). The short stages run in-process.

Restartable: a finished stage writes `<stage>/.done.json` LAST; a rerun skips it. A stage that did not finish is
redone cleanly (outputs go to `<name>.tmp`, renamed on success); pretraining resumes from its latest complete
checkpoint (`train_mt.py --resume`). The settings of a run are kept in `run.json`; rerunning the same run folder with
other settings is refused (InputError) unless `overwrite`.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import lzma
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from .presets import PresetError, load_preset
from .run_info import REPO, command_line, git_commit, machine_info, write_json

SCRIPTS = REPO / "scripts"
CLASSIFICATION_TASKS = ("sst2", "sst5", "trec6", "trec50", "imdb", "snli")
# the folder of a data folder (shared/data layout, modeling_cove/data.py) that each named source reads
DATA_SUBFOLDER = {"multi30k": "multi30k", "sst2": "sst", "sst5": "sst", "trec6": "trec", "trec50": "trec",
                  "imdb": "imdb", "snli": "snli", "squad": "squad"}
STAGES = ("vectors", "vocab", "pretrain", "classifier", "publish", "predict")
DONE = ".done.json"
PRESET_KEYS = {"name", "description", "vectors", "vocab", "pretrain", "classifier", "publish", "predict"}
REQUIRED_PRESET_KEYS = ("name", "vectors", "vocab", "pretrain", "classifier", "publish")


class InputError(ValueError):
    """Bad input found before any work (the CLI prints it as `main.py: error: ...` and exits 2)."""


class StageError(RuntimeError):
    """A stage failed (the CLI prints it with the stage name and exits 1); rerunning continues the job."""


@dataclass
class JobOptions:
    """What a user chooses for one main job (the CLI's flags; see scripts/main.py for their help)."""

    preset: str = "embedded"
    run_dir: str = "runs/main"
    data_dir: str | None = None
    vectors: str | None = None
    vectors_lowercase: bool = False
    tasks: list | None = None
    repo_id: str | None = None
    quick: bool = False
    threads: int | None = None
    accelerate_config: str | None = None
    overwrite: bool = False
    argv: list = field(default_factory=list)  # the command line as typed, for the report


# ---------------------------------------------------------------------------------------------------------------
# settings: the preset and the user's options, checked before any work


def repo_path(path) -> Path:
    path = Path(path)
    return path if path.is_absolute() else REPO / path


def load_main_preset(name: str) -> dict:
    try:
        return load_preset(name, "main", known_keys=PRESET_KEYS, required_keys=REQUIRED_PRESET_KEYS)
    except PresetError as e:
        raise InputError(str(e)) from None


def _open_text(path: Path):
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    if path.suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def vectors_file_dim(path: Path) -> int:
    """Dimension of a GloVe/word2vec text file from its first lines; InputError when it is not one."""
    if not path.is_file():
        raise InputError(f"vectors file not found: {path}")
    try:
        with _open_text(path) as f:
            lines = [f.readline() for _ in range(2)]
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read vectors file {path}: {e}") from None
    fields = lines[0].rstrip("\n").split(" ")
    if len(fields) == 2 and all(x.isdigit() for x in fields):  # word2vec header "count dim"
        fields = lines[1].rstrip("\n").split(" ")
    try:
        values = [float(x) for x in fields[1:] if x != ""]
    except ValueError:
        values = []
    if len(fields) < 2 or not values:
        raise InputError(f"{path} is not a word-vectors text file: expected lines 'word v1 v2 ... vD', got "
                         f"{lines[0][:80]!r}")
    return len(values)


def resolve_tasks(names, preset: dict) -> list:
    """The classification tasks: the preset's, or `names` (named tasks or folders with train/validation/test.tsv)."""
    if names:
        tasks = []
        for task in names:
            if task in CLASSIFICATION_TASKS:
                tasks.append({"name": task, "task": task})
            elif (Path(task) / "train.tsv").is_file():
                tasks.append({"name": Path(task).resolve().name, "task": "tsv", "data": str(Path(task).resolve())})
            else:
                raise InputError(f"unknown task {task!r}: choose from {', '.join(CLASSIFICATION_TASKS)} or give a "
                                 "folder with train.tsv, validation.tsv, test.tsv (columns text, label)")
    else:
        tasks = [dict(t) for t in preset["classifier"]["tasks"]]
    for t in tasks:
        if t["task"] == "tsv":
            t["data"] = str(repo_path(t["data"]))
            for split in ("train", "validation", "test"):
                if not (Path(t["data"]) / f"{split}.tsv").is_file():
                    raise InputError(f"task {t['name']}: {Path(t['data']) / (split + '.tsv')} not found")
        elif t["task"] not in CLASSIFICATION_TASKS:
            raise InputError(f"unknown task {t['task']!r} in the preset; choose from "
                             f"{', '.join(CLASSIFICATION_TASKS)} or tsv")
    if len({t["name"] for t in tasks}) != len(tasks):
        raise InputError("two tasks with the same name")
    return tasks


def check_data_dir(data_dir: Path | None, given: str | None, preset: dict, tasks: list):
    """Every named source the job reads from the data folder is there; the pretraining TSV data exists."""
    pre = preset["pretrain"]
    if pre.get("dataset") == "tsv" and not (repo_path(pre["data"]) / "train.tsv").is_file():
        raise InputError(f"pretraining data not found: {repo_path(pre['data'])}/train.tsv")
    if data_dir is None:
        return
    named = [t["task"] for t in tasks if t["task"] != "tsv"] + list(preset["vocab"].get("tasks") or [])
    if pre.get("preset"):
        named.append(json.loads(repo_path(pre["preset"]).read_text()).get("data", {}).get("dataset", "multi30k"))
    for source in sorted(set(named)):
        sub = data_dir / DATA_SUBFOLDER.get(source, source)
        if not sub.is_dir():
            raise InputError(f"--data-dir {given} has no {sub.name}/ folder (needed for {source})")


def resolve_vectors(options: JobOptions, preset: dict, data_dir: Path | None) -> tuple:
    """`(vectors file or None for PPMI vectors trained in stage 1, dimension)`."""
    vec = preset["vectors"]
    if options.vectors:
        vectors_file = Path(options.vectors).resolve()
        dim = vectors_file_dim(vectors_file)
        expected = vec.get("dim") if vec.get("source") == "file" else None
        if expected and dim != expected:
            raise InputError(f"--vectors {options.vectors} has {dim}-dimensional vectors; preset {preset['name']} "
                             f"needs {expected}")
        return vectors_file, dim
    if vec["source"] == "file":
        if data_dir is None and "{data_dir}" in vec["default_file"]:
            raise InputError(f"preset {preset['name']} needs --vectors FILE (or --data-dir with the stand-in vectors)")
        vectors_file = Path(vec["default_file"].format(data_dir=data_dir)).resolve()
        dim = vectors_file_dim(vectors_file)
        if dim != vec["dim"]:
            raise InputError(f"{vectors_file} has {dim}-dimensional vectors, expected {vec['dim']}")
        return vectors_file, dim
    if vec["source"] == "ppmi":
        return None, int(vec["dim"])
    raise InputError(f"preset vectors.source must be ppmi or file, got {vec['source']!r}")


def resolve_accelerate_config(given: str | None) -> Path | None:
    """A path relative to the working directory, else to the repository (configuration/accelerate/...)."""
    if not given:
        return None
    path = Path(given).resolve() if Path(given).is_file() else repo_path(given)
    if not path.is_file():
        raise InputError(f"--accelerate-config {given} not found")
    return path


def resolve(options: JobOptions) -> dict:
    """Every setting of the run, checked: raises InputError on bad input (before any work)."""
    preset = load_main_preset(options.preset)
    data_dir = None
    if options.data_dir is not None:
        data_dir = Path(options.data_dir).resolve()
        if not data_dir.is_dir():
            raise InputError(f"--data-dir {options.data_dir} does not exist or is not a folder")
    if options.threads is not None and options.threads < 1:
        raise InputError("--threads must be >= 1")
    tasks = resolve_tasks(options.tasks, preset)
    check_data_dir(data_dir, options.data_dir, preset, tasks)
    vectors_file, dim = resolve_vectors(options, preset, data_dir)
    accelerate_config = resolve_accelerate_config(options.accelerate_config)
    return {
        "preset": preset["name"],
        "preset_file": preset["path"],
        "preset_content": {k: v for k, v in preset.items() if k != "path"},
        "data_dir": str(data_dir) if data_dir else None,
        "vectors_file": str(vectors_file) if vectors_file else None,
        "vectors_lowercase": bool(options.vectors_lowercase),
        "dim": dim,
        "tasks": tasks,
        "repo_id": options.repo_id or preset["publish"]["repo_id"],
        "quick": bool(options.quick),
        "accelerate_config": str(accelerate_config) if accelerate_config else None,
    }


# ---------------------------------------------------------------------------------------------------------------
# stage bookkeeping and subprocesses


def banner(number: int, stage: str, text: str):
    line = f"[stage {number}/{len(STAGES)}] {stage}: {text}"
    print("\n" + "=" * len(line) + "\n" + line + "\n" + "=" * len(line), flush=True)


def read_done(folder: Path) -> dict | None:
    """The completion marker of a stage folder, or None when the stage has not finished."""
    marker = folder / DONE
    return json.loads(marker.read_text()) if marker.is_file() else None


def fresh_tmp(folder: Path) -> Path:
    """`<folder>.tmp`, emptied: a stage writes there and renames it to `folder` on success (`commit_tmp`)."""
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit_tmp(tmp: Path, folder: Path):
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)


def child_env(threads) -> dict:
    env = dict(os.environ)
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def flags(options: dict) -> list:
    """{"max-epochs": 3, "no-bleu": True} -> ["--max-epochs", "3", "--no-bleu"]."""
    out = []
    for key, value in options.items():
        key = key.replace("_", "-")
        if value is True:
            out.append(f"--{key}")
        elif value is not False and value is not None:
            out += [f"--{key}", str(value)]
    return out


@dataclass
class Command:
    """One stage subprocess: its argv, a name for messages, its threads and where its output goes (None: the
    terminal)."""

    argv: list
    name: str
    threads: int | None = None
    log: Path | None = None
    on_success: Callable | None = None  # called when it exited 0 (e.g. renames its `.tmp` output folder)


def run_commands(commands: list, stage_dir: Path, slots: int = 1):
    """Run stage subprocesses, at most `slots` at once, in the repository; raises StageError for the first that
    fails (the others are stopped). Their pids are kept in `<run-dir>/<stage>.running.json` while they run (outside
    the stage folder, which the stage may replace). Ctrl-C or SIGTERM of the job stops them too."""
    pending, running = list(commands), {}
    running_file = stage_dir.parent / f"{stage_dir.name}.running.json"
    try:
        while pending or running:
            while pending and len(running) < slots:
                command = pending.pop(0)
                running[_start(command)] = command
                _record_running(running_file, running)
            proc = _wait_any(running)
            command = running.pop(proc)
            _record_running(running_file, running)
            _finish(proc, command)
    except BaseException:
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        for proc in running:
            proc.wait()
        raise
    finally:
        running_file.unlink(missing_ok=True)


def _record_running(path: Path, running: dict):
    write_json(path, [{"pid": proc.pid, "command": [str(arg) for arg in command.argv]}
                      for proc, command in running.items()])


def _start(command: Command) -> subprocess.Popen:
    argv = [str(c) for c in command.argv]
    print("$ " + " ".join(argv), flush=True)
    if command.log is None:
        return subprocess.Popen(argv, cwd=REPO, env=child_env(command.threads))
    print(f"  (runs beside another one; its output goes to {command.log})", flush=True)
    command.log.parent.mkdir(parents=True, exist_ok=True)
    with open(command.log, "w", encoding="utf-8") as log:
        return subprocess.Popen(argv, cwd=REPO, env=child_env(command.threads), stdout=log, stderr=subprocess.STDOUT)


def _wait_any(running: dict) -> subprocess.Popen:
    while True:
        for proc in running:
            if proc.poll() is not None:
                return proc
        time.sleep(0.2)


def _finish(proc: subprocess.Popen, command: Command):
    rc = proc.returncode
    if command.log is not None:
        text = command.log.read_text(encoding="utf-8", errors="replace")
        lines = [line.rsplit("\r", 1)[-1].strip() for line in text.split("\n")]  # progress bars: their last state
        tail = [line for line in lines if line and not re.search(r"\d%\|", line)][-(40 if rc else 3):]
        print(f"\n{command.name}: finished (exit code {rc}); last lines of {command.log}:\n  " + "\n  ".join(tail),
              flush=True)
    if rc != 0:
        how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        raise StageError(f"{command.name} failed ({how}); rerun the same command to continue")
    if command.on_success is not None:
        command.on_success()


# ---------------------------------------------------------------------------------------------------------------
# stages 1-2 (in-process)


def stage_vectors(cfg: dict, folder: Path) -> dict:
    """Stage 1: PPMI vectors from the shipped training text, or the given file (checked in `resolve`)."""
    tmp = fresh_tmp(folder)
    if cfg["vectors_file"]:
        info = {"source": "file", "file": cfg["vectors_file"], "dim": cfg["dim"],
                "lowercase_lookup": cfg["vectors_lowercase"]}
    else:
        from .ppmi import read_texts, train_ppmi_vectors, write_vectors

        vec = cfg["preset_content"]["vectors"]
        window, min_count = vec.get("window", 5), vec.get("min_count", 1)
        texts = [text for path, column in vec["texts"] for text in read_texts(repo_path(path), column)]
        words, vectors = train_ppmi_vectors(texts, dim=int(vec["dim"]), window=window, min_count=min_count)
        write_vectors(tmp / "vectors.txt", words, vectors)
        print(f"{len(texts)} texts -> {len(words)} words x {vec['dim']} dims (PPMI + SVD)", flush=True)
        info = {"source": "ppmi", "file": str(folder / "vectors.txt"), "dim": int(vec["dim"]), "words": len(words),
                "texts": vec["texts"], "window": window, "min_count": min_count, "lowercase_lookup": False}
    write_json(tmp / "vectors.json", info)
    commit_tmp(tmp, folder)
    return info


def vocab_texts(cfg: dict) -> tuple:
    """`(texts, sources)`: the English text of every split the job reads (the preset's TSV columns and named
    sources, and every classification task's text)."""
    from .vocab import iter_task_texts, read_tsv_column

    spec = cfg["preset_content"]["vocab"]
    preset_folders = [repo_path(p).resolve() for p, _ in spec.get("texts") or []]
    texts, sources = [], []
    for path, column in spec.get("texts") or []:
        for split in ("train", "validation", "test"):
            texts += read_tsv_column(repo_path(path) / f"{split}.tsv", column)
        sources.append(f"{path} ({column})")
    named = list(spec.get("tasks") or [])
    for t in cfg["tasks"]:  # every classification task's text (also --tasks)
        if t["task"] == "tsv" and Path(t["data"]).resolve() not in preset_folders:
            for split in ("train", "validation", "test"):
                texts += read_tsv_column(Path(t["data"]) / f"{split}.tsv", "text")
            sources.append(t["data"])
        elif t["task"] != "tsv" and t["task"] not in named:
            named.append(t["task"])
    for task in named:
        texts += list(iter_task_texts(task, cfg["data_dir"]))
        sources.append(task)
    return texts, sources


def stage_vocab(cfg: dict, folder: Path, vectors: dict) -> dict:
    """Stage 2 (seconds): the vocabulary of every English text the job reads, the fixed word-vector matrix and a
    freshly initialised MT-LSTM of the preset's size (train_mt.py --init-from keeps the checkpoint's MT-LSTM)."""
    from .vocab import build_vocab_checkpoint, save_checkpoint

    spec = cfg["preset_content"]["vocab"]
    start = time.time()
    texts, sources = vocab_texts(cfg)
    try:
        model, tokenizer, built = build_vocab_checkpoint(
            texts, vectors["file"], dim=vectors["dim"], lowercase=True, vectors_lowercase=vectors["lowercase_lookup"],
            oov_min_count=spec.get("oov_min_count", 5), seed=0, **(spec.get("config") or {}))
    except ValueError as e:
        raise StageError(f"vocab: {e}") from None
    info = {"sources": sources, **built, "seconds": round(time.time() - start, 1)}
    info["vectors"] = vectors["file"]
    tmp = fresh_tmp(folder)
    save_checkpoint(model, tokenizer, tmp / "checkpoint")
    write_json(tmp / "vocab.json", info)
    commit_tmp(tmp, folder)
    print(f"vocabulary: {info['vocab_size']} entries, {info['words_with_vector']} with a vector; "
          f"{info['token_coverage_vectors']}% of {info['corpus_tokens']} tokens covered -> {folder / 'checkpoint'}",
          flush=True)
    return info


# ---------------------------------------------------------------------------------------------------------------
# stages 3-4 (the training CLIs)


def stage_pretrain(cfg: dict, folder: Path, threads) -> dict:
    """Stage 3: train_mt.py (subprocess); a killed run resumes from its latest complete checkpoint."""
    pre = cfg["preset_content"]["pretrain"]
    options = dict(pre.get("args") or {})
    if cfg["quick"]:
        options.update(pre.get("quick_args") or {})
    cmd = [sys.executable, SCRIPTS / "train_mt.py"]
    if cfg["accelerate_config"]:
        cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", cfg["accelerate_config"],
               SCRIPTS / "train_mt.py"]
    cmd += ["--output-dir", folder, "--init-from", folder.parent / "vocab" / "checkpoint"]
    if pre.get("preset"):
        cmd += ["--preset", repo_path(pre["preset"])]
    if pre.get("dataset") == "tsv":
        cmd += ["--dataset", "tsv", "--data-dir", repo_path(pre["data"])]
    else:
        cmd += (["--dataset", pre["dataset"]] if pre.get("dataset") else []) + (
            ["--data-dir", cfg["data_dir"]] if cfg["data_dir"] else [])
    if pre.get("config_overrides"):
        cmd += ["--config-overrides", json.dumps(pre["config_overrides"], sort_keys=True)]
    cmd += flags(options) + (["--num-threads", threads] if threads else [])
    if (folder / "run_settings.json").exists():
        cmd.append("--resume")
        print(f"{folder} holds an unfinished run: resuming from its latest complete checkpoint", flush=True)
    else:
        cmd.append("--overwrite")  # leftovers of a run killed before it wrote its settings
    run_commands([Command(cmd, "pretrain (train_mt.py)", threads)], folder)
    metrics = json.loads((folder / "metrics.json").read_text())
    if not (folder / "encoder" / "config.json").exists():
        raise StageError(f"train_mt.py finished without exporting {folder / 'encoder'}")
    return summarize_pretrain(metrics, folder)


def summarize_pretrain(metrics: dict, folder: Path) -> dict:
    epochs = metrics.get("epochs") or []
    test = metrics.get("test") or {}
    return {
        "encoder": str(folder / "encoder"),
        "epochs": len(epochs),
        "steps": epochs[-1]["global_step"] if epochs else None,
        "stop_reason": metrics.get("stop_reason"),
        "test_bleu": test.get("bleu"),
        "test_perplexity": test.get("perplexity"),
        "best_val_bleu": max((e.get("val_bleu") or 0 for e in epochs), default=None),
        "last_val_perplexity": epochs[-1].get("val_perplexity") if epochs else None,
        "last_train_perplexity": epochs[-1].get("train_perplexity") if epochs else None,
        "train_seconds": round(sum(e.get("seconds", 0) for e in epochs), 1),
        "data": metrics.get("data"),
        "curve": str(folder / "curves.png"),
    }


def classifier_slots(spec: dict, threads, cores: int) -> tuple:
    """`(runs at once, threads per run)`. The BCN of the embedded default is small: one thread per run is as fast as
    two, so two runs side by side on 2 cores take about half the time of one after the other. `threads` (--threads)
    fixes the threads per run; the runs at once are then what the cores hold, at most `concurrent_runs`."""
    wanted = max(1, int(spec.get("concurrent_runs", 1)))
    per_run = threads or max(1, cores // wanted)
    return max(1, min(wanted, cores // per_run)), per_run


def classifier_columns(cfg: dict) -> tuple:
    spec = cfg["preset_content"]["classifier"]
    options = dict(spec.get("args") or {})
    baselines = list(spec.get("baselines") or [])
    if cfg["quick"]:
        options.update(spec.get("quick_args") or {})
        baselines = list(spec.get("quick_baselines") or [])
    return [spec["bcn_input"]] + baselines, options


def stage_classifier(cfg: dict, folder: Path, threads) -> dict:
    """Stage 4: train_classifier.py per task and column (subprocesses, several at once where `classifier_slots`
    allows); each run goes to `<column>.tmp`, renamed when it succeeded, so a finished run is kept when another one
    is killed."""
    columns, options = classifier_columns(cfg)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    slots, per_run = classifier_slots(cfg["preset_content"]["classifier"], threads, cores)
    encoder = folder.parent / "pretrain" / "encoder"
    folder.mkdir(parents=True, exist_ok=True)
    commands = []
    for t in cfg["tasks"]:
        for column in columns:
            out = folder / t["name"] / column
            if (out / "metrics.json").exists():
                print(f"{t['name']} ({column}): finished earlier, skipped", flush=True)
                continue
            tmp = fresh_tmp(out)
            cmd = [sys.executable, SCRIPTS / "train_classifier.py", "--task", t["task"], "--encoder", encoder,
                   "--bcn-input", column, "--output-dir", tmp, "--cache-dir", folder / "feature_cache", "--overwrite"]
            data = t.get("data") or cfg["data_dir"]
            cmd += (["--data-dir", data] if data else []) + flags(options) + ["--threads", per_run]
            log = tmp / "train.log" if slots > 1 and commands else None  # the first one prints to the terminal
            commands.append(Command(cmd, f"classifier {t['name']} {column} (train_classifier.py)", per_run, log,
                                    on_success=lambda tmp=tmp, out=out: commit_tmp(tmp, out)))
    slots = min(slots, max(1, len(commands)))
    run_commands(commands, folder, slots)
    return {t["name"]: {column: classifier_summary(t, folder / t["name"] / column, slots, per_run)
                        for column in columns} for t in cfg["tasks"]}


def classifier_summary(task: dict, out: Path, slots: int, threads: int) -> dict:
    m = json.loads((out / "metrics.json").read_text())
    return {
        "task": task["task"],
        "validation_accuracy": 100 * m["validation"]["accuracy"],
        "test_accuracy": 100 * m["test"]["accuracy"],
        "test_macro_f1": 100 * m["test"]["macro_f1"],
        "epochs": len(m.get("epochs") or []),
        "stop_reason": m.get("stop_reason"),
        "train_seconds": m.get("train_seconds"),
        "threads": threads,
        "runs_at_once": slots,
        "paper_validation_accuracy": m.get("paper_table2_validation_accuracy"),
        "model_dir": str(out / "best"),
        "curve": str(out / "curve.png"),
        "splits": m.get("splits"),
        "command": m.get("command"),
    }


# ---------------------------------------------------------------------------------------------------------------
# stages 5-6


def published_column(columns: dict) -> str:
    """The column a task publishes: the best validation accuracy of those trained (model selection on validation,
    never on test); on a tie the first, i.e. the preset's `bcn_input` (the CoVe column), which is trained first."""
    return max(columns, key=lambda column: columns[column]["validation_accuracy"])


def eval_record(cfg: dict, task: dict, run: dict, column: str, scores: dict) -> dict:
    """The evaluation record of the published checkpoint for its model card: the one train_classifier.py wrote
    beside it (what the encoder really is, epochs and steps really run, why it stopped), with the preset's dataset
    description and the main job's notes (which column was published and why)."""
    from .cards import make_eval_record

    own = json.loads((Path(run["model_dir"]).parent / "eval_results.json").read_text())
    meta = (cfg["preset_content"]["publish"].get("dataset") or {}).get(task["name"], {})
    dataset = {**own["dataset"], "name": meta.get("name", task["name"]),
               "source": meta.get("source", task.get("data") or cfg["data_dir"] or "Hub")}
    dataset.pop("key", None)
    if "id" in meta:
        dataset["id"] = meta["id"]
    if task["task"] in CLASSIFICATION_TASKS:
        dataset["key"] = task["task"]
    training = dict(own["training"])
    training["word_vectors"] = {"name": Path(cfg["vectors_file"] or "PPMI vectors of the shipped text").name,
                                "stand_in": cfg["vectors_file"] is None or "glove.840B" not in cfg["vectors_file"]}
    training["notes"] = list(training.get("notes") or []) + [
        f"produced by scripts/main.py --preset {cfg['preset']}" + (" --quick" if cfg["quick"] else ""),
        f"BCN input {column}: the best validation accuracy of the columns trained ("
        + ", ".join(f"{c} {v:.1f}" for c, v in scores.items()) + ")"]
    return make_eval_record(Path(run["model_dir"]), task=own["task"], dataset=dataset, metrics=own["metrics"],
                            training=training, paper_column=own.get("paper_column"))


def stage_publish(cfg: dict, folder: Path, threads, classifier: dict) -> dict:
    """Stage 5: evaluation JSON, model card and Hub-ready folder via push_to_hub.py --dry-run, per task: the column
    with the best validation accuracy (`published_column`)."""
    from .cards import write_eval_json

    tmp = fresh_tmp(folder)
    results = {}
    for t in cfg["tasks"]:
        trained = classifier[t["name"]]
        scores = {c: m["validation_accuracy"] for c, m in trained.items()}  # what the choice was made on
        column = published_column(trained)
        run = trained[column]
        task_dir = tmp / t["name"]
        task_dir.mkdir()
        write_eval_json(task_dir / "eval_results.json", eval_record(cfg, t, run, column, scores))
        repo_id = cfg["repo_id"] if len(cfg["tasks"]) == 1 else f"{cfg['repo_id']}-{t['name']}"
        cmd = [sys.executable, SCRIPTS / "push_to_hub.py", run["model_dir"], "--repo-id", repo_id, "--eval-json",
               task_dir / "eval_results.json", "--curve", run["curve"], "--dry-run", "--output-dir", task_dir / "hub"]
        run_commands([Command(cmd, f"publish {t['name']} (push_to_hub.py --dry-run)", threads)], folder)
        results[t["name"]] = {
            "column": column,
            "validation_accuracy": scores,
            "repo_id": repo_id,
            "hub_folder": str(folder / t["name"] / "hub"),
            "files": sorted(str(p.relative_to(task_dir / "hub")) for p in (task_dir / "hub").rglob("*")
                            if p.is_file()),
            "eval_json": str(folder / t["name"] / "eval_results.json"),
        }
    commit_tmp(tmp, folder)
    return results


def predict_with(hub: str, sentences: list) -> dict:
    """Load a Hub-ready folder with AutoModel (the CoVe encoder part), AutoModelForSequenceClassification and
    pipeline("text-classification") (remote code shipped in the folder) and classify `sentences`."""
    import torch
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoTokenizer, pipeline
    from transformers.utils import logging as transformers_logging

    tokenizer = AutoTokenizer.from_pretrained(hub)
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # AutoModel = the CoVe encoder part: the BCN weights are unused
    try:
        base = AutoModel.from_pretrained(hub, trust_remote_code=True).eval()
    finally:
        transformers_logging.set_verbosity(verbosity)
    classifier = AutoModelForSequenceClassification.from_pretrained(hub, trust_remote_code=True).eval()
    sample = [s for s in sentences if s][:1] or ["a test sentence ."]
    with torch.no_grad():
        enc = tokenizer(sample, return_tensors="pt")
        features = base(**enc).last_hidden_state
        logits = classifier(**enc).logits
    outputs = pipeline("text-classification", model=hub, trust_remote_code=True)(sentences) if sentences else []
    rows = [{"text": s, "label": o["label"], "score": round(float(o["score"]), 4)} for s, o in zip(sentences, outputs)]
    return {
        "auto_model_class": type(base).__name__,
        "classifier_class": type(classifier).__name__,
        "feature_shape": list(features.shape),
        "predictions": rows,
        "pipeline_agrees_with_model": bool(rows) and rows[0]["label"] == classifier.config.id2label[
            int(logits[0].argmax())],
    }


def stage_predict(cfg: dict, folder: Path, publish: dict, threads) -> dict:
    """Stage 6 (in-process): each Hub-ready folder loaded back and used for predictions (printed)."""
    import torch

    if threads:
        torch.set_num_threads(threads)
    sentences = list((cfg["preset_content"].get("predict") or {}).get("sentences") or [])
    results = {}
    tmp = fresh_tmp(folder)
    for name, pub in publish.items():
        results[name] = predict_with(pub["hub_folder"], sentences)
        print(f"\n{name}: AutoModel -> {results[name]['auto_model_class']}, CoVe features "
              f"{tuple(results[name]['feature_shape'])}; pipeline('text-classification') from {pub['hub_folder']}:",
              flush=True)
        for row in results[name]["predictions"]:
            print(f"  {row['label']:>12s} {row['score']:.3f}  {row['text']}", flush=True)
    write_json(tmp / "predictions.json", results)
    commit_tmp(tmp, folder)
    return results


# ---------------------------------------------------------------------------------------------------------------
# report


def collect_curves(run_dir: Path, report: dict) -> list:
    curves = run_dir / "curves"
    curves.mkdir(exist_ok=True)
    out = []
    pre = report["stages"].get("pretrain", {}).get("metrics") or {}
    if pre.get("curve") and Path(pre["curve"]).exists():
        shutil.copyfile(pre["curve"], curves / "pretrain_mt.png")
        out.append("curves/pretrain_mt.png")
    for task, columns in (report["stages"].get("classifier", {}).get("metrics") or {}).items():
        for column, m in columns.items():
            if Path(m["curve"]).exists():
                name = f"classifier_{task}_{column.replace('+', '_')}.png"
                shutil.copyfile(m["curve"], curves / name)
                out.append(f"curves/{name}")
    return out


def paper_numbers(cfg: dict) -> dict:
    """The paper's figures (`papers`, typed once): the MT BLEU of the pretraining's translation data (CoVe-S's for
    the embedded default) and the tasks' Table 2 rows."""
    from . import papers

    mt_preset_file = cfg["preset_content"]["pretrain"].get("preset")  # the embedded default has none: CoVe-S
    mt_preset = load_preset(str(repo_path(mt_preset_file)) if mt_preset_file else "cove-small", "models")
    mt = papers.mt_bleu((mt_preset.get("data") or {}).get("dataset"))
    out = {"mt_bleu": mt["bleu"] if mt else None,
           "mt_note": f"{mt['test_set']}, {mt['bleu_kind']}" if mt else None, "table2": {}}
    for t in cfg["tasks"]:
        key = t["task"] if t["task"] in CLASSIFICATION_TASKS else "sst2"
        out["table2"][t["name"]] = {"row": key, "comparable": key == t["task"], **papers.table2_by_input(key)}
    return out


def fmt(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}"


def _markdown_data(st: dict, paper: dict, cfg: dict) -> list:
    vec = st.get("vectors", {}).get("metrics") or {}
    voc = st.get("vocab", {}).get("metrics") or {}
    pre = st.get("pretrain", {}).get("metrics") or {}
    lines = ["", "## Data and vectors", "",
             f"- word vectors: {vec.get('source')} `{vec.get('file')}`, {vec.get('dim')} dims"
             + (f", {vec.get('words')} words" if vec.get("words") else ""),
             f"- vocabulary: {voc.get('vocab_size')} entries ({voc.get('words_with_vector')} with a vector, "
             f"{voc.get('token_coverage_vectors')}% of {voc.get('corpus_tokens')} tokens covered); MT-LSTM "
             f"{voc.get('num_hidden_layers')} x {voc.get('hidden_size')} per direction",
             "", "## Pretraining (English→German MT)", "", "| | ours | paper (CoVe-S) |", "|---|---|---|",
             f"| test BLEU | {fmt(pre.get('test_bleu'))} | {fmt(paper['mt_bleu'])} ({paper['mt_note']}) |",
             f"| test perplexity | {fmt(pre.get('test_perplexity'))} | – |",
             f"| epochs / steps | {pre.get('epochs')} / {pre.get('steps')} | |", ""]
    if pre.get("stop_reason"):
        lines.append(f"Stopped: {pre['stop_reason']}.")
    if cfg["preset_content"]["pretrain"].get("dataset") == "tsv":
        lines.append("Ours is trained and tested on the embedded synthetic pairs (examples/en_de), the paper's on "
                     "Multi30k: the numbers are not comparable, the paper's is shown for scale.")
    return lines


# What each BCN input column of the report feeds the BCN (the run's own word vectors and pretrained MT-LSTM)
COLUMN_MEANINGS = {
    "random": "random embeddings trained with the BCN",
    "vectors": "the word vectors alone, frozen",
    "vectors+cove": "[word vectors; CoVe], CoVe = the pretrained MT-LSTM's top layer, frozen",
    "cove": "CoVe alone (no word vectors), frozen",
    "scalar_mix": "gamma * sum_k softmax(w)_k h_k over {[vectors; vectors], MT-LSTM layer 1, layer 2}, "
                  "w and gamma learned with the BCN",
    "vectors+scalar_mix": "[word vectors; gamma * sum_k softmax(w)_k h_k over {[vectors; vectors], MT-LSTM layer 1, "
                          "layer 2}], w and gamma learned with the BCN",
}


def _markdown_classifier(st: dict, paper: dict) -> list:
    lines = ["", "## Classification (BCN, accuracy %)", "",
             "| task | column | validation | test | test macro-F1 | epochs | paper validation (same column) | "
             "paper GloVe | paper +CoVe-S |", "|---|---|---|---|---|---|---|---|---|"]
    metrics = st.get("classifier", {}).get("metrics") or {}
    trained = list(dict.fromkeys(column for columns in metrics.values() for column in columns))
    if trained:
        lines.insert(3, "Columns (the BCN's input): " + "; ".join(
            f"`{column}` = {COLUMN_MEANINGS.get(column, column)}" for column in trained) + ".\n")
    for task, columns in metrics.items():
        p = paper["table2"].get(task, {})
        for column, m in columns.items():
            lines.append(f"| {task} | {column} | {fmt(m['validation_accuracy'])} | {fmt(m['test_accuracy'])} | "
                         f"{fmt(m['test_macro_f1'])} | {m.get('epochs')} | "
                         f"{fmt(p.get(column)) if p.get('comparable') else '–'} | "
                         f"{fmt(p.get('vectors'))} | {fmt(p.get('vectors+cove'))} |")
        if p and not p.get("comparable"):
            lines.append(f"\n{task}: no paper counterpart (synthetic data); the paper columns show its "
                         f"{p['row'].upper()} row for scale.")
        stops = {f"{column}: {m['stop_reason']}" for column, m in columns.items() if m.get("stop_reason")}
        if stops:
            lines.append(f"\n{task} runs stopped — " + "; ".join(sorted(stops)) + ".")
    return lines


def _markdown_publish(st: dict, cfg: dict, run_dir: Path) -> list:
    lines = []
    pub = st.get("publish", {}).get("metrics") or {}
    if pub:
        lines += ["", "## Hub-ready folders (push_to_hub.py --dry-run)", ""]
        for task, p in pub.items():
            column = p.get("column", cfg["preset_content"]["classifier"]["bcn_input"])
            lines.append(f"- {task}: the {column} BCN (best validation accuracy: "
                         + ", ".join(f"{c} {fmt(v)}" for c, v in (p.get("validation_accuracy") or {}).items())
                         + f") in `{p['hub_folder']}` → `{p['repo_id']}` ({len(p['files'])} files; upload with "
                         f"`python scripts/push_to_hub.py {run_dir}/classifier/{task}/{column}/best --repo-id "
                         f"ORG/NAME --eval-json {p['eval_json']}`)")
    pred = st.get("predict", {}).get("metrics") or {}
    if pred:
        lines += ["", "## Predictions of the reloaded model (pipeline(\"text-classification\"))", ""]
        for task, p in pred.items():
            lines += [f"{task} (AutoModel → {p['auto_model_class']}):", "", "| text | label | score |",
                      "|---|---|---|"]
            lines += [f"| {r['text']} | {r['label']} | {r['score']:.3f} |" for r in p["predictions"]]
            lines.append("")
    return lines


def write_markdown(run_dir: Path, report: dict, cfg: dict):
    st = report["stages"]
    lines = [f"# Main job report: preset `{cfg['preset']}`" + (" (--quick)" if cfg["quick"] else ""), "",
             f"Run folder `{run_dir}`; command `{report['command']}`; git `{report.get('git')}`.", "",
             "| stage | status | seconds |", "|---|---|---|"]
    for stage in STAGES:
        s = st.get(stage, {})
        lines.append(f"| {stage} | {s.get('status', 'not run')} | {fmt(s.get('seconds'), 1)} |")
    lines += _markdown_data(st, report["paper"], cfg)
    lines += _markdown_classifier(st, report["paper"])
    lines += _markdown_publish(st, cfg, run_dir)
    if report.get("curves"):
        lines += ["", "## Curves", ""] + [f"![{c}]({c})" for c in report["curves"]]
    (run_dir / "REPORT.md").write_text("\n".join(lines) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# the job


def settings_fingerprint(cfg: dict) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def prepare_run_dir(options: JobOptions, cfg: dict, command: str) -> Path:
    """The run folder, created; refuses (InputError) one that holds a run with other settings."""
    run_dir = Path(options.run_dir).resolve()
    if options.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    run_file = run_dir / "run.json"
    fingerprint = settings_fingerprint(cfg)
    if run_file.exists():
        previous = json.loads(run_file.read_text())
        if previous.get("fingerprint") != fingerprint:
            raise InputError(f"{run_dir} holds a run with other settings ({previous.get('command')}); use another "
                             "--run-dir or --overwrite")
    else:
        write_json(run_file, {"fingerprint": fingerprint, "settings": cfg, "command": command})
    return run_dir


class StageRunner:
    """Runs the stages in order: skips a finished one (its `.done.json`), times the others and keeps the report."""

    def __init__(self, run_dir: Path, report: dict):
        self.run_dir, self.report, self.results = run_dir, report, {}
        for stage in STAGES:  # keep finished stages' figures when the report is rebuilt after a rerun
            done = read_done(run_dir / stage)
            if done:
                report["stages"][stage] = {"status": "done", "seconds": done.get("seconds"),
                                           "metrics": done["metrics"]}

    def __call__(self, stage: str, description: str, fn):
        number, folder = STAGES.index(stage) + 1, self.run_dir / stage
        done = read_done(folder)
        if done:
            banner(number, stage, f"skipped (finished earlier; {folder / DONE})")
            self.results[stage] = done["metrics"]
            self.report["stages"][stage]["status"] = "skipped (finished earlier)"
            return
        banner(number, stage, description)
        start = time.time()
        metrics = fn(folder)
        seconds = round(time.time() - start, 1)
        write_json(folder / DONE, {"stage": stage, "seconds": seconds, "metrics": metrics})  # LAST: complete
        self.results[stage] = metrics
        self.report["stages"][stage] = {"status": "done", "seconds": seconds, "metrics": metrics}
        write_json(self.run_dir / "report.json", self.report)
        print(f"[stage {number}/{len(STAGES)}] {stage}: done in {seconds} s", flush=True)


def run_stages(cfg: dict, do: StageRunner, threads):
    results = do.results
    do("vectors", f"check {cfg['vectors_file']}" if cfg["vectors_file"] else
       f"PPMI {cfg['dim']}-d vectors from the shipped text (modeling_cove.training.ppmi)",
       lambda f: stage_vectors(cfg, f))
    do("vocab", "vocabulary, word-vector matrix, fresh MT-LSTM", lambda f: stage_vocab(cfg, f, results["vectors"]))
    do("pretrain", "MT pretraining of the CoVe encoder (scripts/train_mt.py)",
       lambda f: stage_pretrain(cfg, f, threads))
    do("classifier", "BCN on " + ", ".join(t["name"] for t in cfg["tasks"]) + " (scripts/train_classifier.py)",
       lambda f: stage_classifier(cfg, f, threads))
    do("publish", f"evaluation JSON, model card, Hub-ready folder for {cfg['repo_id']} (dry run)",
       lambda f: stage_publish(cfg, f, threads, results["classifier"]))
    do("predict", "load the Hub-ready folder with AutoModel / pipeline and predict",
       lambda f: stage_predict(cfg, f, results["publish"], threads))


def run_main_job(options: JobOptions) -> dict:
    """Run (or continue) the main job; returns the report (also `<run-dir>/report.json` and `REPORT.md`).
    Raises InputError on bad input (before any work) and StageError when a stage fails."""
    cfg = resolve(options)
    command = command_line([str(SCRIPTS / "main.py"), *options.argv])
    run_dir = prepare_run_dir(options, cfg, command)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if options.threads:
        import torch

        torch.set_num_threads(options.threads)
    report_path = run_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    report.update({"preset": cfg["preset"], "quick": cfg["quick"], "run_dir": str(run_dir), "command": command,
                   "git": git_commit(), "machine": machine_info(), "settings": cfg, "paper": paper_numbers(cfg),
                   "options": asdict(options)})
    report.setdefault("stages", {})
    job_start = time.time()
    run_stages(cfg, StageRunner(run_dir, report), options.threads)
    report["curves"] = collect_curves(run_dir, report)
    report["wall_seconds_this_invocation"] = round(time.time() - job_start, 1)
    write_json(report_path, report)
    write_markdown(run_dir, report, cfg)
    print(f"\nreport: {report_path}\nsummary: {run_dir / 'REPORT.md'}", flush=True)
    return report
