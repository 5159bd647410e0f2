"""Behaviour kept through the redesign of the model package: every checkpoint under tests/fixtures/redesign/ (written by
`make_fixtures.py` at the commit its MANIFEST.json names, two of them by the old code of 41e65e7) loads with today's
code through its Auto class, its tokenizer gives the saved token ids, and the saved outputs come back: floats to within
1e-6 absolute, integers (generated ids, masks, spans, iteration counts) exactly."""

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import modeling_cove  # noqa: F401  (registers the Auto classes)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "redesign"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())

_spec = importlib.util.spec_from_file_location("make_redesign_fixtures", FIXTURES / "make_fixtures.py")
make_fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_fixtures)

pytestmark = pytest.mark.usefixtures("single_thread")


def test_manifest_names_every_fixture_folder_and_the_folders_stay_small():
    folders = {path.name for path in FIXTURES.iterdir() if path.is_dir() and path.name != "__pycache__"}
    assert folders == set(MANIFEST["fixtures"])
    assert sum(path.stat().st_size for path in FIXTURES.rglob("*") if path.is_file()) < 1_000_000
    for name, entry in MANIFEST["fixtures"].items():
        assert entry["made_at"] and entry["kind"] in make_fixtures.RECIPES, name
        assert entry["outputs"], f"{name}: no outputs recorded"


@pytest.mark.parametrize("name", sorted(MANIFEST["fixtures"]))
def test_fixture_reproduces_its_saved_outputs(name):
    entry = MANIFEST["fixtures"][name]
    folder = FIXTURES / name
    model, tokenizer = make_fixtures.load(folder, entry["auto_class"])
    assert not model.training
    inputs = json.loads((folder / "inputs.json").read_text())

    # the tokenizer saved with the checkpoint still gives the saved ids
    pairs = {"text_pair": inputs["text_pairs"]} if "text_pairs" in inputs else {}
    tokenized = tokenizer(inputs["texts"], padding=True, **pairs)
    for field in ("input_ids", "attention_mask", "token_type_ids"):
        if field in inputs:
            assert tokenized[field] == inputs[field], (name, field)

    expected = load_file(str(folder / "expected.safetensors"))
    assert sorted(expected) == entry["outputs"]
    has_encode = "encode_texts" in inputs
    actual = make_fixtures.RECIPES[entry["kind"]](model, make_fixtures.prepared(inputs, tokenizer), has_encode)
    assert sorted(actual) == sorted(expected), (name, "outputs differ in structure")
    for key, want in expected.items():
        got = actual[key]
        assert got.dtype == want.dtype and got.shape == want.shape, (name, key, got.dtype, got.shape, want.shape)
        if want.is_floating_point():
            torch.testing.assert_close(got, want, rtol=0, atol=1e-6, msg=lambda m: f"{name} {key}: {m}")
        else:
            assert torch.equal(got, want), (name, key, got, want)


def test_old_checkpoints_are_what_the_old_code_wrote():
    """The old_41e65e7_* configs predate the conventions fields (no bcn_pair_input), so they test the mapping of old
    configs; they load with today's config class."""
    from transformers import AutoConfig

    config = json.loads((FIXTURES / "old_41e65e7_bcn" / "config.json").read_text())
    assert "bcn_pair_input" not in config and config["model_type"] == "cove"
    assert AutoConfig.from_pretrained(FIXTURES / "old_41e65e7_bcn").num_labels == 3
