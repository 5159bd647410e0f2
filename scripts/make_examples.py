#!/usr/bin/env python
"""Writes the embedded default data in `examples/`: synthetic English–German pairs and English sentiment labels,
generated from small hand-written grammars (`modeling_cove.training.examples`; examples/README.md describes them).
The output is a pure function of `--seed`, so the checked-in files can be re-generated and compared byte for byte.

    python scripts/make_examples.py                    # (re)writes examples/en_de/*.tsv and examples/sentiment/*.tsv
    python scripts/make_examples.py --check            # exit 1 if the files in examples/ differ from a fresh run

Files (UTF-8, one example per line, `\\n` line ends, a header line, fields separated by one TAB):

    examples/en_de/{train,validation,test}.tsv       header `en<TAB>de`
    examples/sentiment/{train,validation,test}.tsv   header `text<TAB>label`, label `negative` or `positive`
"""

import argparse
import sys
from pathlib import Path

from modeling_cove.training.examples import DEFAULT_OUTPUT_DIR, SEED, compare_files, render_all, write_files


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR, help="default: examples/ in the repo")
    p.add_argument("--seed", type=int, default=SEED, help=f"default: {SEED} (the checked-in files)")
    p.add_argument("--check", action="store_true", help="compare with the files in --output-dir, write nothing")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    files = render_all(args.seed)
    if args.check:
        reports = compare_files(files, args.output_dir)
        for report in reports:
            print(report)
        print(f"{len(files) - len(reports)}/{len(files)} files identical to a fresh run with seed {args.seed}")
        return 1 if reports else 0
    for path in write_files(files, args.output_dir):
        print(f"wrote {path} ({path.read_text(encoding='utf-8').count(chr(10)) - 1} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
