#!/usr/bin/env python
"""Train the DCN question-answering head (CoveForQuestionAnswering) on SQuAD v1.1 with the HF Trainer, evaluate
EM/F1 on held-out questions beside a sliding-window word-overlap baseline, and save a pipeline-ready checkpoint.

    # stand-in vectors only (the MT-LSTM is not run); CPU-sized DCN (l = 100, pool 8), 50 minutes of training
    python scripts/train_qa.py --checkpoint runs/cove-s-squad --data-dir ../shared/data --dcn-input vectors \
        --model-override dcn_hidden_size=100 dcn_pool_size=8 --output-dir runs/dcn-squad-vectors
    # vectors + CoVe-S (same checkpoint, so the same vocabulary and vectors)
    python scripts/train_qa.py --checkpoint runs/cove-s-squad --data-dir ../shared/data --dcn-input vectors+cove \
        --model-override dcn_hidden_size=100 dcn_pool_size=8 --output-dir runs/dcn-squad-cove-s
    # smoke run
    python scripts/train_qa.py --checkpoint runs/vocab-squad --data-dir ../shared/data --output-dir /tmp/qa \
        --limit-train 64 --limit-eval 32 --max-steps 3 --model-override dcn_hidden_size=20 dcn_pool_size=4

`--checkpoint` is a CoVe checkpoint (tokenizer + word vectors + MT-LSTM), e.g. from scripts/build_vocab.py
(`--tasks squad`) or scripts/export_encoder.py (`--vocab-from`, a trained MT-LSTM with a SQuAD vocabulary).
Hyperparameters come from `--task-config` (configuration/tasks/squad.yaml) and the DCN sizes from `--model-preset`
(configuration/models/dcn-squad.json); command-line flags override both.

Data: `modeling_cove.data.load_squad(--data-dir)`. Locally only SQuAD dev exists: it is split by article (~80/20,
fixed seed, in data.py), train on the first part, evaluate on the held-out articles. Without --data-dir the Hub
`rajpurkar/squad` train/validation splits are used.

The encoder is frozen: with CoVe inputs the MT-LSTM features of every distinct question and context window are
computed once (modeling_cove/feature_cache.py; kept on disk too with --cache-dir) and reused by every epoch
(`--no-cache` runs the MT-LSTM in every step instead).
Training stops after `epochs`, `--max-steps` or `--time-budget-minutes`, whichever comes first.

Outputs in --output-dir: `model/` (checkpoint + tokenizer; loads with
`pipeline("question-answering", model=..., trust_remote_code=True)`), `metrics.json` (command, commit, data and
preprocessing counts, per-epoch history, final EM/F1, baseline EM/F1, timings), `curves.png` (loss and F1).
"""

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml

REPO = Path(__file__).resolve().parents[1]
SQUAD_METRIC = REPO / "modeling_cove" / "metrics" / "squad_v1_cove"
DEFAULT_TASK_CONFIG = REPO / "configuration" / "tasks" / "squad.yaml"
DEFAULT_MODEL_PRESET = REPO / "configuration" / "models" / "dcn-squad.json"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="CoVe checkpoint directory (tokenizer + vectors + MT-LSTM)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--data-dir", default=None, help="local data folder like ../shared/data (default: Hub ids)")
    p.add_argument("--task-config", default=str(DEFAULT_TASK_CONFIG), help="YAML with training hyperparameters")
    p.add_argument("--model-preset", default=str(DEFAULT_MODEL_PRESET), help="JSON with CoveConfig DCN fields")
    p.add_argument("--dcn-input", choices=["vectors+cove", "vectors", "cove"], default=None,
                   help="what the DCN reads per token (overrides the preset)")
    p.add_argument("--model-override", nargs="*", default=[], metavar="KEY=VALUE",
                   help="further CoveConfig overrides, e.g. dcn_hidden_size=100 (values parsed as JSON)")
    p.add_argument("--epochs", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=None)
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    p.add_argument("--time-budget-minutes", type=float, default=None, help="stop training after this long")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--limit-train", type=int, default=None, help="use only the first N training questions")
    p.add_argument("--limit-eval", type=int, default=None, help="use only the first N held-out questions")
    p.add_argument("--no-cache", action="store_true", help="run the frozen MT-LSTM in every step (slow)")
    p.add_argument("--cache-dir", default=None,
                   help="also keep the CoVe features on disk here (safetensors, keyed by the encoder weights, the "
                        "layers and the token ids) for later runs; default: in memory only")
    p.add_argument("--cache-dtype", choices=["float32", "float16"], default="float32",
                   help="storage type of the cached CoVe features (float16 halves the memory)")
    p.add_argument("--no-baseline", action="store_true", help="skip the sliding-window baseline")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def load_settings(args) -> dict:
    with open(args.task_config) as f:
        settings = yaml.safe_load(f) or {}
    for name in ("epochs", "batch_size", "learning_rate", "max_steps", "time_budget_minutes", "seed"):
        value = getattr(args, name)
        if value is not None:
            settings[name] = value
    settings.setdefault("max_steps", -1)
    return settings


def check_config_keys(keys, source: str):
    """Exit with a clear error when a key is not a CoveConfig field (`check_field_names`)."""
    from modeling_cove.configuration_cove import check_field_names

    try:
        check_field_names(keys, source)
    except ValueError as err:
        sys.exit(f"error: {err}")


def model_overrides(args) -> dict:
    """The preset's CoveConfig fields < --model-override KEY=VALUE < --dcn-input; unknown keys are refused."""
    with open(args.model_preset) as f:
        preset = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    check_config_keys(preset, args.model_preset)
    for item in args.model_override:
        if "=" not in item:
            sys.exit(f"error: --model-override expects KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        check_config_keys([key], "--model-override")
        try:
            preset[key] = json.loads(value)
        except json.JSONDecodeError:
            preset[key] = value
    if args.dcn_input is not None:
        preset["dcn_input"] = args.dcn_input
    return preset


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def load_model(checkpoint: str, overrides: dict):
    from transformers import AutoConfig, AutoTokenizer

    from modeling_cove import CoveForQuestionAnswering

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    config = AutoConfig.from_pretrained(checkpoint)
    if config.model_type != "cove":
        sys.exit(f"error: {checkpoint} is not a CoVe checkpoint (model_type {config.model_type!r})")
    for key, value in overrides.items():
        setattr(config, key, value)
    model, info = CoveForQuestionAnswering.from_pretrained(checkpoint, config=config, output_loading_info=True)
    missing_encoder = [k for k in info["missing_keys"] if k.startswith("cove.")]
    if missing_encoder:
        sys.exit(f"error: {checkpoint} lacks encoder weights {missing_encoder[:5]}: is it a CoVe checkpoint?")
    if len(tokenizer) != config.vocab_size:
        sys.exit(f"error: tokenizer has {len(tokenizer)} entries but the checkpoint {config.vocab_size} vectors")
    return model, tokenizer


class QACollator:
    """Pads `input_ids`/`token_type_ids` rows, adds labels when present and, with cached features of the rows'
    distinct segments (`feature_cache.CachedFeatures`; rows carry `question_key` / `context_key`), `cove_features`."""

    def __init__(self, cache=None, pad_token_id: int = 0):
        self.cache, self.pad_token_id = cache, pad_token_id

    def __call__(self, rows):
        from modeling_cove.feature_cache import segment_placements
        from modeling_cove.squad_preprocessing import pad_batch

        batch = pad_batch(rows, self.pad_token_id)
        if self.cache is not None:
            batch["cove_features"] = self.cache.batch(segment_placements(rows), batch["input_ids"].shape[1])
        if "start_positions" in rows[0]:
            batch["start_positions"] = torch.tensor([r["start_positions"] for r in rows], dtype=torch.long)
            batch["end_positions"] = torch.tensor([r["end_positions"] for r in rows], dtype=torch.long)
        return batch


def rows_of(features: dict, keys) -> list:
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
    import evaluate

    return evaluate.load(str(SQUAD_METRIC))


def score(metric, predictions: dict, examples) -> dict:
    refs = [{"id": i, "answers": a} for i, a in zip(examples["id"], examples["answers"]) if i in predictions]
    preds = [{"id": r["id"], "prediction_text": predictions[r["id"]]} for r in refs]
    return metric.compute(predictions=preds, references=refs)


def run_baseline(train, validation, settings: dict, metric) -> dict:
    """Tune (window, max_span) of the word-overlap baseline on a slice of the training split, then evaluate."""
    from modeling_cove.squad_preprocessing import sliding_window_answer

    tune = train.shuffle(seed=0).select(range(min(len(train), settings.get("baseline_tune_examples", 800))))
    best = None
    for window in settings.get("baseline_window_grid", [2, 3, 5, 8]):
        for span in settings.get("baseline_span_grid", [1, 2, 3, 4]):
            preds = {r["id"]: sliding_window_answer(r["question"], r["context"], window, span)["answer"] for r in tune}
            f1 = score(metric, preds, tune)["f1"]
            if best is None or f1 > best[0]:
                best = (f1, window, span)
    _, window, span = best
    preds = {r["id"]: sliding_window_answer(r["question"], r["context"], window, span)["answer"] for r in validation}
    result = score(metric, preds, validation)
    return {"window": window, "max_span": span, "tuned_on_train_examples": len(tune),
            "exact_match": result["exact_match"], "f1": result["f1"]}


def make_callbacks(settings, history, eval_fn):
    from transformers import TrainerCallback

    class TimeBudget(TrainerCallback):
        """Stops training once `time_budget_minutes` have passed (checked after every step)."""

        def __init__(self, minutes):
            self.seconds = None if minutes in (None, 0) else 60.0 * minutes
            self.start = None
            self.stopped = False

        def on_train_begin(self, args, state, control, **kwargs):
            self.start = time.time()

        def on_step_end(self, args, state, control, **kwargs):
            if self.seconds is not None and time.time() - self.start > self.seconds:
                control.should_training_stop = True
                self.stopped = True

    class EpochSquad(TrainerCallback):
        """EM/F1 on (a slice of) the held-out questions after every epoch."""

        def on_epoch_end(self, args, state, control, model=None, **kwargs):
            started = time.time()
            result = eval_fn(model)
            history.append({"epoch": round(state.epoch, 3), "step": state.global_step, **result,
                            "eval_seconds": round(time.time() - started, 1)})
            print(f"epoch {state.epoch:.2f}: held-out slice EM {result['exact_match']:.2f} F1 {result['f1']:.2f}")
            model.train()

    return TimeBudget(settings.get("time_budget_minutes")), EpochSquad()


def plot_curves(log_history, history, path: Path, baseline=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    train = [(h["step"], h["loss"]) for h in log_history if "loss" in h]
    evals = [(h["step"], h["eval_loss"]) for h in log_history if "eval_loss" in h]
    if train:
        ax1.plot(*zip(*train), ".-", label="train loss (cumulative CE over iterations)")
    if evals:
        ax1.plot(*zip(*evals), "o-", label="held-out loss")
    ax1.set_xlabel("step")
    ax1.set_ylabel("loss")
    ax1.legend()
    if history:
        ax2.plot([h["step"] for h in history], [h["f1"] for h in history], "o-", label="F1")
        ax2.plot([h["step"] for h in history], [h["exact_match"] for h in history], "s-", label="EM")
    if baseline:
        ax2.axhline(baseline["f1"], color="gray", linestyle="--", label="word-overlap baseline F1 (all held-out)")
    ax2.set_xlabel("step")
    ax2.set_ylabel("held-out slice (%)")
    ax2.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out = Path(args.output_dir)
    if out.exists() and any(out.iterdir()) and not args.overwrite:
        sys.exit(f"error: {out} exists and is not empty (use --overwrite)")
    settings = load_settings(args)
    overrides = model_overrides(args)  # checked before anything is written
    out.mkdir(parents=True, exist_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    seed = int(settings.get("seed", 0))
    random.seed(seed)
    torch.manual_seed(seed)
    started = time.time()

    from transformers import Trainer, TrainingArguments

    from modeling_cove.data import load_squad
    from modeling_cove.feature_cache import cached_features, distinct_segments
    from modeling_cove.squad_preprocessing import prepare_eval_features, prepare_train_features

    data = load_squad(args.data_dir)
    train, validation = data["train"], data["validation"]
    if args.limit_train:
        train = train.select(range(min(args.limit_train, len(train))))
    if args.limit_eval:
        validation = validation.select(range(min(args.limit_eval, len(validation))))
    print(f"SQuAD: {len(train)} training / {len(validation)} held-out questions")

    model, tokenizer = load_model(args.checkpoint, overrides)
    print(f"DCN input {model.dcn_input!r} ({model.input_size}-d per token); trainable parameters "
          f"{sum(p.numel() for p in model.parameters() if p.requires_grad):,}")

    window = dict(max_length=settings.get("max_length", 384), doc_stride=settings.get("doc_stride", 128),
                  max_question_length=settings.get("max_question_length", 64))
    t0 = time.time()
    train_features, train_stats = prepare_train_features(train, tokenizer, progress=True, **window)
    heldout_features, heldout_stats = prepare_train_features(validation, tokenizer, **window)  # for the eval loss
    predict_features = prepare_eval_features(validation, tokenizer, **window)
    print(f"preprocessing ({time.time() - t0:.0f}s): train {train_stats}; held-out {heldout_stats}")
    for name, stats in (("train", train_stats), ("held-out", heldout_stats)):
        skipped = {k: stats.get(k, 0) for k in ("empty_text", "no_answer", "answer_not_in_context",
                                                "answer_not_tokenizable", "examples_without_answer_window")}
        if any(skipped.values()):
            print(f"WARNING: {name} examples skipped (no usable answer span): {skipped}")

    cache = None
    cache_seconds = 0.0
    if model.cove_size and not args.no_cache:
        t0 = time.time()
        segments, (train_features, heldout_features, predict_features) = distinct_segments(
            [train_features, heldout_features, predict_features])
        cache = cached_features(model, segments, args.cache_dir, "squad-segments", batch_size=64,
                                dtype=getattr(torch, args.cache_dtype), progress=True)
        cache_seconds = time.time() - t0
        print(f"CoVe feature cache: {len(cache)} segments, {cache.num_bytes() / 2**20:.0f} MiB, "
              f"{'cache hit' if cache.hit else 'computed'} in {cache_seconds:.0f}s" +
              (f" -> {cache.path}" if cache.path else ""))
    collator = QACollator(cache, tokenizer.pad_token_id)
    label_keys = ["input_ids", "token_type_ids", "start_positions", "end_positions", "question_key", "context_key"]
    train_rows = rows_of(train_features, label_keys)
    heldout_rows = rows_of(heldout_features, label_keys)

    metric = squad_metric()
    max_answer_length = model.config.dcn_max_answer_length
    eval_batch = int(settings.get("eval_batch_size", 64))
    slice_n = settings.get("epoch_eval_limit", 500)
    slice_examples = validation.select(range(min(slice_n, len(validation)))) if slice_n else validation
    slice_features = {k: v for k, v in predict_features.items() if k != "questions_truncated"}
    keep = [i for i, e in enumerate(slice_features["example_index"]) if e < len(slice_examples)]
    slice_features = {k: [v[i] for i in keep] for k, v in slice_features.items()}

    def eval_slice(m):
        return score(metric, predict(m, slice_examples, slice_features, collator, eval_batch, max_answer_length),
                     slice_examples)

    history = []
    time_budget, epoch_eval = make_callbacks(settings, history, eval_slice)
    training_args = TrainingArguments(
        output_dir=str(out / "trainer"),
        per_device_train_batch_size=int(settings.get("batch_size", 32)),
        per_device_eval_batch_size=eval_batch,
        learning_rate=float(settings.get("learning_rate", 1e-3)),
        weight_decay=float(settings.get("weight_decay", 0.0)),
        max_grad_norm=float(settings.get("max_grad_norm", 5.0)),
        num_train_epochs=float(settings.get("epochs", 10)),
        max_steps=int(settings.get("max_steps", -1)),
        lr_scheduler_type=settings.get("lr_scheduler", "constant"),
        logging_steps=int(settings.get("logging_steps", 20)),
        logging_first_step=True,
        eval_strategy="epoch",
        save_strategy="no",
        prediction_loss_only=True,
        report_to="none",
        remove_unused_columns=False,
        train_sampling_strategy="group_by_length",
        dataloader_num_workers=0,
        dataloader_pin_memory=False,
        seed=seed,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train_rows, eval_dataset=heldout_rows,
                      data_collator=collator, callbacks=[time_budget, epoch_eval])
    t0 = time.time()
    train_result = trainer.train()
    train_seconds = time.time() - t0
    steps = trainer.state.global_step
    if not history or history[-1]["step"] != steps:  # stopped inside an epoch (time budget / max steps)
        epoch_eval.on_epoch_end(training_args, trainer.state, None, model=model)

    t0 = time.time()
    predictions = predict(model, validation, predict_features, collator, eval_batch, max_answer_length)
    final = score(metric, predictions, validation)
    predict_seconds = time.time() - t0
    print(f"held-out ({len(validation)} questions): EM {final['exact_match']:.2f} F1 {final['f1']:.2f}")

    baseline = None
    if not args.no_baseline:
        t0 = time.time()
        baseline = run_baseline(train, validation, settings, metric)
        baseline["seconds"] = round(time.time() - t0, 1)
        print(f"sliding-window baseline: EM {baseline['exact_match']:.2f} F1 {baseline['f1']:.2f} "
              f"(window {baseline['window']}, max span {baseline['max_span']})")

    model_dir = out / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    (out / "predictions.json").write_text(json.dumps(predictions, indent=1, ensure_ascii=False) + "\n")
    metrics = {
        "command": " ".join(["python", "scripts/train_qa.py"] + (argv if argv is not None else sys.argv[1:])),
        "commit": git_commit(),
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "torch": torch.__version__, "threads": torch.get_num_threads(),
                    "device": str(next(model.parameters()).device)},
        "checkpoint": str(args.checkpoint),
        "data": {"source": args.data_dir or "hub:rajpurkar/squad", "train_questions": len(train),
                 "heldout_questions": len(validation),
                 "split": "SQuAD v1.1 dev split by article in modeling_cove.data.load_squad" if args.data_dir
                 else "Hub train / validation"},
        "preprocessing": {**window, "train": train_stats, "heldout": heldout_stats,
                          "predict_windows": len(predict_features["input_ids"]),
                          "predict_questions_truncated": predict_features["questions_truncated"]},
        "model": {"dcn_input": model.dcn_input, "input_size": model.input_size, **overrides,
                  "trainable_parameters": sum(p.numel() for p in model.parameters() if p.requires_grad)},
        "training": {k: settings.get(k) for k in ("epochs", "batch_size", "learning_rate", "weight_decay",
                                                  "max_grad_norm", "lr_scheduler", "max_steps",
                                                  "time_budget_minutes", "seed")},
        "steps": steps,
        "epochs_completed": round(trainer.state.epoch or 0.0, 3),
        "stopped_by_time_budget": time_budget.stopped,
        "train_loss": train_result.training_loss,
        "seconds": {"cache": round(cache_seconds, 1), "train": round(train_seconds, 1),
                    "seconds_per_step": round(train_seconds / max(steps, 1), 3),
                    "predict": round(predict_seconds, 1), "total": round(time.time() - started, 1)},
        "heldout": {"exact_match": final["exact_match"], "f1": final["f1"], "questions": len(validation)},
        "baseline_sliding_window": baseline,
        "history": history,
        "log_history": trainer.state.log_history,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    plot_curves(trainer.state.log_history, history, out / "curves.png", baseline)
    print(f"wrote {model_dir}, {out / 'metrics.json'}, {out / 'curves.png'}")
    return metrics


if __name__ == "__main__":
    main()
