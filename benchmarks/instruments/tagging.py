"""The tagging table of `benchmarks/results/tagging.json`, collected from the runs `cove-train-tagger` wrote (the
training loop's `TaggerLoop.finish` writes each run's metrics.json), with the Cross-View Training paper's figures
beside ours (`modeling_cove.training.common.papers.cvt_reported`).

Reads <runs>/<row>/<column>-seed<N>/metrics.json, <runs> being runs/tag:

- <row> a task (conll2000, wnut17, ewt_upos): one cell per column;
- <row> conll2000-10pct (--train-fraction 0.1): the small-data row, its columns paired with its own supervised column;
- <row> multitask: runs trained on several tasks at once; metrics.json holds a result per task, each paired with the
  supervised column of that task's own row.

The CoVe-T comparison (`collect_cove_t`) reads <runs>/conll2000/<column>-seed<N>/metrics.json, <runs> being
runs/tag-cove-t, into the section `cove_t_comparison` of the same file: its own runs, never merged with the table's.

Columns: supervised (the input vectors only), vectors+cove, vectors+bilm, cvt. A cell holds, in percent with two
decimals, mean ± std over seeds and the values (`test_f1` / `validation_f1`, `test_accuracy` / ... for an accuracy
task such as ewt_upos), the runs, and `versus_supervised`: the column minus the supervised one on the seeds both ran,
with a 95% t interval (`modeling_cove.training.common.stats.paired_difference`, the one home of that interval). Smoke runs
(--limit-sentences, --max-steps) and unfinished ones are left out and listed. A cell holds runs over one encoder's
weights (the sha256 a run records, `encoder_weights`; `results.check_one_encoder`).
"""

import json
import logging
import re
from pathlib import Path

from modeling_cove.training.common import papers
from modeling_cove.training.common.stats import mean_std, paired_difference
from modeling_cove.training.common.run_info import git_commit
from modeling_cove.training.common.files import write_json

from .results import (COVE_T_SECTION, check_cell_runs, check_one_device_kind, device_kind, read_metrics,
                      run_device_kind)

logger = logging.getLogger(__name__)

COLUMNS = {
    "supervised": "the input word vectors only, trained on the labelled data",
    "vectors+cove": "[vectors; CoVe-S] read by the tagger",
    "vectors+bilm": "[vectors; gamma * sum_k softmax(w)_k h_k] over our biLM's layers",
    "cvt": "Cross-View Training: the supervised tagger plus auxiliary views on unlabelled text",
    "supervised+case": "the supervised column plus an embedding of each token's casing as written (--case-dim 16)",
}
TASKS = ("conll2000", "wnut17", "ewt_upos")  # the full-data rows, in table order
SMALL_DATA = "conll2000-10pct"
MULTITASK = "multitask"
ACCURACY_TASKS = ("ewt_upos",)  # the metric of a run that does not record it
RUN_FOLDER = re.compile(r"^(?P<column>.+)-seed(?P<seed>\d+)$")
COVE_T_COLUMNS = {
    "supervised": COLUMNS["supervised"],
    "vectors+cove": "[vectors; CoVe-S] read by the tagger, CoVe-S pretrained again for this comparison with "
                    "CoVe-T's test-sentence exclusion",
    "vectors+cove-t": "[vectors; CoVe-T] read by the tagger (--input vectors+cove over CoVe-T)",
}
COVE_T_PAIRS = (("vectors+cove-t", "supervised"), ("vectors+cove", "supervised"), ("vectors+cove-t", "vectors+cove"))
COVE_T_WHAT = ("The CoVe-T comparison on CoNLL-2000: tagger test (and validation) F1 (%) of supervised, vectors+cove "
               "and vectors+cove-t, mean ± std over seeds, all its runs made afresh for it (the table's CoVe-S "
               "checkpoint is gone: CoVe-S is pretrained again, with CoVe-T's test-sentence exclusion); its pairs by "
               "seed with a 95% t interval; never merged with the table's runs (results)")
WHAT = ("Tagger test (and validation) F1 or accuracy (%) per task and column, mean ± std over seeds; each column "
        "minus supervised paired by seed with a 95% t interval; the published figures of Clark et al. (2018) and "
        "ELMo in `papers` (docs/paper.md: only chunking is on the same data as ours)")


def percent(value: float) -> float:
    return round(100 * value, 2)


def metric_of(metrics: dict, task: str) -> str:
    """The main metric of a task in a run ("f1" or "accuracy"): what the run recorded, else by the task."""
    recorded = (metrics.get("tasks") or {}).get(task, {}).get("metric")
    return recorded or ("accuracy" if task in ACCURACY_TASKS else "f1")


def smoke_reason(settings: dict):
    """Why a run is a smoke run and stays out of the table, or None."""
    for key in ("limit_sentences", "max_steps"):
        if settings.get(key):
            return f"--{key.replace('_', '-')} {settings[key]}"
    return None


def labelled_steps(metrics: dict):
    """How many labelled steps a run took (its last validation period's count; None for a run older than that
    count, 0 before its first period)."""
    epochs = metrics.get("epochs") or []
    return epochs[-1].get("labelled_steps") if epochs else 0


def validation_curve(metrics: dict, task: str | None = None) -> list:
    """[[labelled steps, validation score in %], ...], one point per validation period of a run's metrics.json:
    its `validation_main` (the mean over its tasks), or with `task` that task's own main metric."""
    kind = metric_of(metrics, task) if task else None
    return [[e.get("labelled_steps"), percent(e["validation"][task][kind] if task else e["validation_main"])]
            for e in metrics.get("epochs") or []]


def run_detail(metrics: dict, task: str) -> dict:
    """What the recipe table keeps of a run besides `read_runs`' record: labelled steps in all and at the best
    validation period, the validation curve of `task`, and the recipe as the run recorded it (--preset,
    --hyperparameters as given, the hyperparameters resolved, the unlabelled text of a CVT run) and its settings (what
    `tagging_table.run_recorded` compares with a planned run's)."""
    settings, epochs = metrics.get("settings") or {}, metrics.get("epochs") or []
    best = next((e for e in epochs if e.get("epoch") == metrics.get("best_epoch")), {})
    several = len(metrics.get("results") or {}) > 1
    return {"labelled_steps": labelled_steps(metrics), "best_labelled_steps": best.get("labelled_steps"),
            "validation_curve": validation_curve(metrics, task if several else None),
            "preset": settings.get("preset"), "overrides": settings.get("hyperparameters"),
            "hyperparameters": {k: v for k, v in (metrics.get("hyperparameters") or {}).items() if k != "source"},
            "unlabeled": settings.get("unlabeled") if settings.get("cvt") else None, "settings": settings}


def read_runs(runs_dir: Path | str, detail: bool = False) -> tuple[list, list]:
    """(records, left out) of the runs under `runs_dir`: one record per run and task with its row, task, column,
    folder (relative to `runs_dir`), seed, test and validation scores in percent and where it ran (with `detail`,
    also `run_detail`'s); left out: the smoke runs, the unfinished ones (a run in progress has a metrics.json
    without results) and those that scored validation alone (`--no-test`: the ablation's), as {"folder", "why"}."""
    runs_dir = Path(runs_dir)
    records, left_out = [], []
    for path in sorted(runs_dir.glob("*/*-seed*/metrics.json")):
        name = RUN_FOLDER.match(path.parent.name)
        if not name:
            continue
        folder = f"{path.parent.parent.name}/{path.parent.name}"
        metrics = read_metrics(path)
        settings = metrics.get("settings") or {}
        why = (smoke_reason(settings) or (None if "results" in metrics else "unfinished: no results yet")
               or ("validation only (--no-test): no test scores" if settings.get("no_test") else None))
        if why:
            left_out.append({"folder": folder, "why": why})
            continue
        machine = metrics.get("machine") or {}
        for task, result in sorted(metrics["results"].items()):
            kind = metric_of(metrics, task)
            records.append({
                "row": path.parent.parent.name, "task": task, "column": name["column"], "folder": folder,
                "seed": settings.get("seed", int(name["seed"])), "metric": kind,
                f"test_{kind}": percent(result["test"][kind]),
                f"validation_{kind}": percent(result["validation"][kind]),
                "best_epoch": metrics.get("best_epoch"), "epochs": len(metrics.get("epochs") or []),
                "train_seconds": metrics.get("train_seconds"), "command": metrics.get("command"),
                "commit": metrics.get("commit"), "cpu": machine.get("cpu"), "cpu_model": machine.get("cpu_model"),
                "gpu": machine.get("gpu"), **({"device": device_kind(machine)} if machine.get("device") else {}),
                "train_fraction": settings.get("train_fraction"),
                **({"encoder_weights": metrics["encoder_weights"]} if metrics.get("encoder_weights") else {}),
                **(run_detail(metrics, task) if detail else {})})
    return records, left_out


def cell(records: list) -> dict:
    """A table cell over one row, task and column: its runs sorted by seed and mean ± std (n) with the values; two
    runs of one seed, or runs that recorded the sha256 of different encoder weights, are refused
    (`results.check_cell_runs`)."""
    records = sorted(records, key=lambda r: r["seed"])
    first = records[0]
    check_cell_runs(f"{first['row']}/{first['task'] + '/' if first['row'] == MULTITASK else ''}{first['column']}",
                    records)
    kind = records[0]["metric"]
    entry = {"task": records[0]["task"], "metric": kind}
    for split in ("test", "validation"):
        values = [r[f"{split}_{kind}"] for r in records]
        entry[f"{split}_{kind}"] = {**mean_std(values), "values": values}
    entry["runs"] = [{k: v for k, v in r.items() if k not in ("row", "task", "column", "metric")} for r in records]
    return entry


def versus(cell_a: dict, baseline: dict) -> dict | None:
    """`cell_a` minus `baseline` on the seeds both ran, per split: {mean, low, high, n, seeds, ...} with the 95% t
    interval (low/high None on one seed); None without a shared seed."""
    kind = cell_a["metric"]
    found = {}
    for split in ("test", "validation"):
        key = f"{split}_{kind}"
        diff = paired_difference(cell_a["runs"], baseline["runs"], key)
        if diff is None:
            return None
        low, high = diff.get("ci95", (None, None))
        found[split] = {"mean": diff["mean"], "low": low, "high": high, "n": len(diff["seeds"]),
                        **{k: v for k, v in diff.items() if k not in ("mean", "ci95")}}
    return found


def build_table(records: list, rows: tuple | None = None) -> dict:
    """results: <task row> -> column -> cell, conll2000-10pct -> column -> cell, multitask -> task -> column -> cell,
    the rows in the order of `rows` (default: `row_order`'s); each non-supervised cell with its `versus_supervised`.
    A multi-task cell is paired with the multi-task row's own supervised column of its task where the row has one
    (the recipe table's "without CVT"), else with the supervised column of the task's own row (the first table's
    multi-task row is CVT only)."""
    grouped = {}
    for r in records:
        grouped.setdefault((r["row"], r["task"], r["column"]), []).append(r)
    results = {}
    for (row, task, column), found in grouped.items():
        target = results.setdefault(row, {})
        if row == MULTITASK:
            target = target.setdefault(task, {})
        target[column] = cell(found)
    for row, columns in results.items():
        if row == MULTITASK:
            for task, cells in columns.items():
                if "supervised" in cells:
                    add_versus(cells, cells["supervised"], f"{MULTITASK}/{task}/supervised")
                else:
                    add_versus(cells, results.get(task, {}).get("supervised"), f"{task}/supervised")
        else:
            add_versus(columns, columns.get("supervised"), f"{row}/supervised")
    return {row: order_columns(columns) if row != MULTITASK else
            {task: order_columns(cells) for task, cells in sorted(columns.items())}
            for row, columns in sorted(results.items(), key=lambda item: row_order(item[0], rows))}


def add_versus(cells: dict, baseline: dict | None, baseline_name: str) -> None:
    for column, entry in cells.items():
        if column == "supervised" or baseline is None:
            continue
        found = versus(entry, baseline)
        if found:
            entry["versus_supervised"] = {"baseline": baseline_name, **found}


def row_order(row: str, rows: tuple | None = None) -> tuple:
    rows = rows or (*TASKS, SMALL_DATA, MULTITASK)
    return (rows.index(row) if row in rows else len(rows), row)


def order_columns(cells: dict) -> dict:
    names = list(COLUMNS)
    return dict(sorted(cells.items(), key=lambda item: (names.index(item[0]) if item[0] in names else len(names),
                                                        item[0])))


def records_of(report: dict) -> list:
    """The run records of a tagging.json written before (the inverse of build_table's grouping)."""
    records = []

    def add(row, column, entry):
        for run in entry["runs"]:
            records.append({"row": row, "task": entry["task"], "column": column, "metric": entry["metric"], **run})

    for row, columns in report.get("results", {}).items():
        for name, entry in columns.items():
            if row == MULTITASK:
                for column, inner in entry.items():
                    add(row, column, inner)
            else:
                add(row, name, entry)
    return records


def merge_records(old: list, new: list) -> list:
    """`new` plus the records of `old` whose run folder (and task) `new` does not have: runs collected in another
    session or on another machine stay."""
    present = {(r["folder"], r["task"]) for r in new}
    return [r for r in old if (r["folder"], r["task"]) not in present] + new


def machines(records: list) -> list:
    """Where the runs ran (the report's `machine`): "CPU (family/model/stepping)", with " + GPU" for a run on a GPU."""
    return sorted({(f"{r['cpu']} ({r['cpu_model']})" if r.get("cpu_model") else str(r.get("cpu")))
                   + (f" + {r['gpu']}" if r.get("gpu") else "") for r in records})


def tagging_report(records: list, left_out: list, command: str = "") -> dict:
    tasks = sorted({r["task"] for r in records} | set(TASKS), key=lambda t: row_order(t))
    return {"command": command, "commit": git_commit(), "machine": machines(records), "what": WHAT,
            "columns": COLUMNS, "results": build_table(records), "left_out": left_out,
            "papers": {task: papers.cvt_reported(task) for task in tasks if papers.cvt_reported(task)}}


def tokenization_mismatches(data_dir, encoder) -> dict:
    """Per task, how often tokenizing the test set's pre-split words and tokenizing its raw text differ, with the
    tokenizer of the encoder checkpoint the runs read (`tagging_data.tokenization_mismatch`), in percent."""
    from transformers import AutoTokenizer

    from modeling_cove.training.data.tagging import load_tagging_splits, tokenization_mismatch

    tokenizer = AutoTokenizer.from_pretrained(encoder)
    result = {"encoder": str(encoder)}
    for task in TASKS:
        test = load_tagging_splits(task, data_dir)["test"]
        figures = tokenization_mismatch(tokenizer, test)
        result[task] = {k: percent(v) if k.endswith("rate") else v for k, v in figures.items()}
    return result


# what tagging.json holds (tagging_report's keys, the tokenization mismatch figures and the CoVe-T comparison's
# section): a file with any other key is another collector's (read_report)
TAGGING_KEYS = ("command", "commit", "machine", "what", "columns", "results", "left_out", "papers",
                "tokenization_mismatch", COVE_T_SECTION)


def read_report(output: Path | str, keys=TAGGING_KEYS, kind: str = "tagging table (tagging.json)") -> dict:
    """The report already at `output` ({} where there is none), refused with a ValueError naming the file unless it
    is a JSON object of `kind`, whose keys are all among `keys`: a collector rewriting another's file (the recipe
    table's report written over tagging.json, say) would lose that file's other parts."""
    output = Path(output)
    if not output.exists():
        return {}
    try:
        report = json.loads(output.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{output} is not valid JSON ({err}): not a {kind} to write over") from None
    foreign = sorted(set(report) - set(keys)) if isinstance(report, dict) else None
    if foreign is None or foreign:
        found = f"the keys {', '.join(foreign)}" if foreign else f"a JSON {type(report).__name__}"
        raise ValueError(f"{output} is not a {kind} (it holds {found}): not written over, give another --output")
    return report


def gather_records(runs_dir: Path | str, output: Path | str, merge: bool = False, detail: bool = False,
                   section: str | None = None, keys=TAGGING_KEYS, kind: str = "tagging table (tagging.json)") -> tuple:
    """(records, left out, the report at `output` as it is) for a collector writing `output` (or its `section`)
    from the runs under `runs_dir` (`read_runs`, with `detail`); the report there is read first, {} where there is
    none, and refused when it is not of `kind` (`read_report` over `keys`); with `merge`, its records (its `section`'s)
    whose run folders were not read now are kept. No record at all is logged."""
    records, left_out = read_runs(runs_dir, detail)
    old = read_report(output, keys, kind)
    before = old.get(section, {}) if section else old
    if merge and before:
        records = merge_records(records_of(before), records)
    if not records:
        logger.warning("no tagging runs under %s: %s not written", runs_dir, output)
    return records, left_out, old


def collect_tagging(runs_dir: Path | str, output: Path | str, merge: bool = False, command: str = "",
                    mismatch: dict | None = None):
    """Write `output` (tagging.json) from the runs under `runs_dir`; with `merge`, the runs of the `output` already
    there whose folders were not collected now are kept (and its tokenization mismatch figures unless `mismatch`
    gives new ones); its CoVe-T comparison section is kept either way (collected apart: `collect_cove_t`). Returns the
    report, or None when there is no run at all (nothing is written)."""
    records, left_out, old = gather_records(runs_dir, output, merge)
    if not records:
        return None
    report = tagging_report(records, left_out, command)
    mismatch = mismatch or (old.get("tokenization_mismatch") if merge else None)
    if mismatch:
        report["tokenization_mismatch"] = mismatch
    if COVE_T_SECTION in old:  # collected apart (collect_cove_t): kept as it is
        report[COVE_T_SECTION] = old[COVE_T_SECTION]
    write_json(output, report)
    return report


def paired_blocks(results: dict, pairs) -> dict:
    """Per row of `results` (build_table's, rows of one task), for each (a, b) of `pairs` whose cells it has both,
    a minus b paired by seed (`versus`) as "a - b"; rows with none left out."""
    found = {}
    for row, cells in results.items():
        for a, b in pairs:
            diff = versus(cells[a], cells[b]) if a in cells and b in cells else None
            if diff:
                found.setdefault(row, {})[f"{a} - {b}"] = diff
    return found


def collect_cove_t(runs_dir: Path | str, output: Path | str, merge: bool = False, command: str = ""):
    """Write the CoVe-T comparison (the runs under `runs_dir`, runs/tag-cove-t: `tagging_table.cove_t_runs`) into
    the section COVE_T_SECTION of `output` (tagging.json), the file's other parts kept: what it is, the collection's
    command and commit, the machines, the cells (build_table) and per row the pairs of COVE_T_PAIRS by seed; with
    `merge`, the section's runs whose folders were not collected now are kept. Returns the section, or None when
    there is no run (nothing is written)."""
    records, left_out, old = gather_records(runs_dir, output, merge, section=COVE_T_SECTION)
    if not records:
        return None
    results = build_table(records)
    for row, cells in results.items():  # its pairs compare runs on one kind of device
        check_one_device_kind(f"{COVE_T_SECTION} / {row}", [(run_device_kind(r), r["seed"])
                                                             for cell in cells.values() for r in cell["runs"]])
    section = {"what": COVE_T_WHAT, "command": command, "commit": git_commit(), "machine": machines(records),
               "columns": {column: COVE_T_COLUMNS[column] for column in COVE_T_COLUMNS
                           if any(column in cells for cells in results.values())},
               "results": results, "paired": paired_blocks(results, COVE_T_PAIRS), "left_out": left_out}
    write_json(output, {**old, COVE_T_SECTION: section})
    return section


def score_text(entry: dict) -> str:
    """A cell's test score as the tables print it: mean ± std (n)."""
    score = entry[f"test_{entry['metric']}"]
    return f"{score['mean']:.2f} ± {score['std']:.2f} ({score['n']})"


def gap_text(diff: dict) -> str:
    """A paired difference (`versus`' "test") as the tables print it: mean [95% interval], the interval left out
    on one seed."""
    interval = f" [{diff['low']:+.2f}, {diff['high']:+.2f}]" if diff["low"] is not None else ""
    return f"{diff['mean']:+.2f}{interval}"


def format_cell(entry: dict) -> str:
    text = score_text(entry)
    diff = (entry.get("versus_supervised") or {}).get("test")
    if diff:
        text += f"<br>Δ {gap_text(diff)} (n={diff['n']})"
    return text


def table_lines(results: dict) -> list:
    """[(label, {column: cell})] of a report's results, a line per row and the multi-task row once per task
    ("multitask: <task>")."""
    lines = []
    for row, columns in results.items():
        if row == MULTITASK:
            lines += [(f"{MULTITASK}: {task}", cells) for task, cells in columns.items()]
        else:
            lines.append((row, columns))
    return lines


def markdown_table(report: dict) -> str:
    """The table for RESULTS.md: one line per task row (the multi-task row once per task), a column per input, test
    score mean ± std (n) and, under it, the column minus supervised paired by seed with its 95% t interval; then
    the published figures beside each task."""
    lines = table_lines(report["results"])
    present = [c for c in COLUMNS if any(c in cells for _, cells in lines)]
    present += sorted({c for _, cells in lines for c in cells} - set(present))
    out = ["| task (test) | " + " | ".join(present) + " |", "|---" * (len(present) + 1) + "|"]
    for label, cells in lines:
        metric = next(iter(cells.values()))["metric"]
        out.append(f"| {label} ({'F1' if metric == 'f1' else metric}) | "
                   + " | ".join(format_cell(cells[c]) if c in cells else "–" for c in present) + " |")
    out += ["", "Mean ± std over seeds (n), in %; Δ: the column minus supervised on the seeds both ran (the "
                "multi-task row: minus the task's own supervised row), mean with its 95% t interval."]
    for task, entry in report.get("papers", {}).items():
        rows = "; ".join(f"{row} {value:.2f}" for row, value in entry["table1"].items()) or "no row found"
        extra = ""
        if "cvt_readme" in entry:
            extra = f"; CVT code README: test F1 at least {entry['cvt_readme']['test_f1_at_least']:.2f}"
        if "elmo" in entry:
            extra += f"; ELMo {entry['elmo']['value']:.2f}"
        same = "same data" if entry["comparable"] else "other data"
        out.append(f"- {task}: Clark et al. (2018) Table 1, {entry['dataset']} ({same}): {rows}{extra}")
    return "\n".join(out) + "\n"
