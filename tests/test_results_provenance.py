"""The records behind benchmarks/RESULTS.md: every JSON in benchmarks/results/ says at its top level which command made
it, at which commit and on which machine (a record whose fields were filled in later from git history says so), and
RESULTS.md stays short, cites only records that exist, and states in its tables only figures its records hold."""

import json
import re
import statistics

import pytest
import yaml

from conftest import REPO

BENCHMARKS = REPO / "benchmarks"
RESULTS = BENCHMARKS / "results"
RECORDS = sorted(RESULTS.glob("*.json"))
COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
MAX_LINES = 250
PAPERS = REPO / "configuration" / "papers"  # the papers' numbers, typed once
# a decimal figure as the page writes it (−0.54, +2.85, 1,609.8), not part of a version (2.13.0), path or name
FIGURE = re.compile(r"(?<![\w/.#])[−+-]?\d[\d,]*\.\d+(?![\w/]|\.\d)")
# "mean ± std (n)" and "mean [low, high] (higher/n higher)" (or "(higher)", "(higher; ...)"): figures of one summary
SPREAD = re.compile(r"(?<![\w/.#])([−+-]?\d[\d,]*\.\d+) ± (\d+\.\d+)(?: \((\d+)\))?")
INTERVAL = re.compile(r"(?<![\w/.#])([−+-]?\d+\.\d+) \[([−+-]?\d+\.\d+), ([−+-]?\d+\.\d+)\]"
                      r"(?: \((\d+)(?:/(\d+) higher)?)?")


def load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def names_a_machine(machine) -> bool:
    """A CPU (model name) or a GPU in a run's machine dict; for a collected table, a list of such lines."""
    if isinstance(machine, dict):
        return bool(machine.get("cpu") or machine.get("gpu"))
    if isinstance(machine, list):
        return bool(machine) and all(isinstance(entry, str) and entry.strip() for entry in machine)
    return isinstance(machine, str) and bool(machine.strip())


def test_there_are_records():
    assert len(RECORDS) >= 20, RECORDS


@pytest.mark.parametrize("path", RECORDS, ids=[p.name for p in RECORDS])
def test_record_names_command_commit_and_machine(path):
    record = load(path)
    assert isinstance(record, dict)
    assert isinstance(record.get("command"), str) and record["command"].strip(), "no command"
    commit = record.get("commit")
    assert isinstance(commit, str) and (COMMIT.fullmatch(commit) or record.get("reconstructed") is True), commit
    assert names_a_machine(record.get("machine")), record.get("machine")
    if "reconstructed" in record:
        assert record["reconstructed"] is True
        assert record.get("reconstructed_from"), "a reconstructed record says where its fields come from"


def test_results_page_is_short_and_cites_existing_records():
    text = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_LINES
    cited = set(re.findall(r"results/([\w.+-]+\.(?:json|png))", text))
    assert cited, "RESULTS.md names its records as results/<name>.json"
    missing = sorted(name for name in cited if not (RESULTS / name).is_file())
    assert missing == []
    # every record is on the page: none kept that nobody reads, none cited only by history
    uncited = sorted(p.name for p in RECORDS if p.name not in cited)
    assert uncited == []


def test_results_page_links_resolve():
    text = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    targets = {target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)}
    broken = sorted(t for t in targets if t and not (BENCHMARKS / t).resolve().exists())
    assert broken == []


def record_numbers(value):
    """Every number a record holds, at any depth."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield float(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from record_numbers(item)
    elif isinstance(value, list):
        for item in value:
            yield from record_numbers(item)


def shown_as(figure: str, value: float) -> bool:
    """The record's value written at the figure's precision (half a last digit either way), as itself, as a
    percentage (a fraction F1 of 0.2592 is the page's 25.92) or bytes as MB; the sign is the page's (+2.85 for 2.85)."""
    digits = len(figure.split(".")[1])
    target = abs(float(figure.replace("−", "-").replace(",", "")))
    return any(abs(abs(scaled) - target) <= 0.5 * 10 ** -digits + 1e-9 for scaled in (value, 100 * value, value / 1e6))


def sst5_epoch_ratio(record) -> float:
    """Mean timed SST-5 epoch seconds with every head LSTM packed / unpacked (bcn_cli_training.json)."""
    seconds = {side: [run["epoch_train_seconds"] for run in record["runs"]
                      if run["task"] == "sst5" and run["timed"] and run["side"] == side] for side in ("before", "now")}
    assert all(len(times) == 2 for times in seconds.values()), seconds
    return sum(seconds["before"]) / sum(seconds["now"])


def fidelity_accuracies(record, side):
    """The 1-epoch BCN TREC-6 test accuracies of fidelity.json's old forms ("before") or the papers' ("paper")."""
    return [run["test_accuracy"] for run in record["bcn_trec6"][side]["runs"]]


# figures the page computes from a record: a pattern of the line or table row that holds one (group 1: the figure) ->
# the computation from the records cited there, by name
DERIVED = {
    r"BCN CLI epoch.*?\| ([\d.]+)×": lambda records: sst5_epoch_ratio(records["bcn_cli_training.json"]),
    r"([\d.]+) on the H200's 4–10": lambda records: statistics.mean(
        run["test_accuracy"] for run in records["classification.json"]["results"]["trec6"]["vectors"]["runs"]
        if 4 <= run["seed"] <= 10),
    r"old [\d.]+ ± ([\d.]+)": lambda records: statistics.stdev(
        fidelity_accuracies(records["fidelity.json"], "before")),
    r"paper forms [\d.]+ ± ([\d.]+)": lambda records: statistics.stdev(
        fidelity_accuracies(records["fidelity.json"], "paper")),
    r"paired \+[\d.]+ ± ([\d.]+)": lambda records: statistics.stdev(
        paper - before for paper, before in zip(fidelity_accuracies(records["fidelity.json"], "paper"),
                                                fidelity_accuracies(records["fidelity.json"], "before"))),
}


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


def page_sections():
    """(title, records the section cites, table rows as cell lists, prose lines outside tables and code blocks) for
    each `## ` section of RESULTS.md."""
    text = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    for section in text.split("\n## ")[1:]:
        lines = re.sub(r"\n```.*?\n```", "", section, flags=re.S).splitlines()
        rows = [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines
                if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|?", line.strip())]
        prose = [line for line in lines[1:] if not line.startswith("|")]
        yield lines[0], set(re.findall(r"results/([\w.+-]+\.json)", section)), rows, prose


def line_figures(line: str, summary_row: bool, records: dict, paper_numbers: list):
    """(how many figures the line states, the ones its records do not hold): computed ones against DERIVED, "mean ±
    std (n)" and intervals as summaries of the records, a summary row's paper column against the papers' numbers,
    any other decimal figure as a value of the records (a summary row: its score and interval columns only)."""
    checked, stale = 0, []
    for pattern, compute in DERIVED.items():
        for match in re.finditer(pattern, line):
            checked += 1
            if not shown_as(match.group(1), compute(records)):
                stale.append(f"{match.group(1)} is not its computation")
            line = mask(line, match, (1,))  # checked: hidden from the checks below
    cells = line.split(" | ")
    text = " ".join(cells[1:2] + cells[3:4]) if summary_row else line
    found = [summary for record in records.values() for summary in summaries(record)]
    for pattern, in_records in ((SPREAD, spread_in), (INTERVAL, interval_in)):
        for match in pattern.finditer(text):
            checked += 1
            if not in_records(match, found):
                stale.append(f"{match.group(0)} is no summary of {sorted(records)}")
            text = mask(text, match, (1, 2, 3))
    papers = [(figure, paper_numbers) for figure in FIGURE.findall(cells[2])] if summary_row else []
    values = [number for record in records.values() for number in record_numbers(record)]
    for figure, holders in papers + [(figure, values) for figure in FIGURE.findall(text.replace("`", " "))]:
        checked += 1
        if not any(shown_as(figure, value) for value in holders):
            stale.append(f"{figure} not in {PAPERS.name}/" if holders is paper_numbers else
                         f"{figure} not in {sorted(records)}")
    return checked, stale


def test_results_page_states_its_records_figures():
    """Every decimal figure RESULTS.md states is a value of the records cited beside it, at the precision shown: a
    summary row's (its score and interval columns; the first names the system) in the records that row names, its
    paper column's in configuration/papers/, any other line's in its section's records. A figure the page computes
    from a record is in DERIVED and computed here. A stale figure, a mistyped one, or one whose record is gone fails,
    naming its line; one moved to another cell of the same record does not (the check does not know which field a
    cell reads)."""
    stale, checked = [], 0
    paper_numbers = [number for path in sorted(PAPERS.glob("*.yaml"))
                     for number in record_numbers(yaml.safe_load(path.read_text(encoding="utf-8")))]
    for title, section_records, rows, prose in page_sections():
        summary = title == "Summary"
        lines = [(" | ".join(cells), True) for cells in rows[1:]] + [(line, False) for line in prose]  # rows[0]: header
        for line, row in lines:
            names = set(re.findall(r"results/([\w.+-]+\.json)", line.split(" | ")[-1])) if summary and row \
                else section_records
            count, wrong = line_figures(line, summary and row, {name: load(RESULTS / name) for name in names},
                                        paper_numbers)
            checked += count
            stale += [f"{title[:40]} | {line[:60]}: {message}" for message in wrong]
    assert stale == []
    assert checked > 500, checked  # the whole page, not a parse that found nothing
