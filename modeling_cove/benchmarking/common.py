"""What every benchmark shares: timing (best of N, rounds interleaved, synchronised on a GPU), the command-line
options of the encoder and training benchmarks, and the report header (command, commit, machine) from
`modeling_cove.training.run_info`."""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path
from typing import Callable, Optional

import torch

from ..training.run_info import REPO, command_line, git_commit, machine_info, write_json

RESULTS_DIR = REPO / "benchmarks" / "results"
DEFAULT_DATA_DIR = REPO.parent / "shared" / "data"


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


def benchmark_arguments(description: str, output_name: str, batch_size: bool = True) -> argparse.ArgumentParser:
    """The options the encoder and training benchmarks share (`--batch-size` for the encoder ones); results go to
    benchmarks/results/<output_name> (<name>_cuda.json on a GPU) unless --output says otherwise."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    p.add_argument("--quick", action="store_true", help="smoke run: fewer texts, steps and repeats")
    p.add_argument("--threads", type=int, default=2)
    if batch_size:
        p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU; results go to <name>_cuda.json)")
    p.add_argument("--output", default=None, help=f"default benchmarks/results/{output_name}")
    p.set_defaults(default_output=output_name)
    return p


def parse_benchmark_args(parser: argparse.ArgumentParser, argv: Optional[list] = None,
                         output_name: Optional[Callable[[argparse.Namespace], str]] = None) -> argparse.Namespace:
    """Parse, check `--device` (a parser error naming it when it is neither cpu nor cuda, or when CUDA is asked for
    and absent) and settle `--output`: `output_name(args)` (default: the parser's) under benchmarks/results/, with
    a `_cuda` suffix on a GPU."""
    args = parser.parse_args(argv)
    try:
        device = torch.device(args.device)
    except RuntimeError as error:
        parser.error(f"--device {args.device!r}: {error}")
    if device.type not in ("cpu", "cuda"):
        parser.error(f"--device {args.device!r}: only cpu and cuda are supported")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no GPU (torch.cuda.is_available() is False)")
    if args.output is None:
        name = output_name(args) if output_name is not None else args.default_output
        args.output = str(RESULTS_DIR / (name.replace(".json", "_cuda.json") if device.type == "cuda" else name))
    return args


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
