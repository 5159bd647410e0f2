"""The evaluation record: what a training run writes next to its checkpoint and what its model card is built from.

One JSON file describes the evaluation of ONE checkpoint. It names the checkpoint by a fingerprint (sha256 of its
config and of its safetensors weights), so a card can never be generated from the numbers of another model. It also
says what really happened: which encoder the head read (`describe_encoder`), how long the run trained
(`training.epochs_run` / `steps_run` / `stop_reason`). The schema is documented in `model_cards/README.md`;
`RECORD_SCHEMA` is its executable definition.

A writer (a training CLI, or a user's own `Trainer` script) calls, after `model.save_pretrained(ckpt)`:

    from modeling_cove.training.publishing.cards import describe_encoder, make_eval_record, write_eval_json
    record = make_eval_record(ckpt, task={...}, dataset={...}, metrics=[...],
                              training={"command": ..., "encoder": describe_encoder(encoder_dir), "epochs_run": ...})
    write_eval_json(ckpt / "eval_results.json", record)
"""

import datetime
import hashlib
import json
import math
import re
from pathlib import Path
from typing import Optional, Union

from ..common import papers

__all__ = ["check_record_matches_checkpoint", "checkpoint_fingerprint", "CheckpointError", "config_fingerprint",
           "describe_encoder", "EvalRecordError", "find_safetensors_weights", "load_eval_json", "make_eval_record",
           "read_config", "validate_eval_record", "weights_fingerprint", "write_eval_json"]

SCHEMA_VERSION = 1

# config.json keys that change when a checkpoint is re-saved or published without changing the model.
VOLATILE_CONFIG_KEYS = ("transformers_version", "_name_or_path", "auto_map", "custom_pipelines")

# Hub task ids a CoVe model is evaluated on (model-index `task.type`).
TASK_TYPES = ("text-classification", "question-answering", "translation", "feature-extraction", "token-classification")

# Metrics reported in percent (0..100), as in the paper's tables.
PERCENT_METRICS = ("accuracy", "f1", "exact_match", "bleu", "precision", "recall")

WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")

# What the MT-LSTM under a head really was (`training.encoder.kind`): trained on translation; randomly initialised
# and never trained; not read by the head at all (word vectors only); or not known.
ENCODER_KINDS = ("pretrained", "random", "unused", "unknown")

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
    return _read_json(path)


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
# What the run really used and did
# --------------------------------------------------------------------------------------------------------------


def describe_encoder(encoder, *, used: bool = True, name: Optional[str] = None) -> dict:
    """The `training.encoder` block for the encoder a head was built on, read from the encoder checkpoint itself.

    `encoder` is the encoder's folder (or Hub id). The checkpoint tells what it is: `mt_metrics.json` (written when
    an encoder is exported from a trained translation model) -> `pretrained`, with the translation run's test BLEU
    and epochs; `bilm_metrics.json` (an exported biLM encoder) -> `pretrained`, with its corpora, epochs and held-out
    perplexities; `conversion_info.json` (the converted Salesforce release) -> `pretrained`; `build_info.json` alone (a
    vocabulary checkpoint whose MT-LSTM was never trained) -> `random`. Anything else -> `unknown`. `used=False`
    (the head reads the word vectors only) -> `unused`, whatever the folder holds.
    """
    block = {"kind": "unknown", "path": str(encoder)}
    if name is not None:
        block["name"] = name
    if not used:
        block["kind"] = "unused"
        return block
    folder = Path(encoder)
    if not folder.is_dir():
        return block
    if (folder / "mt_metrics.json").is_file():
        block["kind"] = "pretrained"
        block["pretraining"] = _pretraining_summary(_read_json(folder / "mt_metrics.json"))
    elif (folder / "bilm_metrics.json").is_file():  # exported by modeling_cove.training.commands.train_bilm
        block["kind"] = "pretrained"
        block["pretraining"] = _bilm_summary(_read_json(folder / "bilm_metrics.json"))
    elif (folder / "conversion_info.json").is_file():
        block["kind"] = "pretrained"
        block["pretraining"] = {"source": "the Salesforce CoVe release (MT-LSTM trained on WMT 2017 English-German)",
                                "dataset": "wmt17"}
    elif (folder / "build_info.json").is_file():
        block["kind"] = "random"
    return block


def _read_json(path: Path) -> dict:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise CheckpointError(f"{path} is not valid JSON: {err}") from err
    if not isinstance(payload, dict):
        raise CheckpointError(f"{path} must hold a JSON object")
    return payload


def _run_progress(metrics: dict, summary: dict) -> list:
    """Add how far a pretraining run went (complete epochs, steps, why it stopped) to `summary`, from what its
    metrics JSON records; return its per-epoch records."""
    epochs = [epoch for epoch in metrics.get("epochs") or [] if isinstance(epoch, dict)]
    if epochs:
        summary["complete_epochs"] = sum(1 for epoch in epochs if epoch.get("complete", True))
    steps = metrics.get("global_step", epochs[-1].get("global_step") if epochs else None)
    if isinstance(steps, int):
        summary["steps_run"] = steps
    if isinstance(metrics.get("stop_reason"), str):
        summary["stop_reason"] = metrics["stop_reason"]
    return epochs


def _bilm_summary(metrics: dict) -> dict:
    """What a biLM pretraining run's metrics JSON says about the encoder (only what it records)."""
    summary = {"source": "ELMo-style bidirectional language model (this package's biLM pretraining)",
               "objective": "bilm"}
    corpora = (metrics.get("data") or {}).get("texts_per_corpus")
    if isinstance(corpora, dict) and corpora:
        summary["corpora"] = sorted(corpora)
    epochs = _run_progress(metrics, summary)
    last = epochs[-1] if epochs else {}
    for direction in ("forward", "backward"):
        value = last.get(f"heldout_{direction}_perplexity")
        if _is_number(value):
            summary[f"heldout_{direction}_perplexity"] = round(float(value), 2)
    return summary


def _pretraining_summary(metrics: dict) -> dict:
    """What a translation run's metrics JSON says about the encoder's pretraining (only what it records)."""
    summary = {}
    dataset = (metrics.get("settings") or {}).get("dataset")
    if isinstance(dataset, str):
        summary["dataset"] = dataset
    _run_progress(metrics, summary)
    test = metrics.get("test") or {}
    for key in ("bleu", "perplexity"):
        if _is_number(test.get(key)):
            summary[f"test_{key}"] = round(float(test[key]), 2)
    return summary


# --------------------------------------------------------------------------------------------------------------
# The schema: every field, whether it is required, and the rule its value follows
# --------------------------------------------------------------------------------------------------------------


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rule(test, wanted: str):
    """A rule: `test(value)` is true for a valid value; otherwise the problem is "must be <wanted>, got <value>"."""
    return lambda value: None if test(value) else f"must be {wanted}, got {value!r}"


TEXT = _rule(lambda v: isinstance(v, str) and v.strip(), "a non-empty string")
OBJECT = _rule(lambda v: isinstance(v, dict), "an object")
INTEGER = _rule(_is_int, "an integer")
NUMBER = _rule(_is_number, "a finite number")
SHA256 = _rule(lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v), "64 lowercase hex digits (sha256)")
STRINGS = _rule(lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v), "a list of strings")


def _paper_column(value):
    columns = papers.table2_columns()
    return None if value in columns else f"must be one of the paper's Table 2 columns {columns}, got {value!r}"


REQUIRED, OPTIONAL = True, False
# dotted path -> (required, rule). A field inside a block is checked only when the block is an object.
RECORD_SCHEMA = {
    "schema_version": (REQUIRED, _rule(lambda v: v == SCHEMA_VERSION, str(SCHEMA_VERSION))),
    "model": (REQUIRED, OBJECT),
    "model.architecture": (REQUIRED, TEXT),
    "model.config_sha256": (REQUIRED, SHA256),
    "model.weights_sha256": (REQUIRED, SHA256),
    "model.metrics_source": (OPTIONAL, TEXT),
    "task": (REQUIRED, OBJECT),
    "task.type": (REQUIRED, _rule(lambda v: v in TASK_TYPES, f"one of {TASK_TYPES}")),
    "task.name": (OPTIONAL, TEXT),
    "dataset": (REQUIRED, OBJECT),
    "dataset.name": (REQUIRED, TEXT),
    "dataset.id": (REQUIRED, TEXT),
    "dataset.split": (REQUIRED, TEXT),
    "dataset.key": (OPTIONAL, TEXT),
    "dataset.config": (OPTIONAL, TEXT),
    "dataset.source": (OPTIONAL, TEXT),
    "dataset.num_examples": (OPTIONAL, _rule(lambda v: _is_int(v) and v >= 1, "an integer >= 1")),
    "training": (REQUIRED, OBJECT),
    "training.command": (REQUIRED, TEXT),
    "training.train_split": (OPTIONAL, TEXT),
    "training.base_model": (OPTIONAL, TEXT),
    "training.commit": (OPTIONAL, TEXT),
    "training.datasets": (OPTIONAL, STRINGS),
    "training.notes": (OPTIONAL, STRINGS),
    "training.num_train_examples": (OPTIONAL, INTEGER),
    "training.seed": (OPTIONAL, INTEGER),
    "training.epochs_run": (OPTIONAL, _rule(lambda v: _is_number(v) and v >= 0, "a number >= 0 (fractions allowed)")),
    "training.steps_run": (OPTIONAL, _rule(lambda v: _is_int(v) and v >= 0, "an integer >= 0")),
    "training.stop_reason": (OPTIONAL, TEXT),
    "training.hyperparameters": (OPTIONAL, OBJECT),
    "training.word_vectors": (OPTIONAL, _rule(
        lambda v: isinstance(v, dict) and isinstance(v.get("name"), str) and isinstance(v.get("stand_in"), bool),
        '{"name": str, "stand_in": bool}')),
    # a free-text label (older records) is shown as a label, never as a claim of pretraining
    "training.encoder": (OPTIONAL, _rule(lambda v: isinstance(v, dict) or isinstance(v, str) and v.strip(),
                                         "an object {kind, ...} (see describe_encoder) or a string")),
    "training.encoder.kind": (REQUIRED, _rule(lambda v: v in ENCODER_KINDS, f"one of {ENCODER_KINDS}")),
    "training.encoder.name": (OPTIONAL, TEXT),
    "training.encoder.path": (OPTIONAL, TEXT),
    "training.encoder.pretraining": (OPTIONAL, OBJECT),
    "paper_column": (OPTIONAL, _paper_column),
}
METRIC_SCHEMA = {"type": (REQUIRED, TEXT), "name": (OPTIONAL, TEXT), "value": (REQUIRED, NUMBER)}


def _schema_problems(block: dict, schema: dict, prefix: str = "") -> list:
    """What is wrong with `block` under `schema`, each problem naming its field (`prefix` + dotted path)."""
    problems = []
    for path, (required, rule) in schema.items():
        *parents, key = path.split(".")
        parent = block
        for name in parents:
            parent = parent.get(name) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue  # the block itself is missing or malformed: that is the problem reported
        value = parent.get(key)
        problem = rule(value) if value is not None else "is required" if required else None
        if problem:
            problems.append(f"{prefix}{path} {problem}")
    return problems


def _metric_problems(metrics) -> list:
    if not isinstance(metrics, list) or not metrics:
        return ["metrics must be a non-empty list of {type, value[, name]}"]
    problems, seen = [], set()
    for i, metric in enumerate(metrics):
        if not isinstance(metric, dict):
            problems.append(f"metrics[{i}] must be an object")
            continue
        problems += _schema_problems(metric, METRIC_SCHEMA, f"metrics[{i}].")
        kind, value = metric.get("type"), metric.get("value")
        if kind in PERCENT_METRICS and _is_number(value) and not 0.0 <= value <= 100.0:
            problems.append(f"metrics[{i}].value ({kind}) is in percent, 0..100; got {value}")
        if kind in seen:
            problems.append(f"metrics[{i}].type {kind!r} appears twice")
        seen.add(kind)
    return problems


def validate_eval_record(record) -> dict:
    """Check an evaluation record against schema version 1; raise `EvalRecordError` listing every problem."""
    if not isinstance(record, dict):
        raise EvalRecordError(f"an evaluation record is a JSON object, got {type(record).__name__}")
    problems = _schema_problems(record, RECORD_SCHEMA) + _metric_problems(record.get("metrics"))
    encoder = record["training"].get("encoder") if isinstance(record.get("training"), dict) else None
    if isinstance(encoder, dict) and encoder.get("pretraining") and encoder.get("kind") != "pretrained":
        problems.append(f"training.encoder.pretraining is only for kind 'pretrained', not {encoder.get('kind')!r}")
    if problems:
        raise EvalRecordError("invalid evaluation record:\n  - " + "\n  - ".join(problems))
    return record


# --------------------------------------------------------------------------------------------------------------
# Records
# --------------------------------------------------------------------------------------------------------------


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


def _load_checked_json(path: PathLike, validate, error: type, what: str):
    """The JSON file at `path` passed through `validate`; an `error` that names the file when it is missing, is no
    JSON, or fails `validate` (which raises `error`)."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} not found: {path}")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise error(f"{path} is not valid JSON: {err}") from err
    try:
        return validate(payload)
    except error as err:
        raise error(f"{path}: {err}") from None


def load_eval_json(path: PathLike) -> dict:
    return _load_checked_json(path, validate_eval_record, EvalRecordError, "evaluation JSON")


def check_record_matches_checkpoint(record: dict, checkpoint_dir: PathLike) -> None:
    """Raise `EvalRecordError` unless `record` was written for exactly this checkpoint (config and weights)."""
    actual = checkpoint_fingerprint(checkpoint_dir)
    mismatches = []
    for key in ("architecture", "config_sha256", "weights_sha256"):
        recorded, found = record["model"][key], actual[key]
        if recorded != found:
            shown = (repr(recorded), repr(found)) if key == "architecture" else (f"{recorded[:12]}…", f"{found[:12]}…")
            mismatches.append(f"{key.replace('_', ' ')} {shown[0]} != checkpoint's {shown[1]}")
    if mismatches:
        raise EvalRecordError(
            f"the evaluation JSON describes another model than {checkpoint_dir}: " + "; ".join(mismatches)
            + ". Use the JSON written when this checkpoint was evaluated (or re-run the evaluation)."
        )
