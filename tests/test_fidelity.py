"""The papers' forms (docs/deviations.md): new configs take them, configs saved before keep the code's earlier forms,
and each form against a hand-written reference (decoder step, dropout placement, the last maxout layer's batch
norm)."""

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from modeling_cove import CoveConfig, CoveForQuestionAnswering, CoveForSequenceClassification, CoveModel
from modeling_cove.configuration_cove import PAPER_DEFAULTS_VERSION, PAPER_FORM_FIELDS
from modeling_cove.layers import maxout, run_bilstm
from modeling_cove.modeling_cove_bcn import CoveBCNPooling, split_pair
from modeling_cove.modeling_cove_dcn import DynamicPointingDecoder, HighwayMaxoutNetwork

pytestmark = pytest.mark.usefixtures("single_thread")

FIXTURES = Path(__file__).parent / "fixtures" / "redesign"
FIXTURE_DIRS = sorted(path.parent for path in FIXTURES.glob("*/config.json"))
PAPER = {name: paper for name, (_, paper) in PAPER_FORM_FIELDS.items()}
BEFORE = {name: before for name, (before, _) in PAPER_FORM_FIELDS.items()}


def forms(config) -> dict:
    return {name: getattr(config, name) for name in PAPER_FORM_FIELDS}


# ----------------------------------------------------------------------------------------------------------------
# the config: new configs take the paper's forms, saved ones keep theirs
# ----------------------------------------------------------------------------------------------------------------


def test_new_configs_take_the_paper_forms():
    config = CoveConfig()
    assert config.paper_defaults_version == PAPER_DEFAULTS_VERSION == 1
    assert forms(config) == PAPER and all(PAPER.values()) and not any(BEFORE.values())


@pytest.mark.parametrize("fixture", FIXTURE_DIRS, ids=lambda path: path.name)
def test_configs_saved_before_the_marker_keep_their_forms(fixture):
    assert "paper_defaults_version" not in json.loads((fixture / "config.json").read_text())
    config = CoveConfig.from_pretrained(fixture)
    assert config.paper_defaults_version == 0 and forms(config) == BEFORE


def test_new_and_old_configs_differ_exactly_in_the_marker_and_the_forms():
    new = CoveConfig().to_dict()
    old_dict = {key: value for key, value in new.items() if key not in PAPER_FORM_FIELDS
                and key != "paper_defaults_version"}  # a config.json from before these fields
    old = CoveConfig.from_dict(old_dict).to_dict()
    differing = {key for key in new if new[key] != old[key]}
    assert differing == {"paper_defaults_version", *PAPER_FORM_FIELDS}
    assert old["paper_defaults_version"] == 0 and {key: old[key] for key in PAPER_FORM_FIELDS} == BEFORE


@pytest.mark.parametrize("make", [CoveConfig, lambda: CoveConfig.from_pretrained(FIXTURES / "dcn")],
                         ids=["new", "old"])
def test_save_pretrained_round_trips_both_kinds(make, tmp_path):
    config = make()
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["paper_defaults_version"] == config.paper_defaults_version
    assert {name: saved[name] for name in PAPER_FORM_FIELDS} == forms(config)
    assert CoveConfig.from_pretrained(tmp_path).to_dict() == config.to_dict()
    assert CoveConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()


def test_explicit_fields_win_over_the_marker():
    assert CoveConfig(paper_defaults_version=0, bcn_final_batch_norm=True).bcn_final_batch_norm is True
    assert CoveConfig(dcn_hmn_end_previous_start=False).dcn_hmn_end_previous_start is False
    old = CoveConfig.from_pretrained(FIXTURES / "bcn_single", bcn_pooling_dropout=True)
    assert old.bcn_pooling_dropout is True and old.bcn_final_batch_norm is False
    assert forms(CoveConfig.from_pretrained(FIXTURES / "bcn_single", paper_defaults_version=1)) == PAPER


@pytest.mark.parametrize("values, named", [
    (dict(paper_defaults_version=2), "paper_defaults_version"), (dict(paper_defaults_version="1"),
                                                                 "paper_defaults_version"),
    (dict(bcn_final_batch_norm=1), "bcn_final_batch_norm"), (dict(dcn_feedforward_dropout="yes"),
                                                             "dcn_feedforward_dropout"),
])
def test_bad_values_name_the_field(values, named):
    with pytest.raises(ValueError, match=named):
        CoveConfig(**values)


def test_old_checkpoints_build_the_old_modules():
    bcn = CoveForSequenceClassification.from_pretrained(FIXTURES / "bcn_single")
    assert bcn.classifier[-1].norm is None and bcn.pool_x.dropout.p == 0
    dcn = CoveForQuestionAnswering.from_pretrained(FIXTURES / "dcn")
    assert not dcn.decoder.end_reads_previous_start
    assert dcn.decoder.hmn_start.dropout.p == 0 and dcn.coattention_encoder.input_dropout.p == 0


# ----------------------------------------------------------------------------------------------------------------
# DCN: HMN_end on the previous estimates, dropout before every feed-forward layer
# ----------------------------------------------------------------------------------------------------------------


def dcn_config(**overrides):
    values = dict(vocab_size=40, word_vector_dim=6, hidden_size=4, dcn_hidden_size=6, dcn_pool_size=3,
                  dcn_max_iterations=3, dcn_dropout=0.0)
    values.update(overrides)
    return CoveConfig(**values)


def decoder_reference(decoder, document, length, previous_start):
    """The decoder for one example, every iteration, no early stop: per iteration (start scores, end scores,
    whether the start moved, i.e. whether the two forms of HMN_end read different starts)."""
    u = document[:length]
    start, end = 0, length - 1
    h = c = torch.zeros(1, decoder.cell.hidden_size)
    scores = []
    for _ in range(decoder.max_iterations):
        u_s, u_e = u[start][None], u[end][None]
        h, c = decoder.cell(torch.cat([u_s, u_e], dim=-1), (h, c))
        alpha = decoder.hmn_start(decoder.hmn_start.project_document(u[None]), h, u_s, u_e)[0]
        new_start = int(alpha.argmax())
        u_s_end = u_s if previous_start else u[new_start][None]
        beta = decoder.hmn_end(decoder.hmn_end.project_document(u[None]), h, u_s_end, u_e)[0]
        scores.append((alpha, beta, new_start != start))
        start, end = new_start, int(beta.argmax())
    return scores


@pytest.mark.parametrize("previous_start", [True, False])
def test_hmn_end_reads_the_start_the_config_says(previous_start):
    torch.manual_seed(0)
    decoder = DynamicPointingDecoder(dcn_config(dcn_hmn_end_previous_start=previous_start)).eval()
    with torch.no_grad():
        for param in decoder.parameters():
            param.uniform_(-1, 1)
    document, lengths = torch.randn(3, 7, 12), [7, 5, 2]
    mask = torch.arange(7)[None] < torch.tensor(lengths)[:, None]
    with torch.no_grad():
        start_scores, end_scores, _, _ = decoder(document * mask[..., None], mask, early_stop=False)
        moved = False
        for row, length in enumerate(lengths):
            for i, (alpha, beta, moves) in enumerate(decoder_reference(decoder, document[row], length,
                                                                       previous_start)):
                moved = moved or moves
                torch.testing.assert_close(start_scores[i, row, :length], alpha, rtol=0, atol=1e-5)
                torch.testing.assert_close(end_scores[i, row, :length], beta, rtol=0, atol=2e-5)
    assert moved  # some start moved: the two forms were told apart


def hmn_with_dropout_reference(hmn, p, projection, h, u_s, u_e):
    """The HMN with dropout on h (before W_D), r (before W_1), m1 (before W_2 and W_3) and m2 (before W_3), drawn in
    that order."""
    drop = lambda x: nn.functional.dropout(x, p, training=True)  # noqa: E731
    r = torch.tanh(hmn.state_projection(torch.cat([drop(h), u_s, u_e], dim=-1)))
    r_part = drop(r) @ hmn.maxout1.weight[:, 2 * hmn.hidden_size:].T
    m1 = drop(maxout(projection + r_part[:, None], hmn.pool_size))
    m2 = maxout(hmn.maxout2(m1), hmn.pool_size)
    return maxout(hmn.maxout3(torch.cat([m1, drop(m2)], dim=-1)), hmn.pool_size).squeeze(-1)


def test_hmn_dropout_placement_matches_the_reference():
    torch.manual_seed(0)
    hmn = HighwayMaxoutNetwork(5, 3, dropout=0.4).train()
    document, h, u_s, u_e = torch.randn(2, 6, 10), torch.randn(2, 5), torch.randn(2, 10), torch.randn(2, 10)
    projection = hmn.project_document(document)
    torch.manual_seed(1)
    got = hmn(projection, h, u_s, u_e)
    torch.manual_seed(1)
    want = hmn_with_dropout_reference(hmn, 0.4, projection, h, u_s, u_e)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(hmn.eval()(projection, h, u_s, u_e), hmn_with_dropout_reference(
        hmn, 0.0, projection, h, u_s, u_e), rtol=0, atol=0)


def test_dcn_drops_the_input_of_g_only_in_the_paper_form():
    torch.manual_seed(0)
    paper = CoveForQuestionAnswering(dcn_config(dcn_dropout=0.5)).coattention_encoder.train()
    features, mask = torch.randn(2, 5, paper.feedforward.in_features), torch.ones(2, 5, dtype=torch.bool)
    torch.manual_seed(3)
    got = paper.encode(features, mask)
    torch.manual_seed(3)
    dropped = nn.functional.dropout(features, 0.5, training=True)
    want = nn.functional.dropout(run_bilstm(paper.encoder_lstm, torch.tanh(paper.feedforward(dropped)),
                                            mask.sum(dim=1)), 0.5, training=True)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    before = CoveForQuestionAnswering(dcn_config(dcn_dropout=0.5, dcn_feedforward_dropout=False))
    assert before.coattention_encoder.input_dropout.p == 0 and before.decoder.hmn_end.dropout.p == 0


# ----------------------------------------------------------------------------------------------------------------
# BCN: independent masks for x and y, dropout before the pooling scorer, batch norm in the last maxout layer
# ----------------------------------------------------------------------------------------------------------------


def bcn(**overrides):
    values = dict(vocab_size=30, word_vector_dim=6, hidden_size=6, bcn_feedforward_dim=5, bcn_hidden_size=4,
                  bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, bcn_dropout=0.5, num_labels=3,
                  bcn_input="vectors")
    values.update(overrides)
    torch.manual_seed(0)
    return CoveForSequenceClassification(CoveConfig(**values))


def single_texts():
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    return torch.randn(2, 4, 6) * mask[..., None], split_pair(mask, None)


@pytest.mark.parametrize("independent", [True, False])
def test_x_and_y_get_their_own_dropout_mask_in_the_paper_form(independent):
    model = bcn(bcn_independent_dropout=independent).train()
    inputs, pair = single_texts()
    torch.manual_seed(5)
    x, y = model.encode_texts(inputs, pair)
    torch.manual_seed(5)
    sides = [torch.relu(model.feedforward(model.input_dropout(inputs))) for _ in range(1 + independent)]
    for got, features in zip((x, y), sides * (2 - independent)):
        torch.testing.assert_close(got.states, run_bilstm(model.encoder, features, pair.lx), rtol=0, atol=0)
    assert torch.equal(x.states, y.states) != independent
    x, y = model.eval().encode_texts(inputs, pair)
    assert x is y  # eval mode: one run serves both sides in either form


def test_pooling_scorer_input_is_dropped_in_the_paper_form():
    pooling = CoveBCNPooling(4, ["mean", "self"], dropout=0.5).train()
    states, mask = torch.randn(2, 3, 4), torch.ones(2, 3, dtype=torch.bool)
    torch.manual_seed(2)
    got = pooling(states, mask)
    torch.manual_seed(2)
    beta = torch.softmax(pooling.self_attention(nn.functional.dropout(states, 0.5, training=True)).squeeze(-1), 1)
    want = torch.cat([states.mean(dim=1), (beta[..., None] * states).sum(dim=1)], dim=-1)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert bcn(bcn_pooling_dropout=False).pool_x.dropout.p == 0 and bcn().pool_y.dropout.p == 0.5


def test_the_last_maxout_layer_is_batch_normalised_in_the_paper_form():
    model = bcn(bcn_dropout=0.0)
    last = model.classifier[-1].train()
    assert bcn(bcn_final_batch_norm=False).classifier[-1].norm is None
    assert bcn(bcn_batch_norm=False).classifier[-1].norm is None  # no batch norm anywhere: none here either
    inputs = torch.randn(8, last.linear.in_features)
    hidden = last.linear(inputs)
    normed = (hidden - hidden.mean(dim=0)) / torch.sqrt(hidden.var(dim=0, unbiased=False) + last.norm.eps)
    torch.testing.assert_close(last(inputs), maxout(normed, last.pool), rtol=0, atol=2e-6)


def test_eval_outputs_do_not_depend_on_the_dropout_forms():
    """Dropout forms change training only: in eval mode the paper's and the earlier forms give the same logits."""
    paper = bcn(bcn_final_batch_norm=False).eval()
    before = bcn(paper_defaults_version=0).eval()
    before.load_state_dict(paper.state_dict())
    ids = torch.randint(2, 30, (3, 5))
    torch.testing.assert_close(paper(input_ids=ids).logits, before(input_ids=ids).logits, rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------------------------
# MT-LSTM: dropout on the inputs and outputs of all layers
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("all_layers", [True, False])
def test_mt_lstm_dropout_placement_matches_the_reference(all_layers):
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=20, word_vector_dim=6, hidden_size=3, encoder_dropout=0.5, freeze_encoder=False,
                        encoder_dropout_all_layers=all_layers, lstm_implementation="reference")
    encoder = CoveModel(config).encoder.train()
    layer1 = nn.LSTM(6, 3, batch_first=True, bidirectional=True)
    layer2 = nn.LSTM(6, 3, batch_first=True, bidirectional=True)
    for layer, suffix in ((layer1, "l0"), (layer2, "l1")):  # one nn.LSTM per layer of the MT-LSTM's weights
        layer.load_state_dict({name: getattr(encoder.rnn, name.replace("l0", suffix)) for name in layer.state_dict()})
    vectors, lengths = torch.randn(2, 4, 6), torch.tensor([4, 4])
    torch.manual_seed(7)
    outputs, _, _ = encoder(vectors, lengths)
    torch.manual_seed(7)
    drop = lambda x: nn.functional.dropout(x, 0.5, training=True)  # noqa: E731
    first = layer1(drop(vectors) if all_layers else vectors)[0]
    top = layer2(drop(first))[0]
    torch.testing.assert_close(outputs[0], first, rtol=0, atol=0)
    torch.testing.assert_close(outputs[-1], drop(top) if all_layers else top, rtol=0, atol=0)
