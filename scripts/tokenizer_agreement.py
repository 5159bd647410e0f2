#!/usr/bin/env python
"""Agreement of the CoVe fast tokenizer with sacremoses on real sentences.

Reference: `[t.lower() for t in MosesTokenizer(lang="en").tokenize(text, escape=False)]` (how the vectors were
built). Ours: the tokens of `build_cove_tokenizer(...)`, i.e. `moses_tokenize(text)`. Metric: % of texts tokenized
identically, per dataset and overall (pooled), plus the most common disagreements (as "reference span -> our span").

    python scripts/tokenizer_agreement.py --data-dir ../shared/data
writes benchmarks/results/tokenizer_agreement.json. `--limit N` caps every dataset (smoke runs).
"""

import argparse
import os
from pathlib import Path

from modeling_cove.benchmarking.common import DEFAULT_DATA_DIR, RESULTS_DIR, report_header
from modeling_cove.benchmarking.tokenizer_agreement import agreement_report
from modeling_cove.training.run_info import write_json


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("COVE_DATA_DIR", DEFAULT_DATA_DIR)))
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "tokenizer_agreement.json")
    parser.add_argument("--imdb-limit", type=int, default=2000, help="number of IMDb test reviews (file order)")
    parser.add_argument("--limit", type=int, default=None, help="cap every dataset at N texts (smoke runs)")
    parser.add_argument("--top", type=int, default=25, help="how many disagreement patterns to record")
    parser.add_argument("--no-extra", action="store_true", help="skip the extra datasets (SNLI, SQuAD, ...)")
    parser.add_argument("--stress", type=int, default=20000, help="number of synthetic stress strings (0: skip)")
    args = parser.parse_args(argv)
    if not args.data_dir.is_dir():
        parser.error(f"--data-dir {args.data_dir} does not exist")
    figures = agreement_report(args.data_dir, args.imdb_limit, args.limit, args.top, not args.no_extra, args.stress)
    header = report_header(argv)
    report = {"description": figures.pop("description"), **header, **figures}
    write_json(args.output, report)
    print(f"wrote {args.output}")
    return report


if __name__ == "__main__":
    main()
