"""Atomic writes: the one way this library puts a file or a folder under its final name. A reader never sees half
of it, and a run killed midway keeps the previous version (or nothing) under that name, never a partial one that
looks complete."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

__all__ = ["atomic_text_file", "commit_tmp", "fresh_tmp", "write_json", "write_text"]


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
def atomic_text_file(path: Path | str):
    """A text file (UTF-8, "\\n" line ends) to write `path` through: `<path>.tmp`, renamed to `path` once the block
    ends without an error (after an error the temporary file is removed and `path` left as it was)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            yield f
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def write_text(path: Path | str, text: str) -> Path:
    """Write `text` to `path` atomically."""
    with atomic_text_file(path) as f:
        f.write(text)
    return Path(path)


def write_json(path: Path | str, payload) -> Path:
    """`payload` as indented JSON (non-ASCII kept, other objects as their `str`), written atomically."""
    return write_text(path, json.dumps(payload, indent=2, ensure_ascii=False, default=str) + "\n")
