#!/usr/bin/env python
"""The heads' CPU speed before and after a change: `benchmark_heads.py` run on an earlier commit's package and on this
checkout's, in alternating processes (old, new, old, new, ...), each process timing ours against the plain-PyTorch
roofline of the same layers. Writes benchmarks/results/heads_old_new.json: per section and column (pipeline, sorted,
train) the median over rounds of ours' tokens/s and of ours/roofline, old and new, and new/old; what a section times on
our side alone (the tagger's CVT step pairs), its tokens/s the same way, without a ratio.

    python benchmarks/compare_heads_old_new.py --old-commit 9f6ddba --data-dir DATA --rounds 3

The earlier commit is checked out into a temporary git worktree; both sides run this checkout's benchmark_heads.py
(the same instrument), with PYTHONPATH naming the side's package. Run it on an idle machine: the two sides share it
in turn, and what is compared is each process's own ratio to the roofline and, next to it, the medians of
tokens/s.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import instruments  # noqa: F401  (the package first, as every benchmark: docs/benchmarks.md)
from instruments.common import DEFAULT_DATA_DIR, report_header
from modeling_cove.training.common.cli import REQUIRED, option, parse_options
from modeling_cove.training.common.files import write_json

REPO = Path(__file__).resolve().parents[1]
COLUMNS = ("pipeline", "sorted", "train")


@dataclass
class CompareArguments:
    """The flags of compare_heads_old_new.py."""

    old_commit: str = option("the commit to compare with (any git revision)", REQUIRED)
    data_dir: str = option("local data folder laid out as docs/data.md describes (default: $COVE_DATA_DIR)",
                           DEFAULT_DATA_DIR)
    sections: str = option("benchmark_heads' sections, comma-separated", "bcn_single,bcn_pair,dcn,tagger")
    threads: int = option("torch intra-op threads of every process", 1)
    texts: int = option("benchmark_heads --texts", 256)
    rounds: int = option("processes per side, alternating", 3)
    output: str = option("the record's path", str(REPO / "benchmarks" / "results" / "heads_old_new.json"))


def side_figures(report: dict, threads: int) -> dict:
    """{section: {column: (ours tokens/s, ours / roofline)}} of one benchmark_heads report; what a section times on
    our side alone (the tagger's CVT step pairs) as (tokens/s, None)."""
    figures = {}
    for section, result in report["results"].items():
        timed = result[f"threads_{threads}"]
        figures[section] = {column: (timed[column]["auto"]["tokens_per_s"], timed[column]["ratio_auto_to_roofline"])
                            for column in COLUMNS if column in timed}
        figures[section].update({name: (value["tokens_per_s"], None) for name, value in timed.items()
                                 if name not in COLUMNS and isinstance(value, dict) and "tokens_per_s" in value})
    return figures


def summarize(rounds: dict) -> dict:
    """Per section and column: the medians over rounds, old and new, and new / old."""
    summary = {}
    for section in rounds["new"][0]["figures"]:
        summary[section] = {}
        for column in rounds["new"][0]["figures"][section]:
            row = {}
            for side in ("old", "new"):
                speeds = [r["figures"][section][column][0] for r in rounds[side]]
                ratios = [r["figures"][section][column][1] for r in rounds[side]]
                row[f"{side}_tokens_per_s_median"] = round(statistics.median(speeds), 1)
                if None not in ratios:  # timed against the roofline
                    row[f"{side}_ratio_to_roofline_median"] = round(statistics.median(ratios), 3)
            row["new_over_old"] = round(row["new_tokens_per_s_median"] / row["old_tokens_per_s_median"], 3)
            summary[section][column] = row
    return summary


# the package's subpackages that the wheel maps from top-level folders (pyproject's package-dir); an editable install
# serves them from the checkout it was made from, whatever PYTHONPATH says
MAPPED = {"configuration": "configuration", "examples": "examples"}
WHERE = "import modeling_cove, modeling_cove.configuration as c; print(modeling_cove.__file__); print(*c.__path__)"


def side_env(root: Path) -> dict:
    """The environment of a process that imports the package from `root`, checked: the package and its presets
    both from there (else the comparison would time one side's code with the other side's settings)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO / "benchmarks")])}
    found = subprocess.run([sys.executable, "-c", WHERE], env=env, cwd=root, capture_output=True, text=True,
                           check=True).stdout.split()
    if not all(Path(path).resolve().is_relative_to(root.resolve()) for path in found):
        sys.exit(f"error: the package for {root} imports from {found}: install this checkout (pip install -e .)")
    return env


def run_side(root: Path, env: dict, args: CompareArguments, output: Path, commit: str) -> dict:
    """One benchmark_heads process over the package in `root`; its report, checked to come from `commit`."""
    command = [sys.executable, str(REPO / "benchmarks" / "benchmark_heads.py"), "--data-dir",
               str(Path(args.data_dir).resolve()),
               "--sections", args.sections, "--threads", str(args.threads), "--repeats", "1", "--texts",
               str(args.texts), "--output", str(output)]
    subprocess.run(command, check=True, env=env, cwd=root)
    report = json.loads(output.read_text())
    if not report["commit"].startswith(commit):
        sys.exit(f"error: the run over {root} reports commit {report['commit']}, not {commit}")
    return report


def main(argv=None):
    args = parse_options(CompareArguments, argv, description=__doc__)
    if not args.data_dir:
        sys.exit("error: give --data-dir (or set COVE_DATA_DIR)")
    def rev_parse(revision: str) -> str:
        return subprocess.run(["git", "rev-parse", revision], cwd=REPO, check=True, capture_output=True,
                              text=True).stdout.strip()

    old, new = rev_parse(args.old_commit), rev_parse("HEAD")
    header = report_header(argv)
    with tempfile.TemporaryDirectory(prefix="heads-old-") as scratch:
        worktree = Path(scratch) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(worktree), old], cwd=REPO, check=True,
                       capture_output=True)
        try:
            for name, folder in MAPPED.items():  # the old side's presets and examples, as its wheel would map them
                (worktree / "modeling_cove" / name).symlink_to(worktree / folder, target_is_directory=True)
            sides = (("old", worktree, old), ("new", REPO, new))
            envs = {side: side_env(root) for side, root, _ in sides}
            rounds = {"old": [], "new": []}
            for index in range(args.rounds):
                for side, root, commit in sides:
                    print(f"round {index + 1}/{args.rounds}: {side}", flush=True)
                    report = run_side(root, envs[side], args, Path(scratch) / f"{side}-{index}.json", commit)
                    rounds[side].append({"commit": report["commit"], "date": report["date"],
                                         "figures": side_figures(report, args.threads)})
        finally:  # never hide what stopped the rounds; a worktree left by a killed run goes with `git worktree prune`
            subprocess.run(["git", "worktree", "remove", "--force", str(worktree)], cwd=REPO)
            subprocess.run(["git", "worktree", "prune"], cwd=REPO)
    record = {**header, "old_commit": old, "settings": {k: v for k, v in vars(args).items() if k != "output"},
              "what": "benchmark_heads.py on the old commit's package and on this checkout's, in alternating "
                      "processes; medians over rounds; ratio = roofline time / ours in the same process",
              "summary": summarize(rounds), "rounds": rounds}
    write_json(args.output, record)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
