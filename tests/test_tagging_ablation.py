"""benchmarks/run_tagging_ablation.py: the cumulative plan (each step adds its hyperparameters to the previous ones; a
supervised run only where the supervised column changes) and the results it collects (gaps against the latest
supervised run)."""

import json
from pathlib import Path

import run_tagging_ablation as ablation
from modeling_cove.training.commands.train_tagger import HYPERPARAMETER_DEFAULTS


def arguments(tmp_path, **overrides):
    return ablation.AblationArguments(**{"data_dir": "DATA", "runs_dir": str(tmp_path), **overrides})


def test_the_plan_is_cumulative_and_runs_supervised_only_where_it_changes(tmp_path):
    runs = ablation.plan(arguments(tmp_path))
    seen, previous = [], {}
    for step, _, added, supervised_changes in ablation.STEPS:
        columns = [column for s, column, _ in runs if s == step]
        assert columns == (["supervised", "cvt"] if supervised_changes else ["cvt"])
        for s, column, run in runs:
            if s != step:
                continue
            flags = list(run.flags)
            hyperparameters = json.loads(flags[flags.index("--hyperparameters") + 1])
            assert hyperparameters == {**previous, **added} and set(hyperparameters) <= set(HYPERPARAMETER_DEFAULTS)
            assert ("--cvt" in flags) == (column == "cvt")
            if column == "cvt":
                text = flags[flags.index("--unlabeled") + 1:]
                news = [str(Path("DATA") / "english_unlabelled" / f"{n}.txt.xz") for n in ("reuters", "abc", "brown")]
                assert text == (["imdb", "sst"] if step == "equal-steps" else news)
        previous = {**previous, **added}
        seen.append(step)
    assert seen[0] == "equal-steps" and len({run.folder for _, _, run in runs}) == len(runs)


def write_run(folder: Path, f1: float, curve: list):
    folder.mkdir(parents=True)
    epochs = [{"labelled_steps": steps, "validation_main": value} for steps, value in curve]
    folder.joinpath("metrics.json").write_text(json.dumps({
        "command": "cove-train-tagger ...", "commit": "abc", "machine": {"cpu": "x"}, "hyperparameters": {},
        "results": {"conll2000": {"validation": {"f1": f1}}}, "best_epoch": 2, "epochs": epochs, "global_step": 500,
        "train_seconds": 10.0, "stop_reason": "max epochs"}))


def test_collect_takes_gaps_against_the_latest_supervised_run_of_each_seed(tmp_path):
    args = arguments(tmp_path)
    folder = {(s, c): tmp_path / run.folder for s, c, run in ablation.plan(args)}
    write_run(folder[("equal-steps", "supervised")], 0.9, [[250, 0.85], [500, 0.9]])
    write_run(folder[("equal-steps", "cvt")], 0.905, [[250, 0.86], [500, 0.905]])
    write_run(folder[("news-text", "cvt")], 0.91, [[250, 0.87], [500, 0.91]])
    second = {(s, c): tmp_path / run.folder for s, c, run in ablation.plan(arguments(tmp_path, seed=2))}
    write_run(second[("equal-steps", "supervised")], 0.91, [[250, 0.85], [500, 0.91]])
    write_run(second[("equal-steps", "cvt")], 0.912, [[250, 0.86], [500, 0.912]])
    result = ablation.collect(args)
    assert result["seeds"] == [1, 2]
    table = json.loads((ablation.RESULTS / "tagging.json").read_text())["results"]["conll2000"]
    spread = table["cvt"]["versus_supervised"]["validation"]["std"]
    assert result["spread"]["std"] == spread
    steps = {s["step"]: s for s in result["steps"]}
    first = {seed: {c: next(r["validation_f1"] for r in table[c]["runs"] if r["seed"] == seed)
                    for c in ("supervised", "cvt")} for seed in (1, 2)}
    table_gap = {seed: round(first[seed]["cvt"] - first[seed]["supervised"], 2) for seed in (1, 2)}
    assert steps["as-the-table"]["runs"]["1"]["supervised"]["source"] == "benchmarks/results/tagging.json"
    assert steps["as-the-table"]["gap"] == {"1": table_gap[1], "2": table_gap[2]}
    assert steps["equal-steps"]["gap"] == {"1": 0.5, "2": 0.2}
    assert steps["equal-steps"]["gap_change"] == {"1": round(0.5 - table_gap[1], 2), "2": round(0.2 - table_gap[2], 2)}
    assert steps["equal-steps"]["mean_gap"] == 0.35
    assert steps["equal-steps"]["second_seed"] == (abs(round(0.5 - table_gap[1], 2)) > spread)
    assert steps["news-text"]["gap"] == {"1": 1.0, "2": None} and steps["news-text"]["gap_change"]["1"] == 0.5
    assert steps["news-text"]["second_seed"] == (0.5 > spread)
    assert steps["news-text"]["supervised_from"]["1"] == "the previous step"
    assert steps["news-text"]["runs"]["1"]["cvt"]["validation_curve"] == [[250, 87.0], [500, 91.0]]
    assert steps["boundaries"]["gap"] == {"1": None, "2": None} and steps["boundaries"]["runs"]["1"] == {}
    assert steps["boundaries"]["second_seed"] is None
    changes = [round(0.5 - table_gap[1], 2), round(0.2 - table_gap[2], 2)]
    assert steps["equal-steps"]["mean_gap_change"] == round(sum(changes) / 2, 2)
    choice = result["choice"]  # news text and the budget are the table's by design; the others wait for their runs
    assert choice["kept"] == choice["dropped"] == [] and choice["recipe_overrides"] == {}
    assert choice["pending"] == [step for step, *_ in ablation.STEPS if step not in ("equal-steps", "news-text")]


def test_the_recipe_keeps_a_change_unless_it_lowers_the_gap_by_more_than_the_spread():
    names = [step for step, *_ in ablation.STEPS]
    # per step its gap changes by seed; a step marked for a second seed waits for it
    changes = {"student-dropout": [0.59, 0.4], "full-module": [0.0], "boundaries": [-0.2], "ema": [-0.15, -0.258],
               "sgd": [-1.0], "label-smoothing": [0.5]}
    marked = {"student-dropout", "label-smoothing"}
    steps = [{"step": name, "gap_change": dict(enumerate(changes.get(name, [None]))), "second_seed": name in marked}
             for name in names]
    choice = ablation.recipe_choice(steps, 0.2)
    assert choice["kept"] == ["student-dropout", "full-module", "boundaries"]
    assert choice["dropped"] == ["ema", "sgd"]  # ema: -0.204 unrounded, below -0.20
    assert choice["pending"] == ["label-smoothing", "trainable-vectors", "bioes"]
    assert choice["recipe_overrides"] == {"ema_decay": 0.0, "optimizer": "adam", "learning_rate": 1e-3,
                                          "momentum": 0.9, "warmup_steps": 0, "lr_decay": 0.0}


def test_the_validation_curves_are_drawn(tmp_path):
    args = arguments(tmp_path)
    folder = {(s, c): tmp_path / run.folder for s, c, run in ablation.plan(args)}
    write_run(folder[("equal-steps", "supervised")], 0.9, [[250, 0.85], [500, 0.9]])
    write_run(folder[("equal-steps", "cvt")], 0.905, [[250, 0.86], [500, 0.905]])
    path = ablation.plot_validation_curves(ablation.collect(args), tmp_path / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


def test_a_marked_step_brings_the_runs_its_second_gap_and_change_read(tmp_path):
    """--second-seeds: a marked step's runs of the next seed, the previous step's, and for a CVT-only step among them
    the supervised run its gap reads (the latest step before it with one); the first step's previous is the table's."""
    def chosen(*marked):
        runs = ablation.second_seed_runs(arguments(tmp_path), list(marked))
        assert {run.seed for run in runs} == ({2} if marked else set())
        return [run.column for run in runs]

    assert chosen() == []
    assert chosen("equal-steps") == ["equal-steps-supervised", "equal-steps-cvt"]
    # student dropout (CVT only) after news text (CVT only): both read equal-steps' supervised run
    assert chosen("student-dropout") == ["equal-steps-supervised", "news-text-cvt", "student-dropout-cvt"]
    assert chosen("boundaries") == ["equal-steps-supervised", "full-module-cvt", "boundaries-supervised",
                                    "boundaries-cvt"]
    assert chosen("sgd") == ["trainable-vectors-supervised", "trainable-vectors-cvt", "sgd-supervised", "sgd-cvt"]
    assert len(chosen("equal-steps", "student-dropout", "boundaries", "trainable-vectors", "sgd")) == 13
