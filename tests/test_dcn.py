"""CoveForQuestionAnswering (DCN, docs/paper.md §4): building blocks against hand computations, masking/padding,
sentinels, early stop, the cumulative loss, the span constraint, the precomputed-features path, bad input."""

import math

import pytest
import torch
from conftest import assert_reproduces, assert_same_weights
from torch import nn

from modeling_cove import CoveConfig, CoveForQuestionAnswering
from modeling_cove.modeling_cove_dcn import (
    CoattentionEncoder,
    HighwayMaxoutNetwork,
    best_spans,
)


pytestmark = pytest.mark.usefixtures("single_thread")


def tiny_config(**overrides):
    values = dict(vocab_size=40, word_vector_dim=6, hidden_size=4, dcn_hidden_size=6, dcn_pool_size=3,
                  dcn_max_iterations=4, dcn_dropout=0.0, dcn_input="vectors+cove")
    values.update(overrides)
    return CoveConfig(**values)


def tiny_model(seed=0, **overrides):
    torch.manual_seed(seed)
    return CoveForQuestionAnswering(tiny_config(**overrides)).eval()


def pair_batch(pairs, vocab_size=40, seed=0):
    """pairs: list of (question length, context length) -> right-padded input_ids, token_type_ids, attention_mask."""
    g = torch.Generator().manual_seed(seed)
    longest = max(q + c for q, c in pairs)
    ids = torch.zeros(len(pairs), longest, dtype=torch.long)
    types = torch.zeros_like(ids)
    mask = torch.zeros_like(ids)
    for i, (q, c) in enumerate(pairs):
        ids[i, : q + c] = torch.randint(4, vocab_size, (q + c,), generator=g)
        types[i, q: q + c] = 1
        mask[i, : q + c] = 1
    return ids, types, mask


# ----------------------------------------------------------------------------------------------------------------
# highway maxout network
# ----------------------------------------------------------------------------------------------------------------


def hmn_reference(hmn: HighwayMaxoutNetwork, u, h, us, ue):
    """The paper's HMN with explicit loops over plain Python floats (W_1 applied to the concatenation [u_t; r])."""
    l, p = hmn.hidden_size, hmn.pool_size
    wd = hmn.state_projection.weight.tolist()
    w1, b1 = hmn.maxout1.weight.tolist(), hmn.maxout1.bias.tolist()
    w2, b2 = hmn.maxout2.weight.tolist(), hmn.maxout2.bias.tolist()
    w3, b3 = hmn.maxout3.weight.tolist(), hmn.maxout3.bias.tolist()
    state = h + us + ue
    r = [math.tanh(sum(wd[j][k] * state[k] for k in range(len(state)))) for j in range(l)]
    scores = []
    for ut in u:
        x = ut + r
        m1 = [max(sum(w1[j * p + q][k] * x[k] for k in range(len(x))) + b1[j * p + q] for q in range(p))
              for j in range(l)]
        m2 = [max(sum(w2[j * p + q][k] * m1[k] for k in range(l)) + b2[j * p + q] for q in range(p))
              for j in range(l)]
        m = m1 + m2
        scores.append(max(sum(w3[q][k] * m[k] for k in range(2 * l)) + b3[q] for q in range(p)))
    return scores


def test_hmn_hand_computed_integers():
    """l = 1, p = 2, W_D = 0 so r = tanh(0) = 0; integer weights give scores worked out by hand."""
    hmn = HighwayMaxoutNetwork(hidden_size=1, pool_size=2)
    with torch.no_grad():
        hmn.state_projection.weight.zero_()
        hmn.maxout1.weight.copy_(torch.tensor([[1.0, 0.0, 5.0], [0.0, 1.0, 5.0]]))  # two pieces over [u1, u2, r]
        hmn.maxout1.bias.copy_(torch.tensor([0.0, 1.0]))
        hmn.maxout2.weight.copy_(torch.tensor([[2.0], [-1.0]]))
        hmn.maxout2.bias.copy_(torch.tensor([0.0, 0.0]))
        hmn.maxout3.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, -1.0]]))  # pieces over [m1, m2]
        hmn.maxout3.bias.copy_(torch.tensor([0.0, 3.0]))
    u = torch.tensor([[[3.0, 1.0], [-2.0, -4.0]]])  # (B=1, m=2, 2l=2)
    h, us, ue = torch.zeros(1, 1), torch.ones(1, 2), torch.ones(1, 2)
    scores = hmn(hmn.project_document(u), h, us, ue)
    # t=1: m1 = max(3, 1+1) = 3; m2 = max(2*3, -3) = 6; out = max(3+6, -6+3) = 9
    # t=2: m1 = max(-2, -4+1) = -2; m2 = max(-4, 2) = 2; out = max(-2+2, -2+3) = 1
    assert scores.tolist() == [[9.0, 1.0]]


def test_hmn_matches_loop_reference():
    torch.manual_seed(1)
    hmn = HighwayMaxoutNetwork(hidden_size=3, pool_size=4)
    u = torch.randn(2, 5, 6)
    h, us, ue = torch.randn(2, 3), torch.randn(2, 6), torch.randn(2, 6)
    scores = hmn(hmn.project_document(u), h, us, ue)
    for b in range(2):
        ref = hmn_reference(hmn, u[b].tolist(), h[b].tolist(), us[b].tolist(), ue[b].tolist())
        assert torch.allclose(scores[b], torch.tensor(ref), rtol=0, atol=1e-6)


# ----------------------------------------------------------------------------------------------------------------
# coattention
# ----------------------------------------------------------------------------------------------------------------


def softmax(values):
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def coattention_reference(D, Q, doc_len, q_len):
    """Loop version of L = D Q^T, A^Q (over the document), A^D (over the question), C^Q, C^D on the first doc_len /
    q_len rows (the rest is padding)."""
    L = [[sum(a * b for a, b in zip(d, q)) for q in Q[:q_len]] for d in D[:doc_len]]
    AQ_cols = [softmax([L[i][j] for i in range(doc_len)]) for j in range(q_len)]  # per question word
    CQ = [[sum(AQ_cols[j][i] * D[i][k] for i in range(doc_len)) for k in range(len(D[0]))] for j in range(q_len)]
    AD_rows = [softmax(L[i]) for i in range(doc_len)]  # per document word
    QCQ = [Q[j] + CQ[j] for j in range(q_len)]
    CD = [[sum(AD_rows[i][j] * QCQ[j][k] for j in range(q_len)) for k in range(len(QCQ[0]))] for i in range(doc_len)]
    return CD, AQ_cols, AD_rows


def test_coattention_hand_computed():
    """m+1 = 2 (sentinel + 1 word), n+1 = 2, l = 1: every number below is worked out by hand."""
    D = torch.tensor([[[0.0], [1.0]]])  # sentinel 0, word 1
    Q = torch.tensor([[[0.0], [2.0]]])
    ones = torch.ones(1, 2, dtype=torch.bool)
    CD, AQ, AD = CoattentionEncoder.coattention(D, ones, Q, ones)
    # L = [[0, 0], [0, 2]]; A^Q over documents: column 0 = [1/2, 1/2], column 1 = softmax([0, 2])
    s = 1 / (1 + math.exp(2))
    assert torch.allclose(AQ[0], torch.tensor([[0.5, s], [0.5, 1 - s]]), rtol=0, atol=5e-7)
    # A^D over questions: row 0 = [1/2, 1/2], row 1 = softmax([0, 2]) = [s, 1 - s]
    assert torch.allclose(AD[0], torch.tensor([[0.5, 0.5], [s, 1 - s]]), rtol=0, atol=5e-7)
    # C^Q = [0.5, 1 - s] (doc summaries per question word); C^D_i = sum_j A^D_ij [q_j; C^Q_j]
    cq = [0.5, 1 - s]
    expected = [[0.5 * 0 + 0.5 * 2, 0.5 * cq[0] + 0.5 * cq[1]], [s * 0 + (1 - s) * 2, s * cq[0] + (1 - s) * cq[1]]]
    assert torch.allclose(CD[0], torch.tensor(expected), rtol=0, atol=1e-6)


def test_coattention_matches_loop_reference_with_padding():
    torch.manual_seed(2)
    D, Q = torch.randn(2, 5, 3), torch.randn(2, 4, 3)
    doc_lens, q_lens = [5, 3], [4, 2]
    dmask = torch.arange(5).unsqueeze(0) < torch.tensor(doc_lens).unsqueeze(1)
    qmask = torch.arange(4).unsqueeze(0) < torch.tensor(q_lens).unsqueeze(1)
    CD, AQ, AD = CoattentionEncoder.coattention(D, dmask, Q, qmask)
    for b in range(2):
        ref_cd, ref_aq, ref_ad = coattention_reference(D[b].tolist(), Q[b].tolist(), doc_lens[b], q_lens[b])
        m, n = doc_lens[b], q_lens[b]
        assert torch.allclose(CD[b, :m], torch.tensor(ref_cd), rtol=0, atol=2e-6)
        assert torch.allclose(AQ[b, :m, :n].T, torch.tensor(ref_aq), rtol=0, atol=5e-7)
        assert torch.allclose(AD[b, :m, :n], torch.tensor(ref_ad), rtol=0, atol=1e-6)
        # masked softmaxes give padding exactly zero weight
        assert float(AQ[b, m:, :n].abs().sum()) == 0.0
        assert float(AD[b, :m, n:].abs().sum()) == 0.0


def test_sentinels_take_part_in_coattention():
    """The sentinel is a key of both softmaxes: with it, a document word can attend to "nothing"."""
    model = tiny_model()
    enc = model.coattention_encoder
    x = torch.randn(1, 3, 6)
    mask = torch.ones(1, 3, dtype=torch.bool)
    with_sentinel, smask = enc.with_sentinel(x, mask, enc.document_sentinel)
    assert with_sentinel.shape == (1, 4, 6) and bool(smask.all())
    assert torch.equal(with_sentinel[0, 0], enc.document_sentinel.detach())
    assert torch.equal(with_sentinel[0, 1:], x[0])
    # the sentinel changes the result: a different sentinel value gives different start scores
    ids, types, am = pair_batch([(3, 7)])
    before = model(input_ids=ids, token_type_ids=types, attention_mask=am).start_logits
    with torch.no_grad():
        enc.question_sentinel.add_(1.0)
    after = model(input_ids=ids, token_type_ids=types, attention_mask=am).start_logits
    assert not torch.allclose(before[types.bool()], after[types.bool()])


# ----------------------------------------------------------------------------------------------------------------
# the whole model: segments, padding, precomputed features
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dcn_input", ["vectors+cove", "vectors", "cove"])
def test_padding_does_not_change_results(dcn_input):
    model = tiny_model(dcn_input=dcn_input)
    pairs = [(3, 9), (5, 4), (2, 6)]
    ids, types, mask = pair_batch(pairs)
    starts, ends = torch.tensor([4, 6, 2]), torch.tensor([6, 7, 5])
    batch = model(input_ids=ids, token_type_ids=types, attention_mask=mask,
                  start_positions=starts, end_positions=ends)
    losses = []
    for i, (q, c) in enumerate(pairs):
        n = q + c
        alone = model(input_ids=ids[i:i + 1, :n], token_type_ids=types[i:i + 1, :n],
                      attention_mask=mask[i:i + 1, :n], start_positions=starts[i:i + 1], end_positions=ends[i:i + 1])
        # measured at most 4.7e-10 (start) and 9.3e-10 (end), natively and on the AVX2 path
        assert torch.allclose(batch.start_logits[i, :n], alone.start_logits[0], rtol=0, atol=4e-9)
        assert torch.allclose(batch.end_logits[i, :n], alone.end_logits[0], rtol=0, atol=9e-9)
        assert torch.equal(batch.iteration_spans[i], alone.iteration_spans[0])
        assert int(batch.num_iterations[i]) == int(alone.num_iterations[0])
        losses.append(alone.loss)
    assert torch.allclose(batch.loss, torch.stack(losses).mean(), rtol=0, atol=4e-6)


def test_logits_cover_full_sequence_and_mask_non_context():
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 5), (2, 3)])
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    neg = torch.finfo(out.start_logits.dtype).min
    assert out.start_logits.shape == ids.shape and out.end_logits.shape == ids.shape
    context = types.bool() & mask.bool()
    assert bool((out.start_logits[~context] == neg).all()) and bool((out.end_logits[~context] == neg).all())
    assert bool((out.start_logits[context] > neg).all())
    # the recorded spans are context positions
    spans = out.iteration_spans
    assert bool(context.gather(1, spans.flatten(1)).all())


def test_question_is_encoded_separately_from_context():
    """The MT-LSTM runs on each segment alone: changing the context leaves the question's features unchanged."""
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 6)])
    features = model.compute_cove_features(ids, mask, types)
    other = ids.clone()
    other[0, 3:] = torch.randint(4, 40, (6,), generator=torch.Generator().manual_seed(5))
    features2 = model.compute_cove_features(other, mask, types)
    assert torch.equal(features[0, :3], features2[0, :3])
    assert not torch.allclose(features[0, 3:], features2[0, 3:])
    # and equal to running CoveModel on the question alone
    alone = model.cove(input_ids=ids[:, :3], output_hidden_states=True).hidden_states[-1]
    assert torch.allclose(features[0, :3], alone[0], rtol=0, atol=1e-8)  # measured 1.9e-9


@pytest.mark.parametrize("training", [False, True])
def test_precomputed_cove_features_equal_live_encoder(training):
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 9), (4, 5)])
    starts, ends = torch.tensor([5, 6]), torch.tensor([7, 6])
    features = model.compute_cove_features(ids, mask, types)
    model.train(training)
    live = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=starts,
                 end_positions=ends)
    cached = model(input_ids=ids, token_type_ids=types, attention_mask=mask, cove_features=features,
                   start_positions=starts, end_positions=ends)
    assert torch.equal(live.start_logits, cached.start_logits)
    assert torch.equal(live.end_logits, cached.end_logits)
    assert torch.equal(live.loss, cached.loss)
    if training:  # gradients reach the DCN, never the frozen encoder
        cached.loss.backward()
        assert model.decoder.hmn_start.maxout1.weight.grad is not None
        assert all(p.grad is None for p in model.cove.parameters())


# ----------------------------------------------------------------------------------------------------------------
# dynamic decoder: early stop, cumulative loss
# ----------------------------------------------------------------------------------------------------------------


class FixedScores(nn.Module):
    """Stands in for an HMN: always the same scores, whatever the state."""

    def __init__(self, scores):
        super().__init__()
        self.scores = torch.tensor(scores)

    def project_document(self, document):
        return document

    def forward(self, projection, state, u_start, u_end, rows=None):
        if rows is None:  # every position: (B, m)
            return self.scores.expand(projection.shape[0], -1).clone()
        # the real positions of whole rows, row-major, each row's context a prefix: a position's column is its index
        # within its row
        columns = torch.arange(len(rows)) - torch.searchsorted(rows, rows)
        return self.scores[columns]


def rigged_model(start_scores, end_scores, max_iterations=4):
    model = tiny_model(dcn_max_iterations=max_iterations)
    model.decoder.hmn_start = FixedScores(start_scores)
    model.decoder.hmn_end = FixedScores(end_scores)
    return model


@pytest.mark.parametrize("early_stop", [True, False])
def test_decoder_scoring_real_positions_equals_every_position(monkeypatch, early_stop):
    """The decoder scores only the real positions (and, stopping early, only the rows still running); the dense form
    (every position, what runs under torch.export) is its oracle: the same scores, spans and `active`, and in
    training the same gradients, on ragged rows where some stop iterations before others."""
    torch.manual_seed(3)
    decoder = tiny_model(dcn_hidden_size=6, dcn_pool_size=4).decoder.train(not early_stop)
    document = torch.randn(5, 9, 12, requires_grad=True)  # U (B, m, 2l)
    mask = torch.arange(9)[None, :] < torch.tensor([9, 3, 6, 1, 8])[:, None]

    def run(dense):
        monkeypatch.setattr(torch.compiler, "is_exporting", lambda: dense)
        decoder.zero_grad()
        document.grad = None
        out = decoder(document, mask, early_stop)
        if early_stop:
            return out, None
        (out[0][:, mask].sum() + 2 * out[1][:, mask].sum()).backward()
        return out, [document.grad.clone()] + [p.grad.clone() for p in decoder.parameters()]

    (start, end, spans, active), grads = run(dense=False)
    (start_d, end_d, spans_d, active_d), grads_d = run(dense=True)
    assert torch.equal(spans, spans_d) and torch.equal(active, active_d)
    # equal here; 1.9e-9 and 5.6e-9 apart with MKL's AVX2 kernels (MKL_ENABLE_INSTRUCTIONS=AVX2, as on an AVX2-only CPU)
    torch.testing.assert_close(start, start_d, rtol=0, atol=1e-8)
    torch.testing.assert_close(end, end_d, rtol=0, atol=5e-8)
    if early_stop:  # rows stopped at different iterations, so the later ones scored only the rows still running
        assert len({int(n) for n in active.sum(0)}) > 1
    else:
        for a, b in zip(grads, grads_d):
            torch.testing.assert_close(a, b, rtol=0, atol=9e-6)


def test_early_stop_when_span_repeats():
    # context of 5 tokens after 2 question tokens; the guess starts at (0, 4) (whole context)
    ids, types, mask = pair_batch([(2, 5)])
    model = rigged_model([0.0, 0.0, 3.0, 0.0, 0.0], [0.0, 0.0, 0.0, 4.0, 0.0])
    out = model.eval()(input_ids=ids, token_type_ids=types, attention_mask=mask)
    # iteration 1: (2, 3) != (0, 4); iteration 2: (2, 3) again -> stop
    assert out.num_iterations.tolist() == [2]
    assert out.iteration_spans[0].tolist() == [[4, 5]] * 4  # input positions (question = 2 tokens)
    # training runs every iteration
    out = model.train()(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert out.num_iterations.tolist() == [4]


def test_early_stop_immediately_when_first_guess_confirmed():
    ids, types, mask = pair_batch([(2, 5)])
    model = rigged_model([3.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 4.0]).eval()
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert out.num_iterations.tolist() == [1]


def test_early_stopped_scores_equal_a_shorter_loop():
    """An example that stopped after k iterations has the scores of a decoder limited to k iterations."""
    model = tiny_model(seed=3)
    ids, types, mask = pair_batch([(3, 9), (2, 7), (4, 4)], seed=3)
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    for i, k in enumerate(out.num_iterations.tolist()):
        short = tiny_model(seed=3, dcn_max_iterations=k)
        short.load_state_dict(model.state_dict())
        ref = short(input_ids=ids[i:i + 1], token_type_ids=types[i:i + 1], attention_mask=mask[i:i + 1])
        n = int(mask[i].sum())
        assert torch.allclose(out.start_logits[i, :n], ref.start_logits[0, :n], rtol=0, atol=5e-9)  # measured 5.8e-10
        assert torch.equal(out.iteration_spans[i, -1], ref.iteration_spans[0, -1])


def test_decoder_without_early_stop_reads_gives_the_outputs_of_the_read_back_loop(monkeypatch):
    """Off EARLY_STOP_READ_DEVICE_TYPES (a GPU) the eval decoder reads nothing back: it runs every iteration with
    the stopped rows frozen and scores every row's real positions. Its outputs are those of the CPU loop, which
    stops when every row has and scores only the rows still running: the same loss, logits, spans and iteration
    counts, on a batch whose rows stop at different iterations, all before the last."""
    from modeling_cove import modeling_cove_dcn

    model = tiny_model(seed=3, dcn_max_iterations=6)
    ids, types, mask = pair_batch([(3, 9), (2, 7), (4, 4), (1, 6)], seed=3)
    labels = dict(start_positions=torch.tensor([4, 3, 5, 2]), end_positions=torch.tensor([6, 8, 7, 5]))
    read_back = model(input_ids=ids, token_type_ids=types, attention_mask=mask, **labels)
    iterations = read_back.num_iterations.tolist()
    assert len(set(iterations)) > 1 and max(iterations) < 6, iterations  # stopped early, at different iterations
    monkeypatch.setattr(modeling_cove_dcn, "EARLY_STOP_READ_DEVICE_TYPES", ())
    every_iteration = model(input_ids=ids, token_type_ids=types, attention_mask=mask, **labels)
    assert every_iteration.num_iterations.tolist() == iterations
    assert torch.equal(every_iteration.iteration_spans, read_back.iteration_spans)
    for name in ("loss", "start_logits", "end_logits"):  # the HMNs ran on other row subsets: float rounding
        torch.testing.assert_close(getattr(every_iteration, name), getattr(read_back, name), rtol=0, atol=1e-6)


def test_cumulative_loss_over_iterations():
    start_scores, end_scores = [0.0, 1.0, 2.0, 0.5], [0.0, 0.0, 1.0, 3.0]
    ids, types, mask = pair_batch([(2, 4)])
    starts, ends = torch.tensor([3]), torch.tensor([5])  # context tokens 1 and 3
    ce_start = -math.log(math.exp(1.0) / sum(math.exp(s) for s in start_scores))
    ce_end = -math.log(math.exp(3.0) / sum(math.exp(s) for s in end_scores))
    for iterations in (1, 4):
        model = rigged_model(start_scores, end_scores, max_iterations=iterations).train()
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=starts,
                    end_positions=ends)
        assert math.isclose(float(out.loss), iterations * (ce_start + ce_end) / 2, rel_tol=1e-5)
    # -100 is ignored; an all-ignored batch gives loss 0
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=torch.tensor([-100]),
                end_positions=torch.tensor([-100]))
    assert float(out.loss) == 0.0


# ----------------------------------------------------------------------------------------------------------------
# span constraint
# ----------------------------------------------------------------------------------------------------------------


def brute_force_spans(start_logits, end_logits, mask, max_len):
    lp_s = torch.log_softmax(start_logits.masked_fill(~mask, -1e30), 0)
    lp_e = torch.log_softmax(end_logits.masked_fill(~mask, -1e30), 0)
    spans = [(s, e, math.exp(lp_s[s] + lp_e[e])) for s in range(len(mask)) for e in range(len(mask))
             if mask[s] and mask[e] and s <= e < s + max_len]
    return sorted(spans, key=lambda x: -x[2])


def test_best_spans_respects_order_and_length():
    start = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.0, 9.0])
    end = torch.tensor([9.0, 0.0, 8.0, 0.0, 0.0, 0.5])
    mask = torch.ones(6, dtype=torch.bool)
    # unconstrained argmaxes (s=5, e=0) violate s <= e; legal: (5, 5) = 9.5 beats (0, 0) = 9 and (0, 2) = 8
    (s, e, p), = best_spans(start, end, max_answer_length=15, top_k=1, mask=mask)
    assert (s, e) == (5, 5)
    start = torch.tensor([5.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    end = torch.tensor([0.0, 0.0, 0.0, 0.0, 6.0, 0.0])
    assert best_spans(start, end, max_answer_length=5, mask=mask)[0][:2] == (0, 4)
    assert best_spans(start, end, max_answer_length=4, mask=mask)[0][:2] != (0, 4)  # length 5 > 4


def test_best_spans_matches_brute_force_topk():
    torch.manual_seed(4)
    start, end = torch.randn(12), torch.randn(12)
    mask = torch.tensor([False, False, False] + [True] * 8 + [False])
    got = best_spans(start, end, max_answer_length=3, top_k=5, mask=mask)
    ref = brute_force_spans(start, end, mask, 3)[:5]
    assert [(s, e) for s, e, _ in got] == [(s, e) for s, e, _ in ref]
    assert all(math.isclose(a[2], b[2], rel_tol=1e-5) for a, b in zip(got, ref))
    for s, e, _ in got:
        assert mask[s] and mask[e] and s <= e < s + 3
    # default mask: the model's "not context" value
    neg = torch.finfo(torch.float32).min
    logits = torch.tensor([neg, 1.0, 2.0, neg])
    assert all(1 <= s <= e <= 2 for s, e, _ in best_spans(logits, logits, top_k=10))
    assert len(best_spans(logits, logits, top_k=10)) == 3  # (1,1), (1,2), (2,2)


# ----------------------------------------------------------------------------------------------------------------
# bad input, configuration, save/load
# ----------------------------------------------------------------------------------------------------------------


def test_bad_inputs_give_clear_errors():
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 5)])
    with pytest.raises(ValueError, match="token_type_ids"):
        model(input_ids=ids, attention_mask=mask)
    with pytest.raises(ValueError, match="no context tokens"):
        model(input_ids=ids, token_type_ids=torch.zeros_like(types), attention_mask=mask)
    with pytest.raises(ValueError, match="no question tokens"):
        model(input_ids=ids, token_type_ids=torch.ones_like(types), attention_mask=mask)
    with pytest.raises(TypeError, match="start_positions must hold integer positions"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=torch.tensor([4.0]),
              end_positions=torch.tensor([5]))
    with pytest.raises(ValueError, match="end_positions has 2 entries for a batch of 1"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=torch.tensor([4]),
              end_positions=torch.tensor([5, 6]))
    with pytest.raises(ValueError, match="both start_positions and end_positions"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=torch.tensor([4]))
    padded_ids, padded_types, padded_mask = pair_batch([(3, 5), (2, 3)])
    with pytest.raises(ValueError, match="right-padded"):
        model(input_ids=padded_ids, token_type_ids=padded_types.flip(1), attention_mask=padded_mask.flip(1))
    with pytest.raises(ValueError, match="cove_features must have shape"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, cove_features=torch.zeros(1, 8, 3))
    features = model.compute_cove_features(ids, mask, types)
    with pytest.raises(TypeError, match=r"cove_features must be floating-point features in the model's dtype "
                                        r"torch.float32 .*got dtype torch.float64"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, cove_features=features.double())
    with pytest.raises(TypeError, match="token_type_ids must be a torch.Tensor, got list"):
        model(input_ids=ids, token_type_ids=types.tolist(), attention_mask=mask)
    with pytest.raises(TypeError, match="start_positions must be a torch.Tensor, got list"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=[4], end_positions=[5])
    with pytest.raises(ValueError, match="outside"):
        model(input_ids=ids + 100, token_type_ids=types, attention_mask=mask)
    with pytest.raises(ValueError, match="dcn_input"):
        CoveForQuestionAnswering(tiny_config(dcn_input="glove"))
    with pytest.raises(ValueError, match="even"):
        CoveForQuestionAnswering(tiny_config(dcn_hidden_size=5))


def test_save_load_keeps_encoder_frozen_and_records_pipeline(tmp_path):
    model = tiny_model()
    model.save_pretrained(tmp_path)
    loaded = CoveForQuestionAnswering.from_pretrained(tmp_path).eval()
    assert not any(p.requires_grad for p in loaded.cove.parameters())
    assert all(p.requires_grad for p in loaded.coattention_encoder.parameters())
    assert loaded.config.custom_pipelines["question-answering"]["impl"] == \
        "pipeline_cove.CoveQuestionAnsweringPipeline"
    assert loaded.config.auto_map["AutoModelForQuestionAnswering"] == "modeling_cove_dcn.CoveForQuestionAnswering"
    ids, types, mask = pair_batch([(3, 5)])
    a = model(input_ids=ids, token_type_ids=types, attention_mask=mask).start_logits
    b = loaded(input_ids=ids, token_type_ids=types, attention_mask=mask).start_logits
    assert_same_weights(model, loaded)
    assert_reproduces(b, a, "start_logits")
    assert (tmp_path / "pipeline_cove.py").exists() and (tmp_path / "squad_preprocessing.py").exists()


# ----------------------------------------------------------------------------------------------------------------
# transformers conventions: tuple output, unknown arguments, out-of-window labels, hidden states and attention maps
# ----------------------------------------------------------------------------------------------------------------


def assert_same_outputs(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, tuple):
            assert_same_outputs(x, y)
        else:
            assert torch.equal(x, y)


@pytest.mark.parametrize("labels", [False, True])
@pytest.mark.parametrize("extras", [False, True])
def test_return_dict_false_is_exactly_to_tuple(labels, extras):
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 5), (2, 6)])
    kwargs = dict(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=extras,
                  output_attentions=extras)
    if labels:
        kwargs.update(start_positions=torch.tensor([4, 0]), end_positions=torch.tensor([5, 0]))
    as_dict = model(**kwargs)
    as_tuple = model(**kwargs, return_dict=False)
    assert isinstance(as_tuple, tuple)
    assert len(as_tuple) == len(as_dict.to_tuple()) == 4 + labels + 2 * extras
    assert_same_outputs(as_tuple, as_dict.to_tuple())


def test_unknown_keyword_argument_is_a_type_error_naming_it():
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 5)])
    with pytest.raises(TypeError, match="not_an_argument"):
        model(input_ids=ids, token_type_ids=types, attention_mask=mask, not_an_argument=1)


def test_positions_outside_the_context_mean_no_answer_in_this_window():
    """Rows whose start or end is not a context token add nothing: the loss is that of the in-window rows alone,
    worked out by hand (scores fixed per position, so every row of the same layout has the same CE)."""
    start_scores, end_scores = [0.0, 1.0, 2.0, 0.5], [0.0, 0.0, 1.0, 3.0]
    ids, types, mask = pair_batch([(2, 4)] * 6)  # T = 6: question 0-1, context 2-5
    starts = torch.tensor([3, 0, 6, 3, -100, 2])  # rows 0 and 5 in the window; 1: (0, 0); 2: >= T; 3: end in
    ends = torch.tensor([5, 0, 6, 1, -100, 4])  # the question; 4: -100
    log_z_start = math.log(sum(math.exp(s) for s in start_scores))
    log_z_end = math.log(sum(math.exp(s) for s in end_scores))
    row0 = (log_z_start - 1.0) + (log_z_end - 3.0)  # context tokens 1 and 3
    row5 = (log_z_start - 0.0) + (log_z_end - 1.0)  # context tokens 0 and 2
    iterations = 4
    model = rigged_model(start_scores, end_scores, max_iterations=iterations).train()
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=starts,
                end_positions=ends)
    assert math.isclose(float(out.loss), iterations * (row0 + row5) / 2 / 2, rel_tol=1e-6)
    # the same batch with the out-of-window rows dropped gives the same loss
    keep = torch.tensor([0, 5])
    alone = model(input_ids=ids[keep], token_type_ids=types[keep], attention_mask=mask[keep],
                  start_positions=starts[keep], end_positions=ends[keep])
    assert math.isclose(float(out.loss), float(alone.loss), rel_tol=1e-6)
    # with a real model: a batch without any answer gives loss 0 that still backpropagates (a Trainer step runs)
    model = tiny_model().train()
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, start_positions=torch.zeros(6).long(),
                end_positions=torch.zeros(6).long())
    assert float(out.loss.detach()) == 0.0 and out.loss.requires_grad
    out.loss.backward()


def trainer_features(tokenizer, pairs, answers):
    """Tokenized (question, context) pairs, padded to one length, with start/end positions as input positions:
    `answers` holds the answer word per pair, or None for "no answer in this window" (labelled 0, 0 as
    transformers' SQuAD preprocessing labels such windows)."""
    encoded = tokenizer([q for q, _ in pairs], [c for _, c in pairs], padding="max_length", max_length=16)
    rows = []
    for i, answer in enumerate(answers):
        row = {key: encoded[key][i] for key in ("input_ids", "token_type_ids", "attention_mask")}
        if answer is None:
            row["start_positions"] = row["end_positions"] = 0
        else:
            position = [p for p, (t, w) in enumerate(zip(row["token_type_ids"], row["input_ids"]))
                        if t == 1 and w == tokenizer.convert_tokens_to_ids(answer)][0]
            row["start_positions"] = row["end_positions"] = position
        rows.append(row)
    return rows


def test_trainer_step_on_features_with_out_of_window_labels(tmp_path):
    from transformers import Trainer, TrainingArguments

    from modeling_cove.tokenization_cove import build_cove_tokenizer

    words = "where is the cat dog on mat a sunny day in paris sat slept under tree ?".split()
    tokenizer = build_cove_tokenizer(words)
    pairs = [("where is the cat ?", "the cat sat on the mat"), ("where is the dog ?", "a sunny day in paris"),
             ("where is the dog ?", "the dog slept under the tree"), ("where is the cat ?", "a sunny day")]
    rows = trainer_features(tokenizer, pairs, ["mat", None, "tree", None])
    model = tiny_model(vocab_size=len(tokenizer)).train()
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, report_to=[],
                             use_cpu=True, save_strategy="no", logging_steps=1, learning_rate=0.1,
                             dataloader_num_workers=0)
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 2 and all(math.isfinite(x) and x > 0 for x in losses)
    changed = [k for k, v in model.named_parameters() if not torch.equal(v.detach(), before[k])]
    assert any(k.startswith("decoder.") for k in changed) and not any(k.startswith("cove.") for k in changed)


def test_hidden_states_and_coattention_maps_match_a_reference():
    """Every returned tensor is checked against the model's parts run on each example alone (no padding) and the
    coattention against the loop reference above."""
    model = tiny_model(seed=5)
    enc = model.coattention_encoder
    pairs = [(3, 7), (2, 4)]
    ids, types, mask = pair_batch(pairs, seed=5)
    out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True,
                output_attentions=True)
    words, encoded, fused = out.hidden_states
    attention_q, attention_d = out.attentions
    m_max, n_max = max(c for _, c in pairs), max(q for q, _ in pairs)
    assert words.shape == (2, 10, model.input_size) and encoded.shape == (2, 10, 6) and fused.shape == (2, 10, 12)
    assert attention_q.shape == attention_d.shape == (2, m_max + 1, n_max + 1)
    # w~ = [GloVe(w); CoVe(w)] per token, CoVe of each segment alone
    cove = model.compute_cove_features(ids, mask, types)
    expected_words = torch.cat([model.cove.embeddings(ids), cove], dim=-1) * mask.unsqueeze(-1)
    torch.testing.assert_close(words, expected_words, rtol=0, atol=0)
    with torch.no_grad():
        for b, (q, c) in enumerate(pairs):
            question_words, context_words = words[b:b + 1, :q], words[b:b + 1, q:q + c]
            q_prime = enc.encode(question_words, torch.ones(1, q, dtype=torch.bool))[0]  # (n, l)
            d_prime = enc.encode(context_words, torch.ones(1, c, dtype=torch.bool))[0]  # (m, l)
            torch.testing.assert_close(encoded[b, :q], q_prime, rtol=0, atol=7e-8)
            torch.testing.assert_close(encoded[b, q:q + c], d_prime, rtol=0, atol=1e-7)
            D = torch.cat([enc.document_sentinel.unsqueeze(0), d_prime])  # (m+1, l)
            Q = torch.tanh(enc.question_projection(torch.cat([enc.question_sentinel.unsqueeze(0), q_prime])))
            ref_cd, ref_aq, ref_ad = coattention_reference(D.tolist(), Q.tolist(), c + 1, q + 1)
            torch.testing.assert_close(attention_q[b, :c + 1, :q + 1].T, torch.tensor(ref_aq), rtol=0, atol=1e-7)
            torch.testing.assert_close(attention_d[b, :c + 1, :q + 1], torch.tensor(ref_ad), rtol=0, atol=2e-7)
            assert float(attention_q[b, c + 1:].abs().sum() + attention_q[b, :, q + 1:].abs().sum()) == 0.0
            assert float(attention_d[b, c + 1:].abs().sum() + attention_d[b, :, q + 1:].abs().sum()) == 0.0
            # U = biLSTM([D; C^D]) without the sentinel row, at the context positions only
            fusion_input = torch.cat([D, torch.tensor(ref_cd)], dim=-1)[1:].unsqueeze(0)
            u = enc.fusion_lstm(fusion_input)[0][0]  # (m, 2l)
            torch.testing.assert_close(fused[b, q:q + c], u, rtol=0, atol=1e-7)
            assert float(fused[b, :q].abs().sum() + fused[b, q + c:].abs().sum()) == 0.0
    # the maps and hidden states are those the scores came from: asking for them changes nothing
    plain = model(input_ids=ids, token_type_ids=types, attention_mask=mask)
    assert torch.equal(plain.start_logits, out.start_logits) and plain.hidden_states is None
    assert plain.attentions is None


# ----------------------------------------------------------------------------------------------------------------
# bf16 autocast on CPUs without a bf16 LSTM kernel
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("forced", [True, False])
def test_bf16_autocast_matches_fp32_with_the_lstm_fallback_forced_or_as_this_cpu_runs(monkeypatch, forced):
    """Forced as on an AVX2-only CPU: the DCN's biLSTMs run in float32 with autocast off (their inputs are seen in
    float32), the rest under bf16 autocast; not forced: whatever this CPU runs. Either way U and the scores are
    within bf16 tolerance of the fp32 model."""
    import modeling_cove.modeling_cove

    if forced:
        monkeypatch.setattr(modeling_cove.lstm_kernels, "_LSTM_KERNEL_SUPPORT", {("cpu", torch.bfloat16): False})
    has_kernel = modeling_cove.lstm_kernels.bf16_lstm_kernel_available()  # probed now: its own torch.lstm call is
    # not one of the model's (run first in a process, the probe used to land in `seen` below)
    model = tiny_model(seed=1, initializer_range=0.5, dcn_max_iterations=1)  # O(1) scores; one iteration: no
    ids, types, mask = pair_batch([(3, 9), (2, 6), (4, 5)], seed=1)  # argmax near a tie can change the path
    seen = []  # (input dtype, autocast on) of each LSTM run: packed (`nn.LSTM`) or by a strategy (`torch.lstm`)
    for lstm in (model.coattention_encoder.encoder_lstm, model.coattention_encoder.fusion_lstm):
        lstm.register_forward_pre_hook(lambda module, args: seen.append(
            (args[0].data.dtype, torch.is_autocast_enabled("cpu"))))
    kernel = torch.lstm
    monkeypatch.setattr(torch, "lstm", lambda inputs, *args: seen.append(
        (inputs.dtype, torch.is_autocast_enabled("cpu"))) or kernel(inputs, *args))
    with torch.no_grad():
        reference = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    seen.clear()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True)
    if forced or not has_kernel:
        assert len(seen) >= 3 and set(seen) == {(torch.float32, False)}  # question, context, fusion (+ MT-LSTM)
        assert out.hidden_states[2].dtype == torch.bfloat16
    assert out.start_logits.dtype == torch.bfloat16
    context = types.bool() & mask.bool()
    for got, want in ((out.hidden_states[2], reference.hidden_states[2]),
                      (out.start_logits[context], reference.start_logits[context])):
        scale = float(want.abs().max())
        torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2 * scale)
    assert bool((out.start_logits[~context] == torch.finfo(torch.bfloat16).min).all())


# ----------------------------------------------------------------------------------------------------------------
# inputs_embeds
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dcn_input", ["vectors+cove", "vectors", "cove"])
def test_inputs_embeds_equal_the_ids_path_given_the_same_rows(dcn_input):
    model = tiny_model(dcn_input=dcn_input).train()  # training: every iteration and the loss
    ids, types, mask = pair_batch([(3, 9), (4, 5)])
    labels = dict(start_positions=torch.tensor([5, 0]), end_positions=torch.tensor([7, 0]))
    rows = model.cove.embeddings(ids).detach()  # (B, T, word_vector_dim)
    rows[1, 9:] = 7.0  # rows at padding are never read
    from_ids = model(input_ids=ids, token_type_ids=types, attention_mask=mask, output_hidden_states=True, **labels)
    from_rows = model(inputs_embeds=rows, token_type_ids=types, attention_mask=mask, output_hidden_states=True,
                      **labels)
    torch.testing.assert_close(from_rows.start_logits, from_ids.start_logits, rtol=0, atol=0)
    torch.testing.assert_close(from_rows.end_logits, from_ids.end_logits, rtol=0, atol=0)
    torch.testing.assert_close(from_rows.loss, from_ids.loss, rtol=0, atol=0)
    for a, b in zip(from_rows.hidden_states, from_ids.hidden_states):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert torch.equal(from_rows.iteration_spans, from_ids.iteration_spans)
    if dcn_input != "vectors":
        torch.testing.assert_close(model.compute_cove_features(inputs_embeds=rows, attention_mask=mask,
                                                               token_type_ids=types),
                                   model.compute_cove_features(ids, mask, types), rtol=0, atol=0)
    # gradients reach inputs_embeds, through the frozen MT-LSTM too (attributions): with dcn_input="cove" the word
    # vectors reach the DCN only through it
    rows = rows.requires_grad_()
    model.eval()(inputs_embeds=rows, token_type_ids=types, attention_mask=mask).start_logits[0, 3].backward()
    assert rows.grad is not None and rows.grad[0].abs().sum() > 0 and not rows.grad[1].any()
    assert all(p.grad is None for p in model.cove.parameters())


def test_inputs_embeds_bad_combinations_are_clear_errors():
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 5)])
    rows = model.cove.embeddings(ids).detach()
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds.*both"):
        model(input_ids=ids, inputs_embeds=rows, token_type_ids=types, attention_mask=mask)
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds.*neither"):
        model(token_type_ids=types, attention_mask=mask)
    with pytest.raises(ValueError, match="word_vector_dim=6"):
        model(inputs_embeds=rows[..., :5], token_type_ids=types, attention_mask=mask)
    with pytest.raises(ValueError, match="char n-gram"):
        tiny_model(char_ngram_dim=4)(inputs_embeds=rows, token_type_ids=types, attention_mask=mask)


# ----------------------------------------------------------------------------------------------------------------
# torch.export
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dcn_input", ["vectors+cove", "vectors"])
def test_torch_export_gives_the_eager_results(dcn_input):
    """Traced on one batch (batch size dynamic, length fixed), the program answers another batch of other
    question/context lengths and padding as the eager model does."""
    from torch.export import Dim

    model = tiny_model(seed=7, dcn_input=dcn_input, dcn_max_iterations=2)  # a smaller graph: faster to trace
    ids, types, mask = pair_batch([(2, 4), (2, 3)], seed=7)  # T = 6
    dims = {0: Dim.AUTO}
    program = torch.export.export(model, (), dict(input_ids=ids, attention_mask=mask, token_type_ids=types),
                                  dynamic_shapes={"input_ids": dims, "attention_mask": dims, "token_type_ids": dims},
                                  strict=False)
    ids, types, mask = pair_batch([(3, 3), (2, 2), (1, 5)], seed=8)  # T = 6 again, three rows
    got = program.module()(input_ids=ids, attention_mask=mask, token_type_ids=types)
    want = model(input_ids=ids, attention_mask=mask, token_type_ids=types)
    torch.testing.assert_close(got.start_logits, want.start_logits, rtol=0, atol=2e-9)
    torch.testing.assert_close(got.end_logits, want.end_logits, rtol=0, atol=2e-9)
    assert torch.equal(got.iteration_spans, want.iteration_spans)
    assert torch.equal(got.num_iterations, want.num_iterations)


def test_forward_checks_each_input_once(monkeypatch):
    """One forward (and one compute_cove_features) checks each input once: the ids against the vocabulary and the
    mask's right padding (before, the encoder's forward checked each segment again)."""
    from modeling_cove import modeling_cove as cove_module
    from modeling_cove import modeling_cove_dcn as dcn_module

    model = tiny_model()
    calls = {"ids": 0, "right padding": 0}

    def count(owner, name, key):
        original = getattr(owner, name)

        def counted(*args, **kwargs):
            calls[key] += 1
            return original(*args, **kwargs)

        monkeypatch.setattr(owner, name, counted)

    count(model.cove, "check_token_ids", "ids")
    for module in (cove_module, dcn_module):  # the encoder's and the head's name for the one check
        count(module, "lengths_from_mask", "right padding")
    ids, types, mask = pair_batch([(3, 9), (5, 4)])
    for run in (lambda: model(ids, mask, types), lambda: model.compute_cove_features(ids, mask, types)):
        calls.update(dict.fromkeys(calls, 0))
        run()
        assert calls == {"ids": 1, "right padding": 1}


def test_run_cove_checks_the_segments_of_other_callers():
    """run_cove (the entry of the SQuAD feature cache, which cuts segments itself) checks its ids and padding as
    forward does, and gives the features forward computes for that segment."""
    model = tiny_model()
    ids, types, mask = pair_batch([(3, 9), (5, 4)])
    with pytest.raises(ValueError, match=r"outside \[0, 40\)"):
        model.run_cove(torch.full((1, 3), 40), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="right-padded"):
        model.run_cove(ids[:, :3], torch.tensor([[0, 1, 1], [1, 1, 1]], dtype=torch.bool))
    question = model.run_cove(ids[:1, :3], torch.ones(1, 3, dtype=torch.bool))  # row 0's question, (1, 3, C)
    torch.testing.assert_close(question[0], model.compute_cove_features(ids, mask, types)[0, :3], rtol=0, atol=0)
    # a model that reads no CoVe has no MT-LSTM features to give (before: the top layer, which it never reads)
    with pytest.raises(ValueError, match=r"run_cove: this model reads no CoVe \(config.dcn_input='vectors'\)"):
        tiny_model(dcn_input="vectors").run_cove(ids[:1, :3], torch.ones(1, 3, dtype=torch.bool))
