#!/usr/bin/env python
"""The CoVe-T comparison's results as the downstream results JSON of an encoder's card (`cove-export-encoder
--downstream`; its schema: model_cards/README.md, "Downstream results"): one row per pair of the comparison whose first
column is the encoder's column, from classification.json's section `cove_t_comparison` (BCN, test accuracy: its
`results` and `versus_vectors`) and tagging.json's (the tagger, test F1: its `results` and `paired`). CoVe-T's columns
by default: `vectors+cove-t` (beside the word vectors) and `cove-t` (alone: TREC-6 against CoVe-S alone).

    python benchmarks/collect_results.py --merge          # classification.json's section (runs/bcn-cove-t)
    python benchmarks/collect_tagging.py --cove-t --merge  # tagging.json's section (runs/tag-cove-t)
    python benchmarks/card_downstream.py --output runs/cove-t/downstream.json \\
        --encoder runs/cove-t/encoder                  # CoVe-T's pairs, measured over these weights
    cove-export-encoder --mt-checkpoint runs/cove-t/mt --output-dir runs/cove-t/encoder-card --name cove-t \\
        --downstream runs/cove-t/downstream.json

A section that is missing, or holds no pair of the columns, gives no row; no row at all is an error (exit 2, nothing
written), and so is a comparison not complete: each pair the two plans make of the columns
(`instruments.classification_table.PLAN`, `instruments.tagging_table.COVE_T_ROW_COLUMNS`) must be there on all its
planned seeds, unless --partial (a card of the comparison so far: each row names its seeds). With --encoder (the
checkpoint the card is for), every run of a column that gives rows must have recorded that checkpoint's weights
(sha256): rows measured over a CoVe-T pretrained again since are an error, not its card's. The file is validated
by the package's schema (`publishing.downstream.write_downstream`) before it is written.
"""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from instruments import tagging, tagging_table
from instruments.classification_table import PLAN
from instruments.results import COVE_T_PAIRS, COVE_T_SECTION
from modeling_cove.training.common.cli import REQUIRED, fail, option, parse_options
from modeling_cove.training.publishing.cards_record import weights_fingerprint
from modeling_cove.training.publishing.downstream import DOWNSTREAM_SCHEMA_VERSION, write_downstream

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "results"


@dataclass
class CardDownstreamArguments:
    """The flags of card_downstream.py."""

    output: str = option("the downstream results JSON to write (cove-export-encoder --downstream)", REQUIRED)
    encoder_column: list[str] = option("the encoder's columns: the rows are the pairs whose first column is one of "
                                       "them, column by column", ["vectors+cove-t", "cove-t"], nargs="+")
    classification: str = option("classification.json (default: the repository's benchmarks/results/)",
                                 str(RESULTS / "classification.json"))
    tagging: str = option("tagging.json (default: the repository's benchmarks/results/)",
                          str(RESULTS / "tagging.json"))
    encoder: Optional[str] = option("the checkpoint the card is for: every run of the column must have recorded its "
                                    "weights' sha256")
    partial: bool = option("write the rows found even where a planned pair or seed is missing", False)


def planned_pairs(encoder_columns) -> dict:
    """(model, task, a, b) -> the seeds planned for it: each pair of the BCN and the tagger comparisons (COVE_T_PAIRS
    of each) whose first column is one of `encoder_columns`, over the seeds both its columns are planned for."""
    planned = {}
    for task, cells in PLAN.items():
        for a, b in COVE_T_PAIRS:
            if a in encoder_columns and a in cells and b in cells:
                planned[("BCN", task, a, b)] = list(range(1, min(cells[a], cells[b]) + 1))
    for task, columns in tagging_table.COVE_T_ROW_COLUMNS.items():
        for a, b in tagging.COVE_T_PAIRS:
            if a in encoder_columns and a in columns and b in columns:
                planned[("tagger", task, a, b)] = list(range(1, tagging_table.COVE_T_SEEDS[task] + 1))
    return planned


def check_complete(rows: list, encoder_columns) -> None:
    """A ValueError naming each planned pair (`planned_pairs`) that `rows` lack or hold without a planned seed."""
    found = {(r["model"], r["task"], r["column"]["name"], r["compared"]["name"]): r["difference"]["seeds"]
             for r in rows}
    missing = [f"{model} {task} {a} - {b}: seeds {found.get((model, task, a, b), [])} of {seeds}"
               for (model, task, a, b), seeds in planned_pairs(encoder_columns).items()
               if not set(seeds) <= set(found.get((model, task, a, b), []))]  # more seeds than planned: fine
    if missing:
        raise ValueError("the comparison is not complete (run and collect the rest, or --partial): "
                         + "; ".join(missing))


def column(name: str, cell: dict, key: str) -> dict:
    """A column of a row: its name, the cell's mean ± std of `key` and the seeds of its runs."""
    return {"name": name, "mean": cell[key]["mean"], "std": cell[key]["std"],
            "seeds": [run["seed"] for run in cell["runs"]]}


def pairs_of(blocks: dict, encoder_column: str):
    """(task, a, b, entry) for each "a - b" block of `blocks` (task -> "a - b" -> entry) whose a is the column."""
    for task, pairs in blocks.items():
        for name, entry in pairs.items():
            a, b = name.split(" - ")
            if a == encoder_column:
                yield task, a, b, entry


def classification_rows(section: dict, encoder_column: str) -> list:
    """The BCN rows: classification.json's cove_t_comparison, test accuracy (`versus_vectors`' paired_difference:
    ci95 from two seeds on)."""
    rows = []
    for task, a, b, entry in pairs_of(section.get("versus_vectors") or {}, encoder_column):
        cells, paired = section["results"][task], entry["test_accuracy"]
        low, high = paired.get("ci95") or (None, None)
        rows.append({"task": task, "model": "BCN", "metric": "test accuracy (%)",
                     "column": column(a, cells[a], "test_accuracy"), "compared": column(b, cells[b], "test_accuracy"),
                     "difference": {"mean": paired["mean"], "low": low, "high": high, "n": len(paired["seeds"]),
                                    "seeds": paired["seeds"]}})
    return rows


def tagging_rows(section: dict, encoder_column: str) -> list:
    """The tagger rows: tagging.json's cove_t_comparison, the test split of its `paired` blocks (`versus`)."""
    rows = []
    for task, a, b, entry in pairs_of(section.get("paired") or {}, encoder_column):
        cells, paired = section["results"][task], entry["test"]
        metric = cells[a]["metric"]
        key = f"test_{metric}"
        rows.append({"task": task, "model": "tagger", "metric": f"test {'F1' if metric == 'f1' else metric} (%)",
                     "column": column(a, cells[a], key), "compared": column(b, cells[b], key),
                     "difference": {name: paired[name] for name in ("mean", "low", "high", "n", "seeds")}})
    return rows


def read_section(path: Path) -> dict:
    """The cove_t_comparison section of a result file ({} when the file or the section is absent)."""
    if not path.is_file():
        return {}
    try:
        report = json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(report, dict):
        raise ValueError(f"{path} is not a results file (a JSON object), got {type(report).__name__}")
    section = report.get(COVE_T_SECTION) or {}
    if not isinstance(section, dict):
        raise ValueError(f"{path}: its {COVE_T_SECTION} is not an object, got {type(section).__name__}")
    return section


def recorded_weights(section: dict, encoder_column: str) -> set:
    """The weights' sha256 that the runs of `encoder_column` recorded in a comparison section, run by run (None for
    a run that recorded none); both sections' cells list their runs."""
    return {run.get("encoder_weights") for cells in (section.get("results") or {}).values()
            for run in (cells.get(encoder_column) or {}).get("runs", [])}


def card_downstream(classification: Path, tagging: Path, encoder_columns=("vectors+cove-t", "cove-t"),
                    weights: str | None = None) -> dict:
    """The downstream results of the `encoder_columns` (one encoder's: CoVe-T beside the word vectors and alone)
    from the two files' CoVe-T comparison sections, file by file and column by column (ValueError when they hold no
    pair of any, or, given `weights`, when a section's runs of a column with rows recorded other weights or none),
    their source named with the commit that collected each."""
    rows, sources = [], []
    for path, to_rows in ((Path(classification), classification_rows), (Path(tagging), tagging_rows)):
        section = read_section(path)
        found = []
        for column in encoder_columns:
            of_column = to_rows(section, column)
            recorded = recorded_weights(section, column)
            if of_column and weights is not None and recorded != {weights}:
                raise ValueError(f"{path}: the {column} runs of its {COVE_T_SECTION} recorded the weights "
                                 f"{sorted(map(str, recorded))}, not the card's encoder's ({weights}): pretrained "
                                 "again since? run and collect them again")
            found += of_column
        if found:
            rows += found
            sources.append(f"{path.name} section {COVE_T_SECTION}, collected at commit {section.get('commit')}")
    if not rows:
        raise ValueError(f"no pair of {' or '.join(map(repr, encoder_columns))} in the {COVE_T_SECTION} sections of "
                         f"{classification} and {tagging}: nothing to write")
    return {"schema_version": DOWNSTREAM_SCHEMA_VERSION, "source": "; ".join(sources), "rows": rows}


def main(argv=None):
    args = parse_options(CardDownstreamArguments, argv, description=__doc__)
    try:
        weights = weights_fingerprint(args.encoder) if args.encoder else None
        data = card_downstream(Path(args.classification), Path(args.tagging), args.encoder_column, weights)
        if not args.partial:
            check_complete(data["rows"], args.encoder_column)
        path = write_downstream(args.output, data)
    except ValueError as err:  # DownstreamError is one
        fail(err)
    print(f"wrote {len(data['rows'])} rows of {', '.join(args.encoder_column)} -> {path}")


if __name__ == "__main__":
    main()
