"""Train the BCN (`CoveForSequenceClassification`, docs/paper.md §3) on a classification task with
`transformers.Trainer`: task hyperparameters (`configuration/tasks/<task>.yaml`), subsampling and tokenisation, the
frozen encoder's feature cache, the model per column of the CoVe paper's Table 2, the Trainer and its metrics, and what
a run writes. Command line: `cove-train-classifier` (also `python -m modeling_cove.training.commands.train_classifier`); from
Python `train_classifier(ClassifierOptions(...))`.

Tasks: sst2 (phrase-level train), sst5, trec6, trec50, imdb (first 200 words), snli (pairs; only dev/test exist
locally: train on 90% of dev, validate on the other 10%, test on test — see modeling_cove/data.py), tsv (your own
{train,validation,test}.tsv in --data-dir). Hyperparameters come from the task's yaml; the encoder (word vectors +
MT-LSTM) is frozen.

Columns of the CoVe paper's Table 2 (`--bcn-input`):
    random        randomly initialised word vectors, trained with the BCN (N(0, s), s = std of the real vectors;
                  `--freeze-random-embeddings` keeps them fixed); no MT-LSTM
    vectors       the checkpoint's word vectors (GloVe or the stand-in vectors), frozen; no MT-LSTM
    vectors+cove  eq. 6: [vectors; CoVe] — the CoVe column for the encoder given with --encoder
    cove, scalar_mix   CoVe only / ELMo-style scalar mix over {[g; g], layer 1, layer 2} (docs/paper.md §6)
    vectors+scalar_mix   ELMo's [x; ELMo_task]: the vectors, then that mix (for a biLM encoder: docs/bilm.md)

Because the encoder is frozen, the MT-LSTM states of every split are computed ONCE and cached on disk under
--cache-dir (modeling_cove/feature_cache.py), keyed by the encoder weights, the layers used and the token ids. The
best checkpoint by validation accuracy is evaluated on test (accuracy, macro-F1) and saved with the tokenizer to
<output-dir>/best (loads with `pipeline("text-classification", model=<output-dir>/best)`), beside
<output-dir>/eval_results.json (the model card's input). <output-dir>/metrics.json holds the command, commit,
hyperparameters, why training stopped, per-epoch wall time and validation curve, test figures; curve.png the curves.
<output-dir>/run_settings.json records what the run started with, and <output-dir>/checkpoints the Trainer's
checkpoints (one per evaluation, with the optimizer's state) until the run ends: --resume continues a stopped run
from there, to the end it would have had.

It runs as one process or as N under `accelerate launch` / `torchrun` (DDP through the Trainer): every process
trains; the main process alone writes the feature cache (the others wait for it, then read it), the best
checkpoint, the evaluation JSON, the metrics and the curves. --batch-size is the global batch: each of N processes
takes batch_size / N examples per step, so a run means the same with 1 or N processes:
    accelerate launch --num_processes 2 -m modeling_cove.training.commands.train_classifier --task trec6 --encoder runs/cove-s ...

Examples (DATA: a local data folder laid out as docs/data.md describes; without --data-dir, the Hub's datasets):
    cove-train-classifier --task trec6 --encoder runs/cove-s --bcn-input vectors+cove --seed 1 \\
        --data-dir DATA --output-dir runs/bcn/trec6/vectors+cove-seed1
    cove-train-classifier --task trec6 --encoder runs/vocab --bcn-input vectors+cove \\
        --data-dir DATA --limit 200 --max-steps 5 --output-dir /tmp/bcn-smoke     # smoke run
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

import numpy as np
import torch
from transformers import EarlyStoppingCallback

from ..common import papers
from ..publishing.cards_record import CheckpointError, weights_fingerprint
from ..data.collators import BCNCollator
from ..common.presets import CONFIGURATION, PresetError, load_settings
from ..common.cli import A_FOLDER, A_RATE, AT_LEAST_ONE, POSITIVE, REQUIRED, fail, option, parse_options
from ..common.run_info import command_line, git_commit, machine_info, plot_curves
from ..common.files import write_json
from ..loops.accelerate_loop import RUN_SETTINGS_FILE, check_run_folder, end_run, same_place, same_with_defaults
from ..loops.trainer import (EpochTimer, FindBestCheckpoint, checkpoint_folder, checkpoint_problem, checkpoint_step,
                             incomplete_checkpoints, last_checkpoint, live_callback, log, stop_reason, trainer_state,
                             training_arguments, whole_epoch)

__all__ = ["attach_features", "build_model", "build_trainer", "check_run", "ClassifierOptions", "COLUMNS",
           "curve_panels", "epoch_records", "evaluate_best", "finish_run", "fit", "HYPERPARAMETER_DEFAULTS",
           "load_hyperparameters", "load_metrics", "main", "make_compute_metrics", "make_training_arguments",
           "NOT_HYPERPARAMETERS", "prepare_splits", "remove_previous_outputs", "RESUME_KEYS", "RESUME_SAME",
           "resume_checkpoint", "ResumeError", "run_hyperparameters", "run_settings", "scalar_mix_weights",
           "subsample_splits", "TASKS", "tokenize_splits", "train_classifier", "write_eval_results"]

TASK_CONFIG_DIR = CONFIGURATION / "tasks"
TASKS = ("sst2", "sst5", "trec6", "trec50", "imdb", "snli", "tsv")
COLUMNS = ("random", "vectors", "vectors+cove", "cove", "scalar_mix", "vectors+scalar_mix")
PAPER_COLUMN = papers.TABLE2_COLUMN_OF_INPUT  # --bcn-input -> Table 2's column names
SUBSAMPLE_SEED = 13  # --max-*-examples subsets: fixed by default, so every column and seed sees the same examples
RUN_OUTPUTS = ("best", "checkpoints", "eval_results.json", "metrics.json", "curve.png", RUN_SETTINGS_FILE)  # written
# What fixes a run's course: --resume refuses other values than its first start's (RUN_SETTINGS_FILE): the flags, the
# hyperparameters they resolve to (a task yaml edited since counts), the encoder's weights by their fingerprint, the
# number of processes (the global batch's split) and the kind of device (its random state)
RESUME_KEYS = ("task", "encoder", "encoder_weights", "bcn_input", "data_dir", "config", "seed", "epochs", "batch_size",
               "learning_rate", "dropout", "sampling", "max_steps", "limit", "max_train_examples", "train_fraction",
               "max_eval_examples", "subsample_seed", "freeze_random_embeddings", "no_feature_cache", "max_cache_gb",
               "hyperparameters", "world_size", "device")
NOT_HYPERPARAMETERS = ("source", "description", "paper_table2")  # the yaml's keys that do not change a run

# defaults for every key a task yaml may set (a yaml key not listed here is an error: catches typos)
HYPERPARAMETER_DEFAULTS = {
    "epochs": 10,
    "batch_size": 64,  # the global batch (split over the processes of a distributed run)
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
    "paper_table2": {},  # by column, for comparison only; a task of the paper: its Table 2 row (papers.py)
    "description": "",
}
# resume keys compared otherwise than with ==: places in any spelling; the hyperparameters with a key added since the
# run's start at its default
RESUME_SAME = {"encoder": same_place, "data_dir": same_place, "config": same_place,
               "hyperparameters": functools.partial(same_with_defaults, defaults=HYPERPARAMETER_DEFAULTS)}


class ResumeError(ValueError):
    """A --resume that cannot continue the run in its folder; the message says why."""

# Two of transformers' defaults with a per-step cost on a GPU, kept: pinning each collated batch (one more host copy
# before a copy that blocks anyway) and the NaN/Inf loss filter (`isnan(loss) or isinf(loss)` reads the loss back at
# every step). benchmark_training.py --trainer-variants times each switched; on an H200 neither changed the BCN's
# examples/s beyond the run-to-run noise (benchmarks/results/training_bcn_cuda*.json).
PIN_MEMORY = True
NAN_INF_FILTER = True


@dataclass
class ClassifierOptions:
    """One BCN run; the fields are the flags of cove-train-classifier (None: the task yaml's value)."""

    task: Literal[TASKS] = option("tsv: --data-dir is a folder with {train,validation,test}.tsv (columns text, "
                                  "label)", REQUIRED)
    encoder: str = option("CoVe checkpoint dir (tokenizer + word vectors + MT-LSTM)", REQUIRED)
    bcn_input: Literal[COLUMNS] = option("Table 2 column (see above)", "vectors+cove")
    data_dir: Optional[str] = option("local data folder laid out as docs/data.md describes (default: $COVE_DATA_DIR "
                                     "on the command line, else the Hub's datasets)", check=A_FOLDER)
    output_dir: Optional[str] = option("default: runs/bcn/<task>/<bcn-input>-seed<seed> under the current folder")
    config: Optional[str] = option("task yaml (default: the task's own, configuration/tasks/<task>.yaml)")
    seed: int = option("seed of the initialisation, dropout and batch order", 1)
    epochs: Optional[float] = option("override the yaml", check=POSITIVE)
    batch_size: Optional[int] = option("override the yaml; the global batch (a multiple of the number of processes)",
                                       check=AT_LEAST_ONE)
    learning_rate: Optional[float] = option("override the yaml", check=POSITIVE)
    dropout: Optional[float] = option("override the yaml", check=A_RATE)
    sampling: Optional[Literal["group_by_length", "random"]] = option("override the yaml")
    max_steps: int = option("stop after N optimizer steps (smoke runs)", -1)
    limit: Optional[int] = option("use only the first N examples of each split (smoke)", check=AT_LEAST_ONE)
    max_train_examples: Optional[int] = option(
        "train on a random N of the training split (a CPU-budget run: IMDb); the same examples for every column and "
        "seed (a fixed seed), recorded in metrics.json and the eval JSON", check=AT_LEAST_ONE)
    train_fraction: Optional[float] = option(
        "train on this fraction (0-1] of the training split, a random subset as --max-train-examples (a smaller "
        "fraction's examples are part of a larger one's): the sample-efficiency curve")
    max_eval_examples: Optional[int] = option("validate and test on a random N of each of those splits (as "
                                              "--max-train-examples)", check=AT_LEAST_ONE)
    subsample_seed: int = option("seed of those random subsets (default: one fixed subset for every column and "
                                 "seed; a learning curve gives each of its seeds its own subset)", SUBSAMPLE_SEED)
    cache_dir: Optional[str] = option("CoVe feature cache", str(Path("runs") / "cove-features"))
    no_feature_cache: bool = option("run the MT-LSTM every step instead", False)
    max_cache_gb: float = option("skip the feature cache when all splits' states would exceed this size (IMDb: "
                                 "~30 GB); the MT-LSTM then runs inside every step (on CPU it is <10%% of a BCN "
                                 "training step)", 4.0)
    freeze_random_embeddings: bool = option("random column: keep vectors fixed", False)
    threads: Optional[int] = option("torch.set_num_threads", check=AT_LEAST_ONE)
    keep_checkpoints: bool = option("keep the Trainer's checkpoint folders", False)
    no_save_model: bool = option("do not write <output-dir>/best", False)
    overwrite: bool = option("replace an existing output folder", False)
    resume: bool = option("continue the unfinished run in --output-dir from its last checkpoint (written at every "
                          "evaluation, with the optimizer's state), given the flags it started with (run_settings.json "
                          "records them; --threads may change): it ends as the run would have without the stop (the "
                          "same evaluations, best weights and test figures, bit for bit with the same --threads; the "
                          "first training loss logged after it averages only the steps since the checkpoint)", False)

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {self.task!r}")
        if self.bcn_input not in COLUMNS:
            raise ValueError(f"bcn_input must be one of {COLUMNS}, got {self.bcn_input!r}")
        if self.train_fraction is not None:
            if not 0.0 < self.train_fraction <= 1.0:
                raise ValueError(f"train_fraction must be in (0, 1], got {self.train_fraction}")
            if self.max_train_examples is not None:
                raise ValueError("give train_fraction or max_train_examples, not both")
        if self.resume and self.overwrite:
            raise ValueError("give resume or overwrite, not both")
        if self.output_dir is None:
            self.output_dir = str(Path("runs") / "bcn" / self.task / f"{self.bcn_input}-seed{self.seed}")


# ---------------------------------------------------------------------------------------------------------------
# hyperparameters and data
# ---------------------------------------------------------------------------------------------------------------


def load_hyperparameters(task: str, path=None, overrides=None) -> dict:
    """The task's hyperparameters: HYPERPARAMETER_DEFAULTS < `path` (default configuration/tasks/<task>.yaml) <
    `overrides` (None values ignored). Unknown keys and a yaml written for another task raise a PresetError."""
    defaults = {**HYPERPARAMETER_DEFAULTS, "paper_table2": papers.table2_by_input(task)}
    hp, source, extra = load_settings(defaults, path or task, "tasks", overrides, extra_keys=("task",))
    if extra.get("task", task) != task:
        raise PresetError(f"{source} is for task {extra['task']!r}, not {task!r}")
    hp["source"] = source
    return hp


def subsample_splits(raw, max_train=None, max_eval=None, seed: int = SUBSAMPLE_SEED, train_fraction=None):
    """Random subsets of at most `max_train` training and `max_eval` validation and test examples (a run on a CPU
    budget; every split keeps its own examples), or `train_fraction` of the training split (rounded, at least one;
    the sample-efficiency curve). One fixed permutation per split, so a smaller subset is the start of a larger one.
    Returns (DatasetDict, {split: "kept of total"} for each split cut, empty when nothing was)."""
    if train_fraction is not None:
        max_train = max(1, round(train_fraction * len(raw["train"])))
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


def tokenize_splits(dataset_dict, tokenizer, max_length=None, limit=None):
    """Tokenise every split; rows whose text (or one side of a pair) has no tokens are dropped and counted.
    Returns ({split: Dataset(input_ids, token_type_ids, labels, length)}, {split: dropped count})."""
    from datasets import Dataset

    pair = "text_pair" in dataset_dict["train"].column_names
    out, dropped = {}, {}
    for split, ds in dataset_dict.items():
        if limit is not None:
            ds = ds.select(range(min(limit, len(ds))))
        kwargs = dict(truncation=max_length is not None, max_length=max_length)
        texts = list(ds["text"])
        enc = tokenizer(texts, list(ds["text_pair"]), **kwargs) if pair else tokenizer(texts, **kwargs)
        keep = []
        for i, types in enumerate(enc["token_type_ids"]):
            n_second = sum(types)
            if len(types) == 0 or (pair and (n_second == 0 or n_second == len(types))):
                continue  # empty text, or a pair with an empty side
            keep.append(i)
        dropped[split] = len(ds) - len(keep)
        labels = list(ds["label"])
        out[split] = Dataset.from_dict({
            "input_ids": [enc["input_ids"][i] for i in keep],
            "token_type_ids": [enc["token_type_ids"][i] for i in keep],
            "labels": [labels[i] for i in keep],
            "length": [len(enc["input_ids"][i]) for i in keep],
        })
    return out, dropped


# ---------------------------------------------------------------------------------------------------------------
# model, metrics, Trainer
# ---------------------------------------------------------------------------------------------------------------


def build_model(encoder_dir, column: str, label_names: list, hp: dict, seed: int, freeze_random=False,
                pair_input: bool = False):
    """The BCN on top of the CoVe checkpoint `encoder_dir` (encoder weights loaded, BCN freshly initialised).
    `pair_input`: the task classifies sentence pairs (SNLI), so the checkpoint refuses inputs without a second text."""
    from transformers import set_seed

    from modeling_cove import CoveForSequenceClassification

    if column not in COLUMNS:
        raise ValueError(f"column must be one of {COLUMNS}, got {column!r}")
    set_seed(seed)
    model = CoveForSequenceClassification.from_pretrained(
        encoder_dir,
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
    """Our own evaluate modules (accuracy, F1), loaded offline by path."""
    import evaluate

    import modeling_cove

    root = Path(modeling_cove.__file__).resolve().parent / "metrics"
    return evaluate.load(str(root / "accuracy_cove")), evaluate.load(str(root / "f1_cove"))


def make_compute_metrics():
    """The Trainer's `compute_metrics`: accuracy and macro-F1 of the argmax predictions."""
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


def make_training_arguments(output_dir, hp: dict, seed: int, max_steps: int = -1, gradient_accumulation_steps: int = 1,
                            batch_size=None, sampling: str = "random", evaluate_during_training=True,
                            logging_steps=None, use_cpu=None):
    """The Trainer's arguments for a BCN run; `batch_size` (default hp["batch_size"]) is the global batch, split over
    the processes of a distributed launch; `use_cpu` None = the GPU when there is one."""
    strategy = "no"
    if evaluate_during_training:
        strategy = "steps" if hp["eval_steps"] else "epoch"
    return training_arguments(
        output_dir, batch_size or hp["batch_size"], seed, use_cpu,
        num_train_epochs=float(hp["epochs"]),
        max_steps=max_steps,
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
        save_total_limit=1,  # with load_best_model_at_end: the best checkpoint and the last
        restore_callback_states_from_checkpoint=True,  # early stopping's count and the epoch times resume too
        load_best_model_at_end=evaluate_during_training,
        metric_for_best_model="accuracy",
        greater_is_better=True,
        logging_strategy="steps",
        logging_steps=logging_steps or hp["logging_steps"],
        data_seed=seed,
        train_sampling_strategy=sampling,
        length_column_name="length",
        dataloader_pin_memory=PIN_MEMORY,
        logging_nan_inf_filter=NAN_INF_FILTER,
    )


def build_trainer(model, args, train_dataset, eval_dataset, collator, callbacks=()):
    """The `Trainer` of a BCN run: accuracy and macro-F1 computed when there is an evaluation set."""
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


# ---------------------------------------------------------------------------------------------------------------
# one run: data, features, training, outputs
# ---------------------------------------------------------------------------------------------------------------


def prepare_splits(options: ClassifierOptions, hp: dict, tokenizer, training_args):
    """Load, subsample and tokenise the task's splits (the main process first: it fills the datasets cache).
    Returns (raw DatasetDict, tokenised splits, dropped rows per split, subsample description)."""
    from modeling_cove.data import load_classification

    with training_args.main_process_first(desc="loading and tokenising the data"):
        raw = load_classification(options.task, options.data_dir)
        raw, subsample = subsample_splits(raw, options.max_train_examples, options.max_eval_examples,
                                          seed=options.subsample_seed, train_fraction=options.train_fraction)
        splits, dropped = tokenize_splits(raw, tokenizer, hp["max_length"], options.limit)
    if subsample:
        log(f"random subsets (seed {options.subsample_seed}): {subsample}", training_args)
    for split, count in dropped.items():
        if count:
            log(f"warning: dropped {count} {split} rows with an empty text or an empty pair side", training_args)
    return raw, splits, dropped, subsample


def attach_features(model, splits: dict, options: ClassifierOptions, hp: dict, training_args):
    """The BCN collator for `splits`, with the frozen MT-LSTM's states of every split computed once (or read from
    `options.cache_dir`) when the model reads them and they fit `max_cache_gb`. The main process computes and
    writes a cache entry first; the others then read it. Returns (collator, splits with feature_store /
    feature_row columns, {split: cache info})."""
    from modeling_cove.feature_cache import cached_features

    use_cache = bool(model.layer_indices) and not options.no_feature_cache
    if use_cache:
        total_tokens = sum(sum(splits[s]["length"]) for s in ("train", "validation", "test"))
        cache_gb = total_tokens * model.config.encoder_output_size * len(model.layer_indices) * 4 / 1e9
        if cache_gb > options.max_cache_gb:
            use_cache = False
            log(f"feature cache skipped: {cache_gb:.1f} GB > --max-cache-gb {options.max_cache_gb}; the MT-LSTM "
                "runs inside every step instead", training_args)
    stores, info = [], {}
    for split_id, split in enumerate(("train", "validation", "test")):
        ds = splits[split]
        if use_cache:
            name = f"{options.task}-{split}" + (f"-limit{options.limit}" if options.limit else "")
            with training_args.main_process_first(desc=f"CoVe features of {split}"):
                features = cached_features(model, ds, options.cache_dir, name, hp["feature_batch_size"],
                                           progress=training_args.process_index == 0)
            stores.append(features)
            info[split] = features.info()
            log(f"CoVe features {split}: {'cache hit' if info[split]['hit'] else 'computed'} in "
                f"{info[split]['seconds']} s -> {info[split]['path']}", training_args)
        splits[split] = ds.add_column("feature_store", [split_id] * len(ds)).add_column(
            "feature_row", list(range(len(ds))))
    collator = BCNCollator(pad_token_id=model.config.pad_token_id,
                           layer_indices=list(model.layer_indices) if use_cache else [],
                           num_states=model.config.num_hidden_layers + 1,
                           layer_width=model.config.encoder_output_size, stores=stores)
    return collator, splits, info


def remove_previous_outputs(output_dir: Path):
    """Delete the files and folders an earlier run wrote into `output_dir` (RUN_OUTPUTS); other files stay. With
    --overwrite --no-save-model an old best/ and eval_results.json would otherwise sit beside the new metrics.json,
    and push_to_hub.py would publish the stale model."""
    for name in RUN_OUTPUTS:
        path = output_dir / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def write_eval_results(best_dir: Path, path: Path, options: ClassifierOptions, run: dict):
    """The evaluation JSON of the saved best checkpoint (the model card's input; fingerprints the weights): the test
    figures, what the encoder really is, and how long the run really trained."""
    from modeling_cove.data import HUB_IDS
    from modeling_cove.training.publishing.cards import describe_encoder, make_eval_record, write_eval_json

    hp, test, subsample = run["hyperparameters"], run["test"], run["subsample"]
    notes = [f"random subsets (seed {options.subsample_seed}), not the full splits: " + ", ".join(
        f"{split} {kept}" for split, kept in subsample.items())] if subsample else []
    record = make_eval_record(
        best_dir,
        task={"type": "text-classification", "name": "Text classification"},
        dataset={"name": options.task, "key": options.task, "id": HUB_IDS.get(options.task, f"local/{options.task}"),
                 "split": "test", "num_examples": run["splits"]["test"], "source": options.data_dir or "Hub"},
        metrics=[{"type": "accuracy", "value": round(100 * test["accuracy"], 2)},
                 {"type": "f1", "name": "macro-F1", "value": round(100 * test["macro_f1"], 2)}],
        training={"command": run["command"], "seed": options.seed, "commit": run["git"]["commit"],
                  "encoder": describe_encoder(options.encoder, used=options.bcn_input not in ("random", "vectors")),
                  "num_train_examples": run["splits"]["train"], "train_split": "train",
                  "hyperparameters": {k: hp[k] for k in ("batch_size", "learning_rate", "dropout")},
                  "epochs_run": run["epochs_run"], "steps_run": run["global_steps"],
                  "stop_reason": run["stop_reason"], **({"notes": notes} if notes else {})},
        paper_column=PAPER_COLUMN.get(options.bcn_input),
    )
    write_eval_json(path, record)


def epoch_records(timer: EpochTimer, history: list) -> list:
    """The timer's per-epoch records, each with the validation figures of the evaluation that closed it, if any."""
    evals = [h for h in history if "eval_accuracy" in h]
    records = [dict(record) for record in timer.epochs]
    for record in records:
        match = [h for h in evals if h["step"] == record["step"]]
        if match:
            record.update(validation_accuracy=match[-1]["eval_accuracy"],
                          validation_macro_f1=match[-1]["eval_macro_f1"], validation_loss=match[-1]["eval_loss"])
    return records


def scalar_mix_weights(model) -> Optional[dict]:
    """The learned ELMo-style layer weights (softmax) and gamma of a scalar_mix BCN; None for other columns."""
    mix = model.scalar_mix
    if mix is None:
        return None
    return {"layers": ["[vectors; vectors]"] + [f"layer {i}" for i in model.layer_indices],
            "weights": [round(w, 4) for w in torch.softmax(mix.scalar_weights.detach(), 0).tolist()],
            "gamma": round(float(mix.gamma.detach()), 4)}


def curve_panels(history: list) -> list:
    """`run_info.plot_curves` panels of a BCN run: losses, and validation accuracy, by optimizer step."""
    train = [(h["step"], h["loss"]) for h in history if "loss" in h and "eval_loss" not in h]
    evals = [(h["step"], h["eval_accuracy"], h["eval_loss"]) for h in history if "eval_accuracy" in h]
    return [
        {"title": "loss", "xlabel": "optimizer step", "ylabel": "cross-entropy",
         "series": {"train loss": ([s for s, _ in train], [v for _, v in train]),
                    "validation loss": ([e[0] for e in evals], [e[2] for e in evals])}},
        {"title": "validation accuracy", "xlabel": "optimizer step", "ylabel": "accuracy (%)",
         "series": {"validation": ([e[0] for e in evals], [100 * e[1] for e in evals])}},
    ]


def check_run(options: ClassifierOptions, output_dir: Path):
    """Refuse, before any work: a finished run in `output_dir` (without overwrite; nothing to resume), an unfinished
    one that a new run would write over (neither resume nor overwrite), and a missing encoder."""
    if (output_dir / "metrics.json").exists() and not options.overwrite:
        raise FileExistsError(f"{output_dir} already holds a finished run ("
                              f"{'nothing to resume' if options.resume else 'use --overwrite'})")
    started = [name for name in ("checkpoints", RUN_SETTINGS_FILE) if (output_dir / name).exists()]
    if started and not (options.resume or options.overwrite):
        raise FileExistsError(f"{output_dir} holds an unfinished run ({', '.join(started)}): --resume continues it, "
                              "--overwrite replaces it")
    if not (Path(options.encoder) / "config.json").is_file():
        raise FileNotFoundError(f"--encoder {options.encoder} is not a checkpoint directory (no config.json)")


def run_hyperparameters(options: ClassifierOptions) -> dict:
    """The hyperparameters of `options`' run: the task yaml's (or --config's) under the flags that override it."""
    return load_hyperparameters(options.task, options.config, {
        "epochs": options.epochs, "batch_size": options.batch_size, "learning_rate": options.learning_rate,
        "dropout": options.dropout, "sampling": options.sampling})


def run_settings(options: ClassifierOptions, hp: dict, world_size: int, device: str) -> dict:
    """What run_settings.json records of a run's start (RESUME_KEYS): its flags, the hyperparameters `hp` they
    resolve to, the fingerprint of the encoder's weights, the number of processes and the kind of device ("cpu",
    "cuda"); and the commit it started at, for the record."""
    settings = {key: getattr(options, key) for key in RESUME_KEYS if hasattr(options, key)}
    return {**settings, "hyperparameters": {k: v for k, v in hp.items() if k not in NOT_HYPERPARAMETERS},
            "encoder_weights": weights_fingerprint(options.encoder), "world_size": world_size, "device": device,
            "commit": git_commit()}


def resume_checkpoint(options: ClassifierOptions, output_dir: Path, settings: dict) -> Optional[str]:
    """The checkpoint a --resume continues from (None for a new run, or one stopped before its first checkpoint: it
    starts again from its first step): the newest complete one of the run started in `output_dir` with the same
    `settings`. A run stopped after its training had ended (early stopping fired, or its last step inside an epoch:
    --epochs with a fraction, --max-steps) replays from its best checkpoint to the same end, as the Trainer, resumed
    at that end, would train on; at the end of its last whole epoch it resumes there (the Trainer trains no more).
    A ResumeError says why a run cannot resume: none started there, other settings, an ended run whose best
    checkpoint is its last, a best checkpoint missing or not whole, a group_by_length run stopped inside an epoch."""
    if not options.resume:
        return None
    if not (output_dir / RUN_SETTINGS_FILE).is_file():
        started = (output_dir / "checkpoints").is_dir()
        raise ResumeError(f"--resume: {output_dir} " + (
            f"holds a run started without {RUN_SETTINGS_FILE} (what a resume compares): --overwrite starts it afresh"
            if started else "holds no run started there: nothing to resume"))
    try:
        check_run_folder(output_dir, settings, RESUME_KEYS, resume=True, overwrite=False, same=RESUME_SAME)
    except ValueError as err:
        raise ResumeError(f"--resume {output_dir}: {err} (or --overwrite to start afresh)") from err
    checkpoint = last_checkpoint(output_dir / "checkpoints", settings["world_size"])
    if checkpoint is None:
        return None
    state = trainer_state(checkpoint)
    best = checkpoint_folder(Path(checkpoint).parent, state.best_global_step) if state.best_global_step else None
    best_problem = best and (checkpoint_problem(best, settings["world_size"]) if best.is_dir() else "folder missing")
    # the Trainer's flag at the checkpoint: set by early stopping and at the last step
    ended = state.stateful_callbacks.get("TrainerControl", {}).get("args", {}).get("should_training_stop")
    past_its_epochs = state.global_step >= state.max_steps and whole_epoch(state.epoch)
    if ended and not past_its_epochs:
        if not best or state.best_global_step >= state.global_step or best_problem:
            raise ResumeError(f"--resume: {output_dir} stopped after its training had ended at step "
                              f"{state.global_step}, without an earlier whole best checkpoint to replay from: "
                              "--overwrite runs it again")
        checkpoint, state = str(best), trainer_state(best)
    elif best_problem:  # the weights the run's test figures come from
        raise ResumeError(f"--resume: {checkpoint} records its best checkpoint {best}, not whole ({best_problem}): "
                          "--overwrite runs it again")
    if settings["hyperparameters"]["sampling"] == "group_by_length" and not whole_epoch(state.epoch):
        raise ResumeError(f"--resume: {checkpoint} lies inside an epoch, and group_by_length sampling draws each "
                          "epoch's order from the global random state, which the Trainer restores only after that "
                          "epoch's first batches are drawn: the run would not continue exactly; --overwrite runs it "
                          "again")
    return checkpoint


def train_classifier(options: ClassifierOptions, command: Optional[str] = None) -> dict:
    """Train the BCN of `options`, evaluate its best checkpoint (by validation accuracy) on validation and test,
    and write the run's outputs in `options.output_dir` (main process). Returns the metrics dict (every process)."""
    from transformers import AutoTokenizer

    run = {"command": command or "modeling_cove.training.commands.train_classifier.train_classifier (library call)",
           "git": {"commit": git_commit()}}  # the code that runs: read now (a long run may outlive a commit)
    wall_start = time.time()
    if options.threads:
        torch.set_num_threads(options.threads)
    output_dir = Path(options.output_dir)
    check_run(options, output_dir)
    hp = run_hyperparameters(options)
    training_args = make_training_arguments(output_dir / "checkpoints", hp, options.seed, max_steps=options.max_steps,
                                            sampling=hp["sampling"])
    settings = run_settings(options, hp, training_args.world_size, training_args.device.type)
    checkpoint = resume_checkpoint(options, output_dir, settings)
    if options.resume:
        for folder, problem in incomplete_checkpoints(output_dir / "checkpoints", settings["world_size"]).items():
            log(f"resume: passed over {folder}: {problem}", training_args)
        last = last_checkpoint(output_dir / "checkpoints", settings["world_size"])
        if checkpoint != last:
            log(f"resume: the run had ended at {last}: replaying from its best checkpoint", training_args)
        log(f"resuming from {checkpoint or 'the first step (no whole checkpoint)'}", training_args)
    log(f"task {options.task}, column {options.bcn_input}, seed {options.seed}, data "
        f"{options.data_dir or 'Hub dataset ids'}, hyperparameters {hp['source']}, {training_args.world_size} "
        f"process(es) x {training_args.per_device_train_batch_size} examples per step", training_args)
    tokenizer = AutoTokenizer.from_pretrained(options.encoder)
    raw, splits, dropped, subsample = prepare_splits(options, hp, tokenizer, training_args)
    model = build_model(options.encoder, options.bcn_input, raw["train"].features["label"].names, hp, options.seed,
                        options.freeze_random_embeddings, pair_input="text_pair" in raw["train"].column_names)
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    log(f"{type(model).__name__}: {n_trainable:,} trainable parameters, "
        f"{sum(p.numel() for p in model.parameters()):,} in all", training_args)
    collator, splits, feature_info = attach_features(model, splits, options, hp, training_args)
    if training_args.process_index == 0 and not options.resume:
        if options.overwrite:  # only what a run writes, so none is left stale
            remove_previous_outputs(output_dir)
        write_json(output_dir / RUN_SETTINGS_FILE, settings)
    trainer, timer, early_stopping, train_result, train_seconds = fit(model, training_args, splits, collator, hp,
                                                                      checkpoint)
    run.update(hyperparameters=hp, subsample=subsample, splits={s: len(splits[s]) for s in splits},
               resumed_from_step=checkpoint_step(checkpoint) if checkpoint else None,
               stop_reason=stop_reason(trainer, early_stopping), epochs_run=round(trainer.state.epoch or 0.0, 3),
               global_steps=trainer.state.global_step)
    log(f"training stopped: {run['stop_reason']}", training_args)
    run.update(evaluate_best(trainer, splits["validation"], splits["test"]))
    run.update(task=options.task, column=options.bcn_input, seed=options.seed, encoder=str(options.encoder),
               encoder_type=model.config.encoder_type,
               encoder_weights=settings["encoder_weights"],  # one encoder per table cell (results.py)
               train_fraction=options.train_fraction, data_dir=options.data_dir, dropped_rows=dropped,
               limit=options.limit, max_steps=options.max_steps,
               trainable_parameters=n_trainable, scalar_mix=scalar_mix_weights(trainer.model),
               feature_cache=feature_info, world_size=training_args.world_size,
               per_device_train_batch_size=training_args.per_device_train_batch_size)
    trained = {"train_seconds": round(train_seconds, 1), "train_loss": train_result.training_loss}
    if checkpoint:  # the Trainer's figures cover the steps since the resume; the whole run's are not known
        started = json.loads((output_dir / RUN_SETTINGS_FILE).read_text())
        run.update(train_seconds=None, train_loss=None, since_resume=trained, started_at_commit=started.get("commit"))
    else:
        run.update(trained)
    finish_run(trainer, tokenizer, options, run, timer, wall_start)
    return run


def fit(model, training_args, splits: dict, collator, hp: dict, checkpoint: Optional[str] = None):
    """Train (from `checkpoint` when given: a resumed run) with the best checkpoint by validation accuracy loaded back
    at the end. Returns (trainer, epoch timer, early-stopping callback or None, train result, seconds of this
    process's training)."""
    callbacks = [EpochTimer(), FindBestCheckpoint()]
    if hp["early_stopping_patience"]:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=int(hp["early_stopping_patience"])))
    trainer = build_trainer(model, training_args, splits["train"], splits["validation"], collator, callbacks)
    start = time.time()
    train_result = trainer.train(resume_from_checkpoint=checkpoint)
    return (trainer, live_callback(trainer, EpochTimer), live_callback(trainer, EarlyStoppingCallback), train_result,
            time.time() - start)


def evaluate_best(trainer, validation_set, test_set) -> dict:
    """Validation and test figures of the model the trainer holds (the best checkpoint, loaded back); every process
    takes part, and every one gets the figures over the whole split."""
    trainer.remove_callback(EarlyStoppingCallback)  # it only understands eval_* metrics
    validation = trainer.evaluate(validation_set, metric_key_prefix="validation")
    test = trainer.evaluate(test_set, metric_key_prefix="test")
    best_step = None
    if trainer.state.best_model_checkpoint:
        best_step = checkpoint_step(trainer.state.best_model_checkpoint)
    return {
        "best": {"step": best_step, "validation_accuracy": trainer.state.best_metric},
        "validation": {k: validation[f"validation_{k}"] for k in ("accuracy", "macro_f1", "loss")},
        "test": {k: test[f"test_{k}"] for k in ("accuracy", "macro_f1", "loss")},
    }


def finish_run(trainer, tokenizer, options: ClassifierOptions, run: dict, timer: EpochTimer, wall_start: float):
    """Save the best checkpoint with its tokenizer and evaluation JSON, write the metrics JSON, drop the Trainer's
    checkpoints, draw the curves: all on the main process, the others waiting until the checkpoint is complete."""
    output_dir = Path(options.output_dir)
    main_process = trainer.is_world_process_zero()
    best_dir = output_dir / "best"
    log(f"best validation accuracy {100 * run['validation']['accuracy']:.2f}; test accuracy "
        f"{100 * run['test']['accuracy']:.2f}, macro-F1 {100 * run['test']['macro_f1']:.2f}", trainer.args)
    if not options.no_save_model:
        trainer.save_model(str(best_dir))  # writes on the main process only
        if main_process:
            tokenizer.save_pretrained(best_dir)
    end_run(trainer.accelerator)  # the checkpoint is complete (and no process still reads checkpoints/)
    history = trainer.state.log_history
    epochs = epoch_records(timer, history)
    whole = [e for e in epochs if not (e.get("resumed") or e.get("partial"))]  # epochs timed from first to last step
    run.update(
        epochs=epochs,
        seconds_per_epoch_mean=round(float(np.mean([e["train_seconds"] for e in whole])), 2) if whole else None,
        cpu_seconds_per_epoch_mean=round(float(np.mean([e["cpu_seconds"] for e in whole])), 2) if whole else None,
        paper_table2_validation_accuracy=(run["hyperparameters"].get("paper_table2") or {}).get(options.bcn_input),
        log_history=history,
        machine={**machine_info(), "device": str(trainer.args.device),
                 "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
        wall_seconds=round(time.time() - wall_start, 1),
        model_dir=None if options.no_save_model else str(best_dir),
    )
    if not main_process:
        return
    if not options.no_save_model:
        write_eval_results(best_dir, output_dir / "eval_results.json", options, run)
    write_json(output_dir / "metrics.json", run)  # first: a kill from here on leaves a finished run
    if not options.keep_checkpoints:
        shutil.rmtree(output_dir / "checkpoints", ignore_errors=True)
    plot_curves(curve_panels(history), output_dir / "curve.png",
                f"BCN {options.task} ({options.bcn_input}, seed {options.seed}): test acc "
                f"{100 * run['test']['accuracy']:.2f}")
    log(f"wrote {output_dir / 'metrics.json'} and {output_dir / 'curve.png'}")


def main(argv=None):
    """cove-train-classifier: ClassifierOptions from the command line (--data-dir defaults to $COVE_DATA_DIR), then
    `train_classifier`; a bad input (existing output folder, missing file, unknown preset) ends in one line, exit 2."""
    options = parse_options(ClassifierOptions, argv, description=__doc__)
    if options.data_dir is None:
        options.data_dir = os.environ.get("COVE_DATA_DIR")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:  # returns None, so the entry point exits 0: the metrics are in the run folder
        train_classifier(options, command=command_line([sys.argv[0], *argv]))
    except (FileExistsError, FileNotFoundError, PresetError, ResumeError, CheckpointError) as err:  # a bad input
        fail(err)


if __name__ == "__main__":
    main()
