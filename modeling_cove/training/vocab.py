"""A CoVe checkpoint from text and word vectors: the vocabulary of the texts a run reads, the fixed word-vector matrix
and a freshly initialised MT-LSTM (the starting point of MT pretraining), saved as a Hugging Face checkpoint folder.

    from modeling_cove.training.vocab import build_vocab_checkpoint, iter_task_texts, save_checkpoint
    model, tokenizer, info = build_vocab_checkpoint(iter_task_texts("trec6", "../shared/data"), "glove.txt", dim=300)
    save_checkpoint(model, tokenizer, "runs/vocab", {"build_info.json": info})

Used by `scripts/build_vocab.py`, `scripts/convert_salesforce_cove.py` (text sources) and the main job's vocab stage.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from pathlib import Path
from typing import Iterable

from ..build import count_tokens, create_cove_checkpoint, select_vocabulary
from ..tokenization_cove import DEFAULT_MODEL_MAX_LENGTH, SPECIAL_TOKENS
from ..vectors import embedding_matrix_from_vectors, read_word_vectors

TEXT_SOURCES = ("multi30k", "iwslt", "wmt17", "sst2", "sst5", "trec6", "trec50", "imdb", "snli", "squad")
TRANSLATION_SOURCES = ("multi30k", "iwslt", "wmt17")


def iter_task_texts(task: str, data_dir=None):
    """English texts of every split of a named source (the source side for translation; SQuAD's questions and each
    distinct context once), read by `modeling_cove.data` from `data_dir` or the Hub."""
    from .. import data

    if task not in TEXT_SOURCES:
        raise ValueError(f"unknown text source {task!r}; choose from {', '.join(TEXT_SOURCES)}")
    if task in TRANSLATION_SOURCES:
        dd, columns = data.load_translation(data_dir, task), ["src"]
    elif task == "squad":
        dd, columns = data.load_squad(data_dir), ["question", "context"]
    else:
        dd = data.load_classification(task, data_dir)
        columns = [c for c in ("text", "text_pair") if c in dd["train"].column_names]
    for split in dd.values():
        for column in columns:
            seen_contexts = set()
            for text in split[column]:
                if column == "context":  # many questions share one context: count it once
                    if text in seen_contexts:
                        continue
                    seen_contexts.add(text)
                yield text


def read_tsv_column(path, column: str) -> list:
    """One column (by header name) of a TAB-separated file with a header line, unquoted."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such TSV file: {path}")
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        if column not in (reader.fieldnames or []):
            raise ValueError(f"{path}: no column {column!r} (header {reader.fieldnames})")
        return [row[column] for row in reader]


def build_vocab_checkpoint(texts: Iterable[str], vectors, dim: int = 300, lowercase: bool = True,
                           vectors_lowercase: bool = False, oov_min_count: int = 5, max_size=None,
                           model_max_length: int = DEFAULT_MODEL_MAX_LENGTH, seed: int = 0, **config_overrides):
    """`(CoveModel, tokenizer, info)` for `texts` and the word-vectors file `vectors` (GloVe/word2vec text).

    The vocabulary: every word with a vector, plus words without one seen `oov_min_count` times or more (zero rows),
    most frequent first, at most `max_size` (the 4 special tokens on top). `config_overrides` are `CoveConfig` fields
    (e.g. `hidden_size=128`). `info` holds the coverage figures. Raises ValueError when the texts have no token or no
    word of them has a vector (`read_word_vectors`: a wrong vectors file)."""
    counts = count_tokens(texts, lowercase=lowercase, progress=True)
    if not counts:
        raise ValueError("the text sources produced no tokens")
    # one pass over the vectors file restricted to the corpus words tells which have a vector
    found_words, found_vectors = read_word_vectors(vectors, vocab=set(counts), dim=dim, lowercase=vectors_lowercase,
                                                   progress=True)
    with_vector = set(found_words)
    words = select_vocabulary(counts, has_vector=with_vector.__contains__, oov_min_count=oov_min_count,
                              max_size=max_size)
    matrix, found = embedding_matrix_from_vectors(SPECIAL_TOKENS + words, found_words, found_vectors,
                                                  lowercase=vectors_lowercase)
    model, tokenizer = create_cove_checkpoint(words, matrix, lowercase=lowercase, model_max_length=model_max_length,
                                              seed=seed, **config_overrides)
    total = sum(counts.values())
    info = {
        "vectors": str(vectors),
        "lowercase": lowercase,
        "corpus_tokens": total,
        "corpus_types": len(counts),
        "vocab_size": len(tokenizer),
        "words_with_vector": int(found.sum()),
        "token_coverage_vectors": round(100.0 * sum(c for w, c in counts.items() if w in with_vector) / total, 3),
        "type_coverage_vectors": round(100.0 * len(with_vector) / len(counts), 3),
        "token_coverage_vocab": round(100.0 * sum(counts[w] for w in words) / total, 3),
        "hidden_size": model.config.hidden_size,
        "num_hidden_layers": model.config.num_hidden_layers,
        "word_vector_dim": model.config.word_vector_dim,
    }
    return model, tokenizer, info


class CheckpointLoadError(ValueError):
    """The checkpoint a training run starts from (`--init-from`) does not load, or its tokenizer does not match it."""


def load_cove_checkpoint(path, flag: str = "init_from"):
    """(CoveModel, tokenizer) of the CoVe checkpoint a pretraining starts from (its word vectors and vocabulary: MT or
    biLM). A missing folder, an unreachable Hub id, unreadable weights or a tokenizer that is not the checkpoint's
    raise CheckpointLoadError naming `flag` and `path` (the CLIs print it as one line) instead of the loader's
    traceback."""
    from transformers import AutoTokenizer

    from ..modeling_cove import CoveModel
    from ..tokenization_cove import check_tokenizer_matches

    try:
        model = CoveModel.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as err:  # transformers reads a path that is not a folder as a Hub id
        raise CheckpointLoadError(f"{flag} {str(path)!r} is not a loadable CoVe checkpoint (a folder with "
                                  f"config.json, weights and tokenizer, or a reachable Hub id): {err}") from None
    try:
        check_tokenizer_matches(model.config, tokenizer)
        if len(tokenizer) != model.config.vocab_size:
            raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but config.vocab_size is "
                             f"{model.config.vocab_size}")
    except ValueError as err:
        raise CheckpointLoadError(f"{flag} {str(path)!r}: tokenizer and checkpoint do not match: {err}") from None
    return model, tokenizer


def save_checkpoint(model, tokenizer, output_dir, extra_files: dict | None = None) -> Path:
    """Save `model` and `tokenizer` (+ `extra_files`: name -> JSON payload) into `output_dir` through
    `<output_dir>.tmp`, renamed at the end: an interrupted run never leaves a checkpoint that looks complete."""
    out = Path(output_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    for name, payload in (extra_files or {}).items():
        (tmp / name).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    return out
