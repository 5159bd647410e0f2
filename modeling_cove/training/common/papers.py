"""The CoVe paper's numbers (McCann et al. 2017), read from the one file that holds them: the `papers` preset
`mccann2017` (`configuration/papers/mccann2017.yaml`). Model cards, the result tables, the classifier runs and the
main job's report all read them here; ours never appear in that file. Below them, the Cross-View Training paper's
Table 1 (Clark et al. 2018) as far as it could be read, each figure with where it was read (`CVT_TABLE1`,
`cvt_reported`): the tagging table (`instruments.tagging`) puts it beside our runs.

    from modeling_cove.training.common import papers
    papers.table2_row("sst2")["+CoVe-S"]   # 89.0
    papers.mt_bleu("multi30k")["bleu"]     # 38.5
    papers.cvt_table1_row("CVT + multi-task")["pos"]  # 97.76
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


# ---------------------------------------------------------------------------------------------------------------
# Cross-View Training: Clark, Luong, Manning, Le (2018), Table 1 (test sets), as far as it could be read
# (docs/paper.md, "Cross-View Training (Clark et al. 2018): Table 1"). The table itself was not readable here: every
# figure below comes from a copy of it, named in its "source"; a row or column left out was not found.

CVT_CITATION = ("Clark, Luong, Manning, Le (2018). Semi-Supervised Sequence Modeling with Cross-View Training. "
                "EMNLP 2018 (arXiv 1809.08370).")
_PWC = ("Papers with Code, 'Results from the Paper' of D18-1217 (https://paperswithcode.com/paper/?acl=D18-1217), "
        "read through the search tool's stored copy")
_NLPP_AUTHOR = ("NLP-progress commit 95816f9 by Kevin Clark, 'Add results from Semi-Supervised Sequence Modeling "
                "with Cross-View Training (#182)' (https://github.com/sebastianruder/NLP-progress/pull/182)")
_NLPP_NER = ("NLP-progress english/named_entity_recognition.md, CoNLL 2003 table "
             "(https://github.com/sebastianruder/NLP-progress)")
_README = ("the authors' code, tensorflow/models research/cvt_text/README.md, 'Evaluating a Model' "
           "(https://github.com/tensorflow/models/tree/master/research/cvt_text)")

# Table 1's columns: key -> (data set, metric).
CVT_COLUMNS = {
    "ccg": ("CCGbank supertagging", "accuracy"),
    "chunking": ("CoNLL-2000 chunking", "f1"),
    "ner": ("CoNLL-2003 NER", "f1"),
    "fgn": ("OntoNotes fine-grained NER", "f1"),
    "pos": ("Penn Treebank (WSJ) POS", "accuracy"),
    "dep_uas": ("Penn Treebank dependency parsing, UAS", "uas"),
    "dep_las": ("Penn Treebank dependency parsing, LAS", "las"),
    "translation": ("IWSLT 2015 English-Vietnamese", "bleu"),
}
# row -> column -> {"value", "source"}; a row as the paper names it. "Supervised" was not found in any copy.
CVT_TABLE1 = {
    "Supervised": {},
    "CVT": {
        "translation": {"value": 29.6, "source": _PWC + ": 'Machine Translation, IWSLT2015 English-Vietnamese, CVT, "
                                                         "BLEU 29.6'"},
    },
    "CVT + multi-task": {
        "ner": {"value": 92.61, "source": _PWC + ": 'CoNLL 2003 (English), CVT + Multi-Task, F1 92.61'; "
                                         + _NLPP_AUTHOR + ": 'CVT + Multi-Task (Clark et al., 2018) | 92.61'"},
        "pos": {"value": 97.76, "source": _PWC + ": 'Part-Of-Speech Tagging, Penn Treebank, CVT + Multi-task, "
                                         "Accuracy 97.76'"},
        "dep_uas": {"value": 96.61, "source": _PWC + ": 'Dependency Parsing, Penn Treebank, CVT + Multi-Task, UAS "
                                             "96.61'; " + _NLPP_AUTHOR},
        "dep_las": {"value": 95.02, "source": _PWC + ": 'LAS 95.02'; " + _NLPP_AUTHOR},
    },
    "CVT + multi-task + large": {
        "ccg": {"value": 96.1, "source": _PWC + ": 'CCG Supertagging, CCGbank, CVT + Multi-task + Large, Accuracy "
                                        "96.1'"},
        "ner": {"value": 92.61, "source": _PWC + ": 'CoNLL 2003 (English), CVT + Multi-Task + Large, F1 92.61'"},
        "fgn": {"value": 88.81, "source": _PWC + ": 'Ontonotes v5 (English), CVT + Multi-Task + Large, F1 88.81' "
                                         "(the author's NLP-progress entry, " + _NLPP_AUTHOR + ", labels the same "
                                         "88.81 'CVT + Multi-Task')"},
    },
}
# Not Table 1: the authors' README states what its single-task CVT chunking model reaches (at least, after 200k
# steps).
CVT_README_CHUNKING = {"test_f1_at_least": 96.6, "validation_f1_at_least": 97.1, "steps": 200_000,
                       "source": _README}
# Peters et al. (2018), ELMo, CoNLL-2003 NER test F1 (the row Table 1 of Clark et al. compares with).
ELMO_NER = {"model": "BiLSTM-CRF+ELMo (Peters et al., 2018)", "dataset": "CoNLL-2003 NER", "metric": "f1",
            "value": 92.22, "source": _NLPP_NER + ": 'BiLSTM-CRF+ELMo (Peters et al., 2018) | 92.22'"}
# Our tagging tasks -> Table 1's column for the same kind of task, and whether the data are the same.
CVT_COLUMN_OF_TASK = {"conll2000": ("chunking", True), "wnut17": ("ner", False), "ewt_upos": ("pos", False)}


def cvt_table1_row(row: str) -> dict:
    """Table 1 of Clark et al. (2018) for a row ("Supervised", "CVT", "CVT + multi-task",
    "CVT + multi-task + large") as {column: value}, the columns found only; {} for a row none was found of."""
    return {column: entry["value"] for column, entry in CVT_TABLE1.get(row, {}).items()}


def cvt_table1_source(row: str, column: str) -> Optional[str]:
    """Where a Table 1 figure was read, or None when it was not found."""
    entry = CVT_TABLE1.get(row, {}).get(column)
    return entry["source"] if entry else None


def cvt_reported(task: str) -> Optional[dict]:
    """The published figures beside one of our tagging tasks (conll2000, wnut17, ewt_upos): Table 1's column for
    that kind of task ({row: value} for the rows found), whether it is the same data ("comparable"), the README's
    chunking floor for conll2000 and ELMo's CoNLL-2003 F1 for NER. None for another task."""
    if task not in CVT_COLUMN_OF_TASK:
        return None
    column, comparable = CVT_COLUMN_OF_TASK[task]
    dataset, metric = CVT_COLUMNS[column]
    entry = {"citation": CVT_CITATION, "table1_column": column, "dataset": dataset, "metric": metric,
             "comparable": comparable,
             "table1": {row: cells[column]["value"] for row, cells in CVT_TABLE1.items() if column in cells},
             "table1_rows_not_found": [row for row, cells in CVT_TABLE1.items() if column not in cells]}
    if column == "chunking":
        entry["cvt_readme"] = CVT_README_CHUNKING
    if column == "ner":
        entry["elmo"] = {k: ELMO_NER[k] for k in ("model", "value", "source")}
    return entry
