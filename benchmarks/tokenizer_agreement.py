#!/usr/bin/env python
"""Agreement of the CoVe fast tokenizer with sacremoses on real sentences.

Reference: `[t.lower() for t in MosesTokenizer(lang="en").tokenize(text, escape=False)]` (how the vectors were
built). Ours: the tokens of `build_cove_tokenizer(...)`, i.e. `moses_tokenize(text)`. Metric: % of texts tokenized
identically, per dataset and overall (pooled), plus the most common disagreements (as "reference span -> our span").

    python benchmarks/tokenizer_agreement.py --data-dir DATA
writes benchmarks/results/tokenizer_agreement.json. `--limit N` caps every dataset (smoke runs). DATA: a local data
folder laid out as docs/data.md describes (default: $COVE_DATA_DIR).
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.common import DATA_DIR_ENV, RESULTS_DIR, data_dir_or_default, report_header
from instruments.tokenizer_agreement import agreement_report
from modeling_cove.training.common.cli import option, parse_options
from modeling_cove.training.common.files import write_json


@dataclass
class AgreementArguments:
    """The flags of tokenizer_agreement.py."""

    data_dir: Optional[str] = option(f"local data folder laid out as docs/data.md describes (default: ${DATA_DIR_ENV})")
    output: str = option("the report's path", str(RESULTS_DIR / "tokenizer_agreement.json"))
    imdb_limit: int = option("number of IMDb test reviews (file order)", 2000)
    limit: Optional[int] = option("cap every dataset at N texts (smoke runs)")
    top: int = option("how many disagreement patterns to record", 25)
    no_extra: bool = option("skip the extra datasets (SNLI, SQuAD, ...)", False)
    stress: int = option("number of synthetic stress strings (0: skip)", 20000)

    def __post_init__(self):
        self.data_dir = data_dir_or_default(self.data_dir)
        if not Path(self.data_dir).is_dir():
            raise ValueError(f"--data-dir {self.data_dir} does not exist")


def main(argv=None) -> dict:
    args = parse_options(AgreementArguments, argv, description=__doc__)
    figures = agreement_report(Path(args.data_dir), args.imdb_limit, args.limit, args.top, not args.no_extra,
                               args.stress)
    header = report_header(argv)
    report = {"description": figures.pop("description"), **header, **figures}
    write_json(args.output, report)
    print(f"wrote {args.output}")
    return report


if __name__ == "__main__":
    main()
