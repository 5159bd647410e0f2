"""The Cross-View Training table on a chosen recipe (`benchmarks/results/tagging_cvt.json`): its plan and its
collection.

The plan (`recipe_runs`): the rows conll2000 (5 seeds), conll2000-10pct (5, `--train-fraction 0.1`), ewt_upos (3),
wnut17 (3) and multitask (3, `--task conll2000 ewt_upos`), each with the columns supervised and cvt (the multi-task
row without and with CVT), seed-major, as `tagging_table.TableRun`s that `tagging_table.run_table` runs
(`benchmarks/run_tagging_table.py --recipe`). Every run takes the recipe, a tagging preset (`--preset`, default
cvt-paper) and a JSON of hyperparameters over it (`--hyperparameters`, where given); the CVT column adds `--cvt
--unlabeled` with text that fits the task (`ROW_TEXT`). So both columns of a row train with the same hyperparameters,
the same budget of labelled steps and validation periods (the best period kept, no early stopping when the recipe
says so) and, seed by seed, the same labelled batches; the runs score the test split (the table's figures) and save
no tagger.

`--preset` takes the place of the task's own preset file (`configuration/tagging/<task>.yaml`), it is not layered
over it: under a recipe every task trains with the recipe's values alone (WNUT-17 at the recipe's batch 64, not the
16 of wnut17.yaml). `TableRun.hyperparameters` resolves a planned command as cove-train-tagger will.

The collection (`collect_recipe`): the runs under runs/tag-recipe (`tagging.read_runs` with its detail: labelled
steps, the best period, the validation curve, the recipe each run recorded) grouped as the first table groups them
(`tagging.build_table`: per row and column mean ± std over seeds, CVT minus supervised paired by seed with a 95% t
interval; the multi-task row against its own supervised column), the recipes found (one a row: `check_one_recipe`),
and the validation curves beside the JSON (`<output stem>_curves.png`).
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

from modeling_cove.training.common.files import write_json
from modeling_cove.training.common.run_info import git_commit

from .tagging import (MULTITASK, SMALL_DATA, build_table, gap_text, gather_records, machines, score_text,
                      table_lines)
from .tagging_table import TableRun, seed_major

RECIPE_SEEDS = {"conll2000": 5, SMALL_DATA: 5, "ewt_upos": 3, "wnut17": 3, MULTITASK: 3}  # in table order
RECIPE_COLUMNS = ("supervised", "cvt")
RECIPE_ROW_FLAGS = {
    "conll2000": ("--task", "conll2000"),
    SMALL_DATA: ("--task", "conll2000", "--train-fraction", "0.1"),
    "ewt_upos": ("--task", "ewt_upos"),
    "wnut17": ("--task", "wnut17"),
    MULTITASK: ("--task", "conll2000", "ewt_upos"),
}
# <data dir>/english_unlabelled/<name>.txt.xz (docs/data.md): news near CoNLL-2000's Wall Street Journal, web text
# near EWT's and WNUT-17's
ENGLISH_UNLABELLED = {"news": ("reuters", "abc", "brown"), "web": ("masc", "webtext")}
# each row's unlabelled text: kinds of ENGLISH_UNLABELLED, or train-rest (the 90% of the training sentences whose
# labels --train-fraction 0.1 leaves out)
ROW_TEXT = {"conll2000": ("news",), SMALL_DATA: ("train-rest",), "ewt_upos": ("web",), "wnut17": ("web",),
            MULTITASK: ("news", "web")}
DEFAULT_PRESET = "cvt-paper"
COLUMNS = {"supervised": "the recipe on the labelled data alone",
           "cvt": "the same recipe with Cross-View Training on unlabelled text that fits the task"}
WHAT = ("Tagger test (and best validation) F1 or accuracy (%) per row, supervised vs Cross-View Training on one "
        "recipe (a labelled-step budget for both columns, validation every period, the best period kept), mean ± "
        "std over seeds; cvt minus supervised paired by seed with a 95% t interval; each run's validation curve "
        "against labelled steps")


def unlabelled_text(data_dir, kinds) -> tuple:
    """The --unlabeled arguments of `kinds` (ENGLISH_UNLABELLED's names, or train-rest) under `data_dir`."""
    found = []
    for kind in kinds:
        if kind == "train-rest":
            found.append(kind)
        elif kind in ENGLISH_UNLABELLED:
            folder = Path(data_dir) / "english_unlabelled"
            found += [str(folder / f"{name}.txt.xz") for name in ENGLISH_UNLABELLED[kind]]
        else:
            raise ValueError(f"unknown unlabelled text {kind!r}: {sorted(ENGLISH_UNLABELLED)} or train-rest")
    return tuple(found)


def canonical_overrides(overrides) -> str | None:
    """The recipe's hyperparameter overrides (a JSON object as text, a dict, or None) as the one JSON text the runs
    are given (keys sorted, so the same overrides always plan the same runs); None for none."""
    if isinstance(overrides, str):
        try:
            overrides = json.loads(overrides)
        except json.JSONDecodeError as err:
            raise ValueError(f"the recipe overrides are not valid JSON ({err}): {overrides!r}") from None
    if overrides is not None and not isinstance(overrides, dict):
        raise ValueError(f"the recipe overrides must be a JSON object of hyperparameters, got {overrides!r}")
    return json.dumps(overrides, sort_keys=True) if overrides else None


def recipe_runs(vocab: str, data_dir, preset: str = DEFAULT_PRESET, overrides=None, rows=None,
                columns=None) -> list:
    """Every run of the recipe table, seed-major, restricted to `rows` / `columns` when given. `vocab`: the
    word-vector checkpoint (cove-build-vocab's output); `data_dir`: where the unlabelled text files are;
    `preset`, `overrides`: the recipe (`canonical_overrides`)."""
    text = canonical_overrides(overrides)
    recipe = ("--preset", preset) + (("--hyperparameters", text) if text else ())

    def make(row, column, seed):
        cvt = ("--cvt", "--unlabeled", *unlabelled_text(data_dir, ROW_TEXT[row])) if column == "cvt" else ()
        return TableRun(row, column, seed, vocab, RECIPE_ROW_FLAGS[row] + recipe + cvt)

    return seed_major(RECIPE_SEEDS, {row: RECIPE_COLUMNS for row in RECIPE_SEEDS}, make, rows, columns)


def resolved_recipes(runs: list) -> dict:
    """{row: the hyperparameters its runs train with} (`TableRun.hyperparameters`), each row's columns checked to
    agree: a bad preset or override is a ValueError here, before any run starts."""
    found = {}
    for run in runs:
        hp = run.hyperparameters()
        if found.setdefault(run.row, hp) != hp:
            raise ValueError(f"{run.folder} resolves other hyperparameters than its row's first run: {hp}")
    return found


def recipe_key(record: dict) -> str:
    """The recipe a run recorded (--preset, --hyperparameters as given, the hyperparameters resolved) as one text."""
    return json.dumps([record.get("preset"), record.get("overrides"), record.get("hyperparameters")], sort_keys=True)


def recipes_of(records: list) -> list:
    """The recipes the runs recorded: [{preset, overrides, hyperparameters, rows, runs}], one per distinct recipe
    (one, when the table ran as planned)."""
    found = {}
    for r in records:
        entry = found.setdefault(recipe_key(r), {"preset": r.get("preset"), "overrides": r.get("overrides"),
                                                 "hyperparameters": r.get("hyperparameters"), "rows": [],
                                                 "runs": set()})
        entry["rows"] += [r["row"]] if r["row"] not in entry["rows"] else []
        entry["runs"].add(r["folder"])
    return [{**entry, "runs": len(entry["runs"])} for entry in found.values()]


def check_one_recipe(records: list) -> None:
    """Raise ValueError when the runs of one row recorded different recipes (`recipe_key`): a row's columns are
    paired by seed, so a row needs one recipe (a seed rerun under other overrides is collected apart or rerun). The
    message names each recipe's run folders and the resolved hyperparameters that differ."""
    rows = {}
    for r in records:
        rows.setdefault(r["row"], {}).setdefault(recipe_key(r), (r, set()))[1].add(r["folder"])
    for row, found in rows.items():
        if len(found) < 2:
            continue
        recipes = [record for record, _ in found.values()]
        hyperparameters = [record.get("hyperparameters") or {} for record in recipes]
        differ = sorted(key for key in set().union(*hyperparameters)
                        if len({json.dumps(hp.get(key)) for hp in hyperparameters}) > 1)
        listed = "; ".join(f"--preset {record.get('preset')} --hyperparameters {record.get('overrides')}: "
                           f"{', '.join(sorted(folders))}" for record, folders in found.values())
        raise ValueError(f"the runs of row {row} recorded {len(found)} recipes ({listed}; resolved hyperparameters "
                         f"that differ: {', '.join(differ) or 'none'}); one row pairs its columns by seed on one "
                         f"recipe: rerun those runs or collect them apart")


# what tagging_cvt.json holds (recipe_report's keys): a file with any other key is another collector's
RECIPE_KEYS = ("command", "commit", "machine", "what", "recipe", "columns", "results", "left_out", "curves")


def recipe_report(records: list, left_out: list, command: str = "", curves: str | None = None) -> dict:
    """The report of `records` (one recipe a row: `check_one_recipe`)."""
    check_one_recipe(records)
    return {"command": command, "commit": git_commit(), "machine": machines(records), "what": WHAT,
            "recipe": recipes_of(records), "columns": COLUMNS, "results": build_table(records, tuple(RECIPE_SEEDS)),
            "left_out": left_out, "curves": curves}


def curves_path(output: Path | str) -> Path:
    """Where the validation curves of the report `output` go: `<stem>_curves.png` beside it."""
    output = Path(output)
    return output.with_name(f"{output.stem}_curves.png")


def collect_recipe(runs_dir: Path | str, output: Path | str, merge: bool = False, command: str = ""):
    """Write `output` (tagging_cvt.json) and its validation curves (`curves_path`) from the runs under `runs_dir`;
    with `merge`, the runs of the `output` already there whose folders were not collected now are kept; an `output`
    of another kind (tagging.json) is refused (`tagging.read_report`). Returns the report, or None when there is no
    run at all (nothing is written)."""
    records, left_out, _ = gather_records(runs_dir, output, merge, detail=True, keys=RECIPE_KEYS,
                                          kind="recipe table (tagging_cvt.json)")
    if not records:
        return None
    report = recipe_report(records, left_out, command, curves_path(output).name)
    write_json(output, report)
    plot_recipe_curves(report, curves_path(output))
    return report


def mean_curve(curves: list) -> tuple:
    """(labelled steps, mean, std) over seeds of validation curves [[steps, value], ...], at each step any of them
    has (std 0 where one seed has it)."""
    at = {}
    for curve in curves:
        for steps, value in curve:
            at.setdefault(steps, []).append(value)
    xs = sorted(at)
    return (xs, [statistics.mean(at[x]) for x in xs],
            [statistics.stdev(at[x]) if len(at[x]) > 1 else 0.0 for x in xs])


def plateau_range(series: dict, start: float = 0.4, margin: float = 1.0) -> tuple | None:
    """(low, high) of a panel's y axis that shows where the columns flatten and the gap between them: the means from
    `start` of the steps on, widened by `margin` points (high at most 100); the first steps' low scores fall below
    it. None without any point there."""
    last = max((x for xs, _ in series.values() for x in xs), default=None)
    values = [v for xs, ys in series.values() for x, v in zip(xs, ys) if x >= start * last] if last else []
    if not values:
        return None
    return math.floor(min(values) - margin), min(100.0, math.ceil(max(values) + margin))


def plot_recipe_curves(report: dict, path: Path | str) -> Path:
    """A panel per row (the multi-task row: per task): validation score against labelled steps, supervised and CVT,
    mean over seeds with their std as error bars, the y axis on the curves' later part (`plateau_range`)."""
    from modeling_cove.training.common.run_info import plot_curves

    panels = []
    for label, cells in table_lines(report["results"]):
        series, errors = {}, {}
        for column in RECIPE_COLUMNS:
            if column in cells:
                runs = cells[column]["runs"]
                name = f"{column} (n={len(runs)})"
                xs, means, stds = mean_curve([run.get("validation_curve") or [] for run in runs])
                series[name], errors[name] = (xs, means), stds
        metric = next(iter(cells.values()))["metric"]
        panels.append({"title": label, "xlabel": "labelled steps", "series": series, "errors": errors,
                       "ylabel": f"validation {'F1' if metric == 'f1' else metric} (%)",
                       "ylim": plateau_range(series)})
    return plot_curves(panels, path, title="supervised vs CVT on one recipe: validation, mean ± std over seeds",
                       columns=3)


def recipe_markdown(report: dict) -> str:
    """The table for RESULTS.md: a line per row (the multi-task row once per task) with the supervised and CVT test
    scores (mean ± std (n)), CVT minus supervised paired by seed with its 95% t interval, and the seeds paired; then
    the recipe the runs recorded."""
    out = ["| row (test) | supervised | CVT | CVT − supervised [95% interval] | seeds paired |",
           "|---|---|---|---|---|"]
    for label, cells in table_lines(report["results"]):
        metric = next(iter(cells.values()))["metric"]
        diff = ((cells.get("cvt") or {}).get("versus_supervised") or {}).get("test")
        out.append(f"| {label} ({'F1' if metric == 'f1' else metric}) | "
                   + " | ".join(score_text(cells[c]) if c in cells else "–" for c in RECIPE_COLUMNS)
                   + f" | {gap_text(diff) if diff else '–'} | {diff['n'] if diff else 0} |")
    out += ["", "Test score (%), mean ± std over seeds (n); CVT − supervised on the seeds both ran (the multi-task "
                "row: against its own run without CVT), mean with its 95% t interval."]
    for recipe in report.get("recipe", []):
        hp = recipe.get("hyperparameters") or {}
        budget = (f"{hp['labelled_steps']:,} labelled steps, validation every {hp['eval_every']}, the best kept"
                  if hp.get("labelled_steps") else "an epoch budget")
        out.append(f"- recipe `--preset {recipe['preset']}`"
                   + (f" `--hyperparameters '{recipe['overrides']}'`" if recipe.get("overrides") else "")
                   + f": {budget} ({recipe['runs']} runs: {', '.join(recipe['rows'])})")
    if report.get("curves"):
        out.append(f"- validation curves against labelled steps: {report['curves']} (beside the JSON)")
    return "\n".join(out) + "\n"
