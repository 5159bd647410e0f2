"""The CoVe paper's numbers (McCann et al. 2017), read from the one file that holds them: the `papers` preset
`mccann2017` (`configuration/papers/mccann2017.yaml`). Model cards, the result tables, the classifier runs and the
main job's report all read them here; ours never appear in that file. Below them, the Cross-View Training paper's
Table 1 (Clark et al. 2018) as far as it could be read, each figure with where it was read, from the `papers` preset
`clark2018` (`configuration/papers/clark2018.yaml`; `cvt_reported`): the tagging table puts it beside our runs.

    from modeling_cove.training.common import papers
    papers.table2_row("sst2")["+CoVe-S"]   # 89.0
    papers.mt_bleu("multi30k")["bleu"]     # 38.5
    papers.cvt_table1_row("CVT + multi-task")["pos"]  # 97.76
"""

from functools import lru_cache
from typing import Optional

from .presets import load_preset

__all__ = ["citation", "cvt_reported", "cvt_table1_row", "cvt_table1_source", "mt_bleu", "mt_datasets", "paper_numbers",
           "squad_dev", "table2_by_input", "table2_columns", "table2_metric", "table2_row", "table2_tasks",
           "table3_model", "table3_test"]

PAPER = "mccann2017"
SECTIONS = ("citation", "table2", "table3", "squad_dev", "mt_bleu")

# The BCN inputs of our classifier runs that are columns of Table 2 (`--bcn-input` -> the paper's column name).
TABLE2_COLUMN_OF_INPUT = {"random": "Random", "vectors": "GloVe", "vectors+cove": "+CoVe-S"}


@lru_cache(maxsize=None)
def paper_numbers() -> dict:
    """The whole file as a dict (read once)."""
    return load_preset(PAPER, "papers", known_keys=SECTIONS, required_keys=SECTIONS)


def citation() -> str:
    return paper_numbers()["citation"]


def table2_columns() -> tuple:
    """Table 2's columns, the inputs the heads read: ("Random", "GloVe", ..., "+Char+CoVe-L")."""
    return tuple(paper_numbers()["table2"]["columns"])


def table2_metric(task: str) -> str:
    """The metric of a Table 2 row (accuracy; F1 for SQuAD)."""
    metric = paper_numbers()["table2"]["metric"]
    return metric.get(task, metric["default"])


def table2_row(task: Optional[str]) -> dict:
    """Table 2 (validation) for a task key, {column: value}; {} for a task the table lacks."""
    table = paper_numbers()["table2"]
    values = table["rows"].get(task)
    return dict(zip(table["columns"], values)) if values else {}


def table2_by_input(task: Optional[str]) -> dict:
    """Table 2 for a task by our BCN inputs ({"random": 88.9, "vectors": 94.9, "vectors+cove": 94.7}); {} when the
    table lacks the task."""
    row = table2_row(task)
    return {name: row[column] for name, column in TABLE2_COLUMN_OF_INPUT.items()} if row else {}


def table3_test(task: Optional[str]) -> Optional[float]:
    """Table 3's test accuracy of BCN+Char+CoVe for a task key, or None."""
    return paper_numbers()["table3"]["rows"].get(task)


def table3_model() -> str:
    return paper_numbers()["table3"]["model"]


def squad_dev() -> list:
    """§4's SQuAD v1.1 dev results: [(model, {"exact_match": ..., "f1": ...})]."""
    rows = paper_numbers()["squad_dev"]["rows"]
    return [(row["model"], {k: v for k, v in row.items() if k != "model"}) for row in rows]


def mt_bleu(dataset: Optional[str]) -> Optional[dict]:
    """§2's BLEU of the MT model trained on `dataset` (a translation dataset key: multi30k, iwslt, wmt17) as
    {model, split, test_set, bleu, bleu_kind}, or None."""
    section = paper_numbers()["mt_bleu"]
    row = section["rows"].get(dataset)
    return None if row is None else {**row, "bleu_kind": section["bleu_kind"]}


def mt_datasets() -> tuple:
    return tuple(paper_numbers()["mt_bleu"]["rows"])


def table2_tasks() -> tuple:
    return tuple(paper_numbers()["table2"]["rows"])


# ---------------------------------------------------------------------------------------------------------------
# Cross-View Training: Clark, Luong, Manning, Le (2018), Table 1 (test sets), as far as it could be read, and ELMo's
# NER figure beside it: the `papers` preset `clark2018` (docs/paper.md, "Cross-View Training (Clark et al. 2018):
# Table 1").

CVT_PAPER = "clark2018"
CVT_SECTIONS = ("citation", "sources", "columns", "table1", "readme_chunking", "earlier_version_chunking", "elmo_ner",
                "column_of_task")


@lru_cache(maxsize=None)
def cvt_numbers() -> dict:
    """The CVT file as a dict (read once), every "source" written out in full from the file's `sources`."""
    numbers = load_preset(CVT_PAPER, "papers", known_keys=CVT_SECTIONS, required_keys=CVT_SECTIONS)
    sources = numbers["sources"]

    def spelled(entry: dict) -> dict:
        return {**entry, "source": entry["source"].format(**sources)}

    numbers["table1"] = {row: {column: spelled(cell) for column, cell in cells.items()}
                         for row, cells in numbers["table1"].items()}
    numbers["readme_chunking"] = spelled(numbers["readme_chunking"])
    numbers["earlier_version_chunking"] = spelled(numbers["earlier_version_chunking"])
    numbers["elmo_ner"] = spelled(numbers["elmo_ner"])
    return numbers


def cvt_table1_row(row: str) -> dict:
    """Table 1 of Clark et al. (2018) for a row ("Supervised", "CVT", "CVT + multi-task",
    "CVT + multi-task + large") as {column: value}, the columns found only; {} for a row none was found of."""
    return {column: entry["value"] for column, entry in cvt_numbers()["table1"].get(row, {}).items()}


def cvt_table1_source(row: str, column: str) -> Optional[str]:
    """Where a Table 1 figure was read, or None when it was not found."""
    entry = cvt_numbers()["table1"].get(row, {}).get(column)
    return entry["source"] if entry else None


def cvt_reported(task: str) -> Optional[dict]:
    """The published figures beside one of our tagging tasks (conll2000, wnut17, ewt_upos): Table 1's column for
    that kind of task ({row: value} for the rows found), whether it is the same data ("comparable"), the README's
    chunking floor for conll2000 and ELMo's CoNLL-2003 F1 for NER. None for another task."""
    numbers = cvt_numbers()
    if task not in numbers["column_of_task"]:
        return None
    column, comparable = numbers["column_of_task"][task]["column"], numbers["column_of_task"][task]["comparable"]
    table1 = numbers["table1"]
    entry = {"citation": numbers["citation"], "table1_column": column, **numbers["columns"][column],
             "comparable": comparable,
             "table1": {row: cells[column]["value"] for row, cells in table1.items() if column in cells},
             "table1_rows_not_found": [row for row, cells in table1.items() if column not in cells]}
    if column == "chunking":
        entry["cvt_readme"] = numbers["readme_chunking"]
    if column == "ner":
        entry["elmo"] = {k: numbers["elmo_ner"][k] for k in ("model", "value", "source")}
    return entry
