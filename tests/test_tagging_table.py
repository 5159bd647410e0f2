"""The tagging table's plan and runner (`modeling_cove.benchmarking.tagging_table`, scripts/run_tagging_table.py)."""

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from modeling_cove.benchmarking import tagging, tagging_table
from modeling_cove.benchmarking.tagging_table import TableRun, run_finished, run_table, table_runs
from modeling_cove.training.tagger import TaggerSettings
from modeling_cove.training.cli import RunArguments, parse_options


def test_table_runs_cover_every_cell_with_its_seeds_seed_major():
    runs = table_runs("vocab", "cove", "bilm")
    count = {}
    for run in runs:
        count[(run.row, run.column)] = count.get((run.row, run.column), 0) + 1
    assert {key: n for key, n in count.items() if key[0] == "conll2000"} == {
        ("conll2000", c): 5 for c in ("supervised", "vectors+cove", "vectors+bilm", "cvt")}
    assert count[("wnut17", "supervised+case")] == 5 and count[("ewt_upos", "vectors+bilm")] == 3
    assert count[("conll2000-10pct", "cvt")] == 3 and count[("multitask", "cvt")] == 3
    assert len(runs) == 20 + 25 + 12 + 6 + 3
    seeds = [run.seed for run in runs]
    assert seeds == sorted(seeds)  # every cell's seed 1 before any seed 2
    assert len({run.folder for run in runs}) == len(runs)
    for run in runs:  # the folders the collector reads
        assert tagging.RUN_FOLDER.match(Path(run.folder).name)


def test_table_run_flags_make_the_runs_the_collector_expects():
    runs = {run.folder: run for run in table_runs("vocab", "cove", "bilm")}
    small_cvt = runs["conll2000-10pct/cvt-seed2"]
    assert small_cvt.encoder == "vocab"
    assert small_cvt.flags == ("--task", "conll2000", "--train-fraction", "0.1", "--epochs", "40", "--cvt",
                               "--unlabeled", "train-rest")
    assert "--unlabeled" not in runs["conll2000-10pct/supervised-seed2"].flags
    assert runs["multitask/cvt-seed1"].flags == ("--task", "conll2000", "ewt_upos", "--cvt")
    bilm = runs["wnut17/vectors+bilm-seed3"]
    assert (bilm.encoder, bilm.flags) == ("bilm", ("--task", "wnut17", "--input", "vectors+scalar_mix"))
    assert runs["ewt_upos/vectors+cove-seed1"].encoder == "cove"
    # every command parses as cove-train-tagger's own flags, into the settings the folder names
    command = runs["wnut17/supervised+case-seed4"].command("DATA", "out", threads=1)
    assert command[1:3] == ["-m", "modeling_cove.training.tagger"]
    settings, run = parse_options((TaggerSettings, RunArguments), command[3:])
    assert (settings.task, settings.seed, settings.case_dim, settings.output_dir) == (
        ["wnut17"], 4, 16, str(Path("out") / "wnut17" / "supervised+case-seed4"))
    assert (run.threads, settings.no_save_model, settings.overwrite) == (1, True, True)
    assert [r.folder for r in table_runs("v", "c", "b", rows=["ewt_upos"], columns=["cvt"])] == [
        "ewt_upos/cvt-seed1", "ewt_upos/cvt-seed2", "ewt_upos/cvt-seed3"]
    with pytest.raises(ValueError, match="unknown rows/columns"):
        table_runs("v", "c", "b", rows=["conll2003"])


@dataclass(frozen=True)
class FakeRun(TableRun):
    """A run whose command is a tiny Python program: `behaviour` "ok" writes a finished metrics.json, "fail" exits
    1, "sleep" outlives any deadline of the test."""

    behaviour: str = "ok"

    def command(self, data_dir, runs_dir, threads):
        out = Path(runs_dir) / self.folder
        program = {
            "ok": f"import json, pathlib; p = pathlib.Path({str(out)!r}); p.mkdir(parents=True, exist_ok=True); "
                  "(p / 'metrics.json').write_text(json.dumps({'results': {}}))",
            "fail": "raise SystemExit(1)",
            "sleep": "import time; time.sleep(60)",
        }[self.behaviour]
        return [sys.executable, "-c", program]


def test_run_table_runs_the_unfinished_skips_and_reports(tmp_path):
    encoder = tmp_path / "enc"
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    runs_dir = tmp_path / "tag"
    done = FakeRun("conll2000", "supervised", 1, str(encoder), ())
    (runs_dir / done.folder).mkdir(parents=True)
    (runs_dir / done.folder / "metrics.json").write_text(json.dumps({"results": {"conll2000": {}}}))
    in_progress = FakeRun("conll2000", "cvt", 1, str(encoder), ())
    (runs_dir / in_progress.folder).mkdir(parents=True)
    (runs_dir / in_progress.folder / "metrics.json").write_text(json.dumps({"epochs": []}))  # no results yet
    assert run_finished(runs_dir, done) and not run_finished(runs_dir, in_progress)
    runs = [done, in_progress, FakeRun("wnut17", "cvt", 1, str(encoder), ()),
            FakeRun("wnut17", "supervised", 1, str(encoder), (), behaviour="fail"),
            FakeRun("wnut17", "vectors+cove", 1, str(tmp_path / "no-encoder"), ())]
    messages = []
    outcome = run_table(runs, runs_dir, "DATA", parallel=2, log=messages.append)
    assert outcome["done_before"] == ["conll2000/supervised-seed1"]
    assert sorted(outcome["finished"]) == ["conll2000/cvt-seed1", "wnut17/cvt-seed1"]
    assert outcome["failed"] == ["wnut17/supervised-seed1"] and outcome["skipped"] == ["wnut17/vectors+cove-seed1"]
    assert (runs_dir / "wnut17" / "cvt-seed1.log").is_file()  # each run's output beside its folder
    assert any("no encoder checkpoint" in m for m in messages)
    # the dry run lists what is left and starts nothing
    outcome = run_table(runs, runs_dir, "DATA", dry_run=True, log=messages.append)
    assert outcome["not_started"] == ["wnut17/supervised-seed1"] and not outcome["finished"]


def test_run_table_stops_at_the_deadline(tmp_path):
    encoder = tmp_path / "enc"
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    runs = [FakeRun("ewt_upos", "supervised", seed, str(encoder), (), behaviour="sleep") for seed in (1, 2)]
    outcome = run_table(runs, tmp_path / "tag", "DATA", parallel=1, deadline_minutes=0.02, log=lambda m: None)
    assert outcome["stopped"] == ["ewt_upos/supervised-seed1"]
    assert outcome["not_started"] == ["ewt_upos/supervised-seed2"]
    with pytest.raises(ValueError, match="at least 1"):
        run_table(runs, tmp_path, "DATA", parallel=0)
    assert set(tagging_table.SEEDS) == set(tagging_table.ROW_COLUMNS)
