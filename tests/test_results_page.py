"""benchmarks/RESULTS.md is written by hand from the records in benchmarks/results/: every decimal figure it states is
checked here against the records cited beside it, so that a stale, mistyped or sign-changed figure fails, naming its
line. What "beside it" means, and how precise each check is (docs/results_method.md, "Machines and provenance"):

- a summary row: its own records (last column), only under the row's task (trec6, conll2000, ...) where a record has
  that key; "mean ± std (n)" and "mean [low, high] (h/n higher)" are one summary each (mean, spread, seeds and higher
  count of one dict together), found only under a test metric, and for the "comparison" and "multi-task" rows only in
  those sections, for the others outside them. The paper column: Table 2's cell of each system the row names (BCN,
  DCN; "–" where it shows none), or a number of the paper's file in configuration/papers/ (MT, taggers);
- the heads' speed table: each cell the field of heads.json / heads_cuda.json it reads, integers too;
- any other table or paragraph: the records it and its section's heading cite (a table also those of the paragraph
  above it; either, citing none, its section's), a table row naming a task only where that task is; summaries as
  above, any other figure a value there at the precision shown (a fraction also as a percentage, bytes as MB or GB
  where the page says so);
- a figure the page computes (a mean over some seeds, a ratio of two timings, a paper's figure in prose): DERIVED,
  computed here.

Signs count: −0.54 is not 0.54, and a figure without a sign is positive. The loose part: a figure checked as "a value
there" passes if any value of that scope rounds to it, so one copied from the wrong field of the same scope can pass.
Not checked: goals and settings after "≥", "≤", "goal" or "target", integers outside the heads' table, scientific
notation (2.6e-7), table headers, the lines above the first `## ` and the code blocks.
"""

import json
import re
import statistics
from functools import lru_cache

import pytest
import yaml

from conftest import REPO

BENCHMARKS = REPO / "benchmarks"
RESULTS = BENCHMARKS / "results"
PAPERS = REPO / "configuration" / "papers"  # the papers' numbers, typed once
PAGE = BENCHMARKS / "RESULTS.md"
CITED = re.compile(r"results/([\w.+-]+\.json)")
SEPARATOR = re.compile(r"\|[\s|:-]+\|?")  # a table's second line
# a decimal figure as the page writes it (−0.54, +2.85, 1,609.8), not part of a version (2.13.0), path or name; the
# unit after it (MB, GB; "113.2 / 73.0 MB": both) when there is one
FIGURE = re.compile(r"(?<![\w/.#])([−+-]?\d[\d,]*\.\d+)(?![\w/]|\.\d)(?: ?(MB|GB)|(?= / [\d.,]+ ?(MB|GB)))?")
# "mean ± std (n)" and "mean [low, high] (higher/n higher)" (or "(higher)", "(higher; ...)"): figures of one summary
SPREAD = re.compile(r"(?<![\w/.#])([−+-]?\d[\d,]*\.\d+) ± (\d+\.\d+)(?: \((\d+)\))?")
INTERVAL = re.compile(r"(?<![\w/.#])([−+-]?\d+\.\d+) \[([−+-]?\d+\.\d+), ([−+-]?\d+\.\d+)\]"
                      r"(?: \((\d+)(?=[/;)])(?:/(\d+) higher)?)?")
# a goal or a setting, not a measurement: its figure is left out
GOAL = re.compile(r"(?:≥|≤|goal|target) ?([\d.]+)")
# Table 2's columns (configuration/papers/mccann2017.yaml) of the systems a summary row names, and its tasks
TABLE2_COLUMNS = {"random": "Random", "vectors": "GloVe", "vectors + CoVe-S": "+CoVe-S"}
# a task as the page names it -> its key in the records (of those a row's label names, the last: `task_of`)
TASKS = {"10% of the labels": "conll2000-10pct", "TREC-6": "trec6", "TREC-50": "trec50", "SST-2": "sst2",
         "SST-5": "sst5", "SNLI": "snli", "IMDb": "imdb", "SQuAD": "squad", "CoNLL-2000": "conll2000",
         "EWT": "ewt_upos", "WNUT-17": "wnut17"}
# a row naming one of these words is searched only inside the section of that key, any other row only outside it
SECTIONS = {"comparison": "cove_t_comparison", "multi-task": "multitask"}
# the heads' table: its section column -> the record's section; its columns -> the record's measurement
HEADS_SECTIONS = {"BCN, single texts": "bcn_single", "BCN, pairs": "bcn_pair", "DCN": "dcn", "tagger": "tagger"}
HEADS_KINDS = ("pipeline", "sorted", "train")
PAPER_FILES = {path.name: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(PAPERS.glob("*.yaml"))}


@lru_cache(maxsize=None)
def load(name: str):
    """A record of benchmarks/results/ by file name (read once)."""
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def leaves(value, path=()):
    """(path of keys, item) for every summary (a dict with a "mean") and every number a record holds, at any depth
    (a summary's numbers too)."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, float(value)
    elif isinstance(value, dict):
        if "mean" in value:
            yield path, value
        for key, item in value.items():
            yield from leaves(item, path + (str(key),))
    elif isinstance(value, list):
        for item in value:
            yield from leaves(item, path)


def task_of(label: str):
    """The record key of the task a row's label names last ("multi-task (CoNLL-2000 + EWT UPOS), EWT UPOS
    accuracy": ewt_upos; "CoNLL-2000, 10% of the labels": conll2000-10pct), or None."""
    found = [(label.rfind(name), key) for name, key in TASKS.items() if label and name in label]
    return max(found)[1] if found else None


def scoped(records: dict, label: str = None, summary_row: bool = False) -> tuple:
    """(numbers, summaries) of the records a line is checked against. A line `label` naming a task: in a record that
    has that task's key, only what is under it. A summary row's summaries also only under a test metric
    (test_accuracy, test_f1, test), and inside or outside the comparison and multi-task sections as its label says
    (SECTIONS)."""
    task, values, summaries = task_of(label), [], []
    for record in records.values():
        found = list(leaves(record))
        if task is not None and any(task in path for path, _ in found):
            found = [(path, item) for path, item in found if task in path]
        for path, item in found:
            if isinstance(item, float):
                values.append(item)
            elif not summary_row or (any(key.startswith("test") for key in path) and all(
                    (word in label) == (key in path) for word, key in SECTIONS.items())):
                summaries.append(item)
    return values, summaries


def shown_as(figure: str, value: float, unit: str = None) -> bool:
    """`value` as the page writes it: at the figure's precision (half a last digit either way), a figure without a
    sign positive; a fraction (at most 1) also as a percentage (an F1 of 0.2592 is 25.92), bytes as MB or GB where the
    page says so."""
    digits = len(figure.split(".")[1])
    target = float(figure.replace("−", "-").replace(",", ""))
    candidates = [value] + ([100 * value] if abs(value) <= 1 else []) + (
        [value / 1e6] if unit == "MB" else [value / 1e9] if unit == "GB" else [])
    return any(abs(candidate - target) <= 0.5 * 10 ** -digits + 1e-9 for candidate in candidates)


def spread_in(match, summaries) -> bool:
    """"mean ± std (n)" is one summary: its mean, std and (when shown) number of seeds."""
    mean, std, n = match.groups()
    return any(isinstance(d.get("std"), (int, float)) and shown_as(mean, d["mean"]) and shown_as(std, d["std"])
               and (n is None or d.get("n", len(d.get("seeds", []))) == int(n)) for d in summaries)


def interval_in(match, summaries) -> bool:
    """"mean [low, high] (higher/n higher)" is one paired difference: mean, 95% bounds (`ci95`, or `low`/`high`),
    the seeds where the system is higher and the pairs."""
    mean, low, high, higher, n = match.groups()
    for d in summaries:
        bounds = d.get("ci95") or [d.get("low"), d.get("high")]
        if None in bounds or not (shown_as(mean, d["mean"]) and shown_as(low, bounds[0]) and shown_as(high, bounds[1])):
            continue
        if (higher is None or d.get("higher_on") == int(higher)) and (
                n is None or d.get("n", len(d.get("seeds", []))) == int(n)):
            return True
    return False


def mask(text: str, match, groups) -> str:
    """The text with the match's figure groups hidden (#) from the later checks."""
    for group in groups:
        if match.group(group) is not None:
            start, end = match.span(group)
            text = text[:start] + "#" * (end - start) + text[end:]
    return text


# ---------------------------------------------------------------------------------------------------------------
# Figures the page computes from a record
# ---------------------------------------------------------------------------------------------------------------


def epoch_ratio(record, task: str, field: str = "epoch_train_seconds") -> float:
    """bcn_cli_training.json: the mean of a task's two timed runs with every head LSTM packed ("before") over the
    mean with them unpacked ("now"), of their epoch (or whole command's) seconds."""
    seconds = {side: [run[field] for run in record["runs"]
                      if run["task"] == task and run["timed"] and run["side"] == side] for side in ("before", "now")}
    assert all(len(times) == 2 for times in seconds.values()), seconds
    return sum(seconds["before"]) / sum(seconds["now"])


def fidelity_accuracies(record, side):
    """The 1-epoch BCN TREC-6 test accuracies of fidelity.json's old forms ("before") or the papers' ("paper")."""
    return [run["test_accuracy"] for run in record["bcn_trec6"][side]["runs"]]


# a pattern of the line or table row that holds a computed figure (group 1) -> the computation from the records
# cited there and the papers' files, by name; each pattern matches the page exactly once
DERIVED = {
    r"BCN CLI epoch.*?\| ([\d.]+)×": lambda sources: epoch_ratio(sources["bcn_cli_training.json"], "sst5"),
    r"TREC-6 [\d., ]+ vs [\d., ]+ \(([\d.]+)×": lambda sources: epoch_ratio(sources["bcn_cli_training.json"], "trec6"),
    r"SST-5 [\d., ]+ vs [\d., ]+ \(\*\*([\d.]+)×": lambda sources: epoch_ratio(sources["bcn_cli_training.json"],
                                                                            "sst5"),
    r"whole command: SST-5 [\d., ]+ vs [\d., ]+ s \(([\d.]+)×": lambda sources: epoch_ratio(
        sources["bcn_cli_training.json"], "sst5", "wall_seconds"),
    r"([\d.]+) on the H200's 4–10": lambda sources: statistics.mean(
        run["test_accuracy"] for run in sources["classification.json"]["results"]["trec6"]["vectors"]["runs"]
        if 4 <= run["seed"] <= 10),
    r"old [\d.]+ ± ([\d.]+)": lambda sources: statistics.stdev(
        fidelity_accuracies(sources["fidelity.json"], "before")),
    r"paper forms [\d.]+ ± ([\d.]+)": lambda sources: statistics.stdev(
        fidelity_accuracies(sources["fidelity.json"], "paper")),
    r"paired \+[\d.]+ ± ([\d.]+)": lambda sources: statistics.stdev(
        paper - before for paper, before in zip(fidelity_accuracies(sources["fidelity.json"], "paper"),
                                                fidelity_accuracies(sources["fidelity.json"], "before"))),
    r"≥ ([\d.]+) its code's README": lambda sources: sources["clark2018.yaml"]["readme_chunking"]["test_f1_at_least"],
    r"([\d.]+) CVT \+ multi-task \+ large": lambda sources: sources["clark2018.yaml"]["earlier_version_chunking"][
        "cvt_multitask_large_f1"],
}


# ---------------------------------------------------------------------------------------------------------------
# The page as blocks
# ---------------------------------------------------------------------------------------------------------------


def cells(line: str) -> list:
    """A table row's cells (an escaped `\\|` stays inside its cell)."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def page_blocks():
    """Each table and paragraph of RESULTS.md's `## ` sections (code blocks left out) as (section title, kind
    "table" or "prose", its lines, the records it is checked against: those it and its section's heading cite, a
    table's also those of the paragraph above it; its section's when that is none)."""
    for section in PAGE.read_text(encoding="utf-8").split("\n## ")[1:]:
        title, *lines = re.sub(r"\n```.*?\n```", "\n", section, flags=re.S).split("\n")
        section_records, heading = set(CITED.findall(section)), set(CITED.findall(title))
        above, i = set(), 0  # the records of the paragraph above

        def table_at(k):
            return lines[k].startswith("|") and k + 1 < len(lines) and SEPARATOR.fullmatch(lines[k + 1].strip())

        while i < len(lines):
            if table_at(i):
                end = i + 2
                while end < len(lines) and lines[end].startswith("|"):
                    end += 1
                own = set(CITED.findall("\n".join(lines[i:end])))
                yield title, "table", [lines[i]] + lines[i + 2:end], (own | above | heading) or section_records
                i = end
            elif lines[i].strip():
                end = i + 1
                while end < len(lines) and lines[end].strip() and not table_at(end):
                    end += 1
                above = set(CITED.findall("\n".join(lines[i:end])))
                yield title, "prose", lines[i:end], (above | heading) or section_records
                i = end
            else:
                i += 1


def heads_row(row: list, records: dict) -> list:
    """What a row of the heads' table states that its record does not: the auto / reference ratios to the roofline
    of the pipeline, length-sorted and training measurements, and "ours" tokens/s of each (and of a CVT step pair)."""
    section, gpu = row[0].removesuffix(", H200"), row[0].endswith(", H200")
    measured = records["heads_cuda.json" if gpu else "heads.json"]["results"][HEADS_SECTIONS[section]]
    measured = measured[f"threads_{row[1]}"]
    wrong = []
    for kind, cell in zip(HEADS_KINDS, row[2:5]):
        shown = [match.group(1) for match in FIGURE.finditer(cell)]
        expected = [measured[kind][f"ratio_{side}_to_roofline"] for side in ("auto", "reference")]
        if len(shown) != 2 or not all(map(shown_as, shown, expected)):
            wrong.append(f"{kind} {cell} is not {expected}")
    speeds = [int(n.replace(",", "")) for n in re.findall(r"\d[\d,]*", row[5])]
    expected = [measured[kind]["auto"]["tokens_per_s"] for kind in HEADS_KINDS]
    if "cvt_step_pair" in measured:
        expected.append(measured["cvt_step_pair"]["tokens_per_s"])  # ours alone: no roofline to it
    if len(speeds) != len(expected) or any(abs(shown - value) > 0.5 for shown, value in zip(speeds, expected)):
        wrong.append(f"tokens/s {row[5]} is not {expected}")
    return wrong


# ---------------------------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------------------------


def text_figures(text: str, records: dict, label: str = None, summary_row: bool = False) -> tuple:
    """(figures checked, what is wrong) in `text`: computed figures against DERIVED, goals and settings left out,
    summaries as summaries, every other decimal figure as a value, in the scope `scoped` gives."""
    checked, wrong = 0, []
    for pattern, compute in DERIVED.items():
        for match in re.finditer(pattern, text):
            checked += 1
            if not shown_as(match.group(1), compute({**records, **PAPER_FILES})):
                wrong.append(f"{match.group(1)} is not its computation")
            text = mask(text, match, (1,))
    for match in GOAL.finditer(text):
        text = mask(text, match, (1,))
    values, summaries = scoped(records, label, summary_row)
    for pattern, found_in in ((SPREAD, spread_in), (INTERVAL, interval_in)):
        for match in pattern.finditer(text):
            checked += 1
            if not found_in(match, summaries):
                wrong.append(f"{match.group(0)} is no summary of {sorted(records)} there")
            text = mask(text, match, (1, 2, 3))
    for match in FIGURE.finditer(text.replace("`", " ")):
        figure, unit = match.group(1), match.group(2) or match.group(3)
        checked += 1
        if not any(shown_as(figure, value, unit) for value in values):
            wrong.append(f"{figure} is no value of {sorted(records)} there")
    return checked, wrong


def paper_cell(row: list) -> tuple:
    """(figures checked, what is wrong) in a summary row's paper column. A BCN or DCN row ("BCN random / vectors,
    TREC-6"; "BCN vectors / + CoVe-S, SST-2" is "vectors" and "vectors + CoVe-S"): "–", or one figure or "–" a
    system, each Table 2's cell of its task and system; another row: numbers of its paper's file."""
    label, paper = row[0], row[2]
    match = re.match(r"(?:BCN|DCN) (.+?), (" + "|".join(TASKS) + ")", label)
    systems = match.group(1).split(" / ") if match else []
    systems = [systems[0]] + [f"{systems[0]} {s}" if s.startswith("+ ") else s for s in systems[1:]] if systems else []
    if not any(system in TABLE2_COLUMNS for system in systems):
        name = "clark2018.yaml" if label.startswith("tagger") else "mccann2017.yaml"
        numbers = [n for _, n in leaves(PAPER_FILES[name]) if isinstance(n, float)]
        shown = [m.group(1) for m in FIGURE.finditer(paper)]
        return len(shown), [f"paper {f} not in {name}" for f in shown if not any(shown_as(f, n) for n in numbers)]
    if paper == "–":
        return 1, []
    table2 = PAPER_FILES["mccann2017.yaml"]["table2"]
    cells_of_task = dict(zip(table2["columns"], table2["rows"][TASKS[match.group(2)]]))
    parts = paper.split(" / ")
    wrong = [] if len(parts) == len(systems) else [f"paper {paper}: {len(systems)} systems, {len(parts)} figures"]
    for system, part in zip(systems, parts):
        if part != "–" and not (system in TABLE2_COLUMNS and shown_as(part, cells_of_task[TABLE2_COLUMNS[system]])):
            wrong.append(f"paper {part} is not Table 2's {system}")
    return len(parts), wrong


def block_figures(title: str, kind: str, lines: list, names: set) -> tuple:
    """(figures checked, what is wrong, each named by its line) in one table or paragraph of the page."""
    records = {name: load(name) for name in names}
    if kind == "prose":
        count, wrong = text_figures(" ".join(lines), records)
        return count, [f"{title[:30]} | {lines[0][:50]}: {message}" for message in wrong]
    checked, stale = 0, []
    for row in map(cells, lines[1:]):  # lines[0]: the header
        if lines[0].startswith("| section | threads"):
            count, wrong = 1, heads_row(row, records)
        elif title == "Summary":  # the row's own records, its score and interval columns; the paper column
            own = {name: load(name) for name in CITED.findall(row[-1])}
            count, wrong = text_figures(" | ".join(row[:2] + ["#"] + row[3:]), own, row[0], summary_row=True)
            more, wrong_paper = paper_cell(row)
            count, wrong = count + more, wrong + wrong_paper
        else:
            count, wrong = text_figures(" | ".join(row), records, row[0])
        checked += count
        stale += [f"{title[:30]} | {row[0][:50]}: {message}" for message in wrong]
    return checked, stale


def test_results_page_states_its_records_figures():
    """Every figure RESULTS.md states against the records cited beside it (this module's docstring): a stale, a
    mistyped or a sign-changed one fails, naming its line; every table or paragraph holding a decimal figure other
    than a goal has checks, and the summary and the heads' table are among them."""
    stale, unchecked, kinds = [], [], set()
    for title, kind, lines, names in page_blocks():
        count, wrong = block_figures(title, kind, lines, names)
        stale += wrong
        if FIGURE.search(GOAL.sub("", " ".join(lines[1:] if kind == "table" else lines))) and count == 0:
            unchecked.append(f"{title[:30]} | {lines[0][:50]}")
        kinds.add("summary" if kind == "table" and title == "Summary" else
                  "heads" if lines[0].startswith("| section | threads") else kind)
    assert stale == []
    assert unchecked == []
    assert {"summary", "heads", "table", "prose"} <= kinds


def test_each_computed_figure_is_on_the_page_once():
    """A DERIVED pattern that stops matching (the page reworded) would let its figure fall to the plain check."""
    texts = [" ".join(lines) for _, _, lines, _ in page_blocks()]
    found = {pattern: sum(len(re.findall(pattern, text)) for text in texts) for pattern in DERIVED}
    assert found == {pattern: 1 for pattern in DERIVED}


@pytest.mark.parametrize("text, spread, interval", [
    ("| BCN x, TREC-6 | 88.0 ± 1.64 (10) |", ("88.0", "1.64", "10"), None),
    ("random −2.12 [−4.06, −0.18] (3/10 higher)", None, ("−2.12", "−4.06", "−0.18", "3", "10")),
    ("+1.00 [−8.90, +10.90] (1; 1 tie)", None, ("+1.00", "−8.90", "+10.90", "1", None)),
    ("−0.95 [−1.78, −0.12] | (89.90 CVT)", None, ("−0.95", "−1.78", "−0.12", None, None)),
])
def test_summary_patterns_read_what_the_page_writes(text, spread, interval):
    """SPREAD and INTERVAL read the page's shapes (the count in parentheses only when it is one)."""
    found = SPREAD.search(text), INTERVAL.search(text)
    assert (found[0].groups() if found[0] else None, found[1].groups() if found[1] else None) == (spread, interval)


def test_signs_count():
    """−0.54 is not 0.54, and an unsigned figure is positive."""
    assert shown_as("−0.54", -0.54) and not shown_as("0.54", -0.54) and not shown_as("+0.54", -0.54)
    assert shown_as("0.54", 0.54) and not shown_as("−0.54", 0.54)
