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


def test_collect_takes_gaps_against_the_latest_supervised_run(tmp_path):
    args = arguments(tmp_path)
    runs = ablation.plan(args)
    folder = {(s, c): tmp_path / run.folder for s, c, run in runs}
    write_run(folder[("equal-steps", "supervised")], 0.9, [[250, 0.85], [500, 0.9]])
    write_run(folder[("equal-steps", "cvt")], 0.905, [[250, 0.86], [500, 0.905]])
    write_run(folder[("news-text", "cvt")], 0.91, [[250, 0.87], [500, 0.91]])
    result = ablation.collect(args, runs)
    steps = {s["step"]: s for s in result["steps"]}
    assert steps["as-the-table"]["runs"]["supervised"]["source"] == "benchmarks/results/tagging.json"
    assert steps["equal-steps"]["gap"] == 0.5 and steps["news-text"]["gap"] == 1.0
    assert steps["news-text"]["supervised_from"] == "the previous step"
    assert steps["news-text"]["runs"]["cvt"]["validation_curve"] == [[250, 87.0], [500, 91.0]]
    assert steps["boundaries"]["gap"] is None and steps["boundaries"]["runs"] == {}


def test_the_validation_curves_are_drawn(tmp_path):
    args = arguments(tmp_path)
    runs = ablation.plan(args)
    folder = {(s, c): tmp_path / run.folder for s, c, run in runs}
    write_run(folder[("equal-steps", "supervised")], 0.9, [[250, 0.85], [500, 0.9]])
    write_run(folder[("equal-steps", "cvt")], 0.905, [[250, 0.86], [500, 0.905]])
    path = ablation.plot_validation_curves(ablation.collect(args, runs), tmp_path / "curves.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
