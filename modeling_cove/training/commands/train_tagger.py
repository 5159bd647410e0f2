"""Train a sequence tagger (`CoveForTokenClassification`): supervised, with Cross-View Training, one task or several
sharing the encoder (docs/tagging.md). Command line: `cove-train-tagger` (also `python -m
modeling_cove.training.commands.train_tagger`); from Python `train_tagger(TaggerSettings(...))`.

    cove-train-tagger --task conll2000 --encoder runs/vocab-tagging --data-dir DATA --output-dir runs/tag/c2k
    cove-train-tagger --task conll2000 --encoder runs/vocab-tagging --data-dir DATA --cvt --unlabeled imdb sst \\
        --output-dir runs/tag/c2k-cvt                                        # Cross-View Training
    cove-train-tagger --task conll2000 --train-fraction 0.1 --cvt --unlabeled train-rest ...   # small-data setting
    cove-train-tagger --task conll2000 ewt_upos --cvt ...                    # multi-task: one encoder, two taggers
    cove-train-tagger --task wnut17 --label-scheme bioes ...               # learn BIOES tags, score in IOB2
    accelerate launch --num_processes 2 --cpu -m modeling_cove.training.commands.train_tagger ...               # DDP, 2 processes
    cove-train-tagger ... --resume                                            # continue exactly where it stopped

--task names a preset (`configuration/tagging/<task>.yaml`: conll2000, ewt_upos, wnut17, read from --data-dir as
docs/tagging.md lays out) or `hf:<dataset id>[:<config>]@<tag column>` (online; e.g. hf:eriktks/conll2003@ner_tags).
--encoder is a CoVe or biLM encoder checkpoint: its tokenizer and word vectors (frozen unless the preset's
`train_word_vectors`), and its frozen encoder for --input vectors+cove / vectors+scalar_mix. Outputs in --output-dir:
best/ (the tagger of the best validation epoch with its eval_results.json, one folder per task when several:
best/<task>/; none with --no-save-model), metrics.json (validation per epoch, test of the best epoch, speeds),
curves.png, checkpoints/step-N/.

What this CLI adds over a plain `Trainer` (which fine-tunes the same model: docs/trainer_recipes.md): Cross-View
Training's alternating labelled / unlabelled steps, identical on every process at every step (a batch order that is a
pure function of (seed, epoch), each process training on its share of the global batch), several tasks sharing the
encoder, training-only auxiliary modules that the exported tagger leaves out, scoring by words (seqeval, words
without a token counted wrong) and exact resume inside an epoch on the shared pretraining scaffold
(`accelerate_loop.AccelerateLoop`; its docstring says why that loop and not a `Trainer` subclass).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ...modeling_cove_tagger import IGNORE_INDEX
from ..common.cli import A_FOLDER, A_RATE, AT_LEAST_ONE, POSITIVE, REQUIRED, option, run_training_command
from ..common.presets import load_settings, resolve_settings
from ..loops import stopping
from ..loops.cvt import CrossViewOptions, TaggerTraining, view_counts
from ..loops.tagger_schedule import TASK_SAMPLING, StepBudgetBatches, UnlabelledStream, WeightAverage, lr_factor
from ..loops.accelerate_loop import (BEST_STATE_FILE, AccelerateLoop, LoopState, StopLimits, check_best_state,
                                     check_run_folder, end_run, epoch_batches, make_accelerator, make_optimizer,
                                     rank_share, same_if_recorded, same_place, same_places, same_with_defaults,
                                     start_run_folder)
from ..common.run_info import command_line, git_commit, machine_info, plot_curves
from ..common.files import atomic_path, write_json
from ..data.texts import is_text_file
from ..publishing.cards_record import weights_fingerprint

__all__ = ["build_training", "check_hyperparameters", "encode_split", "Encoded", "HYPERPARAMETER_DEFAULTS", "INPUTS",
           "LABEL_SCHEMES", "label_set", "labelled_batches", "load_hyperparameters", "load_task", "load_tokenizer",
           "main", "main_metric", "pad", "plot_run_curves", "predict_tags", "prepare_tasks", "process_rows",
           "resolved_hyperparameters", "RESUME_SAME", "same_hyperparameters", "save_taggers", "scheme_tags", "score",
           "step_budget", "TaggerLoop", "TaggerSettings", "TaskRun", "train_tagger", "unlabeled_sentences"]

LABEL_SCHEMES = ("bio", "bioes")
HYPERPARAMETER_DEFAULTS = {
    "epochs": 20, "batch_size": 64, "learning_rate": 1e-3, "dropout": 0.5, "hidden_size": 300, "module_dim": 300,
    "max_grad_norm": 1.0, "early_stopping_patience": 5, "eval_batch_size": 256, "max_length": 512,
    "unlabeled_max_length": 50,
    # the CVT authors' recipe (configuration/tagging/cvt-paper.yaml; docs/tagging.md): off at these defaults
    "labelled_steps": None,  # a budget of labelled steps instead of epochs, validation every `eval_every`
    "eval_every": 250, "task_sampling": "proportional", "optimizer": "adam", "momentum": 0.9, "warmup_steps": 0,
    "lr_decay": 0.0, "ema_decay": 0.0, "label_smoothing": 0.0, "unlabeled_dropout": None, "full_module": False,
    "boundary_tokens": False, "train_word_vectors": False, "label_scheme": "bio",
}
HYPERPARAMETER_CHOICES = {"optimizer": ("adam", "sgd"), "task_sampling": TASK_SAMPLING, "label_scheme": LABEL_SCHEMES}
INPUTS = ("vectors", "vectors+cove", "cove", "vectors+scalar_mix")
# the labels a tagger learns (--label-scheme): "bio", the task's own tags (IOB2 chunks or entities, UPOS tags), or
# "bioes" (`tagging.to_bioes`, for a chunk or entity task; a task without B-/I- tags keeps its own), scored back in IOB2
BIOES_PREFIXES = ("B-", "I-", "E-", "S-")
SEED_STRIDE = 7919  # batch order: the generator seed is seed x SEED_STRIDE + epoch (unlabelled: + pass + 1 000 000,
#                     passes counted from 0: `UnlabelledStream`)
SENTENCE_ENDS = (".", "!", "?")


@dataclass
class TaggerSettings:
    """Every setting of a tagging run (the flags of cove-train-tagger). `RESUME_KEYS` must not change on resume."""

    task: list[str] = option("task preset(s) (conll2000, ewt_upos, wnut17) or hf:<id>[:<config>]@<tag column>; "
                             "two or more: multi-task, one shared encoder", REQUIRED)
    encoder: str = option("CoVe / biLM encoder checkpoint (tokenizer, word vectors, frozen encoder)", REQUIRED)
    output_dir: str = option("run folder: best/, metrics.json, curves.png, checkpoints/", REQUIRED)
    input: str = option(f"what the tagger reads per token: {', '.join(INPUTS)} (vectors+scalar_mix over a biLM "
                        "encoder is the vectors+bilm column)", "vectors")
    data_dir: Optional[str] = option("the local data folder holding the task files (docs/tagging.md)", check=A_FOLDER)
    cvt: bool = option("Cross-View Training: alternate labelled and unlabelled steps", False)
    unlabeled: list[str] = option("unlabelled text for --cvt: local corpus names (imdb, sst, trec, multi30k, snli, "
                                  "squad: training splits only), text files, hf:<id>[:<config>], or train-rest (the "
                                  "training sentences --train-fraction leaves unlabelled)", ["imdb", "sst"])
    unlabeled_ratio: int = option("unlabelled steps per labelled step with --cvt", 1, check=AT_LEAST_ONE)
    train_fraction: Optional[float] = option("keep the labels of this fixed random share of the training sentences")
    seed: int = option("seed of the batch order, initialisation, dropout and --train-fraction's subset", 1)
    preset: Optional[str] = option("hyperparameter file instead of configuration/tagging/<task>.yaml (first task)")
    epochs: Optional[int] = option("override the preset's epochs", check=AT_LEAST_ONE)
    batch_size: Optional[int] = option("override the preset's batch size (sentences per step, global)",
                                       check=AT_LEAST_ONE)
    learning_rate: Optional[float] = option("override the preset's learning rate (of its optimizer)", check=POSITIVE)
    dropout: Optional[float] = option("override the preset's dropout", check=A_RATE)
    hidden_size: Optional[int] = option("override the preset's biLSTM hidden size per direction", check=AT_LEAST_ONE)
    case_dim: int = option("width of an embedding of each token's casing as written (tagger_case_dim; the word "
                           "vectors are lower-cased, so NER loses case without it); 0: none", 0)
    label_scheme: Optional[str] = option("override the preset's label scheme: bio (the task's own tags) or bioes "
                                         "(chunk and entity tasks in BIOES, the CVT authors' encoding; scored back "
                                         "in the task's own tags)", choices=list(LABEL_SCHEMES))
    limit_sentences: Optional[int] = option("at most this many sentences per split and unlabelled texts (smoke "
                                            "tests)", check=AT_LEAST_ONE)
    max_steps: Optional[int] = option("stop after this many steps (resume with more to continue)")
    time_budget_minutes: Optional[float] = option("stop (and checkpoint) after this much training time", check=POSITIVE)
    save_steps: int = option("also checkpoint every N steps", 0)
    keep_checkpoints: int = option("newest checkpoints kept", 1)
    resume: bool = option("continue from the latest checkpoint in output_dir", False)
    overwrite: bool = option("delete an existing output_dir first", False)
    no_save_model: bool = option("do not write best/ (the table's runs: metrics only)", False)
    no_test: bool = option("score the validation split only, leaving the test split unread (while a recipe is "
                           "chosen); needs --no-save-model", False)
    hyperparameters: Optional[str] = option("a JSON object of hyperparameters over the preset's, e.g. "
                                            "'{\"ema_decay\": 0.998}' (keys: HYPERPARAMETER_DEFAULTS)")

    def __post_init__(self):
        if self.input not in INPUTS:
            raise ValueError(f"--input must be one of {INPUTS}, got {self.input!r}")
        if self.label_scheme is not None and self.label_scheme not in LABEL_SCHEMES:
            raise ValueError(f"--label-scheme must be one of {', '.join(LABEL_SCHEMES)}, got {self.label_scheme!r}")
        if self.cvt and self.input != "vectors":
            raise ValueError(f"--cvt reads the word vectors alone (--input vectors): restricted views mean nothing over "
                             f"{self.input!r}, whose features already see both directions")
        if self.train_fraction is not None and not 0 < self.train_fraction <= 1:
            raise ValueError(f"--train-fraction must be in (0, 1], got {self.train_fraction}")
        if "train-rest" in self.unlabeled and self.train_fraction is None and self.cvt:
            raise ValueError("--unlabeled train-rest needs --train-fraction (the rest of the training sentences)")
        if self.no_test and not self.no_save_model:
            raise ValueError("--no-test writes no tagger (its evaluation record needs test figures): add "
                             "--no-save-model")
        if len(set(self.task)) != len(self.task):
            raise ValueError(f"--task names a task twice: {self.task}")

    def resume_settings(self) -> dict:
        """The settings that make a run what it is, and that a resume must find unchanged (its metrics.json records
        them)."""
        return {key: getattr(self, key) for key in RESUME_KEYS}


RESUME_KEYS = ("task", "encoder", "input", "data_dir", "cvt", "unlabeled", "unlabeled_ratio", "train_fraction",
               "seed", "preset", "epochs", "batch_size", "learning_rate", "dropout", "hidden_size", "case_dim",
               "limit_sentences", "label_scheme", "hyperparameters")
# resume keys newer than some run folders, at the value such a folder's run had (`check_run_folder`'s defaults)
ADDED_SETTINGS = {"label_scheme": None, "hyperparameters": None, "encoder_weights": None,
                  "resolved_hyperparameters": None, "processes": None}
# resume keys that are not flags: what the run read and resolved, and how many processes ran it (each holds its own
# random states, and the batches are split over them: another count would not continue exactly)
RECORDED_KEYS = ("encoder_weights", "resolved_hyperparameters", "processes")


def same_sources(first, now) -> bool:
    """Two `--unlabeled` lists naming the same texts: a text file by its resolved path (`same_place`), a local
    corpus, train-rest or hf:<id> as written (`texts.is_text_file`)."""
    return same_places(first, now, is_place=is_text_file)


def same_hyperparameters(first: dict | None, now: dict) -> bool:
    """Whether a run trains with the hyperparameters it first resolved (`resolved_hyperparameters`): a preset file
    edited since is another run. A key the first run did not record (added since) counts at its default; a first
    run that recorded none (older than this check) is taken as it is."""
    return same_with_defaults(first, now, HYPERPARAMETER_DEFAULTS)


def resolved_hyperparameters(hp: dict) -> dict:
    """The hyperparameters a run trains with, as its run_settings.json records them (JSON values; not where the
    preset was read from)."""
    return json.loads(json.dumps({key: value for key, value in hp.items() if key != "source"}))


# resume keys compared otherwise than with ==: the data folder and the unlabelled files in any spelling of their
# place; the encoder's weights (sha256) and the number of processes only where the first run recorded them (older
# runs did not); the hyperparameters as resolved from the preset's file (`same_hyperparameters`)
RESUME_SAME = {"data_dir": same_place, "unlabeled": same_sources, "encoder": same_place,
               "encoder_weights": same_if_recorded, "processes": same_if_recorded,
               "resolved_hyperparameters": same_hyperparameters}


# ---------------------------------------------------------------------------------------------------------------
# data


def load_hyperparameters(settings: TaggerSettings) -> dict:
    """HYPERPARAMETER_DEFAULTS < the preset (`--preset`, else configuration/tagging/<first task>.yaml when there is
    one: a task read from the Hub may have none) < `--hyperparameters` (a null there unsets the preset's value) <
    the command line's overrides."""
    try:
        extra = json.loads(settings.hyperparameters) if settings.hyperparameters else {}
    except json.JSONDecodeError as err:
        raise ValueError(f"--hyperparameters is not valid JSON ({err}): {settings.hyperparameters!r}") from None
    if not isinstance(extra, dict):
        raise ValueError(f"--hyperparameters must be a JSON object, got {settings.hyperparameters!r}")
    overrides = {key: getattr(settings, key) for key in ("epochs", "batch_size", "learning_rate", "dropout",
                                                         "hidden_size", "label_scheme")}
    hp, source, _ = load_settings(HYPERPARAMETER_DEFAULTS, settings.preset or settings.task[0], "tagging",
                                  extra_keys=("task", "description"), optional=not settings.preset)
    hp = resolve_settings(hp, extra, overrides, where="--hyperparameters")  # the JSON as one more preset layer
    where = f"{source} with --hyperparameters" if extra else source
    check_hyperparameters(hp, where)
    sampling = HYPERPARAMETER_DEFAULTS["task_sampling"]
    if len(settings.task) > 1 and hp["task_sampling"] != sampling and hp["labelled_steps"] is None:
        raise ValueError(f"{where}: hyperparameter task_sampling={hp['task_sampling']!r} must be {sampling!r} for a "
                         "multi-task run without labelled_steps (an epoch takes every task's batches once; the "
                         "sampling picks tasks only for a budget of labelled steps)")
    hp["source"] = source
    return hp


def check_hyperparameters(hp: dict, where: str) -> None:
    """A ValueError naming the key and `where` it came from for a value of the wrong type (a preset or
    --hyperparameters is JSON or YAML: "false" is a string, not a switch) or outside its range or choices."""
    def bad(key, requirement):
        raise ValueError(f"{where}: hyperparameter {key}={hp[key]!r} must be {requirement}")

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    for key, choices in HYPERPARAMETER_CHOICES.items():
        if hp[key] not in choices:
            bad(key, f"one of {choices}")
    for key in ("full_module", "boundary_tokens", "train_word_vectors"):
        if not isinstance(hp[key], bool):
            bad(key, "true or false")
    counts = ["epochs", "batch_size", "eval_batch_size", "hidden_size", "module_dim", "max_length",
              "unlabeled_max_length", "eval_every"]
    counts += ["labelled_steps"] if hp["labelled_steps"] is not None else []  # None: the run counts epochs
    for key in counts:
        if not isinstance(hp[key], int) or isinstance(hp[key], bool) or hp[key] < 1:
            bad(key, "an int >= 1")
    for key in ("early_stopping_patience", "warmup_steps"):  # patience 0: no early stopping
        if not isinstance(hp[key], int) or isinstance(hp[key], bool) or hp[key] < 0:
            bad(key, "an int >= 0")
    rates = ["ema_decay", "label_smoothing", "dropout", "momentum"]
    rates += ["unlabeled_dropout"] if hp["unlabeled_dropout"] is not None else []  # None: the model's dropout
    for key in rates:
        if not number(hp[key]) or not 0 <= hp[key] < 1:
            bad(key, "a number in [0, 1)")
    for key in ("learning_rate", "max_grad_norm"):
        if not number(hp[key]) or not hp[key] > 0:
            bad(key, "a number > 0")
    if not number(hp["lr_decay"]) or hp["lr_decay"] < 0:
        bad("lr_decay", "a number >= 0")


def load_task(task: str, data_dir, limit: Optional[int] = None):
    """(DatasetDict train / validation / test with words, tags, text; metric kind "f1" or "accuracy")."""
    from ..data import tagging as tagging_data

    if task.startswith("hf:"):
        import datasets

        source, _, tag_column = task[3:].partition("@")
        if not tag_column:
            raise ValueError(f"--task {task!r}: name the tag column, hf:<id>[:<config>]@<tag column>")
        dataset_id, _, config_name = source.partition(":")
        splits = tagging_data.from_hub_dataset(datasets.load_dataset(dataset_id, config_name or None), tag_column)
        tags = {tag for sentence in splits["train"]["tags"] for tag in sentence}
        kind = "f1" if tagging_data.uses_chunk_tags(tags) else "accuracy"  # spans (B-/I- tags), else per-token tags
    else:
        if task not in tagging_data.TAGGING_TASKS:
            raise ValueError(f"unknown task {task!r}: choose from {sorted(tagging_data.TAGGING_TASKS)} or "
                             "hf:<id>[:<config>]@<tag column>")
        if data_dir is None:
            raise ValueError(f"task {task!r} is read from the local data: give --data-dir (docs/tagging.md)")
        splits = tagging_data.load_tagging_splits(task, data_dir)
        kind = tagging_data.TAGGING_TASKS[task].metric
    if limit:
        splits = splits.__class__({name: split.select(range(min(limit, len(split)))) for name, split in
                                   splits.items()})
    return splits, kind


@dataclass
class Encoded:
    """A split tokenised for the tagger: per sentence its token ids, word ids (`word_ids()`), each token's casing as
    written (`casing_class`), gold word tags and (for splits trained or validated on) aligned label ids (-100 where
    no label)."""

    ids: list
    word_ids: list
    case_ids: list
    tags: list
    labels: Optional[list] = None

    def lengths(self) -> np.ndarray:
        return np.array([len(ids) for ids in self.ids])


def encode_split(split, tokenizer, label2id: Optional[dict], name: str, max_length: int,
                 label_scheme: str = "bio") -> Encoded:
    """Tokenise each sentence's words (`is_split_into_words=True`); a sentence without tokens or with more than
    `max_length` tokens is a ValueError naming the split and row (nothing is dropped). `tags` keeps the split's own
    gold tags (what predictions are scored against); with `label2id`, the labels are aligned from them, or from
    their BIOES form (`tagging.to_bioes`) when `label_scheme` is "bioes"."""
    from ...modeling_cove_tagger import casing_class
    from ..data import tagging as tagging_data

    words = list(split["words"])
    encoding = tokenizer(words, is_split_into_words=True, add_special_tokens=False, return_offsets_mapping=True)
    ids = encoding["input_ids"]
    word_ids = [encoding.word_ids(i) for i in range(len(words))]
    case_ids = [[casing_class(words[row][w][start:end]) for w, (start, end) in zip(wids, offsets)]
                for row, (wids, offsets) in enumerate(zip(word_ids, encoding["offset_mapping"]))]
    for row, tokens in enumerate(ids):
        if not tokens:
            raise ValueError(f"{name} row {row}: the sentence {words[row][:10]} produced no tokens")
        if len(tokens) > max_length:
            raise ValueError(f"{name} row {row}: {len(tokens)} tokens, more than the tagger's max_length "
                             f"{max_length} (tagger_max_length); split the sentence or raise max_length")
    tags = list(split["tags"])
    labels = None
    if label2id is not None:
        learned = scheme_tags(tags, label_scheme)
        tagging_data.check_tags({"words": words, "tags": learned}, label2id, name)
        labels = [tagging_data.align_labels(w, t, label2id) for w, t in zip(word_ids, learned)]
    return Encoded(ids, word_ids, case_ids, tags, labels)


def scheme_tags(tags: list, label_scheme: str) -> list:
    """Sentences' gold tags (lists) in `label_scheme`: as they are ("bio"), or each in BIOES ("bioes")."""
    from ..data.tagging import to_bioes

    return [to_bioes(sentence) for sentence in tags] if label_scheme == "bioes" else [list(s) for s in tags]


def label_set(*splits, label_scheme: str = "bio") -> list:
    """The task's tag inventory: the tags of `splits` (the whole training split and the validation split, whatever
    share of train keeps its labels: a rare tag must not be an unknown tag of validation), plus I-X for every B-X of
    an IOB2 tag set (a chunk type seen only as one-word chunks can still continue at test time: CoNLL-2000's test has
    I-LST, its training data only B-LST). With `label_scheme` "bioes", the tags in BIOES (`tagging.to_bioes`) and
    every one of B-X, I-X, E-X, S-X for each type X seen, so that no form of a rare type is an unknown label."""
    from ..data import tagging as tagging_data

    if label_scheme != "bioes":
        labels = set().union(*(tagging_data.label_list(split) for split in splits))
        return sorted(labels | {"I-" + tag[2:] for tag in labels if tag.startswith("B-")})
    labels = {tag for split in splits for tags in scheme_tags(split["tags"], "bioes") for tag in tags}
    kinds = {tag[2:] for tag in labels if tag[:2] in BIOES_PREFIXES}
    return sorted(labels | {prefix + kind for kind in kinds for prefix in BIOES_PREFIXES})


def unlabeled_sentences(settings: TaggerSettings, tokenizer, rest_words: list, max_length: int) -> tuple:
    """The unlabelled text as sentences (token ids, case ids): each text tokenised, cut after sentence-final
    punctuation, and pieces longer than `max_length` tokens cut into `max_length` windows; one-token pieces are
    left out (no context for any view). `train-rest` reads `rest_words` (word lists)."""
    from ...modeling_cove_tagger import case_ids_from_offsets
    from ..data.texts import corpus_texts

    texts = []
    for source in settings.unlabeled:
        found = [" ".join(w) for w in rest_words] if source == "train-rest" else corpus_texts(source,
                                                                                               settings.data_dir)
        texts += found[:settings.limit_sentences] if settings.limit_sentences else found
    ends = {tokenizer.convert_tokens_to_ids(t) for t in SENTENCE_ENDS} - {tokenizer.unk_token_id}
    sentences, cases = [], []
    for start in range(0, len(texts), 2000):
        chunk = texts[start:start + 2000]
        encoding = tokenizer(chunk, add_special_tokens=False, return_offsets_mapping=True)
        for text, ids, offsets in zip(chunk, encoding["input_ids"], encoding["offset_mapping"]):
            begin = 0
            for i, token in enumerate(ids):
                if token in ends or i + 1 - begin == max_length or i + 1 == len(ids):
                    if i + 1 - begin >= 2:
                        sentences.append(ids[begin:i + 1])
                        cases.append(case_ids_from_offsets(text, offsets[begin:i + 1]))
                    begin = i + 1
    if not sentences:
        raise ValueError(f"--unlabeled {settings.unlabeled}: no sentence of 2 tokens or more")
    return sentences, cases


def pad(rows: list, device, value: int = 0) -> tuple:
    """(rows (B, T), attention mask (B, T)) on `device`: lists of ids (tokens, case ids, label ids) right-padded
    with `value` (`feature_cache.pad_rows`)."""
    from ...feature_cache import pad_rows

    batch = pad_rows(rows, [[0] * len(row) for row in rows], value)
    return batch["input_ids"].to(device), batch["attention_mask"].to(device)


# ---------------------------------------------------------------------------------------------------------------
# prediction and scoring


@torch.no_grad()
def predict_tags(training, task: str, data: Encoded, labels: list, batch_size: int, device,
                 label_scheme: str = "bio") -> list:
    """Each sentence's predicted tag per word (None for a word without a token): the task's primary module in eval
    mode, batches of similar lengths. A tagger trained on BIOES (`label_scheme` "bioes") has its predictions mapped
    back to the task's IOB2 (`tagging.to_bio`), the scheme of the gold tags `data.tags`."""
    from ..data.tagging import to_bio, word_predictions

    was_training = training.training
    training.eval()
    order = np.argsort(data.lengths(), kind="stable")
    predicted = [None] * len(data.ids)
    try:
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size].tolist()
            ids, mask = pad([data.ids[r] for r in rows], device)
            cases, _ = pad([data.case_ids[r] for r in rows], device)
            best = training.token_logits(task, ids, mask, cases).argmax(dim=-1).cpu().tolist()  # (B, T)
            for r, tokens in zip(rows, best):
                words = word_predictions(tokens[:len(data.ids[r])], data.word_ids[r], len(data.tags[r]))
                predicted[r] = [None if w is None else labels[w] for w in words]
    finally:
        training.train(was_training)
    return [to_bio(tags) for tags in predicted] if label_scheme == "bioes" else predicted


def score(training, task: str, data: Encoded, labels: list, kind: str, batch_size: int, device,
          label_scheme: str = "bio") -> dict:
    """`tagging_data.score_tagging` of the task's predictions against the gold word tags, in the task's own scheme
    (a BIOES tagger's predictions mapped back, `predict_tags`)."""
    from ..data.tagging import score_tagging

    predicted = predict_tags(training, task, data, labels, batch_size, device, label_scheme)
    result = score_tagging(data.tags, predicted, kind)
    return {**result, "per_type": result.get("per_type")}


def main_metric(result: dict, kind: str) -> float:
    return result["f1"] if kind == "f1" else result["accuracy"]


# ---------------------------------------------------------------------------------------------------------------
# the loop


@dataclass
class TaskRun:
    """One task of a run: its labels, metric kind and encoded splits, and the scheme its labels are in ("bioes" when
    --label-scheme bioes converted its chunk tags, else "bio": the task's own tags)."""

    name: str
    labels: list
    kind: str
    train: Encoded
    validation: Encoded
    test: Encoded
    counts: dict
    label_scheme: str = "bio"


LENGTH_GROUP_BATCHES = 50  # labelled and unlabelled batches are cut from length-sorted chunks of this many batches


def labelled_batches(split: Encoded, batch_size: int, seed: int, epoch: int) -> list:
    """One task's labelled batches of `epoch` (lists of sentence indices into `split`), a pure function of (seed,
    epoch): sentences of similar lengths batched together (`epoch_batches` with length grouping over chunks of
    `LENGTH_GROUP_BATCHES` batches), so that a batch's biLSTM steps are mostly real tokens; the batches shuffled."""
    return epoch_batches(len(split.ids), batch_size, seed, epoch, SEED_STRIDE, lengths=(split.lengths(),),
                         chunk_batches=LENGTH_GROUP_BATCHES)


def process_rows(rows: list, rank: int, world: int) -> tuple:
    """(this process's rows of a global batch, the weight of its loss): its `rank_share`, weight 1; a batch with
    fewer rows than processes (a pass's last, smaller batch) leaves some process none: that one runs the batch's
    first row at weight 0, so that every process takes part in the step's gradient reduction (DDP waits for all)."""
    share = rank_share(rows, rank, world)
    return (share, 1.0) if share else (rows[:1], 0.0)


class TaggerLoop(AccelerateLoop):
    """A tagging run on the shared scaffold. An "epoch" is one pass over the labelled batches of every task
    (shuffled together) or, with a `labelled_steps` budget, one evaluation period of `eval_every` labelled steps
    (`StepBudgetBatches`); each labelled batch is followed by `unlabeled_ratio` unlabelled batches with --cvt.
    Adam, or SGD with momentum, at the rate `lr_factor` sets per labelled step, with gradient clipping; an
    exponential moving average of the weights (`ema_decay` > 0) for validation, test and the saved tagger;
    validation after every epoch or period; the best one's weights kept (`best_state.safetensors`) and early
    stopping after `early_stopping_patience` of them without improvement (0: none; the mean of the tasks' main
    metrics)."""

    def __init__(self, settings: TaggerSettings, accelerator, training, tasks: list, unlabeled: tuple, hp: dict):
        self.unlabelled_stream = UnlabelledStream([len(ids) for ids in unlabeled[0]], hp["batch_size"],
                                                  settings.seed, SEED_STRIDE, LENGTH_GROUP_BATCHES)
        self.budget = step_budget(settings, hp, tasks, self.unlabelled_stream)
        periods = self.budget.periods if self.budget else hp["epochs"]
        super().__init__(accelerator, settings.output_dir, StopLimits(periods, settings.max_steps,
                                                                      settings.time_budget_minutes),
                         settings.seed, settings.save_steps, settings.keep_checkpoints)
        self.settings, self.tasks, self.hp = settings, tasks, hp
        self.unlabeled, self.unlabeled_cases = unlabeled  # token ids and case ids of each unlabelled sentence
        trainable = [(n, p) for n, p in training.named_parameters() if p.requires_grad]
        optimizer = make_optimizer(hp["optimizer"], [p for _, p in trainable], hp["learning_rate"], hp["momentum"])
        self.model, self.optimizer = accelerator.prepare(training, optimizer)
        self.unwrapped = accelerator.unwrap_model(self.model)
        self.average = WeightAverage(trainable, hp["ema_decay"]) if hp["ema_decay"] else None
        self.phase_seconds = {"labelled": [0.0, 0], "unlabelled": [0.0, 0]}  # seconds, tokens of this process's run
        self.start(settings.resume, LoopState(epoch_sums=self.fresh_epoch_sums(), schedule={"labelled_steps": 0}))

    def save_extra(self, folder: Path):
        if self.average is not None:
            self.average.save(folder)

    def restore_extra(self, folder: Path):
        if self.average is not None:
            self.average.load(folder)

    def fresh_epoch_sums(self) -> list:
        return [0.0, 0, 0.0, 0]  # labelled loss sum, labelled steps, unlabelled loss sum, unlabelled steps

    def epoch_batches(self, epoch: int) -> list:
        """The global batches of `epoch`, a pure function of (seed, epoch): ("labelled", task index, rows) batches of
        similar lengths, the tasks' shuffled together, each followed with --cvt by `unlabeled_ratio` ("unlabelled",
        None, rows) batches read on from the run's `UnlabelledStream` (also of similar lengths)."""
        if self.budget is not None:
            return self.budget(epoch)
        size, seed = self.hp["batch_size"], self.settings.seed
        labelled = []
        for t, task in enumerate(self.tasks):
            labelled += [("labelled", t, rows) for rows in labelled_batches(task.train, size, seed + 101 * t, epoch)]
        generator = torch.Generator().manual_seed(seed * SEED_STRIDE + epoch)
        labelled = [labelled[i] for i in torch.randperm(len(labelled), generator=generator).tolist()]
        if not self.settings.cvt:
            return labelled
        ratio = self.settings.unlabeled_ratio
        unlabelled = iter(self.unlabelled_stream.batches((epoch - 1) * len(labelled) * ratio, len(labelled) * ratio))
        return [batch for labelled_batch in labelled
                for batch in (labelled_batch, *(("unlabelled", None, next(unlabelled)) for _ in range(ratio)))]

    def global_counts(self, phase: str, t: int | None, rows: list) -> dict:
        """`TaggerTraining.forward`'s `counts` for a process of several: the positions each loss of the global batch
        `rows` averages over (its labelled tokens; each view's positions), over the number of processes. Each process
        then returns its share's sums over the global counts, times the number of processes, which DDP's mean over
        the processes turns into the global batch's mean: the same gradients as one process on the whole batch."""
        world = self.accelerator.num_processes
        if phase == "labelled":
            labels = self.tasks[t].train.labels
            return {"labelled": sum(np.count_nonzero(np.asarray(labels[r]) != IGNORE_INDEX) for r in rows) / world}
        framed = self.unwrapped.model.config.tagger_boundary_tokens
        return {view: count / world for view, count in view_counts([len(self.unlabeled[r]) for r in rows],
                                                                    framed).items()}

    def train_step(self, batch: tuple) -> dict:
        phase, t, rows = batch
        state, accelerator = self.state, self.accelerator
        share, weight = process_rows(rows, accelerator.process_index, accelerator.num_processes)
        counts = self.global_counts(phase, t, rows) if accelerator.num_processes > 1 else None
        started = time.time()
        if phase == "labelled":
            state.schedule["labelled_steps"] = state.schedule.get("labelled_steps", 0) + 1
            task = self.tasks[t]
            ids, mask = pad([task.train.ids[r] for r in share], accelerator.device)
            cases, _ = pad([task.train.case_ids[r] for r in share], accelerator.device)
            labels, _ = pad([task.train.labels[r] for r in share], accelerator.device, IGNORE_INDEX)
            loss = self.model("labelled", ids, mask, task=task.name, labels=labels, case_ids=cases, counts=counts)
        else:
            ids, mask = pad([self.unlabeled[r] for r in share], accelerator.device)
            cases, _ = pad([self.unlabeled_cases[r] for r in share], accelerator.device)
            loss = self.model("unlabelled", ids, mask, case_ids=cases, counts=counts)
        loss = loss * weight if weight != 1.0 else loss
        if not torch.isfinite(loss.detach()):
            raise FloatingPointError(f"step {state.global_step + 1} ({phase}): the loss is {float(loss)}; the run "
                                     "stops here (its last checkpoint is intact)")
        accelerator.backward(loss)
        accelerator.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], self.hp["max_grad_norm"])
        # the rate of this labelled step (an unlabelled step keeps the one before it); set here, not by a prepared
        # scheduler, which Accelerate would step once per process
        rate = self.hp["learning_rate"] * lr_factor(state.schedule.get("labelled_steps", 0),
                                                    self.hp["warmup_steps"], self.hp["lr_decay"])
        for group in self.optimizer.param_groups:
            group["lr"] = rate
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.average is not None and phase == "labelled":  # counted in labelled steps, as the rate is
            self.average.update()
        figures = accelerator.reduce(torch.tensor([float(loss.detach()), weight * float(mask.sum())],
                                                  device=accelerator.device), "sum")
        mean_loss, tokens = float(figures[0]) / accelerator.num_processes, int(figures[1])
        seconds = self.phase_seconds[phase]
        seconds[0], seconds[1] = seconds[0] + time.time() - started, seconds[1] + tokens
        state.global_step += 1
        state.step_in_epoch += 1
        state.train_tokens += tokens
        at = 0 if phase == "labelled" else 2
        state.epoch_sums[at] += mean_loss
        state.epoch_sums[at + 1] += 1
        if state.global_step % 10 == 0:
            state.loss_log.append([state.global_step, phase, mean_loss])
        return {phase[:5]: f"{mean_loss:.3f}"}

    def validation_scores(self) -> dict:
        return {task.name: score(self.unwrapped, task.name, task.validation, task.labels, task.kind,
                                 self.hp["eval_batch_size"], self.accelerator.device, task.label_scheme)
                for task in self.tasks}

    def evaluate(self, epoch: int, stopped: str | None, epoch_start: float) -> dict:
        """The epoch's record: mean training losses, validation scores per task; the best weights saved."""
        from safetensors.torch import save_file

        state, sums = self.state, self.state.epoch_sums
        best = max([h["validation_main"] for h in state.history if h["complete"]] or [-1.0])
        with self.evaluation_weights():
            validation = self.validation_scores()
            mean = float(np.mean([main_metric(validation[t.name], t.kind) for t in self.tasks]))
            if stopped is None and mean > best and self.accelerator.is_main_process:  # complete epochs only
                weights = {k: v.detach().cpu().contiguous() for k, v in self.unwrapped.state_dict().items()}
                with atomic_path(self.output_dir / BEST_STATE_FILE) as tmp:  # a kill while writing keeps the last
                    save_file(weights, str(tmp))
        record = {"epoch": epoch, "global_step": state.global_step, "steps": state.step_in_epoch,
                  "labelled_steps": state.schedule.get("labelled_steps"),
                  "complete": stopped is None, "seconds": round(time.time() - epoch_start, 1),
                  "train_loss": sums[0] / max(sums[1], 1),
                  "unlabelled_loss": sums[2] / sums[3] if sums[3] else None,
                  "validation": {name: {k: v for k, v in result.items() if k != "per_type"}
                                 for name, result in validation.items()},
                  "validation_main": mean}
        self.accelerator.wait_for_everyone()
        self.accelerator.print({k: v for k, v in record.items() if k != "validation"} |
                               {"validation": {n: round(main_metric(r, t.kind), 4) for (n, r), t in
                                               zip(validation.items(), self.tasks)}})
        return record

    def evaluation_weights(self):
        """The weights validation, test and saving read: the moving average when the run keeps one."""
        from contextlib import nullcontext

        return self.average.swapped_in() if self.average is not None else nullcontext()

    def why_stop(self, inside_epoch: bool = False) -> str | None:
        """The scaffold's limits, then early stopping at an epoch end."""
        reason = super().why_stop(inside_epoch)
        if reason is not None or inside_epoch:
            return reason
        mains = [h["validation_main"] for h in self.state.history if h["complete"]]
        patience = self.hp["early_stopping_patience"]
        if stopping.no_better_in(mains, patience):
            return stopping.early_stopping(patience, "score", "epochs")
        return None

    def write_record(self):
        """metrics.json and curves.png of the run so far."""
        if self.accelerator.is_main_process:
            write_json(self.output_dir / "metrics.json", self.record())
            plot_run_curves(self.state, self.tasks, self.output_dir / "curves.png")

    def record(self, final: Optional[dict] = None) -> dict:
        state, world = self.state, self.accelerator.num_processes
        speeds = {phase: round(tokens * 1.0 / max(seconds, 1e-9), 1) if tokens else None
                  for phase, (seconds, tokens) in self.phase_seconds.items()}
        return {
            "command": self.command, "commit": self.commit, "settings": self.settings.__dict__,
            "encoder_weights": self.encoder_weights,  # the sha256 of the encoder's weights (None: a Hub id)
            "hyperparameters": self.hp, "machine": {**machine_info(), "processes": world,
                                                    "threads": torch.get_num_threads(),
                                                    "device": str(self.accelerator.device)},
            "tasks": {t.name: {"labels": t.labels, "metric": t.kind, "label_scheme": t.label_scheme, **t.counts}
                      for t in self.tasks},
            "unlabeled_sentences": len(self.unlabeled), "epochs": state.history, "global_step": state.global_step,
            "stop_reason": state.stop_reason, "train_seconds": round(state.train_seconds, 1),
            "train_tokens": state.train_tokens,
            "train_tokens_per_second": round(state.train_tokens / max(state.train_seconds, 1e-9), 1),
            "tokens_per_second_by_phase": speeds, "wall_seconds": round(time.time() - self.run_started, 1),
            "loss_log": state.loss_log, **(final or {}),
        }

    def finish(self) -> dict:
        """The best epoch's weights back, validation and test scores per task (validation only with --no-test),
        best/ (each task's tagger, no auxiliary modules) and eval_results.json, metrics.json and curves.png; returns
        the metrics."""
        from safetensors.torch import load_file

        accelerator = self.accelerator
        best = self.output_dir / BEST_STATE_FILE
        accelerator.wait_for_everyone()
        if best.is_file():
            check_best_state(best)
            self.unwrapped.load_state_dict(load_file(str(best)))
        elif any(h["complete"] for h in self.state.history):  # each complete epoch's evaluation may have written it
            raise RuntimeError(f"{best} (the best epoch's weights) is missing although the run has complete epochs "
                               "(a run folder copied without it?): start the run again")
        elif self.average is not None:  # no complete epoch: the averaged weights as they stand
            self.average.apply()
        results, splits = {}, ("validation",) if self.settings.no_test else ("validation", "test")
        for task in self.tasks:
            results[task.name] = {split: score(self.unwrapped, task.name, getattr(task, split), task.labels,
                                               task.kind, self.hp["eval_batch_size"], accelerator.device,
                                               task.label_scheme)
                                  for split in splits}
        complete = [h for h in self.state.history if h["complete"]]
        final = {"best_epoch": max(complete, key=lambda h: h["validation_main"])["epoch"] if complete else None,
                 "results": results}
        metrics = self.record(final)
        if accelerator.is_main_process:
            for task in self.tasks:
                figures = {split: f"{100 * main_metric(result, task.kind):.2f}"
                           for split, result in results[task.name].items()}
                accelerator.print(f"{task.name} {task.kind}: {figures}")
            write_json(self.output_dir / "metrics.json", metrics)
            plot_run_curves(self.state, self.tasks, self.output_dir / "curves.png")
            if not self.settings.no_save_model:
                save_taggers(self, metrics)
        end_run(accelerator)
        return metrics


def step_budget(settings: TaggerSettings, hp: dict, tasks: list,
                unlabelled: UnlabelledStream) -> StepBudgetBatches | None:
    """The period batches of a run on a `labelled_steps` budget (None: the run counts epochs)."""
    if hp["labelled_steps"] is None:
        return None
    size = hp["batch_size"]
    task_batches = [lambda data_epoch, t=t, task=task: labelled_batches(task.train, size, settings.seed + 101 * t,
                                                                        data_epoch)
                    for t, task in enumerate(tasks)]
    return StepBudgetBatches(task_batches, [len(task.train.ids) for task in tasks], hp["labelled_steps"],
                             hp["eval_every"], hp["task_sampling"], settings.seed, SEED_STRIDE,
                             unlabelled if settings.cvt and unlabelled.per_pass else None, settings.unlabeled_ratio)


def plot_run_curves(state: LoopState, tasks: list, path: Path) -> None:
    """Training losses per step (labelled, unlabelled) and the validation score per epoch."""
    logs = {phase: [(r[0], r[2]) for r in state.loss_log if r[1] == phase] for phase in ("labelled", "unlabelled")}
    epochs = [h["epoch"] for h in state.history]
    panels = [
        {"title": "training loss", "xlabel": "step",
         "series": {phase: ([x for x, _ in rows], [y for _, y in rows]) for phase, rows in logs.items() if rows}},
        {"title": "validation (F1 or accuracy)", "xlabel": "epoch",
         "series": {t.name: (epochs, [main_metric(h["validation"][t.name], t.kind) for h in state.history])
                    for t in tasks}},
    ]
    plot_curves(panels, path, title="tagger training")


def save_taggers(loop: TaggerLoop, metrics: dict) -> None:
    """best/ (one task) or best/<task>/ (several): each task's tagger with the tokenizer, and its eval_results.json."""
    from ..publishing.cards import describe_encoder, make_eval_record, write_eval_json

    settings = loop.settings
    for task in loop.tasks:
        folder = loop.output_dir / "best" if len(loop.tasks) == 1 else loop.output_dir / "best" / task.name
        model = loop.unwrapped.export_task_model(task.name, task.labels)
        model.save_pretrained(folder)
        # the tagger reads at most tagger_max_length tokens: a pipeline given `stride` cuts its windows to this
        tokenizer = copy.copy(loop.tokenizer)
        tokenizer.model_max_length = min(tokenizer.model_max_length, model.config.tagger_max_length)
        tokenizer.save_pretrained(folder)
        test = metrics["results"][task.name]["test"]
        figures = ([{"type": "f1", "value": round(100 * test["f1"], 2)},
                    {"type": "precision", "value": round(100 * test["precision"], 2)},
                    {"type": "recall", "value": round(100 * test["recall"], 2)}] if task.kind == "f1" else
                   [{"type": "accuracy", "value": round(100 * test["accuracy"], 2)}])
        record = make_eval_record(
            folder,
            task={"type": "token-classification", "name": "Token classification"},
            dataset={"name": task.name, "key": task.name, "id": task.name, "split": "test",
                     "num_examples": task.counts["test_sentences"], "source": settings.data_dir or "Hub"},
            metrics=figures,
            training={"command": metrics["command"], "seed": settings.seed, "commit": metrics["commit"],
                      "encoder": describe_encoder(settings.encoder, used=settings.input != "vectors"),
                      "num_train_examples": task.counts["train_sentences"], "train_split": "train",
                      "hyperparameters": {k: loop.hp[k] for k in ("batch_size", "learning_rate", "dropout")},
                      "epochs_run": len(metrics["epochs"]), "steps_run": metrics["global_step"],
                      "stop_reason": metrics["stop_reason"]},
        )
        write_eval_json(folder / "eval_results.json", record)


# ---------------------------------------------------------------------------------------------------------------
# the run


def load_tokenizer(encoder: str):
    """The tokenizer of the encoder checkpoint `encoder` (a folder or a Hub id); a ValueError naming it if none."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(encoder)
    except (OSError, ValueError) as err:
        raise ValueError(f"--encoder {encoder!r} is not a loadable CoVe checkpoint (a folder with config.json, "
                         f"weights and tokenizer, or a reachable Hub id): {err}") from None


def build_training(settings: TaggerSettings, hp: dict, tasks: list, tokenizer) -> TaggerTraining:
    """The tagger on `settings.encoder` (word vectors and encoder loaded, frozen, the vectors trained with
    `train_word_vectors`; the biLSTM and modules freshly
    initialised from the seed) with the first task's labels, and the other tasks' and CVT's modules, in a
    `cvt.TaggerTraining`. `tokenizer` (the encoder's) must be the checkpoint's vocabulary."""
    from transformers import set_seed

    from ...modeling_cove_tagger import CoveForTokenClassification
    from ...tokenization_cove import check_tokenizer_matches

    set_seed(settings.seed)
    first = tasks[0]
    try:
        model = CoveForTokenClassification.from_pretrained(
            settings.encoder, num_labels=len(first.labels), id2label=dict(enumerate(first.labels)),
            label2id={label: i for i, label in enumerate(first.labels)}, tagger_input=settings.input,
            tagger_hidden_size=hp["hidden_size"], tagger_module_dim=hp["module_dim"], tagger_dropout=hp["dropout"],
            tagger_max_length=hp["max_length"], tagger_case_dim=settings.case_dim,
            tagger_boundary_tokens=hp["boundary_tokens"], freeze_encoder=True,
            freeze_embeddings=not hp["train_word_vectors"])
    except OSError as err:
        raise ValueError(f"--encoder {settings.encoder!r} is not a loadable CoVe checkpoint: {err}") from None
    check_tokenizer_matches(model.config, tokenizer)
    options = CrossViewOptions(hp["full_module"], hp["unlabeled_dropout"], hp["label_smoothing"])
    return TaggerTraining(model, {t.name: t.labels for t in tasks}, settings.cvt, options)


def prepare_tasks(settings: TaggerSettings, tokenizer, hp: dict) -> tuple:
    """(TaskRun per task, the unlabelled sentences): splits read, --train-fraction applied, tokenised and checked.
    With --label-scheme bioes, a chunk or entity task (`tagging.uses_chunk_tags`) learns its train and validation
    tags in BIOES, while every split keeps its own gold tags for scoring; a task without B-/I- tags (UPOS) keeps
    its own labels."""
    from ..data.tagging import labelled_subset, uses_chunk_tags

    tasks, rest_words = [], []
    for name in settings.task:
        splits, kind = load_task(name, settings.data_dir, settings.limit_sentences)
        train = splits["train"]
        scheme = hp["label_scheme"] if uses_chunk_tags(label_set(train, splits["validation"])) else "bio"
        labels = label_set(train, splits["validation"], label_scheme=scheme)
        if settings.train_fraction is not None and settings.train_fraction < 1:
            train, rest = labelled_subset(train, settings.train_fraction, settings.seed)
            rest_words += list(rest["words"])
        label2id = {label: i for i, label in enumerate(labels)}
        encoded = {split: encode_split(data, tokenizer, None if split == "test" else label2id, f"{name} {split}",
                                       hp["max_length"], scheme)
                   for split, data in (("train", train), ("validation", splits["validation"]),
                                       ("test", splits["test"]))}
        counts = {f"{split}_sentences": len(e.ids) for split, e in encoded.items()}
        counts |= {f"{split}_tokens": int(e.lengths().sum()) for split, e in encoded.items()}
        counts["test_tags_unseen_in_train"] = sum(tag not in label2id for tags in
                                                  scheme_tags(encoded["test"].tags, scheme) for tag in tags)
        tasks.append(TaskRun(name, labels, kind, encoded["train"], encoded["validation"], encoded["test"], counts,
                             scheme))
    unlabeled = (unlabeled_sentences(settings, tokenizer, rest_words, hp["unlabeled_max_length"])
                 if settings.cvt else ([], []))
    return tasks, unlabeled


def train_tagger(settings: TaggerSettings, argv=None, cpu: bool = False) -> dict:
    """Train a tagger as `settings` say (module docstring); returns the metrics (main process)."""
    run_started, commit = time.time(), git_commit()
    hp = load_hyperparameters(settings)
    # each phase leaves parameters unused (cvt.py): DDP must be told
    accelerator = make_accelerator(cpu, find_unused_parameters=True, batch_size=hp["batch_size"])
    # the weights read, as cove-train-classifier records them (a table cell holds runs over one encoder); a Hub id:
    # None. A resume over other weights at the same path (an encoder pretrained again) is refused.
    encoder_weights = weights_fingerprint(settings.encoder) if Path(settings.encoder).is_dir() else None
    current = {**settings.resume_settings(), "encoder_weights": encoder_weights,
               "resolved_hyperparameters": resolved_hyperparameters(hp), "processes": accelerator.num_processes}
    check_run_folder(settings.output_dir, current, RESUME_KEYS + RECORDED_KEYS, settings.resume, settings.overwrite,
                     defaults=ADDED_SETTINGS, same=RESUME_SAME)
    tokenizer = load_tokenizer(settings.encoder)
    tasks, unlabeled = prepare_tasks(settings, tokenizer, hp)
    training = build_training(settings, hp, tasks, tokenizer)
    start_run_folder(accelerator, settings.output_dir, current, settings.resume)
    loop = TaggerLoop(settings, accelerator, training, tasks, unlabeled, hp)
    loop.tokenizer, loop.commit, loop.run_started = tokenizer, commit, run_started
    loop.encoder_weights = encoder_weights
    loop.command = command_line(argv)
    loop.train()
    return loop.finish()


def main(argv=None):
    """cove-train-tagger: TaggerSettings and `cli.RunArguments` (--threads, --cpu) from the command line, then
    `train_tagger`; bad settings or data end in one line, exit status 2."""
    run_training_command(TaggerSettings, train_tagger, argv, description=__doc__)


if __name__ == "__main__":
    main()
