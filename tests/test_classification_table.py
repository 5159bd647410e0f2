"""The CoVe-T comparison's plan and runner (`instruments.classification_table`, `instruments.run_pool`,
benchmarks/run_classification_table.py)."""

import json
import runpy
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from conftest import REPO
from instruments import classification_table as plan
from instruments.classification_table import H200_RUN_COMMITS, BcnRun, cpu_hours, run_finished, table_runs
from instruments.results import COVE_T_FOLDER, RUN_FOLDER, run_column
from modeling_cove.training.publishing.cards_record import weights_fingerprint
from instruments.run_pool import report, run_pool
from modeling_cove import CoveConfig, CoveModel
from modeling_cove.training.commands.train_classifier import (ClassifierOptions, load_hyperparameters,
                                                             run_hyperparameters, run_settings)
from modeling_cove.training.common.cli import parse_options
from modeling_cove.training.common.presets import PresetError

TABLE = REPO / "benchmarks" / "results" / "classification.json"
CPU = {"cpu": "Intel Xeon", "cpu_model": "6/207/2", "device": "cpu", "cuda": None}
H200 = {"commit": H200_RUN_COMMITS[0], "dirty": False}


def record(seed, test=90.0, seconds=70.0, **extra):
    """A run as classification.json holds it (instruments.results.full_runs)."""
    return {"seed": seed, "test_accuracy": test, "best_validation_accuracy": test, "seconds_per_epoch_mean": seconds,
            "command": "cove-train-classifier ...", "commit": {"commit": "a" * 40, "dirty": False},
            "encoder": "runs/vocab-all", **extra}


def metrics(run: BcnRun, **extra) -> dict:
    """metrics.json as cove-train-classifier writes it, the keys the plan and the collector read."""
    return {"task": run.task, "column": plan.bcn_input(run.column), "seed": run.seed, "encoder": run.encoder,
            "command": "cove-train-classifier", "git": {"commit": "b" * 40, "dirty": False}, "limit": None,
            "max_steps": -1, "subsample": None, "hyperparameters": load_hyperparameters(run.task),
            "seconds_per_epoch_mean": 70.0, "test": {"accuracy": 0.9, "macro_f1": 0.89},
            "best": {"validation_accuracy": 0.88}, "machine": CPU, **extra}


def test_the_plan_has_every_cell_with_its_seeds_seed_major_as_the_collector_reads_them(tmp_path):
    runs = table_runs()
    count = {}
    for run in runs:
        count[(run.task, run.column)] = count.get((run.task, run.column), 0) + 1
    assert count == {
        **{("trec6", c): 10 for c in ("vectors", "vectors+cove", "vectors+cove-t", "vectors+cove-s-5-epochs")},
        ("trec6", "cove"): 3, ("trec6", "cove-t"): 3,
        **{("snli", c): 5 for c in ("vectors", "vectors+cove", "vectors+cove-t")},
        **{("sst2", c): 3 for c in ("vectors", "vectors+cove", "vectors+cove-t")}}
    assert [run.seed for run in runs] == sorted(run.seed for run in runs)  # every cell's seed 1 before any seed 2
    assert len({run.folder for run in runs}) == len(runs) == 70
    with_trec50 = table_runs(trec50=True)
    assert len(with_trec50) == 79 and {run.column for run in with_trec50 if run.task == "trec50"} == {
        "vectors", "vectors+cove", "vectors+cove-t"}
    encoders = {run.column: run.encoder for run in runs}
    # CoVe-S pretrained again with CoVe-T's exclusion, in folders of its own (runs/cove-small is the table's)
    assert encoders == {"vectors": "runs/vocab-all", "vectors+cove": "runs/cove-s-dedup/encoder",
                        "cove": "runs/cove-s-dedup/encoder", "vectors+cove-t": "runs/cove-t/encoder",
                        "cove-t": "runs/cove-t/encoder", "vectors+cove-s-5-epochs": "runs/cove-s-dedup-5ep/encoder"}
    # each command parses as cove-train-classifier's own flags, into the folder whose name is the run's column
    for run in runs:
        options = parse_options(ClassifierOptions, run.command(tmp_path, "runs/bcn-cove-t", 1)[3:])  # a folder
        assert (options.task, options.seed, options.encoder, options.bcn_input) == (
            run.task, run.seed, run.encoder, plan.bcn_input(run.column))
        assert options.output_dir == str(Path("runs/bcn-cove-t") / run.folder) and options.epochs is None  # yaml's
        assert (options.overwrite, options.no_save_model, options.threads) == (True, True, 1)
        assert run_column(metrics(run), Path(run.folder).name) == run.column
        assert RUN_FOLDER.fullmatch(Path(run.folder).name)["column"] == run.column
    assert [r.folder for r in table_runs({"cove_t": "ct"}, tasks=["snli"], columns=["vectors+cove-t"])] == [
        f"snli/vectors+cove-t-seed{seed}" for seed in range(1, 6)]
    assert table_runs({"cove_t": "ct"}, columns=["cove-t"])[0].encoder == "ct"
    with pytest.raises(ValueError, match="unknown tasks/columns/encoders"):
        table_runs(tasks=["imdb"])
    resumed = parse_options(ClassifierOptions, runs[0].command(tmp_path, "runs/bcn-cove-t", 1, resume=True)[3:])
    assert (resumed.resume, resumed.overwrite) == (True, False)


def test_the_yaml_epochs_are_those_of_the_tables_runs():
    """The commands pass no --epochs: each task yaml's is the one the table's CPU runs of these columns recorded."""
    report = json.loads(TABLE.read_text())
    for task, columns in {**plan.PLAN, **plan.OPTIONAL}.items():
        found = report["results"][task]
        epochs = {r["epochs"] for column in columns if column in found for r in found[column]["runs"]}
        assert epochs == {load_hyperparameters(task)["epochs"]}, task


def test_a_cell_is_finished_by_a_full_run_of_its_input_seed_and_encoder_checkpoint(tmp_path):
    run = BcnRun("trec6", "vectors+cove-t", 2, "runs/cove-t/encoder")
    path = tmp_path / run.folder / "metrics.json"
    assert not run_finished(tmp_path, run)
    path.parent.mkdir(parents=True)
    for wrong in ({"test": None}, {"limit": 200}, {"max_steps": 5}, {"subsample": {"train": "10 of 20"}},
                  {"encoder": "runs/cove-small/encoder"}, {"column": "cove"}, {"seed": 3}, {"task": "snli"},
                  {"hyperparameters": {**load_hyperparameters("trec6"), "epochs": 10}}):  # the yaml edited since
        path.write_text(json.dumps({key: value for key, value in {**metrics(run), **wrong}.items()
                                    if value is not None or key != "test"}))
        assert not run_finished(tmp_path, run), wrong
    path.write_text(json.dumps(metrics(run))[:50])  # being written
    assert not run_finished(tmp_path, run)
    written = json.dumps({**metrics(run), "command": "é"}, ensure_ascii=False).encode()
    path.write_bytes(written[:written.index("é".encode()) + 1])  # cut inside the two bytes of é
    assert not run_finished(tmp_path, run)
    path.write_text(json.dumps(metrics(run, encoder=str(Path("runs/cove-t/encoder").resolve()))))
    assert run_finished(tmp_path, run)  # no checkpoint there to compare with: its folder decides
    hyperparameters = {k: v for k, v in load_hyperparameters("trec6").items() if k != "max_length"}  # added since
    path.write_text(json.dumps(metrics(run, encoder=run.encoder, hyperparameters=hyperparameters)))
    assert run_finished(tmp_path, run)  # a key added since counts at its default


def test_a_run_over_a_checkpoint_pretrained_again_since_is_not_finished(tmp_path):
    """The CoVe-S checkpoint is pretrained again to other weights: a run that recorded the old weights' sha256 is
    run again, one that recorded the checkpoint's own is done."""
    encoder = tmp_path / "cove-small" / "encoder"
    encoder.mkdir(parents=True)
    (encoder / "config.json").write_text("{}")
    (encoder / "model.safetensors").write_bytes(b"the first pretraining")
    old = weights_fingerprint(encoder)
    run = BcnRun("snli", "vectors+cove", 1, str(encoder))
    (tmp_path / "runs" / run.folder).mkdir(parents=True)
    (tmp_path / "runs" / run.folder / "metrics.json").write_text(json.dumps(metrics(run, encoder_weights=old)))
    assert run_finished(tmp_path / "runs", run)
    (encoder / "model.safetensors").write_bytes(b"pretrained again")
    plan.checkpoint_weights.cache_clear()  # a new runner process: the checkpoint read afresh
    assert weights_fingerprint(encoder) != old and not run_finished(tmp_path / "runs", run)
    (tmp_path / "runs" / run.folder / "metrics.json").write_text(json.dumps(
        metrics(run, encoder_weights=weights_fingerprint(encoder))))
    assert run_finished(tmp_path / "runs", run)
    plan.checkpoint_weights.cache_clear()


def test_a_stopped_run_resumes_where_its_start_had_the_plans_settings_and_weights(tmp_path, monkeypatch):
    """`can_resume`: a folder whose run_settings.json is what cove-train-classifier recorded for the cell's command
    (another spelling of the data folder too; a hyperparameter added since counts at its default) resumes; none,
    another seed, an edited or now malformed task yaml, other encoder weights since, or another data folder start
    afresh."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the runs it plans are a CPU machine's
    encoder = tmp_path / "encoder"
    CoveModel(CoveConfig(vocab_size=6, word_vector_dim=4, hidden_size=4)).save_pretrained(encoder)
    run, runs_dir = BcnRun("trec6", "vectors+cove-t", 2, str(encoder)), tmp_path / "bcn"
    folder, data, other = runs_dir / run.folder, tmp_path / "data", tmp_path / "other"
    data.mkdir(), other.mkdir()
    assert not plan.can_resume(runs_dir, run, str(data))
    folder.mkdir(parents=True)
    options = parse_options(ClassifierOptions, run.arguments(str(data), runs_dir, 2))
    started = run_settings(options, run_hyperparameters(options), world_size=1, device="cpu")
    (folder / "run_settings.json").write_text(json.dumps(started))
    assert plan.can_resume(runs_dir, run, str(data)) and plan.can_resume(runs_dir, run, f"{data}/.")
    assert not plan.can_resume(runs_dir, run, str(other))
    (folder / "run_settings.json").write_text(json.dumps({**started, "seed": 3}))
    assert not plan.can_resume(runs_dir, run, str(data))
    (folder / "run_settings.json").write_text(json.dumps({**started, "hyperparameters": {
        **started["hyperparameters"], "epochs": 14}}))  # the task yaml edited since
    assert not plan.can_resume(runs_dir, run, str(data))
    hyperparameters = {k: v for k, v in started["hyperparameters"].items() if k != "max_length"}  # added since
    (folder / "run_settings.json").write_text(json.dumps({**started, "hyperparameters": hyperparameters}))
    assert plan.can_resume(runs_dir, run, str(data))
    (folder / "run_settings.json").write_text(json.dumps(started))
    (folder / "metrics.json").write_bytes(b"\0" * 64)  # written when its machine went: that run ended, start afresh
    assert not plan.can_resume(runs_dir, run, str(data))
    (folder / "metrics.json").unlink()

    def malformed_yaml(options):
        raise PresetError("configuration/tasks/trec6.yaml: unknown key 'epoch'")

    with monkeypatch.context() as patch:
        patch.setattr(plan, "run_hyperparameters", malformed_yaml)  # one run's failure, not the runner's
        assert not plan.can_resume(runs_dir, run, str(data))
    CoveModel(CoveConfig(vocab_size=7, word_vector_dim=4, hidden_size=4)).save_pretrained(encoder)  # pretrained again
    assert not plan.can_resume(runs_dir, run, str(data))
    (encoder / "model.safetensors").unlink()  # no weights: not resumed (the run names the folder when it starts)
    assert not plan.can_resume(runs_dir, run, str(data))


def test_cpu_hours_from_the_cpu_runs_of_the_same_task_and_input():
    """Seconds per epoch of classification.json's CPU runs (the H200's left out: by the GPU its machine names, or by
    its commit) of the run's task and --bcn-input, times the yaml's epochs."""
    report = {"results": {"trec6": {"vectors": {"runs": [record(1, seconds=60.0), record(2, seconds=80.0),
                                                         record(4, seconds=10.0, commit=H200),
                                                         record(5, seconds=5.0,
                                                                machine="Xeon (6/207/2) + NVIDIA H200")]},
                                    "vectors+cove": {"runs": [record(1, seconds=100.0, machine="Xeon (6/207/2)")]}}},
              "encoder_variants": {"cove-s-5-epochs": {"results": {"trec6": {"vectors+cove": {
                  "runs": [record(2, seconds=200.0)]}}}}},
              "cove_t_comparison": {"results": {"trec6": {"vectors+cove-t": {"runs": [record(1, seconds=300.0)]}}}}}
    runs = [BcnRun("trec6", "vectors", 4, "v"), BcnRun("trec6", "vectors", 5, "v"),
            BcnRun("trec6", "vectors+cove-t", 1, "t"), BcnRun("snli", "vectors", 4, "v")]
    hours, unknown = cpu_hours(runs, report)
    assert hours == pytest.approx((2 * 70.0 * 15 + 200.0 * 15) / 3600)  # TREC-6's yaml: 15 epochs; (100+200+300)/3
    assert unknown == ["snli/vectors-seed4"]


@dataclass(frozen=True)
class FakeBcnRun(BcnRun):
    """A run whose command is a tiny Python program: "ok" writes its finished metrics.json, "fail" exits 1, "sleep"
    outlives any deadline of the test."""

    behaviour: str = "ok"

    def command(self, data_dir, runs_dir, threads, resume=False):
        out = Path(runs_dir) / self.folder
        program = {
            "ok": f"import pathlib; p = pathlib.Path({str(out)!r}); p.mkdir(parents=True, exist_ok=True); "
                  f"(p / 'metrics.json').write_text({json.dumps(metrics(self))!r})",
            "fail": "raise SystemExit(1)",
            "sleep": f"import os, pathlib, time; pathlib.Path({str(out)!r} + '.pid').write_text(str(os.getpid())); "
                     "time.sleep(60)",
        }[self.behaviour]
        return [sys.executable, "-c", program]


def encoder_folder(tmp_path, name="enc"):
    encoder = tmp_path / name
    encoder.mkdir()
    (encoder / "config.json").write_text("{}")
    return str(encoder)


def test_run_pool_runs_the_unfinished_skips_those_without_encoder_and_stops_at_the_deadline(tmp_path, capsys):
    encoder, runs_dir = encoder_folder(tmp_path), tmp_path / "bcn"
    done = FakeBcnRun("trec6", "vectors", 1, encoder)
    (runs_dir / done.folder).mkdir(parents=True)
    (runs_dir / done.folder / "metrics.json").write_text(json.dumps(metrics(done)))
    runs = [done, FakeBcnRun("trec6", "vectors+cove-t", 1, encoder),
            FakeBcnRun("snli", "vectors+cove-t", 1, encoder, behaviour="fail"),
            FakeBcnRun("sst2", "vectors+cove-t", 1, str(tmp_path / "no-cove-t"))]
    messages = []
    outcome = run_pool(runs, runs_dir, "DATA", run_finished, parallel=2, log=messages.append)
    assert outcome["done_before"] == ["trec6/vectors-seed1"] and outcome["finished"] == ["trec6/vectors+cove-t-seed1"]
    assert outcome["failed"] == ["snli/vectors+cove-t-seed1"] and outcome["skipped"] == ["sst2/vectors+cove-t-seed1"]
    assert "skip sst2/vectors+cove-t-seed1: no encoder checkpoint at " + str(tmp_path / "no-cove-t") in messages
    assert (runs_dir / "snli" / "vectors+cove-t-seed1.log").is_file()  # each run's output beside its folder
    with pytest.raises(SystemExit) as exit_info:  # the script's last lines
        report(outcome, "collect")
    assert exit_info.value.code == 1 and capsys.readouterr().out.splitlines()[-2:] == [
        "then: collect", "failed (see <folder>.log): snli/vectors+cove-t-seed1"]
    outcome = run_pool(runs, runs_dir, "DATA", run_finished, dry_run=True, log=messages.append)
    assert outcome["not_started"] == ["snli/vectors+cove-t-seed1"] and not outcome["finished"]
    run_pool([BcnRun("trec6", "vectors", 2, encoder)], runs_dir, "DATA", run_finished,
             resumable=lambda runs_dir, run: True, dry_run=True, log=messages.append)
    folder = runs_dir / "trec6" / "vectors-seed2"
    assert messages[-1].endswith(f"--output-dir {folder} --resume --no-save-model")

    sleeping = [FakeBcnRun("trec6", "cove-t", seed, encoder, behaviour="sleep") for seed in (1, 2)]
    started, messages = time.monotonic(), []
    outcome = run_pool(sleeping, runs_dir, "DATA", run_finished, parallel=1, deadline_minutes=0.02,
                       log=messages.append)
    assert time.monotonic() - started < 30  # the sleeping child was stopped, not waited for
    assert outcome["stopped"] == ["trec6/cove-t-seed1"] and outcome["not_started"] == ["trec6/cove-t-seed2"]
    assert "stopped trec6/cove-t-seed1; it starts afresh next time" in messages
    with pytest.raises(ValueError, match="at least 1"):
        run_pool(sleeping, runs_dir, "DATA", run_finished, parallel=0)


def test_the_script_runs_every_cell_into_its_own_family_with_its_cpu_hours(tmp_path, capsys):
    """Every cell of the plan is run (none is taken from classification.json), into runs/bcn-cove-t; a missing
    encoder is skipped and named; the dry run adds the CPU-hours of what is left and the collect command."""
    script = runpy.run_path(str(REPO / "benchmarks" / "run_classification_table.py"))
    table = tmp_path / "classification.json"
    table.write_text(json.dumps({"results": {"trec6": {"cove": {"runs": [record(1, seconds=100.0)]}}}}))
    cove_t, runs_dir = encoder_folder(tmp_path, "cove-t"), tmp_path / "runs" / COVE_T_FOLDER
    script["main"](["--data-dir", "DATA", "--runs-dir", str(runs_dir), "--table", str(table), "--cove-t", cove_t,
                    "--cove-s", str(tmp_path / "no-cove-s"), "--tasks", "trec6", "--columns", "cove", "cove-t",
                    "--dry-run"])
    out = capsys.readouterr().out
    assert out.count("modeling_cove.training.commands.train_classifier") == 3  # cove-t seeds 1-3
    assert "--bcn-input cove --seed 2" in out and f"--encoder {cove_t}" in out
    assert f"--output-dir {runs_dir / 'trec6' / 'cove-t-seed3'}" in out
    for seed in (1, 2, 3):  # the table's CPU run of cove seed 1 does not count
        assert f"skip trec6/cove-seed{seed}: no encoder checkpoint at {tmp_path / 'no-cove-s'}" in out
    assert f"about {6 * 100 * 15 / 3600:.1f} CPU-hours" in out  # 6 runs left, each 15 epochs of 100 s
    assert "'not_started': 3" in out and "'skipped': 3" in out
    assert f"then: python benchmarks/collect_results.py --merge --runs {tmp_path / 'runs'}" in out
    script["main"](["--data-dir", "DATA", "--runs-dir", str(runs_dir), "--table", str(table), "--tasks", "trec50",
                    "--columns", "vectors", "--dry-run"])  # --tasks trec50 implies --trec50
    assert capsys.readouterr().out.count("skip trec50/vectors-seed") == 3  # (no word vectors here)
    for wrong in (["--tasks", "imdb"], ["--runs-dir", str(tmp_path / "bcn")]):  # not a task; not the family's folder
        with pytest.raises(SystemExit) as exit_info:
            script["main"](["--data-dir", "DATA", *wrong])
        assert exit_info.value.code == 2
    capsys.readouterr()
    for text, message in (("{oops", "is not valid JSON (Expecting property name"), ("[1]", "a JSON list")):
        table.write_text(text)  # a --table that does not read: one line naming it, before any command is listed
        with pytest.raises(SystemExit) as exit_info:
            script["main"](["--data-dir", "DATA", "--runs-dir", str(runs_dir), "--table", str(table), "--dry-run"])
        out, err = capsys.readouterr()
        assert exit_info.value.code == 2 and err.startswith(f"error: --table {table} ") and message in err
        assert "train_classifier" not in out


def test_a_terminated_pool_stops_its_runs(tmp_path):
    """SIGTERM to a runner (a `kill`, a session's end) stops the runs it started, as its deadline does, instead of
    leaving them running into folders the next runner starts again."""
    import os
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    if not main or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        pytest.skip("the pool sets its handler in the main thread only, over the default one")
    encoder, runs_dir = encoder_folder(tmp_path), tmp_path / "bcn"
    run = FakeBcnRun("trec6", "vectors+cove-t", 1, encoder, behaviour="sleep")
    pid_file = Path(f"{runs_dir / run.folder}.pid")

    def terminate_once_started():
        deadline = time.monotonic() + 30
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=terminate_once_started, daemon=True).start()
    with pytest.raises(SystemExit) as stopped:
        run_pool([run], runs_dir, "data", run_finished, None, parallel=1, log=lambda line: None)
    assert stopped.value.code == 128 + signal.SIGTERM
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)  # terminated and reaped by the pool
    assert signal.getsignal(signal.SIGTERM) is before


def test_two_roles_over_the_same_weights_stop_the_runner(tmp_path, capsys):
    """A 5-epoch copy of CoVe-S not trained on since it was copied holds CoVe-S's weights: the runner stops before
    any run, naming both folders; checkpoints not there yet are no conflict."""
    script = runpy.run_path(str(REPO / "benchmarks" / "run_classification_table.py"))
    cove_s, copy = encoder_folder(tmp_path, "cove-s"), encoder_folder(tmp_path, "cove-s-5ep")
    for folder in (cove_s, copy):
        (Path(folder) / "model.safetensors").write_bytes(b"three epochs")
    plan.checkpoint_weights.cache_clear()
    args = ["--data-dir", "DATA", "--runs-dir", str(tmp_path / "runs" / COVE_T_FOLDER), "--cove-s", cove_s,
            "--cove-s-5-epochs", copy, "--cove-t", str(tmp_path / "none"), "--dry-run"]
    with pytest.raises(SystemExit) as exit_info:
        script["main"](args)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and "train_classifier" not in out
    assert f"{copy} (cove_s_5_epochs) holds the same weights as {cove_s} (cove_s)" in err
    script["main"](args + ["--columns", "vectors+cove"])  # the copy's role is not in the plan: no conflict
    assert "'not_started'" in capsys.readouterr().out
    (Path(copy) / "model.safetensors").write_bytes(b"five epochs")
    plan.checkpoint_weights.cache_clear()
    script["main"](args)
    assert "'not_started'" in capsys.readouterr().out
    plan.checkpoint_weights.cache_clear()


def test_columns_over_two_vocabularies_stop_the_runner(tmp_path, capsys):
    """A pair must differ in the encoder alone: an encoder pretrained over another word-vector checkpoint than the
    vectors column's (another vocabulary fingerprint) stops the runner before any run, naming both; checkpoints
    without a fingerprint, or not there yet, are no conflict."""
    script = runpy.run_path(str(REPO / "benchmarks" / "run_classification_table.py"))
    vocab, cove_s, cove_t = (encoder_folder(tmp_path, name) for name in ("vocab", "cove-s", "cove-t"))
    for folder, fingerprint in ((vocab, "43134:e8ab447f26508b73"), (cove_s, "43134:e8ab447f26508b73"),
                                (cove_t, "43194:d1d6768606416ba1")):
        (Path(folder) / "config.json").write_text(json.dumps({"vocabulary_fingerprint": fingerprint}))
    args = ["--data-dir", "DATA", "--runs-dir", str(tmp_path / "runs" / COVE_T_FOLDER), "--vocab", vocab,
            "--cove-s", cove_s, "--cove-t", cove_t, "--cove-s-5-epochs", str(tmp_path / "none"), "--dry-run"]
    with pytest.raises(SystemExit) as exit_info:
        script["main"](args)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2 and "train_classifier" not in out
    assert f"{vocab} (vocab): 43134:e8ab447f26508b73; {cove_t} (cove_t): 43194:d1d6768606416ba1" in err
    plan.check_one_vocabulary({"vocab": vocab, "cove_s": cove_s, "cove_t": str(tmp_path / "none"),
                               "random": encoder_folder(tmp_path, "no-fingerprint")})  # no conflict: no error
    (Path(cove_t) / "config.json").write_text(json.dumps({"vocabulary_fingerprint": "43134:e8ab447f26508b73"}))
    script["main"](args)
    assert "'not_started'" in capsys.readouterr().out
