"""The CVT table on a chosen recipe (`instruments.tagging_recipe`, run_tagging_table.py --recipe, collect_tagging.py
--recipe): the plan's rows, seeds, columns, unlabelled text and resolved hyperparameters, and the collection of run
folders written as `cove-train-tagger` writes them, checked against figures computed by hand."""

import importlib.util
import json
import math
import runpy
from pathlib import Path

import pytest
import yaml

from conftest import REPO, exit_of
from instruments import tagging, tagging_recipe
from instruments.tagging_recipe import canonical_overrides, collect_recipe, recipe_markdown, recipe_runs
from instruments.tagging_table import run_finished
from modeling_cove.training.commands.train_tagger import HYPERPARAMETER_DEFAULTS

BENCHMARKS = REPO / "benchmarks"
NEWS = ["reuters", "abc", "brown"]
WEB = ["masc", "webtext"]


def text_files(names):
    return [str(Path("DATA") / "english_unlabelled" / f"{name}.txt.xz") for name in names]


def cvt_paper(**overrides) -> dict:
    """The recipe by hand: HYPERPARAMETER_DEFAULTS under configuration/tagging/cvt-paper.yaml read as plain YAML,
    then `overrides`."""
    preset = yaml.safe_load((REPO / "configuration" / "tagging" / "cvt-paper.yaml").read_text())
    preset.pop("description")
    return {**HYPERPARAMETER_DEFAULTS, **preset, **overrides}


def test_the_plan_has_every_row_with_its_seeds_both_columns_seed_major():
    runs = recipe_runs("vocab", "DATA")
    count = {}
    for run in runs:
        count[(run.row, run.column)] = count.get((run.row, run.column), 0) + 1
    seeds = {"conll2000": 5, "conll2000-10pct": 5, "ewt_upos": 3, "wnut17": 3, "multitask": 3}
    assert count == {(row, column): n for row, n in seeds.items() for column in ("supervised", "cvt")}
    assert len(runs) == 38 and [run.seed for run in runs] == sorted(run.seed for run in runs)
    assert len({run.folder for run in runs}) == 38
    for run in runs:  # the folders the collector reads, every run on the word vectors
        assert tagging.RUN_FOLDER.match(Path(run.folder).name) and run.encoder == "vocab"
    assert [r.folder for r in recipe_runs("v", "DATA", rows=["wnut17"], columns=["cvt"])] == [
        "wnut17/cvt-seed1", "wnut17/cvt-seed2", "wnut17/cvt-seed3"]
    with pytest.raises(ValueError, match="unknown rows/columns"):
        recipe_runs("v", "DATA", columns=["vectors+cove"])


def test_each_row_trains_on_its_task_and_its_cvt_column_on_text_that_fits_it():
    runs = {run.folder: run for run in recipe_runs("vocab", "DATA")}
    expected = {  # row: (tasks, train fraction, the CVT column's --unlabeled)
        "conll2000": (["conll2000"], None, text_files(NEWS)),
        "conll2000-10pct": (["conll2000"], 0.1, ["train-rest"]),
        "ewt_upos": (["ewt_upos"], None, text_files(WEB)),
        "wnut17": (["wnut17"], None, text_files(WEB)),
        "multitask": (["conll2000", "ewt_upos"], None, text_files(NEWS + WEB)),
    }
    for row, (tasks, fraction, text) in expected.items():
        supervised, cvt = runs[f"{row}/supervised-seed2"].parsed(), runs[f"{row}/cvt-seed2"].parsed()
        for settings in (supervised, cvt):
            assert (settings.task, settings.train_fraction, settings.seed) == (tasks, fraction, 2)
            assert (settings.preset, settings.hyperparameters) == ("cvt-paper", None)
            assert settings.no_save_model and not settings.no_test  # the table's test figures, no tagger saved
        assert (supervised.cvt, cvt.cvt, cvt.unlabeled) == (False, True, text)
        assert "--unlabeled" not in runs[f"{row}/supervised-seed2"].flags


def test_every_planned_command_resolves_to_the_recipe_the_same_for_both_columns():
    recipe = cvt_paper()
    assert recipe["labelled_steps"] == 2500 and recipe["early_stopping_patience"] == 0
    for run in recipe_runs("vocab", "DATA"):
        hp = run.hyperparameters()
        assert Path(hp.pop("source")).name == "cvt-paper.yaml"
        assert hp == recipe, run.folder  # WNUT-17 too: --preset replaces wnut17.yaml (its batch 16), not layers on it
    assert yaml.safe_load((REPO / "configuration" / "tagging" / "wnut17.yaml").read_text())["batch_size"] == 16
    # overrides reach every command as one canonical JSON, whatever their key order or form
    overrides = {"label_scheme": "bio", "ema_decay": 0.0}
    runs = recipe_runs("vocab", "DATA", overrides='{"label_scheme": "bio", "ema_decay": 0.0}')
    assert runs == recipe_runs("vocab", "DATA", overrides=overrides)
    for run in runs:
        flags = list(run.flags)
        assert json.loads(flags[flags.index("--hyperparameters") + 1]) == overrides
        assert run.settings()["hyperparameters"] == '{"ema_decay": 0.0, "label_scheme": "bio"}'
        hp = run.hyperparameters()
        hp.pop("source")
        assert hp == cvt_paper(**overrides)
    resolved = tagging_recipe.resolved_recipes(runs)
    assert list(resolved) == ["conll2000", "conll2000-10pct", "ewt_upos", "wnut17", "multitask"]
    assert {row: hp["label_scheme"] for row, hp in resolved.items()} == dict.fromkeys(resolved, "bio")
    assert canonical_overrides({}) is None and canonical_overrides(None) is None
    for bad, message in (("[1]", "JSON object"), ("{oops", "not valid JSON")):
        with pytest.raises(ValueError, match=message):
            canonical_overrides(bad)
    with pytest.raises(ValueError, match="unknown preset keys"):  # a key the tagger does not know, before any run
        tagging_recipe.resolved_recipes(recipe_runs("vocab", "DATA", overrides={"emma_decay": 0.9}, rows=["wnut17"]))


def test_a_recipe_run_is_finished_only_with_the_planned_recipe(tmp_path):
    run = recipe_runs("vocab", "DATA", rows=["ewt_upos"], columns=["cvt"])[0]
    other = recipe_runs("vocab", "DATA", overrides={"label_scheme": "bio"}, rows=["ewt_upos"], columns=["cvt"])[0]
    (tmp_path / run.folder).mkdir(parents=True)
    (tmp_path / run.folder / "metrics.json").write_text(json.dumps({"settings": run.settings(), "results": {}}))
    assert run_finished(tmp_path, run) and not run_finished(tmp_path, other)


def write_run(runs_dir: Path, run, curves: dict, tests: dict):
    """<runs>/<folder>/metrics.json laid out as TaggerLoop.finish writes it: `curves` {task: validation score per
    period of 250 labelled steps} and `tests` {task: test score}, fractions; the best period is the one of the
    highest mean validation score, the results its validation scores."""
    kinds = {task: "accuracy" if task == "ewt_upos" else "f1" for task in curves}
    periods = len(next(iter(curves.values())))
    epochs = []
    for i in range(periods):
        validation = {task: {"precision": v[i], "recall": v[i], kind: v[i], "accuracy": v[i], "words_without_tokens": 0}
                      for (task, v), kind in zip(curves.items(), kinds.values())}
        epochs.append({"epoch": i + 1, "global_step": 250 * (i + 1) * (2 if run.column == "cvt" else 1),
                       "steps": 250, "labelled_steps": 250 * (i + 1), "complete": True, "seconds": 60.0,
                       "train_loss": 0.5, "unlabelled_loss": 1.0 if run.column == "cvt" else None,
                       "validation": validation,
                       "validation_main": sum(v[i] for v in curves.values()) / len(curves)})
    best = max(epochs, key=lambda e: e["validation_main"])
    settings = run.parsed()
    metrics = {
        "command": "python -m modeling_cove.training.commands.train_tagger " + " ".join(run.flags),
        "commit": "abc123", "settings": settings.__dict__, "hyperparameters": run.hyperparameters(),
        "machine": {"cpu": "AMD EPYC", "cpu_model": "25/17/1", "gpu": "NVIDIA H200", "threads": 1},
        "tasks": {task: {"labels": ["O"], "metric": kind, "label_scheme": "bio"} for task, kind in kinds.items()},
        "unlabeled_sentences": 1000 if run.column == "cvt" else 0, "epochs": epochs,
        "global_step": epochs[-1]["global_step"], "stop_reason": "labelled-step budget reached",
        "train_seconds": 600.0 + run.seed, "best_epoch": best["epoch"],
        "results": {task: {"validation": best["validation"][task],
                           "test": {"precision": tests[task], "recall": tests[task], "f1": tests[task],
                                    "accuracy": tests[task], "words_without_tokens": 0}}
                    for task in curves}}
    (runs_dir / run.folder).mkdir(parents=True)
    (runs_dir / run.folder / "metrics.json").write_text(json.dumps(metrics))


# CoNLL-2000 test F1 per seed: supervised, CVT; CVT - supervised = 0.5, 0.3, 0.7 points
CHUNKING = {1: (0.950, 0.955), 2: (0.952, 0.955), 3: (0.949, 0.956)}


def fake_recipe_runs(runs_dir: Path):
    runs = {run.folder: run for run in recipe_runs("vocab", "DATA")}
    for seed, (supervised, cvt) in CHUNKING.items():
        for column, test in (("supervised", supervised), ("cvt", cvt)):
            rise = [0.80, 0.90, test + 0.010, test + 0.005]  # the best period is the third
            write_run(runs_dir, runs[f"conll2000/{column}-seed{seed}"], {"conll2000": rise}, {"conll2000": test})
    for seed, gain in ((1, 0.004), (2, 0.002)):  # multi-task: with CVT minus without, per task
        for column, plus in (("supervised", 0.0), ("cvt", gain)):
            write_run(runs_dir, runs[f"multitask/{column}-seed{seed}"],
                      {"conll2000": [0.90, 0.94 + plus], "ewt_upos": [0.92, 0.93 + plus]},
                      {"conll2000": 0.94 + plus, "ewt_upos": 0.93 + plus})
    unfinished = runs_dir / "wnut17" / "cvt-seed1"
    unfinished.mkdir(parents=True)
    (unfinished / "metrics.json").write_text(json.dumps({"settings": runs["wnut17/cvt-seed1"].settings()}))


def test_the_table_lists_its_rows_in_plan_order(tmp_path):
    """The report's rows (and so the markdown lines and the curve panels) come in the plan's order: the two goal
    rows first, then EWT, WNUT-17 and the multi-task row, whatever order the runs finished in."""
    runs_dir, output = tmp_path / "tag-recipe", tmp_path / "tagging_cvt.json"
    fake_recipe_runs(runs_dir)
    runs = {run.folder: run for run in recipe_runs("vocab", "DATA")}
    for folder, task in (("wnut17/supervised-seed1", "wnut17"), ("conll2000-10pct/supervised-seed1", "conll2000")):
        write_run(runs_dir, runs[folder], {task: [0.5, 0.6]}, {task: 0.6})
    report = collect_recipe(runs_dir, output)
    assert list(report["results"]) == ["conll2000", "conll2000-10pct", "wnut17", "multitask"]
    assert [line.split(" (")[0] for line in recipe_markdown(report).splitlines()[2:6]] == [
        "| conll2000", "| conll2000-10pct", "| wnut17", "| multitask: conll2000"]


def test_the_collection_pairs_cvt_with_supervised_by_seed(tmp_path):
    runs_dir, output = tmp_path / "tag-recipe", tmp_path / "results" / "tagging_cvt.json"
    fake_recipe_runs(runs_dir)
    collect_recipe(runs_dir, output, command="python benchmarks/collect_tagging.py --recipe")
    report = json.loads(output.read_text())
    assert report["command"] == "python benchmarks/collect_tagging.py --recipe"
    assert report["machine"] == ["AMD EPYC (25/17/1) + NVIDIA H200"]
    assert report["left_out"] == [{"folder": "wnut17/cvt-seed1", "why": "unfinished: no results yet"}]
    [recipe] = report["recipe"]
    assert (recipe["preset"], recipe["overrides"], recipe["runs"]) == ("cvt-paper", None, 10)
    assert recipe["rows"] == ["conll2000", "multitask"]
    assert recipe["hyperparameters"] == cvt_paper()
    chunking = report["results"]["conll2000"]
    assert list(chunking) == ["supervised", "cvt"]
    assert chunking["supervised"]["test_f1"] == {"mean": 95.03, "std": 0.15, "n": 3, "values": [95.0, 95.2, 94.9]}
    first = chunking["cvt"]["runs"][0]
    assert (first["seed"], first["test_f1"], first["validation_f1"], first["best_epoch"]) == (1, 95.5, 96.5, 3)
    assert (first["labelled_steps"], first["best_labelled_steps"], first["train_seconds"]) == (1000, 750, 601.0)
    assert first["validation_curve"] == [[250, 80.0], [500, 90.0], [750, 96.5], [1000, 96.0]]
    assert first["unlabeled"] == text_files(NEWS) and chunking["supervised"]["runs"][0]["unlabeled"] is None
    # CVT - supervised on seeds 1-3: 0.5, 0.3, 0.7; mean 0.5, std 0.2, t(0.975, 2 df) = 4.302653
    half = 4.302653 * 0.2 / math.sqrt(3)
    gap = chunking["cvt"]["versus_supervised"]
    assert gap["baseline"] == "conll2000/supervised"
    assert {k: gap["test"][k] for k in ("mean", "low", "high", "n", "seeds", "higher_on")} == {
        "mean": 0.5, "low": round(0.5 - half, 2), "high": round(0.5 + half, 2), "n": 3, "seeds": [1, 2, 3],
        "higher_on": 3}
    assert (gap["test"]["low"], gap["test"]["high"]) == (0.0, 1.0)
    assert gap["validation"]["mean"] == 0.5  # the best period's validation score is test + 1 point in both
    # the multi-task row: with CVT against its own run without CVT, per task (0.4 and 0.2 points)
    multitask = report["results"]["multitask"]
    for task, kind in (("conll2000", "f1"), ("ewt_upos", "accuracy")):
        versus = multitask[task]["cvt"]["versus_supervised"]
        assert versus["baseline"] == f"multitask/{task}/supervised"
        assert versus["test"]["mean"] == 0.3 and versus["test"]["seeds"] == [1, 2]
        assert multitask[task]["cvt"][f"test_{kind}"]["values"] == {"conll2000": [94.4, 94.2],
                                                                    "ewt_upos": [93.4, 93.2]}[task]
    assert multitask["ewt_upos"]["supervised"]["runs"][1]["validation_curve"] == [[250, 92.0], [500, 93.0]]
    # the validation curves beside the JSON
    png = output.with_name("tagging_cvt_curves.png")
    assert report["curves"] == png.name and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    table = recipe_markdown(report)
    assert "| conll2000 (F1) | 95.03 ± 0.15 (3) | 95.53 ± 0.06 (3) | +0.50 [+0.00, +1.00] | 3 |" in table
    # 0.4 and 0.2 points: mean 0.3, std 0.1414, t(0.975, 1 df) = 12.706: 0.3 ± 1.27
    assert "| multitask: ewt_upos (accuracy) | 93.00 ± 0.00 (2) | 93.30 ± 0.14 (2) | +0.30 [-0.97, +1.57] | 2 |" \
        in table
    assert "- recipe `--preset cvt-paper`: 2,500 labelled steps, validation every 250, the best kept" in table


def test_mean_curve_over_seeds():
    xs, means, stds = tagging_recipe.mean_curve([[[250, 80.0], [500, 90.0]], [[250, 82.0], [500, 91.0]],
                                                 [[250, 84.0]]])
    assert xs == [250, 500] and means == [82.0, 90.5]
    assert stds == [pytest.approx(2.0), pytest.approx(math.sqrt(0.5))]


def test_the_curves_panel_shows_the_later_part_of_the_curves():
    series = {"supervised": ([250, 500, 1000, 2500], [40.0, 80.0, 91.2, 93.9]),
              "cvt": ([250, 500, 1000, 2500], [50.0, 85.0, 92.6, 95.3])}
    assert tagging_recipe.plateau_range(series) == (90, 97.0)  # steps >= 1,000: 91.2 - 1 down, 95.3 + 1 up
    assert tagging_recipe.plateau_range({"cvt": ([2500], [99.5])}) == (98, 100.0)
    assert tagging_recipe.plateau_range({"cvt": ([], [])}) is None


def test_the_scripts_plan_and_collect_the_recipe_table(tmp_path, capsys):
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    (vocab / "config.json").write_text("{}")
    script = runpy.run_path(str(BENCHMARKS / "run_tagging_table.py"))
    runs_dir = tmp_path / "tag-recipe"
    script["main"](["--data-dir", "DATA", "--vocab", str(vocab), "--recipe", "cvt-paper", "--runs-dir", str(runs_dir),
                    "--rows", "multitask", "--recipe-overrides", '{"label_scheme": "bio"}', "--dry-run"])
    out = capsys.readouterr().out
    commands = [line for line in out.splitlines() if "modeling_cove.training.commands.train_tagger" in line]
    assert len(commands) == 6 and all("--preset cvt-paper --hyperparameters '{\"label_scheme\": \"bio\"}'" in line
                                      for line in commands)
    assert "the hyperparameters of multitask:" in out and "collect_tagging.py --recipe" in out
    script["main"](["--data-dir", "DATA", "--vocab", str(vocab), "--recipe", "cvt-paper", "--runs-dir", str(runs_dir),
                    "--rows", "multitask", "conll2000", "--seeds", "2", "3", "--dry-run"])  # a machine's share
    commands = [line for line in capsys.readouterr().out.splitlines() if "commands.train_tagger" in line]
    assert [(line.split("--seed ")[1].split()[0], line.split("--output-dir ")[1].split()[0]) for line in commands] == [
        (seed, str(runs_dir / row / f"{column}-seed{seed}")) for seed in "23" for row in ("conll2000", "multitask")
        for column in ("supervised", "cvt")]
    status, err = exit_of(script["main"], ["--data-dir", "DATA", "--vocab", str(vocab), "--recipe", "cvt-paper",
                                           "--rows", "multitask", "--seeds", "3", "4", "--dry-run"], capsys)
    assert status == 2 and "--seeds 4: no run of the table asked for has that seed" in err
    status, err = exit_of(script["main"], ["--data-dir", "DATA", "--recipe", "cvt-paper", "--recipe-overrides",
                                           "{oops", "--dry-run"], capsys)
    assert status == 2 and "not valid JSON" in err

    fake_recipe_runs(runs_dir)
    spec = importlib.util.spec_from_file_location("collect_tagging", BENCHMARKS / "collect_tagging.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    output = tmp_path / "tagging_cvt.json"
    collect.main(["--recipe", "--runs-dir", str(runs_dir), "--output", str(output), "--markdown"])
    assert "| conll2000 (F1) | 95.03 ± 0.15 (3) |" in capsys.readouterr().out
    later = tmp_path / "later"  # another machine's runs: a new seed merged in, the rest kept
    run = recipe_runs("vocab", "DATA", rows=["conll2000"])[-2:]
    for r, test in zip(run, (0.951, 0.954)):
        write_run(later, r, {"conll2000": [0.9, test]}, {"conll2000": test})
    collect.main(["--recipe", "--runs-dir", str(later), "--output", str(output), "--merge"])
    merged = json.loads(output.read_text())["results"]["conll2000"]
    assert merged["cvt"]["versus_supervised"]["test"]["seeds"] == [1, 2, 3, 5]
    assert merged["supervised"]["test_f1"]["values"] == [95.0, 95.2, 94.9, 95.1]
    status, err = exit_of(collect.main, ["--recipe", "--data-dir", "DATA", "--encoder", "x"], capsys)
    assert status == 2 and "not with --recipe" in err


def test_runs_of_one_row_under_other_recipes_are_refused_not_paired(tmp_path, capsys):
    """conll2000/cvt-seed1 rerun with '{"label_scheme": "bio"}' while the row's other runs ran plain cvt-paper: the
    row's cells would pool and pair two recipes, so the collection stops and names the folders."""
    runs_dir, output = tmp_path / "tag-recipe", tmp_path / "tagging_cvt.json"
    fake_recipe_runs(runs_dir)
    rerun = recipe_runs("vocab", "DATA", overrides={"label_scheme": "bio"}, rows=["conll2000"], columns=["cvt"])[0]
    assert rerun.folder == "conll2000/cvt-seed1"
    metrics = runs_dir / rerun.folder / "metrics.json"
    metrics.unlink()
    metrics.parent.rmdir()
    write_run(runs_dir, rerun, {"conll2000": [0.9, 0.95]}, {"conll2000": 0.955})
    with pytest.raises(ValueError, match="row conll2000 recorded 2 recipes") as caught:
        collect_recipe(runs_dir, output)
    message = str(caught.value)
    assert '--preset cvt-paper --hyperparameters {"label_scheme": "bio"}: conll2000/cvt-seed1;' in message
    assert ("--preset cvt-paper --hyperparameters None: conll2000/cvt-seed2, conll2000/cvt-seed3, "
            "conll2000/supervised-seed1, conll2000/supervised-seed2, conll2000/supervised-seed3") in message
    assert "resolved hyperparameters that differ: label_scheme" in message and not output.exists()
    # another row on another recipe is the report's second recipe, not an error
    (runs_dir / rerun.folder / "metrics.json").unlink()
    (runs_dir / rerun.folder).rmdir()
    for run in recipe_runs("vocab", "DATA", overrides={"label_scheme": "bio"}, rows=["ewt_upos"])[:2]:
        write_run(runs_dir, run, {"ewt_upos": [0.9, 0.93]}, {"ewt_upos": 0.93})
    report = collect_recipe(runs_dir, output)
    assert sorted(tuple(r["rows"]) for r in report["recipe"]) == [("conll2000", "multitask"), ("ewt_upos",)]
    # the command line: one line, exit 2
    write_run(runs_dir, rerun, {"conll2000": [0.9, 0.95]}, {"conll2000": 0.955})
    spec = importlib.util.spec_from_file_location("collect_tagging", BENCHMARKS / "collect_tagging.py")
    collect = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(collect)
    status, err = exit_of(collect.main, ["--recipe", "--runs-dir", str(runs_dir), "--output", str(output)], capsys)
    assert status == 2 and "row conll2000 recorded 2 recipes" in err and "Traceback" not in err


def test_runs_the_record_holds_are_not_run_again(tmp_path, capsys):
    """A new machine: the runs folder of an earlier session is gone, the collected tagging_cvt.json stays. The runner
    leaves out the runs it records with the planned settings and recipe, and plans those it does not (other seeds,
    or a run of other overrides)."""
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    (vocab / "config.json").write_text("{}")
    earlier, output = tmp_path / "earlier", tmp_path / "tagging_cvt.json"
    runs = {run.folder: run for run in recipe_runs(str(vocab), "DATA", rows=["conll2000"])}
    for seed in (1, 2):
        for column in ("supervised", "cvt"):
            write_run(earlier, runs[f"conll2000/{column}-seed{seed}"], {"conll2000": [0.9, 0.95]}, {"conll2000": 0.95})
    collect_recipe(earlier, output)
    assert json.loads(output.read_text())["results"]["conll2000"]["cvt"]["runs"][0]["settings"]["seed"] == 1
    script = runpy.run_path(str(BENCHMARKS / "run_tagging_table.py"))

    def planned(*flags):
        script["main"](["--data-dir", "DATA", "--vocab", str(vocab), "--recipe", "cvt-paper", "--rows", "conll2000",
                        "--runs-dir", str(tmp_path / "now"), "--dry-run", *flags])
        return [line.split("--output-dir ")[1].split()[0].split("now/")[1]
                for line in capsys.readouterr().out.splitlines() if "commands.train_tagger" in line]

    later = [f"conll2000/{column}-seed{seed}" for seed in (3, 4, 5) for column in ("supervised", "cvt")]
    assert planned("--record", str(output)) == later
    assert planned("--record", "none") == list(runs)
    assert planned("--record", str(tmp_path / "not-there.json")) == list(runs)  # before the first collection
    assert planned("--record", str(output), "--recipe-overrides", '{"label_scheme": "bio"}') == list(runs)
    script["main"](["--data-dir", "DATA", "--vocab", str(vocab), "--recipe", "cvt-paper", "--rows", "conll2000",
                    "--record", str(output), "--dry-run"])
    assert f"collect_tagging.py --recipe --merge --output {output} --markdown" in capsys.readouterr().out
    # the same data folder spelled otherwise (absolute here, relative then): the same runs
    report = json.loads(output.read_text())
    for cell in report["results"]["conll2000"].values():
        for run in cell["runs"]:
            run["settings"]["data_dir"] = str(Path("DATA").resolve())
            if run["settings"]["cvt"]:  # its text files, by their absolute path too
                run["settings"]["unlabeled"] = [str(Path(f).resolve()) for f in run["settings"]["unlabeled"]]
    output.write_text(json.dumps(report))
    assert planned("--record", str(output)) == later
    # weights recorded other than the encoder's now (pretrained again since): run again
    (vocab / "model.safetensors").write_bytes(b"weights now")
    assert planned("--record", str(output)) == later  # runs that recorded no sha256 compare by the path alone
    for cell in report["results"]["conll2000"].values():
        for run in cell["runs"]:
            run["encoder_weights"] = "0" * 64
    output.write_text(json.dumps(report))
    assert planned("--record", str(output)) == list(runs)
    status, err = exit_of(script["main"], ["--data-dir", "DATA", "--record", str(output), "--dry-run"], capsys)
    assert status == 2 and "--record goes with --recipe" in err
    (tmp_path / "tagging.json").write_text(json.dumps({"papers": {}}))  # another collector's file
    status, err = exit_of(script["main"], ["--data-dir", "DATA", "--vocab", str(vocab), "--recipe", "cvt-paper",
                                           "--record", str(tmp_path / "tagging.json"), "--dry-run"], capsys)
    assert status == 2 and "is not a recipe table" in err
