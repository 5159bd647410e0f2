"""The downstream results of an encoder (`publishing.downstream`) and the card section they add
(`cove-export-encoder --downstream FILE`): the schema and its errors (each naming the file, the row and the key), the
table against the numbers given, and the export with and without them on a tiny MT checkpoint."""

import copy
import json

import pytest
import torch
from conftest import exit_of
from test_card_fixtures import INPUTS

from modeling_cove import CoveConfig
from modeling_cove.modeling_cove_mt import CoveForMachineTranslation
from modeling_cove.tokenization_cove import build_cove_tokenizer
from modeling_cove.training.commands import export_encoder as command
from modeling_cove.training.publishing import cards
from modeling_cove.training.publishing.downstream import (DownstreamError, downstream_section, downstream_table,
                                                          load_downstream, validate_downstream, write_downstream)
from modeling_cove.training.publishing.export import export_encoder

GOOD = {
    "schema_version": 1,
    "source": "benchmarks/results/classification.json and tagging.json",
    "rows": [
        {"task": "trec6", "model": "BCN", "metric": "test accuracy (%)",
         "column": {"name": "vectors+cove-t", "mean": 91.256, "std": 0.804, "seeds": [1, 2, 3]},
         "compared": {"name": "vectors", "mean": 90.1, "std": 0.6, "seeds": [1, 2, 3, 4]},
         "difference": {"mean": 1.1, "low": -0.213, "high": 2.0, "n": 3, "seeds": [1, 2, 3]}},
        {"task": "conll2000", "model": "tagger", "metric": "test F1 (%)",
         "column": {"name": "vectors+cove-t", "mean": 95.2, "std": 0.0, "seeds": [7]},
         "compared": {"name": "vectors+cove", "mean": 95.45, "std": 0.0},
         "difference": {"mean": -0.25, "low": None, "high": None, "n": 1}},
    ],
}


def with_change(path: str, value) -> dict:
    """GOOD with the key at dotted `path` (list indices as numbers) set to `value`, or removed for `...`."""
    data = copy.deepcopy(GOOD)
    *parents, key = [int(part) if part.isdigit() else part for part in path.split(".")]
    block = data
    for part in parents:
        block = block[part]
    if value is ...:
        del block[key]
    else:
        block[key] = value
    return data


def test_a_good_file_loads_and_writes_back(tmp_path):
    path = write_downstream(tmp_path / "downstream.json", GOOD)
    assert load_downstream(path) == GOOD == json.loads(path.read_text())


BAD = [  # (change, what the error says)
    (("schema_version", 2), "schema_version must be 1, got 2"),
    (("rows", []), "rows must be a non-empty list of rows"),
    (("rows", [1]), "rows[0] must be an object"),
    (("rows.1.difference.n", ...), "rows[1].difference.n is required"),
    (("rows.0.task", ""), "rows[0].task must be a non-empty string"),
    (("rows.0.column.mean", "91"), "rows[0].column.mean must be a finite number, got '91'"),
    (("rows.0.compared.std", -0.1), "rows[0].compared.std must be a finite number >= 0, got -0.1"),
    (("rows.0.column.seeds", [1, 1, 2]), "rows[0].column.seeds must be a non-empty list of distinct integer seeds"),
    (("rows.0.difference.hgih", 2.0), "rows[0].difference.hgih is not a key of the schema (known there: mean, low, "
                                      "high, n, seeds)"),
    (("rows.1.seed", 1), "rows[1].seed is not a key of the schema"),
    (("rows.0.compared.name", "vectors+cove-t"), "rows[0].compared.name is the column's own name 'vectors+cove-t'"),
    (("rows.0.difference.low", None), "rows[0].difference.low and difference.high are required with n 3"),
    (("rows.1.difference.low", -1.0), "rows[1].difference.low/high must be null with n 1"),
    (("rows.0.difference.high", 1.0), "rows[0].difference: the interval [-0.213, 1.0] must hold its mean 1.1"),
    (("rows.0.difference.n", 4), "rows[0].difference.n 4 exceeds the 3 seeds of column"),
    (("rows.0.difference.seeds", [1, 2, 5]), "rows[0].difference.seeds [5] are not among column.seeds"),
    (("rows.1", GOOD["rows"][0]), "rows[1] repeats rows[0] (same task, model, metric and columns)"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[message[:40] for _, message in BAD])
def test_each_kind_of_bad_file_is_refused_naming_the_file_row_and_key(tmp_path, change, message):
    path = tmp_path / "downstream.json"
    path.write_text(json.dumps(with_change(*change)))
    with pytest.raises(DownstreamError) as error:
        load_downstream(path)
    assert str(error.value).startswith(f"{path}: invalid downstream results:\n  - ")
    assert message in str(error.value)
    with pytest.raises(DownstreamError, match="invalid downstream results"):
        write_downstream(tmp_path / "written.json", with_change(*change))
    assert not (tmp_path / "written.json").exists()


def test_the_difference_follows_the_means_up_to_their_rounding():
    """On the same seeds (listed or not, in any order) the difference is the column's mean minus the compared one's,
    within the rounding of the numbers as written (half a unit of each one's last decimal)."""
    row = {"task": "trec6", "model": "BCN", "metric": "test accuracy (%)",
           "column": {"name": "vectors+cove-t", "mean": 91.2, "std": 0.8, "seeds": [1, 2, 3]},
           "compared": {"name": "vectors", "mean": 90.2, "std": 0.6, "seeds": [3, 2, 1]},
           "difference": {"mean": 1.1, "low": 0.2, "high": 2.0, "n": 3}}  # 91.24, 90.16, 1.08 rounded to 1 decimal

    def check(**difference):
        data = {"schema_version": 1, "rows": [{**row, "difference": {**row["difference"], **difference}}]}
        return validate_downstream(data)

    check()
    check(seeds=[2, 3, 1])
    for wrong in ({"mean": -1.1, "low": -2.0, "high": -0.2}, {"mean": -1.1, "low": -2.0, "high": -0.2,
                                                                 "seeds": [3, 1, 2]}, {"mean": 1.16}):
        with pytest.raises(DownstreamError, match=r"is not column.mean - compared.mean .* up to rounding"):
            check(**wrong)
    check(mean=1.09, low=0.2, high=2.0)  # the means allow 0.9 to 1.1 ...
    with pytest.raises(DownstreamError, match="up to rounding"):
        check(mean=1.14)  # ... and 1.135 to 1.145 is outside
    check(mean=1.1, n=2, seeds=[1, 2])  # ... and on fewer seeds than the columns ran, the means do not apply


def test_a_file_that_is_no_downstream_json_is_named(tmp_path):
    with pytest.raises(DownstreamError, match=f"downstream results not found: {tmp_path / 'missing.json'}"):
        load_downstream(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{rows: [")
    with pytest.raises(DownstreamError, match=f"{tmp_path / 'broken.json'} is not valid JSON"):
        load_downstream(tmp_path / "broken.json")
    (tmp_path / "list.json").write_text(json.dumps(GOOD["rows"]))
    with pytest.raises(DownstreamError, match=r"list.json: downstream results are a JSON object .* got list"):
        load_downstream(tmp_path / "list.json")


def test_the_table_shows_the_numbers_given():
    """Each row's cells from its numbers: mean ± std (2 decimals) with the seed count, the difference signed with
    its interval (none on one seed), the paired seeds."""
    lines = downstream_table(GOOD).splitlines()
    assert lines[0] == ("| task | model | metric | this encoder | compared with | difference [95% interval] | "
                        "paired seeds |")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert rows == [
        ["trec6", "BCN", "test accuracy (%)", "`vectors+cove-t` 91.26 ± 0.80 (3)", "`vectors` 90.10 ± 0.60 (4)",
         "+1.10 [-0.21, +2.00]", "3"],
        ["conll2000", "tagger", "test F1 (%)", "`vectors+cove-t` 95.20 ± 0.00 (1)", "`vectors+cove` 95.45 ± 0.00",
         "-0.25 (one seed: no interval)", "1"]]
    odd = with_change("rows.1.task", "conll|2000")
    odd["rows"][1]["difference"]["mean"] = -0.004  # rounds to 0: shown unsigned-zero, not "-0.00"
    cells = downstream_table(odd).splitlines()[3]
    assert cells.startswith("| conll\\|2000 | tagger |") and "| +0.00 (one seed: no interval) |" in cells
    section = downstream_section(GOOD)
    assert section.startswith("## Downstream results\n\n| task |")
    assert section.endswith("an interval that contains 0 is no evidence of a difference. Source: "
                            "benchmarks/results/classification.json and tagging.json.")


@pytest.mark.parametrize("objective", ["mt", "bilm"])
def test_the_section_is_added_to_the_export_card_and_nothing_else_changes(objective):
    given = INPUTS[f"{objective}_encoder_export"]
    config = CoveConfig.from_dict(given["config"])
    where = dict(path=given["out_dir"], name=given["name"]) if objective == "mt" else {}
    without = str(cards.encoder_export_card(objective, config, given["metrics"], **where))
    with_results = str(cards.encoder_export_card(objective, config, given["metrics"], downstream=GOOD, **where))
    odd = with_change("rows.1.task", "conll|2000")
    odd["rows"][1]["difference"]["mean"] = -0.004  # rounds to 0: shown unsigned-zero, not "-0.00"
    cells = downstream_table(odd).splitlines()[3]
    assert cells.startswith("| conll\\|2000 | tagger |") and "| +0.00 (one seed: no interval) |" in cells
    section = downstream_section(GOOD)
    assert with_results.count(section) == 1 and "Downstream results" not in without
    if objective == "mt":  # after the MT model's results, before the limitations
        assert with_results.replace(section + "\n\n", "") == without
        assert with_results.index("## Results of the MT model") < with_results.index(section) < \
            with_results.index("## Limitations")
    else:  # at the end
        assert without.endswith("`.\n") and with_results == without[:-1] + "\n\n" + section + "\n"
    with pytest.raises(DownstreamError, match="rows must be a non-empty list"):
        cards.encoder_export_card(objective, config, given["metrics"], downstream={**GOOD, "rows": []}, **where)


WORDS = ["a", "man", "in", "blue", "shirt", "is", "playing", "guitar", "."]


@pytest.fixture(scope="module")
def mt_run(tmp_path_factory):
    """A tiny MT checkpoint (runs/<name>/mt) with the metrics.json beside it that the export reads."""
    root = tmp_path_factory.mktemp("run")
    tokenizer = build_cove_tokenizer(WORDS)
    torch.manual_seed(0)
    model = CoveForMachineTranslation(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=6, hidden_size=4,
                                                 target_vocab_size=12, decoder_embedding_dim=5,
                                                 decoder_hidden_size=8)).eval()
    model.save_pretrained(root / "mt")
    tokenizer.save_pretrained(root / "mt")
    (root / "metrics.json").write_text(json.dumps(INPUTS["mt_encoder_export"]["metrics"]))
    return root


def test_export_with_and_without_downstream_results(mt_run, tmp_path, capsys):
    """cove-export-encoder writes today's card without --downstream, and that card plus the section with it; the
    weights are the same either way."""
    (tmp_path / "downstream.json").write_text(json.dumps(GOOD))
    for name, extra in (("plain", []), ("with", ["--downstream", str(tmp_path / "downstream.json")])):
        command.main(["--mt-checkpoint", str(mt_run / "mt"), "--output-dir", str(tmp_path / name), *extra])
    assert capsys.readouterr().out.count("exported encoder -> ") == 2
    config = CoveConfig.from_pretrained(tmp_path / "plain")
    metrics = INPUTS["mt_encoder_export"]["metrics"]
    plain, with_results = ((tmp_path / name / "README.md").read_text() for name in ("plain", "with"))
    assert plain == str(cards.encoder_export_card("mt", config, metrics, path=tmp_path / "plain"))
    assert with_results == str(cards.encoder_export_card("mt", config, metrics, path=tmp_path / "with",
                                                         downstream=GOOD))
    assert downstream_section(GOOD) in with_results and "Downstream results" not in plain
    assert (tmp_path / "plain" / "model.safetensors").read_bytes() == (tmp_path / "with" /
                                                                       "model.safetensors").read_bytes()


def test_a_bad_downstream_file_ends_the_export_before_anything_is_written(mt_run, tmp_path, capsys):
    bad = tmp_path / "downstream.json"
    bad.write_text(json.dumps(with_change("rows.0.difference.high", 1.0)))
    out = tmp_path / "encoder"
    status, err = exit_of(command.main, ["--mt-checkpoint", str(mt_run / "mt"), "--output-dir", str(out),
                                         "--downstream", str(bad)], capsys)
    assert status == 2 and err.startswith(f"error: {bad}: invalid downstream results:")
    assert "rows[0].difference: the interval [-0.213, 1.0] must hold its mean 1.1" in err
    status, err = exit_of(command.main, ["--mt-checkpoint", str(mt_run / "mt"), "--output-dir", str(out),
                                         "--downstream", str(tmp_path / "missing.json")], capsys)
    assert status == 2 and err == f"error: downstream results not found: {tmp_path / 'missing.json'}\n"
    with pytest.raises(DownstreamError, match="rows\\[1\\].difference.n is required"):
        export_encoder(mt_run / "mt", out, downstream=with_change("rows.1.difference.n", ...))
    assert list(tmp_path.iterdir()) == [bad]  # no export folder, no temporary one
    assert validate_downstream(GOOD) is GOOD
