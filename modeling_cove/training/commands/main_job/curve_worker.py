"""The learning curves' worker (`python -m modeling_cove.training.commands.main_job.curve_worker SPEC.json`, started by
the main job's curves stage, `curves.py`): its share of the BCN runs, one after the other in one interpreter. Kept
apart from `curves.py`, which the job's package imports, so that `python -m` runs a module not yet imported."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ...common.files import commit_tmp, fresh_tmp
from .runner import flags


def run_worker(spec_file: str | Path):
    """Run the spec's BCN runs one after the other in this interpreter, each into `<out>.tmp`, renamed when it
    finished; a run whose `metrics.json` exists is skipped."""
    from ..train_classifier import ClassifierOptions, train_classifier

    spec = json.loads(Path(spec_file).read_text())
    for i, run in enumerate(spec["runs"], start=1):
        out = Path(run["out"])
        if (out / "metrics.json").exists():
            continue
        print(f"[curve run {i}/{len(spec['runs'])}] {run['column']}, {run['size']} sentences, seed {run['seed']}"
              + (f", encoder {run['encoder']}" if run["encoder"] else ""), flush=True)
        tmp = fresh_tmp(out)
        options = ClassifierOptions(**run["options"], output_dir=str(tmp), threads=spec.get("threads"),
                                    overwrite=True)
        train_classifier(options, command=f"cove-train-classifier {' '.join(flags(run['options']))}")
        commit_tmp(tmp, out)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if len(argv) != 1:
        print("usage: python -m modeling_cove.training.commands.main_job.curve_worker SPEC.json (written by cove-main's "
              "curves stage)", file=sys.stderr)
        sys.exit(2)
    run_worker(argv[0])


if __name__ == "__main__":
    main()
