"""The main job's stage runner: each stage in its own folder, finished ones skipped (`<stage>/.done.json`, written
last), unfinished ones redone cleanly (`<stage>.tmp`, renamed on success), and the stage subprocesses (the package's
own command lines, `python -m modeling_cove.training.commands.<command>`) run, watched and stopped together."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ...common.files import write_json

STAGES = ("vectors", "vocab", "pretrain", "classifier", "curves", "publish", "predict")
DONE = ".done.json"


def library_command(command: str) -> list:
    """The argv that runs one of the package's commands (a module of `training/commands/`: `train_mt`,
    `train_classifier`, `push_to_hub`) in a new interpreter."""
    return [sys.executable, "-m", f"modeling_cove.training.commands.{command}"]


class StageError(RuntimeError):
    """A stage failed (the command line prints it with the stage name and exits 1); rerunning continues the job."""


def banner(number: int, stage: str, text: str):
    line = f"[stage {number}/{len(STAGES)}] {stage}: {text}"
    print("\n" + "=" * len(line) + "\n" + line + "\n" + "=" * len(line), flush=True)


def read_done(folder: Path) -> dict | None:
    """The completion marker of a stage folder, or None when the stage has not finished."""
    marker = folder / DONE
    return json.loads(marker.read_text()) if marker.is_file() else None


def child_env(threads) -> dict:
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
        env["MKL_NUM_THREADS"] = str(threads)
    env["PYTHONUNBUFFERED"] = "1"
    # `python -m` puts the current folder first on sys.path: run from a source checkout, a stage would import the
    # checkout's `modeling_cove` instead of the one this process runs (Python >= 3.11 honours this; older ones fall
    # back to the source tree's own configuration/, presets.shipped_path)
    env["PYTHONSAFEPATH"] = "1"
    return env


def flags(options: dict) -> list:
    """{"max-epochs": 3, "no-bleu": True} -> ["--max-epochs", "3", "--no-bleu"]."""
    out = []
    for key, value in options.items():
        key = key.replace("_", "-")
        if value is True:
            out.append(f"--{key}")
        elif value is not False and value is not None:
            out += [f"--{key}", str(value)]
    return out


@dataclass
class Command:
    """One stage subprocess: its argv, a name for messages, its threads and where its output goes (None: the
    terminal)."""

    argv: list
    name: str
    threads: int | None = None
    log: Path | None = None
    on_success: Callable | None = None  # called when it exited 0 (e.g. renames its `.tmp` output folder)


def run_commands(commands: list, stage_dir: Path, slots: int = 1):
    """Run stage subprocesses, at most `slots` at once, in the current directory; raises StageError for the first that
    fails (the others are stopped). Their pids are kept in `<run-dir>/<stage>.running.json` while they run (outside
    the stage folder, which the stage may replace). Ctrl-C or SIGTERM of the job stops them too."""
    pending, running = list(commands), {}
    running_file = stage_dir.parent / f"{stage_dir.name}.running.json"
    try:
        while pending or running:
            while pending and len(running) < slots:
                command = pending.pop(0)
                running[_start(command)] = command
                _record_running(running_file, running)
            proc = _wait_any(running)
            command = running.pop(proc)
            _record_running(running_file, running)
            _finish(proc, command)
    except BaseException:
        for proc in running:
            proc.send_signal(signal.SIGTERM)
        for proc in running:
            proc.wait()
        raise
    finally:
        running_file.unlink(missing_ok=True)


def _record_running(path: Path, running: dict):
    write_json(path, [{"pid": proc.pid, "command": [str(arg) for arg in command.argv]}
                      for proc, command in running.items()])


def _start(command: Command) -> subprocess.Popen:
    argv = [str(c) for c in command.argv]
    print("$ " + " ".join(argv), flush=True)
    if command.log is None:
        return subprocess.Popen(argv, env=child_env(command.threads))
    print(f"  (runs beside another one; its output goes to {command.log})", flush=True)
    command.log.parent.mkdir(parents=True, exist_ok=True)
    with open(command.log, "w", encoding="utf-8") as log:
        return subprocess.Popen(argv, env=child_env(command.threads), stdout=log, stderr=subprocess.STDOUT)


def _wait_any(running: dict) -> subprocess.Popen:
    while True:
        for proc in running:
            if proc.poll() is not None:
                return proc
        time.sleep(0.2)


def _finish(proc: subprocess.Popen, command: Command):
    rc = proc.returncode
    if command.log is not None:
        text = command.log.read_text(encoding="utf-8", errors="replace")
        lines = [line.rsplit("\r", 1)[-1].strip() for line in text.split("\n")]  # progress bars: their last state
        tail = [line for line in lines if line and not re.search(r"\d%\|", line)][-(40 if rc else 3):]
        print(f"\n{command.name}: finished (exit code {rc}); last lines of {command.log}:\n  " + "\n  ".join(tail),
              flush=True)
    if rc != 0:
        how = f"killed by signal {-rc}" if rc < 0 else f"exit code {rc}"
        raise StageError(f"{command.name} failed ({how}); rerun the same command to continue")
    if command.on_success is not None:
        command.on_success()


class StageRunner:
    """Runs the stages in order: skips a finished one (its `.done.json`), times the others and keeps the report."""

    def __init__(self, run_dir: Path, report: dict):
        self.run_dir, self.report, self.results = run_dir, report, {}
        for stage in STAGES:  # keep finished stages' figures when the report is rebuilt after a rerun
            done = read_done(run_dir / stage)
            if done:
                report["stages"][stage] = {"status": "done", "seconds": done.get("seconds"),
                                           "metrics": done["metrics"]}

    def __call__(self, stage: str, description: str, fn):
        number, folder = STAGES.index(stage) + 1, self.run_dir / stage
        done = read_done(folder)
        if done:
            banner(number, stage, f"skipped (finished earlier; {folder / DONE})")
            self.results[stage] = done["metrics"]
            self.report["stages"][stage]["status"] = "skipped (finished earlier)"
            return
        banner(number, stage, description)
        start = time.time()
        metrics = fn(folder)
        seconds = round(time.time() - start, 1)
        write_json(folder / DONE, {"stage": stage, "seconds": seconds, "metrics": metrics})  # LAST: complete
        self.results[stage] = metrics
        self.report["stages"][stage] = {"status": "done", "seconds": seconds, "metrics": metrics}
        write_json(self.run_dir / "report.json", self.report)
        print(f"[stage {number}/{len(STAGES)}] {stage}: done in {seconds} s", flush=True)
