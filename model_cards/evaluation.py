"""The evaluation JSON: what the training/evaluation scripts write and what model cards are generated from.

One JSON file describes the evaluation of ONE checkpoint. It names the checkpoint by a fingerprint (sha256 of its
config and of its safetensors weights), so a card can never be generated from the numbers of another model.
The schema is documented in `model_cards/README.md`; `validate_eval_record` is its executable definition.

Writers (train_classifier, train_qa, train_mt, evaluate) call, after `model.save_pretrained(ckpt)`:

    from model_cards.evaluation import make_eval_record, write_eval_json
    record = make_eval_record(ckpt, task={...}, dataset={...}, metrics=[...], training={...})
    write_eval_json(ckpt / "eval_results.json", record)
"""

import datetime
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Optional, Union

SCHEMA_VERSION = 1

# config.json keys that change when a checkpoint is re-saved or published without changing the model.
VOLATILE_CONFIG_KEYS = ("transformers_version", "_name_or_path", "auto_map", "custom_pipelines")

# Hub task ids a CoVe model is evaluated on (model-index `task.type`).
TASK_TYPES = ("text-classification", "question-answering", "translation", "feature-extraction")

# Metrics reported in percent (0..100), as in the paper's tables.
PERCENT_METRICS = ("accuracy", "f1", "exact_match", "bleu")

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")

_SHA256 = re.compile(r"^[0-9a-f]{64}$")

PathLike = Union[str, Path]


class EvalRecordError(ValueError):
    """The evaluation JSON is malformed or does not describe the checkpoint it is used with."""


class CheckpointError(ValueError):
    """The checkpoint directory cannot be published as it is (missing or pickled weights, no config, ...)."""


# --------------------------------------------------------------------------------------------------------------
# Fingerprints
# --------------------------------------------------------------------------------------------------------------


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def config_fingerprint(config: dict) -> str:
    """sha256 of config.json's content without `VOLATILE_CONFIG_KEYS`, serialised canonically
    (`json.dumps(..., sort_keys=True, separators=(",", ":"))`). Publishing adds `auto_map`/`custom_pipelines`,
    which leaves the fingerprint unchanged."""
    stable = {key: value for key, value in config.items() if key not in VOLATILE_CONFIG_KEYS}
    return hashlib.sha256(json.dumps(stable, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def find_safetensors_weights(checkpoint_dir: PathLike) -> list:
    """The safetensors weight files of a checkpoint: `[model.safetensors]`, or the index plus every shard it names.

    Raises `CheckpointError` when there are none, naming pickled weights (`.bin`, `.pt`, ...) if those are all
    there is: they are refused (loading a pickle can run code).
    """
    checkpoint_dir = Path(checkpoint_dir)
    single = checkpoint_dir / WEIGHTS_NAME
    index = checkpoint_dir / WEIGHTS_INDEX_NAME
    if single.is_file():
        return [single]
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (ValueError, KeyError, TypeError) as err:
            raise CheckpointError(f"{index} is not a valid safetensors index (no 'weight_map'): {err}") from err
        shards = sorted({str(name) for name in weight_map.values()})
        missing = [name for name in shards if not (checkpoint_dir / name).is_file()]
        if missing:
            raise CheckpointError(f"{index} names shards that are missing from {checkpoint_dir}: {missing}")
        return [index] + [checkpoint_dir / name for name in shards]
    pickles = sorted(p.name for p in checkpoint_dir.iterdir() if p.suffix in PICKLE_SUFFIXES) \
        if checkpoint_dir.is_dir() else []
    if pickles:
        raise CheckpointError(
            f"{checkpoint_dir} has only pickled weights {pickles}; refusing to publish them. Save the model with "
            f"safetensors: `Model.from_pretrained(dir).save_pretrained(dir)` writes {WEIGHTS_NAME}."
        )
    raise CheckpointError(
        f"no weights in {checkpoint_dir}: expected {WEIGHTS_NAME} (or {WEIGHTS_INDEX_NAME} with its shards)"
    )


def weights_fingerprint(checkpoint_dir: PathLike) -> str:
    """sha256 of `model.safetensors` (the same value the Hub shows as the file's LFS oid). For a sharded checkpoint:
    sha256 of the text `"<shard name>:<shard sha256>\\n"` over the shards in name order."""
    files = find_safetensors_weights(checkpoint_dir)
    if len(files) == 1:
        return _sha256_file(files[0])
    lines = "".join(f"{path.name}:{_sha256_file(path)}\n" for path in files[1:])
    return hashlib.sha256(lines.encode("utf-8")).hexdigest()


def read_config(checkpoint_dir: PathLike) -> dict:
    path = Path(checkpoint_dir) / "config.json"
    if not path.is_file():
        raise CheckpointError(f"no config.json in {checkpoint_dir}: not a saved transformers checkpoint")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise CheckpointError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(config, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return config


def checkpoint_fingerprint(checkpoint_dir: PathLike) -> dict:
    """The `model` block of an evaluation record for the checkpoint in `checkpoint_dir`."""
    config = read_config(checkpoint_dir)
    architectures = config.get("architectures") or []
    return {
        "architecture": architectures[0] if architectures else None,
        "config_sha256": config_fingerprint(config),
        "weights_sha256": weights_fingerprint(checkpoint_dir),
    }


# --------------------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------------------


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_eval_record(record) -> dict:
    """Check an evaluation record against schema version 1; raise `EvalRecordError` listing every problem."""
    problems = []

    def need(block: dict, key: str, kind, where: str, required: bool = True):
        value = block.get(key) if isinstance(block, dict) else None
        if value is None:
            if required:
                problems.append(f"{where}.{key} is required")
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
            problems.append(f"{where}.{key} must be {getattr(kind, '__name__', kind)}, got {type(value).__name__}")
            return None
        if isinstance(value, str) and not value.strip():
            problems.append(f"{where}.{key} must not be empty")
            return None
        return value

    if not isinstance(record, dict):
        raise EvalRecordError(f"an evaluation record is a JSON object, got {type(record).__name__}")
    if record.get("schema_version") != SCHEMA_VERSION:
        problems.append(f"schema_version must be {SCHEMA_VERSION}, got {record.get('schema_version')!r}")

    model = need(record, "model", dict, "record")
    if model is not None:
        need(model, "architecture", str, "model")
        for key in ("config_sha256", "weights_sha256"):
            value = need(model, key, str, "model")
            if value is not None and not _SHA256.match(value):
                problems.append(f"model.{key} must be 64 lowercase hex digits (sha256), got {value!r}")
        need(model, "metrics_source", str, "model", required=False)

    task = need(record, "task", dict, "record")
    if task is not None:
        task_type = need(task, "type", str, "task")
        if task_type is not None and task_type not in TASK_TYPES:
            problems.append(f"task.type must be one of {TASK_TYPES}, got {task_type!r}")
        need(task, "name", str, "task", required=False)

    dataset = need(record, "dataset", dict, "record")
    if dataset is not None:
        for key in ("name", "id", "split"):
            need(dataset, key, str, "dataset")
        for key in ("key", "config", "source"):
            need(dataset, key, str, "dataset", required=False)
        count = dataset.get("num_examples")
        if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
            problems.append(f"dataset.num_examples must be a positive integer, got {count!r}")

    metrics = record.get("metrics")
    if not isinstance(metrics, list) or not metrics:
        problems.append("metrics must be a non-empty list of {type, value[, name]}")
    else:
        seen = set()
        for i, metric in enumerate(metrics):
            where = f"metrics[{i}]"
            if not isinstance(metric, dict):
                problems.append(f"{where} must be an object")
                continue
            metric_type = need(metric, "type", str, where)
            need(metric, "name", str, where, required=False)
            value = metric.get("value")
            if not _is_number(value):
                problems.append(f"{where}.value must be a finite number, got {value!r}")
            elif metric_type in PERCENT_METRICS and not 0.0 <= value <= 100.0:
                problems.append(f"{where}.value ({metric_type}) is in percent, 0..100; got {value}")
            if metric_type in seen:
                problems.append(f"{where}.type {metric_type!r} appears twice")
            seen.add(metric_type)

    training = need(record, "training", dict, "record")
    if training is not None:
        need(training, "command", str, "training")
        for key in ("train_split", "encoder", "base_model", "commit"):
            need(training, key, str, "training", required=False)
        datasets = training.get("datasets")
        if datasets is not None and (not isinstance(datasets, list) or not all(isinstance(d, str) for d in datasets)):
            problems.append("training.datasets must be a list of Hub dataset ids")
        notes = training.get("notes")
        if notes is not None and (not isinstance(notes, list) or not all(isinstance(n, str) for n in notes)):
            problems.append("training.notes must be a list of strings")
        vectors = training.get("word_vectors")
        if vectors is not None:
            if not isinstance(vectors, dict) or not isinstance(vectors.get("name"), str) \
                    or not isinstance(vectors.get("stand_in"), bool):
                problems.append("training.word_vectors must be {\"name\": str, \"stand_in\": bool}")
        for key in ("num_train_examples", "seed"):
            value = training.get(key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                problems.append(f"training.{key} must be an integer, got {value!r}")
        hyper = training.get("hyperparameters")
        if hyper is not None and not isinstance(hyper, dict):
            problems.append("training.hyperparameters must be an object")

    paper_column = record.get("paper_column")
    if paper_column is not None and not isinstance(paper_column, str):
        problems.append("paper_column must be a string (a column of the paper's Table 2)")

    if problems:
        raise EvalRecordError("invalid evaluation record:\n  - " + "\n  - ".join(problems))
    return record


def make_eval_record(
    checkpoint_dir: PathLike,
    *,
    task: dict,
    dataset: dict,
    metrics: list,
    training: dict,
    paper_column: Optional[str] = None,
    metrics_source: Optional[str] = None,
    created: Optional[str] = None,
) -> dict:
    """Build (and validate) the evaluation record of the checkpoint saved in `checkpoint_dir`."""
    model = checkpoint_fingerprint(checkpoint_dir)
    if metrics_source is not None:
        model["metrics_source"] = metrics_source
    record = {
        "schema_version": SCHEMA_VERSION,
        "model": model,
        "task": dict(task),
        "dataset": dict(dataset),
        "metrics": [dict(metric) for metric in metrics],
        "training": dict(training),
        "created": created or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if paper_column is not None:
        record["paper_column"] = paper_column
    return validate_eval_record(record)


def write_eval_json(path: PathLike, record: dict) -> Path:
    path = Path(path)
    validate_eval_record(record)
    path.write_text(json.dumps(record, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def load_eval_json(path: PathLike) -> dict:
    path = Path(path)
    if not path.is_file():
        raise EvalRecordError(f"evaluation JSON not found: {path}")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise EvalRecordError(f"{path} is not valid JSON: {err}") from err
    try:
        return validate_eval_record(record)
    except EvalRecordError as err:
        raise EvalRecordError(f"{path}: {err}") from None


def check_record_matches_checkpoint(record: dict, checkpoint_dir: PathLike) -> None:
    """Raise `EvalRecordError` unless `record` was written for exactly this checkpoint (config and weights)."""
    actual = checkpoint_fingerprint(checkpoint_dir)
    expected = record["model"]
    mismatches = []
    if expected["architecture"] != actual["architecture"]:
        mismatches.append(f"architecture {expected['architecture']!r} != checkpoint's {actual['architecture']!r}")
    if expected["config_sha256"] != actual["config_sha256"]:
        mismatches.append(
            f"config sha256 {expected['config_sha256'][:12]}… != checkpoint's {actual['config_sha256'][:12]}…"
        )
    if expected["weights_sha256"] != actual["weights_sha256"]:
        mismatches.append(
            f"weights sha256 {expected['weights_sha256'][:12]}… != checkpoint's {actual['weights_sha256'][:12]}…"
        )
    if mismatches:
        raise EvalRecordError(
            f"the evaluation JSON describes another model than {checkpoint_dir}: " + "; ".join(mismatches)
            + ". Use the JSON written when this checkpoint was evaluated (or re-run the evaluation)."
        )
