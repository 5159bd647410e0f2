"""Data of MT pretraining: tokenization of both sides, the vocabularies and the initial MT checkpoint, token ids with
the length filter, and the collation of a batch (the length-grouped epoch batches are `pretraining.epoch_batches`).

Tokenization (lower-cased, Moses-style):
- source (English): `tokenization_cove.moses_tokenize`, the same split as the saved CoVe tokenizer;
- target (German): `sacremoses.MosesTokenizer(lang="de").tokenize(text, escape=False)` lower-cased (Moses has German
  rules the English regex tokenizer lacks). The saved target tokenizer maps these tokens to ids and back.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from .corpora import column_lists

__all__ = ["build_mt_checkpoint", "build_source_side", "collate", "encode_split", "prepare_splits", "select_target_words",
           "target_tokenize", "to_ids", "tokenize_batch", "tokenize_corpora", "TokenStore", "unk_rate"]

_GERMAN = {}


def target_tokenize(text: str) -> list:
    """German side: lower-cased sacremoses tokens (`escape=False`, as the source side)."""
    if "de" not in _GERMAN:
        from sacremoses import MosesTokenizer

        _GERMAN["de"] = MosesTokenizer(lang="de")
    return [token.lower() for token in _GERMAN["de"].tokenize(text, escape=False)]


def tokenize_batch(batch: dict, lowercase: bool = True) -> dict:
    """A `datasets.map` function: columns `src`/`tgt` -> token lists `src_tokens`/`tgt_tokens`."""
    from modeling_cove.tokenization_cove import moses_tokenize

    return {
        "src_tokens": [moses_tokenize(text, lowercase=lowercase) for text in batch["src"]],
        "tgt_tokens": [target_tokenize(text) for text in batch["tgt"]],
    }


def tokenize_corpora(corpora, lowercase: bool = True, num_proc=None) -> tuple:
    """(the training mixture, {corpus: DatasetDict(validation, test)}) of a `corpora.MTCorpora` with the token
    columns of `tokenize_batch` added."""
    def tokenize(ds):
        return ds.map(tokenize_batch, batched=True, fn_kwargs={"lowercase": lowercase}, num_proc=num_proc,
                      desc="tokenizing")

    return tokenize(corpora.train), {name: tokenize(splits) for name, splits in corpora.evaluation.items()}


# ---------------------------------------------------------------------------------------------------------------
# vocabularies and the initial MT checkpoint


def select_target_words(counts: Counter, min_freq: int, max_size: int) -> list:
    """Most frequent first (ties alphabetical), count >= min_freq, at most max_size - 4 words (4 special tokens)."""
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS

    words = [w for w, c in counts.items() if c >= min_freq and w not in SPECIAL_TOKENS]
    words.sort(key=lambda w: (-counts[w], w))
    return words[: max_size - len(SPECIAL_TOKENS)]


def _source_from_checkpoint(path):
    from .checkpoints import load_cove_checkpoint

    encoder, tokenizer = load_cove_checkpoint(path, flag="--init-from")
    vocab = tokenizer.get_vocab()
    with_vector = {w for w, i in vocab.items() if bool(encoder.embeddings.weight[i].abs().sum() > 0)}
    info = {"source_vocab_from": str(path)}
    try:  # the vectors file the checkpoint was built from (cove-build-vocab's record): the card names it
        info["source_vectors"] = str(json.loads((Path(path) / "build_info.json").read_text())["vectors"])
    except (OSError, ValueError, KeyError, TypeError):  # a checkpoint of another kind (an exported encoder)
        pass
    return encoder, tokenizer, with_vector, info


def build_source_side(settings: dict, src_counts: Counter, lowercase: bool):
    """(CoveModel with the fixed word vectors and an MT-LSTM init, source tokenizer, info dict): from the
    `init_from` checkpoint, or built from the training source side and the `vectors` file."""
    from modeling_cove.build import create_cove_checkpoint, select_vocabulary
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS
    from modeling_cove.vectors import build_embedding_matrix, read_word_vectors

    if settings["init_from"]:
        encoder, tokenizer, with_vector, info = _source_from_checkpoint(settings["init_from"])
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


def build_mt_checkpoint(settings: dict, train_tokens, mt_dir: Path, stats_file: Path, lowercase: bool):
    """Build both vocabularies from the tokenized training split and save the initial MT model (fixed source vectors,
    MT-LSTM init, fresh decoder) with its tokenizers to `mt_dir`; the vocabulary statistics go to `stats_file`."""
    from modeling_cove.modeling_cove_mt import TARGET_TOKENIZER_SUBFOLDER, CoveForMachineTranslation
    from modeling_cove.tokenization_cove import build_cove_tokenizer

    sources, targets = column_lists(train_tokens, "src_tokens", "tgt_tokens")
    src_counts = Counter(t for row in sources for t in row)
    tgt_counts = Counter(t for row in targets for t in row)
    encoder, source_tokenizer, info = build_source_side(settings, src_counts, lowercase)
    target_words = select_target_words(tgt_counts, settings["target_min_freq"], settings["max_vocab"])
    target_tokenizer = build_cove_tokenizer(target_words, lowercase=lowercase, add_eos=True)
    config = encoder.config
    for key, value in settings["config_overrides"].items():
        if key not in ("vocab_size", "word_vector_dim"):
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
    info.update({
        "target_vocab_size": len(target_tokenizer),
        "target_train_token_coverage": round(100.0 * sum(tgt_counts[w] for w in target_words) / max(target_total, 1),
                                             3),
    })
    stats_file.write_text(json.dumps(info, indent=2) + "\n")


# ---------------------------------------------------------------------------------------------------------------
# ids, length filter, collation


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


class TokenStore:
    """The id columns of a split held as numpy arrays (fast row access for batching)."""

    def __init__(self, ds):
        src, tgt = column_lists(ds, "src_ids", "tgt_ids")
        self.src = [np.asarray(x, dtype=np.int64) for x in src]
        self.tgt = [np.asarray(x, dtype=np.int64) for x in tgt]
        self.src_lengths = np.array([len(x) for x in self.src], dtype=np.int64)
        self.tgt_lengths = np.array([len(x) for x in self.tgt], dtype=np.int64)

    def __len__(self):
        return len(self.src)

    def rows(self, indices) -> list:
        return [(self.src[i], self.tgt[i]) for i in indices]


def unk_rate(unknown: int, tokens: int) -> float:
    """Percent of `tokens` that are <unk> (0 for no tokens), rounded to 3 decimals."""
    return round(100.0 * unknown / max(tokens, 1), 3)


def _train_store(ds, names: list, max_len: int, data_stats: dict) -> TokenStore:
    """The training mixture's id store after the length filter; `data_stats` gains its counts, overall and (under
    "corpora") per corpus."""
    n_train = len(ds)
    empty = sum(1 for s, t in zip(*column_lists(ds, "src_tokens", "tgt_tokens")) if not s or not t)
    train = ds.filter(lambda r: 0 < len(r["src_tokens"]) <= max_len and 0 < len(r["tgt_tokens"]) <= max_len,
                      desc="length filter")
    store = TokenStore(train)
    source_tokens, target_tokens = int(store.src_lengths.sum()), int(store.tgt_lengths.sum())  # target: with </s>
    data_stats.update({
        "train_pairs": n_train,
        "train_pairs_kept": len(train),
        "train_pairs_dropped_empty": empty,
        "train_pairs_dropped_too_long": n_train - len(train) - empty,
        "train_source_tokens": source_tokens,
        "train_target_tokens": target_tokens,
    })
    corpus, src_unk, tgt_unk = (np.asarray(column, dtype=np.int64)
                                for column in column_lists(train, "corpus", "src_unk", "tgt_unk"))
    data_stats.update({"train_source_unk": int(src_unk.sum()), "train_target_unk": int(tgt_unk.sum())})
    data_stats["train_source_unk_rate"] = unk_rate(data_stats["train_source_unk"], source_tokens)
    data_stats["train_target_unk_rate"] = unk_rate(data_stats["train_target_unk"], target_tokens - len(train))
    for index, name in enumerate(names):
        rows = corpus == index
        data_stats["corpora"][name].update({
            "train_pairs_kept": int(rows.sum()),
            "train_source_unk_rate": unk_rate(int(src_unk[rows].sum()), int(store.src_lengths[rows].sum())),
            "train_target_unk_rate": unk_rate(int(tgt_unk[rows].sum()),
                                              int(store.tgt_lengths[rows].sum() - rows.sum())),
        })
    return store


def _eval_split(ds, max_len: int) -> tuple:
    """(TokenStore with sources truncated to max_len, reference token lists, counts for the record)."""
    src_ids, src_tokens, tgt_tokens, src_unk, tgt_unk = column_lists(ds, "src_ids", "src_tokens", "tgt_tokens",
                                                                     "src_unk", "tgt_unk")
    truncated = sum(1 for r in src_ids if len(r) > max_len)
    source_tokens = sum(len(r) for r in src_tokens)
    target_tokens = sum(len(r) for r in tgt_tokens)
    ds = ds.map(lambda r: {"src_ids": r["src_ids"][:max_len]}, desc="truncate sources")
    store = TokenStore(ds)
    counts = {
        "pairs": len(ds),
        "sources_truncated": truncated,
        "empty_sources": int((store.src_lengths == 0).sum()),
        "source_unk": int(sum(src_unk)),
        "target_unk": int(sum(tgt_unk)),
    }
    counts["source_unk_rate"] = unk_rate(counts["source_unk"], source_tokens)
    counts["target_unk_rate"] = unk_rate(counts["target_unk"], target_tokens)
    return store, tgt_tokens, counts  # the references: plain lists


def prepare_splits(train, evaluation: dict, source_tokenizer, target_tokenizer, config, max_len: int,
                   data_stats: dict):
    """Token ids of the tokenized training mixture `train` and of every corpus's splits in `evaluation`
    ({corpus: DatasetDict(validation, test)}, the first corpus first); training pairs outside 1..max_len tokens
    dropped, evaluation sources truncated to max_len. Returns (train TokenStore, {corpus: {split: TokenStore}},
    {corpus: {split: reference token lists}}). `data_stats` (with a "corpora" entry per corpus) gains the counts of
    what was dropped, truncated and unknown (<unk> rates in percent of the tokens, </s> not counted): the
    mixture's and the first corpus's splits' under the keys a single-corpus run always had, each corpus's under
    "corpora"."""
    src_vocab, tgt_vocab = source_tokenizer.get_vocab(), target_tokenizer.get_vocab()

    def encode(ds):
        return encode_split(ds, src_vocab, tgt_vocab, config.eos_token_id, config.unk_token_id)

    names = list(evaluation)
    train_store = _train_store(encode(train), names, max_len, data_stats)
    eval_stores, references = {}, {}
    for name, splits in evaluation.items():
        eval_stores[name], references[name] = {}, {}
        for split in ("validation", "test"):
            store, refs, counts = _eval_split(encode(splits[split]), max_len)
            eval_stores[name][split], references[name][split] = store, refs
            data_stats["corpora"][name].update({f"{split}_{key}": value for key, value in counts.items()
                                                if key != "pairs"})  # its "pairs" entry has them
            if name == names[0]:
                data_stats.update({f"{split}_{key}": counts[key]
                                   for key in ("pairs", "sources_truncated", "empty_sources", "target_unk")})
    return train_store, eval_stores, references


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
