"""Named presets: `configuration/<kind>/<name>.{yaml,json}` or a file path, with their keys checked up front, and the
one way a command resolves its settings from them (`resolve_settings`: defaults < preset < command-line flags).

The repository's `configuration/` and the embedded example data (`examples/<name>/*.tsv`) ship inside the package
(`modeling_cove.configuration`, `modeling_cove.examples`; pyproject.toml maps them) and are found by name with
`importlib.resources`, so a preset loads the same from a source checkout and from an installed wheel. A path written
inside a shipped preset (`examples/en_de`, `configuration/models/cove-small.json`) names that shipped data; a path in
a preset file of the user's own, like every path given on a command line, is relative to the current directory.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path, PurePath

__all__ = ["check_preset_keys", "CONFIGURATION", "is_shipped", "load_preset", "load_settings", "preset_file",
           "preset_path", "PresetError", "resolve_settings", "shipped_path"]

# a top-level folder of the source tree -> the package that ships it
SHIPPED_FOLDERS = {"configuration": "modeling_cove.configuration", "examples": "modeling_cove.examples"}
SUFFIXES = (".yaml", ".yml", ".json")


class PresetError(ValueError):
    """A preset that does not exist or has keys the reader does not know; the message names the file and the key."""


def _shipped_root(folder: str):
    """The package that ships the source tree's top-level `folder`. A `modeling_cove` imported from a source tree
    that is not installed (a `python -m` run inside a checkout, which puts the current folder first on sys.path, or
    PYTHONPATH=<checkout>) has no mapped subpackage: its own tree's folder beside it is the same data."""
    try:
        return resources.files(SHIPPED_FOLDERS[folder])
    except ModuleNotFoundError:
        beside = Path(__file__).resolve().parents[3] / folder
        if (beside / "__init__.py").is_file():
            return beside
        raise


def shipped_path(relative) -> Path:
    """A file or folder shipped with the package, named as in the source tree: `configuration/models/cove-small.json`,
    `examples/en_de`. Raises ValueError for a path outside the shipped folders."""
    parts = PurePath(relative).parts
    if not parts or parts[0] not in SHIPPED_FOLDERS or PurePath(relative).is_absolute() or ".." in parts:
        shipped = ", ".join(f"{folder}/..." for folder in SHIPPED_FOLDERS)
        raise ValueError(f"{relative}: not a shipped path; shipped are {shipped}")
    root = _shipped_root(parts[0])
    if not isinstance(root, Path):  # e.g. a zipped install: the stages hand these paths to other processes
        raise RuntimeError(f"{SHIPPED_FOLDERS[parts[0]]} is not installed as files on disk ({root})")
    return root.joinpath(*parts[1:])


CONFIGURATION = shipped_path("configuration")


def is_shipped(path) -> bool:
    """Whether `path` is one of the files shipped in `configuration/`."""
    return Path(path).resolve().is_relative_to(CONFIGURATION.resolve())


def preset_path(preset_file, value) -> Path:
    """A path written in the preset file `preset_file`: absolute as it is; relative, the shipped data it names when
    the preset is a shipped one, else relative to the current directory."""
    path = Path(value)
    if path.is_absolute():
        return path
    return shipped_path(path) if is_shipped(preset_file) else path.resolve()


def preset_file(name_or_path, kind: str) -> Path:
    """The file of preset `name_or_path` of `kind`: an existing .yaml/.yml/.json file; a relative path spelled as in
    the source tree (`configuration/<kind>/<file>`) that the current directory does not hold: the shipped file; else
    the name of a file of the shipped `configuration/<kind>/`. Raises PresetError naming the presets there."""
    path = Path(name_or_path)
    if path.suffix in SUFFIXES:
        if path.is_file():
            return path
        if not path.is_absolute() and path.parts[0] == "configuration" and shipped_path(path).is_file():
            return shipped_path(path)
    folder = CONFIGURATION / kind
    found = next((folder / f"{name_or_path}{suffix}" for suffix in SUFFIXES
                  if (folder / f"{name_or_path}{suffix}").is_file()), None)
    if found is None:
        known = sorted({p.stem for p in folder.glob("*.*") if p.suffix in SUFFIXES})
        raise PresetError(f"unknown {kind} preset {str(name_or_path)!r}; choose from {', '.join(known) or '(none)'}"
                          f" or give a .yaml/.json file")
    return found


def load_preset(name_or_path, kind: str, known_keys=None, required_keys=()) -> dict:
    """The preset `name_or_path` of `kind` (a folder of `configuration/`, e.g. "main" or "models") as a dict.

    A path to an existing .yaml/.yml/.json file is read as is; otherwise `name_or_path` names a file of the shipped
    `configuration/<kind>/` (`preset_file`). Unknown keys (when `known_keys` is given) and missing `required_keys`
    raise a PresetError naming the file. The result carries the file it came from under "path"."""
    path = preset_file(name_or_path, kind)
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
        check_preset_keys(preset, known_keys, path)
    missing = set(required_keys) - set(preset)
    if missing:
        raise PresetError(f"{path}: missing preset keys {sorted(missing)}")
    preset["path"] = str(path)
    return preset


def check_preset_keys(values: dict, known_keys, where) -> None:
    """PresetError naming `where` (a preset file, or a block of one) when `values` holds a key not in `known_keys`."""
    unknown = set(values) - set(known_keys) - {"path"}
    if unknown:
        raise PresetError(f"{where}: unknown preset keys {sorted(unknown)}; known: {sorted(known_keys)}")


def resolve_settings(defaults: dict, preset: dict | None = None, overrides: dict | None = None,
                     where: str = "preset") -> dict:
    """A command's settings, the one way every command resolves them: its `defaults` < the `preset`'s values (a key
    the defaults do not name is refused with a PresetError naming `where`) < `overrides`, the command line's flags
    (None: not given, the value below stays)."""
    preset = {k: v for k, v in (preset or {}).items() if k != "path"}
    check_preset_keys(preset, defaults, where)
    settings = {**defaults, **preset}
    settings.update({key: value for key, value in (overrides or {}).items() if value is not None})
    return settings


def load_settings(defaults: dict, name_or_path, kind: str, overrides: dict | None = None, extra_keys=(),
                  optional: bool = False) -> tuple:
    """`resolve_settings` over the preset `name_or_path` of `kind` (`load_preset`). `extra_keys`: keys a preset file
    may hold beside the settings (what it is for, a description), returned apart. `optional`: no preset of that
    name is no error (the defaults then stand) — a preset that exists but is malformed always is one.
    Returns (settings, the preset file or "defaults", the extra keys' values)."""
    try:
        path = preset_file(name_or_path, kind)
    except PresetError:
        if not optional:
            raise
        return resolve_settings(defaults, None, overrides), "defaults", {}
    values = load_preset(path, kind, known_keys=set(defaults) | set(extra_keys))
    source = values.pop("path")
    extra = {key: values.pop(key) for key in extra_keys if key in values}
    return resolve_settings(defaults, values, overrides, where=source), source, extra
