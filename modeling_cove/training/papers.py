"""The CoVe paper's numbers (McCann et al. 2017), read from the one file that holds them: the `papers` preset
`mccann2017` (`configuration/papers/mccann2017.yaml`). Model cards, the result tables, the classifier runs and the
main job's report all read them here; ours never appear in that file.

    from modeling_cove.training import papers
    papers.table2_row("sst2")["+CoVe-S"]   # 89.0
    papers.mt_bleu("multi30k")["bleu"]     # 38.5
"""

from functools import lru_cache
from typing import Optional

from .presets import load_preset

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
