#!/usr/bin/env python
"""Benchmark of reading word vectors: lines/s and peak memory of `modeling_cove.vectors`.

Reads the stand-in vectors (`vectors/w2v-lower-300d.txt.xz`, GloVe text format, 32,062 x 300) as xz and as a
decompressed copy in a temporary folder, each (a) with the full vocabulary, (b) restricted to every 10th word
(~3.2k words, a file 10x larger than the vocabulary) and (c) restricted to one word (the fixed cost: decompressor,
read buffers, one parse chunk), and shows that, above that fixed cost, the memory follows the vocabulary, not the
file. Side by side, in the same run: the usual naive loader (every line split into a dict of numpy arrays, then
filtered).

Every measurement runs in a fresh subprocess that loads only `modeling_cove/vectors.py` (numpy + torch, no
transformers), twice: once timed (best of --repeats; peak RSS = VmHWM minus the RSS before reading), once
under tracemalloc (peak of Python + numpy allocations during the read; slower, so not timed).

    python benchmarks/benchmark_vectors.py            # full run (~2 minutes of one CPU)
    python benchmarks/benchmark_vectors.py --quick    # smoke run on the first 3,000 lines

Writes benchmarks/results/vectors_loading.json (command, commit, machine, figures). The stand-in vectors are read from
DATA/vectors/ (--data-dir DATA: a local data folder laid out as docs/data.md describes, default $COVE_DATA_DIR) unless
--vectors names a file.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments.common import DATA_DIR_ENV, RESULTS_DIR, data_dir_or_default, report_header
from instruments.vectors_loading import vectors_loading_report
from modeling_cove.training.common.cli import option, parse_options
from modeling_cove.training.common.files import write_json


@dataclass
class VectorsArguments:
    """The flags of benchmark_vectors.py."""

    quick: bool = option("smoke run: first 3,000 lines, 1 repeat", False)
    data_dir: Optional[str] = option(f"local data folder laid out as docs/data.md describes (default: ${DATA_DIR_ENV}; "
                                     "not needed with --vectors)")
    vectors: Optional[str] = option("GloVe-format .xz (default: the stand-in under the data folder)")
    every: int = option("restricted vocabulary = every k-th word of the file", 10)
    repeats: Optional[int] = option("timed repeats (best is reported; default 3)")
    tmp_dir: Optional[str] = option("where the decompressed copy goes (/tmp)")
    output: str = option("the report's path", str(RESULTS_DIR / "vectors_loading.json"))

    def __post_init__(self):
        if self.vectors is None:
            self.vectors = str(Path(data_dir_or_default(self.data_dir)) / "vectors" / "w2v-lower-300d.txt.xz")
        if not Path(self.vectors).exists():
            raise ValueError(f"vectors file not found: {self.vectors} (pass --data-dir or --vectors)")
        if not self.vectors.endswith(".xz"):
            raise ValueError(f"--vectors {self.vectors} must be an .xz file (the benchmark compares xz with its "
                             "decompressed copy)")
        if self.every < 1:
            raise ValueError(f"--every must be >= 1, got {self.every}")


def main(argv=None) -> None:
    args = parse_options(VectorsArguments, argv, description=__doc__)
    report = vectors_loading_report(Path(args.vectors), 3000 if args.quick else None, args.every,
                                    args.repeats or (1 if args.quick else 3),
                                    None if args.tmp_dir is None else Path(args.tmp_dir))
    mode = "quick (first 3,000 lines; not the reference figures)" if args.quick else "full"
    write_json(args.output, {"benchmark": "vectors_loading", **report_header(argv), "mode": mode, **report})
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
