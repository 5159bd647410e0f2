"""The one argument system of the package's command lines: `transformers.HfArgumentParser` over options dataclasses.

A command line is an options dataclass, whose fields are its flags, and a `main(argv=None)` in the library module it
drives that calls `parse_options`. Each field is spelled `--field_name` and `--field-name`; its help is
`metadata["help"]`; a `Literal[...]` type (or `metadata["choices"]`) lists its values; a list field takes several
values; a bool field is a switch (`--x` sets it, and a field that defaults to True also gets `--no-x`). Checks that
span fields live in the dataclass's `__post_init__`: a `ValueError` raised there is a usage error, reported like
argparse's own (usage line, the message naming the flag, exit status 2) before any work starts.

Metadata keys of ours, beside those HfArgumentParser passes on to argparse:
- `"positional": True` — the field is a positional argument (e.g. the checkpoint folder of cove-push-to-hub);
- `"nargs"` — replaces HfArgumentParser's `"+"` for a list field (`"*"`: the flag alone gives an empty list);
- `"negation"` — a further flag that sets a True-by-default bool field to False (e.g. `--untie-softmax`);
- `"check"` — what a given value must be, one of `AT_LEAST_ONE`, `POSITIVE`, `A_RATE`, `A_PORT`, `A_FOLDER`,
  `A_FILE` (None, a flag not given, is not checked): any other value is a usage error naming the flag, before any
  work starts, never a failure deep inside torch, a traceback from a loader or a silently empty data split.
A repeatable flag whose values add up (`--text-file a --text-file b`) is a list field with `"action": "extend"`.

OpenMP's wait policy is set in the package's `__init__`, not here: OpenMP reads it once, when torch is first
imported, and a console entry point (or `python -m`) imports the package, and with it torch, before any code of a
command line runs (docs/commands.md, "OpenMP").
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Callable, NoReturn, Optional

from transformers import HfArgumentParser

__all__ = ["A_FILE", "A_FOLDER", "A_PORT", "A_RATE", "AT_LEAST_ONE", "build_parser", "check_values",
           "CoveArgumentParser", "fail", "NOT_NEGATIVE", "option", "parse_options", "POSITIVE", "REQUIRED",
           "run_training_command", "RunArguments"]

OUR_METADATA = ("positional", "nargs", "negation", "check")
REQUIRED = dataclasses.MISSING  # the default of a flag that must be given


@dataclasses.dataclass(frozen=True)
class Check:
    """A flag's `"check"`: the values it admits (`admits`) and how its error message says so (`text`)."""

    text: str
    admits: Callable[[float], bool]


AT_LEAST_ONE = Check("an integer >= 1", lambda value: value >= 1)  # counts, sizes, limits, threads
NOT_NEGATIVE = Check("an integer >= 0", lambda value: value >= 0)  # counts where 0 means off (patience)
POSITIVE = Check("> 0", lambda value: value > 0)  # rates of learning, epochs, minutes
A_RATE = Check("in [0, 1)", lambda value: 0 <= value < 1)  # dropout
A_PORT = Check("a port number in 1-65535", lambda value: 1 <= value <= 65535)
A_FOLDER = Check("an existing folder", lambda value: Path(value).is_dir())  # --data-dir
A_FILE = Check("an existing file", lambda value: Path(value).exists() and not Path(value).is_dir())  # or a pipe


def option(help_text: str, default=None, **metadata):
    """A dataclass field of an options class: its help, its default (`REQUIRED`: none, the flag must be given; a list
    default is copied per instance) and argparse extras."""
    if isinstance(default, list):
        items = list(default)
        return dataclasses.field(default_factory=lambda: list(items), metadata={"help": help_text, **metadata})
    return dataclasses.field(default=default, metadata={"help": help_text, **metadata})


class CoveArgumentParser(HfArgumentParser):
    """HfArgumentParser that keeps a command line's description as written and knows the metadata keys above."""

    def __init__(self, dataclass_types, description: str | None = None, **kwargs):
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(dataclass_types, description=description, **kwargs)

    @staticmethod
    def _parse_dataclass_field(parser, field: dataclasses.Field):
        ours = {key: field.metadata[key] for key in OUR_METADATA if key in field.metadata}
        if not ours:
            return HfArgumentParser._parse_dataclass_field(parser, field)
        passed_on = {key: value for key, value in field.metadata.items() if key not in OUR_METADATA}
        if ours.get("positional"):
            kwargs = dict(passed_on)
            if field.default is not dataclasses.MISSING:
                kwargs.update(nargs="?", default=field.default)
            parser.add_argument(field.name, type=_positional_type(field.type), **kwargs)
            return None
        HfArgumentParser._parse_dataclass_field(parser, _with_metadata(field, passed_on))
        action = next(a for a in reversed(parser._actions) if a.dest == field.name)
        if "nargs" in ours:
            action.nargs = ours["nargs"]
        if "negation" in ours:
            parser.add_argument(ours["negation"], dest=field.name, action="store_false", default=argparse.SUPPRESS,
                                help=f"sets {field.name} to false (as --no-{field.name.replace('_', '-')})")
        return None


def _with_metadata(field: dataclasses.Field, metadata: dict) -> dataclasses.Field:
    """A copy of `field` whose metadata is `metadata` (HfArgumentParser hands metadata to argparse as it is)."""
    copy = dataclasses.field(default=field.default, default_factory=field.default_factory, metadata=metadata)
    copy.name, copy.type = field.name, field.type
    return copy


def _positional_type(annotation):
    """The argparse type of a positional field: `Optional[X]` -> X."""
    args = getattr(annotation, "__args__", None)
    if args and type(None) in args:
        annotation = next(a for a in args if a is not type(None))
    return annotation


def build_parser(options_class, description: str | None = None) -> CoveArgumentParser:
    """The parser of an options dataclass (or a tuple of them): one flag per field."""
    classes = options_class if isinstance(options_class, tuple) else (options_class,)
    return CoveArgumentParser(classes, description=description)


def parse_options(options_class, argv=None, description: str | None = None):
    """Parse `argv` (default: the process's arguments) into an `options_class` instance, or a tuple of instances
    for a tuple of classes. An unknown flag, a bad value (one its `"check"` does not admit too), or a ValueError
    from a `__post_init__` check exits 2 with argparse's usage line and the message."""
    parser = build_parser(options_class, description)
    try:
        *parsed, unknown = parser.parse_args_into_dataclasses(args=argv, return_remaining_strings=True,
                                                              look_for_args_file=False)
    except ValueError as err:
        parser.error(str(err))
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    for options in parsed:
        try:
            check_values(options)
        except ValueError as err:
            parser.error(str(err))
    return tuple(parsed) if isinstance(options_class, tuple) else parsed[0]


def check_values(options) -> None:
    """A ValueError naming the flag and its value for every field of `options` whose `"check"` does not admit it
    (a list field: each item); None (not given) is not checked."""
    for field in dataclasses.fields(options):
        check = field.metadata.get("check")
        value = getattr(options, field.name)
        if check is None or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            if not check.admits(item):
                raise ValueError(f"--{field.name.replace('_', '-')} must be {check.text}, got {item!r}")


def fail(err, status: int = 2) -> NoReturn:
    """End a command line on a bad input found after parsing (a missing file, an existing output folder): one line
    `error: ...` on stderr, no traceback, exit status `status` (2: bad input, nothing done)."""
    print(f"error: {err}", file=sys.stderr)
    sys.exit(status)


@dataclasses.dataclass
class RunArguments:
    """How a training command on the pretraining scaffold runs (cove-train-bilm, cove-train-tagger), beside its
    settings: not part of what the run is, so a --resume may change them."""

    threads: Optional[int] = option("torch intra-op threads (default: torch's own)",
                                    aliases=["--num-threads", "--num_threads"], check=AT_LEAST_ONE)
    cpu: bool = option("stay on the CPU even with a GPU", False)


def run_training_command(settings_class, train: Callable, argv=None, description: str | None = None):
    """The `main` of a training command on the pretraining scaffold: `settings_class` and `RunArguments` from `argv`
    (default: the process's arguments), the thread count set, then `train(settings, argv=[program, *argv],
    cpu=...)`; a ValueError from the settings or the data ends in one line, exit status 2."""
    import torch

    settings, run = parse_options((settings_class, RunArguments), argv, description=description)
    if run.threads:
        torch.set_num_threads(run.threads)
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return train(settings, argv=[sys.argv[0], *argv], cpu=run.cpu)
    except ValueError as err:
        fail(err)
