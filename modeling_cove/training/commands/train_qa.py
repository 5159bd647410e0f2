"""Training the DCN (`CoveForQuestionAnswering`, docs/paper.md §4) on SQuAD-style data with `transformers.Trainer`:
settings (`configuration/tasks/squad.yaml`) and DCN sizes (`configuration/models/dcn-squad.json`), windowed
preprocessing (`modeling_cove.squad_preprocessing`), the frozen encoder's feature cache, EM/F1 of the predicted
spans, the sliding-window word-overlap baseline, and what a run writes (the model, its evaluation JSON for a model
card, predictions, metrics and curves). Command line: `cove-train-qa` (also `python -m modeling_cove.training.commands.train_qa`);
from Python `train_qa(QAOptions(...))`.

    # stand-in vectors only (the MT-LSTM is not run); CPU-sized DCN (l = 100, pool 8), 50 minutes of training
    cove-train-qa --checkpoint runs/cove-s-squad --data-dir DATA --dcn-input vectors \\
        --model-override dcn_hidden_size=100 dcn_pool_size=8 --output-dir runs/dcn-squad-vectors
    # vectors + CoVe-S (same checkpoint, so the same vocabulary and vectors)
    cove-train-qa --checkpoint runs/cove-s-squad --data-dir DATA --dcn-input vectors+cove \\
        --model-override dcn_hidden_size=100 dcn_pool_size=8 --output-dir runs/dcn-squad-cove-s
    # smoke run
    cove-train-qa --checkpoint runs/vocab-squad --data-dir DATA --output-dir /tmp/qa \\
        --limit-train 64 --limit-eval 32 --max-steps 3 --model-override dcn_hidden_size=20 dcn_pool_size=4
    # several processes (DDP through the Trainer; --batch-size stays the global batch)
    accelerate launch --num_processes 2 -m modeling_cove.training.commands.train_qa ...

DATA is a local data folder laid out as docs/data.md describes: there only SQuAD dev exists, split by article (~80/20,
fixed seed, in modeling_cove/data.py): train on the first part, evaluate on the held-out articles. Without
--data-dir the Hub `rajpurkar/squad` train/validation splits are used.

`--checkpoint` is a CoVe checkpoint (tokenizer + word vectors + MT-LSTM), e.g. from cove-build-vocab (`--tasks squad`)
or cove-export-encoder (`--vocab-from`, a trained MT-LSTM with a SQuAD vocabulary). Hyperparameters come from
`--task-config` (default: the shipped squad settings) and the DCN sizes from `--model-preset` (default: the shipped
dcn-squad preset); command-line flags override both.

The encoder is frozen: with CoVe inputs the MT-LSTM features of every distinct question and context window are
computed once (modeling_cove/feature_cache.py; kept on disk too with --cache-dir) and reused by every epoch
(`--no-cache` runs the MT-LSTM in every step instead). Training stops after `epochs`, `--max-steps` or
`--time-budget-minutes`, whichever comes first; metrics.json says which (`stop_reason`). Under `accelerate launch` /
`torchrun` every process trains; the main process alone writes the feature cache (the others wait, then read it),
scores the held-out questions, runs the baseline and writes the outputs.

Outputs in --output-dir: `model/` (checkpoint + tokenizer; loads with
`pipeline("question-answering", model=..., trust_remote_code=True)`), `eval_results.json` (the model card's input),
`predictions.json`, `metrics.json` (command, commit, data and preprocessing counts, per-epoch history, final EM/F1,
baseline EM/F1, timings, stop reason), `curves.png` (loss and F1).
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

import torch
from transformers import TrainerCallback

from ..common.cli import A_FOLDER, AT_LEAST_ONE, POSITIVE, REQUIRED, fail, option, parse_options
from ..data.collators import QACollator
from ..common.presets import CONFIGURATION, load_preset, load_settings
from ..common.run_info import git_commit, machine_info, plot_curves
from ..common.files import write_json
from ..loops.accelerate_loop import end_run
from ..loops.trainer import TimeBudget, log, stop_reason, training_arguments

__all__ = ["attach_cache", "check_config_keys", "curve_panels", "DCN_INPUTS", "EpochSquad", "finish_run", "load_model",
           "main", "make_training_arguments", "model_overrides", "predict", "prepare_data", "QAConfigError",
           "QAOptions", "resolve_qa_settings", "rows_of", "run_baseline", "run_metrics", "score", "slice_evaluator",
           "squad_metric", "train_qa", "write_eval_results"]

SQUAD_METRIC = Path(__file__).resolve().parents[2] / "metrics" / "squad_v1_cove"
DEFAULT_TASK_CONFIG = str(CONFIGURATION / "tasks" / "squad.yaml")
DEFAULT_MODEL_PRESET = str(CONFIGURATION / "models" / "dcn-squad.json")
DCN_INPUTS = ("vectors+cove", "vectors", "cove")
PAPER_COLUMN = {"vectors": "GloVe", "vectors+cove": "+CoVe-S"}  # Table 2's names (a card checks the encoder)

# every key a QA settings yaml may set, with its default (a key not listed here is an error: catches typos)
SETTING_DEFAULTS = {
    "max_length": 384, "doc_stride": 128, "max_question_length": 64,
    "epochs": 10, "batch_size": 32, "eval_batch_size": 64, "learning_rate": 1e-3, "weight_decay": 0.0,
    "max_grad_norm": 5.0, "lr_scheduler": "constant", "max_steps": -1, "time_budget_minutes": None,
    "logging_steps": 20, "seed": 0, "epoch_eval_limit": 500,
    "baseline_tune_examples": 800, "baseline_window_grid": [2, 3, 5, 8], "baseline_span_grid": [1, 2, 3, 4],
}


class QAConfigError(ValueError):
    """A bad QA setting, model override or checkpoint; the message names it."""


@dataclass
class QAOptions:
    """One DCN run; the fields are the flags of cove-train-qa (None: the settings yaml's value)."""

    checkpoint: str = option("CoVe checkpoint directory (tokenizer + vectors + MT-LSTM); --encoder, as the other "
                             "commands name it", REQUIRED, aliases=["--encoder"])
    output_dir: str = option("run folder: model/, eval_results.json, predictions.json, metrics.json, curves.png",
                             REQUIRED)
    data_dir: Optional[str] = option("local data folder laid out as docs/data.md describes (default: Hub ids)",
                                     check=A_FOLDER)
    task_config: str = option("YAML with training hyperparameters (default: the shipped squad settings)",
                              DEFAULT_TASK_CONFIG)
    model_preset: str = option("JSON with CoveConfig DCN fields (default: the shipped dcn-squad preset)",
                               DEFAULT_MODEL_PRESET)
    dcn_input: Optional[Literal[DCN_INPUTS]] = option("what the DCN reads per token (overrides the preset)")
    model_override: list[str] = option("further CoveConfig overrides, e.g. dcn_hidden_size=100 (values parsed as "
                                       "JSON)", [], nargs="*", metavar="KEY=VALUE")
    epochs: Optional[float] = option("override the settings yaml", check=POSITIVE)
    batch_size: Optional[int] = option("the global batch (a multiple of the number of processes)",
                                       check=AT_LEAST_ONE)
    learning_rate: Optional[float] = option("override the settings yaml", check=POSITIVE)
    max_steps: Optional[int] = option("stop after this many optimizer steps")
    time_budget_minutes: Optional[float] = option("stop training after this long", check=POSITIVE)
    seed: Optional[int] = option("override the settings yaml")
    limit_train: Optional[int] = option("use only the first N training questions", check=AT_LEAST_ONE)
    limit_eval: Optional[int] = option("use only the first N held-out questions", check=AT_LEAST_ONE)
    no_cache: bool = option("run the frozen MT-LSTM in every step (slow)", False)
    cache_dir: Optional[str] = option("also keep the CoVe features on disk here (safetensors, keyed by the encoder "
                                      "weights, the layers and the token ids) for later runs; default: in memory only")
    cache_dtype: Literal["float32", "float16"] = option("storage type of the cached CoVe features (float16 halves "
                                                        "the memory)", "float32")
    no_baseline: bool = option("skip the sliding-window baseline", False)
    threads: Optional[int] = option("torch.set_num_threads", check=AT_LEAST_ONE)
    overwrite: bool = option("replace an existing output folder", False)


# ---------------------------------------------------------------------------------------------------------------
# settings, model
# ---------------------------------------------------------------------------------------------------------------


def resolve_qa_settings(options: QAOptions) -> dict:
    """SETTING_DEFAULTS < the settings yaml < the options' flags (None ignored); unknown yaml keys are refused."""
    overrides = {name: getattr(options, name) for name in ("epochs", "batch_size", "learning_rate", "max_steps",
                                                          "time_budget_minutes", "seed")}
    settings, source, _ = load_settings(SETTING_DEFAULTS, options.task_config, "tasks", overrides)
    return {**settings, "path": source}


def check_config_keys(keys, source: str):
    """Raise QAConfigError when a key is not a CoveConfig field (the close match named)."""
    from modeling_cove.configuration_cove import check_field_names

    try:
        check_field_names(keys, source)
    except ValueError as err:
        raise QAConfigError(str(err)) from None


def model_overrides(options: QAOptions) -> dict:
    """The preset's CoveConfig fields < `model_override` KEY=VALUE items (values parsed as JSON) < `dcn_input`;
    keys that are not CoveConfig fields are refused."""
    preset = {k: v for k, v in load_preset(options.model_preset, "models").items()
              if not k.startswith("_") and k != "path"}
    check_config_keys(preset, options.model_preset)
    for item in options.model_override:
        if "=" not in item:
            raise QAConfigError(f"--model-override expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        check_config_keys([key], "--model-override")
        try:
            preset[key] = json.loads(value)
        except json.JSONDecodeError:
            preset[key] = value
    if options.dcn_input is not None:
        if options.dcn_input not in DCN_INPUTS:
            raise QAConfigError(f"dcn_input must be one of {DCN_INPUTS}, got {options.dcn_input!r}")
        preset["dcn_input"] = options.dcn_input
    return preset


def load_model(checkpoint: str, overrides: dict):
    """(CoveForQuestionAnswering on the CoVe checkpoint's encoder with `overrides` set, its tokenizer)."""
    from transformers import AutoConfig, AutoTokenizer

    from modeling_cove import CoveForQuestionAnswering

    if not (Path(checkpoint) / "config.json").is_file():
        raise QAConfigError(f"--checkpoint {checkpoint} is not a checkpoint directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    config = AutoConfig.from_pretrained(checkpoint)
    if config.model_type != "cove":
        raise QAConfigError(f"{checkpoint} is not a CoVe checkpoint (model_type {config.model_type!r})")
    for key, value in overrides.items():
        setattr(config, key, value)
    model, info = CoveForQuestionAnswering.from_pretrained(checkpoint, config=config, output_loading_info=True)
    missing_encoder = [k for k in info["missing_keys"] if k.startswith("cove.")]
    if missing_encoder:
        raise QAConfigError(f"{checkpoint} lacks encoder weights {missing_encoder[:5]}: is it a CoVe checkpoint?")
    if len(tokenizer) != config.vocab_size:
        raise QAConfigError(f"tokenizer has {len(tokenizer)} entries but the checkpoint {config.vocab_size} vectors")
    return model, tokenizer


# ---------------------------------------------------------------------------------------------------------------
# prediction, scoring, baseline
# ---------------------------------------------------------------------------------------------------------------


def rows_of(features: dict, keys) -> list:
    """The feature columns `keys` (those present) as a list of row dicts."""
    keys = [k for k in keys if k in features]
    return [dict(zip(keys, values)) for values in zip(*(features[k] for k in keys))]


@torch.no_grad()
def predict(model, examples, features: dict, collator, batch_size: int, max_answer_length: int) -> dict:
    """question id -> predicted answer text (best span over the windows of each question)."""
    from tqdm.auto import tqdm

    from modeling_cove.squad_preprocessing import extract_answers

    model.eval()
    device = next(model.parameters()).device
    rows = rows_of(features, ["input_ids", "token_type_ids", "question_key", "context_key"])
    order = sorted(range(len(rows)), key=lambda i: len(rows[i]["input_ids"]))
    windows = {}
    for begin in tqdm(range(0, len(order), batch_size), desc="predicting", unit=" batches"):
        index = order[begin: begin + batch_size]
        batch = {k: v.to(device) for k, v in collator([rows[i] for i in index]).items()}
        out = model(**batch)
        for row, i in enumerate(index):
            example = features["example_index"][i]
            windows.setdefault(example, []).append(
                (out.start_logits[row].cpu(), out.end_logits[row].cpu(), features["offset_mapping"][i]))
    contexts, ids = examples["context"], examples["id"]
    predictions = {}
    for example, ws in windows.items():
        best = extract_answers(contexts[example], ws, max_answer_length, top_k=1)
        predictions[ids[example]] = best[0]["answer"] if best else ""
    return predictions


def squad_metric():
    """Our SQuAD v1.1 EM/F1 `evaluate` module, loaded offline by path."""
    import evaluate

    return evaluate.load(str(SQUAD_METRIC))


def score(metric, predictions: dict, examples) -> dict:
    """EM/F1 (percent) of `predictions` (id -> text) against the examples they cover."""
    refs = [{"id": i, "answers": a} for i, a in zip(examples["id"], examples["answers"]) if i in predictions]
    preds = [{"id": r["id"], "prediction_text": predictions[r["id"]]} for r in refs]
    return metric.compute(predictions=preds, references=refs)


def run_baseline(train, validation, settings: dict, metric) -> dict:
    """Tune (window, max_span) of the word-overlap baseline on a slice of the training split, then evaluate."""
    from modeling_cove.squad_preprocessing import sliding_window_answer

    tune = train.shuffle(seed=0).select(range(min(len(train), settings["baseline_tune_examples"])))
    best = None
    for window in settings["baseline_window_grid"]:
        for span in settings["baseline_span_grid"]:
            preds = {r["id"]: sliding_window_answer(r["question"], r["context"], window, span)["answer"] for r in tune}
            f1 = score(metric, preds, tune)["f1"]
            if best is None or f1 > best[0]:
                best = (f1, window, span)
    _, window, span = best
    preds = {r["id"]: sliding_window_answer(r["question"], r["context"], window, span)["answer"] for r in validation}
    result = score(metric, preds, validation)
    return {"window": window, "max_span": span, "tuned_on_train_examples": len(tune),
            "exact_match": result["exact_match"], "f1": result["f1"]}


class EpochSquad(TrainerCallback):
    """EM/F1 on (a slice of) the held-out questions after every epoch, on the main process (`history`)."""

    def __init__(self, eval_fn):
        self.eval_fn, self.history = eval_fn, []

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        if not state.is_world_process_zero:
            return
        started = time.time()
        result = self.eval_fn(model)
        self.history.append({"epoch": round(state.epoch, 3), "step": state.global_step, **result,
                             "eval_seconds": round(time.time() - started, 1)})
        print(f"epoch {state.epoch:.2f}: held-out slice EM {result['exact_match']:.2f} F1 {result['f1']:.2f}",
              flush=True)
        model.train()


def curve_panels(log_history: list, history: list, baseline=None) -> list:
    """`run_info.plot_curves` panels of a DCN run: losses by step, and EM/F1 on the held-out slice by step."""
    train = [(h["step"], h["loss"]) for h in log_history if "loss" in h]
    evals = [(h["step"], h["eval_loss"]) for h in log_history if "eval_loss" in h]
    steps = [h["step"] for h in history]
    return [
        {"title": "loss", "xlabel": "step", "ylabel": "loss",
         "series": {"train loss": ([s for s, _ in train], [v for _, v in train]),
                    "held-out loss": ([s for s, _ in evals], [v for _, v in evals])}},
        {"title": "held-out slice", "xlabel": "step", "ylabel": "held-out slice (%)",
         "series": {"F1": (steps, [h["f1"] for h in history]), "EM": (steps, [h["exact_match"] for h in history])},
         "hlines": {"word-overlap baseline F1 (all held-out)": baseline["f1"]} if baseline else {}},
    ]


# ---------------------------------------------------------------------------------------------------------------
# one run
# ---------------------------------------------------------------------------------------------------------------

SKIP_COUNTS = ("empty_text", "no_answer", "answer_not_in_context", "answer_not_tokenizable",
               "examples_without_answer_window")


def prepare_data(options: QAOptions, settings: dict, tokenizer, training_args) -> dict:
    """The questions (train / held-out) and their windows: training rows with labels, held-out rows with labels
    (the evaluation loss) and held-out prediction windows. Skips are counted and printed, never silent."""
    from modeling_cove.data import load_squad
    from modeling_cove.squad_preprocessing import prepare_eval_features, prepare_train_features

    with training_args.main_process_first(desc="loading SQuAD"):
        data = load_squad(options.data_dir)
    train, validation = data["train"], data["validation"]
    if options.limit_train:
        train = train.select(range(min(options.limit_train, len(train))))
    if options.limit_eval:
        validation = validation.select(range(min(options.limit_eval, len(validation))))
    log(f"SQuAD: {len(train)} training / {len(validation)} held-out questions", training_args)
    window = {k: settings[k] for k in ("max_length", "doc_stride", "max_question_length")}
    t0 = time.time()
    main_process = training_args.process_index == 0
    train_features, train_stats = prepare_train_features(train, tokenizer, progress=main_process, **window)
    heldout_features, heldout_stats = prepare_train_features(validation, tokenizer, **window)  # for the eval loss
    predict_features = prepare_eval_features(validation, tokenizer, **window)
    log(f"preprocessing ({time.time() - t0:.0f}s): train {train_stats}; held-out {heldout_stats}", training_args)
    for name, stats in (("train", train_stats), ("held-out", heldout_stats)):
        skipped = {k: stats.get(k, 0) for k in SKIP_COUNTS}
        if any(skipped.values()):
            log(f"WARNING: {name} examples skipped (no usable answer span): {skipped}", training_args)
    return {"train": train, "validation": validation, "window": window, "train_features": train_features,
            "heldout_features": heldout_features, "predict_features": predict_features,
            "train_stats": train_stats, "heldout_stats": heldout_stats}


def attach_cache(model, data: dict, options: QAOptions, training_args):
    """The CoVe features of every distinct question and context window, computed once (the main process first:
    with a cache dir the others read its file); adds `question_key` / `context_key` to the feature sets.
    Returns (cache or None, seconds)."""
    from modeling_cove.feature_cache import cached_features, distinct_segments

    if not model.cove_size or options.no_cache:
        return None, 0.0
    t0 = time.time()
    names = ("train_features", "heldout_features", "predict_features")
    segments, keyed = distinct_segments([data[name] for name in names])
    data.update(zip(names, keyed))
    with training_args.main_process_first(desc="CoVe features"):
        cache = cached_features(model, segments, options.cache_dir, "squad-segments", batch_size=64,
                                dtype=getattr(torch, options.cache_dtype), progress=training_args.process_index == 0)
    seconds = time.time() - t0
    log(f"CoVe feature cache: {len(cache)} segments, {cache.num_bytes() / 2**20:.0f} MiB, "
        f"{'cache hit' if cache.hit else 'computed'} in {seconds:.0f}s" + (f" -> {cache.path}" if cache.path else ""),
        training_args)
    return cache, seconds


def make_training_arguments(output_dir: Path, settings: dict, seed: int):
    """The Trainer's arguments of a DCN run (`batch_size` is the global batch, split over the processes)."""
    return training_arguments(
        output_dir / "trainer", int(settings["batch_size"]), seed,
        per_device_eval_batch_size=int(settings["eval_batch_size"]),
        learning_rate=float(settings["learning_rate"]),
        weight_decay=float(settings["weight_decay"]),
        max_grad_norm=float(settings["max_grad_norm"]),
        num_train_epochs=float(settings["epochs"]),
        max_steps=int(settings["max_steps"]),
        lr_scheduler_type=settings["lr_scheduler"],
        logging_steps=int(settings["logging_steps"]),
        eval_strategy="epoch",
        save_strategy="no",
        prediction_loss_only=True,
        train_sampling_strategy="group_by_length",
        dataloader_pin_memory=False,
    )


def slice_evaluator(data: dict, settings: dict, collator, metric, max_answer_length: int):
    """model -> EM/F1 on the first `epoch_eval_limit` held-out questions (the per-epoch curve)."""
    validation, predict_features = data["validation"], data["predict_features"]
    slice_n = settings["epoch_eval_limit"]
    examples = validation.select(range(min(slice_n, len(validation)))) if slice_n else validation
    columns = {k: v for k, v in predict_features.items() if k != "questions_truncated"}
    keep = [i for i, e in enumerate(columns["example_index"]) if e < len(examples)]
    columns = {k: [v[i] for i in keep] for k, v in columns.items()}
    batch_size = int(settings["eval_batch_size"])
    return lambda model: score(metric, predict(model, examples, columns, collator, batch_size, max_answer_length),
                               examples)


def train_qa(options: QAOptions, command: Optional[str] = None) -> Optional[dict]:
    """Train the DCN of `options`, score it (EM/F1) on the held-out questions beside the word-overlap baseline,
    and write `model/`, `eval_results.json`, `predictions.json`, `metrics.json` and `curves.png` in
    `options.output_dir`. Returns the metrics dict on the main process, None on the others."""
    from transformers import Trainer, set_seed

    out = Path(options.output_dir)
    if out.exists() and any(out.iterdir()) and not options.overwrite:
        raise FileExistsError(f"{out} exists and is not empty (use --overwrite)")
    settings = resolve_qa_settings(options)
    overrides = model_overrides(options)  # checked before anything is written
    started, commit = time.time(), git_commit()
    if options.threads:
        torch.set_num_threads(options.threads)
    seed = int(settings["seed"])
    training_args = make_training_arguments(out, settings, seed)
    set_seed(seed)
    model, tokenizer = load_model(options.checkpoint, overrides)
    log(f"DCN input {model.dcn_input!r} ({model.input_size}-d per token); trainable parameters "
        f"{sum(p.numel() for p in model.parameters() if p.requires_grad):,}", training_args)
    data = prepare_data(options, settings, tokenizer, training_args)
    cache, cache_seconds = attach_cache(model, data, options, training_args)
    collator = QACollator(cache, tokenizer.pad_token_id)
    label_keys = ["input_ids", "token_type_ids", "start_positions", "end_positions", "question_key", "context_key"]
    metric = squad_metric()
    max_answer_length = model.config.dcn_max_answer_length
    epoch_eval = EpochSquad(slice_evaluator(data, settings, collator, metric, max_answer_length))
    time_budget = TimeBudget(settings["time_budget_minutes"])
    trainer = Trainer(model=model, args=training_args, train_dataset=rows_of(data["train_features"], label_keys),
                      eval_dataset=rows_of(data["heldout_features"], label_keys), data_collator=collator,
                      callbacks=[time_budget, epoch_eval])
    t0 = time.time()
    train_result = trainer.train()
    run = {"command": command or "modeling_cove.training.commands.train_qa.train_qa (library call)", "commit": commit,
           "train_seconds": time.time() - t0, "train_loss": train_result.training_loss,
           "stop_reason": stop_reason(trainer, time_budget=time_budget), "cache_seconds": cache_seconds,
           "started": started, "settings": settings, "overrides": overrides}
    log(f"training stopped: {run['stop_reason']}", training_args)
    steps = trainer.state.global_step
    if trainer.is_world_process_zero() and (not epoch_eval.history or epoch_eval.history[-1]["step"] != steps):
        epoch_eval.on_epoch_end(training_args, trainer.state, None, model=model)  # stopped inside an epoch
    trainer.save_model(str(out / "model"))  # writes on the main process only
    end_run(trainer.accelerator)  # the last collective: the model is complete
    if not trainer.is_world_process_zero():
        return None  # what is left (scoring, baseline, outputs) is the main process's, without collectives
    tokenizer.save_pretrained(out / "model")
    return finish_run(trainer, options, data, collator, metric, run, epoch_eval.history)


def finish_run(trainer, options: QAOptions, data: dict, collator, metric, run: dict, history: list) -> dict:
    """Main process: EM/F1 on every held-out question, the baseline, predictions.json, the evaluation JSON of
    `model/`, metrics.json and curves.png. Returns the metrics dict."""
    out, model, settings = Path(options.output_dir), trainer.model, run["settings"]
    validation = data["validation"]
    t0 = time.time()
    predictions = predict(model, validation, data["predict_features"], collator, int(settings["eval_batch_size"]),
                          model.config.dcn_max_answer_length)
    final = score(metric, predictions, validation)
    predict_seconds = time.time() - t0
    log(f"held-out ({len(validation)} questions): EM {final['exact_match']:.2f} F1 {final['f1']:.2f}")
    baseline = None
    if not options.no_baseline:
        t0 = time.time()
        baseline = run_baseline(data["train"], validation, settings, metric)
        baseline["seconds"] = round(time.time() - t0, 1)
        log(f"sliding-window baseline: EM {baseline['exact_match']:.2f} F1 {baseline['f1']:.2f} "
            f"(window {baseline['window']}, max span {baseline['max_span']})")
    trainer_dir = Path(trainer.args.output_dir)
    if trainer_dir.is_dir() and not any(trainer_dir.iterdir()):
        trainer_dir.rmdir()  # the Trainer makes it; with save_strategy "no" it stays empty
    (out / "predictions.json").write_text(json.dumps(predictions, indent=1, ensure_ascii=False) + "\n")
    metrics = run_metrics(trainer, options, data, run, history,
                          {"heldout": final, "baseline": baseline, "predict_seconds": predict_seconds})
    write_eval_results(out / "model", out / "eval_results.json", options, metrics)
    write_json(out / "metrics.json", metrics)
    plot_curves(curve_panels(trainer.state.log_history, history, baseline), out / "curves.png")
    log(f"wrote {out / 'model'}, {out / 'eval_results.json'}, {out / 'metrics.json'}, {out / 'curves.png'}")
    return metrics


def run_metrics(trainer, options: QAOptions, data: dict, run: dict, history: list, scores: dict) -> dict:
    """The metrics JSON of a DCN run: command, commit, machine, data and preprocessing counts, model and training
    settings, steps and why training stopped, timings, held-out and baseline EM/F1, per-epoch history."""
    model, settings, validation = trainer.model, run["settings"], data["validation"]
    steps, train_seconds = trainer.state.global_step, run["train_seconds"]
    final, baseline = scores["heldout"], scores["baseline"]
    return {
        "command": run["command"],
        "commit": run["commit"],
        "machine": {**machine_info(), "device": str(next(model.parameters()).device),
                    "world_size": trainer.args.world_size},
        "checkpoint": str(options.checkpoint),
        "data": {"source": options.data_dir or "hub:rajpurkar/squad", "train_questions": len(data["train"]),
                 "heldout_questions": len(validation),
                 "split": "SQuAD v1.1 dev split by article in modeling_cove.data.load_squad" if options.data_dir
                 else "Hub train / validation"},
        "preprocessing": {**data["window"], "train": data["train_stats"], "heldout": data["heldout_stats"],
                          "predict_windows": len(data["predict_features"]["input_ids"]),
                          "predict_questions_truncated": data["predict_features"]["questions_truncated"]},
        "model": {"dcn_input": model.dcn_input, "input_size": model.input_size, **run["overrides"],
                  "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)},
        "training": {**{k: settings.get(k) for k in ("epochs", "batch_size", "learning_rate", "weight_decay",
                                                     "max_grad_norm", "lr_scheduler", "max_steps",
                                                     "time_budget_minutes", "seed")},
                     "per_device_train_batch_size": trainer.args.per_device_train_batch_size},
        "steps": steps,
        "epochs_completed": round(trainer.state.epoch or 0.0, 3),
        "stop_reason": run["stop_reason"],
        "stopped_by_time_budget": run["stop_reason"].startswith("time budget"),
        "train_loss": run["train_loss"],
        "seconds": {"cache": round(run["cache_seconds"], 1), "train": round(train_seconds, 1),
                    "seconds_per_step": round(train_seconds / max(steps, 1), 3),
                    "predict": round(scores["predict_seconds"], 1), "total": round(time.time() - run["started"], 1)},
        "heldout": {"exact_match": final["exact_match"], "f1": final["f1"], "questions": len(validation)},
        "baseline_sliding_window": baseline,
        "history": history,
        "log_history": trainer.state.log_history,
    }


def write_eval_results(model_dir: Path, path: Path, options: QAOptions, metrics: dict):
    """The evaluation JSON of the saved DCN (the model card's input; fingerprints the weights): held-out EM/F1, what
    the encoder really is, and how long the run really trained."""
    from modeling_cove.training.publishing.cards import describe_encoder, make_eval_record, write_eval_json

    dcn_input = metrics["model"]["dcn_input"]
    notes = ["trained and evaluated on SQuAD v1.1 dev split by article (the local copy has no train split); not "
             "the official dev figures"] if options.data_dir else []
    record = make_eval_record(
        model_dir,
        task={"type": "question-answering", "name": "Question answering"},
        dataset={"name": "SQuAD v1.1", "key": "squad", "id": "rajpurkar/squad", "split": "validation",
                 "num_examples": metrics["heldout"]["questions"], "source": options.data_dir or "Hub"},
        metrics=[{"type": "exact_match", "value": round(metrics["heldout"]["exact_match"], 2)},
                 {"type": "f1", "value": round(metrics["heldout"]["f1"], 2)}],
        training={"command": metrics["command"], "seed": metrics["training"]["seed"], "commit": metrics["commit"],
                  "encoder": describe_encoder(options.checkpoint, used=dcn_input != "vectors"),
                  "num_train_examples": metrics["data"]["train_questions"],
                  "hyperparameters": {k: metrics["training"][k] for k in ("batch_size", "learning_rate")},
                  "epochs_run": metrics["epochs_completed"], "steps_run": metrics["steps"],
                  "stop_reason": metrics["stop_reason"], **({"notes": notes} if notes else {})},
        paper_column=PAPER_COLUMN.get(dcn_input),
    )
    write_eval_json(path, record)


def main(argv=None):
    """cove-train-qa: QAOptions from the command line, then `train_qa`; a bad input ends in one line, exit 2."""
    from ..common.presets import PresetError
    from ..common.run_info import command_line

    options = parse_options(QAOptions, argv, description=__doc__)
    argv = sys.argv[1:] if argv is None else list(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:  # returns None, so the entry point exits 0: the metrics are in the run folder
        train_qa(options, command=command_line([sys.argv[0], *argv]))
    except (FileExistsError, QAConfigError, PresetError) as err:  # a bad input, named; nothing was trained
        fail(err)


if __name__ == "__main__":
    main()
