"""Eq. 6's per-token feature layout has one owner, `CoveConfig.feature_layout`: its parts' columns for every
combination of the fields that choose them, and every model (the encoder's output, the MT head, the BCN, the DCN)
reads exactly those columns, checked against the encoder's hidden states sliced by hand."""

import itertools
import json
from pathlib import Path

import pytest
import torch

from modeling_cove import CoveConfig, CoveForMachineTranslation, CoveForQuestionAnswering, CoveModel
from modeling_cove import CoveForSequenceClassification
from modeling_cove.configuration_cove import FeatureLayout
from modeling_cove.modeling_cove_bcn import bcn_input_size, bcn_layer_indices
from modeling_cove.modeling_cove_dcn import cove_feature_size, dcn_input_size

FIXTURES = Path(__file__).parent / "fixtures" / "redesign"
V, H, C = 6, 4, 3  # word_vector_dim, hidden_size (a layer is 2H = 8 wide), char_ngram_dim when on


def tiny_config(**overrides) -> CoveConfig:
    values = dict(vocab_size=30, word_vector_dim=V, hidden_size=H, bcn_feedforward_dim=5, bcn_hidden_size=4,
                  bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, num_labels=3, dcn_hidden_size=6, dcn_pool_size=3,
                  dcn_max_iterations=2, dcn_dropout=0.0, decoder_hidden_size=2 * H, decoder_embedding_dim=5,
                  target_vocab_size=20)
    values.update(overrides)
    return CoveConfig(**values)


def expected_parts(words: bool, cove: bool, both: bool, chars: bool) -> tuple:
    """The layout written out by hand: [word vectors; layer 1; top layer; char n-grams], each present or not."""
    widths = [("word_vectors", V if words else 0), ("first_layer", 2 * H if cove and both else 0),
              ("top_layer", 2 * H if cove else 0), ("char_ngrams", C if chars else 0)]
    parts, start = [], 0
    for name, width in widths:
        if width:
            parts.append((name, start, start + width))
            start += width
    return tuple(parts)


LAYOUT_FIELDS = list(itertools.product(["top", "both"], [False, True], [0, C]))


@pytest.mark.parametrize("cove_output,include_word_vectors,char_ngram_dim", LAYOUT_FIELDS)
def test_each_readers_columns_for_every_combination(cove_output, include_word_vectors, char_ngram_dim):
    config = tiny_config(cove_output=cove_output, include_word_vectors=include_word_vectors,
                         char_ngram_dim=char_ngram_dim)
    both, chars = cove_output == "both", char_ngram_dim > 0
    encoder = config.feature_layout("encoder")
    assert encoder.parts == expected_parts(include_word_vectors, True, both, chars)
    assert config.output_size == encoder.size == encoder.parts[-1][2]
    for mode, words, cove in (("vectors+cove", True, True), ("vectors", True, False), ("cove", False, True)):
        # the heads' own knobs choose word vectors and CoVe; include_word_vectors changes the encoder output only
        config.bcn_input = config.dcn_input = mode
        assert config.feature_layout("dcn").parts == expected_parts(words, cove, both, chars)
        assert config.feature_layout("bcn").parts == expected_parts(words, cove, both, chars)
        assert dcn_input_size(config) == bcn_input_size(config) == config.feature_layout("dcn").size
        assert cove_feature_size(config) == (2 * H * (2 if both else 1) if cove else 0)
        assert bcn_layer_indices(config) == ([1, 2] if both else [2]) * cove
    config.bcn_input = "scalar_mix"
    assert config.feature_layout("bcn").parts == (("scalar_mix", 0, 2 * H),) + (
        (("char_ngrams", 2 * H, 2 * H + C),) if chars else ())


def test_a_one_layer_mt_lstm_with_both_layers():
    """Layer 1 is the top layer: the encoder output and the DCN hold it twice, the BCN once (as before the layout)."""
    config = tiny_config(num_hidden_layers=1, cove_output="both")
    assert config.feature_layout("encoder").names == ("first_layer", "top_layer")
    assert config.feature_layout("dcn").mt_lstm_layers(1) == [1, 1]
    assert config.feature_layout("bcn").names == ("word_vectors", "top_layer") and bcn_layer_indices(config) == [1]


def test_layout_lookups_and_their_errors():
    layout = FeatureLayout.from_widths([("word_vectors", 2), ("top_layer", 3), ("char_ngrams", 1)])
    assert layout.columns("top_layer") == (2, 5) and layout.size == 6 and layout.has("char_ngrams")
    assert layout.span(("first_layer", "top_layer")) == (2, 5) and layout.span(("first_layer",)) == (0, 0)
    features = torch.arange(12.0).view(2, 6)
    assert torch.equal(layout.select(features, "top_layer"), features[:, 2:5])
    with pytest.raises(ValueError, match=r"no part 'first_layer'; its parts are \['word_vectors', 'top_layer'"):
        layout.columns("first_layer")
    with pytest.raises(ValueError, match="not neighbours"):
        layout.span(("word_vectors", "char_ngrams"))
    with pytest.raises(ValueError, match="reader must be one of"):
        tiny_config().feature_layout("mt")
    assert FeatureLayout.from_widths([]).size == 0


def batch():
    ids = torch.tensor([[5, 9, 12, 7, 3], [8, 4, 21, 0, 0]])
    return ids, (ids != 0).long()


def hand_parts(model: CoveModel, ids: torch.Tensor, mask: torch.Tensor) -> dict:
    """Each part computed on its own: the word vectors and the MT-LSTM layers from `hidden_states`, the char n-grams
    from their table; zero at padding."""
    with torch.no_grad():
        hidden = model(ids, attention_mask=mask, output_hidden_states=True).hidden_states
        float_mask = mask.unsqueeze(-1).float()
        parts = {"word_vectors": hidden[0], "first_layer": hidden[1], "top_layer": hidden[-1]}
        if model.char_ngram_embeddings is not None:
            parts["char_ngrams"] = model.char_ngram_embeddings(ids) * float_mask
    return parts


def randomize(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.uniform_(-0.5, 0.5)
    return model.eval()


@pytest.mark.parametrize("cove_output,include_word_vectors,char_ngram_dim", LAYOUT_FIELDS)
def test_the_encoder_output_holds_each_part_in_its_columns(cove_output, include_word_vectors, char_ngram_dim):
    model = randomize(CoveModel(tiny_config(cove_output=cove_output, include_word_vectors=include_word_vectors,
                                            char_ngram_dim=char_ngram_dim)))
    ids, mask = batch()
    output = model(ids, attention_mask=mask).last_hidden_state
    parts = hand_parts(model, ids, mask)
    layout = model.config.feature_layout()
    assert output.shape[-1] == layout.size
    for name, start, end in layout.parts:
        torch.testing.assert_close(output[..., start:end], parts[name], atol=1e-7, rtol=0)


@pytest.mark.parametrize("cove_output,include_word_vectors,char_ngram_dim", LAYOUT_FIELDS)
def test_the_mt_head_reads_the_top_layer_columns(cove_output, include_word_vectors, char_ngram_dim):
    model = randomize(CoveForMachineTranslation(tiny_config(cove_output=cove_output, char_ngram_dim=char_ngram_dim,
                                                            include_word_vectors=include_word_vectors)))
    ids, mask = batch()
    output = model.cove(ids, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(model.context_from_encoder(output), hand_parts(model.cove, ids, mask)["top_layer"],
                               atol=0, rtol=0)


def captured_input(module) -> list:
    """The first positional argument of each call of `module`, kept in a list."""
    seen = []
    module.register_forward_pre_hook(lambda _, args: seen.append(args[0].detach()))
    return seen


@pytest.mark.parametrize("bcn_input", ["vectors+cove", "vectors", "cove"])
@pytest.mark.parametrize("cove_output,char_ngram_dim", [("top", 0), ("both", 0), ("both", C), ("top", C)])
def test_the_bcn_reads_exactly_its_layout_columns(bcn_input, cove_output, char_ngram_dim):
    """The input of the BCN's feed-forward layer f (eqs. 7-8) is w~: each part of `feature_layout("bcn")` in its
    columns equals that part of the encoder's hidden states (single texts: one encoder pass), whatever
    include_word_vectors says."""
    config = tiny_config(bcn_input=bcn_input, cove_output=cove_output, char_ngram_dim=char_ngram_dim,
                         include_word_vectors=bcn_input == "cove")
    model = randomize(CoveForSequenceClassification(config))
    seen = captured_input(model.feedforward)
    ids, mask = batch()
    with torch.no_grad():
        model(ids, attention_mask=mask)
    parts = hand_parts(model.cove, ids, mask)
    layout = config.feature_layout("bcn")
    assert seen[0].shape == (*ids.shape, layout.size)
    for name, start, end in layout.parts:
        torch.testing.assert_close(seen[0][..., start:end], parts[name], atol=0, rtol=0)


@pytest.mark.parametrize("dcn_input", ["vectors+cove", "vectors", "cove"])
@pytest.mark.parametrize("cove_output,char_ngram_dim", [("top", 0), ("both", C)])
def test_the_dcn_reads_exactly_its_layout_columns(dcn_input, cove_output, char_ngram_dim):
    """The DCN's document features (the coattention encoder's input): each part of `feature_layout("dcn")` equals
    that part of the encoder run on the context alone."""
    config = tiny_config(dcn_input=dcn_input, cove_output=cove_output, char_ngram_dim=char_ngram_dim)
    model = randomize(CoveForQuestionAnswering(config))
    seen = captured_input(model.coattention_encoder)
    ids = torch.tensor([[5, 9, 12, 7, 3, 11], [8, 4, 21, 13, 0, 0]])
    types = torch.tensor([[0, 0, 1, 1, 1, 1], [0, 1, 1, 1, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        model(ids, attention_mask=mask, token_type_ids=types)
    context_ids = torch.tensor([[12, 7, 3, 11], [4, 21, 13, 0]])  # each row's context, left-aligned
    parts = hand_parts(model.cove, context_ids, (context_ids != 0).long())
    layout = config.feature_layout("dcn")
    assert seen[0].shape == (*context_ids.shape, layout.size)
    for name, start, end in layout.parts:
        torch.testing.assert_close(seen[0][..., start:end], parts[name], atol=0, rtol=0)


@pytest.mark.parametrize("folder", sorted(p.name for p in FIXTURES.glob("old_41e65e7_*")))
def test_configs_written_by_41e65e7_map_to_the_layout(folder):
    """A config.json written before the layout existed loads with the layout its fields meant then: the widths the
    old code computed (output_size, the BCN's and the DCN's input) are the layout's."""
    saved = json.loads((FIXTURES / folder / "config.json").read_text())
    config = CoveConfig.from_pretrained(FIXTURES / folder)
    layer = 2 * saved["hidden_size"]
    both = saved["cove_output"] == "both"
    old_output_size = (layer * (2 if both else 1) + saved["word_vector_dim"] * saved["include_word_vectors"]
                       + saved["char_ngram_dim"])
    assert config.output_size == config.feature_layout("encoder").size == old_output_size
    assert config.feature_layout("encoder").has("first_layer") == both
    assert config.feature_layout("encoder").has("word_vectors") == saved["include_word_vectors"]
    assert (saved["bcn_input"], saved["dcn_input"]) == ("vectors+cove", "vectors+cove")
    old_head_width = saved["word_vector_dim"] + layer * (2 if both else 1) + saved["char_ngram_dim"]
    assert bcn_input_size(config) == dcn_input_size(config) == old_head_width
