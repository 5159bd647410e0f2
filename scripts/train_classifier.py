#!/usr/bin/env python
"""Train the BCN (`CoveForSequenceClassification`, docs/paper.md §3) on a classification task with
`transformers.Trainer`.

Tasks: sst2 (phrase-level train), sst5, trec6, trec50, imdb (first 200 words), snli (pairs; only dev/test exist
locally: train on 90% of dev, validate on the other 10%, test on test — see modeling_cove/data.py).
Hyperparameters come from configuration/tasks/<task>.yaml; the encoder (word vectors + MT-LSTM) is frozen.

Columns of the CoVe paper's Table 2 (`--bcn-input`):
    random        randomly initialised word vectors, trained with the BCN (N(0, s), s = std of the real vectors;
                  `--freeze-random-embeddings` keeps them fixed); no MT-LSTM
    vectors       the checkpoint's word vectors (GloVe or the stand-in vectors), frozen; no MT-LSTM
    vectors+cove  eq. 6: [vectors; CoVe] — the CoVe column for the encoder given with --encoder
    cove, scalar_mix   CoVe only / ELMo-style scalar mix over {[g; g], layer 1, layer 2} (docs/paper.md §6)

Because the encoder is frozen, the MT-LSTM states of every split are computed ONCE (length-sorted batches) and
cached on disk (safetensors; modeling_cove/feature_cache.py) under --cache-dir, keyed by a hash of the encoder
weights, the layers used and the token ids; later epochs, seeds and runs reuse them. The model receives them as
`cove_hidden_states` (same logits as running the encoder; tested). The best checkpoint by validation accuracy is
evaluated on test (accuracy and macro-F1 through our own `evaluate` modules in modeling_cove/metrics) and saved
with the tokenizer to <output-dir>/best, which loads with `pipeline("text-classification", model=<output-dir>/best)`.
<output-dir>/metrics.json holds the command, commit, hyperparameters, per-epoch wall time and validation curve,
test figures; <output-dir>/curve.png the curves.

Examples:
    python scripts/train_classifier.py --task trec6 --encoder runs/cove-s --bcn-input vectors+cove --seed 1 \\
        --data-dir ../shared/data --output-dir runs/bcn/trec6/vectors+cove-seed1
    python scripts/train_classifier.py --task trec6 --encoder runs/vocab --bcn-input vectors+cove \\
        --data-dir ../shared/data --limit 200 --max-steps 5 --output-dir /tmp/bcn-smoke     # smoke run
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# Must precede the first `import torch` (OpenMP reads it once). On a CPU shared with other processes, OpenMP threads
# that spin-wait at every barrier made each parallel op wait for a scheduler slice: measured here with 2 threads on 2
# busy cores, one BCN forward of a 230-token text took 18.8 s with active waiting and 0.15 s with passive waiting.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import yaml  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
TASK_CONFIG_DIR = REPO / "configuration" / "tasks"
COLUMNS = ("random", "vectors", "vectors+cove", "cove", "scalar_mix")

# defaults for every key a task yaml may set (a yaml key not listed here is an error: catches typos)
HYPERPARAMETER_DEFAULTS = {
    "epochs": 10,
    "batch_size": 64,
    "eval_batch_size": 256,
    "learning_rate": 1e-3,  # Adam (docs/paper.md §3); AdamW with weight_decay 0 is exactly Adam
    "dropout": 0.2,  # bcn_dropout; the paper searched 0.1 / 0.2 / 0.3
    "maxout_reductions": [4, 2],
    "maxout_pool": 4,
    "batch_norm": True,
    "bcn_hidden_size": 300,
    "feedforward_dim": 300,
    "max_grad_norm": 5.0,
    "early_stopping_patience": None,  # evaluations without a new best validation accuracy before stopping
    "eval_steps": None,  # evaluate every N steps instead of every epoch (long epochs, e.g. SST-2 phrases)
    "logging_steps": 20,
    "feature_batch_size": 128,
    # "random" or "group_by_length" (length-bucketed batches, ~20% faster). Bucketing makes the batch-norm statistics
    # depend on the length bucket: TREC-6 validation after 2 epochs fell from 80.6% (random) to 65.8% (bucketed).
    "sampling": "random",
    "max_length": None,  # truncate token sequences (None: keep all; IMDb is cut at 200 words by the data loader)
    "paper_table2": {},  # CoVe paper Table 2 (validation accuracy) by column, for comparison only
    "description": "",
}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=["sst2", "sst5", "trec6", "trec50", "imdb", "snli", "tsv"],
                   help="tsv: --data-dir is a folder with {train,validation,test}.tsv (columns text, label)")
    p.add_argument("--encoder", required=True, help="CoVe checkpoint dir (tokenizer + word vectors + MT-LSTM)")
    p.add_argument("--bcn-input", default="vectors+cove", choices=COLUMNS, help="Table 2 column (see above)")
    p.add_argument("--data-dir", default=os.environ.get("COVE_DATA_DIR"),
                   help="local data folder laid out like shared/data (default: $COVE_DATA_DIR, else Hub ids)")
    p.add_argument("--output-dir", default=None, help="default: runs/bcn/<task>/<bcn-input>-seed<seed>")
    p.add_argument("--config", default=None, help="task yaml (default: configuration/tasks/<task>.yaml)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=float, default=None, help="override the yaml")
    p.add_argument("--batch-size", type=int, default=None, help="override the yaml")
    p.add_argument("--learning-rate", type=float, default=None, help="override the yaml")
    p.add_argument("--dropout", type=float, default=None, help="override the yaml")
    p.add_argument("--sampling", choices=["group_by_length", "random"], default=None, help="override the yaml")
    p.add_argument("--max-steps", type=int, default=-1, help="stop after N optimizer steps (smoke runs)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N examples of each split (smoke)")
    p.add_argument("--max-train-examples", type=count, default=None,
                   help="train on a random N of the training split (a CPU-budget run: IMDb); the same examples for "
                        "every column and seed (a fixed seed), recorded in metrics.json and the eval JSON")
    p.add_argument("--max-eval-examples", type=count, default=None,
                   help="validate and test on a random N of each of those splits (as --max-train-examples)")
    p.add_argument("--cache-dir", default=str(REPO / "runs" / "cove-features"), help="CoVe feature cache")
    p.add_argument("--no-feature-cache", action="store_true", help="run the MT-LSTM every step instead")
    p.add_argument("--max-cache-gb", type=float, default=4.0,
                   help="skip the feature cache when all splits' states would exceed this size (IMDb: ~30 GB); "
                        "the MT-LSTM then runs inside every step (on CPU it is <10%% of a BCN training step)")
    p.add_argument("--freeze-random-embeddings", action="store_true", help="random column: keep vectors fixed")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep the Trainer's checkpoint folders")
    p.add_argument("--no-save-model", action="store_true", help="do not write <output-dir>/best")
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def count(text: str) -> int:
    """argparse type of the --max-*-examples counts: a usage error (exit 2) before any work for 0 or less."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


# the seed of --max-train-examples / --max-eval-examples subsets: fixed, so every column and seed sees the same ones
SUBSAMPLE_SEED = 13


def subsample_splits(raw, max_train=None, max_eval=None, seed: int = SUBSAMPLE_SEED):
    """Random subsets of at most `max_train` training and `max_eval` validation and test examples (a run on a CPU
    budget; every split keeps its own examples). Returns (DatasetDict, {split: "kept of total"} for each split
    cut, empty when nothing was)."""
    caps = {"train": max_train, "validation": max_eval, "test": max_eval}
    cut = {}
    for split, cap in caps.items():
        if cap is None:
            continue
        if cap < 1:
            raise ValueError(f"--max-{'train' if split == 'train' else 'eval'}-examples must be >= 1, got {cap}")
        total = len(raw[split])
        if cap < total:
            raw[split] = raw[split].shuffle(seed=seed).select(range(cap))
            cut[split] = f"{cap} of {total}"
    return raw, cut


def load_hyperparameters(task: str, path=None, overrides=None) -> dict:
    path = Path(path) if path else TASK_CONFIG_DIR / f"{task}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"task config not found: {path}")
    values = yaml.safe_load(path.read_text()) or {}
    if values.get("task", task) != task:
        raise ValueError(f"{path} is for task {values['task']!r}, not {task!r}")
    values.pop("task", None)
    unknown = sorted(set(values) - set(HYPERPARAMETER_DEFAULTS))
    if unknown:
        raise ValueError(f"{path}: unknown keys {unknown}; known: {sorted(HYPERPARAMETER_DEFAULTS)}")
    hp = {**HYPERPARAMETER_DEFAULTS, **values}
    for key, value in (overrides or {}).items():
        if value is not None:
            hp[key] = value
    hp["source"] = str(path)
    return hp


# ---------------------------------------------------------------------------------------------------------------
# data: tokenisation and the CoVe feature cache
# ---------------------------------------------------------------------------------------------------------------


def tokenize_splits(dataset_dict, tokenizer, max_length=None, limit=None):
    """Tokenise every split; rows whose text (or one side of a pair) has no tokens are dropped and counted.
    Returns ({split: Dataset(input_ids, token_type_ids, labels, length)}, {split: dropped count})."""
    pair = "text_pair" in dataset_dict["train"].column_names
    out, dropped = {}, {}
    for split, ds in dataset_dict.items():
        if limit is not None:
            ds = ds.select(range(min(limit, len(ds))))
        texts, labels = list(ds["text"]), list(ds["label"])
        pairs = list(ds["text_pair"]) if pair else None
        kwargs = dict(truncation=max_length is not None, max_length=max_length)
        enc = tokenizer(texts, pairs, **kwargs) if pair else tokenizer(texts, **kwargs)
        keep = []
        for i, types in enumerate(enc["token_type_ids"]):
            n_second = sum(types)
            if len(types) == 0 or (pair and (n_second == 0 or n_second == len(types))):
                continue  # empty text, or a pair with an empty side
            keep.append(i)
        dropped[split] = len(ds) - len(keep)
        columns = {
            "input_ids": [enc["input_ids"][i] for i in keep],
            "token_type_ids": [enc["token_type_ids"][i] for i in keep],
            "labels": [labels[i] for i in keep],
            "length": [len(enc["input_ids"][i]) for i in keep],
        }
        from datasets import Dataset

        out[split] = Dataset.from_dict(columns)
    return out, dropped


def pad_batch(ids, types, pad_token_id: int) -> dict:
    """Right-pad token id lists: input_ids, attention_mask, token_type_ids (0 on padding)."""
    from modeling_cove.feature_cache import pad_rows

    return pad_rows(ids, types, pad_token_id)


@dataclass
class BCNCollator:
    """Pads a batch and, when cached features are given (`feature_cache.CachedFeatures`, one per split), adds the
    cached MT-LSTM states as `cove_hidden_states` (rows carry `feature_store` (split id) and `feature_row`)."""

    pad_token_id: int
    layer_indices: list = field(default_factory=list)
    num_states: int = 3
    layer_width: int = 600
    stores: list = field(default_factory=list)

    def __call__(self, rows):
        batch = pad_batch([r["input_ids"] for r in rows], [r["token_type_ids"] for r in rows], self.pad_token_id)
        batch["labels"] = torch.tensor([r["labels"] for r in rows], dtype=torch.long)
        if self.stores and self.layer_indices:
            time_steps = batch["input_ids"].shape[1]
            states = torch.zeros(len(rows), time_steps, self.layer_width * len(self.layer_indices))
            for b, r in enumerate(rows):
                row_states = self.stores[r["feature_store"]][r["feature_row"]]  # (L, width)
                states[b, : row_states.shape[0]] = row_states
            hidden = [None] * self.num_states
            for j, k in enumerate(self.layer_indices):
                hidden[k] = states[..., j * self.layer_width : (j + 1) * self.layer_width]
            batch["cove_hidden_states"] = tuple(hidden)
        return batch


# ---------------------------------------------------------------------------------------------------------------
# model, trainer
# ---------------------------------------------------------------------------------------------------------------


def build_model(encoder_dir, column: str, label_names: list, hp: dict, seed: int, freeze_random=False,
                pair_input: bool = False):
    """The BCN on top of the CoVe checkpoint `encoder_dir` (encoder weights loaded, BCN freshly initialised).
    `pair_input`: the task classifies sentence pairs (SNLI), so the checkpoint refuses inputs without a second text."""
    from transformers import set_seed

    from modeling_cove import CoveForSequenceClassification

    set_seed(seed)
    overrides = dict(
        num_labels=len(label_names),
        id2label=dict(enumerate(label_names)),
        label2id={name: i for i, name in enumerate(label_names)},
        problem_type="single_label_classification",
        bcn_input="vectors" if column == "random" else column,
        bcn_dropout=hp["dropout"],
        bcn_maxout_reductions=list(hp["maxout_reductions"]),
        bcn_maxout_pool=hp["maxout_pool"],
        bcn_batch_norm=hp["batch_norm"],
        bcn_hidden_size=hp["bcn_hidden_size"],
        bcn_feedforward_dim=hp["feedforward_dim"],
        freeze_embeddings=not (column == "random" and not freeze_random),
        freeze_encoder=True,
        bcn_pair_input=pair_input,
    )
    model = CoveForSequenceClassification.from_pretrained(encoder_dir, **overrides)
    if column == "random":  # Table 2 "Random": random word vectors at the scale of the real ones
        with torch.no_grad():
            weight = model.cove.embeddings.weight
            real = weight[weight.abs().sum(dim=1) > 0]
            scale = float(real.std()) if real.numel() > 1 else 1.0
            generator = torch.Generator().manual_seed(seed)
            weight.copy_(torch.randn(weight.shape, generator=generator) * scale)
            model.cove.embeddings.zero_special_rows()
    if model.accepts_loss_kwargs:  # docs/transformers_notes.md: Trainer would scale the loss by the accumulation steps
        raise RuntimeError("CoveForSequenceClassification must set accepts_loss_kwargs = False")
    return model


def load_metrics():
    """Our own evaluate modules, loaded offline by path."""
    import evaluate

    import modeling_cove

    root = Path(modeling_cove.__file__).resolve().parent / "metrics"
    return evaluate.load(str(root / "accuracy_cove")), evaluate.load(str(root / "f1_cove"))


def make_compute_metrics():
    accuracy, f1 = load_metrics()

    def compute_metrics(eval_pred):
        logits, labels = eval_pred.predictions, eval_pred.label_ids
        if isinstance(logits, tuple):
            logits = logits[0]
        predictions = np.asarray(logits).argmax(axis=-1)
        return {
            "accuracy": accuracy.compute(predictions=predictions, references=labels)["accuracy"],
            "macro_f1": f1.compute(predictions=predictions, references=labels, average="macro")["f1"],
        }

    return compute_metrics


# Two of transformers' defaults with a per-step cost on a GPU, kept: pinning each collated batch (one more host copy
# before a copy that blocks anyway) and the NaN/Inf loss filter (`isnan(loss) or isinf(loss)` reads the loss back at
# every step). benchmark_training.py --trainer-variants times each switched; on an H200 neither changed the BCN's
# examples/s beyond the run-to-run noise (benchmarks/results/training_bcn_cuda*.json).
PIN_MEMORY = True
NAN_INF_FILTER = True


def make_training_arguments(output_dir, hp: dict, seed: int, max_steps: int = -1, gradient_accumulation_steps: int = 1,
                            batch_size=None, sampling: str = "random", evaluate_during_training=True,
                            logging_steps=None, use_cpu=None):
    """The Trainer's arguments for a BCN run; `use_cpu` None = the GPU when there is one."""
    from transformers import TrainingArguments

    batch_size = batch_size or hp["batch_size"]
    strategy = "no"
    if evaluate_during_training:
        strategy = "steps" if hp["eval_steps"] else "epoch"
    return TrainingArguments(
        output_dir=str(output_dir),
        num_train_epochs=float(hp["epochs"]),
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        per_device_eval_batch_size=hp["eval_batch_size"],
        gradient_accumulation_steps=gradient_accumulation_steps,
        learning_rate=hp["learning_rate"],
        optim="adamw_torch_fused",  # weight_decay 0: plain Adam (paper); the fused kernel is ~6x faster on CPU
        weight_decay=0.0,
        adam_beta1=0.9,
        adam_beta2=0.999,
        adam_epsilon=1e-8,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_grad_norm=hp["max_grad_norm"],
        eval_strategy=strategy,
        eval_steps=hp["eval_steps"],
        save_strategy=strategy,
        save_steps=hp["eval_steps"],
        save_only_model=True,
        save_total_limit=1,
        load_best_model_at_end=evaluate_during_training,
        metric_for_best_model="accuracy",
        greater_is_better=True,
        logging_strategy="steps",
        logging_steps=logging_steps or hp["logging_steps"],
        logging_first_step=True,
        report_to="none",
        seed=seed,
        data_seed=seed,
        train_sampling_strategy=sampling,
        length_column_name="length",
        remove_unused_columns=False,  # the collator reads feature_store / feature_row
        dataloader_num_workers=0,
        dataloader_pin_memory=PIN_MEMORY,
        logging_nan_inf_filter=NAN_INF_FILTER,
        use_cpu=not torch.cuda.is_available() if use_cpu is None else use_cpu,
    )


def build_trainer(model, args, train_dataset, eval_dataset, collator, callbacks=()):
    from transformers import Trainer

    return Trainer(
        model=model,
        args=args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=collator,
        compute_metrics=make_compute_metrics() if eval_dataset is not None else None,
        callbacks=list(callbacks),
    )


def epoch_timer_callback():
    from transformers import TrainerCallback

    class EpochTimer(TrainerCallback):
        """Wall time of each epoch's training part (evaluation inside the epoch subtracted)."""

        def __init__(self):
            self.epochs, self._start, self._cpu_start, self._eval = [], None, None, 0.0

        def on_epoch_begin(self, args, state, control, **kwargs):
            self._start, self._cpu_start, self._eval = time.time(), time.process_time(), 0.0

        def on_evaluate(self, args, state, control, metrics=None, **kwargs):
            self._eval += float((metrics or {}).get("eval_runtime", 0.0))

        def on_epoch_end(self, args, state, control, **kwargs):
            if self._start is not None:
                seconds = time.time() - self._start - self._eval
                # CPU seconds of this process (all threads), evaluation included: robust to other load
                cpu_seconds = time.process_time() - self._cpu_start
                self.epochs.append({"epoch": round(state.epoch, 3), "step": state.global_step,
                                    "train_seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2)})

    return EpochTimer()


# ---------------------------------------------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------------------------------------------


def git_commit() -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                                    capture_output=True, text=True).stdout.strip())
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}


def plot_curves(log_history, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(h["step"], h["loss"]) for h in log_history if "loss" in h and "eval_loss" not in h]
    evals = [(h["step"], h["eval_accuracy"], h["eval_loss"]) for h in log_history if "eval_accuracy" in h]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        ax_loss.plot(*zip(*train), ".-", label="train loss")
    if evals:
        ax_loss.plot([e[0] for e in evals], [e[2] for e in evals], "o-", label="validation loss")
        ax_acc.plot([e[0] for e in evals], [100 * e[1] for e in evals], "o-", color="C2", label="validation")
    ax_loss.set_xlabel("optimizer step")
    ax_loss.set_ylabel("cross-entropy")
    ax_loss.legend()
    ax_acc.set_xlabel("optimizer step")
    ax_acc.set_ylabel("accuracy (%)")
    ax_acc.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------------------------------------------


PAPER_COLUMN = {"random": "Random", "vectors": "GloVe", "vectors+cove": "+CoVe-S"}


def write_eval_results(best_dir: Path, path: Path, args, command: str, commit: str, hp: dict, num_train: int,
                       num_test: int, test: dict, subsample=None):
    """The evaluation JSON of the saved best checkpoint (model_cards/README.md schema; fingerprints the weights),
    ready for `push_to_hub.py --eval-json`."""
    sys.path.insert(0, str(REPO))
    from model_cards.evaluation import make_eval_record, write_eval_json

    from modeling_cove.data import HUB_IDS

    record = make_eval_record(
        best_dir,
        task={"type": "text-classification", "name": "Text classification"},
        dataset={"name": args.task, "key": args.task, "id": HUB_IDS.get(args.task, f"local/{args.task}"),
                 "split": "test", "num_examples": num_test, "source": args.data_dir or "Hub"},
        metrics=[{"type": "accuracy", "value": round(100 * test["test_accuracy"], 2)},
                 {"type": "f1", "name": "macro-F1", "value": round(100 * test["test_macro_f1"], 2)}],
        training={"command": command, "encoder": str(args.encoder), "seed": args.seed,
                  "num_train_examples": num_train, "train_split": "train",
                  "hyperparameters": {k: hp[k] for k in ("epochs", "batch_size", "learning_rate", "dropout")},
                  "commit": commit,
                  **({"notes": [f"random subsets (seed {SUBSAMPLE_SEED}), not the full splits: " + ", ".join(
                      f"{split} {kept}" for split, kept in subsample.items())]} if subsample else {})},
        paper_column=PAPER_COLUMN.get(args.bcn_input),
    )
    write_eval_json(path, record)


RUN_OUTPUTS = ("best", "checkpoints", "eval_results.json", "metrics.json", "curve.png")  # what main() writes


def remove_previous_outputs(output_dir: Path):
    """Delete the files and folders an earlier run of this script wrote into `output_dir` (RUN_OUTPUTS); other files
    stay. With --overwrite --no-save-model an old best/ and eval_results.json would otherwise sit beside the new
    metrics.json, and push_to_hub.py would publish the stale model."""
    for name in RUN_OUTPUTS:
        path = output_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def main(argv=None):
    args = parse_args(argv)
    command = " ".join(["python", "scripts/train_classifier.py"] + (argv if argv is not None else sys.argv[1:]))
    git = git_commit()  # the code that runs: read now, not at the end (a long run may outlive a commit)
    wall_start = time.time()
    if args.threads:
        torch.set_num_threads(args.threads)
    output_dir = Path(args.output_dir or REPO / "runs" / "bcn" / args.task / f"{args.bcn_input}-seed{args.seed}")
    if (output_dir / "metrics.json").exists() and not args.overwrite:
        sys.exit(f"error: {output_dir} already holds a finished run (use --overwrite)")
    if not Path(args.encoder).is_dir():
        sys.exit(f"error: --encoder {args.encoder} is not a checkpoint directory")
    hp = load_hyperparameters(args.task, args.config, {
        "epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": args.learning_rate,
        "dropout": args.dropout, "sampling": args.sampling})

    from transformers import AutoTokenizer, EarlyStoppingCallback

    from modeling_cove.data import load_classification
    from modeling_cove.feature_cache import cached_features

    print(f"task {args.task}, column {args.bcn_input}, seed {args.seed}, data "
          f"{args.data_dir or 'Hub dataset ids'}, hyperparameters {hp['source']}", flush=True)
    raw = load_classification(args.task, args.data_dir)
    raw, subsample = subsample_splits(raw, args.max_train_examples, args.max_eval_examples)
    if subsample:
        print(f"random subsets (seed {SUBSAMPLE_SEED}): {subsample}", flush=True)
    label_names = raw["train"].features["label"].names
    tokenizer = AutoTokenizer.from_pretrained(args.encoder)
    splits, dropped = tokenize_splits(raw, tokenizer, hp["max_length"], args.limit)
    for split, count in dropped.items():
        if count:
            print(f"warning: dropped {count} {split} rows with an empty text or an empty pair side", flush=True)

    model = build_model(args.encoder, args.bcn_input, label_names, hp, args.seed, args.freeze_random_embeddings,
                        pair_input="text_pair" in raw["train"].column_names)
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    print(f"{type(model).__name__}: {n_trainable:,} trainable parameters, "
          f"{sum(p.numel() for p in model.parameters()):,} in all", flush=True)

    feature_info = {}
    collator_stores = []
    use_cache = bool(model.layer_indices) and not args.no_feature_cache
    if use_cache:
        total_tokens = sum(sum(splits[s]["length"]) for s in ("train", "validation", "test"))
        cache_gb = total_tokens * model.config.encoder_output_size * len(model.layer_indices) * 4 / 1e9
        if cache_gb > args.max_cache_gb:
            use_cache = False
            print(f"feature cache skipped: {cache_gb:.1f} GB > --max-cache-gb {args.max_cache_gb}; the MT-LSTM runs "
                  "inside every step instead", flush=True)
    for split_id, split in enumerate(("train", "validation", "test")):
        ds = splits[split]
        if use_cache:
            name = f"{args.task}-{split}" + (f"-limit{args.limit}" if args.limit else "")
            features = cached_features(model, ds, args.cache_dir, name, hp["feature_batch_size"], progress=True)
            collator_stores.append(features)
            info = feature_info[split] = features.info()
            print(f"CoVe features {split}: {'cache hit' if info['hit'] else 'computed'} in {info['seconds']} s "
                  f"-> {info['path']}", flush=True)
        splits[split] = ds.add_column("feature_store", [split_id] * len(ds)).add_column(
            "feature_row", list(range(len(ds))))
    collator = BCNCollator(
        pad_token_id=model.config.pad_token_id,
        layer_indices=list(model.layer_indices) if use_cache else [],
        num_states=model.config.num_hidden_layers + 1,
        layer_width=model.config.encoder_output_size,
        stores=collator_stores,
    )

    checkpoint_dir = output_dir / "checkpoints"
    if args.overwrite:  # the previous run's outputs (only what this script writes), so none is left beside new ones
        remove_previous_outputs(output_dir)
    training_args = make_training_arguments(checkpoint_dir, hp, args.seed, max_steps=args.max_steps,
                                            sampling=hp["sampling"])
    timer = epoch_timer_callback()
    callbacks = [timer]
    if hp["early_stopping_patience"]:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=int(hp["early_stopping_patience"])))
    trainer = build_trainer(model, training_args, splits["train"], splits["validation"], collator, callbacks)
    train_start = time.time()
    train_result = trainer.train()
    train_seconds = time.time() - train_start

    # the best checkpoint (by validation accuracy) is loaded back at the end of training
    trainer.remove_callback(EarlyStoppingCallback)  # it only understands eval_* metrics
    validation = trainer.evaluate(splits["validation"], metric_key_prefix="validation")
    test = trainer.evaluate(splits["test"], metric_key_prefix="test")
    print(f"best validation accuracy {100 * validation['validation_accuracy']:.2f}; test accuracy "
          f"{100 * test['test_accuracy']:.2f}, macro-F1 {100 * test['test_macro_f1']:.2f}", flush=True)

    output_dir.mkdir(parents=True, exist_ok=True)
    if not args.no_save_model:
        best_dir = output_dir / "best"
        trainer.model.save_pretrained(best_dir)
        tokenizer.save_pretrained(best_dir)
        write_eval_results(best_dir, output_dir / "eval_results.json", args, command, git.get("commit") or "unknown",
                           hp, len(splits["train"]), len(splits["test"]), test, subsample)
    if not args.keep_checkpoints:
        shutil.rmtree(checkpoint_dir, ignore_errors=True)

    history = trainer.state.log_history
    evals = [h for h in history if "eval_accuracy" in h]
    epochs = timer.epochs
    for record in epochs:  # attach the evaluation that closed each epoch, if any
        match = [h for h in evals if h["step"] == record["step"]]
        if match:
            record["validation_accuracy"] = match[-1]["eval_accuracy"]
            record["validation_macro_f1"] = match[-1]["eval_macro_f1"]
            record["validation_loss"] = match[-1]["eval_loss"]
    per_epoch = [e["train_seconds"] for e in epochs]
    best_step = None
    if trainer.state.best_model_checkpoint:
        best_step = int(Path(trainer.state.best_model_checkpoint).name.split("-")[-1])
    scalar_mix = None
    mix = trainer.model.scalar_mix  # the best checkpoint's, loaded back into the model
    if mix is not None:  # the learned layer weights: what the BCN read
        scalar_mix = {"layers": ["[vectors; vectors]"] + [f"layer {i}" for i in trainer.model.layer_indices],
                      "weights": [round(w, 4) for w in torch.softmax(mix.scalar_weights.detach(), 0).tolist()],
                      "gamma": round(float(mix.gamma.detach()), 4)}
    results = {
        "task": args.task,
        "column": args.bcn_input,
        "seed": args.seed,
        "encoder": str(args.encoder),
        "data_dir": args.data_dir,
        "command": command,
        "git": git,
        "hyperparameters": hp,
        "splits": {s: len(splits[s]) for s in splits},
        "dropped_rows": dropped,
        "limit": args.limit,
        "subsample": subsample,
        "max_steps": args.max_steps,
        "trainable_parameters": n_trainable,
        "scalar_mix": scalar_mix,
        "feature_cache": feature_info,
        "epochs": epochs,
        "seconds_per_epoch_mean": round(float(np.mean(per_epoch)), 2) if per_epoch else None,
        "cpu_seconds_per_epoch_mean": round(float(np.mean([e["cpu_seconds"] for e in epochs])), 2) if epochs else None,
        "train_seconds": round(train_seconds, 1),
        "global_steps": trainer.state.global_step,
        "train_loss": train_result.training_loss,
        "best": {"step": best_step, "validation_accuracy": trainer.state.best_metric},
        "validation": {"accuracy": validation["validation_accuracy"], "macro_f1": validation["validation_macro_f1"],
                       "loss": validation["validation_loss"]},
        "test": {"accuracy": test["test_accuracy"], "macro_f1": test["test_macro_f1"], "loss": test["test_loss"]},
        "paper_table2_validation_accuracy": (hp.get("paper_table2") or {}).get(args.bcn_input),
        "log_history": history,
        "machine": {"platform": platform.platform(), "processor": platform.processor(),
                    "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                    "torch": torch.__version__, "device": str(trainer.args.device),
                    "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        "wall_seconds": round(time.time() - wall_start, 1),
        "model_dir": None if args.no_save_model else str(output_dir / "best"),
    }
    (output_dir / "metrics.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    plot_curves(history, output_dir / "curve.png",
                f"BCN {args.task} ({args.bcn_input}, seed {args.seed}): test acc {100 * test['test_accuracy']:.2f}")
    print(f"wrote {output_dir / 'metrics.json'} and {output_dir / 'curve.png'}", flush=True)
    return results


if __name__ == "__main__":
    main()
