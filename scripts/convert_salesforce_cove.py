#!/usr/bin/env python
"""Convert the original Salesforce CoVe MT-LSTM (`wmtlstm-b142a7f2.pth` / `wmtlstm-8f474287.pth`) to a Hugging Face
checkpoint directory: config + tokenizer + GloVe embedding matrix + the converted MT-LSTM, as safetensors.

The vocabulary comes from one of: `--vocab-file` (one word per line), text data (`--tasks` with `--data-dir` or Hub
ids, like scripts/build_vocab.py), or `--vocab-from-vectors N` (the first N words of the vectors file).

    python scripts/convert_salesforce_cove.py --weights wmtlstm-8f474287.pth \
        --vectors glove.840B.300d.txt --vectors-lowercase --tasks sst2 trec6 snli squad \
        --output-dir cove-large --include-word-vectors

The `.pth` is read with `torch.load(weights_only=True)`; wrong keys or shapes stop with an error naming the key and both
shapes. Released CoVe models take lower-cased, Moses-tokenized input (the default here).
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

from modeling_cove.build import (
    convert_salesforce_state_dict,
    count_tokens,
    create_cove_checkpoint,
    load_salesforce_state_dict,
    select_vocabulary,
)
from modeling_cove.configuration_cove import CoveConfig
from modeling_cove.tokenization_cove import DEFAULT_MODEL_MAX_LENGTH, SPECIAL_TOKENS
from modeling_cove.training.vocab import TEXT_SOURCES, iter_task_texts
from modeling_cove.vectors import (
    build_embedding_matrix,
    embedding_matrix_from_vectors,
    iter_word_vectors,
    read_word_vectors,
)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", required=True, help="original wmtlstm-*.pth state dict")
    p.add_argument("--vectors", required=True, help="GloVe text file the MT-LSTM was trained with (840B.300d)")
    p.add_argument("--output-dir", required=True)
    vocab = p.add_mutually_exclusive_group(required=True)
    vocab.add_argument("--vocab-file", help="one word per line")
    vocab.add_argument("--tasks", nargs="+", choices=TEXT_SOURCES, help="text sources as in build_vocab.py")
    vocab.add_argument("--vocab-from-vectors", type=int, metavar="N", help="first N words of the vectors file")
    p.add_argument("--data-dir", default=None)
    p.add_argument("--vectors-lowercase", action="store_true", help="look up lower-cased words in a cased file")
    p.add_argument("--cased", action="store_true", help="keep case in the tokenizer (released CoVe: lower-cased)")
    p.add_argument("--oov-min-count", type=int, default=1000000000, help="keep words without vectors seen this often")
    p.add_argument("--include-word-vectors", action="store_true", help="output [GloVe; CoVe] (eq. 6)")
    p.add_argument("--cove-output", choices=["top", "both"], default="top")
    p.add_argument("--model-max-length", type=int, default=DEFAULT_MODEL_MAX_LENGTH)
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.output_dir)
    if out.exists() and not args.overwrite:
        sys.exit(f"error: {out} exists (use --overwrite)")
    lowercase = not args.cased
    # weights first: a bad file fails before the (slow) vectors pass
    state = load_salesforce_state_dict(args.weights)
    probe = CoveConfig()
    converted = convert_salesforce_state_dict(state, probe)

    if args.vocab_file:
        with open(args.vocab_file, encoding="utf-8") as f:
            words = list(dict.fromkeys(w.strip() for w in f if w.strip() and w.strip() not in SPECIAL_TOKENS))
    elif args.vocab_from_vectors:
        kept = {}  # insertion-ordered set
        for _, word, _ in iter_word_vectors(args.vectors, dim=probe.word_vector_dim):
            word = word.lower() if args.vectors_lowercase else word
            if word not in SPECIAL_TOKENS:
                kept.setdefault(word, None)
            if len(kept) >= args.vocab_from_vectors:
                break
        words = list(kept)
    else:
        counts = count_tokens((t for task in args.tasks for t in iter_task_texts(task, args.data_dir)),
                              lowercase=lowercase, progress=True)
        found_words, found_vectors = read_word_vectors(args.vectors, vocab=set(counts), dim=probe.word_vector_dim,
                                                       lowercase=args.vectors_lowercase, progress=True)
        has = set(found_words)
        words = select_vocabulary(counts, has_vector=has.__contains__, oov_min_count=args.oov_min_count)
    if not words:
        sys.exit("error: empty vocabulary")
    if args.tasks:  # the vectors of every corpus word were read above: no second pass over the file
        matrix, found = embedding_matrix_from_vectors(SPECIAL_TOKENS + words, found_words, found_vectors,
                                                      lowercase=args.vectors_lowercase)
    else:
        matrix, found = build_embedding_matrix(args.vectors, SPECIAL_TOKENS + words, dim=probe.word_vector_dim,
                                               lowercase=args.vectors_lowercase, progress=True)
    model, tokenizer = create_cove_checkpoint(
        words, matrix, lstm_state_dict=converted, lowercase=lowercase, model_max_length=args.model_max_length,
        include_word_vectors=args.include_word_vectors, cove_output=args.cove_output,
    )
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    info = {"source_weights": os.path.basename(args.weights), "vectors": str(args.vectors),
            "vocab_size": len(tokenizer), "words_with_vector": int(found.sum())}
    (tmp / "conversion_info.json").write_text(json.dumps(info, indent=2) + "\n")
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)
    print(json.dumps(info, indent=2))
    print(f"converted {args.weights} -> {out}")


if __name__ == "__main__":
    main()
