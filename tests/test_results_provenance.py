"""The records behind benchmarks/RESULTS.md: every JSON in benchmarks/results/ says at its top level which command made
it, at which commit and on which machine (a record whose fields were filled in later from git history says so), and
RESULTS.md stays short, cites only records that exist, and states in its tables only figures its records hold."""

import json
import re

import pytest

from conftest import REPO

BENCHMARKS = REPO / "benchmarks"
RESULTS = BENCHMARKS / "results"
RECORDS = sorted(RESULTS.glob("*.json"))
COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
MAX_LINES = 250
# a decimal figure as the page writes it (−0.54, +2.85, 1,609.8), not part of a version (2.13.0), path or name
FIGURE = re.compile(r"(?<![\w/.#])[−+-]?\d[\d,]*\.\d+(?![\w/]|\.\d)")


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


def sst5_epoch_ratio(record) -> float:
    """The summary's BCN CLI figure: mean timed SST-5 epoch seconds with every head LSTM packed / unpacked."""
    seconds = {side: [run["epoch_train_seconds"] for run in record["runs"]
                      if run["task"] == "sst5" and run["timed"] and run["side"] == side] for side in ("before", "now")}
    assert all(len(times) == 2 for times in seconds.values()), seconds
    return sum(seconds["before"]) / sum(seconds["now"])


# figures of the summary that are computed from the record their row names ((row start, figure) -> the computation)
DERIVED = {("BCN CLI epoch", "1.06"): lambda records: sst5_epoch_ratio(records["bcn_cli_training.json"])}


def shown_as(figure: str, value: float) -> bool:
    """The record's value written at the figure's precision, as itself or as a percentage (a fraction F1 of 0.2592
    is the page's 25.92); the sign is the page's ("+2.85" for 2.85)."""
    digits = len(figure.split(".")[1])
    target = abs(float(figure.replace("−", "-").replace(",", "")))
    return any(abs(round(abs(scaled), digits) - target) < 1e-9 for scaled in (value, 100 * value))


def page_tables():
    """(section title, records the section cites, table rows as cell lists) for each `## ` section of RESULTS.md."""
    text = (BENCHMARKS / "RESULTS.md").read_text(encoding="utf-8")
    for section in text.split("\n## ")[1:]:
        rows = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in section.splitlines()
                if line.startswith("|") and not re.fullmatch(r"\|[\s|:-]+\|?", line.strip())]
        yield section.splitlines()[0], set(re.findall(r"results/([\w.+-]+\.json)", section)), rows


def test_results_page_tables_state_their_records_figures():
    """Every decimal figure in RESULTS.md's tables is a value of the records cited beside it, at the page's precision:
    a summary row's figures (its own score and interval columns; the first column names the system, and the paper's
    figures are the papers') in the records that row names, any other table's in its section's records. A figure the
    page computes from its record is listed in DERIVED and computed here. A stale figure, one copied wrong, or one
    whose record is gone fails, naming the row."""
    stale, checked_figures = [], 0
    for title, section_records, rows in page_tables():
        summary = title == "Summary"
        for cells in rows[1:]:  # rows[0]: the header
            names = set(re.findall(r"results/([\w.+-]+\.json)", cells[-1])) if summary else section_records
            records = {name: load(RESULTS / name) for name in names}
            values = [number for record in records.values() for number in record_numbers(record)]
            checked = " ".join(cells[1:2] + cells[3:4]) if summary else " ".join(cells)
            for figure in FIGURE.findall(checked.replace("`", " ")):
                checked_figures += 1
                derived = next((compute for (start, shown), compute in DERIVED.items()
                                if cells[0].startswith(start) and shown == figure), None)
                found = shown_as(figure, derived(records)) if derived else any(shown_as(figure, v) for v in values)
                if not found:
                    stale.append(f"{title} | {cells[0][:60]}: {figure} not in {sorted(names)}")
    assert stale == []
    assert checked_figures > 400, checked_figures  # the page's tables, not a parse that found none
