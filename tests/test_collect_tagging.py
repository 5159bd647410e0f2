"""instruments.tagging (behind benchmarks/collect_tagging.py): the tagging table from metrics.json files
laid out as `cove-train-tagger` writes them, checked against values computed by hand."""

import importlib.util
import json
import math
import statistics
from pathlib import Path

import pytest
from scipy.stats import t as student_t

from instruments.tagging import collect_cove_t, collect_tagging, markdown_table

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "collect_tagging.py"


def write_run(runs, folder, seed, scores, metric="f1", encoder_weights=None, **settings):
    """runs/<folder>/metrics.json with {task: (test, validation)} as fractions, as TaggerLoop.finish writes it (the
    sha256 of the encoder's weights where given: runs older than that record have none)."""
    path = runs / folder / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "command": f"cove-train-tagger {folder}", "commit": "abc123", "settings": {"seed": seed, **settings},
        **({"encoder_weights": encoder_weights} if encoder_weights else {}),
        "machine": {"cpu": "AMD EPYC", "cpu_model": "25/17/1"}, "train_seconds": 100.0 + seed,
        "tasks": {task: {"metric": "accuracy" if task == "ewt_upos" else metric} for task in scores},
        "epochs": [{"epoch": 1}, {"epoch": 2}], "best_epoch": 2,
        "results": {task: {split: {"f1": value, "accuracy": value, "precision": value, "recall": value,
                                   "words_without_tokens": 0}
                           for split, value in (("test", test), ("validation", validation))}
                    for task, (test, validation) in scores.items()}}))


def fake_runs(runs):
    for seed, test in ((1, 0.950), (2, 0.952), (3, 0.949)):
        write_run(runs, f"conll2000/supervised-seed{seed}", seed, {"conll2000": (test, test + 0.01)})
    for seed, test in ((1, 0.954), (2, 0.955), (3, 0.956)):
        write_run(runs, f"conll2000/vectors+cove-seed{seed}", seed, {"conll2000": (test, test + 0.01)})
    for seed, test in ((1, 0.955), (2, 0.956), (4, 0.960)):  # seed 3 missing, seed 4 without a supervised partner
        write_run(runs, f"conll2000/cvt-seed{seed}", seed, {"conll2000": (test, test + 0.01)})
    write_run(runs, "conll2000/vectors+bilm-seed1", 1, {"conll2000": (0.5, 0.5)}, limit_sentences=100)  # smoke
    (runs / "wnut17/supervised-seed1").mkdir(parents=True)
    (runs / "wnut17/supervised-seed1/metrics.json").write_text(json.dumps({"settings": {"seed": 1}}))  # running
    write_run(runs, "ewt_upos/supervised-seed1", 1, {"ewt_upos": (0.930, 0.935)})
    ablation = runs / "ablation/equal-steps-cvt-seed1/metrics.json"  # --no-test: validation scores alone
    ablation.parent.mkdir(parents=True)
    ablation.write_text(json.dumps({"settings": {"seed": 1, "no_test": True},
                                    "results": {"conll2000": {"validation": {"f1": 0.92}}}}))
    write_run(runs, "conll2000-10pct/supervised-seed1", 1, {"conll2000": (0.900, 0.905)}, train_fraction=0.1)
    write_run(runs, "conll2000-10pct/cvt-seed1", 1, {"conll2000": (0.912, 0.915)}, train_fraction=0.1)
    for seed, (chunk, pos) in ((1, (0.953, 0.940)), (2, (0.957, 0.941))):
        write_run(runs, f"multitask/cvt-seed{seed}", seed, {"conll2000": (chunk, chunk), "ewt_upos": (pos, pos)},
                  cvt=True)


def t_interval(diffs):
    """The 95% t interval of the mean of `diffs`, by hand."""
    mean, n = statistics.mean(diffs), len(diffs)
    half = student_t.ppf(0.975, n - 1) * statistics.stdev(diffs) / math.sqrt(n)
    return round(mean, 2), round(mean - half, 2), round(mean + half, 2)


def test_means_pairing_and_t_interval(tmp_path):
    runs, out = tmp_path / "tag", tmp_path / "tagging.json"
    fake_runs(runs)
    collect_tagging(runs, out, command="python benchmarks/collect_tagging.py")
    report = json.loads(out.read_text())
    assert report["command"] == "python benchmarks/collect_tagging.py" and report["machine"] == ["AMD EPYC (25/17/1)"]
    chunking = report["results"]["conll2000"]
    assert list(chunking) == ["supervised", "vectors+cove", "cvt"]  # the smoke vectors+bilm run is left out
    assert sorted(item["folder"] for item in report["left_out"]) == ["ablation/equal-steps-cvt-seed1",
                                                                     "conll2000/vectors+bilm-seed1",
                                                                     "wnut17/supervised-seed1"]
    assert "ablation" not in report["results"]
    supervised = chunking["supervised"]
    assert supervised["test_f1"] == {"mean": 95.03, "std": 0.15, "n": 3, "values": [95.0, 95.2, 94.9]}
    assert supervised["validation_f1"]["values"] == [96.0, 96.2, 95.9]
    assert supervised["runs"][0] == {"folder": "conll2000/supervised-seed1", "seed": 1, "test_f1": 95.0,
                                     "validation_f1": 96.0, "best_epoch": 2, "epochs": 2, "train_seconds": 101.0,
                                     "command": "cove-train-tagger conll2000/supervised-seed1", "commit": "abc123",
                                     "cpu": "AMD EPYC", "cpu_model": "25/17/1", "gpu": None,
                                     "train_fraction": None}
    # vectors+cove - supervised on seeds 1, 2, 3: 0.4, 0.3, 0.7
    cove = chunking["vectors+cove"]["versus_supervised"]["test"]
    mean, low, high = t_interval([0.4, 0.3, 0.7])
    assert (mean, low, high) == (0.47, -0.05, 0.98)
    assert {k: cove[k] for k in ("mean", "low", "high", "n")} == {"mean": mean, "low": low, "high": high, "n": 3}
    # cvt ran seeds 1, 2, 4 and supervised 1, 2, 3: paired on 1 and 2 only (0.5, 0.4)
    cvt = chunking["cvt"]
    assert cvt["test_f1"]["values"] == [95.5, 95.6, 96.0] and cvt["test_f1"]["mean"] == 95.7
    paired = cvt["versus_supervised"]["test"]
    assert paired["seeds"] == [1, 2] and paired["n"] == 2
    assert (paired["mean"], paired["low"], paired["high"]) == t_interval([0.5, 0.4]) == (0.45, -0.19, 1.09)
    assert cvt["versus_supervised"]["validation"]["mean"] == 0.45
    # accuracy task, one seed; the small-data row against its own supervised column
    assert report["results"]["ewt_upos"]["supervised"]["test_accuracy"] == {"mean": 93.0, "std": 0.0, "n": 1,
                                                                           "values": [93.0]}
    small = report["results"]["conll2000-10pct"]["cvt"]
    assert small["versus_supervised"]["baseline"] == "conll2000-10pct/supervised"
    assert small["versus_supervised"]["test"] == {"mean": 1.2, "low": None, "high": None, "n": 1, "seeds": [1],
                                                  "higher_on": 1, "lower_on": 0}
    # multi-task: a cell per task, each against the supervised column of its own full task
    multitask = report["results"]["multitask"]
    assert multitask["conll2000"]["cvt"]["test_f1"]["values"] == [95.3, 95.7]
    assert multitask["conll2000"]["cvt"]["versus_supervised"]["baseline"] == "conll2000/supervised"
    assert multitask["conll2000"]["cvt"]["versus_supervised"]["test"]["mean"] == 0.4  # 0.3, 0.5
    assert multitask["ewt_upos"]["cvt"]["test_accuracy"]["values"] == [94.0, 94.1]
    assert multitask["ewt_upos"]["cvt"]["versus_supervised"]["test"]["seeds"] == [1]  # supervised ran seed 1 only
    # the papers beside ours
    assert report["papers"]["conll2000"]["cvt_readme"]["test_f1_at_least"] == 96.6
    assert report["papers"]["wnut17"]["elmo"]["value"] == 92.22
    assert report["papers"]["ewt_upos"]["table1"] == {"CVT + multi-task": 97.76}

    table = markdown_table(report)
    assert "| task (test) | supervised | vectors+cove | cvt |" in table
    assert "| conll2000 (F1) | 95.03 ± 0.15 (3) | 95.50 ± 0.10 (3)<br>Δ +0.47 [-0.05, +0.98] (n=3) |" in table
    assert "| multitask: ewt_upos (accuracy) | – | – | 94.05 ± 0.07 (2)<br>Δ +1.00 (n=1) |" in table


def test_merge_keeps_runs_whose_folders_are_absent(tmp_path, capsys):
    first, out = tmp_path / "first", tmp_path / "tagging.json"
    fake_runs(first)
    collect_tagging(first, out)
    second = tmp_path / "second"  # another session: seed 1 run again, one new seed
    write_run(second, "conll2000/supervised-seed1", 1, {"conll2000": (0.951, 0.96)})
    write_run(second, "conll2000/supervised-seed5", 5, {"conll2000": (0.953, 0.96)})
    spec = importlib.util.spec_from_file_location("collect_tagging", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--runs-dir", str(second), "--output", str(out), "--merge", "--markdown"])
    merged = json.loads(out.read_text())
    supervised = merged["results"]["conll2000"]["supervised"]
    assert supervised["test_f1"]["values"] == [95.1, 95.2, 94.9, 95.3]  # seed 1 replaced, 2 and 3 kept, 5 added
    assert supervised["test_f1"]["mean"] == round(statistics.mean([95.1, 95.2, 94.9, 95.3]), 2) == 95.12
    cove = merged["results"]["conll2000"]["vectors+cove"]["versus_supervised"]["test"]  # 95.4-95.1, 0.3, 0.7
    assert (cove["mean"], cove["low"], cove["high"]) == t_interval([0.3, 0.3, 0.7])
    assert merged["results"]["multitask"]["ewt_upos"]["cvt"]["test_accuracy"]["n"] == 2
    printed = capsys.readouterr().out
    assert "wrote" in printed and "| conll2000 (F1) | 95.12 ± 0.17 (4) |" in printed
    script.main(["--runs-dir", str(second), "--output", str(out)])  # without --merge: only what is here
    assert list(json.loads(out.read_text())["results"]) == ["conll2000"]


def cove_t_runs(runs, seeds=(1, 2, 3), tests=None):
    """The CoVe-T comparison's run folders (runs/tag-cove-t/conll2000/<column>-seed<N>), test F1 as fractions."""
    tests = tests or {"supervised": (0.950, 0.952, 0.949), "vectors+cove": (0.954, 0.955, 0.956),
                      "vectors+cove-t": (0.957, 0.954, 0.958)}
    for column, values in tests.items():
        for seed, test in zip(seeds, values):
            write_run(runs, f"conll2000/{column}-seed{seed}", seed, {"conll2000": (test, test + 0.01)})


def test_the_cove_t_comparison_is_a_section_of_tagging_json_paired_by_seed(tmp_path, capsys):
    """collect_tagging.py --cove-t writes tagging.json's section cove_t_comparison from runs/tag-cove-t, the table
    kept as it is; its pairs by seed checked against a hand computation; the table's own collection keeps the
    section; --merge replaces the section's runs by folder and keeps the others."""
    table_runs, runs, out = tmp_path / "tag", tmp_path / "tag-cove-t", tmp_path / "tagging.json"
    fake_runs(table_runs)
    collect_tagging(table_runs, out)
    table = json.loads(out.read_text())
    cove_t_runs(runs)
    spec = importlib.util.spec_from_file_location("collect_tagging", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    script.main(["--cove-t", "--runs-dir", str(runs), "--output", str(out)])
    assert "wrote the section cove_t_comparison of" in capsys.readouterr().out
    report = json.loads(out.read_text())
    assert {k: v for k, v in report.items() if k != "cove_t_comparison"} == table
    section = report["cove_t_comparison"]
    assert list(section["columns"]) == ["supervised", "vectors+cove", "vectors+cove-t"]
    assert section["machine"] == ["AMD EPYC (25/17/1)"] and section["left_out"] == []
    cells = section["results"]["conll2000"]
    assert cells["vectors+cove-t"]["test_f1"]["values"] == [95.7, 95.4, 95.8]
    paired = section["paired"]["conll2000"]
    assert list(paired) == ["vectors+cove-t - supervised", "vectors+cove - supervised", "vectors+cove-t - vectors+cove"]
    for name, diffs in (("vectors+cove-t - supervised", [0.7, 0.2, 0.9]),
                        ("vectors+cove - supervised", [0.4, 0.3, 0.7]),
                        ("vectors+cove-t - vectors+cove", [0.3, -0.1, 0.2])):
        mean, low, high = t_interval(diffs)
        found = paired[name]["test"]
        assert {k: found[k] for k in ("mean", "low", "high", "n", "seeds")} == {
            "mean": mean, "low": low, "high": high, "n": 3, "seeds": [1, 2, 3]}, name
    assert paired["vectors+cove-t - vectors+cove"]["test"]["mean"] == 0.13  # (0.3 - 0.1 + 0.2) / 3

    collect_tagging(table_runs, out)  # the table collected again: the section stays
    assert json.loads(out.read_text())["cove_t_comparison"] == section
    later = tmp_path / "later"  # seed 3 of vectors+cove-t again, seed 4 of every column
    cove_t_runs(later, seeds=(3,), tests={"vectors+cove-t": (0.960,)})
    cove_t_runs(later, seeds=(4,), tests={c: (0.95,) for c in ("supervised", "vectors+cove", "vectors+cove-t")})
    script.main(["--cove-t", "--runs-dir", str(later), "--output", str(out), "--merge"])
    merged = json.loads(out.read_text())["cove_t_comparison"]
    assert merged["results"]["conll2000"]["vectors+cove-t"]["test_f1"]["values"] == [95.7, 95.4, 96.0, 95.0]
    assert merged["paired"]["conll2000"]["vectors+cove-t - vectors+cove"]["test"]["seeds"] == [1, 2, 3, 4]


def test_the_cove_t_comparison_pairs_runs_on_one_kind_of_device(tmp_path):
    """A seed of the comparison run on a GPU machine (its metrics name the GPU) beside CPU runs of the same row stops
    the collection, naming the seeds of each kind."""
    runs = tmp_path / "tag-cove-t"
    cove_t_runs(runs)
    gpu_run = runs / "conll2000" / "vectors+cove-t-seed2" / "metrics.json"
    metrics = json.loads(gpu_run.read_text())
    gpu_run.write_text(json.dumps({**metrics, "machine": {**metrics["machine"], "gpu": "NVIDIA H200"}}))
    with pytest.raises(ValueError, match=r"cove_t_comparison / conll2000: runs on a CPU and on a GPU \(cpu: seeds "
                                         r"\[1, 2, 3\]; gpu: seeds \[2\]\)"):
        collect_cove_t(runs, tmp_path / "tagging.json")


def test_a_cell_with_two_runs_of_one_seed_is_refused(tmp_path):
    """A leftover copy of a run folder under another name (vectors+cove-t-seed6 holding seed 1's run) would count
    seed 1 twice in the mean and pair one of the two at random: the collection stops, naming the seed."""
    runs = tmp_path / "tag-cove-t"
    cove_t_runs(runs)
    copy = runs / "conll2000" / "vectors+cove-t-seed6"
    copy.mkdir()
    (copy / "metrics.json").write_text((runs / "conll2000" / "vectors+cove-t-seed1" / "metrics.json").read_text())
    with pytest.raises(ValueError, match=r"conll2000/vectors\+cove-t: seed\(s\) \[1\] have two runs"):
        collect_cove_t(runs, tmp_path / "tagging.json")


def test_a_cell_over_two_encoder_weights_is_refused(tmp_path, capsys):
    """CoVe-T's vectors+cove-t seeds over two pretrainings of CoVe-T (the sha256 each run recorded): one cell, one
    encoder; runs older than the record join any; the command line says so in one line, exit 2."""
    from conftest import exit_of

    runs, out = tmp_path / "tag-cove-t", tmp_path / "tagging.json"
    for seed, weights in ((1, "a" * 64), (2, "a" * 64), (3, None)):
        write_run(runs, f"conll2000/vectors+cove-t-seed{seed}", seed, {"conll2000": (0.95, 0.96)},
                  encoder_weights=weights)
    section = collect_cove_t(runs, out)
    assert [r.get("encoder_weights") for r in section["results"]["conll2000"]["vectors+cove-t"]["runs"]] == [
        "a" * 64, "a" * 64, None]
    write_run(runs, "conll2000/vectors+cove-t-seed4", 4, {"conll2000": (0.95, 0.96)}, encoder_weights="b" * 64)
    spec = importlib.util.spec_from_file_location("collect_tagging", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    status, err = exit_of(script.main, ["--cove-t", "--runs-dir", str(runs), "--output", str(out)], capsys)
    assert status == 2 and "Traceback" not in err
    assert ("conll2000/vectors+cove-t: the runs read different encoders (seeds by weights by sha256: "
            f"{'a' * 12}: [1, 2]; {'b' * 12}: [4])") in err
    # merged with an earlier collection's runs alike: the old record keeps its sha256
    later = tmp_path / "later"
    write_run(later, "multitask/cvt-seed1", 1, {"conll2000": (0.95, 0.95), "ewt_upos": (0.94, 0.94)},
              encoder_weights="c" * 64)
    collect_tagging(later, out)
    again = tmp_path / "again"
    write_run(again, "multitask/cvt-seed2", 2, {"conll2000": (0.95, 0.95), "ewt_upos": (0.94, 0.94)},
              encoder_weights="d" * 64)
    with pytest.raises(ValueError, match="multitask/conll2000/cvt: the runs read different encoders"):
        collect_tagging(again, out, merge=True)


def test_an_output_of_another_kind_is_refused_not_written_over(tmp_path, capsys):
    """collect_tagging.py --recipe --merge --output tagging.json would rewrite tagging.json as a recipe report (its
    papers, tokenization mismatch and CoVe-T section lost): each collector refuses a file of the other's kind, and
    a file that is no JSON object, in one line (exit 2), leaving it as it was."""
    from conftest import exit_of
    from instruments import tagging, tagging_recipe

    from test_tagging_recipe import fake_recipe_runs

    table_runs, recipe_runs, cove_t = tmp_path / "tag", tmp_path / "tag-recipe", tmp_path / "tag-cove-t"
    fake_runs(table_runs)
    fake_recipe_runs(recipe_runs)
    cove_t_runs(cove_t)
    table, recipe = tmp_path / "tagging.json", tmp_path / "tagging_cvt.json"
    report = collect_tagging(table_runs, table, mismatch={"encoder": "vocab"})
    collect_cove_t(cove_t, table)
    assert set(json.loads(table.read_text())) == set(tagging.TAGGING_KEYS) == set(report) | {"cove_t_comparison"}
    assert set(tagging_recipe.collect_recipe(recipe_runs, recipe)) == set(tagging_recipe.RECIPE_KEYS)
    spec = importlib.util.spec_from_file_location("collect_tagging", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    before = {path: path.read_bytes() for path in (table, recipe)}
    tagging_keys, recipe_keys = "cove_t_comparison, papers", "curves, recipe"  # those foreign to the other kind
    for flags, output, kind, foreign in (
            (["--recipe", "--merge", "--runs-dir", str(recipe_runs)], table, "recipe table", tagging_keys),
            (["--recipe", "--runs-dir", str(recipe_runs)], table, "recipe table", tagging_keys),
            (["--runs-dir", str(table_runs)], recipe, "tagging table", recipe_keys),
            (["--cove-t", "--merge", "--runs-dir", str(cove_t)], recipe, "tagging table", recipe_keys)):
        status, err = exit_of(script.main, [*flags, "--output", str(output)], capsys)
        assert status == 2 and f"{output} is not a {kind}" in err, (flags, err)
        assert f"it holds the keys {foreign}" in err and "Traceback" not in err
    assert {path: path.read_bytes() for path in (table, recipe)} == before
    assert not recipe.with_name("tagging_curves.png").exists()
    broken = tmp_path / "broken.json"
    for text, found in (("[1, 2]", "it holds a JSON list"), ("{oops", "is not valid JSON")):
        broken.write_text(text)
        status, err = exit_of(script.main, ["--runs-dir", str(table_runs), "--output", str(broken)], capsys)
        assert status == 2 and found in err and broken.read_text() == text
