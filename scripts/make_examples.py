#!/usr/bin/env python
"""Writes (or with --check compares) the embedded example data in `examples/`: runs the repository's generator,
`examples/generator/make_examples.py`, which stays beside the data and out of the installed package (its --help and
examples/README.md say more)."""

import runpy
from pathlib import Path

if __name__ == "__main__":
    runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "generator" / "make_examples.py"),
                   run_name="__main__")
