"""instruments.results (behind benchmarks/collect_results.py): the classification table (mean ± std over
seeds) and the dropout search, from metrics.json files laid out as the classifier training writes them."""

import hashlib
import json
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from instruments.results import collect_results, encoder_mismatch
from modeling_cove.training.common.files import write_json


def write_run(runs, folder, task, column, seed, dropout, test, validation, **extra):
    path = runs / folder / "metrics.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({
        "task": task, "column": column, "seed": seed, "encoder": "enc", "command": f"train {folder}", "git": "abc",
        "hyperparameters": {"epochs": 15, "dropout": dropout}, "seconds_per_epoch_mean": 70.0,
        "test": {"accuracy": test, "macro_f1": test - 0.1}, "best": {"validation_accuracy": validation}, **extra}))


def test_classification_table_and_dropout_sweep(tmp_path):
    runs = tmp_path / "runs"
    for seed, test in ((1, 0.90), (2, 0.92), (3, 0.91)):
        write_run(runs, f"bcn/trec6/vectors-seed{seed}", "trec6", "vectors", seed, 0.2, test, 0.88)
    write_run(runs, "bcn/trec6/vectors+cove-seed1", "trec6", "vectors+cove", 1, 0.2, 0.89, 0.87)
    write_run(runs, "bcn/trec6/random-seed1", "trec6", "random", 1, 0.2, 0.5, 0.5, limit=100)  # smoke: left out
    write_run(runs, "bcn-dropout/trec6/vectors-d0.3-seed1", "trec6", "vectors", 1, 0.3, 0.93, 0.90)
    write_run(runs, "bcn-dropout/trec6/vectors-d0.1-seed1", "trec6", "vectors", 1, 0.1, 0.91, 0.86)
    collect_results(runs, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "classification.json").read_text())

    vectors = report["results"]["trec6"]["vectors"]
    assert [r["seed"] for r in vectors["runs"]] == [1, 2, 3]
    assert vectors["test_accuracy"] == {"mean": 91.0, "std": round(statistics.stdev([90, 92, 91]), 2), "n": 3}
    assert vectors["test_macro_f1"]["mean"] == 81.0
    assert vectors["paper_table2_validation"] == 94.9
    assert report["results"]["trec6"]["vectors+cove"]["test_accuracy"] == {"mean": 89.0, "std": 0.0, "n": 1}
    assert "random" not in report["results"]["trec6"]

    # the search: each dropout of seed 1, the yaml's 0.2 taken from runs/bcn; seeds 2-3 (no search run) left out
    sweep = report["dropout_sweep"]["trec6"]
    assert list(sweep) == ["vectors"]
    assert [(r["dropout"], r["seed"], r["best_validation_accuracy"], r["test_accuracy"]) for r in sweep["vectors"]] \
        == [(0.1, 1, 86.0, 91.0), (0.2, 1, 88.0, 90.0), (0.3, 1, 90.0, 93.0)]


def test_encoder_variants(tmp_path):
    """BCN runs on a differently pretrained CoVe-S (ENCODER_VARIANTS) get their own table and that CoVe-S's MT
    figures, and stay out of the main table."""
    runs = tmp_path / "runs"
    write_run(runs, "bcn/trec6/vectors+cove-seed1", "trec6", "vectors+cove", 1, 0.2, 0.89, 0.87)
    for seed, test in ((1, 0.90), (2, 0.94)):
        write_run(runs, f"bcn-cove5/trec6/vectors+cove-seed{seed}", "trec6", "vectors+cove", seed, 0.2, test, 0.9)
    mt = runs / "cove-small-5ep" / "metrics.json"
    mt.parent.mkdir(parents=True)
    mt.write_text(json.dumps({"command": "train_mt.py --resume", "epochs": [{"epoch": 5}], "test": {"bleu": 31.0},
                              "replica_weight_sha256": "not copied"}))
    (mt.parent / "curves.png").write_bytes(b"png")
    collect_results(runs, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "classification.json").read_text())

    assert report["results"]["trec6"]["vectors+cove"]["test_accuracy"] == {"mean": 89.0, "std": 0.0, "n": 1}
    variant = report["encoder_variants"]["cove-s-5-epochs"]
    assert variant["mt"] == {"command": "train_mt.py --resume", "epochs": [{"epoch": 5}], "test": {"bleu": 31.0},
                             "curve_png": "mt_cove-s-5-epochs.png"}
    assert (tmp_path / "out" / "mt_cove-s-5-epochs.png").read_bytes() == b"png"
    entry = variant["results"]["trec6"]["vectors+cove"]
    assert entry["test_accuracy"] == {"mean": 92.0, "std": round(statistics.stdev([90, 94]), 2), "n": 2}
    assert [r["seed"] for r in entry["runs"]] == [1, 2]


def test_bilm_pretrained_again_is_an_encoder_variant(tmp_path):
    """BCN runs over a biLM pretrained again (runs/bcn-bilm-repeat over runs/bilm-repeat) are kept out of the table's
    vectors+bilm cell, whose encoder differs, and get their own table with that biLM's pretraining record (as
    runs/bilm's: no loss log, the encoder's sha256, its curves); a merge keeps the record and adds the new seeds."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "bcn/sst2/vectors+bilm-seed1", "sst2", "vectors+scalar_mix", 1, 0.2, 0.86, 0.85,
              encoder_type="bilm", encoder_weights="a" * 64)
    write_run(runs, "bcn-bilm-repeat/sst2/vectors+bilm-seed1", "sst2", "vectors+scalar_mix", 1, 0.2, 0.84, 0.85,
              encoder_type="bilm", encoder_weights="b" * 64)
    (runs / "bilm-repeat" / "encoder").mkdir(parents=True)
    (runs / "bilm-repeat" / "encoder" / "model.safetensors").write_bytes(b"other weights")
    (runs / "bilm-repeat" / "curves.png").write_bytes(b"png")
    (runs / "bilm-repeat" / "metrics.json").write_text(json.dumps({
        "command": "train_bilm.py --output-dir runs/bilm-repeat", "train_tokens_per_second": 1900.0,
        "loss_log": [[1, 7.0]]}))
    collect_results(runs, out)
    report = json.loads((out / "classification.json").read_text())

    assert [r["encoder_weights"] for r in report["results"]["sst2"]["vectors+bilm"]["runs"]] == ["a" * 64]
    variant = report["encoder_variants"]["bilm-zen3"]
    assert variant["bilm"] == {"command": "train_bilm.py --output-dir runs/bilm-repeat",
                               "train_tokens_per_second": 1900.0, "curve_png": "bilm_pretraining_bilm-zen3.png",
                               "encoder_weights": hashlib.sha256(b"other weights").hexdigest()}
    assert (out / "bilm_pretraining_bilm-zen3.png").read_bytes() == b"png"
    assert variant["results"]["sst2"]["vectors+bilm"]["test_accuracy"] == {"mean": 84.0, "std": 0.0, "n": 1}
    assert not (out / "bilm_pretraining.json").exists()  # no runs/bilm: the table's biLM record is left alone

    runs2 = tmp_path / "runs2"
    write_run(runs2, "bcn-bilm-repeat/sst2/vectors+bilm-seed2", "sst2", "vectors+scalar_mix", 2, 0.2, 0.86, 0.85,
              encoder_type="bilm", encoder_weights="b" * 64)
    collect_results(runs2, out, merge=True)
    merged = json.loads((out / "classification.json").read_text())["encoder_variants"]["bilm-zen3"]
    assert merged["bilm"] == variant["bilm"]
    assert merged["results"]["sst2"]["vectors+bilm"]["test_accuracy"] == {
        "mean": 85.0, "std": round(statistics.stdev([84, 86]), 2), "n": 2}


def test_encoder_variant_paired_with_the_tables_columns(tmp_path):
    """A variant's cells are paired by seed with the table's vectors and CoVe-S columns (the variant's cell in place of
    the table's cell of its column, never the table's own biLM runs); only differences involving the variant's cells
    are kept, recomputed after a merge adds seeds."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    for seed, vectors, cove, table_bilm in ((1, 0.86, 0.85, 0.87), (2, 0.87, 0.85, 0.88), (3, 0.86, 0.84, 0.87)):
        write_run(runs, f"bcn/sst2/vectors-seed{seed}", "sst2", "vectors", seed, 0.2, vectors, 0.86)
        write_run(runs, f"bcn/sst2/vectors+cove-seed{seed}", "sst2", "vectors+cove", seed, 0.2, cove, 0.85)
        write_run(runs, f"bcn/sst2/vectors+bilm-seed{seed}", "sst2", "vectors+scalar_mix", seed, 0.2, table_bilm,
                  0.87, encoder_type="bilm", encoder_weights="a" * 64)
    for seed, bilm in ((1, 0.85), (2, 0.88)):
        write_run(runs, f"bcn-bilm-repeat/sst2/vectors+bilm-seed{seed}", "sst2", "vectors+scalar_mix", seed, 0.2, bilm,
                  0.86, encoder_type="bilm", encoder_weights="b" * 64)
    write_run(runs, "bcn-cove5/trec6/vectors+cove-seed1", "trec6", "vectors+cove", 1, 0.2, 0.9, 0.9)  # no vectors
    collect_results(runs, out)
    report = json.loads((out / "classification.json").read_text())
    variant = report["encoder_variants"]["bilm-zen3"]

    assert list(variant["versus_vectors"]["sst2"]) == ["vectors+bilm - vectors"]  # not the table's CoVe-S - vectors
    versus = variant["versus_vectors"]["sst2"]["vectors+bilm - vectors"]["test_accuracy"]
    assert versus["seeds"] == [1, 2] and versus["mean"] == 0.0 and (versus["higher_on"], versus["lower_on"]) == (1, 1)
    head = variant["bilm_versus_cove"]["sst2"]["vectors+bilm - vectors+cove"]
    assert head["test_accuracy"]["mean"] == 1.5 and head["validation_accuracy"]["mean"] == 1.0
    assert report["bilm_versus_cove"]["sst2"]["vectors+bilm - vectors+cove"]["test_accuracy"]["mean"] == 2.67
    assert report["encoder_variants"]["cove-s-5-epochs"]["versus_vectors"] == {}

    runs2 = tmp_path / "runs2"
    write_run(runs2, "bcn-bilm-repeat/sst2/vectors+bilm-seed3", "sst2", "vectors+scalar_mix", 3, 0.2, 0.88, 0.86,
              encoder_type="bilm", encoder_weights="b" * 64)
    collect_results(runs2, out, merge=True)
    merged = json.loads((out / "classification.json").read_text())["encoder_variants"]["bilm-zen3"]
    versus = merged["versus_vectors"]["sst2"]["vectors+bilm - vectors"]["test_accuracy"]
    assert versus["seeds"] == [1, 2, 3] and versus["mean"] == round((-1 + 1 + 2) / 3, 2) and "ci95" in versus


def test_scalar_mix_weights_are_averaged_over_seeds(tmp_path):
    runs = tmp_path / "runs"
    layers = ["[vectors; vectors]", "layer 1", "layer 2"]
    for seed, weights, gamma in ((1, [0.5, 0.3, 0.2], 1.2), (2, [0.7, 0.1, 0.2], 1.4)):
        write_run(runs, f"bcn/trec6/scalar_mix-seed{seed}", "trec6", "scalar_mix", seed, 0.2, 0.9, 0.88,
                  scalar_mix={"layers": layers, "weights": weights, "gamma": gamma})
    write_run(runs, "bcn/trec6/vectors-seed1", "trec6", "vectors", 1, 0.2, 0.9, 0.88, scalar_mix=None)
    collect_results(runs, tmp_path / "out")
    results = json.loads((tmp_path / "out" / "classification.json").read_text())["results"]["trec6"]

    mix = results["scalar_mix"]["scalar_mix"]
    assert mix["layers"] == layers
    assert [w["mean"] for w in mix["weights"]] == [0.6, 0.2, 0.2]
    assert mix["weights"][0]["std"] == round(statistics.stdev([0.5, 0.7]), 3) and mix["gamma"]["mean"] == 1.3
    assert results["scalar_mix"]["runs"][1]["scalar_mix"]["weights"] == [0.7, 0.1, 0.2]
    assert "scalar_mix" not in results["vectors"] and "scalar_mix" not in results["vectors"]["runs"][0]


def test_runs_on_random_subsets_get_their_own_table(tmp_path):
    """--max-train/eval-examples runs (IMDb on a CPU budget) are listed apart, with their subsets, never averaged
    into the main table, wherever under runs/bcn*/ they are."""
    runs = tmp_path / "runs"
    write_run(runs, "bcn/imdb/vectors-seed1", "imdb", "vectors", 1, 0.2, 0.88, 0.87)
    subsets = {"train": "4000 of 22500", "validation": "2000 of 2500", "test": "2000 of 25000"}
    write_run(runs, "bcn-imdb/imdb/vectors-seed1", "imdb", "vectors", 1, 0.2, 0.80, 0.81, subsample=subsets)
    write_run(runs, "bcn-imdb/imdb/vectors+cove-seed1", "imdb", "vectors+cove", 1, 0.2, 0.82, 0.83,
              subsample=subsets)
    collect_results(runs, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "classification.json").read_text())
    assert report["results"]["imdb"]["vectors"]["test_accuracy"] == {"mean": 88.0, "std": 0.0, "n": 1}
    assert list(report["results"]["imdb"]) == ["vectors"]
    subsampled = report["subsampled"]["results"]["imdb"]
    assert subsampled["vectors"]["test_accuracy"]["mean"] == 80.0
    assert subsampled["vectors+cove"]["validation_accuracy"]["mean"] == 83.0
    assert subsampled["vectors+cove"]["runs"][0]["subsample"] == subsets
    assert subsampled["vectors"]["paper_table2_validation"] == 91.1


def test_main_job_figures_are_collected_unless_quick(tmp_path):
    runs = tmp_path / "runs"
    for run_dir, quick in (("main", False), ("main-cove-small", True)):
        (runs / run_dir).mkdir(parents=True)
        (runs / run_dir / "report.json").write_text(json.dumps({"quick": quick, "git": "abc", "command": run_dir}))
        (runs / run_dir / "REPORT.md").write_text(f"# {run_dir}\n")
    collect_results(runs, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "main_embedded.json").read_text())["command"] == "main"
    assert not (tmp_path / "out" / "main_embedded.md").exists()  # its curves' links would point nowhere
    assert not (tmp_path / "out" / "main_cove_small.json").exists()  # a --quick run is no figure


def test_merge_keeps_what_runs_lacks(tmp_path):
    """--merge: runs/ holding only an encoder variant's runs (made on another machine, the earlier runs gone) adds
    that variant to the existing classification.json and keeps its tables; runs found in runs/bcn join the old runs
    of their cell by seed (the same seed replaces the old run). Without --merge such a runs/ leaves the file alone."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "bcn/trec6/vectors-seed1", "trec6", "vectors", 1, 0.2, 0.90, 0.88)
    write_run(runs, "bcn/sst2/vectors-seed1", "sst2", "vectors", 1, 0.2, 0.85, 0.84)
    collect_results(runs, out)
    before = json.loads((out / "classification.json").read_text())

    runs2 = tmp_path / "runs2"
    write_run(runs2, "bcn-gpu/imdb/vectors+cove-seed1", "imdb", "vectors+cove", 1, 0.2, 0.86, 0.87)
    mt = runs2 / "cove-small-gpu" / "metrics.json"
    mt.parent.mkdir(parents=True)
    mt.write_text(json.dumps({"command": "train_mt.py", "test": {"bleu": 30.5}}))
    collect_results(runs2, out)
    assert json.loads((out / "classification.json").read_text()) == before
    collect_results(runs2, out, merge=True)
    merged = json.loads((out / "classification.json").read_text())
    assert merged["results"] == before["results"]
    variant = merged["encoder_variants"]["cove-s-h200"]
    assert variant["mt"]["test"] == {"bleu": 30.5}
    assert variant["results"]["imdb"]["vectors+cove"]["test_accuracy"] == {"mean": 86.0, "std": 0.0, "n": 1}

    # a new seed joins the old one and the mean is computed again; a seed run again replaces its old run
    write_run(runs2, "bcn/trec6/vectors-seed2", "trec6", "vectors", 2, 0.2, 0.80, 0.70)
    collect_results(runs2, out, merge=True)
    merged = json.loads((out / "classification.json").read_text())
    assert merged["results"]["trec6"]["vectors"]["test_accuracy"] == {"mean": 85.0,
                                                                      "std": round(statistics.stdev([90, 80]), 2),
                                                                      "n": 2}
    assert [r["seed"] for r in merged["results"]["trec6"]["vectors"]["runs"]] == [1, 2]
    assert merged["results"]["sst2"] == before["results"]["sst2"]
    assert "cove-s-h200" in merged["encoder_variants"]
    write_run(runs2, "bcn/trec6/vectors-seed1", "trec6", "vectors", 1, 0.2, 0.84, 0.80)
    collect_results(runs2, out, merge=True)
    merged = json.loads((out / "classification.json").read_text())
    assert [r["test_accuracy"] for r in merged["results"]["trec6"]["vectors"]["runs"]] == [84.0, 80.0]


def test_columns_versus_vectors_paired_by_seed(tmp_path):
    """Each column minus the vectors-only column on the seeds both ran, with a 95% t interval computed by hand."""
    runs = tmp_path / "runs"
    for seed, vectors, cove in ((1, 0.90, 0.89), (2, 0.92, 0.93), (3, 0.91, 0.90)):
        write_run(runs, f"bcn/trec6/vectors-seed{seed}", "trec6", "vectors", seed, 0.2, vectors, 0.88)
        write_run(runs, f"bcn/trec6/vectors+cove-seed{seed}", "trec6", "vectors+cove", seed, 0.2, cove, 0.87)
    write_run(runs, "bcn/trec6/vectors+cove-seed4", "trec6", "vectors+cove", 4, 0.2, 0.99, 0.99)  # no pair: left out
    write_run(runs, "bcn/trec6/random-seed2", "trec6", "random", 2, 0.2, 0.85, 0.80)
    write_run(runs, "bcn/sst5/vectors+cove-seed1", "sst5", "vectors+cove", 1, 0.2, 0.45, 0.44)  # no vectors column
    collect_results(runs, tmp_path / "out")
    table = json.loads((tmp_path / "out" / "classification.json").read_text())["versus_vectors"]

    assert list(table) == ["trec6"]
    cove = table["trec6"]["vectors+cove - vectors"]
    diffs = [-1.0, 1.0, -1.0]
    half = 4.303 * statistics.stdev(diffs) / 3 ** 0.5  # t(0.975, df 2)
    mean = statistics.mean(diffs)
    assert cove["test_accuracy"] == {"seeds": [1, 2, 3], "mean": round(mean, 2), "higher_on": 1, "lower_on": 2,
                                     "unpaired": {"a": [4], "b": []},  # seed 4: vectors+cove alone ran it
                                     "std": round(statistics.stdev(diffs), 2),
                                     "ci95": [round(mean - half, 2), round(mean + half, 2)]}
    assert cove["validation_accuracy"]["mean"] == -1.0 and cove["validation_accuracy"]["std"] == 0.0
    assert table["trec6"]["random - vectors"]["test_accuracy"] == {"seeds": [2], "mean": -7.0, "higher_on": 0,
                                                                   "lower_on": 1, "unpaired": {"a": [], "b": [1, 3]}}


def test_runs_that_trained_otherwise_are_no_pair(tmp_path):
    """A column of 10-epoch runs against the vectors' 15-epoch runs of the same seeds differs in more than its input:
    no pair is given (epochs 15 and 15.0 are the same)."""
    runs = tmp_path / "runs"
    for seed in (1, 2):
        write_run(runs, f"bcn/trec50/vectors-seed{seed}", "trec50", "vectors", seed, 0.2, 0.80, 0.8)
        write_run(runs, f"bcn/trec50/vectors+cove-seed{seed}", "trec50", "vectors+cove", seed, 0.2, 0.78, 0.8,
                  hyperparameters={"epochs": 10, "dropout": 0.2})
        write_run(runs, f"bcn/trec50/random-seed{seed}", "trec50", "random", seed, 0.2, 0.70, 0.7,
                  hyperparameters={"epochs": 15.0, "dropout": 0.2})
    collect_results(runs, tmp_path / "out")
    table = json.loads((tmp_path / "out" / "classification.json").read_text())["versus_vectors"]["trec50"]
    assert list(table) == ["random - vectors"]


def test_subsampled_table_keeps_run_families_apart(tmp_path):
    """Subset runs of another encoder variant (bcn-gpu) or of the dropout search (bcn-dropout) are not pooled into
    the subsampled table; runs of one column with another encoder or other hyperparameters get their own cell."""
    runs = tmp_path / "runs"
    write_run(runs, "bcn/imdb/vectors-seed1", "imdb", "vectors", 1, 0.2, 0.88, 0.87)  # the main table
    subsets = {"train": "4000 of 22500", "validation": "2000 of 2500", "test": "2000 of 25000"}
    for seed, test in ((1, 0.80), (2, 0.84)):
        write_run(runs, f"bcn-imdb/imdb/vectors-seed{seed}", "imdb", "vectors", seed, 0.2, test, 0.8,
                  subsample=subsets)
    write_run(runs, "bcn-gpu/imdb/vectors-seed3", "imdb", "vectors", 3, 0.2, 0.50, 0.5, subsample=subsets,
              encoder="runs/cove-small-gpu/encoder")
    write_run(runs, "bcn-dropout/imdb/vectors-d0.3-seed4", "imdb", "vectors", 4, 0.3, 0.60, 0.6, subsample=subsets)
    write_run(runs, "bcn-imdb-big/imdb/vectors-seed1", "imdb", "vectors", 1, 0.2, 0.70, 0.7, subsample=subsets,
              encoder="enc2")
    write_run(runs, "bcn-imdb-big/imdb/vectors-seed2", "imdb", "vectors", 2, 0.1, 0.90, 0.9, subsample=subsets,
              encoder="enc2")
    collect_results(runs, tmp_path / "out")
    cells = json.loads((tmp_path / "out" / "classification.json").read_text())["subsampled"]["results"]["imdb"]
    assert sorted(cells) == ["vectors @ bcn-imdb", "vectors @ bcn-imdb-big #1", "vectors @ bcn-imdb-big #2"]
    assert cells["vectors @ bcn-imdb"]["test_accuracy"] == {"mean": 82.0, "std": 2.83, "n": 2}
    assert cells["vectors @ bcn-imdb"]["setup"] == {"folder": "bcn-imdb", "encoder": "enc", "subsample": subsets,
                                                    "hyperparameters": {"epochs": 15, "dropout": 0.2}}
    big = sorted((cell["setup"]["hyperparameters"]["dropout"], cell["test_accuracy"]["mean"])
                 for label, cell in cells.items() if "big" in label)
    assert big == [(0.1, 90.0), (0.2, 70.0)]
    assert all(cell["paper_table2_validation"] == 91.1 for cell in cells.values())


def test_cli_records_command_and_commit_in_every_file(tmp_path):
    """benchmarks/collect_results.py run as a user runs it: each collected file names the command and the commit that
    collected it (the DCN runs under "runs"), and each run keeps its own command and commit."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "bcn/trec6/vectors-seed1", "trec6", "vectors", 1, 0.2, 0.90, 0.88)
    squad_run = runs / "dcn-squad-vectors" / "metrics.json"
    squad_run.parent.mkdir(parents=True)
    squad_run.write_text(json.dumps({"command": "train_qa.py", "commit": "def", "heldout": {"f1": 25.9}}))
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "collect_results.py"
    done = subprocess.run([sys.executable, str(script), "--runs", str(runs), "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    classification = json.loads((out / "classification.json").read_text())
    squad = json.loads((out / "squad.json").read_text())
    for report in (classification, squad):
        assert report["command"].startswith("python ") and "collect_results.py --runs" in report["command"]
        # a commit (HEAD moves under other runs), or the version of a package that runs from no checkout
        assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown|modeling-cove \S+ \(installed\)", report["commit"])
    assert squad["runs"] == {"dcn-squad-vectors": {"command": "train_qa.py", "commit": "def",
                                                   "heldout": {"f1": 25.9}}}
    assert classification["results"]["trec6"]["vectors"]["runs"][0]["commit"] == "abc"


def test_collected_files_name_the_machines_their_runs_ran_on(tmp_path):
    """classification.json and squad.json record `machine`: the machines their runs record, and how many runs
    recorded none. A merge into a file whose machine was reconstructed from git history keeps those entries (they
    describe its runs, which stay) and the mark for the machine only: the command and the commit are the
    collection's own."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    zen4 = {"cpu": "AMD EPYC", "cpu_model": "25/17/1", "gpu": None}
    write_run(runs, "bcn/trec6/vectors-seed1", "trec6", "vectors", 1, 0.2, 0.90, 0.88, machine=zen4)
    write_run(runs, "bcn/trec6/vectors-seed2", "trec6", "vectors", 2, 0.2, 0.91, 0.88,
              machine={"cpu": "Intel(R) Xeon(R) Processor", "cpu_model": "6/207/2", "gpu": "NVIDIA H200"})
    write_run(runs, "bcn/trec6/vectors-seed3", "trec6", "vectors", 3, 0.2, 0.92, 0.88)  # an old run: no machine
    squad_run = runs / "dcn-squad-vectors" / "metrics.json"
    squad_run.parent.mkdir(parents=True)
    squad_run.write_text(json.dumps({"command": "train_qa.py", "machine": {"platform": "Linux", "threads": 1}}))
    collect_results(runs, out)
    report = json.loads((out / "classification.json").read_text())
    assert report["machine"] == ["AMD EPYC (25/17/1)", "Intel(R) Xeon(R) Processor (6/207/2) + NVIDIA H200",
                                 "not recorded by 1 runs"]
    assert [r.get("machine") for r in report["results"]["trec6"]["vectors"]["runs"]] == [
        "AMD EPYC (25/17/1)", "Intel(R) Xeon(R) Processor (6/207/2) + NVIDIA H200", None]
    assert "reconstructed" not in report
    assert json.loads((out / "squad.json").read_text())["machine"] == ["not recorded by 1 runs"]

    report.update(machine=["Xeon VM: seeds 1-3"], reconstructed=True,
                  reconstructed_from={"command": "git", "machine": "RESULTS.md at abc"})
    (out / "classification.json").write_text(json.dumps(report))
    runs2 = tmp_path / "runs2"
    write_run(runs2, "bcn/trec6/vectors-seed4", "trec6", "vectors", 4, 0.2, 0.93, 0.88, machine=zen4)
    collect_results(runs2, out, merge=True, command="collect --merge")
    merged = json.loads((out / "classification.json").read_text())
    assert merged["command"] == "collect --merge"
    assert merged["machine"] == ["Xeon VM: seeds 1-3", "AMD EPYC (25/17/1)",
                                 "Intel(R) Xeon(R) Processor (6/207/2) + NVIDIA H200"]
    assert merged["reconstructed"] is True and merged["reconstructed_from"] == {"machine": "RESULTS.md at abc"}


def test_a_pair_over_a_column_with_two_runs_of_one_seed_is_refused():
    """paired_difference pairs by seed: a column holding two runs of one seed has no one pair for it, so it raises
    naming the seed instead of pairing one of them."""
    from modeling_cove.training.common.stats import paired_difference

    once, twice = [{"seed": 1, "x": 1.0}, {"seed": 2, "x": 2.0}], [{"seed": 2, "x": 1.0}, {"seed": 2, "x": 3.0}]
    with pytest.raises(ValueError, match=r"column b holds two runs of seed\(s\) \[2\]"):
        paired_difference(once, twice, "x")
    assert paired_difference(once, once[1:], "x") == {"seeds": [2], "mean": 0.0, "higher_on": 0, "lower_on": 0,
                                                      "unpaired": {"a": [1], "b": []}}


def test_bilm_runs_are_the_vectors_bilm_column_paired_with_vectors(tmp_path):
    """ELMo's [x; mix] (--bcn-input vectors+scalar_mix) over a biLM encoder is the table's `vectors+bilm` column, with
    its paired difference to the vectors; the same input over an MT-LSTM keeps its own name."""
    runs = tmp_path / "runs"
    for seed, (vec, bilm) in enumerate(((0.90, 0.92), (0.91, 0.91), (0.89, 0.93)), start=1):
        write_run(runs, f"bcn/trec6/vectors-seed{seed}", "trec6", "vectors", seed, 0.2, vec, 0.88)
        write_run(runs, f"bcn/trec6/vectors+bilm-seed{seed}", "trec6", "vectors+scalar_mix", seed, 0.2, bilm, 0.88,
                  encoder_type="bilm", encoder_weights="a" * 64)
    write_run(runs, "bcn/trec6/vectors+scalar_mix-seed1", "trec6", "vectors+scalar_mix", 1, 0.2, 0.8, 0.8,
              encoder_type="mt_lstm")
    collect_results(runs, tmp_path / "out")
    report = json.loads((tmp_path / "out" / "classification.json").read_text())

    cell = report["results"]["trec6"]["vectors+bilm"]
    assert cell["test_accuracy"]["mean"] == 92.0
    assert [r["encoder_weights"] for r in cell["runs"]] == ["a" * 64] * 3
    assert report["results"]["trec6"]["vectors+scalar_mix"]["test_accuracy"]["mean"] == 80.0
    diff = report["versus_vectors"]["trec6"]["vectors+bilm - vectors"]["test_accuracy"]
    diffs = [2.0, 0.0, 4.0]
    half = 4.302653 * statistics.stdev(diffs) / 3 ** 0.5  # t(0.975, 2 degrees of freedom)
    assert diff["mean"] == 2.0 and diff["higher_on"] == 2 and diff["lower_on"] == 0
    assert diff["ci95"] == pytest.approx([2.0 - half, 2.0 + half], abs=0.01)
    assert report["columns"]["vectors+bilm"].startswith("ELMo-style")
    assert report["bilm_versus_cove"] == {}  # no CoVe-S column here


def test_bilm_versus_cove_head_to_head(tmp_path):
    """Both recipes on a task: the biLM column minus the CoVe-S column, paired by seed."""
    runs = tmp_path / "runs"
    for seed, (cove, bilm) in enumerate(((0.90, 0.91), (0.88, 0.91)), start=1):
        write_run(runs, f"bcn/snli/vectors+cove-seed{seed}", "snli", "vectors+cove", seed, 0.2, cove, 0.8)
        write_run(runs, f"bcn/snli/vectors+bilm-seed{seed}", "snli", "vectors+scalar_mix", seed, 0.2, bilm, 0.85,
                  encoder_type="bilm", encoder_weights="a" * 64)
    collect_results(runs, tmp_path / "out")
    head = json.loads((tmp_path / "out" / "classification.json").read_text())["bilm_versus_cove"]
    diff = head["snli"]["vectors+bilm - vectors+cove"]
    assert diff["test_accuracy"]["mean"] == 2.0 and diff["test_accuracy"]["higher_on"] == 2
    assert diff["validation_accuracy"]["mean"] == 5.0


def test_a_cell_never_mixes_encoders(tmp_path):
    """Runs of one task and column that read different encoder weights (a biLM pretrained again in another
    session, say) are refused with the seeds of each, also when they meet in a --merge."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "bcn/trec6/vectors+bilm-seed1", "trec6", "vectors+scalar_mix", 1, 0.2, 0.9, 0.9,
              encoder_type="bilm", encoder_weights="a" * 64)
    collect_results(runs, out)
    runs2 = tmp_path / "runs2"
    write_run(runs2, "bcn/trec6/vectors+bilm-seed2", "trec6", "vectors+scalar_mix", 2, 0.2, 0.9, 0.9,
              encoder_type="bilm", encoder_weights="b" * 64)
    with pytest.raises(ValueError, match=r"trec6 / vectors\+bilm: the runs read different encoders .*"
                                         r"aaaaaaaaaaaa: \[1\]; bbbbbbbbbbbb: \[2\]"):
        collect_results(runs2, out, merge=True)


def test_a_cell_with_two_runs_of_one_seed_is_refused(tmp_path):
    """A leftover copy of a run folder (its name no longer the table's) would join the cell as a second run of its
    seed, counted in n while the pairing kept one of them: refused, naming the seed and both commands."""
    runs = tmp_path / "runs"
    write_run(runs, "bcn/trec6/vectors-seed1", "trec6", "vectors", 1, 0.2, 0.90, 0.9)
    write_run(runs, "bcn/trec6/vectors-seed1-old", "trec6", "vectors", 1, 0.2, 0.80, 0.8)
    write_run(runs, "bcn/trec6/vectors-seed2", "trec6", "vectors", 2, 0.2, 0.91, 0.9)
    with pytest.raises(ValueError, match=r"trec6 / vectors: seed\(s\) \[1\] have two runs .*vectors-seed1-old"):
        collect_results(runs, tmp_path / "out")


def test_sample_efficiency_curve_and_png(tmp_path):
    """--train-fraction runs in runs/bcn-fraction make the curve per task and column, the full-data point taken
    from the main table on the same seeds; they stay out of the subsampled table; --merge keeps earlier fractions."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    for seed, full in ((1, 0.90), (2, 0.92), (3, 0.80)):  # seed 3 ran no fraction: not in the curve's full point
        write_run(runs, f"bcn/trec6/vectors-seed{seed}", "trec6", "vectors", seed, 0.2, full, 0.88)
    for fraction, kept, tests in ((0.1, 491, (0.70, 0.74)), (0.25, 1227, (0.80, 0.84))):
        for seed, test in zip((1, 2), tests):
            write_run(runs, f"bcn-fraction/trec6/vectors-f{fraction}-seed{seed}", "trec6", "vectors", seed, 0.2,
                      test, 0.8, train_fraction=fraction, subsample={"train": f"{kept} of 4906"})
    for seed, test in ((1, 0.75), (2, 0.73)):  # paired by seed with the vectors at 10%: +5 and -1
        write_run(runs, f"bcn-fraction/trec6/vectors+cove-f0.1-seed{seed}", "trec6", "vectors+cove", seed, 0.2, test,
                  0.8, train_fraction=0.1, subsample={"train": "491 of 4906"})
    collect_results(runs, out)
    report = json.loads((out / "classification.json").read_text())
    section = report["sample_efficiency"]
    assert list(section["results"]["trec6"]["vectors"]) == ["0.1", "0.25"]
    paired = section["paired"]["0.1"]["versus_vectors"]["trec6"]["vectors+cove - vectors"]["test_accuracy"]
    assert {k: paired[k] for k in ("seeds", "mean", "higher_on", "lower_on")} == \
        {"seeds": [1, 2], "mean": 2.0, "higher_on": 1, "lower_on": 1}
    # half-width t(0.975, 1) * std / sqrt(2), std of (+5, -1) = 4.243
    assert paired["ci95"] == pytest.approx([2.0 - 12.706 * 3.0, 2.0 + 12.706 * 3.0], abs=0.01)
    assert section["paired"]["0.25"]["versus_vectors"] == {} and section["paired"]["0.1"]["bilm_versus_cove"] == {}
    assert section["results"]["trec6"]["vectors"]["0.1"]["test_accuracy"]["mean"] == 72.0
    assert section["curve"]["trec6"]["vectors"]["encoder"] == "enc"
    points = section["curve"]["trec6"]["vectors"]["points"]
    assert [(p["fraction"], p["train_examples"], p["seeds"]) for p in points] == \
        [(0.1, 491, [1, 2]), (0.25, 1227, [1, 2]), (1.0, 4906, [1, 2])]
    assert [p["test_accuracy"]["mean"] for p in points] == [72.0, 82.0, 91.0]
    assert section["png"] == "sample_efficiency.png"
    assert (out / "sample_efficiency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "trec6" not in report["subsampled"]["results"]

    runs2 = tmp_path / "runs2"
    write_run(runs2, "bcn-fraction/trec6/vectors-f0.1-seed3", "trec6", "vectors", 3, 0.2, 0.66, 0.7,
              train_fraction=0.1, subsample={"train": "491 of 4906"})
    collect_results(runs2, out, merge=True)
    merged = json.loads((out / "classification.json").read_text())["sample_efficiency"]
    assert merged["results"]["trec6"]["vectors"]["0.1"]["test_accuracy"]["mean"] == 70.0
    assert merged["results"]["trec6"]["vectors"]["0.25"]["test_accuracy"]["n"] == 2
    assert merged["curve"]["trec6"]["vectors"]["points"][-1]["seeds"] == [1, 2, 3]


def test_bilm_pretraining_record(tmp_path):
    """runs/bilm (train_bilm.py): its record without the per-step loss log, its curves, and the sha256 of the exported
    encoder's weights, which the vectors+bilm runs record too."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "bilm" / "encoder").mkdir(parents=True)
    (runs / "bilm" / "encoder" / "model.safetensors").write_bytes(b"weights")
    (runs / "bilm" / "curves.png").write_bytes(b"png")
    (runs / "bilm" / "metrics.json").write_text(json.dumps({
        "command": "train_bilm.py", "commit": "abc", "epochs": [{"epoch": 1, "heldout_forward_perplexity": 90.0}],
        "train_tokens_per_second": 2700.0, "loss_log": [[1, 7.0]] * 5}))
    collect_results(runs, out)
    record = json.loads((out / "bilm_pretraining.json").read_text())
    assert record["command"] == "train_bilm.py" and record["epochs"][0]["heldout_forward_perplexity"] == 90.0
    assert "loss_log" not in record and record["curve_png"] == "bilm_pretraining.png"
    assert record["encoder_weights"] == hashlib.sha256(b"weights").hexdigest()
    assert (out / "bilm_pretraining.png").read_bytes() == b"png"


def test_the_cove_s_record_is_replaced_only_by_a_run_over_its_vocabulary(tmp_path):
    """runs/cove-small holds either recipe's CoVe-S (the table's over runs/vocab-all, the taggers' over
    runs/vocab-tagging): a run over another vocabulary than the record's is refused, naming both."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "cove-small").mkdir(parents=True)

    def pretrained_over(vocabulary, bleu):
        (runs / "cove-small" / "metrics.json").write_text(json.dumps({
            "command": "cove-train-mt", "commit": "abc", "data": {"source_vocab_from": vocabulary},
            "test": {"bleu": bleu}}))

    pretrained_over("runs/vocab-all", 30.37)
    collect_results(runs, out)
    pretrained_over("/elsewhere/vocab-all", 30.5)  # the same vocabulary given from another folder
    collect_results(runs, out)
    assert json.loads((out / "mt_multi30k.json").read_text())["test"]["bleu"] == 30.5
    pretrained_over("runs/vocab-tagging", 30.40)
    with pytest.raises(ValueError, match=r"mt_multi30k.json records a CoVe-S pretrained over /elsewhere/vocab-all, "
                                         r"the run found over runs/vocab-tagging"):
        collect_results(runs, out)
    assert json.loads((out / "mt_multi30k.json").read_text())["test"]["bleu"] == 30.5


def test_sample_efficiency_full_point_only_over_the_fractions_encoder(tmp_path):
    """The curve's full-data point comes from the table's runs only when they read the fractions' encoder (by folder,
    and by weights where both record them): fractions over another pretraining get no full-data point, and the
    curve says why; a --train-fraction 1 cell over that encoder is then its full-data point."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_run(runs, "bcn/trec6/vectors+bilm-seed1", "trec6", "vectors+scalar_mix", 1, 0.2, 0.9, 0.9,
              encoder_type="bilm", encoder_weights="a" * 64)
    write_run(runs, "bcn-fraction/trec6/vectors+bilm-f0.1-seed1", "trec6", "vectors+scalar_mix", 1, 0.2, 0.7, 0.7,
              encoder_type="bilm", encoder_weights="b" * 64, train_fraction=0.1, subsample={"train": "491 of 4906"})
    write_run(runs, "bcn/trec6/vectors+cove-seed1", "trec6", "vectors+cove", 1, 0.2, 0.9, 0.9)  # before the sha
    write_run(runs, "bcn-fraction/trec6/vectors+cove-f0.1-seed1", "trec6", "vectors+cove", 1, 0.2, 0.6, 0.7,
              encoder="runs/cove-small-repeat/encoder", encoder_weights="c" * 64, train_fraction=0.1,
              subsample={"train": "491 of 4906"})
    (runs / "cove-small-repeat").mkdir()
    (runs / "cove-small-repeat" / "metrics.json").write_text(json.dumps(
        {"command": "train_mt.py", "commit": "abc", "preset": "cove-small", "test": {"bleu": 30.1}, "loss_log": []}))
    (runs / "cove-small-repeat" / "curves.png").write_bytes(b"png")
    collect_results(runs, out)
    section = json.loads((out / "classification.json").read_text())["sample_efficiency"]
    assert section["pretraining"] == {"runs/cove-small-repeat/encoder": {
        "command": "train_mt.py", "commit": "abc", "preset": "cove-small", "test": {"bleu": 30.1},
        "curve_png": "mt_cove-small-repeat.png"}}  # the MT record of the CoVe-S the fractions read
    assert (out / "mt_cove-small-repeat.png").read_bytes() == b"png"
    curve = section["curve"]["trec6"]
    assert [p["fraction"] for p in curve["vectors+bilm"]["points"]] == [0.1]
    assert "aaaaaaaaaaaa: [1]; bbbbbbbbbbbb: [1]" in curve["vectors+bilm"]["full_data_left_out"]
    assert [p["fraction"] for p in curve["vectors+cove"]["points"]] == [0.1]
    assert curve["vectors+cove"]["encoder"] == "runs/cove-small-repeat/encoder"
    assert "enc: [1]; runs/cove-small-repeat/encoder: [1]" in curve["vectors+cove"]["full_data_left_out"]

    # as a real --train-fraction 1 run writes it: nothing cut, so no subsample; one row dropped by tokenising
    write_run(runs, "bcn-fraction/trec6/vectors+cove-f1-seed1", "trec6", "vectors+cove", 1, 0.2, 0.88, 0.9,
              encoder="runs/cove-small-repeat/encoder", encoder_weights="c" * 64, train_fraction=1.0, subsample={},
              splits={"train": 4905, "validation": 500, "test": 500},
              dropped_rows={"train": 1, "validation": 0, "test": 0})
    (runs / "cove-small-repeat" / "metrics.json").unlink()
    collect_results(runs, out, merge=True)  # the pretraining record stays through a merge without it
    section = json.loads((out / "classification.json").read_text())["sample_efficiency"]
    assert section["pretraining"]["runs/cove-small-repeat/encoder"]["test"] == {"bleu": 30.1}
    line = section["curve"]["trec6"]["vectors+cove"]
    assert [(p["fraction"], p["train_examples"], p["test_accuracy"]["mean"]) for p in line["points"]] == \
        [(0.1, 491, 60.0), (1.0, 4906, 88.0)]
    assert "full_data_left_out" not in line
    assert section["results"]["trec6"]["vectors+cove"]["1"]["runs"][0]["subsample"] == {"train": "4906 of 4906"}


def test_sample_efficiency_full_point_from_an_encoder_variant(tmp_path):
    """Fractions over a biLM pretrained again take their full-data point from that biLM's encoder variant, not from
    the table's runs over the other biLM, and the curve names where it came from; the full data is then paired with
    the table's vectors column."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    bilm = dict(encoder_type="bilm", encoder="runs/bilm-repeat/encoder", encoder_weights="b" * 64)
    for seed, vectors, table_bilm, variant_bilm, tenth in ((1, 0.86, 0.87, 0.85, 0.76), (2, 0.87, 0.88, 0.86, 0.78)):
        write_run(runs, f"bcn/sst2/vectors-seed{seed}", "sst2", "vectors", seed, 0.2, vectors, 0.86)
        write_run(runs, f"bcn/sst2/vectors+bilm-seed{seed}", "sst2", "vectors+scalar_mix", seed, 0.2, table_bilm,
                  0.87, encoder_type="bilm", encoder="runs/bilm/encoder", encoder_weights="a" * 64)
        write_run(runs, f"bcn-bilm-repeat/sst2/vectors+bilm-seed{seed}", "sst2", "vectors+scalar_mix", seed, 0.2,
                  variant_bilm, 0.86, **bilm)
        write_run(runs, f"bcn-fraction/sst2/vectors+bilm-f0.1-seed{seed}", "sst2", "vectors+scalar_mix", seed, 0.2,
                  tenth, 0.8, train_fraction=0.1, subsample={"train": "6735 of 67349"}, **bilm)
        write_run(runs, f"bcn-fraction/sst2/vectors-f0.1-seed{seed}", "sst2", "vectors", seed, 0.2, 0.79, 0.8,
                  train_fraction=0.1, subsample={"train": "6735 of 67349"})
    collect_results(runs, out)
    section = json.loads((out / "classification.json").read_text())["sample_efficiency"]

    line = section["curve"]["sst2"]["vectors+bilm"]
    assert line["full_data_from"] == "encoder_variants/bilm-zen3" and "full_data_left_out" not in line
    assert [(p["fraction"], p["train_examples"], p["test_accuracy"]["mean"]) for p in line["points"]] == \
        [(0.1, 6735, 77.0), (1.0, 67349, 85.5)]
    full = section["paired"]["1"]["versus_vectors"]["sst2"]["vectors+bilm - vectors"]["test_accuracy"]
    assert full["seeds"] == [1, 2] and full["mean"] == -1.0


def test_a_cell_never_mixes_encoder_folders(tmp_path):
    """Runs from before the weights' sha256 was recorded are told apart by the encoder folder they read."""
    runs = tmp_path / "runs"
    write_run(runs, "bcn/trec6/vectors+cove-seed1", "trec6", "vectors+cove", 1, 0.2, 0.9, 0.9,
              encoder="runs/cove-small/encoder")
    write_run(runs, "bcn/trec6/vectors+cove-seed2", "trec6", "vectors+cove", 2, 0.2, 0.9, 0.9,
              encoder="runs/cove-small-repeat/encoder", encoder_weights="c" * 64)
    with pytest.raises(ValueError, match=r"trec6 / vectors\+cove: the runs read different encoders \(seeds by "
                                         r"folders: runs/cove-small/encoder: \[1\]; runs/cove-small-repeat/encoder"):
        collect_results(runs, tmp_path / "out")
    # a seed that ran several fractions over one encoder is named once
    records = [{"encoder": "a", "seed": 1}, {"encoder": "a", "seed": 1}, {"encoder": "b", "seed": 2}]
    assert encoder_mismatch(records) == "the runs read different encoders (seeds by folders: a: [1]; b: [2])"
    assert encoder_mismatch(records[:2]) is None


def test_sample_efficiency_paired_at_full_data_over_the_curves_full_runs(tmp_path):
    """The paired differences at 100% ("1") pair each column's full-data runs as the curve takes them: the table's
    seeds for a column whose fractions read the table's encoder, a --train-fraction 1 cell for one that did not
    (never the table's runs over another encoder)."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    bilm = {"encoder_type": "bilm", "encoder_weights": "a" * 64}
    repeat = {"encoder": "runs/cove-small-repeat/encoder", "encoder_weights": "c" * 64}
    for seed, vectors, bilm_test, cove in ((1, 0.90, 0.91, 0.80), (2, 0.92, 0.95, 0.81)):
        write_run(runs, f"bcn/trec6/vectors-seed{seed}", "trec6", "vectors", seed, 0.2, vectors, 0.9)
        write_run(runs, f"bcn/trec6/vectors+bilm-seed{seed}", "trec6", "vectors+scalar_mix", seed, 0.2, bilm_test, 0.9,
                  **bilm)
        write_run(runs, f"bcn/trec6/vectors+cove-seed{seed}", "trec6", "vectors+cove", seed, 0.2, cove, 0.9)
        fraction = {"train_fraction": 0.1, "subsample": {"train": "491 of 4906"}}
        write_run(runs, f"bcn-fraction/trec6/vectors-f0.1-seed{seed}", "trec6", "vectors", seed, 0.2, 0.7, 0.7,
                  **fraction)
        write_run(runs, f"bcn-fraction/trec6/vectors+bilm-f0.1-seed{seed}", "trec6", "vectors+scalar_mix", seed, 0.2,
                  0.7, 0.7, **bilm, **fraction)
        write_run(runs, f"bcn-fraction/trec6/vectors+cove-f0.1-seed{seed}", "trec6", "vectors+cove", seed, 0.2, 0.6,
                  0.7, **repeat, **fraction)
    collect_results(runs, out)
    paired = json.loads((out / "classification.json").read_text())["sample_efficiency"]["paired"]
    assert list(paired) == ["0.1", "1"]
    full = paired["1"]["versus_vectors"]["trec6"]
    assert list(full) == ["vectors+bilm - vectors"]  # CoVe-S's table runs read another encoder than its fractions
    assert full["vectors+bilm - vectors"]["test_accuracy"]["mean"] == 2.0 and paired["1"]["bilm_versus_cove"] == {}

    for seed, test in ((1, 0.88), (2, 0.89)):
        write_run(runs, f"bcn-fraction/trec6/vectors+cove-f1-seed{seed}", "trec6", "vectors+cove", seed, 0.2, test,
                  0.9, **repeat, train_fraction=1.0, subsample={}, splits={"train": 4906})
    collect_results(runs, out)
    paired = json.loads((out / "classification.json").read_text())["sample_efficiency"]["paired"]["1"]
    cove = paired["versus_vectors"]["trec6"]["vectors+cove - vectors"]["test_accuracy"]
    assert (cove["seeds"], cove["mean"], cove["lower_on"]) == ([1, 2], -2.5, 2)  # 88 - 90, 89 - 92
    head_to_head = paired["bilm_versus_cove"]["trec6"]["vectors+bilm - vectors+cove"]["test_accuracy"]
    assert (head_to_head["mean"], head_to_head["higher_on"]) == (4.5, 2)  # 91 - 88, 95 - 89


CPU = {"cpu": "Intel Xeon", "cpu_model": "6/207/2", "device": "cpu", "cuda": None}
COVE_T_RUNS = {  # the CoVe-T comparison's columns: (--bcn-input, encoder, its weights' sha256, test of seeds 1-3)
    "vectors": ("vectors", "runs/vocab-all", "a1" * 32, (0.90, 0.92, 0.91)),
    "vectors+cove": ("vectors+cove", "runs/cove-small/encoder", "b2" * 32, (0.89, 0.93, 0.90)),
    "vectors+cove-t": ("vectors+cove", "runs/cove-t/encoder", "c3" * 32, (0.91, 0.95, 0.90)),
    "vectors+cove-s-5-epochs": ("vectors+cove", "runs/cove-small-5ep/encoder", "d4" * 32, (0.88, 0.93, 0.92)),
    "cove": ("cove", "runs/cove-small/encoder", "b2" * 32, (0.84, 0.82, 0.86)),
    "cove-t": ("cove", "runs/cove-t/encoder", "c3" * 32, (0.87, 0.83, 0.85)),
}


def write_cove_t_family(runs, task="trec6", columns=COVE_T_RUNS, seeds=(1, 2, 3)):
    for column, (bcn_input, encoder, weights, tests) in columns.items():
        for seed, test in zip(seeds, tests):
            write_run(runs, f"bcn-cove-t/{task}/{column}-seed{seed}", task, bcn_input, seed, 0.2, test, test - 0.02,
                      encoder=encoder, encoder_weights=weights, machine=CPU)


def write_main_table(runs):
    """A table as today's runs/ lays it out: runs/bcn, a dropout search, an encoder variant, runs on subsets."""
    for seed, (vectors, cove) in enumerate(((0.90, 0.89), (0.92, 0.93)), start=1):
        write_run(runs, f"bcn/trec6/vectors-seed{seed}", "trec6", "vectors", seed, 0.2, vectors, 0.88)
        write_run(runs, f"bcn/trec6/vectors+cove-seed{seed}", "trec6", "vectors+cove", seed, 0.2, cove, 0.87)
    write_run(runs, "bcn/trec6/cove-seed1", "trec6", "cove", 1, 0.2, 0.80, 0.79)
    write_run(runs, "bcn-dropout/trec6/vectors-d0.3-seed1", "trec6", "vectors", 1, 0.3, 0.93, 0.90)
    write_run(runs, "bcn-cove5/trec6/vectors+cove-seed1", "trec6", "vectors+cove", 1, 0.2, 0.91, 0.9)
    write_run(runs, "bcn-imdb/imdb/vectors-seed1", "imdb", "vectors", 1, 0.2, 0.8, 0.8,
              subsample={"train": "100 of 25000"})


def by_hand(a, b):
    """Column a minus column b of COVE_T_RUNS seed by seed, in percent: mean, std, 95% t interval, higher, lower."""
    diffs = [round(100 * x, 2) - round(100 * y, 2) for x, y in zip(COVE_T_RUNS[a][3], COVE_T_RUNS[b][3])]
    mean, std = statistics.mean(diffs), statistics.stdev(diffs)
    half = 4.302653 * std / 3 ** 0.5  # t(0.975, 2 degrees of freedom)
    return mean, std, [mean - half, mean + half], sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)


def test_the_cove_t_comparison_is_a_section_of_its_own_paired_by_seed(tmp_path):
    """runs/bcn-cove-t goes to classification.json's cove_t_comparison: each run's column from its folder, the
    encoder of each column with the sha256 its runs recorded, the machines, and the pairs the issue names, each
    checked against a hand computation; the table's results and pairs hold none of it."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_main_table(runs)
    write_cove_t_family(runs)
    collect_results(runs, out, command="collect")
    report = json.loads((out / "classification.json").read_text())
    section = report["cove_t_comparison"]
    assert list(section) == ["what", "command", "commit", "machine", "columns", "encoders", "pretraining", "results",
                             "versus_vectors"]
    assert section["pretraining"] == {}  # no MT run folder beside the runs
    assert section["command"] == "collect" and section["machine"] == ["Intel Xeon (6/207/2)"]
    assert section["encoders"] == {column: {"encoder": encoder, "encoder_weights": weights}
                                   for column, (_, encoder, weights, _) in COVE_T_RUNS.items()}
    assert section["columns"]["vectors+cove-t"].startswith("[vectors; CoVe-T]")
    results = section["results"]["trec6"]
    assert sorted(results) == sorted(COVE_T_RUNS)
    for column, (_, encoder, _, tests) in COVE_T_RUNS.items():
        assert [(r["encoder"], r["test_accuracy"]) for r in results[column]["runs"]] == [
            (encoder, round(100 * test, 2)) for test in tests]
    pairs = section["versus_vectors"]["trec6"]
    assert list(pairs) == ["vectors+cove - vectors", "vectors+cove-t - vectors", "vectors+cove-s-5-epochs - vectors",
                           "vectors+cove-t - vectors+cove", "cove-t - cove",
                           "vectors+cove-t - vectors+cove-s-5-epochs", "vectors+cove-s-5-epochs - vectors+cove"]
    for name, entry in pairs.items():
        mean, std, ci95, higher, lower = by_hand(*name.split(" - "))
        for key in ("test_accuracy", "validation_accuracy"):  # validation = test - 2 on every run
            found = entry[key]
            assert found["seeds"] == [1, 2, 3] and (found["higher_on"], found["lower_on"]) == (higher, lower)
            assert found["mean"] == pytest.approx(mean, abs=0.005) and found["std"] == pytest.approx(std, abs=0.005)
            assert found["ci95"] == pytest.approx(ci95, abs=0.01)
    assert pairs["vectors+cove-t - vectors+cove"]["test_accuracy"]["mean"] == 1.33  # +2, +2, 0
    assert pairs["cove-t - cove"]["test_accuracy"]["mean"] == 1.0  # +3, +1, -1

    # the table: its own runs only (the family's CoVe-S runs never join its vectors+cove cell)
    assert [r["seed"] for r in report["results"]["trec6"]["vectors+cove"]["runs"]] == [1, 2]
    assert sorted(report["results"]["trec6"]) == ["cove", "vectors", "vectors+cove"]
    assert "vectors+cove-t - vectors" not in report["versus_vectors"]["trec6"]
    assert list(report["subsampled"]["results"]) == ["imdb"]


def test_the_tables_collection_is_the_same_with_and_without_the_cove_t_family(tmp_path):
    """classification.json less the section cove_t_comparison is the same, byte for byte, whether runs/ holds the
    family or not; without it the file has no such section."""
    without, with_family = tmp_path / "without", tmp_path / "with"
    for runs in (without, with_family):
        write_main_table(runs)
    write_cove_t_family(with_family)
    for runs in (without, with_family):
        collect_results(runs, tmp_path / f"out-{runs.name}", command="collect")
    alone = (tmp_path / "out-without" / "classification.json").read_bytes()
    report = json.loads((tmp_path / "out-with" / "classification.json").read_text())
    assert "cove_t_comparison" not in json.loads(alone) and list(report)[-1] == "cove_t_comparison"
    table = write_json(tmp_path / "table.json", {k: v for k, v in report.items() if k != "cove_t_comparison"})
    assert table.read_bytes() == alone


def test_the_section_stays_when_its_family_has_no_run_here(tmp_path):
    """classification.json collected again (without --merge) from a runs/ without runs/bcn-cove-t keeps the file's
    cove_t_comparison as it is, as collect_tagging.py keeps tagging.json's: a section collected from its own family
    is not the table's to drop; runs of the family here make it afresh."""
    first, later, out = tmp_path / "first", tmp_path / "later", tmp_path / "out"
    write_main_table(first)
    write_cove_t_family(first)
    collect_results(first, out, command="first")
    section = json.loads((out / "classification.json").read_text())["cove_t_comparison"]
    write_main_table(later)
    write_run(later, "bcn/trec6/vectors-seed3", "trec6", "vectors", 3, 0.2, 0.94, 0.9)
    collect_results(later, out, command="later")
    report = json.loads((out / "classification.json").read_text())
    assert report["command"] == "later" and [r["seed"] for r in report["results"]["trec6"]["vectors"]["runs"]] == [
        1, 2, 3]
    assert report["cove_t_comparison"] == section and section["command"] == "first"
    write_cove_t_family(later, columns={"vectors": COVE_T_RUNS["vectors"]}, seeds=(1,))
    collect_results(later, out, command="again")
    fresh = json.loads((out / "classification.json").read_text())["cove_t_comparison"]
    assert fresh["command"] == "again" and list(fresh["results"]["trec6"]) == ["vectors"]


def test_merge_replaces_the_sections_runs_by_task_column_and_seed(tmp_path):
    """--merge: a run found replaces the section's run of the same task, column and seed, the others stay, the
    pairs are computed again; the table is merged apart. A run over other CoVe-S weights in a cell is refused."""
    first, later, out = tmp_path / "first", tmp_path / "later", tmp_path / "out"
    write_main_table(first)
    write_cove_t_family(first)
    collect_results(first, out)
    columns = {column: COVE_T_RUNS[column] for column in ("vectors", "vectors+cove-t")}
    write_cove_t_family(later, columns={"vectors": (*columns["vectors"][:3], (0.80,)),  # seed 3 again
                                        "vectors+cove-t": (*columns["vectors+cove-t"][:3], (0.96,))}, seeds=(3,))
    write_cove_t_family(later, task="snli", columns=columns, seeds=(1, 2))
    collect_results(later, out, merge=True)
    report = json.loads((out / "classification.json").read_text())
    section = report["cove_t_comparison"]
    trec6 = section["results"]["trec6"]
    assert [r["test_accuracy"] for r in trec6["vectors"]["runs"]] == [90.0, 92.0, 80.0]
    assert [r["test_accuracy"] for r in trec6["vectors+cove-t"]["runs"]] == [91.0, 95.0, 96.0]
    assert [r["test_accuracy"] for r in trec6["vectors+cove"]["runs"]] == [89.0, 93.0, 90.0]  # kept
    assert section["versus_vectors"]["trec6"]["vectors+cove-t - vectors"]["test_accuracy"]["mean"] == 6.67  # 1, 3, 16
    assert list(section["versus_vectors"]["snli"]) == ["vectors+cove-t - vectors"]
    assert [r["seed"] for r in section["results"]["snli"]["vectors"]["runs"]] == [1, 2]
    assert [r["seed"] for r in report["results"]["trec6"]["vectors"]["runs"]] == [1, 2]  # the table as it was

    stale = tmp_path / "stale"  # a run over the CoVe-S of before: other weights, same folder name
    write_cove_t_family(stale, columns={"vectors+cove": ("vectors+cove", "runs/cove-small/encoder", "e5" * 32,
                                                         (0.5,))}, seeds=(4,))
    with pytest.raises(ValueError, match=r"trec6 / vectors\+cove: the runs read different encoders"):
        collect_results(stale, out, merge=True)


def test_a_run_folder_naming_a_column_of_another_input_is_refused(tmp_path):
    wrong = tmp_path / "wrong"
    write_run(wrong, "bcn-cove-t/trec6/vectors+cove-t-seed9", "trec6", "vectors", 9, 0.2, 0.9, 0.9)
    with pytest.raises(ValueError, match=r"vectors\+cove-t-seed9: the folder names the column vectors\+cove-t "
                                         r"\(--bcn-input vectors\+cove\) but its run is --bcn-input vectors"):
        collect_results(wrong, tmp_path / "out")


def test_a_misnamed_run_is_refused_by_its_own_family_by_its_full_path(tmp_path):
    """The runs on random subsets (runs/bcn*/ but the families collected apart) leave out the sample-efficiency
    folder before reading its runs: a --train-fraction run there in the wrong folder is its family's error, named by
    its full path, not one of the subsets' collection."""
    from instruments.results import collect_sample_efficiency, collect_subsampled

    runs = tmp_path / "runs"
    write_run(runs, "bcn-fraction/trec6/vectors+cove-t-f0.1-seed9", "trec6", "vectors", 9, 0.2, 0.9, 0.9,
              train_fraction=0.1, subsample={"train": "491 of 4906"})
    write_run(runs, "bcn-imdb/imdb/vectors-seed1", "imdb", "vectors", 1, 0.2, 0.8, 0.8,
              subsample={"train": "1000 of 25000"})
    subsets = collect_subsampled(runs)
    assert list(subsets) == ["imdb"] and [r["seed"] for r in subsets["imdb"]["vectors"]["runs"]] == [1]
    with pytest.raises(ValueError) as caught:
        collect_sample_efficiency(runs)
    folder = runs / "bcn-fraction" / "trec6" / "vectors+cove-t-f0.1-seed9"
    assert str(caught.value) == (f"{folder}: the folder names the column vectors+cove-t (--bcn-input vectors+cove) "
                                 "but its run is --bcn-input vectors")


def test_the_cove_t_comparison_records_the_pretraining_of_its_encoders(tmp_path):
    """The section holds the MT record of each encoder its columns read that an MT run under runs/ exported: the BLEU
    per corpus, the data (exclusions, <unk> rates), the settings, the best epoch and stop; less the per-step loss
    log; the curves copied beside it; the vectors checkpoint (no MT run) has none."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_main_table(runs)
    write_cove_t_family(runs)
    metrics = {"command": "cove-train-mt --preset cove-t", "commit": "abc", "preset": "cove-t", "machine": CPU,
               "settings": {"early_stopping_patience": 2}, "corpora": ["multi30k", "deu-eng"],
               "data": {"corpora": {"deu-eng": {"excluded_pairs": {"train": 59}}}, "unk_rates": {"source": 0.01}},
               "epochs": [{"epoch": 1, "val_bleu": 20.0}], "global_step": 9, "stop_reason": "max epochs 1 reached",
               "best_epoch": {"epoch": 1, "global_step": 9, "val_bleu": 20.0},
               "test": {"bleu": 30.0}, "test_by_corpus": {"multi30k": {"bleu": 30.0}, "deu-eng": {"bleu": 25.0}},
               "loss_log": [[1, 2.0, 3.0]]}
    (runs / "cove-t").mkdir()
    (runs / "cove-t" / "metrics.json").write_text(json.dumps(metrics))
    (runs / "cove-t" / "curves.png").write_bytes(b"png")
    collect_results(runs, out, command="collect")
    section = json.loads((out / "classification.json").read_text())["cove_t_comparison"]
    assert section["pretraining"] == {"runs/cove-t/encoder": {
        **{k: v for k, v in metrics.items() if k != "loss_log"}, "curve_png": "mt_cove-t.png"}}
    assert (out / "mt_cove-t.png").read_bytes() == b"png"

    # --merge from a runs folder without the MT run: a seed added, the record of the section kept
    later = tmp_path / "later"
    write_main_table(later)
    write_cove_t_family(later, columns={"vectors+cove-t": COVE_T_RUNS["vectors+cove-t"]}, seeds=(4,))
    collect_results(later, out, merge=True, command="later")
    merged = json.loads((out / "classification.json").read_text())["cove_t_comparison"]
    assert merged["command"] == "later" and merged["pretraining"] == section["pretraining"]
    assert [r["seed"] for r in merged["results"]["trec6"]["vectors+cove-t"]["runs"]] == [1, 2, 3, 4]
    # --merge from one without any of the family's runs: the section stays as it is
    empty = tmp_path / "empty"
    write_main_table(empty)
    collect_results(empty, out, merge=True, command="empty")
    assert json.loads((out / "classification.json").read_text())["cove_t_comparison"] == merged


def test_the_cove_t_comparison_refuses_runs_over_weights_its_checkpoint_no_longer_holds(tmp_path):
    """A column's runs recorded the sha256 of its checkpoint's weights; pretrained again since (the folder, beside
    runs/ as the runs name it, holds other weights), the collection stops naming both; the same weights pass."""
    import hashlib

    runs, out = tmp_path / "runs", tmp_path / "out"
    write_main_table(runs)
    columns = {"vectors+cove-t": COVE_T_RUNS["vectors+cove-t"]}
    encoder = tmp_path / COVE_T_RUNS["vectors+cove-t"][1]
    encoder.mkdir(parents=True)
    (encoder / "config.json").write_text("{}")
    (encoder / "model.safetensors").write_bytes(b"CoVe-T pretrained again")
    write_cove_t_family(runs, columns=columns)
    with pytest.raises(ValueError, match=r"cove_t_comparison / vectors\+cove-t: its runs read runs/cove-t/encoder "
                                         r"with weights c3c3c3c3c3c3, which now holds "):
        collect_results(runs, out, command="collect")
    sha = hashlib.sha256(b"CoVe-T pretrained again").hexdigest()
    later = tmp_path / "later"
    write_main_table(later)
    write_cove_t_family(later, columns={"vectors+cove-t": (*columns["vectors+cove-t"][:2], sha,
                                                           columns["vectors+cove-t"][3])})
    (tmp_path / "runs").rename(tmp_path / "old")
    later.rename(runs)
    collect_results(runs, out, command="collect")
    assert json.loads((out / "classification.json").read_text())["cove_t_comparison"]["encoders"][
        "vectors+cove-t"] == {"encoder": "runs/cove-t/encoder", "encoder_weights": sha}


def test_the_cove_t_comparison_refuses_a_task_whose_runs_trained_otherwise(tmp_path):
    """Every run of a task follows its yaml; a run of 10 epochs among 15-epoch ones (a yaml edited between them)
    would lose its pairs without a word: the collection stops naming the runs of each setting. An unreadable
    metrics.json stops it naming the file."""
    runs, out = tmp_path / "runs", tmp_path / "out"
    write_main_table(runs)
    write_cove_t_family(runs)
    path = runs / "bcn-cove-t" / "trec6" / "vectors-seed2" / "metrics.json"
    metrics = json.loads(path.read_text())
    path.write_text(json.dumps({**metrics, "hyperparameters": {**metrics["hyperparameters"], "epochs": 10}}))
    with pytest.raises(ValueError, match=r"cove_t_comparison / trec6: the runs trained otherwise .*\{'epochs': 10.0, "
                                         r"'dropout': 0.2\}: \['vectors 2'\]"):
        collect_results(runs, out, command="collect")
    path.write_text(json.dumps({**metrics, "hyperparameters": {**metrics["hyperparameters"], "epochs": 15.0}}))
    collect_results(runs, out, command="collect")  # --epochs 15 beside the yaml's 15: one training
    for cut in (b"\0" * 16, '{"task": "trec6", "é'.encode()[:-1]):  # a machine gone while it was written
        path.write_bytes(cut)
        with pytest.raises(ValueError, match=f"{path}: not a JSON file"):
            collect_results(runs, out, command="collect")


def test_the_cove_t_comparison_pairs_runs_on_one_kind_of_device(tmp_path):
    """A seed of the family that ran on a GPU (its machine's device cuda) beside CPU runs of the same task stops the
    collection, naming the seeds of each kind; a run that recorded no device counts by its machine's GPU."""
    from instruments.results import device_kind, run_device_kind

    runs, out = tmp_path / "runs", tmp_path / "out"
    write_main_table(runs)
    write_cove_t_family(runs)
    write_run(runs, "bcn-cove-t/trec6/vectors+cove-t-seed4", "trec6", "vectors+cove", 4, 0.2, 0.9, 0.9,
              encoder="runs/cove-t/encoder", encoder_weights="c3" * 32,
              machine={**CPU, "device": "cuda:0", "gpu": "NVIDIA H200"})
    with pytest.raises(ValueError, match=r"cove_t_comparison / trec6: runs on a CPU and on a GPU \(cpu: seeds "
                                         r"\[1, 2, 3\]; gpu: seeds \[4\]\)"):
        collect_results(runs, out, command="collect")
    assert [device_kind(m) for m in (CPU, {"gpu": "H200"}, {"gpu": "H200", "device": "cpu"}, None)] == [
        "cpu", "gpu", "cpu", "cpu"]
    # a record collected before records kept their device: its machine label names the GPU
    assert [run_device_kind(r) for r in ({"machine": "AMD EPYC (25/17/1) + NVIDIA H200"}, {"machine": "AMD EPYC"},
                                         {"gpu": "NVIDIA H200"}, {"device": "cpu", "gpu": "NVIDIA H200"})] == [
        "gpu", "cpu", "gpu", "cpu"]
