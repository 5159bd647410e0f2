"""Reading word vectors: lines/s and peak memory of `modeling_cove.vectors.read_word_vectors`, on xz and on a
decompressed copy, with the full vocabulary, a restricted one (every k-th word) and one word (the fixed cost), beside
the usual naive loader (every line split into a dict of numpy arrays, then filtered).

Every measurement runs in a fresh process that loads only `modeling_cove/vectors.py` (numpy + torch; importing the
package would load transformers and raise the memory baseline): this file run as a script is that worker, so it
imports nothing but the standard library at the top.
"""

from __future__ import annotations

import importlib.util
import json
import lzma
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

# the installed package's reader, loaded in the worker as a lone file (finding the package does not import it)
VECTORS_MODULE = Path(importlib.util.find_spec("modeling_cove").origin).parent / "vectors.py"


def _status_bytes(field: str) -> int:
    """A memory field of /proc/self/status ("VmRSS", "VmHWM": the peak RSS of this process image), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak_rss():
    """Start the peak (VmHWM) again from the current RSS, where the kernel allows it (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def naive_loader(path: str, vocab):
    """The loader found in many repositories: every line into a dict, then keep the vocabulary (None: all)."""
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
    """One measurement (in the worker process): `spec` names the loader ("ours" or "naive"), the file, the
    vocabulary file (or None), the repeats and whether to trace Python allocations instead of timing."""
    import numpy  # noqa: F401  (loaded before the RSS baseline)
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
            return naive_loader(spec["path"], vocab)
        return vectors.read_word_vectors(spec["path"], vocab=vocab, stop_when_complete=False)

    _reset_peak_rss()
    rss_before = _status_bytes("VmRSS")
    result = {}
    if spec["tracemalloc"]:
        tracemalloc.start()
        words, matrix = load()
        result["tracemalloc_peak_bytes"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
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
        # VmHWM, not getrusage's ru_maxrss: that one keeps the peak of the parent this worker was forked from
        result["peak_rss_increase_bytes"] = _status_bytes("VmHWM") - rss_before
    result.update(rows=len(words), dim=int(matrix.shape[1]), matrix_bytes=matrix.numel() * matrix.element_size())
    return result


def measure(spec: dict) -> dict:
    """`run_worker(spec)` in a fresh Python process."""
    completed = subprocess.run([sys.executable, str(Path(__file__).resolve()), json.dumps(spec)],
                               capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise RuntimeError(f"vectors benchmark worker failed for {spec}:\n{completed.stderr[-3000:]}")
    return json.loads(completed.stdout.strip().splitlines()[-1])


def prepare_files(source: Path, folder: Path, max_lines) -> tuple:
    """A decompressed copy of `source` in `folder` (and, with `max_lines`, a truncated xz copy).
    Returns (xz path, txt path, lines, seconds to decompress)."""
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


def timed_and_traced(loader: str, kind: str, path: Path, vocab_file, vocabulary: str, lines: int, repeats: int):
    """One row of the report: a timed worker (best of `repeats`, peak RSS) and a traced one (tracemalloc peak)."""
    spec = dict(loader=loader, path=str(path), vocab_file=str(vocab_file) if vocab_file else None,
                repeats=repeats, tracemalloc=False)
    timed = measure(spec)
    traced = measure({**spec, "tracemalloc": True, "repeats": 1})
    best = min(timed["seconds"])
    run = {
        "loader": loader, "file": kind, "file_bytes": path.stat().st_size, "vocabulary": vocabulary,
        "file_lines": lines, "rows_kept": timed["rows"], "dim": timed["dim"],
        "seconds_best": round(best, 4), "seconds_all": [round(t, 4) for t in timed["seconds"]],
        "lines_per_second": round(lines / best), "matrix_bytes": timed["matrix_bytes"],
        "tracemalloc_peak_bytes": traced["tracemalloc_peak_bytes"],
        "tracemalloc_peak_over_matrix": round(traced["tracemalloc_peak_bytes"] / timed["matrix_bytes"], 3),
        "peak_rss_increase_bytes": timed["peak_rss_increase_bytes"], "rss_before_bytes": timed["rss_before_bytes"],
    }
    print(f"{loader:5s} {kind:3s} {vocabulary:>30s}: {run['lines_per_second']:>8,d} lines/s, "
          f"rows {run['rows_kept']:>6d}, tracemalloc peak {run['tracemalloc_peak_bytes'] / 2**20:8.1f} MiB "
          f"({run['tracemalloc_peak_over_matrix']:.2f}x matrix), "
          f"peak RSS +{run['peak_rss_increase_bytes'] / 2**20:7.1f} MiB", flush=True)
    return run


def summarize(runs: list, lines: int, vocab_size: int, names: dict) -> dict:
    """Memory follows the vocabulary, not the file (ours, above the fixed cost), and ours against the naive loader."""
    def pick(loader, kind, name):
        return next(r for r in runs if r["loader"] == loader and r["file"] == kind and r["vocabulary"] == name)

    summary = {}
    for kind in ("xz", "txt"):
        full, small, fixed = (pick("ours", kind, names[key]) for key in ("full", "restricted", "one_word"))
        base = fixed["tracemalloc_peak_bytes"]
        summary[f"ours_{kind}"] = {
            "file_lines_over_vocabulary": round(lines / vocab_size, 2),
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
    for key in ("full", "restricted"):
        ours, naive = pick("ours", "txt", names[key]), pick("naive", "txt", names[key])
        summary[f"txt_{key}_ours_vs_naive"] = {
            "speedup": round(naive["seconds_best"] / ours["seconds_best"], 2),
            "tracemalloc_peak_naive_over_ours": round(
                naive["tracemalloc_peak_bytes"] / ours["tracemalloc_peak_bytes"], 2),
        }
    return summary


def vectors_loading_report(source: Path, max_lines=None, every: int = 10, repeats: int = 3, tmp_dir=None) -> dict:
    """Every run and the summary for the GloVe-format `source` (.xz), read whole or its first `max_lines` lines;
    the decompressed copy lives in a temporary folder under `tmp_dir` for the run."""
    folder = Path(tempfile.mkdtemp(prefix="cove_vectors_bench_", dir=tmp_dir))
    try:
        print(f"decompressing {source} -> {folder}", flush=True)
        xz, txt, lines, decompress_seconds = prepare_files(source, folder, max_lines)
        with open(txt, encoding="utf-8") as f:
            file_words = [line.split(" ", 1)[0] for line in f]
        vocab = file_words[every - 1 :: every]
        files = {"full": None, "restricted": folder / "vocab.txt", "one_word": folder / "one_word.txt"}
        files["restricted"].write_text("\n".join(vocab), encoding="utf-8")
        files["one_word"].write_text(file_words[-1], encoding="utf-8")  # fixed cost: decompressor, buffers, a chunk
        names = {"full": "full", "restricted": f"every {every}th word ({len(vocab)} words)",
                 "one_word": "one word (fixed overhead)"}
        configs = [("ours", "xz", xz, key) for key in files] + [("ours", "txt", txt, key) for key in files]
        configs += [("naive", "txt", txt, "full"), ("naive", "txt", txt, "restricted")]
        runs = [timed_and_traced(loader, kind, path, files[key], names[key], lines, repeats)
                for loader, kind, path, key in configs]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {"source": str(source), "source_lines": lines, "decompress_to_tmp_seconds": round(decompress_seconds, 3),
            "settings": {"repeats": repeats,
                         "restricted_vocabulary": f"every {every}th word of the file ({len(vocab)} words)",
                         "fixed_overhead_vocabulary": "the file's last word (the whole file is still scanned)",
                         "stop_when_complete": False,
                         "notes": "each measurement in a fresh process loading only modeling_cove/vectors.py; timed "
                                  "runs without tracemalloc; peak RSS increase = VmHWM - RSS before reading; "
                                  "naive = every line split into a dict of numpy arrays, then filtered"},
            "runs": runs, "summary": summarize(runs, lines, len(vocab), names)}


if __name__ == "__main__":  # the worker: one measurement, its JSON on the last line of stdout
    print(json.dumps(run_worker(json.loads(sys.argv[1]))))
