#!/usr/bin/env python
"""Build a CoVe checkpoint directory from text data and a word-vectors file.

The result (tokenizer + config + embedding matrix + freshly initialised MT-LSTM) loads with
`AutoModel.from_pretrained(out)` / `AutoTokenizer.from_pretrained(out)` and is the starting point for MT pretraining
(scripts/train_mt.py) or, with a pretrained MT-LSTM, for the task heads.

Examples:
    python scripts/build_vocab.py --data-dir ../shared/data --tasks multi30k trec6 sst2 \
        --vectors ../shared/data/vectors/w2v-lower-300d.txt.xz --output-dir runs/vocab
    python scripts/build_vocab.py --tasks multi30k sst2 --vectors glove.840B.300d.txt --vectors-lowercase \
        --output-dir runs/vocab-glove            # Hub dataset ids, real GloVe
"""

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import torch

from modeling_cove.build import count_tokens, create_cove_checkpoint, select_vocabulary
from modeling_cove.tokenization_cove import DEFAULT_MODEL_MAX_LENGTH, SPECIAL_TOKENS
from modeling_cove.vectors import build_char_ngram_matrix, embedding_matrix_from_vectors, read_word_vectors

TEXT_SOURCES = ("multi30k", "iwslt", "wmt17", "sst2", "sst5", "trec6", "trec50", "imdb", "snli", "squad")


def iter_task_texts(task: str, data_dir):
    """English texts of every split of a task (source side for translation)."""
    from modeling_cove import data

    if task in ("multi30k", "iwslt", "wmt17"):
        dd = data.load_translation(data_dir, task)
        columns = ["src"]
    elif task == "squad":
        dd = data.load_squad(data_dir)
        columns = ["question", "context"]
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


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", required=True, help="checkpoint directory to write")
    p.add_argument("--vectors", required=True, help="GloVe/word2vec text file (.txt/.gz/.xz)")
    p.add_argument("--data-dir", default=None, help="local data folder (like shared/data); default: Hub dataset ids")
    p.add_argument("--tasks", nargs="+", default=["multi30k"], help=f"text sources, from {TEXT_SOURCES}")
    p.add_argument("--text-file", action="append", default=[], help="extra plain-text file(s), one text per line")
    p.add_argument("--dim", type=int, default=300, help="word-vector dimension (checked against the file)")
    p.add_argument("--cased", action="store_true", help="do not lowercase text (default: lowercase, as CoVe)")
    p.add_argument("--vectors-lowercase", action="store_true",
                   help="look words up lower-cased in a cased vectors file (e.g. GloVe 840B), first occurrence wins")
    p.add_argument("--oov-min-count", type=int, default=5,
                   help="also keep words WITHOUT a vector that occur at least this often (zero rows)")
    p.add_argument("--max-size", type=int, default=None,
                   help="at most this many corpus words, most frequent first; the 4 special tokens (<pad> <unk> <s> "
                        "</s>) come on top, so the tokenizer holds up to MAX_SIZE + 4 entries (train_mt.py's "
                        "--max-vocab counts them: --max-vocab N = --max-size N-4). Default: no cap")
    p.add_argument("--char-ngrams", default=None, help="Hashimoto char n-gram file (adds char_ngram_dim=100)")
    p.add_argument("--model-max-length", type=int, default=DEFAULT_MODEL_MAX_LENGTH)
    p.add_argument("--include-word-vectors", action="store_true", help="config: output [GloVe; CoVe] (eq. 6)")
    p.add_argument("--cove-output", choices=["top", "both"], default="top")
    p.add_argument("--seed", type=int, default=0, help="seed of the fresh MT-LSTM initialisation")
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.output_dir)
    if out.exists() and not args.overwrite:
        sys.exit(f"error: {out} exists (use --overwrite)")
    if not Path(args.vectors).exists():
        sys.exit(f"error: vectors file not found: {args.vectors}")
    for task in args.tasks:
        if task not in TEXT_SOURCES:
            sys.exit(f"error: unknown task {task!r}; choose from {', '.join(TEXT_SOURCES)}")
    start = time.time()
    lowercase = not args.cased

    def texts():
        for task in args.tasks:
            yield from iter_task_texts(task, args.data_dir)
        for path in args.text_file:
            with open(path, encoding="utf-8") as f:
                yield from (line.rstrip("\n") for line in f)

    counts = count_tokens(texts(), lowercase=lowercase, progress=True)
    if not counts:
        sys.exit("error: the text sources produced no tokens")
    # one pass over the vectors file restricted to the corpus words tells which have a vector
    found_words, found_vectors = read_word_vectors(args.vectors, vocab=set(counts), dim=args.dim,
                                                   lowercase=args.vectors_lowercase, progress=True)
    with_vector = set(found_words)
    words = select_vocabulary(counts, has_vector=with_vector.__contains__, oov_min_count=args.oov_min_count,
                              max_size=args.max_size)
    all_words = SPECIAL_TOKENS + words
    matrix, found = embedding_matrix_from_vectors(all_words, found_words, found_vectors,
                                                  lowercase=args.vectors_lowercase)
    overrides = dict(include_word_vectors=args.include_word_vectors, cove_output=args.cove_output)
    if args.char_ngrams:
        char_matrix, _ = build_char_ngram_matrix(args.char_ngrams, all_words, progress=True)
        overrides["char_ngram_dim"] = char_matrix.shape[1]
    model, tokenizer = create_cove_checkpoint(words, matrix, lowercase=lowercase,
                                              model_max_length=args.model_max_length, seed=args.seed, **overrides)
    if args.char_ngrams:
        with torch.no_grad():
            model.char_ngram_embeddings.weight.copy_(char_matrix)

    total = sum(counts.values())
    covered = sum(c for w, c in counts.items() if w in with_vector)
    in_vocab = sum(counts[w] for w in words)
    info = {
        "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
        "tasks": args.tasks,
        "data_dir": args.data_dir,
        "vectors": str(args.vectors),
        "lowercase": lowercase,
        "corpus_tokens": total,
        "corpus_types": len(counts),
        "vocab_size": len(tokenizer),
        "words_with_vector": int(found.sum()),
        "token_coverage_vectors": round(100.0 * covered / total, 3),
        "type_coverage_vectors": round(100.0 * len(with_vector) / len(counts), 3),
        "token_coverage_vocab": round(100.0 * in_vocab / total, 3),
        "seconds": round(time.time() - start, 1),
    }
    # write to a temporary folder and rename at the end: an interrupted run never leaves a checkpoint that looks complete
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    print(json.dumps(info, indent=2))
    print(f"coverage: {info['token_coverage_vectors']}% of {total} tokens have a vector; "
          f"vocabulary {info['vocab_size']} entries -> {out}")


if __name__ == "__main__":
    main()
