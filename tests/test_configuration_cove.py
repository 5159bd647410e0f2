"""`CoveConfig` keeps loading what it wrote before: the config.json of every kind of checkpoint, saved by the code
named in tests/fixtures/configs/accepted_values.json (`make_configs.py`), loads field by field as it did then,
round-trips save -> load, and is what the same tiny models write today; the values that config accepted which a typed
config could refuse (ints for floats, tuples for lists, numpy scalars) are still accepted, with the values it gave;
and a value of the wrong type is a ValueError that names the field, as a bad value is."""

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoConfig, PreTrainedConfig

import modeling_cove  # noqa: F401  (registers the Auto classes)
from modeling_cove import CoveConfig
from modeling_cove.configuration_cove import REQUIREMENTS

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "configs"
KINDS = ("encoder", "mt", "bcn_single", "bcn_pair", "dcn", "bilm")

# Values the config accepted before its fields were typed, that a typed config could refuse: case id ->
# (field, value, other fields the case needs). accepted_values.json holds what `to_dict()[field]` gave for each.
ACCEPTED_VALUES = {
    "encoder_dropout_int": ("encoder_dropout", 0, {}),
    "decoder_dropout_int": ("decoder_dropout", 0, {}),
    "bcn_dropout_int": ("bcn_dropout", 0, {}),
    "dcn_dropout_int": ("dcn_dropout", 0, {}),
    "initializer_range_int": ("initializer_range", 1, {}),
    "length_penalty_alpha_int": ("length_penalty_alpha", 2, {}),
    "bcn_pooling_tuple": ("bcn_pooling", ("max", "self"), {}),
    "bcn_maxout_reductions_tuple": ("bcn_maxout_reductions", (2, 2), {}),
    "bilm_softmax_cutoffs_tuple": ("bilm_softmax_cutoffs", (4, 9), dict(encoder_type="bilm", vocab_size=20,
                                                                         target_vocab_size=20)),
    "vocab_size_numpy": ("vocab_size", np.int32(40), {}),
    "hidden_size_numpy": ("hidden_size", np.int64(5), {}),
    "num_hidden_layers_numpy": ("num_hidden_layers", np.int64(1), {}),
    "char_ngram_dim_numpy": ("char_ngram_dim", np.int64(0), {}),
    "target_vocab_size_numpy": ("target_vocab_size", np.int64(30), {}),
    "dcn_hidden_size_numpy": ("dcn_hidden_size", np.int16(8), {}),
    "bcn_max_length_numpy": ("bcn_max_length", np.int64(100), {}),
    "pad_token_id_numpy": ("pad_token_id", np.int64(0), {}),
    "decoder_start_token_id_numpy": ("decoder_start_token_id", np.int64(2), {}),
    "paper_defaults_version_numpy": ("paper_defaults_version", np.int64(0), {}),
    "bcn_maxout_reductions_numpy": ("bcn_maxout_reductions", [np.int64(2), 2], {}),
    "bilm_softmax_cutoffs_numpy": ("bilm_softmax_cutoffs", (np.int64(4), 9), {}),
    "bcn_dropout_numpy_float32": ("bcn_dropout", np.float32(0.25), {}),
    "encoder_dropout_numpy_float64": ("encoder_dropout", np.float64(0.125), {}),
    "initializer_range_numpy_float32": ("initializer_range", np.float32(0.5), {}),
    "length_penalty_alpha_numpy_float32": ("length_penalty_alpha", np.float32(0.5), {}),
}


# the Python type a numpy scalar is stored as (today's config kept numpy's, which `save_pretrained` could not write)
PYTHON_TYPE = {"int16": "int", "int32": "int", "int64": "int", "float32": "float", "float64": "float"}


def load_maker():
    spec = importlib.util.spec_from_file_location("make_configs", FIXTURES / "make_configs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


comparable = load_maker().comparable  # config.to_dict() as JSON, as the fixtures were written


def saved(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


def test_fixtures_cover_every_kind_and_every_case():
    TO_DICT, ACCEPTED = saved("to_dict.json"), saved("accepted_values.json")["cases"]
    assert set(TO_DICT) == set(KINDS) | {"old_41e65e7_encoder", "old_41e65e7_bcn"}
    assert set(ACCEPTED) == set(ACCEPTED_VALUES)
    for kind in KINDS:
        written = saved(f"{kind}.json")
        assert written["model_type"] == "cove" and written["paper_defaults_version"] == 1, kind
        assert written["lstm_implementation"] == TO_DICT[kind]["lstm_implementation"], kind
    assert TO_DICT["encoder"]["lstm_implementation"] == "unpacked" and TO_DICT["bilm"]["encoder_type"] == "bilm"


@pytest.mark.parametrize("kind", KINDS + ("old_41e65e7_encoder", "old_41e65e7_bcn"))
def test_saved_config_loads_as_it_did(kind, tmp_path):
    """Through AutoConfig from a checkpoint folder and through `CoveConfig.from_dict`: every field as before."""
    source = FIXTURES / f"{kind}.json" if kind in KINDS else FIXTURES.parent / "redesign" / kind / "config.json"
    shutil.copy(source, tmp_path / "config.json")
    config = AutoConfig.from_pretrained(tmp_path)
    assert type(config) is CoveConfig
    expected = saved("to_dict.json")[kind]
    assert comparable(config) == expected
    assert comparable(CoveConfig.from_dict(json.loads(source.read_text()))) == expected


@pytest.mark.parametrize("kind", KINDS + ("old_41e65e7_encoder", "old_41e65e7_bcn"))
def test_saved_config_round_trips(kind, tmp_path):
    source = FIXTURES / f"{kind}.json" if kind in KINDS else FIXTURES.parent / "redesign" / kind / "config.json"
    config = CoveConfig.from_pretrained(source)
    config.save_pretrained(tmp_path)
    again = CoveConfig.from_pretrained(tmp_path)
    assert comparable(again) == comparable(config) == saved("to_dict.json")[kind]
    assert again.to_json_string() == config.to_json_string()


def test_the_same_models_write_the_same_config_json(tmp_path):
    """What today's code writes for the tiny models of every kind is the config.json the fixtures hold."""
    from transformers.utils import logging

    logging.set_verbosity_error()
    for kind, model in load_maker().build_models().items():
        model.save_pretrained(tmp_path / kind)
        written = json.loads((tmp_path / kind / "config.json").read_text())
        before = saved(f"{kind}.json")
        for values in (written, before):
            values.pop("transformers_version")
        assert written == before, kind


@pytest.mark.parametrize("case_id", sorted(ACCEPTED_VALUES))
def test_accepted_values_are_still_accepted_with_the_same_values(case_id, tmp_path):
    """Each value is accepted and `to_dict()` gives what it gave (numpy scalars: the number they equal; a Python
    int or float in place of numpy's, so that the config can be saved — with numpy's, `save_pretrained` failed)."""
    field, value, others = ACCEPTED_VALUES[case_id]
    expected = saved("accepted_values.json")["cases"][case_id]
    got = CoveConfig(**{field: value}, **others).to_dict()[field]
    assert got == expected["value"], case_id
    assert type(got).__name__ == PYTHON_TYPE.get(expected["type"], expected["type"]), case_id
    if expected["item_types"] is not None:
        assert [type(item).__name__ for item in got] == [PYTHON_TYPE.get(want, want) for want in expected["item_types"]]
    config = CoveConfig(**{field: value}, **others)
    config.save_pretrained(tmp_path)
    assert CoveConfig.from_pretrained(tmp_path).to_dict()[field] == expected["value"], case_id


def test_every_field_says_what_it_must_be():
    """Each CoVe field has the words its ValueError uses (a wrong type as much as a bad value)."""
    inherited = {field.name for field in dataclasses.fields(PreTrainedConfig)}
    assert {field.name for field in dataclasses.fields(CoveConfig)} - inherited == set(REQUIREMENTS)


def test_a_wrong_type_is_a_value_error_naming_the_field_on_assignment_too():
    config = CoveConfig()
    with pytest.raises(ValueError, match=r"^freeze_encoder must be True or False, got 1$"):
        config.freeze_encoder = 1
    with pytest.raises(ValueError, match=r"^bcn_maxout_reductions must be a list of ints, got \[2\.5\]$"):
        CoveConfig(bcn_maxout_reductions=[2.5])
    with pytest.raises(ValueError, match=r"^unk_token_id must be an int or None, got '1'$"):
        CoveConfig(unk_token_id="1")
    assert config.freeze_encoder is True
