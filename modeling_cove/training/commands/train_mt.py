"""Pretrain CoVe: train the attentional English->German MT model (McCann et al. 2017, docs/paper.md §2) with
Accelerate, then export its encoder (the MT-LSTM) as a CoVe checkpoint. Command line: `cove-train-mt` (also
`python -m modeling_cove.training.commands.train_mt`); from Python `train_mt(MTArguments(...))`.

The same command runs on one CPU, on N GPUs and as real 2-process DDP on CPU (gloo):

    cove-train-mt --preset cove-small --data-dir DATA --vectors DATA/vectors/w2v-lower-300d.txt.xz \\
        --output-dir runs/cove-small
    accelerate launch --config_file configuration/accelerate/multi_gpu.yaml -m modeling_cove.training.commands.train_mt ...  # N GPUs
    accelerate launch --config_file configuration/accelerate/cpu_ddp.yaml -m modeling_cove.training.commands.train_mt ...    # 2 CPUs
    cove-train-mt ... --output-dir runs/cove-small --resume    # continue exactly where it stopped

DATA is a local data folder laid out as docs/data.md describes; without --data-dir the datasets come from the Hub.

Training follows docs/paper.md §2: SGD lr 1.0, halved every epoch once validation perplexity has risen for the first
time, stop when lr < --min-lr (default 0.03 x lr: the paper's 0.03 at lr 1.0), or after --max-epochs, --max-steps or
--time-budget-minutes; every stop is logged with its reason and recorded as `stop_reason` in metrics.json.
Gradient-norm clip 5; batch 64 sentences (global, split over the processes); pairs longer than 75 tokens dropped;
vocabularies <= 50k per side; fixed source word vectors; loss = summed token NLL / batch size. Batches are
length-grouped with the order a function of (seed, epoch) only, so --resume replays it exactly (`accelerate_loop`,
`loops/mt.py`); it takes the first run's settings again (RESUME_KEYS: data, model, optimizer, lr schedule, clipping,
early stopping), folders and files compared by place, not spelling; the budget and the evaluation settings may change
(but --eval-num-beams with --early-stopping-patience: it picks the best epoch).
Options outside the paper, off by default: --start-decay-at N (also halve from epoch N on, OpenNMT-py's
-start_decay_at), --time-budget-minutes, --optimizer adam (e.g. --lr 0.001; --min-lr defaults to 3e-05 then),
--early-stopping-patience N (stop once the first corpus's validation BLEU has not risen for N epochs; the best-BLEU
epoch's weights are the run's).
Settings: built-in DEFAULTS < the preset's "training" block < the flags given.

CoVe-S on 2 CPU cores (~60 min; the paper's schedule needs more epochs than fit, hence the earlier decay):
    cove-train-mt --preset cove-small --data-dir DATA --vectors DATA/vectors/w2v-lower-300d.txt.xz \\
        --output-dir runs/cove-small --num-threads 2 --max-epochs 10 --start-decay-at 5 --time-budget-minutes 55

Source vocabulary and vectors: --init-from DIR takes a CoVe checkpoint (e.g. from cove-build-vocab) and uses its
tokenizer, word vectors and MT-LSTM initialisation; otherwise --vectors FILE builds the vocabulary from the training
source side (every word with a vector, plus words without one seen >= --source-min-freq times, at most --max-vocab
entries) with the vectors fixed. Target side: lower-cased sacremoses German tokens.

Several corpora (`--corpora`, or a preset's data.corpora; --dataset NAME is the list of one): named datasets
(multi30k, iwslt, wmt17, tsv: read as --dataset reads them, with their own splits) and parallel text files
(`English<TAB>German` per line, no header, plain/.gz/.xz; docs/data.md), trained on as one mixture shuffled with
--seed (`training/data/corpora.py`). A file has no splits: validation and test are carved from it with --seed, no
English or German sentence (lower-cased, without punctuation) on two sides, --heldout-pairs (default 2,000) each. The first corpus's
validation split drives the lr schedule; metrics.json has every corpus's validation figures per epoch
(`val_by_corpus`) and test figures (`test_by_corpus`), the first corpus's also at the keys a single-corpus run uses.
--exclude-test-sentences TASK... / --exclude-sentences FILE... drop every training pair (and a file's held-out
pairs) whose English side is one of those sentences, compared the same way; data_stats.json counts them per corpus
and reports the <unk> rates of both sides on the mixture and on each corpus's splits. CoVe-T (preset cove-t; it stops
once Multi30k's validation BLEU has not risen for 2 epochs, --early-stopping-patience, and keeps its best epoch):
    cove-train-mt --preset cove-t --data-dir DATA --init-from runs/vocab-all --output-dir runs/cove-t --save-steps 200
    cove-train-mt --corpora multi30k pairs.tsv.xz --exclude-test-sentences trec6 sst2 snli ...   # your own file
    # by flags: on the DEFAULTS (SGD lr 1.0, up to 30 epochs, no early stopping), not the preset's settings

Outputs in --output-dir:
    mt/                  the MT checkpoint at the end (AutoModelForSeq2SeqLM; source tokenizer; target_tokenizer/):
                         the last weights, or with --early-stopping-patience the best validation-BLEU epoch's
    encoder/             the trained encoder alone: a CoVe checkpoint for AutoModel/AutoTokenizer + README.md card
    checkpoints/step-N/  accelerate save_state + pretraining_state.json (every epoch, and every --save-steps)
    best_state.safetensors  with --early-stopping-patience: the best epoch's weights, its epoch and step as metadata
    metrics.json         data statistics, per-epoch train/val perplexity and BLEU, test BLEU, speed, stop reason
    data_stats.json      vocabularies, pairs read / excluded / dropped per corpus and split, <unk> rates
    test_hypotheses.txt  the first corpus's test translations (test_hypotheses.<corpus>.txt: the others')
    curves.png           loss / perplexity / BLEU curves
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch

from ..common.cli import A_FOLDER, AT_LEAST_ONE, NOT_NEGATIVE, POSITIVE, REQUIRED, fail, option, parse_options
from ..data.corpora import (DEFAULT_HELDOUT_PAIRS, EXCLUDABLE_TASKS, NAMED_CORPORA, CorpusError, check_corpora,
                            corpus_names, load_corpora)
from ..data.translation import build_mt_checkpoint, prepare_splits, tokenize_corpora
from ..loops.mt_schedule import resolve_min_lr
from ..common.files import write_json
from ..common.presets import load_preset, resolve_settings
from ..loops.accelerate_loop import (check_run_folder, make_accelerator, same_if_recorded, same_place, same_places,
                                     start_run_folder)

__all__ = ["check_config_fields", "check_output_dir", "load_model_preset", "main", "MTArguments", "MTData",
           "MTSetupError", "prepare_data", "resolve_mt_settings", "train_mt"]

# Training settings: built-in defaults (docs/paper.md §2) < preset "training" block < arguments. min_lr None: 0.03 x lr.
DEFAULTS = {
    "dataset": "multi30k",
    "optimizer": "sgd",
    "lr": 1.0,
    "lr_decay": 0.5,
    "min_lr": None,
    "start_decay_at": None,
    "max_epochs": 30,
    "batch_size": 64,
    "max_length": 75,
    "grad_clip": 5.0,
    "max_vocab": 50000,
    "source_min_freq": 5,
    "target_min_freq": 1,
    "chunk_batches": 50,
    "eval_batch_size": 128,
    "eval_num_beams": 1,
    "test_num_beams": 5,
    "seed": 1234,
    "heldout_pairs": DEFAULT_HELDOUT_PAIRS,
    "early_stopping_patience": 0,
}
# Settings fixed by the first run: the data order, the vocabularies and mt/config.json are built from them once and
# the optimizer state is saved with every checkpoint, so resume refuses other values (they would be ignored); the
# lr schedule, clipping and early stopping too (a resume under another schedule would be a different run recorded as
# this one: a min_lr above the restored lr, say, stops it at once; best-epoch weights are kept only with patience on
# from the start). The budget (max_epochs, max_steps, time) and the
# evaluation settings (beams, batch) may change.
RESUME_KEYS = ("dataset", "corpora", "heldout_pairs", "exclude_test_sentences", "exclude_sentences", "data_dir",
               "limit_train", "limit_eval", "max_length", "batch_size", "chunk_batches", "seed", "max_vocab",
               "source_min_freq", "target_min_freq", "init_from", "vectors", "vectors_lowercase", "config_overrides",
               "optimizer", "lr", "lr_decay", "min_lr", "start_decay_at", "grad_clip", "early_stopping_patience")


def same_corpora(first, now) -> bool:
    """Two --corpora lists naming the same corpora in the same order: datasets by name, files by place."""
    return same_places(first, now, is_place=lambda corpus: corpus not in NAMED_CORPORA)


# resume keys compared otherwise than with ==: folders and files in any spelling of their place (`same_place`),
# datasets by name
RESUME_SAME = {"data_dir": same_place, "init_from": same_place, "vectors": same_place,
               "exclude_sentences": same_places, "corpora": same_corpora, "processes": same_if_recorded}
PRESET_SECTIONS = ("name", "description", "data", "config", "training", "vectors", "paper")


class MTSetupError(ValueError):
    """Arguments, presets or an output folder that a run cannot start from; the message says which and why."""


@dataclass
class MTArguments:
    """Everything a run of `train_mt` takes (the flags of cove-train-mt are these fields).
    Training settings left at None come from the preset's "training" block, else from DEFAULTS."""

    output_dir: str = option("run folder: mt/, encoder/, checkpoints/, metrics.json, curves.png", REQUIRED)
    preset: Optional[str] = option("configuration/models preset name or .json file: config + data + training")
    data_dir: Optional[str] = option("local data folder laid out as docs/data.md describes; default: Hub ids",
                                     check=A_FOLDER)
    dataset: Optional[str] = option("one translation dataset (tsv: data_dir holds {train,validation,test}.tsv with "
                                     "columns en, de); the same as --corpora DATASET", choices=list(NAMED_CORPORA))
    corpora: Optional[list[str]] = option("translation corpora trained on together: dataset names (as --dataset) "
                                          "and/or parallel files (English<TAB>German per line, plain/.gz/.xz; "
                                          "docs/data.md); the first one's validation split drives the lr schedule")
    heldout_pairs: Optional[int] = option("validation and test pairs carved from each parallel file with --seed, "
                                          "no English or German sentence on two sides (default "
                                          f"{DEFAULT_HELDOUT_PAIRS} each)")
    exclude_test_sentences: Optional[list[str]] = option(
        f"drop every training pair (and held-out pair of a parallel file) whose English side is a test sentence of "
        f"these tasks ({', '.join(EXCLUDABLE_TASKS)}; read from --data-dir), compared lower-cased without "
        "punctuation (the flag alone: none)", nargs="*")
    exclude_sentences: Optional[list[str]] = option("the same for the lines of these text files (one sentence per "
                                                    "line)", nargs="*")
    vectors: Optional[str] = option("GloVe-format word vectors (.txt/.gz/.xz) for the source side")
    vectors_lowercase: bool = option("look words up lower-cased in a cased vectors file (GloVe 840B)", False)
    init_from: Optional[str] = option("CoVe checkpoint dir: source tokenizer, vectors, MT-LSTM init")
    config_overrides: Optional[str] = option("JSON object of CoveConfig fields (after the preset); from Python "
                                              "also a dict")
    resume: bool = option("continue from the latest checkpoint in output_dir", False)
    overwrite: bool = option("delete an existing output_dir first", False)
    optimizer: Optional[str] = option("sgd (the paper: plain SGD, lr 1.0) or adam (use lr ~1e-3)",
                                       choices=["sgd", "adam"])
    lr: Optional[float] = option("initial learning rate", check=POSITIVE)
    lr_decay: Optional[float] = option("lr factor per epoch once the decay has started")
    min_lr: Optional[float] = option("stop when the lr falls below this (default 0.03 x lr; must be < lr)")
    start_decay_at: Optional[int] = option("also decay the lr after every epoch >= this one (OpenNMT-py's "
                                            "-start_decay_at; default: only after validation perplexity first rises)")
    early_stopping_patience: Optional[int] = option(
        "stop once the first corpus's validation BLEU has not risen for this many epochs, and keep the weights of its "
        "best epoch (tested, saved in mt/ and exported); 0: off, the last epoch's weights. Needs BLEU (not "
        "--no-bleu)", check=NOT_NEGATIVE)
    time_budget_minutes: Optional[float] = option("stop at the end of the epoch after which another epoch would "
                                                   "exceed this wall time", check=POSITIVE)
    max_epochs: Optional[int] = option("stop after this many epochs", check=AT_LEAST_ONE)
    max_steps: Optional[int] = option("stop after this many optimizer steps (smoke runs)")
    batch_size: Optional[int] = option("GLOBAL batch size in sentence pairs", check=AT_LEAST_ONE)
    max_length: Optional[int] = option("drop training pairs longer than this (tokens)", check=AT_LEAST_ONE)
    grad_clip: Optional[float] = option("gradient-norm clip")
    chunk_batches: Optional[int] = option("length grouping: sort within this many batches", check=AT_LEAST_ONE)
    seed: Optional[int] = option("seed of the data order, initialisation and dropout")
    max_vocab: Optional[int] = option("entries per side, special tokens included")
    source_min_freq: Optional[int] = option("keep source words WITHOUT a vector seen this often")
    target_min_freq: Optional[int] = option("keep target words seen this often")
    limit_train: Optional[int] = option("use only the first N training pairs", check=AT_LEAST_ONE)
    limit_eval: Optional[int] = option("use only the first N validation/test pairs", check=AT_LEAST_ONE)
    eval_batch_size: Optional[int] = option("sentences per evaluation batch", check=AT_LEAST_ONE)
    eval_num_beams: Optional[int] = option("beam size for the per-epoch validation BLEU", check=AT_LEAST_ONE)
    test_num_beams: Optional[int] = option("beam size for the final test BLEU", check=AT_LEAST_ONE)
    no_bleu: bool = option("skip BLEU (perplexity only) during training", False)
    no_test: bool = option("skip the final test-set evaluation", False)
    no_export: bool = option("do not export the encoder at the end", False)
    save_steps: int = option("also checkpoint every N steps (0: every epoch only)", 0)
    keep_checkpoints: int = option("newest checkpoints kept", 2)
    log_every: int = option("record the mean training loss every N steps", 10)
    cpu: bool = option("run on CPU even if a GPU is present", False)
    find_unused_parameters: bool = option("DDP find_unused_parameters=True (only needed if some trainable weight "
                                           "gets no gradient)", False)
    num_threads: Optional[int] = option("torch CPU threads per process", aliases=["--threads"], check=AT_LEAST_ONE)
    preprocess_workers: Optional[int] = option("datasets.map num_proc for tokenization")


def load_model_preset(name_or_path) -> dict:
    """A configuration/models preset (name or .json path) as a dict; {} for None."""
    return {} if name_or_path is None else load_preset(name_or_path, "models", known_keys=PRESET_SECTIONS)


def check_config_fields(fields, source: str) -> dict:
    """`fields` if it is a dict of CoveConfig fields; else a ValueError naming an unknown key and its close match."""
    from modeling_cove.configuration_cove import check_field_names

    if not isinstance(fields, dict):
        raise MTSetupError(f"{source} must be a JSON object of CoveConfig fields, got {fields!r}")
    check_field_names(fields, source)
    return fields


def _config_fields(args: MTArguments, preset: dict) -> dict:
    config = {"freeze_encoder": False}  # MT pretraining trains the MT-LSTM (the word vectors stay fixed)
    config.update(check_config_fields(preset.get("config", {}), "preset config block"))
    overrides = args.config_overrides
    if isinstance(overrides, str) and overrides:
        try:
            overrides = json.loads(overrides)
        except json.JSONDecodeError as err:
            raise MTSetupError(f"--config-overrides is not valid JSON ({err}): {args.config_overrides!r}") from None
    if overrides:
        config.update(check_config_fields(overrides, "--config-overrides"))
    return config


def _preset_corpus(spec: str, data_dir):
    """A corpus as a preset writes it, as the run reads it: a dataset name or an absolute path as written, a relative
    path in the data folder (the preset cannot know where a user keeps it); None without a data folder to read it
    from."""
    if spec in NAMED_CORPORA or Path(spec).is_absolute():
        return spec
    return None if data_dir is None else str(Path(data_dir) / spec)


def _preset_corpora(preset: dict, data_dir) -> list:
    """The preset's data.corpora as the run reads them (`_preset_corpus`)."""
    corpora = []
    for spec in preset["data"]["corpora"]:
        corpus = _preset_corpus(spec, data_dir)
        if corpus is None:
            raise MTSetupError(f"{preset.get('path', 'preset')}: the corpus {spec!r} is a file in the data folder: "
                               "give --data-dir")
        corpora.append(corpus)
    return corpora


def _corpus_settings(args: MTArguments, preset: dict, dataset: str) -> dict:
    """The corpora (--corpora; else --dataset; else the preset's data.corpora; else `dataset`, the preset's or the
    default dataset), "dataset" (their names joined by "+": a single dataset's name as before) and the exclusions
    (flags over the preset's data block)."""
    data = preset.get("data", {})
    if args.corpora and args.dataset:
        raise MTSetupError("give --dataset or --corpora, not both (--dataset NAME is --corpora NAME)")
    if args.corpora:
        corpora = list(args.corpora)
    elif args.dataset or "corpora" not in data:
        corpora = [dataset]
    else:
        corpora = _preset_corpora(preset, args.data_dir)
    tasks = args.exclude_test_sentences
    tasks = list(data.get("exclude_test_sentences", []) if tasks is None else tasks)
    unknown = [task for task in tasks if task not in EXCLUDABLE_TASKS]
    if unknown:
        raise MTSetupError(f"--exclude-test-sentences: unknown task(s) {', '.join(unknown)}; choose from "
                           f"{', '.join(EXCLUDABLE_TASKS)}")
    try:
        names = corpus_names(corpora)
    except CorpusError as err:
        raise MTSetupError(str(err)) from None
    return {"corpora": corpora, "dataset": "+".join(names), "exclude_test_sentences": tasks,
            "exclude_sentences": list(args.exclude_sentences or []),
            "corpus_licences": _corpus_licences(preset, corpora, names, args.data_dir)}


def _corpus_licences(preset: dict, corpora: list, names: list, data_dir) -> dict:
    """The preset's data.licences ({corpus as data.corpora writes it: its licence and attribution}) of the corpora
    this run reads, by corpus name: what the encoder's card states of its data. A licence goes with the corpus the
    preset names (the same dataset, or the same file once resolved against the data folder), never with another
    file of the same name given by flags. A key that names none of the preset's corpora is an error (a typo would
    drop an attribution silently)."""
    data = preset.get("data", {})
    licences = data.get("licences", {})
    unknown = sorted(set(licences) - set(data.get("corpora", [])))
    if unknown:
        raise MTSetupError(f"{preset.get('path', 'preset')}: data.licences names {unknown}, which data.corpora "
                           f"{data.get('corpora', [])} does not")

    def place(corpus: str):  # a dataset by name, a file by its resolved path
        return corpus if corpus in NAMED_CORPORA else Path(corpus).resolve()

    by_place = {place(corpus): text for corpus, text in
                ((_preset_corpus(spec, data_dir), text) for spec, text in licences.items()) if corpus is not None}
    return {name: by_place[place(corpus)] for corpus, name in zip(corpora, names) if place(corpus) in by_place}


def resolve_mt_settings(args: MTArguments, preset: dict) -> dict:
    """One flat dict of every setting: DEFAULTS < preset['training'] (and preset['data']) < arguments; the corpora
    resolved (`_corpus_settings`); min_lr resolved (0.03 x lr when not given) and checked to lie below lr."""
    training = dict(preset.get("training", {}))
    if "dataset" in preset.get("data", {}):
        training["dataset"] = preset["data"]["dataset"]
    settings = resolve_settings(DEFAULTS, training, {key: getattr(args, key, None) for key in DEFAULTS},
                                   where=f"{preset.get('path', 'preset')} (training block)")
    for key in ("data_dir", "vectors", "init_from", "limit_train", "limit_eval", "max_steps"):
        settings[key] = getattr(args, key)
    settings["vectors_lowercase"] = bool(args.vectors_lowercase or preset.get("vectors", {}).get("lowercase", False))
    settings["config_overrides"] = _config_fields(args, preset)
    settings.update(_corpus_settings(args, preset, settings["dataset"]))
    if settings["batch_size"] < 1 or settings["max_length"] < 1:
        raise MTSetupError("batch_size and max_length must be >= 1")
    if settings["early_stopping_patience"] and args.no_bleu:
        raise MTSetupError(f"early_stopping_patience {settings['early_stopping_patience']} watches the validation "
                           "BLEU, which --no-bleu skips: drop one of them")
    if settings["heldout_pairs"] < 1:
        raise MTSetupError(f"heldout_pairs must be >= 1, got {settings['heldout_pairs']}")
    try:
        settings["min_lr"] = resolve_min_lr(settings["lr"], settings["min_lr"])
    except ValueError as err:
        raise MTSetupError(str(err)) from None
    return settings


def check_output_dir(args: MTArguments, settings: dict):
    """Before anything is loaded or written: resume needs the first run's settings (and the same ones; a setting
    added since the first run counts at the value that run had), a new run an empty folder (or overwrite); the
    vectors file, the corpora's files and the sentence files must exist."""
    added_since = {"corpora": [settings["dataset"]], "heldout_pairs": DEFAULTS["heldout_pairs"],
                   "exclude_test_sentences": [], "exclude_sentences": [], "early_stopping_patience": 0,
                   "processes": None}
    # with early stopping the validation BLEU decides which epoch the run keeps: its beam is fixed by the first run;
    # the number of processes: each holds its own random states, and the global batch is split over them
    keys = RESUME_KEYS + ("processes",) + (("eval_num_beams",) if settings["early_stopping_patience"] else ())
    try:
        check_run_folder(args.output_dir, settings, keys, args.resume, args.overwrite, defaults=added_since,
                         same=RESUME_SAME)
        check_corpora(settings["corpora"])
    except ValueError as err:
        raise MTSetupError(str(err)) from None
    if settings["vectors"] and not Path(settings["vectors"]).is_file():
        raise MTSetupError(f"--vectors {settings['vectors']} is not a file")
    for path in settings["exclude_sentences"]:
        if not Path(path).is_file():
            raise MTSetupError(f"--exclude-sentences {path} is not a file")


@dataclass
class MTData:
    """The run's model (from mt/, as first built or last saved), tokenizers and id stores."""

    model: object
    source_tokenizer: object
    target_tokenizer: object
    train: object
    eval_stores: dict
    references: dict
    stats: dict
    target_tokens: list
    corpora: list


def prepare_data(accelerator, settings: dict, corpora, output_dir: Path, preprocess_workers=None) -> MTData:
    """Tokenize the corpora (a `corpora.MTCorpora`), build the vocabularies (from the training mixture) and the
    initial MT checkpoint once (main process; the others and resume read the saved ones), then the id stores with
    the length filter; data_stats.json gets the corpora's and the splits' statistics."""
    from transformers import AutoTokenizer

    from modeling_cove.modeling_cove_mt import CoveForMachineTranslation, load_target_tokenizer

    lowercase = bool(settings["config_overrides"].get("lowercase", True))
    train_tokens, eval_tokens = tokenize_corpora(corpora, lowercase, preprocess_workers)
    mt_dir, stats_file = output_dir / "mt", output_dir / "data_stats.json"
    with accelerator.main_process_first():
        if accelerator.is_main_process and not (mt_dir / "config.json").exists():
            build_mt_checkpoint(settings, train_tokens, mt_dir, stats_file, lowercase)
    source_tokenizer = AutoTokenizer.from_pretrained(mt_dir)
    target_tokenizer = load_target_tokenizer(str(mt_dir))
    model = CoveForMachineTranslation.from_pretrained(mt_dir)
    model.check_tokenizers(source_tokenizer, target_tokenizer)
    stats = {**json.loads(stats_file.read_text()), **corpora.stats}
    train, eval_stores, references = prepare_splits(train_tokens, eval_tokens, source_tokenizer, target_tokenizer,
                                                    model.config, settings["max_length"], stats)
    if accelerator.is_main_process:
        write_json(stats_file, stats)
    if len(train) < accelerator.num_processes:
        raise MTSetupError(f"{len(train)} training pairs left after filtering, fewer than "
                           f"{accelerator.num_processes} processes")
    target_tokens = target_tokenizer.convert_ids_to_tokens(list(range(len(target_tokenizer))))
    return MTData(model, source_tokenizer, target_tokenizer, train, eval_stores, references, stats, target_tokens,
                  corpora.names)


def train_mt(args: MTArguments, on_step: Callable | None = None, command: str | None = None) -> dict | None:
    """Run (or resume) MT pretraining as `args` says; returns the final metrics on the main process (None on the
    others). `on_step(state, loss)` is called after every optimizer step (loss: the step's summed NLL / batch size);
    `command` is recorded in metrics.json (default: this process's command line)."""
    from accelerate.utils import set_seed

    from ..loops.mt import MTPretraining

    preset = load_model_preset(args.preset)
    settings = resolve_mt_settings(args, preset)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    # every trainable parameter gets a gradient in every step (decoder, MT-LSTM; the word vectors are frozen), so
    # DDP's find_unused_parameters stays off unless asked for
    accelerator = make_accelerator(args.cpu, args.find_unused_parameters)
    if not accelerator.is_main_process:
        import datasets
        import transformers

        datasets.disable_progress_bars()
        transformers.logging.set_verbosity_error()
    settings["processes"] = accelerator.num_processes
    check_output_dir(args, settings)
    start_time = time.time()
    corpora = load_corpora(settings)  # a wrong data_dir or corpus fails here, before the output folder is touched
    start_run_folder(accelerator, args.output_dir, settings, args.resume)
    set_seed(settings["seed"])
    data = prepare_data(accelerator, settings, corpora, Path(args.output_dir), args.preprocess_workers)
    trainer = MTPretraining(args, settings, accelerator, data, preset_name=preset.get("name"), on_step=on_step,
                            command=command, start_time=start_time)
    trainer.train()
    return trainer.finish()


def main(argv=None):
    """cove-train-mt: MTArguments from the command line, then `train_mt`; bad settings or --init-from end in one
    line, exit status 2."""
    from ..common.presets import PresetError
    from ..data.checkpoints import CheckpointLoadError

    args = parse_options(MTArguments, argv, description=__doc__)
    try:
        train_mt(args)
    except (MTSetupError, CheckpointLoadError, PresetError, CorpusError) as err:
        fail(err)


if __name__ == "__main__":
    main()
