"""The records behind benchmarks/RESULTS.md: every JSON in benchmarks/results/ says at its top level which command made
it, at which commit and on which machine (a record whose fields were filled in later from git history says so), and
RESULTS.md stays short and cites only records that exist (its figures against those records: test_results_page.py)."""

import json
import re

import pytest

from conftest import REPO

BENCHMARKS = REPO / "benchmarks"
RESULTS = BENCHMARKS / "results"
RECORDS = sorted(RESULTS.glob("*.json"))
COMMIT = re.compile(r"[0-9a-f]{7,40}(-dirty)?")
MAX_LINES = 250


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
