"""Training runs of a result table as child processes, N at a time until they are done or a deadline passes.

A run is any object with `folder` (its folder under the runs folder, also its log's name: `<folder>.log`), `encoder`
(the checkpoint it reads; a run without one, no `config.json` there, is skipped and named) and
`command(data_dir, runs_dir, threads, resume)` (its command line). The caller says when a run is finished
(`finished(runs_dir, run)`: its outputs hold the planned results) and, for commands that can continue a run cut short,
when it can resume (`resumable(runs_dir, run)`); without `resumable` a run cut short starts afresh next time.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from modeling_cove.training.common.cli import option

OUTCOMES = ("done_before", "finished", "failed", "skipped", "stopped", "not_started")


@dataclass
class PoolArguments:
    """The flags of a table runner script that go to run_pool (parsed beside the script's own)."""

    parallel: int = option("runs at a time", 2)
    threads: int = option("torch intra-op threads per run", 1)
    deadline_minutes: Optional[float] = option("stop the runs still going after this many minutes")
    dry_run: bool = option("print the commands still to run, run nothing", False)


def read_json(path: Path) -> dict | None:
    """A run's JSON file (metrics.json, run_settings.json), None when it is not there or cannot be read yet."""
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except ValueError:  # being written right now, or cut off (JSONDecodeError; UnicodeDecodeError inside a character)
        return None


def stop(running: dict, outcome: dict, log, resumes: bool):
    """Terminate the `running` processes (folder -> (run, process)), killing those that do not end within a minute."""
    for name, (_, process) in running.items():
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        outcome["stopped"].append(name)
        log(f"stopped {name}; it {'resumes' if resumes else 'starts afresh'} next time")


def run_pool(runs: list, runs_dir: Path | str, data_dir: str, finished: Callable, resumable: Optional[Callable] = None,
             parallel: int = 2, threads: int = 1, deadline_minutes: float | None = None, dry_run: bool = False,
             log=None) -> dict:
    """Run the `runs` not `finished` yet, `parallel` at a time (each process on `threads` threads, its output in
    `<runs_dir>/<folder>.log`), until all are done or `deadline_minutes` pass (then the running ones are stopped).
    Returns the folders by outcome (OUTCOMES): "done_before" (finished already), "finished", "failed" (exit status not
    0, or not finished after it), "skipped" (no encoder), "stopped" (at the deadline), "not_started"; `dry_run` only
    logs the commands (shell-quoted)."""
    log = log or (lambda message: print(message, flush=True))
    if parallel < 1 or threads < 1:
        raise ValueError(f"parallel and threads must be at least 1, got {parallel} and {threads}")
    can_resume = resumable or (lambda runs_dir, run: False)
    outcome = {key: [] for key in OUTCOMES}
    queue = []
    for run in runs:
        if finished(runs_dir, run):
            outcome["done_before"].append(run.folder)
        elif not (Path(run.encoder) / "config.json").is_file():
            outcome["skipped"].append(run.folder)
            log(f"skip {run.folder}: no encoder checkpoint at {run.encoder}")
        else:
            queue.append(run)
    if dry_run:
        for run in queue:
            log(shlex.join(run.command(data_dir, runs_dir, threads, can_resume(runs_dir, run))))
        outcome["not_started"] = [run.folder for run in queue]
        return outcome
    deadline = None if deadline_minutes is None else time.monotonic() + 60 * deadline_minutes
    running = {}  # folder -> (run, process)
    handlers = stop_on_signals()
    try:
        while queue or running:
            for name, (run, process) in list(running.items()):  # first collect what has ended
                if process.poll() is not None:
                    del running[name]
                    ok = process.returncode == 0 and finished(runs_dir, run)
                    outcome["finished" if ok else "failed"].append(name)
                    log(f"{'end' if ok else 'FAILED'} {name} (exit {process.returncode})")
            if deadline is not None and time.monotonic() > deadline:
                break
            while queue and len(running) < parallel:
                run = queue.pop(0)
                folder = Path(runs_dir) / run.folder
                folder.parent.mkdir(parents=True, exist_ok=True)
                resume = can_resume(runs_dir, run)
                with open(f"{folder}.log", "a" if resume else "w") as log_file:  # the child keeps its own handle
                    process = subprocess.Popen(run.command(data_dir, runs_dir, threads, resume), stdout=log_file,
                                               stderr=subprocess.STDOUT)
                running[run.folder] = (run, process)
                log(f"{'resume' if resume else 'start'} {run.folder}")
            time.sleep(1)
    finally:  # the deadline, an error, an interrupt or a termination signal: no run outlives the pool
        stop(running, outcome, log, resumable is not None)
        outcome["not_started"] = [run.folder for run in queue]
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    return outcome


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def stop_on_signals() -> dict:
    """SIGTERM and SIGHUP (a `kill`, a closed terminal or session) raise SystemExit in the pool, so that its `finally`
    stops the runs it started (Python's default would exit at once and leave them running, writing into folders a
    later pool starts again); a signal ignored already (SIGHUP under `nohup`) stays ignored. Returns the handlers
    replaced. Only the main thread may set handlers: elsewhere none."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    return {signum: signal.signal(signum, _exit_on_signal) for signum in (signal.SIGTERM, signal.SIGHUP)
            if signal.getsignal(signum) is signal.SIG_DFL}


REPO = Path(__file__).resolve().parents[2]  # the repository, whose runs/ the collectors read by default


def folder_flag(flag: str, folder: Path | str, default: str) -> list:
    """The flag that points a collect command at `folder` (relative to the working folder), as an absolute path; none
    when it is the repository's `default` folder, the one the collector reads without it."""
    here = Path(folder).resolve()
    return [] if here == (REPO / default).resolve() else [flag, str(here)]


def report(outcome: dict, collect: str):
    """A runner script's last lines: how many runs each outcome has, the command that collects them (`collect`), and
    the failed runs, then exit status 1 when any failed."""
    print({key: len(folders) for key, folders in outcome.items()})
    print(f"then: {collect}")
    if outcome["failed"]:
        print("failed (see <folder>.log):", " ".join(outcome["failed"]))
        sys.exit(1)
