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

    python scripts/benchmark_vectors.py            # full run (~2 minutes of one CPU)
    python scripts/benchmark_vectors.py --quick    # smoke run on the first 3,000 lines

Writes benchmarks/results/vectors_loading.json (command, commit, machine, figures).
"""

import argparse
from pathlib import Path

from modeling_cove.benchmarking.common import DEFAULT_DATA_DIR, RESULTS_DIR, report_header
from modeling_cove.benchmarking.vectors_loading import vectors_loading_report
from modeling_cove.training.run_info import write_json


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: first 3,000 lines, 1 repeat")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the shared data folder")
    parser.add_argument("--vectors", type=Path, default=None, help="GloVe-format .xz (default: the stand-in)")
    parser.add_argument("--every", type=int, default=10, help="restricted vocabulary = every k-th word of the file")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (best is reported; default 3)")
    parser.add_argument("--tmp-dir", type=Path, default=None, help="where the decompressed copy goes (/tmp)")
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "vectors_loading.json")
    args = parser.parse_args(argv)
    source = args.vectors or args.data_dir / "vectors" / "w2v-lower-300d.txt.xz"
    if not source.exists():
        parser.error(f"vectors file not found: {source} (pass --data-dir or --vectors)")
    if source.suffix != ".xz":
        parser.error(f"--vectors {source} must be an .xz file (the benchmark compares xz with its decompressed copy)")
    if args.every < 1:
        parser.error(f"--every must be >= 1, got {args.every}")
    report = vectors_loading_report(source, 3000 if args.quick else None, args.every,
                                    args.repeats or (1 if args.quick else 3), args.tmp_dir)
    mode = "quick (first 3,000 lines; not the reference figures)" if args.quick else "full"
    write_json(args.output, {"benchmark": "vectors_loading", **report_header(argv), "mode": mode, **report})
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
