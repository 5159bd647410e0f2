"""benchmarks/RESULTS.md is written by hand from the records in benchmarks/results/: every decimal figure it states is
checked here against the records cited beside it, so that a stale, mistyped or sign-flipped figure fails, naming its
line. What "beside it" means, and how precise each check is (docs/results_method.md, "Machines and provenance"):

- a summary row: its own records (last column). "mean ± std (n)" and "mean [low, high] (h/n higher)" are one
  summary of them (the mean, spread, seeds and higher count of one dict together); the paper column is Table 2's
  cell of the row's task and systems (BCN, DCN), else a number of the paper's file in configuration/papers/;
- the heads' speed table: each cell the field of heads.json / heads_cuda.json it reads, integers too;
- any other table or paragraph: the records it and its section's heading cite (a table also those of the paragraph
  above it; either, citing none, its section's), each figure a value of them at the precision shown, signed where the
  page writes a sign;
- a figure the page computes (a mean over some seeds, a ratio of two timings): DERIVED, computed here.

The loose part: a figure checked only as "a value of the records" passes if any value of those records rounds to it,
so a figure copied from the wrong field of the same records can pass; the summaries and the heads' table are checked
field by field. Not checked: integers outside the heads' table, figures in scientific notation (2.6e-7), the lines
above the first `## ` and the code blocks.
"""

import json
import re
import statistics

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
# unit after it (MB, GB) when there is one
FIGURE = re.compile(r"(?<![\w/.#])([−+-]?\d[\d,]*\.\d+)(?![\w/]|\.\d)(?: ?(MB|GB)|(?= / [\d.,]+ ?(MB|GB)))?")
# "mean ± std (n)" and "mean [low, high] (higher/n higher)" (or "(higher)", "(higher; ...)"): figures of one summary
SPREAD = re.compile(r"(?<![\w/.#])([−+-]?\d[\d,]*\.\d+) ± (\d+\.\d+)(?: \((\d+)\))?")
INTERVAL = re.compile(r"(?<![\w/.#])([−+-]?\d+\.\d+) \[([−+-]?\d+\.\d+), ([−+-]?\d+\.\d+)\]"
                      r"(?: \((\d+)(?:/(\d+) higher)?)?")
# Table 2's columns (configuration/papers/mccann2017.yaml) of the systems a summary row names, and its tasks
TABLE2_COLUMNS = {"random": "Random", "vectors": "GloVe", "vectors + CoVe-S": "+CoVe-S"}
TABLE2_TASKS = {"TREC-6": "trec6", "TREC-50": "trec50", "SST-2": "sst2", "SST-5": "sst5", "SNLI": "snli",
                "IMDb": "imdb", "SQuAD": "squad"}
# the heads' table: its section column -> the record's section; its columns -> the record's measurement
HEADS_SECTIONS = {"BCN, single texts": "bcn_single", "BCN, pairs": "bcn_pair", "DCN": "dcn", "tagger": "tagger"}
HEADS_KINDS = ("pipeline", "sorted", "train")
PAPER_FILES = {path.name: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(PAPERS.glob("*.yaml"))}


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def numbers(value):
    """Every number a record (or a paper's file) holds, at any depth."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from numbers(item)


def summaries(value):
    """Every dict with a "mean" a record holds, at any depth (a mean ± std over seeds, or a paired difference)."""
    if isinstance(value, dict):
        if "mean" in value:
            yield value
        for item in value.values():
            yield from summaries(item)
    elif isinstance(value, list):
        for item in value:
            yield from summaries(item)


def shown_as(figure: str, value: float, unit: str = None) -> bool:
    """`value` written at the figure's precision (half a last digit either way): signed where the figure has a sign
    (+2.85, −0.54), as a magnitude where it has none; a fraction (at most 1) also as a percentage (an F1 of 0.2592 is
    25.92), bytes as MB or GB where the page says so."""
    digits = len(figure.split(".")[1])
    target = float(figure.replace("−", "-").replace(",", ""))
    candidates = [value] + ([100 * value] if abs(value) <= 1 else []) + (
        [value / 1e6] if unit == "MB" else [value / 1e9] if unit == "GB" else [])
    if figure[0] not in "+−-":
        target, candidates = abs(target), [abs(c) for c in candidates]
    return any(abs(c - target) <= 0.5 * 10 ** -digits + 1e-9 for c in candidates)


def spread_in(match, found) -> bool:
    """"mean ± std (n)" is one summary of the records: its mean, std and (when shown) number of seeds."""
    mean, std, n = match.groups()
    return any(isinstance(d.get("std"), (int, float)) and shown_as(mean, d["mean"]) and shown_as(std, d["std"])
               and (n is None or d.get("n", len(d.get("seeds", []))) == int(n)) for d in found)


def interval_in(match, found) -> bool:
    """"mean [low, high] (higher/n higher)" is one paired difference of the records: mean, 95% bounds (`ci95`, or
    `low`/`high`), the seeds where the system is higher and the pairs."""
    mean, low, high, higher, n = match.groups()
    for d in found:
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


# ---------------------------------------------------------------------------------------------------------------
# The checks
# ---------------------------------------------------------------------------------------------------------------


def table2_cell(label: str, paper: str, table2: dict):
    """(figures the paper column shows, Table 2's values of the row's systems) for a BCN or DCN summary row, or None
    for another row. `label` "BCN random / vectors, TREC-6": Random and GloVe of trec6."""
    match = re.match(r"(?:BCN|DCN) (.+?), (" + "|".join(TABLE2_TASKS) + ")", label)
    if not match:
        return None
    columns, row = table2["columns"], table2["rows"][TABLE2_TASKS[match.group(2)]]
    expected = [row[columns.index(TABLE2_COLUMNS[system])] for system in match.group(1).split(" / ")
                if system in TABLE2_COLUMNS]
    return [match.group(1) for match in FIGURE.finditer(paper)], expected


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


def text_figures(text: str, records: dict, paper_values=None) -> tuple:
    """(figures checked, what is wrong) in `text`: computed figures against DERIVED, summaries as summaries, then
    every other decimal figure as a value of the records (of `paper_values`, when given)."""
    checked, wrong = 0, []
    for pattern, compute in DERIVED.items():
        for match in re.finditer(pattern, text):
            checked += 1
            if not shown_as(match.group(1), compute({**records, **PAPER_FILES})):
                wrong.append(f"{match.group(1)} is not its computation")
            text = mask(text, match, (1,))
    found = [summary for record in records.values() for summary in summaries(record)]
    for pattern, in_records in ((SPREAD, spread_in), (INTERVAL, interval_in)):
        for match in pattern.finditer(text):
            checked += 1
            if not in_records(match, found):
                wrong.append(f"{match.group(0)} is no summary of {sorted(records)}")
            text = mask(text, match, (1, 2, 3))
    values = paper_values if paper_values is not None else [n for record in records.values() for n in numbers(record)]
    for match in FIGURE.finditer(text.replace("`", " ")):
        figure, unit = match.group(1), match.group(2) or match.group(3)
        checked += 1
        if not any(shown_as(figure, value, unit) for value in values):
            wrong.append(f"{figure} not in {'the paper' if paper_values is not None else sorted(records)}")
    return checked, wrong


def test_results_page_states_its_records_figures():
    """Every figure RESULTS.md states against the records cited beside it (this module's docstring): a stale, a
    mistyped or a sign-flipped one fails, naming its line."""
    stale, checked = [], 0
    for title, kind, lines, names in page_blocks():
        records = {name: load(RESULTS / name) for name in names}
        if kind == "prose":
            count, wrong = text_figures(" ".join(lines), records)
            checked += count
            stale += [f"{title[:30]} | {lines[0][:50]}: {message}" for message in wrong]
            continue
        for line in lines[1:]:  # lines[0]: the header
            row = cells(line)
            if lines[0].startswith("| section | threads"):
                checked += 1
                stale += [f"heads | {row[0]}, {row[1]} thread(s): {message}" for message in heads_row(row, records)]
            elif title == "Summary":  # the row's own records; the paper column the paper's
                own = {name: load(RESULTS / name) for name in CITED.findall(row[-1])}
                count, wrong = text_figures(" | ".join(row[:2] + ["#"] + row[3:]), own)
                bcn = table2_cell(row[0], row[2], PAPER_FILES["mccann2017.yaml"]["table2"])
                if bcn is not None:
                    count += 1
                    shown, expected = bcn
                    if len(shown) != len(expected) or not all(map(shown_as, shown, expected)):
                        wrong.append(f"paper {row[2]} is not Table 2's {expected}")
                else:
                    paper = PAPER_FILES["clark2018.yaml" if row[0].startswith("tagger") else "mccann2017.yaml"]
                    more, wrong_paper = text_figures(row[2], own, paper_values=list(numbers(paper)))
                    count, wrong = count + more, wrong + wrong_paper
                checked += count
                stale += [f"Summary | {row[0][:50]}: {message}" for message in wrong]
            else:
                count, wrong = text_figures(" | ".join(row), records)
                checked += count
                stale += [f"{title[:30]} | {row[0][:50]}: {message}" for message in wrong]
    assert stale == []
    assert checked > 500, checked  # the whole page, not a parse that found nothing


def test_each_computed_figure_is_on_the_page_once():
    """A DERIVED pattern that stops matching (the page reworded) would let its figure fall to the looser check."""
    text = PAGE.read_text(encoding="utf-8")
    assert {pattern: len(re.findall(pattern, text)) for pattern in DERIVED} == {pattern: 1 for pattern in DERIVED}


@pytest.mark.parametrize("line", ["| BCN x, TREC-6 | 88.0 ± 1.64 (10) |", "0.939× fp32"])
def test_figures_and_summaries_are_found(line):
    """The patterns find what the page writes (guards the regexes against a silent change)."""
    assert FIGURE.findall(line) and (SPREAD.search(line) is not None) == ("±" in line)
