"""modeling_cove/layers.py, the layers the BCN and the DCN share: each against a reference computation (masked
softmax vs a softmax over the unmasked entries alone, the biLSTM over padded rows vs each row alone through
nn.LSTM in values and gradients, pair segmentation vs hand-worked token_type_ids)."""

import pytest
import torch
from torch import nn

from modeling_cove import layers, lstm_kernels
from modeling_cove.layers import (
    segment_gather,
    masked_softmax,
    maxout,
    pair_segments,
    require,
    run_bilstm,
    run_bilstm_packed,
    segment_scatter,
)

pytestmark = pytest.mark.usefixtures("single_thread")


# ----------------------------------------------------------------------------------------------------------------
# masked softmax, maxout, require
# ----------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, 2])
def test_masked_softmax_is_the_softmax_over_the_unmasked_entries_alone(dim):
    torch.manual_seed(0)
    scores = torch.randn(3, 5, 4) * 4
    mask = torch.rand(3, 5, 4) > 0.5
    mask.select(dim, 0).fill_(True)  # every slice along dim keeps an entry
    probs = masked_softmax(scores, mask, dim=dim)
    moved_scores, moved_mask, moved_probs = (t.movedim(dim, -1).reshape(-1, t.shape[dim])
                                             for t in (scores, mask, probs))
    for row_scores, row_mask, row_probs in zip(moved_scores, moved_mask, moved_probs):
        torch.testing.assert_close(row_probs[row_mask], torch.softmax(row_scores[row_mask], dim=0), rtol=0, atol=2e-7)
        assert not row_probs[~row_mask].any()  # exactly zero


def test_masked_softmax_broadcasts_its_mask_and_keeps_the_dtype():
    scores = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [100.0, -100.0]]])  # (B, T, S)
    mask = torch.tensor([[True, True, False]])[:, :, None]  # (B, T, 1): the third step is padding
    probs = masked_softmax(scores, mask, dim=1)
    e = torch.tensor(2.0).exp()
    torch.testing.assert_close(probs[0, :, 0], torch.stack([1 / (1 + e), e / (1 + e), torch.tensor(0.0)]), rtol=0,
                               atol=5e-7)
    torch.testing.assert_close(probs[0, :, 1], probs[0, :, 0], rtol=0, atol=0)
    half = masked_softmax(scores.bfloat16(), mask, dim=1)  # masked with bf16's own minimum: no overflow
    assert half.dtype == torch.bfloat16 and half[0, 2].eq(0).all()


def test_maxout_by_hand():
    x = torch.tensor([[1.0, 5.0, 2.0, -1.0, 0.0, -3.0]])
    assert maxout(x, 2).tolist() == [[5.0, 2.0, 0.0]]
    assert maxout(x, 3).tolist() == [[5.0, 0.0]]
    assert maxout(x.view(1, 1, 6), 6).tolist() == [[[5.0]]]  # any leading shape


def test_require_names_the_rows_only_when_it_fails():
    require(torch.tensor([True, True]), "never", lambda: 1 / 0)  # detail is not built when the check passes
    with pytest.raises(ValueError, match="^short$"):
        require(torch.tensor([True, False]), "short")
    ok = torch.tensor([False, True, False])
    with pytest.raises(ValueError, match=r"rows \[0, 2\]"):
        require(ok, "short", lambda: f"rows {layers.rows_where(~ok)}")


def test_host_read_raises_the_first_failed_check_after_one_read_and_returns_the_values():
    """Inside a HostRead the checks wait: leaving it reads every verdict and the asked-for values in one copy, raises
    the first failed check in the order they were made (its detail built then), or returns the values on the host."""
    from sync_counter import HostSyncCounter

    from modeling_cove.embeddings import HostRead

    lengths = torch.tensor([3, 0, 2])
    counter = HostSyncCounter()
    counter.on_device(lengths)
    with counter, pytest.raises(ValueError, match=r"^rows \[1\] are empty$"):
        with HostRead() as host:
            require(lengths >= 0, "never")
            require(lengths > 0, "empty", lambda: f"rows {layers.rows_where(lengths == 0)} are empty")
            require(lengths < 2, "long")  # fails too, but is not the first
            host.read(lengths)
    assert [call.split(" at ")[0] for call in counter.calls][0] == "cpu device -> host"  # the one read, then the
    counter.reset()  # message's own reads
    with counter:
        with HostRead() as host:
            require(lengths >= 0, "never", lambda: 1 / 0)
            host.read(lengths), host.read(lengths.view(1, 3) * 2)
    assert counter.count == 1, counter.calls
    assert host.values[0].tolist() == [3, 0, 2] and host.values[1].tolist() == [[6, 0, 4]]
    assert host.values[0].device.type == "cpu" and host.values[0].dtype == torch.long


# ----------------------------------------------------------------------------------------------------------------
# biLSTM over right-padded rows
# ----------------------------------------------------------------------------------------------------------------


def ragged_batch(lengths, channels=3, seed=0):
    torch.manual_seed(seed)
    lstm = nn.LSTM(channels, 4, batch_first=True, bidirectional=True)
    inputs = torch.randn(len(lengths), max(lengths) + 1, channels, requires_grad=True)  # one step of padding at least
    return lstm, inputs, torch.tensor(lengths)


def traceable(lstm, inputs, lengths):
    """The strategy `torch.export` traces, called directly."""
    output = lstm_kernels.run_traceable(lstm_kernels.BiLSTMStack(lstm), inputs, lengths, False, True, None)[0][-1]
    return output * (torch.arange(inputs.shape[1]) < lengths[:, None]).unsqueeze(-1)


STRATEGIES = {
    "auto": run_bilstm,
    "reference": run_bilstm_packed,
    "unpacked": lambda lstm, inputs, lengths: run_bilstm(lstm, inputs, lengths, "unpacked"),
    "single_call": lambda lstm, inputs, lengths: run_bilstm(lstm, inputs, lengths, "single_call"),
    "traceable": traceable,
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("lengths", [[5, 1, 3, 5], [5, 5, 3, 1], [2], [3, 4]], ids=["unsorted", "sorted", "single_row",
                                                                                   "one_short"])
@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_bilstm_over_padded_rows_is_each_row_alone_in_values_and_gradients(strategy, lengths, threads):
    """Every strategy of the heads' biLSTM, in values and in the gradients of the inputs and every weight, is each
    row run alone (ragged unsorted, sorted, a single row and rows of one short of the other; with 1 and 2 threads:
    "auto" picks per thread count)."""
    torch.set_num_threads(threads)
    run = STRATEGIES[strategy]
    lstm, inputs, lengths = ragged_batch(lengths)
    output = run(lstm, inputs, lengths)  # (B, T, 2H)
    assert output.shape == (len(lengths), int(lengths.max()) + 1, 8)
    weights = torch.randn_like(output)
    grads = torch.autograd.grad((output * weights).sum(), [inputs, *lstm.parameters()])
    alone_grads = [torch.zeros_like(g) for g in grads]
    for b, length in enumerate(lengths.tolist()):
        row = inputs[b : b + 1, :length]
        alone, _ = lstm(row)  # the row by itself, no padding at all
        torch.testing.assert_close(output[b, :length], alone[0], rtol=0, atol=5e-7)
        assert not output[b, length:].any()  # zero at padding
        row_grads = torch.autograd.grad((alone * weights[b : b + 1, :length]).sum(), [inputs, *lstm.parameters()])
        alone_grads = [total + g for total, g in zip(alone_grads, row_grads)]
    for got, expected in zip(grads, alone_grads):
        torch.testing.assert_close(got, expected, rtol=0, atol=4e-6)


def test_bilstm_without_padding_and_the_strategies_refuse_other_lstms():
    lstm, inputs, _ = ragged_batch([4, 4])
    full = torch.tensor([5, 5])  # every row fills the tensor: nothing to pack
    torch.testing.assert_close(run_bilstm(lstm, inputs, full), lstm(inputs)[0], rtol=0, atol=0)
    for other in (nn.LSTM(3, 4, batch_first=True), nn.LSTM(3, 4, bidirectional=True)):
        with pytest.raises(ValueError, match="batch-first, bidirectional LSTMs with biases"):
            run_bilstm(other, inputs, full - 1, "unpacked")


@pytest.mark.parametrize("strategy", ["reference", "unpacked", "auto"])
def test_bilstm_under_bf16_autocast_without_a_bf16_lstm_kernel(cpu_without_bf16_lstm, strategy):
    """On a CPU without a bf16 LSTM kernel (simulated), the biLSTM runs in fp32 and returns autocast's dtype."""
    lstm, inputs, lengths = ragged_batch([5, 2])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        output = run_bilstm(lstm, inputs, lengths, strategy)
    assert output.dtype == torch.bfloat16
    torch.testing.assert_close(output, run_bilstm(lstm, inputs, lengths, strategy).bfloat16(), rtol=0, atol=0)


# ----------------------------------------------------------------------------------------------------------------
# pair segmentation by token_type_ids
# ----------------------------------------------------------------------------------------------------------------


def test_pair_segments_by_hand():
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0]])
    types = torch.tensor([[0, 0, 1, 1, 1], [0, 1, 1, 1, 1], [0, 0, 0, 0, 0]])  # row 1: padding typed 1
    first, second = pair_segments(mask, types)
    assert first.int().tolist() == [[1, 1, 0, 0, 0], [1, 0, 0, 0, 0], [1, 1, 0, 0, 0]]
    assert second.int().tolist() == [[0, 0, 1, 1, 1], [0, 1, 1, 0, 0], [0, 0, 0, 0, 0]]
    first, second = pair_segments(mask, None)  # no type ids: one text per row
    assert torch.equal(first, mask.bool()) and not second.any()
    first, second = pair_segments(mask, torch.tensor([[0, 2, 1, 1, 1], [0] * 5, [1] * 5]))
    assert first.int().tolist()[0] == [1, 0, 0, 0, 0] and second.int().tolist()[0] == [0, 0, 1, 1, 1]  # 2: neither
    assert second.int().tolist()[2] == [1, 1, 0, 0, 0]  # a second text alone: the head decides whether it may
    with pytest.raises(ValueError, match=r"token_type_ids shape \(3, 4\) != attention_mask shape \(3, 5\)"):
        pair_segments(mask, types[:, :4])


def test_segment_gather_left_aligns_in_order_and_scatter_puts_it_back():
    ids = torch.tensor([[5, 6, 7, 8, 0], [1, 2, 3, 0, 0]])
    segment = torch.tensor([[0, 1, 1, 0, 0], [1, 0, 1, 0, 0]], dtype=torch.bool)
    gathered, positions, mask = segment_gather(ids, segment)
    assert gathered.tolist() == [[6, 7], [1, 3]] and positions.tolist() == [[1, 2], [0, 2]] and mask.all()
    gathered, positions, mask = segment_gather(ids, torch.tensor([[1, 1, 1, 0, 0], [0, 0, 0, 0, 0]]).bool())
    assert gathered.tolist() == [[5, 6, 7], [0, 0, 0]] and mask.int().tolist() == [[1, 1, 1], [0, 0, 0]]
    gathered, _, mask = segment_gather(ids, torch.zeros(2, 5, dtype=torch.bool))  # empty everywhere: width 1
    assert gathered.tolist() == [[0], [0]] and not mask.any()

    torch.manual_seed(0)
    features = torch.randn(2, 5, 3)
    gathered, positions, mask = segment_gather(features, segment)  # (B, L, C)
    torch.testing.assert_close(gathered[1], features[1, [0, 2]], rtol=0, atol=0)
    back = segment_scatter(gathered, positions, mask, time=5)  # (B, T, C)
    torch.testing.assert_close(back, features * segment.unsqueeze(-1), rtol=0, atol=0)


def test_segments_of_a_pair_run_alone_and_come_back_at_their_positions():
    """The heads' pattern: split a pair by token_type_ids, run each side through the biLSTM on its own, put both
    back; equal to running each side of each row alone, placed by hand."""
    lstm, inputs, _ = ragged_batch([6, 6])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1]])
    types = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [0, 0, 0, 0, 1, 1, 1]])
    sides = pair_segments(mask, types)
    merged = 0
    for side in sides:
        segment, positions, segment_mask = segment_gather(inputs, side)
        states = run_bilstm(lstm, segment, segment_mask.sum(dim=1))
        merged = merged + segment_scatter(states, positions, segment_mask, inputs.shape[1])
    expected = torch.zeros_like(merged)
    for b, (lx, ly) in enumerate([(2, 3), (4, 3)]):
        expected[b, :lx] = lstm(inputs[b : b + 1, :lx])[0][0]
        expected[b, lx : lx + ly] = lstm(inputs[b : b + 1, lx : lx + ly])[0][0]
    torch.testing.assert_close(merged, expected, rtol=0, atol=8e-7)
