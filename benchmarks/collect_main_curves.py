#!/usr/bin/env python
"""The main job's full learning curves (`cove-main --full-curves`, docs/demo.md) as a record: reads the run folder as
far as it got (a run that is going on, or one stopped and to be continued by its own command) and writes
benchmarks/results/main_curves.json (the command, the commit, the machine, the curves' table per size and line with
the paired differences, which seeds are complete) and main_curves.png beside it.

    cove-main --full-curves --run-dir runs/main-full          # about 4 hours on 2 CPU cores; rerun to continue
    python benchmarks/collect_main_curves.py --run-dir runs/main-full
"""

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import instruments  # noqa: F401  (the package first, as every benchmark: docs/benchmarks.md)
from modeling_cove.training.commands.main_job.curves import collect_curve_runs
from modeling_cove.training.common.cli import option, parse_options
from modeling_cove.training.common.files import write_json
from modeling_cove.training.common.run_info import command_line, git_commit

REPO = Path(__file__).resolve().parents[1]


@dataclass
class CurvesArguments:
    """The flags of collect_main_curves.py."""

    run_dir: str = option("the run folder of `cove-main --full-curves`", "runs/main-full")
    output: str = option("the record's path", str(REPO / "benchmarks" / "results" / "main_curves.json"))


def main(argv=None):
    args = parse_options(CurvesArguments, argv, description=__doc__)
    run_dir = Path(args.run_dir)
    info = collect_curve_runs(run_dir)
    run = json.loads((run_dir / "run.json").read_text())
    report = json.loads((run_dir / "report.json").read_text()) if (run_dir / "report.json").exists() else {}
    output = Path(args.output)
    shutil.copyfile(info["curve"], output.with_suffix(".png"))
    record = {"command": command_line(), "commit": git_commit(),
              "machine": report.get("machine") or {"note": "the run folder has no report.json yet"},
              "run_command": run["command"], "run_commit": report.get("git"),
              "run_cpu_models": sorted({r["cpu_model"] for r in info["runs"]}, key=str),
              **{k: v for k, v in info.items() if k not in ("runs", "curve")},
              "runs": [{k: v for k, v in r.items() if k != "run"} for r in info["runs"]],
              "curve": output.with_suffix(".png").name}  # beside this file
    write_json(output, record)
    print(f"{info['runs_finished']} runs finished, complete seeds {info['complete_seeds']} -> {output}")


if __name__ == "__main__":
    main()
