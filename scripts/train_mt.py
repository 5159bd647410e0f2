#!/usr/bin/env python
"""Pretrain CoVe: train the attentional English->German MT model (McCann et al. 2017, §2) with Accelerate, then
export its encoder (the MT-LSTM) as a CoVe checkpoint.

The same script runs on one CPU, on N GPUs and as real 2-process DDP on CPU (gloo):

    python scripts/train_mt.py --preset configuration/models/cove-small.json --data-dir ../shared/data \
        --vectors ../shared/data/vectors/w2v-lower-300d.txt.xz --output-dir runs/cove-small
    accelerate launch --config_file configuration/accelerate/multi_gpu.yaml scripts/train_mt.py ...   # N GPUs
    torchrun --nproc_per_node 2 scripts/train_mt.py ...                     # 2 CPU processes (DDP over gloo)
    python scripts/train_mt.py ... --output-dir runs/cove-small --resume    # continue exactly where it stopped

Training follows docs/paper.md §2: SGD lr 1.0, halved every epoch once validation perplexity has risen for the first
time, stop when lr < 0.03 (or after --max-epochs); gradient-norm clip 5; batch 64 sentences (global, split over the
processes); pairs longer than 75 tokens dropped; vocabularies <= 50k per side; fixed source word vectors; loss =
summed token NLL / batch size. Batches are length-grouped (shuffle, sort within chunks of --chunk-batches batches,
shuffle the batches), with the order a function of (seed, epoch) only, so `--resume` replays it exactly.
Options outside the paper, off by default: --start-decay-at N (also halve from epoch N on, OpenNMT-py's
-start_decay_at), --time-budget-minutes (stop at an epoch end before running out of time), --optimizer adam.

CoVe-S on 2 CPU cores (~60 min; the paper's schedule needs more epochs than fit, hence the earlier decay):
    python scripts/train_mt.py --preset configuration/models/cove-small.json --data-dir ../shared/data \
        --vectors ../shared/data/vectors/w2v-lower-300d.txt.xz --output-dir runs/cove-small --num-threads 2 \
        --max-epochs 10 --start-decay-at 5 --time-budget-minutes 55

Tokenization (lower-cased, Moses-style):
- source (English): `tokenization_cove.moses_tokenize` — the same split as the saved CoVe tokenizer;
- target (German): `sacremoses.MosesTokenizer(lang="de").tokenize(text, escape=False)` lower-cased (Moses has German
  rules the English regex tokenizer lacks). The saved target tokenizer (`target_tokenizer/`) maps these tokens to
  ids and back; its own regex split is the English one, so tokenize German input with sacremoses as here.

Source vocabulary and vectors: `--init-from DIR` takes a CoVe checkpoint (e.g. from scripts/build_vocab.py, whose
vocabulary may also cover the downstream tasks) and uses its tokenizer, word vectors and MT-LSTM initialisation;
otherwise `--vectors FILE` builds the vocabulary from the training source side (every word with a vector, plus words
without one seen >= --source-min-freq times, at most --max-vocab entries) with the vectors fixed.

Outputs in --output-dir:
    mt/                  final MT checkpoint (AutoModelForSeq2SeqLM; source tokenizer; target_tokenizer/)
    encoder/             the trained encoder alone: a CoVe checkpoint for AutoModel/AutoTokenizer + README.md card
    checkpoints/step-N/  accelerate save_state + trainer_state.json (every epoch, and every --save-steps)
    metrics.json         data statistics, per-epoch train/val perplexity and BLEU, test BLEU, speed, command
    curves.png           loss / perplexity / BLEU curves
"""

import argparse
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

# On a shared CPU machine OpenMP threads that spin at barriers while a sibling thread is descheduled make every
# LSTM op 10-30x slower (measured here: 1-2 s -> 10-20 s per batch with 2 threads on 2 busy cores); passive waiting
# avoids it at no measurable cost. Must be set before torch starts OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import torch  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BLEU_METRIC_PATH = REPO / "modeling_cove" / "metrics" / "sacrebleu_cove"

# Training settings: built-in defaults (docs/paper.md §2) < preset "training" block < command line.
DEFAULTS = {
    "dataset": "multi30k",
    "optimizer": "sgd",
    "lr": 1.0,
    "lr_decay": 0.5,
    "min_lr": 0.03,
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
}
# Settings fixed by the first run: the data order, the vocabularies and mt/config.json are built from them once and
# the optimizer state is saved with every checkpoint, so --resume refuses other values (they would be ignored).
RESUME_KEYS = ("dataset", "data_dir", "limit_train", "limit_eval", "max_length", "batch_size", "chunk_batches",
               "seed", "max_vocab", "source_min_freq", "target_min_freq", "init_from", "vectors", "vectors_lowercase",
               "config_overrides", "optimizer")


# ---------------------------------------------------------------------------------------------------------------
# command line and presets


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", required=True)
    p.add_argument("--preset", default=None, help="configuration/models/*.json: config overrides + data + training")
    p.add_argument("--data-dir", default=None, help="local data folder (like ../shared/data); default: Hub ids")
    p.add_argument("--dataset", default=None, choices=["multi30k", "iwslt", "wmt17", "tsv"],
                   help="tsv: --data-dir is a folder with {train,validation,test}.tsv (columns en, de)")
    p.add_argument("--vectors", default=None, help="GloVe-format word vectors (.txt/.gz/.xz) for the source side")
    p.add_argument("--vectors-lowercase", action="store_true",
                   help="look words up lower-cased in a cased vectors file (GloVe 840B)")
    p.add_argument("--init-from", default=None, help="CoVe checkpoint dir: source tokenizer, vectors, MT-LSTM init")
    p.add_argument("--config-overrides", default=None, help="JSON object of CoveConfig fields (after the preset)")
    p.add_argument("--resume", action="store_true", help="continue from the latest checkpoint in --output-dir")
    p.add_argument("--overwrite", action="store_true", help="delete an existing --output-dir first")
    # schedule / optimisation (None = preset or DEFAULTS)
    p.add_argument("--optimizer", default=None, choices=["sgd", "adam"],
                   help="sgd (the paper: plain SGD, lr 1.0) or adam (faster start on a small budget; use lr ~1e-3 "
                        "and --min-lr ~3e-5)")
    p.add_argument("--lr", type=float, default=None)
    p.add_argument("--lr-decay", type=float, default=None)
    p.add_argument("--min-lr", type=float, default=None, help="stop when the learning rate falls below this")
    p.add_argument("--start-decay-at", type=int, default=None,
                   help="also halve the lr after every epoch >= this one (OpenNMT-py's -start_decay_at; default: "
                        "only the paper's rule, after validation perplexity first rises)")
    p.add_argument("--time-budget-minutes", type=float, default=None,
                   help="stop at the end of the epoch after which another epoch would exceed this wall time")
    p.add_argument("--max-epochs", type=int, default=None)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps (smoke runs)")
    p.add_argument("--batch-size", type=int, default=None, help="GLOBAL batch size in sentence pairs")
    p.add_argument("--max-length", type=int, default=None, help="drop training pairs longer than this (tokens)")
    p.add_argument("--grad-clip", type=float, default=None)
    p.add_argument("--chunk-batches", type=int, default=None, help="length grouping: sort within this many batches")
    p.add_argument("--seed", type=int, default=None)
    # vocabulary
    p.add_argument("--max-vocab", type=int, default=None, help="entries per side, special tokens included")
    p.add_argument("--source-min-freq", type=int, default=None, help="keep source words WITHOUT a vector this often")
    p.add_argument("--target-min-freq", type=int, default=None)
    # data size, evaluation
    p.add_argument("--limit-train", type=int, default=None, help="use only the first N training pairs")
    p.add_argument("--limit-eval", type=int, default=None, help="use only the first N validation/test pairs")
    p.add_argument("--eval-batch-size", type=int, default=None)
    p.add_argument("--eval-num-beams", type=int, default=None, help="beam size for the per-epoch validation BLEU")
    p.add_argument("--test-num-beams", type=int, default=None, help="beam size for the final test BLEU")
    p.add_argument("--no-bleu", action="store_true", help="skip BLEU (perplexity only) during training")
    p.add_argument("--no-test", action="store_true", help="skip the final test-set evaluation")
    p.add_argument("--no-export", action="store_true", help="do not export the encoder at the end")
    # checkpoints, machine
    p.add_argument("--save-steps", type=int, default=0, help="also checkpoint every N steps (0: every epoch only)")
    p.add_argument("--keep-checkpoints", type=int, default=2)
    p.add_argument("--log-every", type=int, default=10, help="record the mean training loss every N steps")
    p.add_argument("--cpu", action="store_true", help="run on CPU even if a GPU is present")
    p.add_argument("--find-unused-parameters", action="store_true",
                   help="DDP find_unused_parameters=True (only needed if some trainable weight gets no gradient)")
    p.add_argument("--num-threads", type=int, default=None, help="torch CPU threads per process")
    p.add_argument("--preprocess-workers", type=int, default=None, help="datasets.map num_proc for tokenization")
    return p.parse_args(argv)


def load_preset(path) -> dict:
    if path is None:
        return {}
    with open(path, encoding="utf-8") as f:
        preset = json.load(f)
    unknown = set(preset) - {"name", "description", "data", "config", "training", "vectors", "paper"}
    if unknown:
        raise ValueError(f"{path}: unknown preset sections {sorted(unknown)}")
    return preset


def check_config_fields(fields, source: str) -> dict:
    """`fields` if it is a dict of CoveConfig fields; else a ValueError (`check_field_names` names an unknown key
    and its close match)."""
    from modeling_cove.configuration_cove import check_field_names

    if not isinstance(fields, dict):
        raise ValueError(f"{source} must be a JSON object of CoveConfig fields, got {fields!r}")
    check_field_names(fields, source)
    return fields


def resolve_settings(args, preset: dict) -> dict:
    """One flat dict of every setting: DEFAULTS < preset['training'] (and preset['data']) < command line."""
    settings = dict(DEFAULTS)
    training = preset.get("training", {})
    unknown = set(training) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"preset training block has unknown keys {sorted(unknown)}; known: {sorted(DEFAULTS)}")
    settings.update(training)
    if "dataset" in preset.get("data", {}):
        settings["dataset"] = preset["data"]["dataset"]
    for key in DEFAULTS:
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    for key in ("data_dir", "vectors", "init_from", "limit_train", "limit_eval", "max_steps"):
        settings[key] = getattr(args, key)
    settings["vectors_lowercase"] = bool(args.vectors_lowercase or preset.get("vectors", {}).get("lowercase", False))
    config = {"freeze_encoder": False}  # MT pretraining trains the MT-LSTM (the word vectors stay fixed)
    config.update(check_config_fields(preset.get("config", {}), "preset config block"))
    if args.config_overrides:
        try:
            overrides = json.loads(args.config_overrides)
        except json.JSONDecodeError as err:
            raise ValueError(f"--config-overrides is not valid JSON ({err}): {args.config_overrides!r}") from None
        config.update(check_config_fields(overrides, "--config-overrides"))
    settings["config_overrides"] = config
    if settings["batch_size"] < 1 or settings["max_length"] < 1:
        raise ValueError("batch_size and max_length must be >= 1")
    return settings


# ---------------------------------------------------------------------------------------------------------------
# tokenization and vocabularies


_GERMAN = {}


def target_tokenize(text: str) -> list:
    """German side: lower-cased sacremoses tokens (`escape=False`, as the source side)."""
    if "de" not in _GERMAN:
        from sacremoses import MosesTokenizer

        _GERMAN["de"] = MosesTokenizer(lang="de")
    return [token.lower() for token in _GERMAN["de"].tokenize(text, escape=False)]


def tokenize_batch(batch: dict, lowercase: bool = True) -> dict:
    from modeling_cove.tokenization_cove import moses_tokenize

    return {
        "src_tokens": [moses_tokenize(text, lowercase=lowercase) for text in batch["src"]],
        "tgt_tokens": [target_tokenize(text) for text in batch["tgt"]],
    }


def select_target_words(counts: Counter, min_freq: int, max_size: int) -> list:
    """Most frequent first (ties alphabetical), count >= min_freq, at most max_size - 4 words (4 special tokens)."""
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS

    words = [w for w, c in counts.items() if c >= min_freq and w not in SPECIAL_TOKENS]
    words.sort(key=lambda w: (-counts[w], w))
    return words[: max_size - len(SPECIAL_TOKENS)]


def build_source_side(settings: dict, src_counts: Counter, lowercase: bool):
    """(CoveModel with the fixed word vectors and an MT-LSTM init, source tokenizer, info dict)."""
    from transformers import AutoTokenizer

    from modeling_cove.build import create_cove_checkpoint, select_vocabulary
    from modeling_cove.modeling_cove import CoveModel
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS
    from modeling_cove.vectors import build_embedding_matrix, read_word_vectors

    if settings["init_from"]:
        tokenizer = AutoTokenizer.from_pretrained(settings["init_from"])
        encoder = CoveModel.from_pretrained(settings["init_from"])
        if len(tokenizer) != encoder.config.vocab_size:
            raise ValueError(
                f"{settings['init_from']}: tokenizer has {len(tokenizer)} tokens but config.vocab_size is "
                f"{encoder.config.vocab_size}: tokenizer and checkpoint do not match"
            )
        vocab = tokenizer.get_vocab()
        with_vector = {w for w, i in vocab.items() if bool(encoder.embeddings.weight[i].abs().sum() > 0)}
        info = {"source_vocab_from": str(settings["init_from"])}
    else:
        if not settings["vectors"]:
            raise ValueError("give --vectors FILE (word vectors for the source side) or --init-from CHECKPOINT_DIR")
        dim = settings["config_overrides"].get("word_vector_dim", 300)
        found, _ = read_word_vectors(settings["vectors"], vocab=set(src_counts), dim=dim,
                                     lowercase=settings["vectors_lowercase"])
        with_vector = set(found)
        words = select_vocabulary(src_counts, has_vector=with_vector.__contains__,
                                  oov_min_count=settings["source_min_freq"],
                                  max_size=settings["max_vocab"] - len(SPECIAL_TOKENS))
        matrix, _ = build_embedding_matrix(settings["vectors"], SPECIAL_TOKENS + words, dim=dim,
                                           lowercase=settings["vectors_lowercase"])
        encoder_fields = {k: v for k, v in settings["config_overrides"].items()
                          if k in ("hidden_size", "num_hidden_layers", "initializer_range")}
        encoder, tokenizer = create_cove_checkpoint(words, matrix, lowercase=lowercase, seed=settings["seed"],
                                                    **encoder_fields)
        info = {"source_vocab_from": f"training source side + {settings['vectors']}"}
    total = sum(src_counts.values())
    covered = sum(c for w, c in src_counts.items() if w in with_vector)
    info.update({
        "source_vocab_size": len(tokenizer),
        "source_train_token_coverage_by_vectors": round(100.0 * covered / max(total, 1), 3),
    })
    return encoder, tokenizer, info


# ---------------------------------------------------------------------------------------------------------------
# ids, filtering, batching


def to_ids(tokens: list, vocab: dict, unk_id: int):
    ids = [vocab.get(t, unk_id) for t in tokens]
    return ids, sum(1 for i in ids if i == unk_id)


def encode_split(ds, src_vocab: dict, tgt_vocab: dict, eos_id: int, unk_id: int):
    """Token columns -> `src_ids` and `tgt_ids` (target ending in </s>); unknown words -> <unk>, counted."""

    def encode(batch):
        out = {"src_ids": [], "tgt_ids": [], "src_unk": [], "tgt_unk": []}
        for src, tgt in zip(batch["src_tokens"], batch["tgt_tokens"]):
            s, su = to_ids(src, src_vocab, unk_id)
            t, tu = to_ids(tgt, tgt_vocab, unk_id)
            out["src_ids"].append(s)
            out["tgt_ids"].append(t + [eos_id])
            out["src_unk"].append(su)
            out["tgt_unk"].append(tu)
        return out

    return ds.map(encode, batched=True, desc="token ids")


def epoch_batches(src_lengths: np.ndarray, tgt_lengths: np.ndarray, batch_size: int, chunk_batches: int,
                  seed: int, epoch: int) -> list:
    """The epoch's global batches (lists of example indices), a pure function of (seed, epoch): shuffle, sort by
    length within chunks of `chunk_batches` batches (length grouping), cut into batches, shuffle the batches."""
    generator = torch.Generator().manual_seed(seed * 100003 + epoch)
    order = torch.randperm(len(src_lengths), generator=generator).numpy()
    chunk = batch_size * max(chunk_batches, 1)
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start : start + chunk]
        part = part[np.lexsort((tgt_lengths[part], src_lengths[part]))]  # by source, then target length
        batches += [part[i : i + batch_size].tolist() for i in range(0, len(part), batch_size)]
    shuffle = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffle]


def collate(rows: list, pad_id: int, device) -> dict:
    """rows: [(src_ids, tgt_ids)] -> right-padded input_ids / attention_mask, labels padded with -100."""
    src_len = max(len(s) for s, _ in rows)
    tgt_len = max(len(t) for _, t in rows)
    input_ids = torch.full((len(rows), src_len), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), src_len), dtype=torch.long)
    labels = torch.full((len(rows), tgt_len), -100, dtype=torch.long)
    for i, (s, t) in enumerate(rows):
        input_ids[i, : len(s)] = torch.as_tensor(s)
        attention_mask[i, : len(s)] = 1
        labels[i, : len(t)] = torch.as_tensor(t)
    return {"input_ids": input_ids.to(device), "attention_mask": attention_mask.to(device), "labels": labels.to(device)}


class TokenStore:
    """The id columns of a split held as numpy arrays (fast row access for batching)."""

    def __init__(self, ds):
        src, tgt = ds["src_ids"], ds["tgt_ids"]
        self.src = [np.asarray(x, dtype=np.int64) for x in src]
        self.tgt = [np.asarray(x, dtype=np.int64) for x in tgt]
        self.src_lengths = np.array([len(x) for x in self.src], dtype=np.int64)
        self.tgt_lengths = np.array([len(x) for x in self.tgt], dtype=np.int64)

    def __len__(self):
        return len(self.src)

    def rows(self, indices) -> list:
        return [(self.src[i], self.tgt[i]) for i in indices]


# ---------------------------------------------------------------------------------------------------------------
# evaluation


def rank_share(items: list, rank: int, world: int) -> list:
    return items[rank::world]


@torch.no_grad()
def evaluate_perplexity(model, store: TokenStore, settings: dict, accelerator, pad_id: int) -> dict:
    """Teacher-forced per-token NLL and perplexity of a split (sharded over the processes, summed)."""
    model.eval()
    order = [int(i) for i in np.argsort(store.src_lengths, kind="stable") if store.src_lengths[i] > 0]
    size = settings["eval_batch_size"]
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    nll = torch.zeros((), dtype=torch.float64, device=accelerator.device)
    tokens = torch.zeros((), dtype=torch.float64, device=accelerator.device)
    for batch in rank_share(batches, accelerator.process_index, accelerator.num_processes):
        out = model(**collate(store.rows(batch), pad_id, accelerator.device))
        nll += out.nll_sum.double()
        tokens += out.num_tokens.double()
    nll, tokens = accelerator.reduce(nll, "sum"), accelerator.reduce(tokens, "sum")
    per_token = float(nll / tokens.clamp(min=1))
    return {"nll_per_token": per_token, "perplexity": math.exp(min(per_token, 50.0)), "tokens": int(tokens)}


@torch.no_grad()
def decode_split(model, store: TokenStore, settings: dict, accelerator, target_tokens: list, num_beams: int,
                 desc: str) -> list:
    """Translate every source of a split (greedy or beam); returns target token lists in the split's order.
    Empty sources translate to an empty hypothesis."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    model.eval()
    config = model.config
    order = [int(i) for i in np.argsort(store.src_lengths, kind="stable") if store.src_lengths[i] > 0]
    size = max(1, settings["eval_batch_size"] // max(num_beams, 1))
    batches = [order[i : i + size] for i in range(0, len(order), size)]
    mine = rank_share(batches, accelerator.process_index, accelerator.num_processes)
    results = []
    for batch in tqdm(mine, desc=desc, disable=not accelerator.is_local_main_process, leave=False):
        enc = collate(store.rows(batch), config.pad_token_id, accelerator.device)
        max_src = int(enc["attention_mask"].sum(1).max())
        out = model.generate(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], num_beams=num_beams,
            max_new_tokens=min(config.max_source_length + 1, 2 * max_src + 10), do_sample=False,
        )
        for index, ids in zip(batch, out.tolist()):
            words = []
            for token_id in ids[1:]:  # ids[0] is <s>
                if token_id == config.eos_token_id:
                    break
                if token_id not in (config.pad_token_id, config.bos_token_id):
                    words.append(target_tokens[token_id])
            results.append((index, words))
    gathered = gather_object(results) if accelerator.num_processes > 1 else results
    hyps = [[] for _ in range(len(store))]
    for index, words in gathered:
        hyps[index] = words
    return hyps


def compute_bleu(hyps: list, refs: list) -> dict:
    import evaluate

    metric = evaluate.load(str(BLEU_METRIC_PATH))
    return metric.compute(predictions=[" ".join(h) for h in hyps], references=[" ".join(r) for r in refs])


# ---------------------------------------------------------------------------------------------------------------
# checkpoints, metrics, plots


class TrainerState:
    """Everything besides model/optimizer/RNG needed to continue exactly (saved next to accelerate's state)."""

    def __init__(self):
        self.epoch = 0  # completed epochs
        self.step_in_epoch = 0  # optimizer steps already taken in the current (incomplete) epoch
        self.global_step = 0
        self.lr = None
        self.decay_started = False
        self.previous_val_ppl = None
        self.history = []  # one dict per completed epoch
        self.loss_log = []  # [global_step, mean loss per sentence, mean nll per token] every log_every steps
        self.epoch_nll_sum = 0.0  # of the current epoch, summed over processes
        self.epoch_tokens = 0
        self.running = []  # (loss, nll per token) of the steps since the last loss_log entry
        self.running_logged = False  # loss_log[-1] is `running` flushed at a --max-steps stop inside an epoch
        self.train_seconds = 0.0
        self.epoch_wall_seconds = []  # wall time of each finished epoch, evaluation included
        self.train_target_tokens = 0
        self.finished = False

    def state_dict(self) -> dict:
        return dict(self.__dict__)

    def load_state_dict(self, state: dict):
        self.__dict__.update(state)


def checkpoint_dirs(output_dir: Path) -> list:
    root = output_dir / "checkpoints"
    if not root.is_dir():
        return []
    dirs = [d for d in root.iterdir() if re.fullmatch(r"step-\d+", d.name) and (d / "trainer_state.json").exists()]
    return sorted(dirs, key=lambda d: int(d.name.split("-")[1]))


def save_checkpoint(accelerator, output_dir: Path, state: TrainerState, keep: int):
    """accelerate save_state into a temporary folder, then an atomic rename: a killed run never leaves a
    checkpoint that looks complete."""
    final = output_dir / "checkpoints" / f"step-{state.global_step:08d}"
    tmp = final.with_name(final.name + ".tmp")
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / "trainer_state.json").write_text(json.dumps(state.state_dict()) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
    except Exception:
        return ""


def plot_curves(state: TrainerState, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    if state.loss_log:
        steps = [r[0] for r in state.loss_log]
        axes[0].plot(steps, [r[1] for r in state.loss_log], lw=0.8)
    axes[0].set(title="training loss (NLL summed / batch size)", xlabel="step")
    epochs = [h["epoch"] for h in state.history]
    if epochs:
        axes[1].plot(epochs, [h["train_perplexity"] for h in state.history], "o-", label="train")
        axes[1].plot(epochs, [h["val_perplexity"] for h in state.history], "o-", label="validation")
        axes[1].set_yscale("log")
        axes[1].legend()
        bleu = [(h["epoch"], h["val_bleu"]) for h in state.history if h.get("val_bleu") is not None]
        if bleu:
            axes[2].plot([b[0] for b in bleu], [b[1] for b in bleu], "o-")
    axes[1].set(title="perplexity", xlabel="epoch")
    axes[2].set(title="validation BLEU (uncased, tokenized)", xlabel="epoch")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_metrics(path: Path, payload: dict):
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    os.replace(tmp, path)


def parameters_sha256(model) -> str:
    """Fingerprint of all weights (to check that DDP replicas are identical)."""
    import hashlib

    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------------------------
# main


def main(argv=None):
    args = parse_args(argv)
    preset = load_preset(args.preset)
    settings = resolve_settings(args, preset)
    output_dir = Path(args.output_dir)

    from accelerate import Accelerator, DistributedDataParallelKwargs
    from accelerate.utils import gather_object, set_seed

    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    # Accelerator(cpu=True) is what makes torchrun / `accelerate launch --multi_gpu` on a CPU machine real DDP over
    # gloo (docs/transformers_notes.md). Every trainable parameter gets a gradient in every step (decoder, MT-LSTM;
    # the word vectors are frozen), so DDP's find_unused_parameters stays off unless asked for (it costs a graph
    # traversal per step).
    accelerator = Accelerator(
        cpu=args.cpu or not torch.cuda.is_available(),
        kwargs_handlers=[DistributedDataParallelKwargs(find_unused_parameters=args.find_unused_parameters)],
    )
    is_main = accelerator.is_main_process
    world, rank = accelerator.num_processes, accelerator.process_index

    import datasets
    import transformers
    from tqdm.auto import tqdm

    if not is_main:
        datasets.disable_progress_bars()
        transformers.logging.set_verbosity_error()

    # --- output folder checks, resume bookkeeping (nothing is written before the data has loaded) ---
    run_file = output_dir / "run_settings.json"
    if args.resume:
        if not run_file.exists():
            raise SystemExit(f"error: --resume but {run_file} does not exist (nothing to resume)")
        previous = json.loads(run_file.read_text())
        changed = {k: (previous.get(k), settings.get(k)) for k in RESUME_KEYS if previous.get(k) != settings.get(k)}
        if changed:
            raise SystemExit(f"error: --resume with different data/batching/model settings {changed}; the run would "
                             "not continue exactly. Use the original arguments.")
    elif output_dir.exists() and any(output_dir.iterdir()) and not args.overwrite:
        raise SystemExit(f"error: {output_dir} exists and is not empty (use --resume or --overwrite)")
    if settings["vectors"] and not Path(settings["vectors"]).is_file():
        raise SystemExit(f"error: --vectors {settings['vectors']} is not a file")

    # --- data: load (a wrong --data-dir or --dataset fails here, before the output folder is touched) ---
    from modeling_cove.data import load_translation
    from modeling_cove.modeling_cove_mt import (
        TARGET_TOKENIZER_SUBFOLDER,
        CoveForMachineTranslation,
        load_target_tokenizer,
    )
    from modeling_cove.tokenization_cove import build_cove_tokenizer

    start_time = time.time()
    raw = load_translation(settings["data_dir"], settings["dataset"])
    if settings["limit_train"]:
        raw["train"] = raw["train"].select(range(min(settings["limit_train"], len(raw["train"]))))
    if settings["limit_eval"]:
        for split in ("validation", "test"):
            raw[split] = raw[split].select(range(min(settings["limit_eval"], len(raw[split]))))

    # --- output folder: cleared with --overwrite, then the settings that --resume compares against ---
    if not args.resume and output_dir.exists() and any(output_dir.iterdir()):
        accelerator.wait_for_everyone()
        if is_main:
            shutil.rmtree(output_dir)
    accelerator.wait_for_everyone()
    if is_main:
        output_dir.mkdir(parents=True, exist_ok=True)
        run_file.write_text(json.dumps(settings, indent=2) + "\n")
    set_seed(settings["seed"])

    # --- tokenize ---
    lowercase = bool(settings["config_overrides"].get("lowercase", True))
    tokenized = raw.map(tokenize_batch, batched=True, fn_kwargs={"lowercase": lowercase},
                        num_proc=args.preprocess_workers, desc="tokenizing")

    # --- vocabularies (built once by the main process; the others and --resume read the saved ones) ---
    mt_dir = output_dir / "mt"
    stats_file = output_dir / "data_stats.json"
    with accelerator.main_process_first():
        if is_main and not (mt_dir / "config.json").exists():
            src_counts = Counter(t for row in tokenized["train"]["src_tokens"] for t in row)
            tgt_counts = Counter(t for row in tokenized["train"]["tgt_tokens"] for t in row)
            encoder, source_tokenizer, source_info = build_source_side(settings, src_counts, lowercase)
            target_words = select_target_words(tgt_counts, settings["target_min_freq"], settings["max_vocab"])
            target_tokenizer = build_cove_tokenizer(target_words, lowercase=lowercase, add_eos=True)
            config = encoder.config
            overrides = {k: v for k, v in settings["config_overrides"].items()
                         if k not in ("vocab_size", "word_vector_dim")}
            for key, value in overrides.items():
                setattr(config, key, value)
            config.target_vocab_size = len(target_tokenizer)
            config.max_source_length = settings["max_length"]
            config.architectures = ["CoveForMachineTranslation"]
            model = CoveForMachineTranslation(config)
            model.cove.load_state_dict(encoder.state_dict())  # fixed vectors + MT-LSTM init
            model.save_pretrained(mt_dir)
            source_tokenizer.save_pretrained(mt_dir)
            target_tokenizer.save_pretrained(mt_dir / TARGET_TOKENIZER_SUBFOLDER)
            target_total = sum(tgt_counts.values())
            source_info.update({
                "target_vocab_size": len(target_tokenizer),
                "target_train_token_coverage": round(
                    100.0 * sum(tgt_counts[w] for w in target_words) / max(target_total, 1), 3),
            })
            stats_file.write_text(json.dumps(source_info, indent=2) + "\n")
    from transformers import AutoTokenizer

    source_tokenizer = AutoTokenizer.from_pretrained(mt_dir)
    target_tokenizer = load_target_tokenizer(str(mt_dir))
    model = CoveForMachineTranslation.from_pretrained(mt_dir)
    model.check_tokenizers(source_tokenizer, target_tokenizer)
    config = model.config
    data_stats = json.loads(stats_file.read_text())

    # --- ids, length filter ---
    src_vocab, tgt_vocab = source_tokenizer.get_vocab(), target_tokenizer.get_vocab()
    target_tokens = target_tokenizer.convert_ids_to_tokens(list(range(len(target_tokenizer))))
    encoded = {split: encode_split(tokenized[split], src_vocab, tgt_vocab, config.eos_token_id, config.unk_token_id)
               for split in ("train", "validation", "test")}
    train = encoded["train"]
    max_len = settings["max_length"]
    n_train = len(train)
    empty = sum(1 for s, t in zip(train["src_tokens"], train["tgt_tokens"]) if not s or not t)
    train = train.filter(lambda r: 0 < len(r["src_tokens"]) <= max_len and 0 < len(r["tgt_tokens"]) <= max_len,
                         desc="length filter")
    data_stats.update({
        "train_pairs": n_train,
        "train_pairs_kept": len(train),
        "train_pairs_dropped_empty": empty,
        "train_pairs_dropped_too_long": n_train - len(train) - empty,
        "train_source_tokens": int(sum(len(r) for r in train["src_ids"])),
        "train_target_tokens": int(sum(len(r) for r in train["tgt_ids"])),  # including </s>
        "train_source_unk": int(sum(train["src_unk"])),
        "train_target_unk": int(sum(train["tgt_unk"])),
    })
    eval_stores, references = {}, {}
    for split in ("validation", "test"):
        ds = encoded[split]
        truncated = sum(1 for r in ds["src_ids"] if len(r) > max_len)
        ds = ds.map(lambda r: {"src_ids": r["src_ids"][:max_len]}, desc="truncate sources")
        eval_stores[split] = TokenStore(ds)
        references[split] = ds["tgt_tokens"]
        data_stats.update({
            f"{split}_pairs": len(ds),
            f"{split}_sources_truncated": truncated,
            f"{split}_empty_sources": int((eval_stores[split].src_lengths == 0).sum()),
            f"{split}_target_unk": int(sum(ds["tgt_unk"])),
        })
    # the validation perplexity needs non-empty sources
    val_ppl_store = eval_stores["validation"]
    train_store = TokenStore(train)
    if len(train_store) < world:
        raise SystemExit(f"error: {len(train_store)} training pairs left after filtering, fewer than {world} processes")

    # --- optimizer, state, resume ---
    trainable = [p for p in model.parameters() if p.requires_grad]
    if settings["optimizer"] == "sgd":
        optimizer = torch.optim.SGD(trainable, lr=settings["lr"])
    elif settings["optimizer"] == "adam":
        optimizer = torch.optim.Adam(trainable, lr=settings["lr"])
    else:
        raise ValueError(f"unknown optimizer {settings['optimizer']!r}; choose sgd or adam")
    model, optimizer = accelerator.prepare(model, optimizer)
    unwrapped = accelerator.unwrap_model(model)
    state = TrainerState()
    state.lr = settings["lr"]
    checkpoints = checkpoint_dirs(output_dir) if args.resume else []
    if checkpoints:
        accelerator.load_state(str(checkpoints[-1]))  # model, optimizer, RNG states of every process
        state.load_state_dict(json.loads((checkpoints[-1] / "trainer_state.json").read_text()))
        accelerator.print(f"resumed from {checkpoints[-1]} (epoch {state.epoch}, step {state.global_step})")
        steps_left = not settings["max_steps"] or state.global_step < settings["max_steps"]
        if state.finished and steps_left and state.step_in_epoch > 0:
            state.finished = False  # stopped by --max-steps inside an epoch: continue that epoch
            accelerator.print(f"continuing epoch {state.epoch + 1} at its step {state.step_in_epoch + 1}")
        elif state.finished and steps_left:
            # a finished run continues when the limits given now allow another epoch (e.g. a larger --max-epochs
            # or --time-budget-minutes); the same rule as at the end of every epoch
            fits = args.time_budget_minutes is None or (
                sum(state.epoch_wall_seconds) + state.epoch_wall_seconds[-1] <= 60 * args.time_budget_minutes)
            if fits and state.epoch < settings["max_epochs"] and state.lr >= settings["min_lr"]:
                state.finished = False
                accelerator.print(f"continuing a finished run: epoch {state.epoch + 1} fits the new limits")
        elif not steps_left:
            state.finished = True
            accelerator.print(f"step {state.global_step} >= --max-steps {settings['max_steps']}: nothing to train")
    else:
        if args.resume:
            accelerator.print("--resume: no complete checkpoint yet, starting from the beginning")
        set_seed(settings["seed"] + rank)  # dropout streams: distinct per process, independent of the setup path
    for group in optimizer.param_groups:
        group["lr"] = state.lr

    metrics_path = output_dir / "metrics.json"
    command = " ".join([os.path.basename(sys.argv[0])] + (sys.argv[1:] if argv is None else list(argv)))

    def metrics_payload(test=None):
        return {
            "command": command,
            "commit": git_commit(),
            "preset": preset.get("name"),
            "settings": settings,
            "machine": {"platform": platform.platform(), "processes": world, "device": str(accelerator.device),
                        "distributed_type": str(accelerator.distributed_type),
                        "torch_threads": torch.get_num_threads(),
                        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None},
            "config": {k: getattr(config, k) for k in ("vocab_size", "target_vocab_size", "hidden_size",
                                                        "decoder_hidden_size", "decoder_embedding_dim",
                                                        "decoder_dropout", "encoder_dropout", "attention_bias")},
            "trainable_parameters": sum(p.numel() for p in trainable),
            "data": data_stats,
            "epochs": state.history,
            "loss_log_every": args.log_every,
            "train_seconds": round(state.train_seconds, 1),
            "train_target_tokens_per_second": round(state.train_target_tokens / max(state.train_seconds, 1e-9), 1),
            "wall_seconds": round(time.time() - start_time, 1),
            "test": test,
        }

    # --- training ---
    pad_id = config.pad_token_id
    batch_size = settings["batch_size"]
    max_steps = settings["max_steps"]
    while not state.finished:
        epoch = state.epoch + 1
        batches = [b for b in epoch_batches(train_store.src_lengths, train_store.tgt_lengths, batch_size,
                                            settings["chunk_batches"], settings["seed"], epoch) if len(b) >= world]
        model.train()
        epoch_start = time.time()
        bar = tqdm(total=len(batches), initial=state.step_in_epoch, desc=f"epoch {epoch}", disable=not is_main,
                   dynamic_ncols=True)
        stopped_early = False
        for batch in batches[state.step_in_epoch:]:
            step_start = time.time()
            if state.running_logged:  # continuing after a --max-steps stop: its partial entry grows again
                state.loss_log.pop()
                state.running_logged = False
            inputs = collate(train_store.rows(rank_share(batch, rank, world)), pad_id, accelerator.device)
            out = model(**inputs)
            # paper loss: summed NLL / global batch size; DDP averages over processes, hence the factor `world`
            loss = out.nll_sum * world / len(batch)
            accelerator.backward(loss)
            accelerator.clip_grad_norm_(trainable, settings["grad_clip"])
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            state.global_step += 1
            state.step_in_epoch += 1
            stats = accelerator.reduce(torch.stack([out.nll_sum.detach().double(),
                                                    out.num_tokens.detach().double()]), "sum")
            state.train_target_tokens += int(stats[1])
            state.epoch_nll_sum += float(stats[0])
            state.epoch_tokens += int(stats[1])
            state.running.append((float(stats[0]) / len(batch), float(stats[0] / stats[1])))
            state.train_seconds += time.time() - step_start
            if len(state.running) == args.log_every:
                state.loss_log.append([state.global_step, float(np.mean([r[0] for r in state.running])),
                                       float(np.mean([r[1] for r in state.running]))])
                state.running = []
            bar.update(1)
            bar.set_postfix(loss=f"{float(stats[0]) / len(batch):.2f}", ppl=f"{math.exp(min(float(stats[0] / stats[1]), 50)):.1f}",
                            lr=f"{state.lr:g}")
            if max_steps and state.global_step >= max_steps:
                stopped_early = state.step_in_epoch < len(batches)  # inside the epoch (not at its last batch)
                break
            if args.save_steps and state.global_step % args.save_steps == 0 and state.step_in_epoch < len(batches):
                save_checkpoint(accelerator, output_dir, state, args.keep_checkpoints)
        bar.close()

        # --- end of epoch (or of a --max-steps run): loss log, validation, lr schedule, checkpoint ---
        if state.running:  # the steps since the last --log-every entry (logging windows end with the epoch)
            state.loss_log.append([state.global_step, float(np.mean([r[0] for r in state.running])),
                                   float(np.mean([r[1] for r in state.running]))])
            # after a --max-steps stop inside the epoch the window stays open: --resume replaces this entry
            state.running_logged = stopped_early
            if not stopped_early:
                state.running = []
        val = evaluate_perplexity(unwrapped, val_ppl_store, settings, accelerator, pad_id)
        train_nll = state.epoch_nll_sum / state.epoch_tokens if state.epoch_tokens else None
        record = {
            "epoch": epoch,
            "steps": state.step_in_epoch,
            "global_step": state.global_step,
            "lr": state.lr,
            "train_nll_per_token": train_nll,
            "val_nll_per_token": val["nll_per_token"],
            "val_perplexity": val["perplexity"],
            "seconds": round(time.time() - epoch_start, 1),
            "complete": not stopped_early,
        }
        record["train_perplexity"] = math.exp(min(train_nll, 50.0)) if train_nll is not None else None
        if not args.no_bleu:
            hyps = decode_split(unwrapped, eval_stores["validation"], settings, accelerator, target_tokens,
                                settings["eval_num_beams"], desc="validation BLEU")
            if is_main:
                bleu = compute_bleu(hyps, references["validation"])
                record["val_bleu"], record["val_sacrebleu"] = bleu["bleu"], bleu["sacrebleu"]
        accelerator.print(json.dumps(record))
        if state.history and state.history[-1]["epoch"] == epoch and not state.history[-1]["complete"]:
            state.history.pop()  # the record of this epoch's earlier --max-steps stop, now superseded
        state.history.append(record)
        if stopped_early:
            # a --max-steps stop inside the epoch keeps its position (epoch, step, training NLL sums) and the lr,
            # so that --resume with a larger --max-steps continues exactly as an uninterrupted run
            state.finished = True
        else:
            # docs/paper.md §2: halve the lr every epoch once validation perplexity has risen; stop below min_lr
            # (optionally also from epoch `start_decay_at` on, as OpenNMT-py's -start_decay_at)
            rose = state.previous_val_ppl is not None and val["perplexity"] > state.previous_val_ppl
            scheduled = settings["start_decay_at"] is not None and epoch >= settings["start_decay_at"]
            if state.decay_started or rose or scheduled:
                state.decay_started = True
                state.lr *= settings["lr_decay"]
                for group in optimizer.param_groups:
                    group["lr"] = state.lr
            state.previous_val_ppl = val["perplexity"]
            state.epoch = epoch
            state.step_in_epoch = 0
            state.epoch_nll_sum, state.epoch_tokens = 0.0, 0
            state.epoch_wall_seconds.append(time.time() - epoch_start)
            out_of_time = args.time_budget_minutes is not None and (
                sum(state.epoch_wall_seconds) + state.epoch_wall_seconds[-1] > 60 * args.time_budget_minutes)
            state.finished = (bool(max_steps and state.global_step >= max_steps) or out_of_time
                              or state.lr < settings["min_lr"] or epoch >= settings["max_epochs"])
        save_checkpoint(accelerator, output_dir, state, args.keep_checkpoints)
        if is_main:
            write_metrics(metrics_path, metrics_payload())
            plot_curves(state, output_dir / "curves.png")

    # --- final: test BLEU, replica check, save, export ---
    test = None
    if not args.no_test:
        test_ppl = evaluate_perplexity(unwrapped, eval_stores["test"], settings, accelerator, pad_id)
        hyps = decode_split(unwrapped, eval_stores["test"], settings, accelerator, target_tokens,
                            settings["test_num_beams"], desc="test BLEU")
        if is_main:
            bleu = compute_bleu(hyps, references["test"])
            test = {"perplexity": test_ppl["perplexity"], "num_beams": settings["test_num_beams"], **bleu}
            (output_dir / "test_hypotheses.txt").write_text("\n".join(" ".join(h) for h in hyps) + "\n")
            accelerator.print(f"test: BLEU {bleu['bleu']:.2f} (uncased, tokenized), sacreBLEU {bleu['sacrebleu']:.2f}, "
                              f"perplexity {test_ppl['perplexity']:.2f}")
    fingerprints = gather_object([parameters_sha256(unwrapped)]) if world > 1 else [parameters_sha256(unwrapped)]
    if is_main:
        unwrapped.save_pretrained(mt_dir)
        source_tokenizer.save_pretrained(mt_dir)
        target_tokenizer.save_pretrained(mt_dir / TARGET_TOKENIZER_SUBFOLDER)
        payload = metrics_payload(test)
        payload["replica_weight_sha256"] = fingerprints
        write_metrics(metrics_path, payload)
        plot_curves(state, output_dir / "curves.png")
        if not args.no_export:
            sys.path.insert(0, str(Path(__file__).resolve().parent))
            from export_encoder import export_encoder

            export_encoder(mt_dir, output_dir / "encoder", metrics=payload, name=preset.get("name") or output_dir.name)
        accelerator.print(f"done: {output_dir} ({payload['wall_seconds']} s)")
    accelerator.wait_for_everyone()
    accelerator.end_training()


if __name__ == "__main__":
    main()
