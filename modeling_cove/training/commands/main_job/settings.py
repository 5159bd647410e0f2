"""The main job's settings: the user's options (`JobOptions`, the flags of `cove-main`) and the main preset, checked
before any work (`resolve`: bad input raises InputError)."""

from __future__ import annotations

import json
import lzma
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

from ....data import open_text
from ...common.cli import option
from ...common.presets import PresetError, load_preset, preset_file, preset_path

CLASSIFICATION_TASKS = ("sst2", "sst5", "trec6", "trec50", "imdb", "snli")
# the folder of a local data folder (docs/data.md, modeling_cove/data.py) that each named source reads
DATA_SUBFOLDER = {"multi30k": "multi30k", "sst2": "sst", "sst5": "sst", "trec6": "trec", "trec50": "trec",
                  "imdb": "imdb", "snli": "snli", "squad": "squad"}
PRESET_KEYS = {"name", "description", "vectors", "vocab", "pretrain", "classifier", "curves", "publish", "predict"}
REQUIRED_PRESET_KEYS = ("name", "vectors", "vocab", "pretrain", "classifier", "publish")
CURVE_KEYS = {"task", "sizes", "columns", "seeds", "epochs", "min_steps", "concurrent_runs", "translation_pairs",
              "full", "quick"}  # the preset's `curves` block (main_job/curves.py)


class InputError(ValueError):
    """Bad input found before any work (the command line prints it as `cove-main: error: ...` and exits 2)."""


@dataclass
class JobOptions:
    """What a user chooses for one main job: the flags of `cove-main` (each field's help is its flag's)."""

    preset: str = option("a shipped main preset (embedded, cove-small) or a .yaml file of your own (default: "
                         "embedded)", "embedded")
    run_dir: str = option("where every stage writes (default: runs/main, in the current folder)", "runs/main")
    data_dir: Optional[str] = option("local data folder laid out as docs/data.md describes (real tasks); default: "
                                     "Hub dataset ids")
    vectors: Optional[str] = option("word vectors file (GloVe/word2vec text, .txt/.gz/.xz) instead of the preset's "
                                    "(e.g. glove.840B.300d.txt)")
    vectors_lowercase: bool = option("look words up lower-cased in a cased vectors file (GloVe 840B)", False)
    tasks: Optional[List[str]] = option("classification tasks instead of the preset's: "
                                        f"{', '.join(CLASSIFICATION_TASKS)} (need --data-dir or the Hub) or a folder "
                                        "with train/validation/test.tsv (text, label)")
    repo_id: Optional[str] = option("Hub repo id for the card / dry-run folder (default: the preset's)")
    quick: bool = option("reduced sizes (the preset's quick_args): a smoke run", False)
    full_curves: bool = option("the full learning curves (the preset's curves.full: more seeds, and encoders "
                               "pretrained on fewer translation pairs); about 4 hours on 2 CPU cores for the "
                               "embedded default, in a run folder of its own (--run-dir)", False)
    threads: Optional[int] = option("torch/OpenMP threads per stage")
    accelerate_config: Optional[str] = option("run pretraining with `accelerate launch --config_file FILE` (GPU, "
                                              "multi-GPU, DDP): a file, or a shipped one by name (cpu, cpu_ddp, "
                                              "single_gpu, multi_gpu)")
    overwrite: bool = option("delete --run-dir first", False)


def load_main_preset(name: str) -> dict:
    try:
        return load_preset(name, "main", known_keys=PRESET_KEYS, required_keys=REQUIRED_PRESET_KEYS)
    except PresetError as e:
        raise InputError(str(e)) from None


def vectors_file_dim(path: Path) -> int:
    """Dimension of a GloVe/word2vec text file from its first lines; InputError when it is not one."""
    if not path.is_file():
        raise InputError(f"vectors file not found: {path}")
    try:
        with open_text(path, errors="replace") as f:
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
            t["data"] = str(preset_path(preset["path"], t["data"]))
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
    if pre.get("dataset") == "tsv" and not (preset_path(preset["path"], pre["data"]) / "train.tsv").is_file():
        raise InputError(f"pretraining data not found: {preset_path(preset['path'], pre['data'])}/train.tsv")
    if data_dir is None:
        return
    named = [t["task"] for t in tasks if t["task"] != "tsv"] + list(preset["vocab"].get("tasks") or [])
    if pre.get("preset"):
        mt_preset = json.loads(preset_path(preset["path"], pre["preset"]).read_text())
        named.append(mt_preset.get("data", {}).get("dataset", "multi30k"))
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
    """A file relative to the current directory, else a shipped one: by name (`single_gpu`) or spelled as in the
    source tree (`configuration/accelerate/single_gpu.yaml`)."""
    if not given:
        return None
    try:
        return preset_file(given, "accelerate").resolve()
    except PresetError:
        raise InputError(f"--accelerate-config {given} not found") from None


def check_curves(preset: dict, tasks: list):
    """The preset's `curves` block (main_job.curves): known keys, one of the preset's classifier tasks (tasks given by
    --tasks replace them: the curves stage then says it has nothing to run), sizes and seeds given."""
    spec = preset.get("curves")
    if not spec:
        return
    unknown = set(spec) - CURVE_KEYS
    if unknown:
        raise InputError(f"preset {preset['name']}: curves has unknown keys {sorted(unknown)}; known: "
                         f"{sorted(CURVE_KEYS)}")
    preset_tasks = {t["name"] for t in preset["classifier"]["tasks"]}
    if spec.get("task") not in preset_tasks:
        raise InputError(f"preset {preset['name']}: curves.task {spec.get('task')!r} is not one of its classifier "
                         f"tasks ({', '.join(sorted(preset_tasks))})")
    for block in (spec, spec.get("full") or {}, spec.get("quick") or {}):
        for key in ("sizes", "seeds", "translation_pairs"):
            values = block.get(key, [1])
            if not isinstance(values, list) or not values or not all(isinstance(v, int) and v > 0 for v in values):
                raise InputError(f"preset {preset['name']}: curves {key} must be a list of positive integers, got "
                                 f"{values!r}")


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
    if options.full_curves and options.quick:
        raise InputError("--full-curves and --quick exclude each other")
    tasks = resolve_tasks(options.tasks, preset)
    check_data_dir(data_dir, options.data_dir, preset, tasks)
    vectors_file, dim = resolve_vectors(options, preset, data_dir)
    accelerate_config = resolve_accelerate_config(options.accelerate_config)
    check_curves(preset, tasks)
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
        "full_curves": bool(options.full_curves),
        "run_dir": str(Path(options.run_dir).resolve()),
        "accelerate_config": str(accelerate_config) if accelerate_config else None,
    }
