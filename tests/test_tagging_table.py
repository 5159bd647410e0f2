"""The tagging table's plan and runner (`instruments.tagging_table`, benchmarks/run_tagging_table.py)."""

import json
import runpy
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from instruments import tagging, tagging_table
from instruments.tagging_table import TableRun, run_finished, run_table, table_runs
from modeling_cove.training.commands.train_tagger import ADDED_SETTINGS, RESUME_KEYS, RESUME_SAME, TaggerSettings
from modeling_cove.training.loops.accelerate_loop import check_run_folder
from modeling_cove.training.common.cli import RunArguments, parse_options


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


def test_table_run_flags_make_the_runs_the_collector_expects(tmp_path):
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
    command = runs["wnut17/supervised+case-seed4"].command(tmp_path, "out", threads=1)  # --data-dir: a folder
    assert command[1:3] == ["-m", "modeling_cove.training.commands.train_tagger"]
    settings, run = parse_options((TaggerSettings, RunArguments), command[3:])
    assert (settings.task, settings.seed, settings.case_dim, settings.output_dir, settings.data_dir) == (
        ["wnut17"], 4, 16, str(Path("out") / "wnut17" / "supervised+case-seed4"), str(tmp_path))
    assert (run.threads, settings.no_save_model, settings.overwrite) == (1, True, True)
    assert [r.folder for r in table_runs("v", "c", "b", rows=["ewt_upos"], columns=["cvt"])] == [
        "ewt_upos/cvt-seed1", "ewt_upos/cvt-seed2", "ewt_upos/cvt-seed3"]
    with pytest.raises(ValueError, match="unknown rows/columns"):
        table_runs("v", "c", "b", rows=["conll2003"])


@dataclass(frozen=True)
class FakeRun(TableRun):
    """A run whose command is a tiny Python program: `behaviour` "ok" writes a finished metrics.json, "fail" exits
    1, "silent" exits 0 without results, "sleep" outlives any deadline of the test."""

    behaviour: str = "ok"

    def settings(self):
        return {"seed": self.seed}

    def command(self, data_dir, runs_dir, threads, resume=False):
        out = Path(runs_dir) / self.folder
        metrics = json.dumps({"results": {}, "settings": {"seed": self.seed}, "resumed": resume})
        program = {
            "ok": f"import pathlib; p = pathlib.Path({str(out)!r}); p.mkdir(parents=True, exist_ok=True); "
                  f"(p / 'metrics.json').write_text({metrics!r})",
            "fail": "raise SystemExit(1)",
            "silent": "pass",
            "sleep": "import time; time.sleep(60)",
        }[self.behaviour]
        return [sys.executable, "-c", program]


def encoder_folder(tmp_path):
    encoder = tmp_path / "enc"
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    return str(encoder)


def write_metrics(runs_dir, run, **metrics):
    (runs_dir / run.folder).mkdir(parents=True, exist_ok=True)
    (runs_dir / run.folder / "metrics.json").write_text(json.dumps(metrics))


def test_a_run_is_finished_only_with_results_of_the_planned_settings(tmp_path):
    run = table_runs("vocab", "cove", "bilm", rows=["wnut17"], columns=["supervised+case"])[0]
    planned = run.settings()
    assert (planned["task"], planned["case_dim"], planned["seed"], planned["encoder"]) == (["wnut17"], 16, 1, "vocab")
    assert not run_finished(tmp_path, run)
    write_metrics(tmp_path, run, settings=planned)  # in progress: no results yet
    assert not run_finished(tmp_path, run)
    write_metrics(tmp_path, run, settings=planned, results={})
    assert run_finished(tmp_path, run)
    write_metrics(tmp_path, run, settings={**planned, "max_steps": 5}, results={})  # a smoke run
    assert not run_finished(tmp_path, run)
    write_metrics(tmp_path, run, settings={**planned, "case_dim": 0}, results={})  # another column's flags
    assert not run_finished(tmp_path, run)
    old = {key: value for key, value in table_runs("vocab", "c", "b", rows=["wnut17"], columns=["supervised"])[0]
           .settings().items() if key != "case_dim"}  # a run older than the casing flag: its default
    write_metrics(tmp_path, table_runs("vocab", "c", "b", rows=["wnut17"], columns=["supervised"])[0],
                  settings=old, results={})
    assert run_finished(tmp_path, table_runs("vocab", "c", "b", rows=["wnut17"], columns=["supervised"])[0])
    # an unfinished run resumes where it started with the planned settings, else starts afresh
    assert not tagging_table.can_resume(tmp_path, run)
    (tmp_path / run.folder / "run_settings.json").write_text(json.dumps({**planned, "data_dir": "elsewhere"}))
    assert tagging_table.can_resume(tmp_path, run)
    assert "--resume" in run.command("DATA", tmp_path, 1, resume=True)


def test_run_table_runs_the_unfinished_skips_and_reports(tmp_path):
    encoder = encoder_folder(tmp_path)
    runs_dir = tmp_path / "tag"
    done = FakeRun("conll2000", "supervised", 1, encoder, ())
    write_metrics(runs_dir, done, results={"conll2000": {}}, settings={"seed": 1})
    in_progress = FakeRun("conll2000", "cvt", 1, encoder, ())
    write_metrics(runs_dir, in_progress, settings={"seed": 1})  # no results yet
    (runs_dir / in_progress.folder / "run_settings.json").write_text(json.dumps({"seed": 1, "data_dir": "DATA"}))
    runs = [done, in_progress, FakeRun("wnut17", "cvt", 1, encoder, ()),
            FakeRun("wnut17", "supervised", 1, encoder, (), behaviour="fail"),
            FakeRun("wnut17", "supervised+case", 1, encoder, (), behaviour="silent"),
            FakeRun("wnut17", "vectors+cove", 1, str(tmp_path / "no-encoder"), ())]
    messages = []
    outcome = run_table(runs, runs_dir, "DATA", parallel=2, log=messages.append)
    assert outcome["done_before"] == ["conll2000/supervised-seed1"]
    assert sorted(outcome["finished"]) == ["conll2000/cvt-seed1", "wnut17/cvt-seed1"]
    assert sorted(outcome["failed"]) == ["wnut17/supervised+case-seed1", "wnut17/supervised-seed1"]
    assert outcome["skipped"] == ["wnut17/vectors+cove-seed1"] and not outcome["stopped"]
    assert (runs_dir / "wnut17" / "cvt-seed1.log").is_file()  # each run's output beside its folder
    assert any("no encoder checkpoint" in m for m in messages) and "resume conll2000/cvt-seed1" in messages
    assert json.loads((runs_dir / in_progress.folder / "metrics.json").read_text())["resumed"] is True
    assert json.loads((runs_dir / "wnut17/cvt-seed1/metrics.json").read_text())["resumed"] is False
    # the dry run lists what is left and starts nothing
    outcome = run_table(runs, runs_dir, "DATA", dry_run=True, log=messages.append)
    assert sorted(outcome["not_started"]) == ["wnut17/supervised+case-seed1", "wnut17/supervised-seed1"]
    assert not outcome["finished"]


def test_run_table_stops_at_the_deadline(tmp_path):
    encoder = encoder_folder(tmp_path)
    runs = [FakeRun("ewt_upos", "supervised", seed, encoder, (), behaviour="sleep") for seed in (1, 2)]
    started = time.monotonic()
    outcome = run_table(runs, tmp_path / "tag", "DATA", parallel=1, deadline_minutes=0.02, log=lambda m: None)
    assert time.monotonic() - started < 30  # the sleeping child was stopped, not waited for
    assert outcome["stopped"] == ["ewt_upos/supervised-seed1"]
    assert outcome["not_started"] == ["ewt_upos/supervised-seed2"]
    with pytest.raises(ValueError, match="at least 1"):
        run_table(runs, tmp_path, "DATA", parallel=0)


def test_the_plan_names_the_collectors_rows_and_columns():
    assert set(tagging_table.SEEDS) == set(tagging_table.ROW_COLUMNS)
    assert set(tagging_table.COLUMN_FLAGS) == set(tagging.COLUMNS)
    assert tagging.machines([{"cpu": "Xeon", "cpu_model": "6/207/2", "gpu": "NVIDIA H200"},
                             {"cpu": "AMD EPYC", "cpu_model": "25/17/1", "gpu": None}]) == [
        "AMD EPYC (25/17/1)", "Xeon (6/207/2) + NVIDIA H200"]


def test_the_script_lists_what_is_left_and_refuses_unknown_rows(tmp_path, capsys):
    script = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "run_tagging_table.py"))
    vocab = encoder_folder(tmp_path)
    script["main"](["--data-dir", "DATA", "--runs-dir", str(tmp_path / "tag"), "--vocab", vocab, "--rows", "ewt_upos",
                    "--columns", "supervised", "cvt", "--dry-run"])
    out = capsys.readouterr().out
    assert out.count("modeling_cove.training.commands.train_tagger") == 6 and "'not_started': 6" in out
    with pytest.raises(SystemExit) as exit_info:
        script["main"](["--data-dir", "DATA", "--rows", "conll2003"])
    assert exit_info.value.code == 2


def test_the_cove_t_comparison_plan_is_conll2000_three_columns_five_seeds_with_the_tables_flags():
    runs = tagging_table.cove_t_runs("vocab", "cove-s", "cove-t")
    assert [run.folder for run in runs[:3]] == [f"conll2000/{c}-seed1"
                                                for c in ("supervised", "vectors+cove", "vectors+cove-t")]
    assert len(runs) == 15 and [run.seed for run in runs] == sorted(run.seed for run in runs)
    table = {run.folder: run for run in table_runs("vocab", "cove-s", "bilm", rows=["conll2000"])}
    for run in runs:  # the table's own commands (ROW_FLAGS, COLUMN_FLAGS), vectors+cove-t's over CoVe-T
        assert tagging.RUN_FOLDER.match(Path(run.folder).name)
        if run.column != "vectors+cove-t":
            assert run == table[run.folder]
        else:
            same = table[run.folder.replace("vectors+cove-t", "vectors+cove")]
            assert (run.encoder, run.flags) == ("cove-t", same.flags)
            settings = run.parsed()
            assert (settings.input, settings.encoder, settings.task) == ("vectors+cove", "cove-t", ["conll2000"])
    assert [r.folder for r in tagging_table.cove_t_runs("v", "s", "t", columns=["vectors+cove-t"])] == [
        f"conll2000/vectors+cove-t-seed{seed}" for seed in range(1, 6)]
    with pytest.raises(ValueError, match="unknown rows/columns"):
        tagging_table.cove_t_runs("v", "s", "t", rows=["wnut17"])


def test_the_script_runs_the_cove_t_comparison_into_its_own_folder(tmp_path, capsys, monkeypatch):
    script = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "run_tagging_table.py"))
    vocab, cove_t = encoder_folder(tmp_path), tmp_path / "no-cove-t"
    script["main"](["--data-dir", "DATA", "--vocab", vocab, "--cove-encoder", vocab, "--cove-t-encoder", str(cove_t),
                    "--dry-run"])
    out = capsys.readouterr().out
    assert out.count("modeling_cove.training.commands.train_tagger") == 10  # supervised and vectors+cove, 5 seeds
    assert f"--output-dir {Path('runs/tag-cove-t/conll2000/vectors+cove-seed5')}" in out
    assert f"skip conll2000/vectors+cove-t-seed1: no encoder checkpoint at {cove_t}" in out
    assert "'not_started': 10" in out and "'skipped': 5" in out
    assert "then: python benchmarks/collect_tagging.py --cove-t --merge\n" in out
    # without --cove-encoder: the comparison reads its own CoVe-S (CoVe-T's exclusion), the table runs/cove-small
    monkeypatch.chdir(tmp_path)  # neither there
    for flags, cove_s in ((["--cove-t-encoder", str(cove_t)], "runs/cove-s-dedup/encoder"),
                          (["--rows", "conll2000", "--columns", "vectors+cove"], "runs/cove-small/encoder")):
        script["main"](["--data-dir", "DATA", "--runs-dir", str(tmp_path / "runs"), *flags, "--dry-run"])
        assert f"skip conll2000/vectors+cove-seed1: no encoder checkpoint at {cove_s}" in capsys.readouterr().out
    script["main"](["--data-dir", "DATA", "--vocab", vocab, "--cove-encoder", vocab, "--cove-t-encoder", str(cove_t),
                    "--dry-run"])  # runs/tag-cove-t here, not the repository's: the collector is told where
    assert (f"then: python benchmarks/collect_tagging.py --cove-t --merge --runs-dir {tmp_path / 'runs/tag-cove-t'}"
            in capsys.readouterr().out)
    for wrong in (["--recipe", "cvt-paper"], ["--rows", "wnut17"], ["--columns", "cvt"]):
        with pytest.raises(SystemExit) as exit_info:
            script["main"](["--data-dir", "DATA", "--cove-t-encoder", str(cove_t), *wrong])
        assert exit_info.value.code == 2, wrong


def test_the_cove_t_comparisons_columns_read_the_encoders_vocabulary(tmp_path, capsys, monkeypatch):
    """Its supervised column reads the word vectors both encoders were pretrained over (the BCN comparison's
    runs/vocab-all), not the tagging table's runs/vocab-tagging; an encoder over another vocabulary is refused, and
    so is a CoVe-T that holds CoVe-S's weights."""
    script = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "run_tagging_table.py"))
    monkeypatch.chdir(tmp_path)
    one, other = "9:aaaaaaaaaaaaaaaa", "8:bbbbbbbbbbbbbbbb"
    for name, fingerprint in (("runs/vocab-all", one), ("runs/cove-s-dedup/encoder", one), ("cove-t", one),
                              ("other-cove-t", other)):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "config.json").write_text(json.dumps({"vocabulary_fingerprint": fingerprint}))
    script["main"](["--data-dir", "DATA", "--cove-t-encoder", "cove-t", "--seeds", "1", "--dry-run"])
    out = capsys.readouterr().out
    assert "--encoder runs/vocab-all --seed 1 --output-dir runs/tag-cove-t/conll2000/supervised-seed1" in out
    assert "'not_started': 3" in out
    with pytest.raises(SystemExit) as exit_info:
        script["main"](["--data-dir", "DATA", "--cove-t-encoder", "other-cove-t", "--dry-run"])
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and "train_tagger" not in out
    assert "the columns read different vocabularies" in err and "other-cove-t (cove_t): 8:bbbbbbbbbbbbbbbb" in err
    for name in ("cove-s", "copy-of-cove-s"):  # CoVe-T a copy of CoVe-S not trained on: refused
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({"vocabulary_fingerprint": one}))
        (tmp_path / name / "model.safetensors").write_bytes(b"the same weights")
    with pytest.raises(SystemExit) as exit_info:
        script["main"](["--data-dir", "DATA", "--cove-encoder", "cove-s", "--cove-t-encoder", "copy-of-cove-s",
                        "--dry-run"])
    assert exit_info.value.code == 2
    assert "copy-of-cove-s (cove_t) holds the same weights as cove-s (cove_s)" in capsys.readouterr().err


def test_a_cvt_run_is_finished_and_resumable_whatever_the_spelling_of_its_data_folder(tmp_path, monkeypatch):
    """--unlabeled files under the data folder compare by their path inside it: a run planned and recorded with
    `--data-dir ../data` is the run planned with the data folder's absolute path, and the other way round; another
    text, or the same name in another folder, is not."""
    from instruments.tagging_recipe import recipe_runs

    (tmp_path / "repo").mkdir()
    monkeypatch.chdir(tmp_path / "repo")
    spellings = ("../data", str(tmp_path / "data"))
    for recorded_with in spellings:
        runs_dir = tmp_path / "runs" / str(spellings.index(recorded_with))
        run = recipe_runs("vocab", recorded_with, rows=["ewt_upos"], columns=["cvt"])[0]
        recorded = {**run.settings(), "data_dir": recorded_with}  # what cove-train-tagger records
        assert recorded["unlabeled"][0] == str(Path(recorded_with) / "english_unlabelled" / "masc.txt.xz")
        write_metrics(runs_dir, run, settings=recorded)  # in progress
        (runs_dir / run.folder / "run_settings.json").write_text(json.dumps(recorded))
        for planned_with in spellings:
            planned = recipe_runs("vocab", planned_with, rows=["ewt_upos"], columns=["cvt"])[0]
            assert tagging_table.can_resume(runs_dir, planned, planned_with)
            assert not run_finished(runs_dir, planned, planned_with)
            # and cove-train-tagger takes the resume the runner asks for (its own check, on the planned command)
            settings = planned.parsed()
            settings.data_dir = planned_with
            check_run_folder(runs_dir / run.folder, settings.resume_settings(), RESUME_KEYS, True, False,
                             defaults=ADDED_SETTINGS, same=RESUME_SAME)
        # a copy of the data elsewhere: the same run once finished, but not the same files to resume on
        copy = recipe_runs("vocab", str(tmp_path / "copy"), rows=["ewt_upos"], columns=["cvt"])[0]
        assert not tagging_table.can_resume(runs_dir, copy, str(tmp_path / "copy"))
        write_metrics(runs_dir, run, settings=recorded, results={})
        for planned_with in spellings + (str(tmp_path / "copy"),):
            planned = recipe_runs("vocab", planned_with, rows=["ewt_upos"], columns=["cvt"])[0]
            assert run_finished(runs_dir, planned, planned_with), (recorded_with, planned_with)
            # the runner's dry run: done, not planned again with --overwrite
            outcome = run_table([planned], runs_dir, planned_with, dry_run=True, log=lambda m: None)
            assert outcome["done_before"] == [planned.folder]
        # other text is another run: news instead of web text, or the same file names in another folder
        news = recipe_runs("vocab", "../data", rows=["conll2000"], columns=["cvt"])[0]
        assert not tagging_table.same_settings(recorded, {**run.settings(), "unlabeled": news.settings()["unlabeled"]},
                                               "../data")
        elsewhere = recipe_runs("vocab", "../other", rows=["ewt_upos"], columns=["cvt"])[0]
        assert not run_finished(runs_dir, elsewhere, "../data")
        assert not run_finished(runs_dir, elsewhere)  # no planned data folder: the files resolved, not the same
    # names without a path compare as they are
    assert tagging_table.same_unlabeled(["imdb", "sst"], "../data", ["imdb", "sst"], "/elsewhere")
    assert not tagging_table.same_unlabeled(["imdb"], "../data", ["sst"], "../data")
    assert not tagging_table.same_unlabeled(["imdb", "sst"], None, ["imdb"], None)


def test_a_run_over_weights_other_than_the_checkpoints_now_is_not_finished(tmp_path):
    """A run that recorded the sha256 of its encoder's weights is finished (and resumable) only while the checkpoint
    at its encoder folder still has those weights; a run older than that record compares by the folder alone."""
    import hashlib

    from instruments import results

    encoder = Path(encoder_folder(tmp_path))
    (encoder / "model.safetensors").write_bytes(b"CoVe-T, first pretraining")
    run = tagging_table.cove_t_runs("vocab", "cove-s", str(encoder), columns=["vectors+cove-t"])[0]
    assert run.folder == "conll2000/vectors+cove-t-seed1"
    first = hashlib.sha256(b"CoVe-T, first pretraining").hexdigest()
    runs_dir = tmp_path / "runs"
    write_metrics(runs_dir, run, settings=run.settings(), results={}, encoder_weights=first)
    results.checkpoint_weights.cache_clear()
    assert run_finished(runs_dir, run)
    write_metrics(runs_dir, run, settings=run.settings(), results={})  # older than the record: by folder
    assert run_finished(runs_dir, run)
    (encoder / "model.safetensors").write_bytes(b"CoVe-T, pretrained again")
    results.checkpoint_weights.cache_clear()  # a new runner process reads the checkpoint afresh
    assert run_finished(runs_dir, run)
    write_metrics(runs_dir, run, settings=run.settings(), results={}, encoder_weights=first)
    assert not run_finished(runs_dir, run)
    # cut short over the first weights: started afresh, not resumed over the new ones
    write_metrics(runs_dir, run, settings=run.settings(), encoder_weights=first)
    (runs_dir / run.folder / "run_settings.json").write_text(json.dumps(run.settings()))
    assert not tagging_table.can_resume(runs_dir, run)
    now = hashlib.sha256(b"CoVe-T, pretrained again").hexdigest()
    write_metrics(runs_dir, run, settings=run.settings(), encoder_weights=now)
    assert tagging_table.can_resume(runs_dir, run)
    write_metrics(runs_dir, run, settings=run.settings(), results={}, encoder_weights=now)
    assert run_finished(runs_dir, run)


def test_the_tagger_compares_resume_places_not_spellings(tmp_path, monkeypatch):
    """RESUME_SAME: a text file in the current folder written bare, with ./ or absolute is one file; a local corpus,
    train-rest and hf:<id> compare as written; a recorded encoder sha256 must match, an unrecorded one (an older run)
    does not count."""
    monkeypatch.chdir(tmp_path)
    same_sources, same_place = RESUME_SAME["unlabeled"], RESUME_SAME["data_dir"]
    assert same_sources(["my.txt", "imdb", "train-rest"], ["./my.txt", "imdb", "train-rest"])
    assert same_sources(["my.txt"], [str(tmp_path / "my.txt")])
    assert not same_sources(["my.txt"], ["other/my.txt"]) and not same_sources(["imdb"], ["sst"])
    assert not same_sources(["hf:a/b"], ["hf:a/c"]) and not same_sources(["a.txt"], ["a.txt", "b.txt"])
    assert same_place("data", str(tmp_path / "data")) and not same_place("data", None) and same_place(None, None)
    weights = RESUME_SAME["encoder_weights"]
    assert weights(None, "ab") and weights("ab", "ab") and not weights("ab", "cd")


def test_a_run_of_a_preset_edited_since_is_neither_finished_nor_resumed(tmp_path):
    """The same flags (--preset cvt-paper) over a preset file whose values changed since the run resolved them are
    another run: the runner neither counts it finished nor resumes it, and cove-train-tagger refuses the resume.
    A hyperparameter added since the run counts at its default; a run that recorded none is taken as it is."""
    from instruments.tagging_recipe import recipe_runs
    from modeling_cove.training.commands.train_tagger import HYPERPARAMETER_DEFAULTS, resolved_hyperparameters

    run = recipe_runs("vocab", "../data", rows=["conll2000"], columns=["supervised"])[0]
    now = resolved_hyperparameters(run.hyperparameters())
    edited = {**now, "learning_rate": now["learning_rate"] / 2}
    write_metrics(tmp_path, run, settings=run.settings(), results={}, hyperparameters=now)
    assert run_finished(tmp_path, run)
    write_metrics(tmp_path, run, settings=run.settings(), results={}, hyperparameters=edited)
    assert not run_finished(tmp_path, run)
    for key, finished in (("eval_batch_size", True), ("label_smoothing", False)):  # at its default; not (0.1)
        assert (now[key] == HYPERPARAMETER_DEFAULTS[key]) == finished
        older = {name: value for name, value in now.items() if name != key}
        write_metrics(tmp_path, run, settings=run.settings(), results={}, hyperparameters=older)
        assert run_finished(tmp_path, run) == finished
    write_metrics(tmp_path, run, settings=run.settings(), results={})
    assert run_finished(tmp_path, run)
    # cut short: resumed only over the hyperparameters it started with
    write_metrics(tmp_path, run, settings=run.settings())
    for started, resumable in ((now, True), (edited, False), (None, True)):
        (tmp_path / run.folder / "run_settings.json").write_text(
            json.dumps({**run.settings(), "resolved_hyperparameters": started}))
        assert tagging_table.can_resume(tmp_path, run) == resumable
    current = {**run.settings(), "resolved_hyperparameters": now}
    keys = tuple(current)
    (tmp_path / run.folder / "run_settings.json").write_text(json.dumps({**run.settings(),
                                                                        "resolved_hyperparameters": edited}))
    with pytest.raises(ValueError, match="resolved_hyperparameters"):
        check_run_folder(tmp_path / run.folder, current, keys, True, False, defaults=ADDED_SETTINGS,
                         same=RESUME_SAME)
