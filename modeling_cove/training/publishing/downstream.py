"""The downstream results of an encoder: how heads trained over it compare with heads trained over other inputs,
paired by seed, as its card's "Downstream results" section (`cove-export-encoder --downstream FILE`).

An encoder's card is written when the encoder is exported, from its pretraining run alone; the downstream runs come
later. Their comparison is handed to the export as a JSON file, written by hand or by a script over one's own runs
(the repository's `benchmarks/card_downstream.py` writes it from its result tables). The file (schema version 1,
documented in `model_cards/README.md`, "Downstream results"; `ROW_SCHEMA` is its executable definition):

    {"schema_version": 1,
     "source": "where the numbers come from (optional)",
     "rows": [{"task": "trec6", "model": "BCN", "metric": "test accuracy (%)",
               "column": {"name": "vectors+cove-t", "mean": 91.2, "std": 0.8, "seeds": [1, 2, 3]},
               "compared": {"name": "vectors", "mean": 90.1, "std": 0.6, "seeds": [1, 2, 3]},
               "difference": {"mean": 1.1, "low": 0.2, "high": 2.0, "n": 3}}]}

`column` is this encoder's column, `compared` the column it is compared with, `difference` the mean over the paired
seeds of column minus compared with its 95% t interval (`low`, `high`; null on one seed, where there is none).
"""

from pathlib import Path
from typing import Union

from .cards_record import (NUMBER, OBJECT, OPTIONAL, REQUIRED, TEXT, _is_int, _is_number, _load_checked_json, _rule,
                           _schema_problems)
from ..common.files import write_json

__all__ = ["DOWNSTREAM_SCHEMA_VERSION", "DownstreamError", "downstream_section", "downstream_table",
           "load_downstream", "validate_downstream", "write_downstream"]

DOWNSTREAM_SCHEMA_VERSION = 1

PathLike = Union[str, Path]


class DownstreamError(ValueError):
    """The downstream results JSON is malformed (its file, row and key named)."""


def _seeds(value) -> bool:
    return (isinstance(value, list) and len(value) > 0 and all(_is_int(seed) for seed in value)
            and len(set(value)) == len(value))


SEEDS = _rule(_seeds, "a non-empty list of distinct integer seeds")
SPREAD = _rule(lambda v: _is_number(v) and v >= 0, "a finite number >= 0")
# dotted path -> (required, rule), as cards_record.RECORD_SCHEMA; a key outside its schema is refused (a typo).
FILE_SCHEMA = {
    "schema_version": (REQUIRED, _rule(lambda v: v == DOWNSTREAM_SCHEMA_VERSION, str(DOWNSTREAM_SCHEMA_VERSION))),
    "source": (OPTIONAL, TEXT),
    "rows": (REQUIRED, _rule(lambda v: isinstance(v, list) and len(v) > 0, "a non-empty list of rows")),
}
ROW_SCHEMA = {
    "task": (REQUIRED, TEXT),
    "model": (REQUIRED, TEXT),
    "metric": (REQUIRED, TEXT),
    "column": (REQUIRED, OBJECT),
    "column.name": (REQUIRED, TEXT),
    "column.mean": (REQUIRED, NUMBER),
    "column.std": (REQUIRED, SPREAD),
    "column.seeds": (REQUIRED, SEEDS),
    "compared": (REQUIRED, OBJECT),
    "compared.name": (REQUIRED, TEXT),
    "compared.mean": (REQUIRED, NUMBER),
    "compared.std": (REQUIRED, SPREAD),
    "compared.seeds": (OPTIONAL, SEEDS),
    "difference": (REQUIRED, OBJECT),
    "difference.mean": (REQUIRED, NUMBER),
    "difference.low": (OPTIONAL, NUMBER),
    "difference.high": (OPTIONAL, NUMBER),
    "difference.n": (REQUIRED, _rule(lambda v: _is_int(v) and v >= 1, "an integer >= 1 (the paired seeds)")),
    "difference.seeds": (OPTIONAL, SEEDS),
}


def _unknown_keys(block: dict, schema: dict, prefix: str = "", path: str = "") -> list:
    """The keys of `block` (and of its sub-blocks) that `schema` does not name."""
    problems = []
    for key, value in block.items():
        name = f"{path}.{key}" if path else str(key)
        if name not in schema:
            known = [k.rsplit(".", 1)[-1] for k in schema if k.rpartition(".")[0] == path]
            problems.append(f"{prefix}{name} is not a key of the schema (known there: {', '.join(known)})")
        elif isinstance(value, dict):
            problems += _unknown_keys(value, schema, prefix, name)
    return problems


def _decimals(value: float) -> int:
    """How many decimals `value` is written with (the shortest repr: 91.2 -> 1, 1.15 -> 2, 3.0 -> 0)."""
    text = repr(float(value))
    return 0 if "e" in text else len(text.partition(".")[2].rstrip("0"))


def _row_problems(row: dict, prefix: str) -> list:
    """What the schema's types do not say: two different columns, the interval around its mean (none on one seed),
    the paired seeds among each column's."""
    column, compared, difference = row["column"], row["compared"], row["difference"]
    problems = []
    if column["name"] == compared["name"]:
        problems.append(f"{prefix}compared.name is the column's own name {column['name']!r}")
    n, low, high = difference["n"], difference.get("low"), difference.get("high")
    if n == 1 and (low is not None or high is not None):
        problems.append(f"{prefix}difference.low/high must be null with n 1: one seed gives no interval")
    if n > 1 and (low is None or high is None):
        problems.append(f"{prefix}difference.low and difference.high are required with n {n} (the 95% interval)")
    if low is not None and high is not None and not low <= difference["mean"] <= high:
        problems.append(f"{prefix}difference: the interval [{low}, {high}] must hold its mean {difference['mean']}")
    for name, block in (("column", column), ("compared", compared)):
        if "seeds" in block and n > len(block["seeds"]):
            problems.append(f"{prefix}difference.n {n} exceeds the {len(block['seeds'])} seeds of {name}")
    # on the same seeds the mean difference is the difference of the means, up to the rounding of the three numbers
    seeds = [set(block["seeds"]) for block in (column, compared) if "seeds" in block]
    paired_seeds = set(difference.get("seeds") or (seeds[0] if len(seeds) == 2 and n == len(seeds[0]) else ()))
    if len(seeds) == 2 and seeds[0] == seeds[1] == paired_seeds:
        values = (column["mean"], compared["mean"], difference["mean"])
        rounding = sum(0.5 * 10 ** -_decimals(value) for value in values)  # each off by up to half its last unit
        if abs(difference["mean"] - (column["mean"] - compared["mean"])) > rounding + 1e-9:
            problems.append(f"{prefix}difference.mean {difference['mean']} is not column.mean - compared.mean "
                            f"({column['mean']} - {compared['mean']}) on the same seeds, up to rounding: the "
                            "difference is this encoder's column minus the compared one")
    paired = difference.get("seeds")
    if paired is not None:
        if len(paired) != n:
            problems.append(f"{prefix}difference.seeds has {len(paired)} seeds, difference.n says {n}")
        for name, block in (("column", column), ("compared", compared)):
            missing = sorted(set(paired) - set(block.get("seeds", paired)))
            if missing:
                problems.append(f"{prefix}difference.seeds {missing} are not among {name}.seeds")
    return problems


def validate_downstream(data) -> dict:
    """Check downstream results against schema version 1; a DownstreamError lists every problem, each naming its row
    (`rows[i]`) and key. Two rows of one task, model, metric and pair of columns are refused."""
    if not isinstance(data, dict):
        raise DownstreamError(f"downstream results are a JSON object {{schema_version, rows[, source]}}, got "
                              f"{type(data).__name__}")
    problems = _schema_problems(data, FILE_SCHEMA) + _unknown_keys(data, FILE_SCHEMA)
    seen = {}
    for i, row in enumerate(data.get("rows") if isinstance(data.get("rows"), list) else []):
        prefix = f"rows[{i}]."
        if not isinstance(row, dict):
            problems.append(f"rows[{i}] must be an object")
            continue
        found = _schema_problems(row, ROW_SCHEMA, prefix) + _unknown_keys(row, ROW_SCHEMA, prefix)
        problems += found or _row_problems(row, prefix)
        if not found:
            key = (row["task"], row["model"], row["metric"], row["column"]["name"], row["compared"]["name"])
            if key in seen:
                problems.append(f"rows[{i}] repeats rows[{seen[key]}] (same task, model, metric and columns)")
            seen.setdefault(key, i)
    if problems:
        raise DownstreamError("invalid downstream results:\n  - " + "\n  - ".join(problems))
    return data


def load_downstream(path: PathLike) -> dict:
    """The downstream results JSON at `path`, validated; a DownstreamError names the file."""
    return _load_checked_json(path, validate_downstream, DownstreamError, "downstream results")


def write_downstream(path: PathLike, data: dict) -> Path:
    """Write downstream results to `path` (validated first: nothing is written for invalid ones)."""
    return write_json(path, validate_downstream(data))


def _text(value: str) -> str:
    """A text field inside a Markdown table cell: its `|` escaped (it would end the cell)."""
    return str(value).replace("|", "\\|")


def _signed(value: float) -> str:
    return f"{round(value, 2) + 0.0:+.2f}"  # + 0.0: a rounded -0.004 shows as +0.00, not -0.00


def _cell(block: dict) -> str:
    count = f" ({len(block['seeds'])})" if "seeds" in block else ""
    return f"`{_text(block['name'])}` {block['mean']:.2f} ± {block['std']:.2f}{count}"


def _difference(difference: dict) -> str:
    if difference.get("low") is None:
        return f"{_signed(difference['mean'])} (one seed: no interval)"
    return f"{_signed(difference['mean'])} [{_signed(difference['low'])}, {_signed(difference['high'])}]"


def downstream_table(data: dict) -> str:
    """The rows as a Markdown table: task, model, metric, this encoder's column mean ± std (seeds), the compared
    column's, the paired difference [95% interval] and the number of paired seeds."""
    validate_downstream(data)
    lines = ["| task | model | metric | this encoder | compared with | difference [95% interval] | paired seeds |",
             "|---|---|---|---|---|---|---|"]
    for row in data["rows"]:
        lines.append(f"| {_text(row['task'])} | {_text(row['model'])} | {_text(row['metric'])} | "
                     f"{_cell(row['column'])} | "
                     f"{_cell(row['compared'])} | {_difference(row['difference'])} | {row['difference']['n']} |")
    return "\n".join(lines)


def downstream_section(data: dict) -> str:
    """The card's "Downstream results" section: its heading, the table and the convention it follows."""
    text = ("## Downstream results\n\n" + downstream_table(data) + "\n\n"
            "Mean ± std over seeds (their number in parentheses); paired by seed: the difference is this encoder's "
            "column minus the compared one on the seeds both ran, with a 95% Student t interval, and an interval "
            "that contains 0 is no evidence of a difference.")
    if data.get("source"):
        text += f" Source: {data['source'].rstrip('.')}."
    return text
