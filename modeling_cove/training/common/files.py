"""Atomic writes: the one way this library puts a file or a folder under its final name. A reader never sees half
of it, and a run killed midway keeps the previous version (or nothing) under that name, never a partial one that
looks complete. And the check a resume makes of files it did not write that way, or that a lost machine may have left
short (`file_problem`)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import zipfile
from pathlib import Path

from ...hub import safetensors_file_problem

__all__ = ["atomic_path", "atomic_text_file", "commit_tmp", "file_problem", "folder_problem", "fresh_tmp", "write_json",
           "write_text"]


def fresh_tmp(folder: Path | str) -> Path:
    """`<folder>.tmp`, emptied and created: write there, then `commit_tmp` it to `folder`."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def commit_tmp(tmp: Path | str, folder: Path | str) -> Path:
    """Replace `folder` (whatever it held) by the finished `tmp` folder in one rename."""
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(tmp, folder)
    return Path(folder)


@contextlib.contextmanager
def atomic_path(path: Path | str):
    """The path `<path>.tmp` for a writer that takes a file name (e.g. safetensors' `save_file`), renamed to `path`
    once the block ends without an error (after an error the temporary file is removed and `path` left as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


@contextlib.contextmanager
def atomic_text_file(path: Path | str):
    """A text file (UTF-8, "\\n" line ends) to write `path` through (`atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        yield f


def write_text(path: Path | str, text: str) -> Path:
    """Write `text` to `path` atomically."""
    with atomic_text_file(path) as f:
        f.write(text)
    return Path(path)


def write_json(path: Path | str, payload) -> Path:
    """`payload` as indented JSON (non-ASCII kept, other objects as their `str`), written atomically."""
    return write_text(path, json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")


# torch.save writes a zip archive (whatever the suffix the caller chose); its directory, at the end, is written last
TORCH_SUFFIXES = (".bin", ".pkl", ".pt", ".pth")


def file_problem(path: Path | str) -> str | None:
    """Why the checkpoint file `path` is not all there, judged by its format's own structure, or None when it is: a
    JSON file parses, a safetensors file is exactly as long as its header says (`safetensors_file_problem`), a
    `torch.save` file (.bin/.pkl/.pt/.pth) ends with its zip directory, any other file is not empty. A run killed
    while a writer wrote in place, or a machine lost before the system wrote its pages out, can leave a file cut short
    or zero-filled throughout under its final name: reading it would fail deep inside torch, while a resume can pass
    over its checkpoint. Cheap: the headers and a JSON file are read, not the tensors (so data zeroed between an
    intact header and an intact end is not seen)."""
    path = Path(path)
    if not path.is_file():
        return "missing"
    if path.suffix == ".json":
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, ValueError):
            return "not valid JSON (cut short?)"
        return None
    if path.suffix == ".safetensors":
        problem = safetensors_file_problem(path)
        return None if problem is None else f"not a whole safetensors file ({problem})"
    if path.suffix in TORCH_SUFFIXES:
        return None if zipfile.is_zipfile(path) else "not a whole torch.save archive (no zip directory at its end)"
    return None if path.stat().st_size else "empty"


def folder_problem(folder: Path | str) -> str | None:
    """The first file of `folder` (by name) that is not whole, as "<name>: <its `file_problem`>"; None when none is."""
    for path in sorted(Path(folder).iterdir()):
        problem = file_problem(path) if path.is_file() else None
        if problem:
            return f"{path.name}: {problem}"
    return None
