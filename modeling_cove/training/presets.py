"""Named presets: `configuration/<kind>/<name>.{yaml,json}` or a file path, with their keys checked up front."""

from __future__ import annotations

import json
from pathlib import Path

from .run_info import REPO

CONFIGURATION = REPO / "configuration"


class PresetError(ValueError):
    """A preset that does not exist or has keys the reader does not know; the message names the file and the key."""


def load_preset(name_or_path, kind: str, known_keys=None, required_keys=()) -> dict:
    """The preset `name_or_path` of `kind` (a folder of `configuration/`, e.g. "main" or "models") as a dict.

    A path to an existing .yaml/.yml/.json file is read as is; otherwise `name_or_path` names a file of
    `configuration/<kind>/`. Unknown keys (when `known_keys` is given) and missing `required_keys` raise a
    PresetError naming the file. The result carries the file it came from under "path"."""
    folder = CONFIGURATION / kind
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml", ".json") and path.is_file()):
        candidates = [folder / f"{name_or_path}{suffix}" for suffix in (".yaml", ".yml", ".json")]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            known = sorted({p.stem for p in folder.glob("*.*") if p.suffix in (".yaml", ".yml", ".json")})
            raise PresetError(f"unknown {kind} preset {str(name_or_path)!r}; choose from {', '.join(known) or '(none)'}"
                              f" or give a .yaml/.json file")
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        preset = json.loads(text)
    else:
        import yaml

        preset = yaml.safe_load(text)
    preset = preset or {}
    if not isinstance(preset, dict):
        raise PresetError(f"{path}: a preset is a mapping of keys, got {type(preset).__name__}")
    if known_keys is not None:
        unknown = set(preset) - set(known_keys) - {"path"}
        if unknown:
            raise PresetError(f"{path}: unknown preset keys {sorted(unknown)}; known: {sorted(known_keys)}")
    missing = set(required_keys) - set(preset)
    if missing:
        raise PresetError(f"{path}: missing preset keys {sorted(missing)}")
    preset["path"] = str(path)
    return preset
