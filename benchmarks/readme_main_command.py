#!/usr/bin/env python
"""The README's first command (install + the main job on the embedded default) as a user runs it: in a fresh clone of
this checkout's HEAD, timed from start to end, on this machine. Writes benchmarks/results/main_embedded.json: the
main job's report (every stage's figures) with the command, the commit, the machine and the wall time of the whole
command (install included; the README promises under 10 minutes on 2 cores).

    python benchmarks/readme_main_command.py                 # ~6-8 min on 2 cores (pip reads its cache)

The command is read from README.md (the line after "<!-- main-command -->"), as .ci/run reads the test command, so
the two cannot diverge.
"""

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import instruments  # noqa: F401  (the package first, as every benchmark: docs/benchmarks.md)
from modeling_cove.training.common.cli import option, parse_options
from modeling_cove.training.common.files import write_json
from modeling_cove.training.common.run_info import git_commit, machine_info

REPO = Path(__file__).resolve().parents[1]


@dataclass
class ReadmeArguments:
    """The flags of readme_main_command.py."""

    output: str = option("the record's path", str(REPO / "benchmarks" / "results" / "main_embedded.json"))


def readme_command(readme: Path, marker: str = "<!-- main-command -->") -> str:
    """The first line of the ```bash block after `marker` in the README."""
    match = re.search(re.escape(marker) + r"\s*```bash\n(.+?)\n", readme.read_text(encoding="utf-8"))
    if match is None:
        raise SystemExit(f"{readme}: no ```bash block after {marker}")
    return match.group(1).strip()


def main(argv=None):
    args = parse_options(ReadmeArguments, argv, description=__doc__)
    command = readme_command(REPO / "README.md")
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
        start = time.perf_counter()
        done = subprocess.run(["bash", "-c", command], cwd=clone, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            sys.exit(f"the README's command failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        report = json.loads((clone / "runs" / "main" / "report.json").read_text())
    record = {"command": command, "commit": git_commit(), "machine": machine_info(),
              "readme_command_wall_seconds": round(seconds, 1), "where": "a fresh clone of the commit, from nothing",
              "report": report}
    print(f"the README's first command: {seconds:.1f} s (the main job's own stages: "
          f"{report.get('wall_seconds_this_invocation', '?')} s)")
    write_json(args.output, record)


if __name__ == "__main__":
    main()
