"""benchmarks/card_downstream.py: the CoVe-T comparison's sections of classification.json and tagging.json, as their
collectors write them from run folders, converted into the downstream results JSON of the encoder's card; each row
checked against the numbers computed by hand from the runs."""

import importlib.util
import json
import statistics
from pathlib import Path

import pytest
from conftest import exit_of
from test_collect_results import COVE_T_RUNS, by_hand, write_cove_t_family, write_main_table
from test_collect_tagging import cove_t_runs, t_interval

from instruments.results import collect_results
from instruments.tagging import collect_cove_t
from modeling_cove.training.publishing.downstream import downstream_table, load_downstream

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "card_downstream.py"
spec = importlib.util.spec_from_file_location("card_downstream", SCRIPT)
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """classification.json and tagging.json with their cove_t_comparison sections, collected from fabricated runs:
    TREC-6 on seeds 1-3 (every column), SNLI on seed 1 (vectors and vectors+cove-t: no interval), CoNLL-2000 on seeds
    1-3 (supervised, vectors+cove, vectors+cove-t)."""
    root = tmp_path_factory.mktemp("results")
    runs = root / "runs"
    write_main_table(runs)
    write_cove_t_family(runs)
    write_cove_t_family(runs, task="snli", columns={c: COVE_T_RUNS[c] for c in ("vectors", "vectors+cove-t")},
                        seeds=(1,))
    collect_results(runs, root, command="collect")
    cove_t_runs(root / "tag-cove-t")
    collect_cove_t(root / "tag-cove-t", root / "tagging.json", command="collect --cove-t")
    return root


def convert(results, out, *extra):
    """The fixture's comparison is a part of the plan's (its seeds and tasks): --partial."""
    script.main(["--classification", str(results / "classification.json"), "--tagging", str(results / "tagging.json"),
                 "--output", str(out), "--partial", *extra])
    return load_downstream(out)


def spread(values):
    return round(statistics.mean(values), 2), round(statistics.stdev(values), 2)


def test_the_pairs_of_cove_t_become_the_cards_rows(results, tmp_path, capsys):
    data = convert(results, tmp_path / "downstream.json")
    assert capsys.readouterr().out == f"wrote 7 rows of vectors+cove-t, cove-t -> {tmp_path / 'downstream.json'}\n"
    commit = json.loads((results / "classification.json").read_text())["cove_t_comparison"]["commit"]
    assert data["source"] == (f"classification.json section cove_t_comparison, collected at commit {commit}; "
                              f"tagging.json section cove_t_comparison, collected at commit {commit}")
    rows = data["rows"]
    assert [(r["task"], r["model"], r["metric"], r["column"]["name"], r["compared"]["name"]) for r in rows] == [
        ("snli", "BCN", "test accuracy (%)", "vectors+cove-t", "vectors"),  # the collector's task order
        ("trec6", "BCN", "test accuracy (%)", "vectors+cove-t", "vectors"),
        ("trec6", "BCN", "test accuracy (%)", "vectors+cove-t", "vectors+cove"),
        ("trec6", "BCN", "test accuracy (%)", "vectors+cove-t", "vectors+cove-s-5-epochs"),  # the length control
        ("trec6", "BCN", "test accuracy (%)", "cove-t", "cove"),  # CoVe-T alone beside CoVe-S alone
        ("conll2000", "tagger", "test F1 (%)", "vectors+cove-t", "supervised"),
        ("conll2000", "tagger", "test F1 (%)", "vectors+cove-t", "vectors+cove")]

    def percent(column, seeds=3):
        return spread([100 * x for x in COVE_T_RUNS[column][3][:seeds]]) if seeds > 1 else \
            (round(100 * COVE_T_RUNS[column][3][0], 2), 0.0)

    for row, (compared, seeds) in zip(rows[:3], (("vectors", 1), ("vectors", 3), ("vectors+cove", 3))):
        assert (row["column"]["mean"], row["column"]["std"]) == percent("vectors+cove-t", seeds)
        assert (row["compared"]["mean"], row["compared"]["std"]) == percent(compared, seeds)
        assert row["column"]["seeds"] == row["compared"]["seeds"] == row["difference"]["seeds"] == \
            list(range(1, seeds + 1)) and row["difference"]["n"] == seeds
    assert rows[0]["difference"] == {"mean": 1.0, "low": None, "high": None, "n": 1, "seeds": [1]}  # 91 - 90
    for row in rows[1:4]:
        mean, _, (low, high), _, _ = by_hand("vectors+cove-t", row["compared"]["name"])
        found = row["difference"]
        assert found["mean"] == pytest.approx(mean, abs=0.005)
        assert (found["low"], found["high"]) == pytest.approx((low, high), abs=0.01)

    tagger = {"supervised": (95.0, 95.2, 94.9), "vectors+cove": (95.4, 95.5, 95.6),  # cove_t_runs' test F1 in %
              "vectors+cove-t": (95.7, 95.4, 95.8)}
    assert rows[4]["difference"]["mean"] == pytest.approx(by_hand("cove-t", "cove")[0], abs=0.005)
    for row in rows[5:]:
        compared = row["compared"]["name"]
        assert (row["column"]["mean"], row["column"]["std"]) == spread(tagger["vectors+cove-t"])
        assert (row["compared"]["mean"], row["compared"]["std"]) == spread(tagger[compared])
        mean, low, high = t_interval([a - b for a, b in zip(tagger["vectors+cove-t"], tagger[compared])])
        assert row["difference"] == {"mean": mean, "low": low, "high": high, "n": 3, "seeds": [1, 2, 3]}
    assert downstream_table(data).splitlines()[-1].startswith(
        "| conll2000 | tagger | test F1 (%) | `vectors+cove-t` 95.63 ± 0.21 (3) | `vectors+cove` 95.50 ± 0.10 (3) | ")


def test_another_encoder_column_takes_only_its_own_pairs(results, tmp_path):
    rows = convert(results, tmp_path / "cove-t.json", "--encoder-column", "cove-t")["rows"]
    assert [(r["task"], r["column"]["name"], r["compared"]["name"]) for r in rows] == [("trec6", "cove-t", "cove")]
    mean, _, _, _, _ = by_hand("cove-t", "cove")
    assert rows[0]["difference"]["mean"] == pytest.approx(mean, abs=0.005) == 1.0


def test_no_pair_or_a_broken_file_ends_in_one_line_and_writes_nothing(results, tmp_path, capsys):
    out = tmp_path / "downstream.json"
    argv = ["--classification", str(tmp_path / "none.json"), "--tagging", str(tmp_path / "none.json"), "--output",
            str(out)]
    status, err = exit_of(script.main, argv, capsys)
    assert status == 2 and err.startswith("error: no pair of 'vectors+cove-t' or 'cove-t' in the cove_t_comparison "
                                          "sections of")
    status, err = exit_of(script.main, argv[4:] + ["--classification", str(results / "classification.json"),
                                                   "--tagging", str(results / "tagging.json"),
                                                   "--encoder-column", "random"], capsys)
    assert status == 2 and "no pair of 'random'" in err
    (tmp_path / "broken.json").write_text("{")
    status, err = exit_of(script.main, ["--classification", str(tmp_path / "broken.json"), "--output", str(out)],
                          capsys)
    assert status == 2 and err.startswith(f"error: {tmp_path / 'broken.json'} is not valid JSON")
    for name, content, message in (
            ("list.json", [], "is not a results file (a JSON object), got list"),
            ("section.json", {"cove_t_comparison": [1]}, "its cove_t_comparison is not an object")):
        (tmp_path / name).write_text(json.dumps(content))
        status, err = exit_of(script.main, ["--classification", str(tmp_path / name), "--output", str(out)], capsys)
        assert status == 2 and err.startswith(f"error: {tmp_path / name}") and message in err, err
    assert not out.exists()


def test_rows_measured_over_other_weights_than_the_cards_encoder_are_refused(results, tmp_path, capsys):
    """--encoder: the card's checkpoint. Rows whose runs recorded other weights (a CoVe-T pretrained again since the
    comparison ran) or none end the command naming the file; rows over its own weights are written."""
    import hashlib

    encoder = tmp_path / "cove-t"
    encoder.mkdir()
    (encoder / "model.safetensors").write_bytes(b"CoVe-T as the comparison read it")
    (encoder / "config.json").write_text("{}")
    sha = hashlib.sha256(b"CoVe-T as the comparison read it").hexdigest()
    out = tmp_path / "downstream.json"
    argv = ["--classification", str(results / "classification.json"), "--tagging", str(results / "tagging.json"),
            "--output", str(out), "--encoder", str(encoder)]
    status, err = exit_of(script.main, argv, capsys)  # the fabricated runs recorded "c3" * 32
    assert status == 2 and err.startswith(f"error: {results / 'classification.json'}: the vectors+cove-t runs")
    assert "c3" * 32 in err and sha in err and not out.exists()
    patched = {}
    for name in ("classification.json", "tagging.json"):
        report = json.loads((results / name).read_text())
        for cells in report["cove_t_comparison"]["results"].values():
            for run in [r for column in ("vectors+cove-t", "cove-t") for r in cells.get(column, {}).get("runs", [])]:
                run["encoder_weights"] = sha
        patched[name] = tmp_path / name
        patched[name].write_text(json.dumps(report))
    argv = ["--classification", str(patched["classification.json"]), "--tagging", str(results / "tagging.json"),
            "--output", str(out), "--encoder", str(encoder)]
    status, err = exit_of(script.main, argv, capsys)  # the tagger's runs recorded none
    assert status == 2 and err.startswith(f"error: {results / 'tagging.json'}: the vectors+cove-t runs")
    report = json.loads(patched["classification.json"].read_text())  # one BCN run of the column without a record
    report["cove_t_comparison"]["results"]["trec6"]["vectors+cove-t"]["runs"][0].pop("encoder_weights")
    (tmp_path / "one-unrecorded.json").write_text(json.dumps(report))
    argv[1] = str(tmp_path / "one-unrecorded.json")
    status, err = exit_of(script.main, argv, capsys)
    assert status == 2 and err.startswith(f"error: {tmp_path / 'one-unrecorded.json'}: the vectors+cove-t runs")
    assert len(convert(results, out, "--classification", str(patched["classification.json"]), "--tagging",
                       str(patched["tagging.json"]), "--encoder", str(encoder))["rows"]) == 7


def test_a_comparison_short_of_its_plan_is_refused_unless_partial(results, tmp_path, capsys):
    """Without --partial every pair the plans make of the card's columns must be there on all its planned seeds:
    the fixture's (TREC-6 on 3 seeds of 10, SNLI on 1 of 5, no SST-2, CoNLL-2000 on 3 of 5) ends the command naming
    what is short, and writes nothing."""
    out = tmp_path / "downstream.json"
    argv = ["--classification", str(results / "classification.json"), "--tagging", str(results / "tagging.json"),
            "--output", str(out)]
    status, err = exit_of(script.main, argv, capsys)
    assert status == 2 and err.startswith("error: the comparison is not complete") and not out.exists()
    assert "BCN trec6 vectors+cove-t - vectors: seeds [1, 2, 3] of [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]" in err
    assert "BCN sst2 vectors+cove-t - vectors+cove: seeds [] of [1, 2, 3]" in err
    assert "BCN trec6 cove-t - cove" not in err  # planned on seeds 1-3: complete
    assert "tagger conll2000 vectors+cove-t - supervised: seeds [1, 2, 3] of [1, 2, 3, 4, 5]" in err
