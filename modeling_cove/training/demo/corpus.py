"""The corpus of the demo's words-in-context tab: a text file the user names, or by default the main job's texts.

The main job's texts are the English texts its vocabulary is built from, as its preset names them (`vocab.texts`:
folders of train/validation/test TSV files and the column to read): the preset recorded in the run folder's
`run.json`, else the shipped `embedded` preset (what `cove-main` runs). Named datasets of a preset (`vocab.tasks`,
read from a data folder or the Hub) are left out: the default corpus is only what ships with the package or lies in
files the preset names.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..common.presets import load_preset, preset_path
from ..data.texts import read_split_texts, read_texts

__all__ = ["main_job_corpus", "read_corpus"]


def read_corpus(path: Path, column: Optional[str] = None) -> tuple:
    """`(texts, name)` of a corpus file: its lines, or one column of a TSV file with a header (`read_texts`)."""
    texts = read_texts(path, column)
    return texts, f"{path}" + (f" (column {column})" if column else "")


def main_job_corpus(run_dir: Path) -> tuple:
    """`(texts, name)`: the main job's texts (see the module docstring) for the run folder `run_dir`."""
    run_file = Path(run_dir) / "run.json"
    if run_file.exists():
        settings = json.loads(run_file.read_text(encoding="utf-8"))["settings"]
        preset, spec, where = settings["preset_file"], settings["preset_content"]["vocab"], f"run {run_dir}"
    else:
        loaded = load_preset("embedded", "main")
        preset, spec, where = loaded["path"], loaded["vocab"], "preset embedded"
    texts, sources = [], []
    for folder, column in spec.get("texts") or []:
        texts += read_split_texts(preset_path(preset, folder), column)
        sources.append(f"{folder} ({column})")
    return texts, f"the main job's texts ({where}: " + ", ".join(sources or ["none"]) + ")"
