"""BCN head (CoveForSequenceClassification, docs/paper.md §3, eqs. 6–16): biattention and pooling against hand-computed
examples, the whole forward against a plain-torch one-example reference, padding consistency, pair splitting,
single-sentence duplication, precomputed CoVe features, loss and labels, save/load, Auto classes, pipeline, bad
input."""

import math

import pytest
import torch
from conftest import assert_reproduces, assert_same_weights
from torch import nn

import modeling_cove  # noqa: F401  (registers the Auto classes)
from modeling_cove import CoveConfig, CoveForSequenceClassification, CoveModel
from modeling_cove.modeling_cove_bcn import (
    BIATTENTION_MAPS,
    CoveBCNPooling,
    CoveMaxout,
    bcn_input_size,
    biattention,
    split_pair,
)

pytestmark = pytest.mark.usefixtures("single_thread")


MODES = ("vectors+cove", "vectors", "cove", "scalar_mix")
LABELS = ["neg", "neutral", "pos"]


def tiny_config(**overrides):
    values = dict(
        vocab_size=30, word_vector_dim=6, hidden_size=6, bcn_feedforward_dim=5, bcn_hidden_size=4,
        bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, bcn_dropout=0.2, num_labels=3,
        id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)},
    )
    values.update(overrides)
    return CoveConfig(**values)


def tiny_model(seed=0, **overrides):
    """A tiny BCN with all weights drawn wide (U(-0.5, 0.5)) and non-trivial batch-norm statistics, in eval mode,
    so that value comparisons are not passed by near-zero activations."""
    torch.manual_seed(seed)
    model = CoveForSequenceClassification(tiny_config(**overrides))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embeddings" not in name:
                param.uniform_(-0.5, 0.5)
        model.cove.embeddings.zero_special_rows()
        for module in model.modules():
            if isinstance(module, nn.BatchNorm1d):
                module.running_mean.uniform_(-0.3, 0.3)
                module.running_var.uniform_(0.5, 2.0)
    return model.eval()


# ---------------------------------------------------------------------------------------------------------------
# hand-computed pieces
# ---------------------------------------------------------------------------------------------------------------


def test_biattention_matches_hand_computation():
    # one example: X has 2 tokens (+1 padding), Y has 3 tokens; d = 2
    x = torch.tensor([[[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]]])
    y = torch.tensor([[[1.0, 1.0], [2.0, 0.0], [0.0, -1.0]]])
    x_mask = torch.tensor([[True, True, False]])
    y_mask = torch.tensor([[True, True, True]])
    context_x, context_y = biattention(x, x_mask, y, y_mask)

    X = [[1.0, 0.0], [0.0, 2.0]]
    Y = [[1.0, 1.0], [2.0, 0.0], [0.0, -1.0]]
    A = [[sum(a * b for a, b in zip(xi, yj)) for yj in Y] for xi in X]  # A = X Yᵀ: [[1, 2, 0], [2, 0, -2]]
    assert A == [[1.0, 2.0, 0.0], [2.0, 0.0, -2.0]]
    # C_x[j] = sum_i softmax_i(A[i][j]) X[i]   (column-wise softmax over the 2 real x tokens)
    for j in range(3):
        weights = [math.exp(A[i][j]) for i in range(2)]
        total = sum(weights)
        expected = [sum(weights[i] / total * X[i][k] for i in range(2)) for k in range(2)]
        assert torch.allclose(context_x[0, j], torch.tensor(expected), rtol=0, atol=5e-7)
    # C_y[i] = sum_j softmax_j(A[i][j]) Y[j]
    for i in range(2):
        weights = [math.exp(A[i][j]) for j in range(3)]
        total = sum(weights)
        expected = [sum(weights[j] / total * Y[j][k] for j in range(3)) for k in range(2)]
        assert torch.allclose(context_y[0, i], torch.tensor(expected), rtol=0, atol=1e-6)
    assert torch.equal(context_y[0, 2], torch.zeros(2))  # padded x position: zero context
    # e.g. C_y[0] by hand: weights e^1, e^2, e^0 over Y rows
    e = math.e
    expected0 = [(e * 1 + e**2 * 2 + 1 * 0) / (e + e**2 + 1), (e * 1 + e**2 * 0 + 1 * -1) / (e + e**2 + 1)]
    assert torch.equal(context_y[0, 0], torch.tensor(expected0))


def test_biattention_ignores_padding_values():
    torch.manual_seed(0)
    x, y = torch.randn(1, 4, 3), torch.randn(1, 5, 3)
    x_mask = torch.tensor([[True, True, True, False]])
    y_mask = torch.tensor([[True, True, False, False, False]])
    cx, cy = biattention(x, x_mask, y, y_mask)
    x2, y2 = x.clone(), y.clone()
    x2[0, 3] = 100.0  # garbage at padded positions
    y2[0, 2:] = -50.0
    cx2, cy2 = biattention(x2, x_mask, y2, y_mask)
    assert torch.equal(cx[0, :2], cx2[0, :2])
    assert torch.equal(cy[0, :3], cy2[0, :3])


def test_pooling_matches_hand_computation():
    pool = CoveBCNPooling(2, ["max", "mean", "min", "self"])
    with torch.no_grad():
        pool.self_attention.weight.copy_(torch.tensor([[1.0, -1.0]]))  # v
        pool.self_attention.bias.fill_(0.5)  # d (cancels in the softmax)
    states = torch.tensor([[[1.0, -2.0], [3.0, 0.0], [0.0, 0.0]]])  # 2 tokens + padding
    mask = torch.tensor([[True, True, False]])
    out = pool(states, mask)[0]
    # scores v·h + d: 1 + 2 + .5 = 3.5 and 3 - 0 + .5 = 3.5 -> beta = (1/2, 1/2)
    expected = [3.0, 0.0] + [2.0, -1.0] + [1.0, -2.0] + [2.0, -1.0]
    assert torch.equal(out, torch.tensor(expected))
    # unequal attention: v = (1, 0): scores 1.5, 3.5 -> beta = (1, e^2) / (1 + e^2)
    with torch.no_grad():
        pool.self_attention.weight.copy_(torch.tensor([[1.0, 0.0]]))
    b0, b1 = 1 / (1 + math.e**2), math.e**2 / (1 + math.e**2)
    self_pooled = pool(states, mask)[0, 6:]
    assert torch.allclose(self_pooled, torch.tensor([b0 * 1 + b1 * 3, b0 * -2 + b1 * 0]), rtol=0, atol=1e-7)
    # negative values at padding must not win the max; positive values must not win the min
    states_bad = states.clone()
    states_bad[0, 2] = torch.tensor([10.0, -10.0])
    assert torch.equal(pool(states_bad, mask), pool(states, mask))


def test_maxout_layer_with_batch_norm_by_hand():
    layer = CoveMaxout(3, 2, pool=2, dropout=0.0, batch_norm=True).eval()
    with torch.no_grad():
        layer.linear.weight.copy_(torch.tensor([[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]]))
        layer.linear.bias.zero_()
        layer.norm.running_mean.copy_(torch.tensor([0.0, 1.0, 0.0, 0.0]))
        layer.norm.running_var.copy_(torch.tensor([1.0, 4.0, 1.0, 1.0]) - layer.norm.eps)
        layer.norm.weight.copy_(torch.tensor([1.0, 1.0, 2.0, 1.0]))
        layer.norm.bias.copy_(torch.tensor([0.0, 0.0, 0.0, -10.0]))
    out = layer(torch.tensor([[2.0, 5.0, 1.0]]))
    # channels: 2, (5-1)/2 = 2, 2*1 = 2, 8 - 10 = -2 -> units max(2, 2) = 2, max(2, -2) = 2
    assert torch.equal(out, torch.tensor([[2.0, 2.0]]))
    out = layer(torch.tensor([[3.0, 1.0, 4.0]]))  # 3, 0, 8, -2 -> 3, 8
    assert torch.equal(out, torch.tensor([[3.0, 8.0]]))
    # a training batch of one example uses the running statistics instead of failing
    layer.train()
    assert torch.equal(layer(torch.tensor([[3.0, 1.0, 4.0]])), torch.tensor([[3.0, 8.0]]))


def test_split_pair_layouts():
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    types = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]])
    pair = split_pair(mask, types)
    assert pair.lx.tolist() == [2, 1, 2] and pair.ly.tolist() == [3, 2, 0]
    assert pair.first.int().tolist() == [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]
    assert pair.second.int().tolist() == [[0, 0, 1, 1, 1], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]
    pair = split_pair(mask, None)
    assert pair.lx.tolist() == [5, 3, 2] and pair.ly.tolist() == [0, 0, 0]
    assert torch.equal(pair.first, mask.bool()) and not pair.second.any()
    padding_type_one = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [0, 0, 1, 1, 1]])
    assert split_pair(mask, padding_type_one).ly.tolist() == [3, 2, 0]  # types at padding are ignored
    with pytest.raises(ValueError, match="contiguous run"):
        split_pair(mask, torch.tensor([[0, 1, 0, 1, 1], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="empty first text"):
        split_pair(mask, torch.tensor([[1, 1, 1, 1, 1], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="0 .first text. or 1"):
        split_pair(mask, torch.tensor([[0, 0, 2, 2, 2], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]))
    with pytest.raises(ValueError, match="no tokens"):
        split_pair(torch.tensor([[1, 1], [0, 0]]), None)
    with pytest.raises(ValueError, match="right-padded"):
        split_pair(torch.tensor([[0, 1, 1]]), None)


# ---------------------------------------------------------------------------------------------------------------
# the whole BCN against a plain-torch reference, one example at a time
# ---------------------------------------------------------------------------------------------------------------


def reference_logits(model, x_ids, y_ids=None):
    """BCN logits of ONE example written out with plain tensor ops, no padding, no batching: x_ids (Tx,), y_ids
    (Ty,) or None for a single sentence (then y = x)."""
    return reference_bcn(model, x_ids, y_ids)["logits"]


@torch.no_grad()
def reference_bcn(model, x_ids, y_ids=None):
    """`reference_logits` with its intermediate values: dict of logits, X, Y, A_x, A_y, X|y ("X_y"), Y|x ("Y_x")."""
    cfg = model.config

    def word_inputs(ids):  # eq. 6 (or the variant): w~ (T, D)
        hidden = model.cove(ids.unsqueeze(0), output_hidden_states=True).hidden_states  # each text on its own
        g = model.cove.embeddings.weight[ids]
        layers = [h[0] for h in hidden[1:]]
        assert torch.equal(hidden[0][0], g)
        if cfg.bcn_input == "vectors":
            return g
        if cfg.bcn_input == "cove":
            return layers[-1]
        if cfg.bcn_input == "vectors+cove":
            return torch.cat([g, layers[-1]], dim=-1)
        w = torch.softmax(model.scalar_mix.scalar_weights, 0)
        gamma = model.scalar_mix.gamma
        return gamma * (w[0] * torch.cat([g, g], -1) + sum(w[k + 1] * layers[k] for k in range(len(layers))))

    def lstm(module, seq):  # (T, C) -> (T, 2H)
        return module(seq.unsqueeze(0))[0][0]

    def ff(w):  # eqs. 7–8: ReLU(W w + b)
        return torch.relu(w @ model.feedforward.weight.T + model.feedforward.bias)

    X = lstm(model.encoder, ff(word_inputs(x_ids)))
    Y = X if y_ids is None else lstm(model.encoder, ff(word_inputs(y_ids)))
    A = X @ Y.T  # eq. 9
    A_x, A_y = torch.softmax(A, dim=0), torch.softmax(A.T, dim=0)
    C_x, C_y = A_x.T @ X, A_y.T @ Y  # eq. 10
    X_y = lstm(model.integrator_x, torch.cat([X, X - C_y, X * C_y], -1))  # eq. 11
    Y_x = lstm(model.integrator_y, torch.cat([Y, Y - C_x, Y * C_x], -1))  # eq. 12

    def pool(H, attention):  # eqs. 13–16
        beta = torch.softmax(H @ attention.weight[0] + attention.bias[0], dim=0)
        return torch.cat([H.max(0).values, H.mean(0), H.min(0).values, H.T @ beta])

    z = torch.cat([pool(X_y, model.pool_x.self_attention), pool(Y_x, model.pool_y.self_attention)])
    for layer in model.classifier:  # batch-normalised maxout (eval: running statistics)
        h = z @ layer.linear.weight.T + layer.linear.bias
        if layer.norm is not None:
            n = layer.norm
            h = (h - n.running_mean) / torch.sqrt(n.running_var + n.eps) * n.weight + n.bias
        z = h.view(layer.out_dim, layer.pool).max(-1).values
    return dict(logits=z, X=X, Y=Y, A_x=A_x, A_y=A_y, X_y=X_y, Y_x=Y_x)


def batch(rows, pairs=None, pad_to=None):
    """Right-padded (input_ids, attention_mask, token_type_ids) for single texts, or pairs (first, second)."""
    seqs, types = [], []
    for i, row in enumerate(rows):
        second = pairs[i] if pairs is not None else []
        seqs.append(list(row) + list(second))
        types.append([0] * len(row) + [1] * len(second))
    width = pad_to or max(len(s) for s in seqs)
    ids = torch.tensor([s + [0] * (width - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
    tt = torch.tensor([t + [0] * (width - len(t)) for t in types])
    return ids, mask, tt


SENTENCES = [[4, 5, 6, 7, 8, 9], [10, 11, 12], [13, 1, 14, 15], [16]]
SECONDS = [[17, 18], [19, 20, 21, 22, 23], [24], [25, 26, 27]]


@pytest.mark.parametrize("mode", MODES)
def test_forward_matches_reference_single_sentences(mode):
    model = tiny_model(bcn_input=mode)
    ids, mask, tt = batch(SENTENCES, pad_to=8)
    logits = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    for i, row in enumerate(SENTENCES):
        expected = reference_logits(model, torch.tensor(row))
        assert torch.allclose(logits[i], expected, rtol=0, atol=4e-7), (mode, i, logits[i], expected)
    assert (logits - logits[0]).abs().max() > 1e-3  # rows really differ: a value check, not a coincidence


@pytest.mark.parametrize("mode", MODES)
def test_forward_matches_reference_pairs(mode):
    model = tiny_model(bcn_input=mode, seed=1)
    ids, mask, tt = batch(SENTENCES, SECONDS, pad_to=11)
    logits = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    for i, (x, y) in enumerate(zip(SENTENCES, SECONDS)):
        expected = reference_logits(model, torch.tensor(x), torch.tensor(y))
        assert torch.allclose(logits[i], expected, rtol=0, atol=5e-7), (mode, i)


def test_single_sentence_is_duplicated():
    """x = y: a single text gives the same logits as the explicit pair (text, text)."""
    model = tiny_model()
    ids, mask, tt = batch(SENTENCES)
    single = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    pair = model(*batch(SENTENCES, SENTENCES)).logits
    assert torch.equal(single, pair)
    no_types = model(input_ids=ids, attention_mask=mask).logits  # token_type_ids optional for single texts
    assert torch.equal(single, no_types)
    # a pair really differs from its first text alone
    other = model(*batch(SENTENCES, SECONDS)).logits
    assert (other - single).abs().max() > 1e-3


def test_pair_order_matters_and_mixed_batch():
    model = tiny_model(seed=2)
    ab = model(*batch(SENTENCES[:2], SECONDS[:2])).logits
    ba = model(*batch(SECONDS[:2], SENTENCES[:2])).logits
    assert (ab - ba).abs().max() > 1e-3
    # a batch mixing pairs and single texts: each row as if alone
    ids, mask, tt = batch(SENTENCES, [SECONDS[0], [], SECONDS[2], []])
    mixed = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
    assert torch.allclose(mixed[0], model(*batch([SENTENCES[0]], [SECONDS[0]])).logits[0], rtol=0, atol=1e-7)
    assert torch.allclose(mixed[1], model(*batch([SENTENCES[1]])).logits[0], rtol=0, atol=2e-7)


@pytest.mark.parametrize("mode", MODES)
def test_padding_never_changes_a_result(mode):
    model = tiny_model(bcn_input=mode, seed=3)
    for pairs in (None, SECONDS):
        ids, mask, tt = batch(SENTENCES, pairs, pad_to=14)
        together = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
        for i in range(len(SENTENCES)):
            alone_inputs = batch([SENTENCES[i]], None if pairs is None else [pairs[i]])
            alone = model(*alone_inputs).logits[0]
            assert (together[i] - alone).abs().max() <= 1e-5, (mode, pairs is not None, i)
        # garbage token ids at padded positions change nothing
        garbage = ids.masked_fill(mask == 0, 7)
        again = model(input_ids=garbage, attention_mask=mask, token_type_ids=tt).logits
        assert (again - together).abs().max() <= 1e-5


@pytest.mark.parametrize("mode", MODES)
def test_precomputed_cove_features_give_identical_logits(mode):
    model = tiny_model(bcn_input=mode, seed=4)
    for pairs in (None, SECONDS):
        ids, mask, tt = batch(SENTENCES, pairs)
        live = model(input_ids=ids, attention_mask=mask, token_type_ids=tt).logits
        states = model.compute_cove_hidden_states(ids, mask, tt)
        assert states[0] is None  # word vectors are looked up in forward
        cached = model(input_ids=ids, attention_mask=mask, token_type_ids=tt, cove_hidden_states=states).logits
        assert torch.equal(live, cached)
        if mode == "vectors":
            assert all(s is None for s in states)  # the MT-LSTM is not needed at all
            continue
        # the cached layer states equal the encoder run on each text alone, at that text's positions
        last = model.config.num_hidden_layers
        for i, row in enumerate(SENTENCES):
            alone = model.cove(torch.tensor([row]), output_hidden_states=True).hidden_states[last][0]
            assert torch.allclose(states[last][i, : len(row)], alone, rtol=0, atol=4e-7)
            if pairs is not None:
                second = model.cove(torch.tensor([pairs[i]]), output_hidden_states=True).hidden_states[last][0]
                assert torch.allclose(states[last][i, len(row) : len(row) + len(pairs[i])], second, rtol=0, atol=5e-7)
    # single texts: the base model's own hidden_states work as cove_hidden_states too
    ids, mask, tt = batch(SENTENCES)
    with torch.no_grad():  # as the frozen encoder runs inside the model (grad mode picks another LSTM kernel)
        hidden = model.cove(ids, mask, output_hidden_states=True).hidden_states
    assert torch.equal(model(ids, mask, tt, cove_hidden_states=hidden).logits, model(ids, mask, tt).logits)


@pytest.mark.parametrize("mode", MODES)
def test_top_layer_reads_take_the_single_call_path_with_the_same_logits(mode, monkeypatch):
    """A BCN reading only the top MT-LSTM layer ("vectors+cove", "cove") asks the encoder for that layer alone, which
    on a GPU runs the MT-LSTM as one cuDNN call. Forced on CPU here: logits (single texts and pairs) equal the
    per-layer path, and the single call runs exactly for those modes; the scalar mix reads layer 1 as well."""
    from modeling_cove import lstm_kernels

    model = tiny_model(bcn_input=mode, seed=5)
    expected = [model(*batch(SENTENCES, pairs)).logits for pairs in (None, SECONDS)]
    monkeypatch.setattr(lstm_kernels, "SINGLE_CALL_DEVICE_TYPES", ("cpu",))
    calls = []
    original = lstm_kernels.LSTM_IMPLEMENTATIONS["single_call"]
    mt_lstm = model.cove.encoder.rnn  # (the head's own biLSTMs take the strategies too: counted apart)
    monkeypatch.setitem(lstm_kernels.LSTM_IMPLEMENTATIONS, "single_call",
                        lambda stack, *a, **k: calls.append(stack.rnn is mt_lstm) or original(stack, *a, **k))
    for pairs, reference in zip((None, SECONDS), expected):
        assert (model(*batch(SENTENCES, pairs)).logits - reference).abs().max() <= 1e-5
    assert sum(calls) == {"vectors+cove": 3, "cove": 3, "scalar_mix": 0, "vectors": 0}[mode]  # pairs: 2 calls


def test_precomputed_features_are_checked():
    model = tiny_model()
    ids, mask, tt = batch(SENTENCES)
    states = model.compute_cove_hidden_states(ids, mask, tt)
    with pytest.raises(ValueError, match="tuple of 3"):
        model(ids, mask, tt, cove_hidden_states=states[1:])
    bad = (None, None, states[2][:, :-1])
    with pytest.raises(ValueError, match=r"cove_hidden_states\[2\]"):
        model(ids, mask, tt, cove_hidden_states=bad)


def test_bcn_input_widths_and_scalar_mix_initial_value():
    assert bcn_input_size(tiny_config(bcn_input="vectors+cove")) == 6 + 12
    assert bcn_input_size(tiny_config(bcn_input="vectors")) == 6
    assert bcn_input_size(tiny_config(bcn_input="cove")) == 12
    assert bcn_input_size(tiny_config(bcn_input="cove", cove_output="both")) == 24
    assert bcn_input_size(tiny_config(bcn_input="scalar_mix")) == 12
    assert bcn_input_size(tiny_config(bcn_input="vectors+cove", char_ngram_dim=4)) == 22
    cfg = CoveConfig(bcn_input="vectors+cove")
    assert bcn_input_size(cfg) == 900  # eq. 6: 300 + 600
    # scalar mix at init (w = 0, gamma = 1) is the plain mean of {[g; g], layer 1, layer 2}
    torch.manual_seed(0)
    model = CoveForSequenceClassification(tiny_config(bcn_input="scalar_mix")).eval()
    ids, mask, _ = batch(SENTENCES)
    hidden = model.cove(ids, mask, output_hidden_states=True).hidden_states
    mixed = model.bcn_inputs(ids, mask, hidden)
    g = hidden[0]
    assert torch.allclose(mixed, (torch.cat([g, g], -1) + hidden[1] + hidden[2]) / 3, rtol=0, atol=5e-7)
    with pytest.raises(ValueError, match="scalar_mix"):
        CoveForSequenceClassification(tiny_config(bcn_input="scalar_mix", word_vector_dim=4))


def test_cove_output_both_and_char_ngrams_run_and_stay_padding_free():
    model = tiny_model(bcn_input="vectors+cove", cove_output="both", char_ngram_dim=4, seed=5)
    ids, mask, tt = batch(SENTENCES, SECONDS)
    together = model(ids, mask, tt).logits
    alone = model(*batch([SENTENCES[1]], [SECONDS[1]])).logits
    assert (together[1] - alone[0]).abs().max() <= 1e-5
    states = model.compute_cove_hidden_states(ids, mask, tt)
    assert states[1] is not None and states[2] is not None


# ---------------------------------------------------------------------------------------------------------------
# loss, labels, training behaviour
# ---------------------------------------------------------------------------------------------------------------


def test_loss_is_mean_cross_entropy_and_labels_are_checked():
    model = tiny_model()
    ids, mask, tt = batch(SENTENCES)
    labels = torch.tensor([0, 2, 1, 2])
    out = model(input_ids=ids, attention_mask=mask, token_type_ids=tt, labels=labels)
    log_probs = torch.log_softmax(out.logits, -1)
    expected = -sum(log_probs[i, labels[i]] for i in range(4)) / 4
    assert torch.equal(out.loss, expected)
    loss, logits = model(ids, mask, tt, labels=labels, return_dict=False)
    assert torch.equal(loss, out.loss) and torch.equal(logits, out.logits)
    with pytest.raises(ValueError, match=r"labels must be class ids in \[0, 3\)"):
        model(ids, mask, tt, labels=torch.tensor([0, 3, 1, 2]))
    with pytest.raises(ValueError, match=r"labels must be class ids"):
        model(ids, mask, tt, labels=torch.tensor([0, -1, 1, 2]))
    with pytest.raises(ValueError, match="labels must have shape"):
        model(ids, mask, tt, labels=torch.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer class ids"):
        model(ids, mask, tt, labels=torch.tensor([0.0, 1.0, 1.0, 2.0]))
    with pytest.raises(TypeError, match="labels must be a torch.Tensor, got list"):
        model(ids, mask, tt, labels=[0, 2, 1, 2])
    assert torch.equal(model(ids, mask, tt, labels=labels[:, None]).loss, out.loss)  # (B, 1): as transformers' heads
    with pytest.raises(TypeError, match="token_type_ids must be a torch.Tensor, got list"):
        model(ids, mask, tt.tolist())
    states = model.compute_cove_hidden_states(input_ids=ids, attention_mask=mask, token_type_ids=tt)
    with pytest.raises(TypeError, match=r"cove_hidden_states\[2\] must be floating-point features in the model's "
                                        r"dtype torch.float32 .*got dtype torch.float64"):
        model(ids, mask, tt, cove_hidden_states=tuple(None if h is None else h.double() for h in states))


def test_encoder_and_vectors_frozen_and_kept_in_eval_mode():
    model = tiny_model(encoder_dropout=0.5)
    model.train()
    assert not model.cove.encoder.training  # frozen encoder: no dropout, cached features stay valid
    assert model.classifier[0].training and model.encoder.training
    assert all(not p.requires_grad for p in model.cove.parameters())
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and not any(n.startswith("cove.") for n in trainable)
    ids, mask, tt = batch(SENTENCES)
    out = model(ids, mask, tt, labels=torch.tensor([0, 1, 2, 0]))
    out.loss.backward()
    assert all(p.grad is None for p in model.cove.parameters())
    assert model.feedforward.weight.grad is not None and model.feedforward.weight.grad.abs().sum() > 0
    # a training batch of a single example works (batch norm falls back to running statistics)
    model(*batch([SENTENCES[0]]), labels=torch.tensor([1])).loss.backward()


def test_trainable_random_embeddings_get_gradients():
    model = tiny_model(bcn_input="vectors", freeze_embeddings=False)
    model.train()
    assert model.cove.embeddings.weight.requires_grad
    model(*batch(SENTENCES), labels=torch.tensor([0, 1, 2, 0])).loss.backward()
    grad = model.cove.embeddings.weight.grad
    assert grad is not None and grad[4].abs().sum() > 0 and grad[0].abs().sum() == 0  # PAD row untouched


# ---------------------------------------------------------------------------------------------------------------
# bad input
# ---------------------------------------------------------------------------------------------------------------


def test_bad_input_gives_clear_errors():
    model = tiny_model()
    with pytest.raises(ValueError, match="no tokens"):
        model(*batch([[4, 5], []]))
    with pytest.raises(ValueError, match="empty"):
        model(input_ids=torch.zeros(1, 0, dtype=torch.long))
    with pytest.raises(ValueError, match="empty first text"):
        model(*batch([[]], [[4, 5]]))
    with pytest.raises(ValueError, match="outside"):
        model(input_ids=torch.tensor([[4, 99]]))
    with pytest.raises(ValueError, match="needs exactly one of input_ids and inputs_embeds"):
        model(attention_mask=torch.ones(1, 2, dtype=torch.long))
    with pytest.raises(ValueError, match="right-padded"):
        model(input_ids=torch.tensor([[0, 4, 5]]), attention_mask=torch.tensor([[0, 1, 1]]))
    # num_labels=1 is a regression head; a single-label classifier still needs two classes
    with pytest.raises(ValueError, match="num_labels"):
        CoveForSequenceClassification(
            tiny_config(num_labels=1, id2label={0: "x"}, label2id={"x": 0}, problem_type="single_label_classification")
        )


def test_all_oov_text_is_classified_from_zero_vectors():
    """Documented result: unknown words get the zero vector (UNK row), so every all-OOV text of the same length
    gets the same, finite prediction."""
    model = tiny_model()
    unk = model.config.unk_token_id
    logits = model(input_ids=torch.tensor([[unk, unk, unk]])).logits
    assert torch.isfinite(logits).all()
    assert torch.equal(model.cove.embeddings.weight[unk], torch.zeros(6))
    probs = torch.softmax(logits, -1)
    assert torch.equal(probs.sum(), torch.tensor(1.0))


def test_long_input_up_to_bcn_max_length_is_read_in_full():
    """Documented result: LSTMs have no position limit; a text longer than the tokenizer's model_max_length but within
    config.bcn_max_length (the biattention's memory bound) is read in full (the caller truncates if wanted)."""
    model = tiny_model()
    torch.manual_seed(0)
    long_ids = torch.randint(4, 30, (1, 700))
    with torch.no_grad():
        logits = model(input_ids=long_ids).logits  # single-threaded (fixture): 700 sequential LSTM steps
        expected = reference_logits(model, long_ids[0])  # every token read: the same as the BCN written out
    torch.testing.assert_close(logits[0], expected, rtol=0, atol=4e-7)  # measured 3e-8


# ---------------------------------------------------------------------------------------------------------------
# save / load, Auto classes
# ---------------------------------------------------------------------------------------------------------------


def test_save_load_keeps_weights_and_reproduces_logits(tmp_path):
    from transformers import AutoConfig, AutoModelForSequenceClassification

    model = tiny_model(bcn_input="scalar_mix", seed=6)
    with torch.no_grad():
        model.scalar_mix.scalar_weights.copy_(torch.tensor([0.3, -0.2, 0.5]))
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").exists()
    assert not list(tmp_path.glob("*.bin"))
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is CoveForSequenceClassification
    assert loaded.config.id2label == {0: "neg", 1: "neutral", 2: "pos"}
    assert loaded.config.label2id == {"neg": 0, "neutral": 1, "pos": 2}
    assert_same_weights(model, loaded)
    for pairs in (None, SECONDS):
        inputs = batch(SENTENCES, pairs)
        assert_reproduces(loaded(*inputs).logits, model(*inputs).logits, f"pairs={pairs is not None}")
    assert AutoConfig.from_pretrained(tmp_path).bcn_input == "scalar_mix"
    assert all(not p.requires_grad for p in loaded.cove.parameters())


def test_head_from_encoder_checkpoint_keeps_encoder_and_initialises_bcn(tmp_path):
    torch.manual_seed(0)
    encoder = CoveModel(tiny_config())
    encoder.save_pretrained(tmp_path)
    model = CoveForSequenceClassification.from_pretrained(
        tmp_path, num_labels=2, id2label={0: "a", 1: "b"}, label2id={"a": 0, "b": 1}, bcn_input="scalar_mix"
    )
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(model.cove.state_dict()[name], tensor), name
    assert torch.equal(model.scalar_mix.scalar_weights, torch.zeros(3))
    assert torch.equal(model.scalar_mix.gamma, torch.ones(1))
    norm = model.classifier[0].norm
    assert torch.equal(norm.running_mean, torch.zeros_like(norm.running_mean))
    assert torch.equal(norm.running_var, torch.ones_like(norm.running_var))
    assert torch.equal(norm.weight, torch.ones_like(norm.weight))
    for name, param in model.named_parameters():
        assert torch.isfinite(param).all(), name
    # BCN weights: fan-in scaled U(-1/sqrt(fan_in), 1/sqrt(fan_in)); the encoder keeps its checkpoint weights
    bound = 1 / math.sqrt(model.feedforward.in_features)
    assert bound / 2 < model.feedforward.weight.abs().max() <= bound
    big = model.classifier[0].linear
    assert big.weight.abs().max() <= 1 / math.sqrt(big.in_features)
    lstm_bound = 1 / math.sqrt(model.integrator_x.hidden_size)
    assert lstm_bound / 2 < model.integrator_x.weight_ih_l0.abs().max() <= lstm_bound
    assert model.config.num_labels == 2
    ids, mask, tt = batch(SENTENCES)
    assert model.eval()(ids, mask, tt).logits.shape == (4, 2)


def test_auto_class_registration():
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_config(tiny_config())
    assert isinstance(model, CoveForSequenceClassification)


# ---------------------------------------------------------------------------------------------------------------
# pipeline("text-classification") on a checkpoint folder with the tokenizer
# ---------------------------------------------------------------------------------------------------------------

PIPELINE_WORDS = ["the", "cat", "sat", "on", "mat", ".", "a", "man", "plays", "someone", "dog", "ran", "far", "away"]


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory):
    from modeling_cove.tokenization_cove import build_cove_tokenizer

    tokenizer = build_cove_tokenizer(PIPELINE_WORDS, model_max_length=16)
    model = tiny_model(vocab_size=len(tokenizer), seed=7)
    path = tmp_path_factory.mktemp("bcn-classifier")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def classifier(classifier_dir):
    from transformers import pipeline

    return pipeline("text-classification", model=str(classifier_dir))


def expected_scores(pipe, text, text_pair=None):
    encoded = pipe.tokenizer(text, text_pair, return_tensors="pt") if text_pair else pipe.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        return torch.softmax(pipe.model(**encoded).logits[0], -1)


def test_pipeline_single_list_pair_and_top_k(classifier):
    assert isinstance(classifier.model, CoveForSequenceClassification)
    text = "The cat sat on the mat."
    probs = expected_scores(classifier, text)
    best = int(probs.argmax())
    out = classifier(text)
    assert out == [{"label": LABELS[best], "score": pytest.approx(float(probs[best]), abs=0, rel=0)}]

    texts = [text, "A dog ran far away."]
    outs = classifier(texts)
    assert len(outs) == 2
    for t, o in zip(texts, outs):
        p = expected_scores(classifier, t)
        assert o["label"] == LABELS[int(p.argmax())] and o["score"] == pytest.approx(float(p.max()), abs=0, rel=0)

    pair = {"text": "A man plays.", "text_pair": "Someone plays."}
    p = expected_scores(classifier, pair["text"], pair["text_pair"])
    o = classifier(pair)
    assert o["label"] == LABELS[int(p.argmax())] and o["score"] == pytest.approx(float(p.max()), abs=0, rel=0)
    # the pair is really read as a pair: different from the premise alone
    assert (p - expected_scores(classifier, pair["text"])).abs().max() > 1e-4

    every = classifier(text, top_k=None)
    assert sorted(d["label"] for d in every) == sorted(LABELS)
    assert sum(d["score"] for d in every) == pytest.approx(1.0, abs=1e-7, rel=0)
    assert [d["score"] for d in every] == sorted((d["score"] for d in every), reverse=True)
    for d in every:
        assert d["score"] == pytest.approx(float(probs[LABELS.index(d["label"])]), abs=1e-7, rel=0)
    pairs_all = classifier([pair, {"text": text, "text_pair": "A dog ran."}], top_k=None)
    assert len(pairs_all) == 2 and all(len(x) == 3 for x in pairs_all)


def test_pipeline_bad_input(classifier):
    with pytest.raises(ValueError, match="empty"):
        classifier("")
    with pytest.raises(ValueError, match="empty"):
        classifier("   ")
    with pytest.raises(ValueError, match="empty first text"):
        classifier({"text": "", "text_pair": "A man plays."})
    # documented: an empty SECOND text leaves no type-1 tokens, so the premise is classified alone (x = y)
    alone = classifier("A man plays.", top_k=None)
    empty_second = classifier({"text": "A man plays.", "text_pair": ""}, top_k=None)
    assert alone == empty_second
    # documented: all-OOV text -> zero vectors -> a valid prediction, the same for any all-OOV text of that length
    oov1, oov2 = classifier("zork blorp", top_k=None), classifier("quux frob", top_k=None)
    assert oov1 == oov2 and sum(d["score"] for d in oov1) == pytest.approx(1.0, abs=4e-7, rel=0)


def test_pipeline_longer_than_model_max_length(classifier):
    """Documented: below config.bcn_max_length the BCN reads texts longer than model_max_length; the tokenizer warns
    and the whole text is read unless the caller passes truncation=True (then the first model_max_length tokens
    are)."""
    tokenizer = classifier.tokenizer
    assert tokenizer.model_max_length == 16
    long_text = " ".join(["the cat sat on the mat ."] * 5)  # 35 tokens
    full = classifier(long_text, top_k=None)
    truncated = classifier(long_text, top_k=None, truncation=True)
    first_16 = " ".join(tokenizer.convert_ids_to_tokens(tokenizer(long_text)["input_ids"][:16]))
    assert truncated == classifier(first_16, top_k=None)
    assert full != truncated


# ---------------------------------------------------------------------------------------------------------------
# transformers conventions: tuples, kwargs, hidden states, attention maps, problem types, limits, bf16 fallback
# ---------------------------------------------------------------------------------------------------------------


def test_return_dict_false_is_exactly_to_tuple():
    model = tiny_model(seed=8)
    for pairs in (None, SECONDS):
        ids, mask, tt = batch(SENTENCES, pairs)
        for labels in (None, torch.tensor([0, 2, 1, 2])):
            for hidden in (False, True):
                for attentions in (False, True):
                    kwargs = dict(labels=labels, output_hidden_states=hidden, output_attentions=attentions)
                    as_dict = model(ids, mask, tt, **kwargs)
                    as_tuple = model(ids, mask, tt, return_dict=False, **kwargs)
                    expected = as_dict.to_tuple()
                    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(expected)
                    assert len(expected) == 1 + (labels is not None) + hidden + attentions
                    flat = torch.utils._pytree.tree_leaves
                    for got, want in zip(flat(as_tuple), flat(expected), strict=True):
                        assert torch.equal(got, want)


def test_unknown_keyword_argument_is_a_type_error_naming_it():
    model = tiny_model()
    ids, mask, tt = batch(SENTENCES)
    with pytest.raises(TypeError, match="not_an_argument"):
        model(input_ids=ids, attention_mask=mask, not_an_argument=1)


@pytest.mark.parametrize("pairs", [None, SECONDS], ids=["single", "pairs"])
def test_output_attentions_are_the_biattention_maps(pairs):
    """attentions = (A_x (B, Tx, Ty), A_y (B, Ty, Tx)) of eqs. 9–10: equal, row by row, to the one-example reference
    computation; every column of a real token sums to 1 over the real tokens; padding is zero."""
    model = tiny_model(seed=9)
    ids, mask, tt = batch(SENTENCES, pairs, pad_to=12)
    out = model(ids, mask, tt, output_attentions=True)
    attention_x, attention_y = out.attentions
    x_lens = [len(row) for row in SENTENCES]
    y_lens = x_lens if pairs is None else [len(row) for row in pairs]
    assert attention_x.shape == (4, max(x_lens), max(y_lens)) and attention_y.shape == (4, max(y_lens), max(x_lens))
    for i, row in enumerate(SENTENCES):
        ref = reference_bcn(model, torch.tensor(row), None if pairs is None else torch.tensor(pairs[i]))
        n, m = x_lens[i], y_lens[i]
        torch.testing.assert_close(attention_x[i, :n, :m], ref["A_x"], rtol=0, atol=2e-7)
        torch.testing.assert_close(attention_y[i, :m, :n], ref["A_y"], rtol=0, atol=2e-7)
        torch.testing.assert_close(attention_x[i, :n, :m].sum(0), torch.ones(m), rtol=0, atol=1e-6)
        torch.testing.assert_close(attention_y[i, :m, :n].sum(0), torch.ones(n), rtol=0, atol=5e-7)
        assert not attention_x[i, n:].any() and not attention_x[i, :, m:].any()
        assert not attention_y[i, m:].any() and not attention_y[i, :, n:].any()
    assert attention_x[0, :6, : y_lens[0]].std() > 1e-3  # not uniform: a real map
    assert torch.equal(out.logits, model(ids, mask, tt).logits)  # asking for the maps changes nothing
    # hand computation, one tiny example: A = X Yᵀ, A_x = column softmax over x
    x, y = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]]), torch.tensor([[[1.0, 1.0], [2.0, 0.0], [0.0, -1.0]]])
    _, _, a_x, a_y = biattention(x, torch.ones(1, 2, dtype=torch.bool), y, torch.ones(1, 3, dtype=torch.bool),
                                 return_attention=True)
    e = math.e  # A = [[1, 2, 0], [2, 0, -2]]
    assert torch.equal(a_x[0, :, 0], torch.tensor([e / (e + e**2), e**2 / (e + e**2)]))
    assert torch.allclose(a_y[0, :, 1], torch.tensor([1, e**-2, e**-4]) / (1 + e**-2 + e**-4), rtol=0, atol=5e-7)


@pytest.mark.parametrize("mode", ["vectors+cove", "vectors"])
def test_output_hidden_states_are_cove_layers_then_bcn_states(mode):
    """hidden_states = (word vectors, MT-LSTM layer 1, layer 2, X / Y, X|y / Y|x), each (B, T, ·) at the input's
    positions, zero at padding: equal to the encoder run on each text alone and to the one-example reference."""
    model = tiny_model(bcn_input=mode, seed=10)
    for pairs in (None, SECONDS):
        ids, mask, tt = batch(SENTENCES, pairs, pad_to=12)
        out = model(ids, mask, tt, output_hidden_states=True)
        hidden = out.hidden_states
        assert len(hidden) == 5
        assert [h.shape for h in hidden] == [(4, 12, 6), (4, 12, 12), (4, 12, 12), (4, 12, 8), (4, 12, 8)]
        assert torch.equal(out.logits, model(ids, mask, tt).logits)
        for i, row in enumerate(SENTENCES):
            second = None if pairs is None else pairs[i]
            ref = reference_bcn(model, torch.tensor(row), None if second is None else torch.tensor(second))
            n = len(row)
            total = n + (0 if second is None else len(second))
            for text, start in ((row, 0),) + (() if second is None else ((second, n),)):
                alone = model.cove(torch.tensor([text]), output_hidden_states=True).hidden_states
                for k in range(3):
                    torch.testing.assert_close(hidden[k][i, start : start + len(text)], alone[k][0], atol=9e-7,
                                               rtol=0)
            torch.testing.assert_close(hidden[3][i, :n], ref["X"], atol=1e-6, rtol=0)
            torch.testing.assert_close(hidden[4][i, :n], ref["X_y"], atol=8e-7, rtol=0)
            if second is not None:
                torch.testing.assert_close(hidden[3][i, n:total], ref["Y"], atol=7e-7, rtol=0)
                torch.testing.assert_close(hidden[4][i, n:total], ref["Y_x"], atol=5e-7, rtol=0)
            assert all(not h[i, total:].any() for h in hidden)
    # with features cached for the BCN's layers only, the hidden states still hold every layer
    ids, mask, tt = batch(SENTENCES, SECONDS)
    cached = model.compute_cove_hidden_states(ids, mask, tt)
    again = model(ids, mask, tt, cove_hidden_states=cached, output_hidden_states=True).hidden_states
    fresh = model(ids, mask, tt, output_hidden_states=True).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(again, fresh))


def test_regression_problem_type_mse_loss_by_hand():
    """num_labels=1 and problem_type None: inferred "regression" as transformers' heads infer it, MSE loss."""
    model = tiny_model(num_labels=1, id2label={0: "score"}, label2id={"score": 0}, seed=11)
    assert model.config.problem_type is None
    ids, mask, tt = batch(SENTENCES)
    labels = torch.tensor([0.5, -1.0, 2.0, 0.25])
    out = model(ids, mask, tt, labels=labels)
    assert out.logits.shape == (4, 1)
    expected = sum((float(out.logits.detach()[i, 0]) - float(labels[i])) ** 2 for i in range(4)) / 4
    assert out.loss.item() == pytest.approx(expected, abs=8e-8, rel=0)
    assert model.config.problem_type == "regression"
    assert torch.equal(model(ids, mask, tt, labels=labels[:, None]).loss, out.loss)  # (B, 1) labels too
    with pytest.raises(ValueError, match=r"labels must have shape \(4, 1\) or \(4,\) for regression"):
        model(ids, mask, tt, labels=torch.zeros(4, 2))
    with pytest.raises(ValueError, match="finite"):
        model(ids, mask, tt, labels=torch.tensor([0.5, float("nan"), 2.0, 0.25]))
    model.train()
    model(ids, mask, tt, labels=labels).loss.backward()
    assert model.feedforward.weight.grad.abs().sum() > 0


def test_multi_label_problem_type_bce_loss_by_hand():
    """Float multi-hot labels with problem_type None: inferred "multi_label_classification", BCEWithLogits (mean
    over batch and labels); an explicit problem_type works the same."""
    ids, mask, tt = batch(SENTENCES)
    labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    for problem_type in (None, "multi_label_classification"):
        model = tiny_model(seed=12, problem_type=problem_type)
        out = model(ids, mask, tt, labels=labels)
        z, y = out.logits.detach().double(), labels.double()
        expected = -(y * torch.log(torch.sigmoid(z)) + (1 - y) * torch.log(1 - torch.sigmoid(z))).mean()
        assert out.loss.item() == pytest.approx(float(expected), abs=2e-7, rel=0)
        assert model.config.problem_type == "multi_label_classification"
    with pytest.raises(ValueError, match=r"labels must have shape \(4, 3\)"):
        model(ids, mask, tt, labels=labels[:, :2])
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        model(ids, mask, tt, labels=labels * 2)
    # integer class ids still infer single-label classification
    single = tiny_model(seed=12)
    single(ids, mask, tt, labels=torch.tensor([0, 2, 1, 2]))
    assert single.config.problem_type == "single_label_classification"
    with pytest.raises(ValueError, match="multi_label_classification"):  # the hint for multi-hot integer labels
        single(ids, mask, tt, labels=labels.long())


def test_texts_longer_than_bcn_max_length_are_refused_up_front(monkeypatch):
    """The biattention is quadratic in the length: above config.bcn_max_length the forward raises before running
    anything, stating the memory and the fix; at the limit (and with None) it runs."""
    model = tiny_model(bcn_max_length=6)
    calls = []
    monkeypatch.setattr(model, "compute_cove_hidden_states", lambda *a, **k: calls.append(1))
    long = [[4, 5, 6, 7, 8, 9, 10]]
    with pytest.raises(ValueError, match=r"7 tokens, more than config.bcn_max_length=6") as error:
        model(*batch(long + [[4, 5]]))
    message = str(error.value)
    assert "truncation=True" in message and "model_max_length" in message
    assert f"2 x 7 x 7 attention maps: about {BIATTENTION_MAPS * 2 * 7 * 7 * 4 / 2**30:.4g} GiB" in message
    one_text = BIATTENTION_MAPS * 7 * 7 * 4 / 2**30
    assert f"one text of 7 tokens, or a pair of two such texts: {one_text:.4g} GiB" in message
    with pytest.raises(ValueError, match="7 tokens"):  # the second text of a pair counts on its own
        model(*batch([[4, 5]], long))
    assert not calls  # refused before the encoder ran
    monkeypatch.undo()
    assert model(*batch([long[0][:6]], [long[0][:6]])).logits.shape == (1, 3)  # each side at the limit: fine
    model.config.bcn_max_length = None
    assert model(*batch(long)).logits.shape == (1, 3)
    assert CoveConfig().bcn_max_length == 4096


def test_pair_model_refuses_inputs_without_a_second_text():
    """config.bcn_pair_input: rows without type-1 tokens (no or an empty text_pair) are an error, not a single
    sentence; pairs give the same logits as on a model that also takes single texts."""
    model = tiny_model(seed=13, bcn_pair_input=True)
    plain = tiny_model(seed=13)
    pairs = batch(SENTENCES, SECONDS)
    assert torch.equal(model(*pairs).logits, plain(*pairs).logits)
    with pytest.raises(ValueError, match=r"bcn_pair_input=True.*row\(s\) \[1, 3\] .*no second text"):
        model(*batch(SENTENCES, [SECONDS[0], [], SECONDS[2], []]))
    ids, mask, _ = batch(SENTENCES)
    with pytest.raises(ValueError, match="no second text"):
        model(input_ids=ids, attention_mask=mask)  # no token_type_ids at all
    with pytest.raises(ValueError, match="bcn_pair_input must be True or False"):
        tiny_config(bcn_pair_input="yes")


def test_bf16_autocast_with_the_lstm_fallback_forced_matches_fp32(monkeypatch):
    """Where the CPU has no bf16 LSTM kernel (forced here on any CPU), the BCN's own biLSTMs run in fp32 with
    autocast off and are cast to bf16: logits within bf16 tolerance of fp32, for single texts and pairs."""
    from modeling_cove import lstm_kernels

    monkeypatch.setattr(lstm_kernels, "_LSTM_KERNEL_SUPPORT", {("cpu", torch.bfloat16): False})
    model = tiny_model(seed=14)
    seen = []
    for lstm in (model.encoder, model.integrator_x, model.integrator_y):
        lstm.register_forward_pre_hook(
            lambda module, args: seen.append((torch.is_autocast_enabled("cpu"), args[0].data.dtype))
        )
    for pairs in (None, SECONDS):
        inputs = batch(SENTENCES, pairs)
        with torch.no_grad():
            reference = model(*inputs).logits
            seen.clear()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logits = model(*inputs).logits
        assert seen and all(state == (False, torch.float32) for state in seen)  # the fallback really ran
        assert (logits.float() - reference).abs().max() <= 0.02 * reference.abs().max()  # bf16: 8 bits, ~0.4%
        assert torch.isfinite(logits).all()


@pytest.mark.parametrize("mode", ["vectors+cove", "scalar_mix"])
def test_inputs_embeds_equal_the_input_ids_path(mode):
    """inputs_embeds = the ids' word-vector rows give the same logits, hidden states and attention maps as the ids,
    for single texts and pairs; gradients reach inputs_embeds; both or neither, char n-grams: clear errors."""
    model = tiny_model(bcn_input=mode, seed=15)
    for pairs in (None, SECONDS):
        ids, mask, tt = batch(SENTENCES, pairs, pad_to=12)
        embeds = model.get_input_embeddings()(ids)
        embeds = embeds.masked_fill(~mask.bool()[..., None], 3.0)  # values at padding are ignored
        kwargs = dict(attention_mask=mask, token_type_ids=tt, output_hidden_states=True, output_attentions=True)
        by_ids = model(input_ids=ids, **kwargs)
        by_embeds = model(inputs_embeds=embeds, **kwargs)
        for got, want in zip(torch.utils._pytree.tree_leaves(by_embeds.to_tuple()),
                             torch.utils._pytree.tree_leaves(by_ids.to_tuple()), strict=True):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        cached = model.compute_cove_hidden_states(inputs_embeds=embeds, attention_mask=mask, token_type_ids=tt)
        cached_logits = model(inputs_embeds=embeds, attention_mask=mask, token_type_ids=tt,
                              cove_hidden_states=cached).logits
        torch.testing.assert_close(cached_logits, by_ids.logits, rtol=0, atol=0)
    # gradients reach the word vectors, through the frozen encoder too
    ids, mask, tt = batch(SENTENCES[:1])
    embeds = model.get_input_embeddings()(ids).detach().requires_grad_(True)
    model(inputs_embeds=embeds, attention_mask=mask).logits.sum().backward()
    assert embeds.grad is not None and embeds.grad.abs().sum() > 0
    assert all(p.grad is None for p in model.cove.parameters())
    cove_only = tiny_model(bcn_input="cove", seed=15)  # the word vectors reach the BCN only through the MT-LSTM
    embeds.grad = None
    cove_only(inputs_embeds=embeds, attention_mask=mask).logits.sum().backward()
    assert embeds.grad is not None and embeds.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="got both"):
        model(input_ids=ids, inputs_embeds=embeds)
    with pytest.raises(ValueError, match="got neither"):
        model(attention_mask=mask)
    with pytest.raises(ValueError, match="word_vector_dim=6"):
        model(inputs_embeds=torch.zeros(1, 3, 5))
    with pytest.raises(ValueError, match="char n-gram"):
        tiny_model(char_ngram_dim=4)(inputs_embeds=embeds.detach())


def test_torch_export_traces_the_bcn():
    """torch.export traces the BCN (checks become runtime assertions, no Python branch on tensor values); the
    exported program equals eager on other batches of the same shape (pairs, single texts, mixed) and refuses an
    empty text at run time."""
    model = tiny_model(seed=16)
    names = ("input_ids", "attention_mask", "token_type_ids")
    example = dict(zip(names, batch(SENTENCES, [SECONDS[0], [], SECONDS[2], []], pad_to=11)))
    exported = torch.export.export(model, (), example).module()
    for pairs in (SECONDS, None, SECONDS[::-1]):
        inputs = dict(zip(names, batch(SENTENCES[::-1], pairs, pad_to=11)))
        with torch.no_grad():
            torch.testing.assert_close(exported(**inputs).logits, model(**inputs).logits, rtol=0, atol=2e-7)
    empty = dict(zip(names, batch([[4, 5], []] + SENTENCES[:2], pad_to=11)))
    with pytest.raises(RuntimeError, match="produced no tokens"):
        exported(**empty)


def count_calls(monkeypatch, calls, owner, name, key):
    """Replace `owner.name` by a wrapper that counts its calls under `calls[key]`."""
    original = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[key] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


@pytest.mark.parametrize("bcn_input", ["vectors+cove", "vectors"])
def test_forward_checks_each_input_once(monkeypatch, bcn_input):
    """One forward checks each input once: the ids against the vocabulary, the mask's right padding, the pair layout
    (the BCN's forward, its compute_cove_hidden_states and the encoder's forward on each text each checked them)."""
    from modeling_cove import modeling_cove as cove_module
    from modeling_cove import modeling_cove_bcn as bcn_module

    model = tiny_model(bcn_input=bcn_input)
    calls = {"ids": 0, "right padding": 0, "pair layout": 0}
    count_calls(monkeypatch, calls, model.cove, "check_token_ids", "ids")
    count_calls(monkeypatch, calls, bcn_module, "split_pair", "pair layout")
    for module in (cove_module, bcn_module):  # the encoder's and the head's name for the one check
        count_calls(monkeypatch, calls, module, "lengths_from_mask", "right padding")
    for pairs in (None, SECONDS):
        calls.update(dict.fromkeys(calls, 0))
        model(*batch(SENTENCES, pairs))
        assert calls == {"ids": 1, "right padding": 1, "pair layout": 1}, pairs
    calls.update(dict.fromkeys(calls, 0))
    model.compute_cove_hidden_states(*batch(SENTENCES, SECONDS))
    assert calls == {"ids": 1, "right padding": 1, "pair layout": 1}
