#!/usr/bin/env python
"""Build a CoVe checkpoint directory from text data and a word-vectors file (`modeling_cove.training.vocab`).

The result (tokenizer + config + embedding matrix + freshly initialised MT-LSTM) loads with
`AutoModel.from_pretrained(out)` / `AutoTokenizer.from_pretrained(out)` and is the starting point for MT pretraining
(scripts/train_mt.py) or, with a pretrained MT-LSTM, for the task heads.

Examples:
    python scripts/build_vocab.py --data-dir ../shared/data --tasks multi30k trec6 sst2 \\
        --vectors ../shared/data/vectors/w2v-lower-300d.txt.xz --output-dir runs/vocab
    python scripts/build_vocab.py --tasks multi30k sst2 --vectors glove.840B.300d.txt --vectors-lowercase \\
        --output-dir runs/vocab-glove            # Hub dataset ids, real GloVe
"""

import argparse
import json
import sys
import time
from pathlib import Path

from modeling_cove.tokenization_cove import DEFAULT_MODEL_MAX_LENGTH
from modeling_cove.training.vocab import TEXT_SOURCES, build_vocab_checkpoint, iter_task_texts, save_checkpoint


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", required=True, help="checkpoint directory to write")
    p.add_argument("--vectors", required=True, help="GloVe/word2vec text file (.txt/.gz/.xz)")
    p.add_argument("--data-dir", default=None, help="local data folder (like shared/data); default: Hub dataset ids")
    p.add_argument("--tasks", nargs="*", default=["multi30k"],
                   help=f"text sources, from {TEXT_SOURCES} (`--tasks` alone: none, only the --text-file texts)")
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


def texts(args):
    for task in args.tasks:
        yield from iter_task_texts(task, args.data_dir)
    for path in args.text_file:
        with open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)


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
    overrides = dict(include_word_vectors=args.include_word_vectors, cove_output=args.cove_output)
    if args.char_ngrams:
        overrides["char_ngram_dim"] = 100
    try:
        model, tokenizer, info = build_vocab_checkpoint(
            texts(args), args.vectors, dim=args.dim, lowercase=not args.cased,
            vectors_lowercase=args.vectors_lowercase, oov_min_count=args.oov_min_count, max_size=args.max_size,
            model_max_length=args.model_max_length, seed=args.seed, **overrides)
    except ValueError as e:
        sys.exit(f"error: {e}")
    if args.char_ngrams:
        import torch

        from modeling_cove.vectors import build_char_ngram_matrix

        matrix, _ = build_char_ngram_matrix(args.char_ngrams, tokenizer.convert_ids_to_tokens(range(len(tokenizer))),
                                            progress=True)
        with torch.no_grad():
            model.char_ngram_embeddings.weight.copy_(matrix)
    info = {"command": " ".join(["build_vocab.py", *(argv if argv is not None else sys.argv[1:])]),
            "tasks": args.tasks, "data_dir": args.data_dir, **info, "seconds": round(time.time() - start, 1)}
    save_checkpoint(model, tokenizer, out, {"build_info.json": info})
    print(json.dumps(info, indent=2))
    print(f"coverage: {info['token_coverage_vectors']}% of {info['corpus_tokens']} tokens have a vector; "
          f"vocabulary {info['vocab_size']} entries -> {out}")


if __name__ == "__main__":
    main()
