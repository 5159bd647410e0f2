"""What every benchmark shares: timing (best of N, rounds interleaved, synchronised on a GPU), the options dataclasses
of the speed benchmarks' command lines, and the report header (command, commit, machine) from
`modeling_cove.training.common.run_info`."""

from __future__ import annotations

import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Optional

import torch

from modeling_cove.training.common.cli import option
from modeling_cove.training.common.run_info import command_line, git_commit, machine_info
from modeling_cove.training.common.files import write_json

RESULTS_DIR = Path("benchmarks") / "results"  # the repository's results, relative to where the benchmark runs
DATA_DIR_ENV = "COVE_DATA_DIR"
DEFAULT_DATA_DIR = os.environ.get(DATA_DIR_ENV)  # a local data folder (docs/data.md); None: --data-dir is required


def synchronize():
    """Wait for queued GPU work, so that a timing covers it (no-op without a GPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def best_time(fn, repeats: int) -> float:
    """The best wall time of `repeats` calls of `fn`, each synchronised before and after."""
    times = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved_best(fns: dict, repeats: int) -> dict:
    """Best time of each function over `repeats` rounds, each round running every function once in turn (so that
    a slow spell of the machine hits them all alike)."""
    timings = {key: float("inf") for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            timings[key] = min(timings[key], best_time(fn, 1))
    return timings


def count_cuda_syncs(fn) -> int:
    """How many times `fn` makes the host wait for the GPU (each synchronising CUDA call warns under
    `torch.cuda.set_sync_debug_mode("warn")`)."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def data_dir_or_default(data_dir: Optional[str]) -> str:
    """--data-dir as given, else $COVE_DATA_DIR; a ValueError (a usage error on the command line) without either."""
    if data_dir is None:
        data_dir = DEFAULT_DATA_DIR
    if data_dir is None:
        raise ValueError(f"--data-dir is required (or set ${DATA_DIR_ENV})")
    return data_dir


@dataclass
class BenchmarkArguments:
    """The options every speed benchmark shares (a benchmark's own options dataclass extends it). The report goes to
    benchmarks/results/<output_name()> (<name>_cuda.json on a GPU) unless --output says otherwise."""

    data_dir: Optional[str] = option(f"local data folder laid out as docs/data.md describes (default: ${DATA_DIR_ENV})")
    quick: bool = option("smoke run: fewer texts, steps and repeats", False)
    threads: int = option("torch intra-op threads", 2)
    repeats: Optional[int] = option("timed repeats, interleaved; the best is kept (default: 3, 1 with --quick)")
    device: str = option("cpu, or cuda (a GPU; results go to <name>_cuda.json)", "cpu")
    output: Optional[str] = option("the report's path (default: benchmarks/results/<name>.json)")

    output_file: ClassVar[str] = "benchmark.json"

    def output_name(self) -> str:
        """The report's file name under benchmarks/results/ (for the CPU)."""
        return self.output_file

    def __post_init__(self):
        """--data-dir else $COVE_DATA_DIR; --device a torch device torch can use (a usage error naming it otherwise);
        --output settled."""
        self.data_dir = data_dir_or_default(self.data_dir)
        try:
            device = torch.device(self.device)
        except RuntimeError as error:
            raise ValueError(f"--device {self.device!r}: {error}") from None
        if device.type not in ("cpu", "cuda"):
            raise ValueError(f"--device {self.device!r}: only cpu and cuda are supported")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError("--device cuda, but torch sees no GPU (torch.cuda.is_available() is False)")
        if self.output is None:
            name = self.output_name()
            self.output = str(RESULTS_DIR / (name.replace(".json", "_cuda.json") if device.type == "cuda" else name))


@dataclass
class EncoderBenchmarkArguments(BenchmarkArguments):
    """The encoder benchmarks' options: the shared ones and the batch size."""

    batch_size: int = option("texts per batch", 64)


def report_header(argv: Optional[list] = None) -> dict:
    """The first keys of every benchmark report: the command (`argv` without the program; default the process's),
    the commit, the machine and the date."""
    return {
        "command": command_line(None if argv is None else [sys.argv[0], *argv]),
        "commit": git_commit(),
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def write_report(output, argv: Optional[list], quick: bool, settings: dict, results: dict) -> Path:
    """Write a benchmark's JSON (atomically): command, commit, machine, date, `quick`, `settings`, then the figures."""
    path = write_json(output, {**report_header(argv), "quick": quick, **settings, "results": results})
    print(f"wrote {path}")
    return path
