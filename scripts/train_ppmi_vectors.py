#!/usr/bin/env python
"""Small word vectors from a text corpus: positive PMI of window co-occurrences, then a truncated SVD
(`modeling_cove.training.ppmi`, whose docstring states the method). Output: GloVe text format.

    python scripts/train_ppmi_vectors.py --text-file examples/en_de/train.tsv --tsv-column en \\
        --text-file examples/sentiment/train.tsv --tsv-column text --dim 50 --output vectors.txt
"""

import argparse
import sys

from modeling_cove.training.ppmi import nearest_neighbours, read_texts, train_ppmi_vectors, write_vectors


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--text-file", action="append", required=True,
                   help="a text file (one sentence per line) or TSV file (with --tsv-column); repeatable")
    p.add_argument("--tsv-column", action="append", default=None,
                   help="header name of the text column, once per --text-file (use '-' for a plain text file)")
    p.add_argument("--output", required=True, help="vector file to write (GloVe text format)")
    p.add_argument("--dim", type=int, default=50)
    p.add_argument("--window", type=int, default=4)
    p.add_argument("--min-count", type=int, default=1)
    p.add_argument("--cds-alpha", type=float, default=0.75, help="context distribution smoothing (1 = plain PMI)")
    p.add_argument("--eig-power", type=float, default=0.5, help="vectors = U * S^p")
    p.add_argument("--no-normalize", action="store_true", help="keep U * S^p rows as they are (no unit norm)")
    p.add_argument("--show", nargs="*", default=[], help="print the 5 nearest neighbours of these words")
    args = p.parse_args(argv)
    args.tsv_column = args.tsv_column or ["-"] * len(args.text_file)
    if len(args.tsv_column) != len(args.text_file):
        p.error(f"{len(args.text_file)} --text-file but {len(args.tsv_column)} --tsv-column (give one per file, "
                "'-' = none)")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    texts = []
    for path, column in zip(args.text_file, args.tsv_column):
        texts += read_texts(path, None if column == "-" else column)
    words, vectors = train_ppmi_vectors(texts, args.dim, args.window, args.min_count, args.cds_alpha,
                                        args.eig_power, not args.no_normalize)
    write_vectors(args.output, words, vectors)
    print(f"{len(texts)} texts -> {len(words)} words x {args.dim} dims -> {args.output}")
    for query in args.show:
        try:
            neighbours = nearest_neighbours(words, vectors, query.lower())
        except KeyError as e:
            print(f"  {e.args[0]}")
            continue
        print(f"  {query}: " + ", ".join(f"{w} ({s:.2f})" for w, s in neighbours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
