#!/usr/bin/env python
"""Benchmark of reading word vectors (issue 7, item 5): lines/s and peak memory of `modeling_cove.vectors`.

Reads the stand-in vectors (`vectors/w2v-lower-300d.txt.xz`, GloVe text format, 32,062 x 300) as xz and as a
decompressed copy in a temporary folder, each (a) with the full vocabulary, (b) restricted to every 10th word
(~3.2k words, a file 10x larger than the vocabulary) and (c) restricted to one word (the fixed cost: decompressor,
read buffers, one parse chunk), and shows that, above that fixed cost, the memory follows the vocabulary, not the
file. Side by side, in the same run: the usual naive loader (every line split into a dict of
numpy arrays, then filtered).

Every measurement runs in a fresh subprocess that loads only `modeling_cove/vectors.py` (numpy + torch, no
transformers), twice: once timed (best of --repeats; peak RSS = ru_maxrss minus the RSS before reading), once
under tracemalloc (peak of Python + numpy allocations during the read; slower, so not timed).

    python scripts/benchmark_vectors.py            # full run (~2 minutes of one CPU)
    python scripts/benchmark_vectors.py --quick    # smoke run on the first 3,000 lines

Writes benchmarks/results/vectors_loading.json (command, commit, machine, figures).
"""

import argparse
import datetime
import importlib.util
import json
import lzma
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"
VECTORS_MODULE = REPO / "modeling_cove" / "vectors.py"


# ----------------------------------------------------------------------------------------------------------------
# Worker: one measurement in a fresh process
# ----------------------------------------------------------------------------------------------------------------


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _naive_loader(path: str, vocab):
    """The loader found in many repositories: every line into a dict, then keep the vocabulary."""
    import numpy as np
    import torch

    opener = lzma.open if path.endswith(".xz") else open
    table = {}
    with opener(path, "rt", encoding="utf-8") as f:
        for line in f:
            fields = line.rstrip().split(" ")
            table.setdefault(fields[0], np.asarray(fields[1:], dtype=np.float32))
    words = [w for w in table if vocab is None or w in vocab]
    matrix = torch.from_numpy(np.stack([table[w] for w in words]))
    return words, matrix


def run_worker(spec: dict) -> dict:
    import numpy  # noqa: F401  (imported before the RSS baseline)
    import torch

    torch.set_num_threads(spec.get("threads", 2))
    module_spec = importlib.util.spec_from_file_location("cove_vectors", VECTORS_MODULE)
    vectors = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(vectors)
    vocab = None
    if spec["vocab_file"]:
        vocab = set(Path(spec["vocab_file"]).read_text(encoding="utf-8").split("\n")) - {""}

    def load():
        if spec["loader"] == "naive":
            return _naive_loader(spec["path"], vocab)
        return vectors.read_word_vectors(spec["path"], vocab=vocab, stop_when_complete=False)

    rss_before = _rss_bytes()
    result = {}
    if spec["tracemalloc"]:
        tracemalloc.start()
        words, matrix = load()
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result["tracemalloc_peak_bytes"] = peak
    else:
        times = []
        for _ in range(spec["repeats"]):
            start = time.perf_counter()
            words, matrix = load()
            times.append(time.perf_counter() - start)
            if len(times) < spec["repeats"]:
                del words, matrix
        result["seconds"] = times
        result["rss_before_bytes"] = rss_before
        result["peak_rss_increase_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss_before
    result["rows"] = len(words)
    result["dim"] = int(matrix.shape[1])
    result["matrix_bytes"] = matrix.numel() * matrix.element_size()
    return result


def measure(spec: dict) -> dict:
    completed = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(spec)],
        capture_output=True,
        text=True,
        check=False,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"worker failed for {spec}:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------------------------------------------
# Driver
# ----------------------------------------------------------------------------------------------------------------


def machine_info() -> dict:
    import numpy
    import torch

    cpu = platform.processor()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    memory = None
    try:
        with open("/proc/meminfo") as f:
            memory = int(next(line for line in f if line.startswith("MemTotal")).split()[1]) * 1024
    except (OSError, StopIteration):
        pass
    return {
        "platform": platform.platform(),
        "cpu": cpu,
        "logical_cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_bytes": memory,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "torch": torch.__version__,
    }


def git_commit() -> dict:
    def git(*args):
        out = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return out.stdout.strip() if out.returncode == 0 else None

    dirty = git("status", "--porcelain", "--", "modeling_cove/vectors.py", "scripts/benchmark_vectors.py")
    return {"commit": git("rev-parse", "HEAD"), "vectors_code_modified_since_commit": bool(dirty)}


def prepare_files(source: Path, folder: Path, max_lines) -> tuple:
    """A decompressed copy (and, with max_lines, a truncated xz copy). Returns (xz path, txt path, lines, s)."""
    txt = folder / "vectors.txt"
    start = time.perf_counter()
    lines = 0
    with lzma.open(source, "rb") as src, open(txt, "wb") as dst:
        for line in src:
            dst.write(line)
            lines += 1
            if max_lines is not None and lines >= max_lines:
                break
    seconds = time.perf_counter() - start
    xz = source
    if max_lines is not None:
        xz = folder / "vectors.txt.xz"
        with open(txt, "rb") as src, lzma.open(xz, "wb", preset=6) as dst:
            shutil.copyfileobj(src, dst)
    return xz, txt, lines, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke run: first 3,000 lines, 1 repeat")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the shared data folder")
    parser.add_argument("--vectors", type=Path, default=None, help="GloVe-format .xz (default: the stand-in)")
    parser.add_argument("--every", type=int, default=10, help="restricted vocabulary = every k-th word of the file")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats (best is reported; default 3)")
    parser.add_argument("--tmp-dir", type=Path, default=None, help="where the decompressed copy goes (/tmp)")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "vectors_loading.json")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(run_worker(json.loads(args.worker))))
        return

    source = args.vectors or args.data_dir / "vectors" / "w2v-lower-300d.txt.xz"
    if not source.exists():
        sys.exit(f"error: vectors file not found: {source} (pass --data-dir or --vectors)")
    if source.suffix != ".xz":
        sys.exit("error: --vectors must be an .xz file (the benchmark compares xz with its decompressed copy)")
    max_lines = 3000 if args.quick else None
    repeats = args.repeats or (1 if args.quick else 3)
    folder = Path(tempfile.mkdtemp(prefix="cove_vectors_bench_", dir=args.tmp_dir))
    try:
        print(f"decompressing {source} -> {folder}", flush=True)
        xz, txt, lines, decompress_seconds = prepare_files(source, folder, max_lines)
        with open(txt, encoding="utf-8") as f:
            file_words = [line.split(" ", 1)[0] for line in f]
        vocab = file_words[args.every - 1 :: args.every]
        vocab_file = folder / "vocab.txt"
        vocab_file.write_text("\n".join(vocab), encoding="utf-8")
        one_word_file = folder / "one_word.txt"  # fixed cost: decompressor, read buffers, one parse chunk
        one_word_file.write_text(file_words[-1], encoding="utf-8")
        vocab_names = {None: "full", vocab_file: f"every {args.every}th word ({len(vocab)} words)",
                       one_word_file: "one word (fixed overhead)"}

        runs = []
        configs = [
            ("ours", "xz", xz, None),
            ("ours", "xz", xz, vocab_file),
            ("ours", "xz", xz, one_word_file),
            ("ours", "txt", txt, None),
            ("ours", "txt", txt, vocab_file),
            ("ours", "txt", txt, one_word_file),
            ("naive", "txt", txt, None),
            ("naive", "txt", txt, vocab_file),
        ]
        for loader, kind, path, vocab_path in configs:
            spec = dict(loader=loader, path=str(path), vocab_file=str(vocab_path) if vocab_path else None,
                        repeats=repeats, tracemalloc=False)
            timed = measure(spec)
            traced = measure({**spec, "tracemalloc": True, "repeats": 1})
            best = min(timed["seconds"])
            run = {
                "loader": loader,
                "file": kind,
                "file_bytes": path.stat().st_size,
                "vocabulary": vocab_names[vocab_path],
                "file_lines": lines,
                "rows_kept": timed["rows"],
                "dim": timed["dim"],
                "seconds_best": round(best, 4),
                "seconds_all": [round(t, 4) for t in timed["seconds"]],
                "lines_per_second": round(lines / best),
                "matrix_bytes": timed["matrix_bytes"],
                "tracemalloc_peak_bytes": traced["tracemalloc_peak_bytes"],
                "tracemalloc_peak_over_matrix": round(traced["tracemalloc_peak_bytes"] / timed["matrix_bytes"], 3),
                "peak_rss_increase_bytes": timed["peak_rss_increase_bytes"],
                "rss_before_bytes": timed["rss_before_bytes"],
            }
            runs.append(run)
            print(
                f"{loader:5s} {kind:3s} {run['vocabulary']:>30s}: {run['lines_per_second']:>8,d} lines/s, "
                f"rows {run['rows_kept']:>6d}, tracemalloc peak {run['tracemalloc_peak_bytes'] / 2**20:8.1f} MiB "
                f"({run['tracemalloc_peak_over_matrix']:.2f}x matrix), "
                f"peak RSS +{run['peak_rss_increase_bytes'] / 2**20:7.1f} MiB",
                flush=True,
            )

        def pick(loader, kind, vocab_path):
            return next(r for r in runs if r["loader"] == loader and r["file"] == kind
                        and r["vocabulary"] == vocab_names[vocab_path])

        summary = {}
        for kind in ("xz", "txt"):
            full, small, fixed = (pick("ours", kind, v) for v in (None, vocab_file, one_word_file))
            base = fixed["tracemalloc_peak_bytes"]
            summary[f"ours_{kind}"] = {
                "file_lines_over_vocabulary": round(lines / len(vocab), 2),
                "fixed_overhead_tracemalloc_bytes": base,
                "full_over_restricted_tracemalloc_peak_minus_fixed": round(
                    (full["tracemalloc_peak_bytes"] - base) / max(small["tracemalloc_peak_bytes"] - base, 1), 2),
                "full_peak_minus_fixed_over_matrix": round(
                    (full["tracemalloc_peak_bytes"] - base) / full["matrix_bytes"], 3),
                "restricted_peak_minus_fixed_over_matrix": round(
                    (small["tracemalloc_peak_bytes"] - base) / small["matrix_bytes"], 3),
                "full_over_restricted_rss_increase": round(
                    full["peak_rss_increase_bytes"] / max(small["peak_rss_increase_bytes"], 1), 2),
            }
        for vocab_path in (None, vocab_file):
            ours, naive = pick("ours", "txt", vocab_path), pick("naive", "txt", vocab_path)
            summary[f"txt_{'full' if vocab_path is None else 'restricted'}_ours_vs_naive"] = {
                "speedup": round(naive["seconds_best"] / ours["seconds_best"], 2),
                "tracemalloc_peak_naive_over_ours": round(
                    naive["tracemalloc_peak_bytes"] / ours["tracemalloc_peak_bytes"], 2),
            }
        report = {
            "benchmark": "vectors_loading",
            "command": " ".join([Path(sys.executable).name, *sys.argv]),
            "mode": "quick (first 3,000 lines; not the reference figures)" if args.quick else "full",
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            **git_commit(),
            "machine": machine_info(),
            "source": str(source),
            "source_lines": lines,
            "decompress_to_tmp_seconds": round(decompress_seconds, 3),
            "settings": {
                "repeats": repeats,
                "restricted_vocabulary": f"every {args.every}th word of the file ({len(vocab)} words)",
                "fixed_overhead_vocabulary": "the file's last word (the whole file is still scanned)",
                "stop_when_complete": False,
                "notes": "each measurement in a fresh process loading only modeling_cove/vectors.py; timed runs "
                         "without tracemalloc; peak RSS increase = ru_maxrss - RSS before reading (includes "
                         "allocator and page-cache-independent process memory); naive = every line split into a "
                         "dict of numpy arrays, then filtered",
            },
            "runs": runs,
            "summary": summary,
        }
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        print(json.dumps(summary, indent=2))
        print(f"wrote {args.output}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
