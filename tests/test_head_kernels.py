"""The heads' biLSTMs run by the strategies of `lstm_kernels` (the key `config.lstm_implementation`, as the MT-LSTM):
a BCN and a DCN in training (every weight trains, dropout 0 so the strategies see the same inputs) give the
reference's loss and outputs within 1e-5 in float32, and with the gradients of every parameter within 1e-9 in float64,
under each strategy, on ragged unsorted,
sorted, single-row and equal-length batches, single texts and pairs, at 1 and 2 threads ("auto" picks per thread
count). The strategies are counted, so a test cannot pass by running the reference everywhere."""

import pytest
import torch

from modeling_cove import CoveConfig, CoveForQuestionAnswering, CoveForSequenceClassification, lstm_kernels

pytestmark = pytest.mark.usefixtures("single_thread")

# (name, first texts' lengths, second texts' lengths or None): the batch kinds a head's biLSTMs must serve
BCN_BATCHES = [
    ("ragged_unsorted", [3, 7, 1, 5], None),
    ("sorted", [7, 5, 3, 1], None),
    ("single_row", [4], None),
    ("equal_lengths", [6, 6], None),
    ("pairs_ragged", [3, 7, 1, 5], [2, 5, 4, 1]),
    ("pairs_single_row", [4], [3]),
]
# (question length, context length) per row
DCN_BATCHES = [
    ("ragged_unsorted", [(3, 5), (2, 9), (4, 2), (1, 7)]),
    ("sorted", [(2, 9), (3, 7), (4, 4), (1, 2)]),
    ("single_row", [(3, 6)]),
    ("equal_lengths", [(3, 6), (3, 6)]),
]
STRATEGIES = ["unpacked", "single_call", "auto"]


def count_strategy_calls(monkeypatch) -> list:
    """Records the name of every strategy of `lstm_kernels.LSTM_IMPLEMENTATIONS` that runs."""
    calls = []
    for name, original in list(lstm_kernels.LSTM_IMPLEMENTATIONS.items()):
        monkeypatch.setitem(lstm_kernels.LSTM_IMPLEMENTATIONS, name,
                            lambda *a, _name=name, _run=original: calls.append(_name) or _run(*a))
    return calls


def loss_outputs_and_grads(model, implementation: str, inputs: dict, outputs: tuple) -> tuple:
    """The loss and the named outputs, and every parameter's gradient, of one training step under `implementation`."""
    model.set_lstm_implementation(implementation)
    model.zero_grad()
    result = model(**inputs)
    result.loss.backward()
    values = [result.loss.detach()] + [getattr(result, name).detach() for name in outputs]
    return values, [p.grad.clone() for p in model.parameters() if p.grad is not None]


def assert_same(expected: tuple, got: tuple, dtype: torch.dtype):
    """float64: values and every gradient within 1e-9 (the strategies compute the same sums, whatever the order).
    float32: values within 1e-5; gradients are compared in float64 only, since through the wide weights and the
    batch-normalised maxout network, kernels that sum in another order differ by more than float32 rounding there."""
    (want_values, want_grads), (values, grads) = expected, got
    assert len(want_values) == len(values) and len(want_grads) == len(grads) > 10
    tolerance = 1e-9 if dtype == torch.float64 else 1e-5
    for want, have in zip(want_values + (want_grads if dtype == torch.float64 else []),
                          values + (grads if dtype == torch.float64 else [])):
        assert want.shape == have.shape and (want - have).abs().max() <= tolerance


def bcn_batch(firsts: list, seconds, labels: int, seed: int = 0) -> dict:
    """Right-padded ids, mask and token types of texts of the given lengths (pairs concatenated), with labels."""
    generator = torch.Generator().manual_seed(seed)
    rows = [f + (s if seconds else 0) for f, s in zip(firsts, seconds or firsts)]
    width = max(rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
    for i, (first, total) in enumerate(zip(firsts, rows)):
        ids[i, :total] = torch.randint(4, 30, (total,), generator=generator)
        mask[i, :total] = 1
        types[i, first:total] = 1
    label_ids = torch.randint(0, labels, (len(rows),), generator=generator)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types, "labels": label_ids}


def trainable(model):
    """Every weight trains (the encoder too), in train mode; the weights drawn wide (U(-0.5, 0.5)), so that the
    comparisons are not passed by near-zero activations."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            param.requires_grad_(True)
            if "embeddings" not in name:
                param.uniform_(-0.5, 0.5)
    return model.train()


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name,firsts,seconds", BCN_BATCHES, ids=[b[0] for b in BCN_BATCHES])
def test_bcn_training_step_is_the_reference_under_every_strategy(monkeypatch, name, firsts, seconds, threads, dtype):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=30, word_vector_dim=6, hidden_size=5, bcn_feedforward_dim=5, bcn_hidden_size=4,
                        bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, bcn_dropout=0.0, num_labels=3,
                        freeze_encoder=False, freeze_embeddings=False, bcn_pair_input=seconds is not None)
    model = trainable(CoveForSequenceClassification(config)).to(dtype)
    inputs = bcn_batch(firsts, seconds, 3)
    expected = loss_outputs_and_grads(model, "reference", inputs, ("logits",))
    calls = count_strategy_calls(monkeypatch)
    monkeypatch.setattr(lstm_kernels, "SINGLE_CALL_DEVICE_TYPES", ("cpu",))  # "single_call" is the CUDA one
    for implementation in STRATEGIES:
        calls.clear()
        assert_same(expected, loss_outputs_and_grads(model, implementation, inputs, ("logits",)), dtype)
        ragged = len(set(firsts)) > 1 or len(set(seconds or [])) > 1  # (each text runs cut to its side's width)
        if implementation != "auto" and ragged:
            assert implementation in calls


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name,rows", DCN_BATCHES, ids=[b[0] for b in DCN_BATCHES])
def test_dcn_training_step_is_the_reference_under_every_strategy(monkeypatch, name, rows, threads, dtype):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=40, word_vector_dim=6, hidden_size=4, dcn_hidden_size=6, dcn_pool_size=3,
                        dcn_max_iterations=2, dcn_dropout=0.0, freeze_encoder=False, freeze_embeddings=False)
    model = CoveForQuestionAnswering(config).to(dtype).train()
    for param in model.parameters():
        param.requires_grad_(True)
    generator = torch.Generator().manual_seed(1)
    longest = max(q + c for q, c in rows)
    ids = torch.zeros(len(rows), longest, dtype=torch.long)
    types, mask = torch.zeros_like(ids), torch.zeros_like(ids)
    starts, ends = [], []
    for i, (q, c) in enumerate(rows):
        ids[i, :q + c] = torch.randint(4, 40, (q + c,), generator=generator)
        types[i, q:q + c], mask[i, :q + c] = 1, 1
        starts.append(q + c // 3)
        ends.append(q + c // 2)
    inputs = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
              "start_positions": torch.tensor(starts), "end_positions": torch.tensor(ends)}
    expected = loss_outputs_and_grads(model, "reference", inputs, ("start_logits", "end_logits"))
    calls = count_strategy_calls(monkeypatch)
    monkeypatch.setattr(lstm_kernels, "SINGLE_CALL_DEVICE_TYPES", ("cpu",))
    for implementation in STRATEGIES:
        calls.clear()
        assert_same(expected, loss_outputs_and_grads(model, implementation, inputs, ("start_logits", "end_logits")),
                    dtype)
        if implementation != "auto" and len(set(rows)) > 1:
            assert implementation in calls


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["fp64", "fp32"])
@pytest.mark.parametrize("lengths", [[3, 7, 1, 5], [7, 5, 3, 1], [4]], ids=["unsorted", "sorted", "single_row"])
def test_bilm_encoder_is_the_reference_under_every_key(lengths, dtype):
    """The biLM encoder's stacks under "reference" run packed (each row alone); under "unpacked" and "auto" the padded
    rows on the fused kernel ("single_call" serves no biLM call: the reference): every layer at every token and the
    gradients of the vectors and every weight agree (padding of a single row: one step more than its length)."""
    from modeling_cove import CoveModel

    torch.manual_seed(0)
    config = CoveConfig(vocab_size=20, word_vector_dim=4, hidden_size=4, encoder_type="bilm", num_hidden_layers=2,
                        freeze_encoder=False)
    model = CoveModel(config).to(dtype).train()
    time = max(lengths) + (1 if len(lengths) == 1 else 0)
    host_lengths = torch.tensor(lengths)
    real = torch.arange(time) < host_lengths[:, None]  # (B, T)
    vectors = torch.randn(len(lengths), time, 4, dtype=dtype) * real.unsqueeze(-1)
    generator = torch.Generator().manual_seed(1)
    weights = [torch.randn(len(lengths), time, 8, generator=generator, dtype=dtype) for _ in range(2)]
    results = []
    for implementation in ("reference", "unpacked", "auto"):
        model.set_lstm_implementation(implementation)
        model.zero_grad()
        inputs = vectors.clone().requires_grad_(True)
        layers = model.encoder(inputs, host_lengths, final_states=False)[0]
        sum((layer * w * real.unsqueeze(-1)).sum() for layer, w in zip(layers, weights)).backward()
        values = [layer[real].detach() for layer in layers]
        results.append((values, [inputs.grad] + [p.grad.clone() for p in model.encoder.parameters()]))
    for got in results[1:]:
        assert_same(results[0], got, dtype)


@pytest.mark.parametrize("mode", ["inference_mode", "no_grad", "bf16_autocast"])
def test_two_directions_at_once_outside_autograd(monkeypatch, mode):
    """With two or more intra-op threads and no autograd, "unpacked" runs a layer's backward direction on a second
    host thread (in the caller's inference mode and autocast) while the forward one runs in the caller's: the BCN's
    logits equal the reference's (single texts and pairs), the second thread really ran, and the caller's thread
    count is back afterwards."""
    import threading

    torch.set_num_threads(2)
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=30, word_vector_dim=6, hidden_size=5, bcn_feedforward_dim=5, bcn_hidden_size=4,
                        bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, bcn_dropout=0.0, num_labels=3)
    model = trainable(CoveForSequenceClassification(config)).eval()
    threads_seen = []
    original = lstm_kernels.run_direction
    monkeypatch.setattr(lstm_kernels, "run_direction", lambda *a: threads_seen.append(
        (threading.current_thread().name, torch.get_num_threads())) or original(*a))
    contexts = {"inference_mode": torch.inference_mode, "no_grad": torch.no_grad,
                "bf16_autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16)}
    tolerance = 2e-2 if mode == "bf16_autocast" else 1e-5
    for seconds in (None, [2, 5, 4, 1]):
        inputs = bcn_batch([3, 7, 1, 5], seconds, 3)
        inputs.pop("labels")
        logits = {}
        for implementation in ("reference", "unpacked"):
            model.set_lstm_implementation(implementation)
            with torch.no_grad(), contexts[mode]():
                logits[implementation] = model(**inputs).logits.float()
        assert (logits["unpacked"] - logits["reference"]).abs().max() <= tolerance * max(
            1.0, float(logits["reference"].abs().max()))
    assert {name.startswith("cove-lstm-direction") for name, _ in threads_seen} == {True, False}
    assert {count for _, count in threads_seen} == {1}  # each direction on one intra-op thread
    assert torch.get_num_threads() == 2


def test_time_segments_under_autograd_give_the_reference_gradients():
    """A ragged batch that "unpacked" runs in several time segments where autograd records (the split / pad / cat
    form of `run_direction`): outputs and every gradient equal to the packed reference."""
    from torch import nn

    from modeling_cove.layers import run_bilstm

    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, batch_first=True, bidirectional=True)
    lengths = torch.tensor([300, 3, 150, 40, 1, 299, 77])
    assert len(lstm_kernels.plan_time_segments(sorted(lengths.tolist(), reverse=True), 300)) >= 3
    inputs = torch.randn(7, 300, 5) * (torch.arange(300)[None, :, None] < lengths[:, None, None])
    results = {}
    for implementation in ("reference", "unpacked"):
        x = inputs.clone().requires_grad_()
        lstm.zero_grad()
        output = run_bilstm(lstm, x, lengths, implementation)
        (output * torch.linspace(-1, 1, output.shape[-1])).pow(2).sum().backward()
        results[implementation] = [output.detach(), x.grad, *(p.grad.clone() for p in lstm.parameters())]
    for got, want in zip(results["unpacked"], results["reference"]):
        torch.testing.assert_close(got, want, rtol=0, atol=6e-6 * float(want.abs().max()))  # measured 6.2e-7 x max


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")
@pytest.mark.parametrize("threads", [1, 2])
def test_time_segments_share_one_weight_reorder_per_direction(monkeypatch, threads):
    """Outside autograd in float32 on CPU, a ragged batch's time segments run on weights reordered once per direction
    (`prepack_direction`, `onednn_direction`): outputs equal to the packed reference at every real token, with one
    reorder per direction and layer and one oneDNN call per segment; where autograd records, or under bf16 autocast,
    the segments go through `torch.lstm` as before."""
    from torch import nn

    from modeling_cove.layers import run_bilstm

    if not lstm_kernels.prepacking_works():  # probed before the spies below, which would count the probe's calls
        pytest.skip("oneDNN here does not run reordered LSTM weights as torch.lstm does")
    reorders, calls = [], []
    prepack, direction = lstm_kernels.prepack_direction, lstm_kernels.onednn_direction
    monkeypatch.setattr(lstm_kernels, "prepack_direction", lambda w: reorders.append(1) or prepack(w))
    monkeypatch.setattr(lstm_kernels, "onednn_direction", lambda *a: calls.append(1) or direction(*a))
    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, batch_first=True, bidirectional=True)
    lengths = torch.tensor([300, 3, 150, 40, 1, 299, 77])
    segments = len(lstm_kernels.plan_time_segments(sorted(lengths.tolist(), reverse=True), 300,
                                                   call_rows=lstm_kernels.PREPACKED_SEGMENT_CALL_ROWS))
    assert segments >= 3
    real = (torch.arange(300)[None, :] < lengths[:, None])[..., None]  # (B, T, 1)
    inputs = torch.randn(7, 300, 5) * real
    threads_before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.no_grad():
            want = run_bilstm(lstm, inputs, lengths, "reference")
            assert not reorders and not calls
            got = run_bilstm(lstm, inputs, lengths, "unpacked")
    finally:
        torch.set_num_threads(threads_before)
    assert len(reorders) == 2 and len(calls) == 2 * segments
    assert want.abs().sum() > 0 and ((got - want) * real).abs().max() <= 1e-6
    reorders.clear()
    run_bilstm(lstm, inputs.clone().requires_grad_(), lengths, "unpacked").sum().backward()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        run_bilstm(lstm, inputs, lengths, "unpacked")
    assert not reorders


def test_without_working_prepacking_segments_call_torch_lstm(monkeypatch):
    """Where the once-per-process probe finds that oneDNN does not run reordered weights as `torch.lstm` does (a
    build or CPU without it), every segment goes through `torch.lstm`, with the same values."""
    from torch import nn

    from modeling_cove.layers import run_bilstm

    monkeypatch.setattr(lstm_kernels, "_PREPACKING_WORKS", [False])
    reorders = []
    prepack = lstm_kernels.prepack_direction
    monkeypatch.setattr(lstm_kernels, "prepack_direction", lambda w: reorders.append(1) or prepack(w))
    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, batch_first=True, bidirectional=True)
    lengths = torch.tensor([300, 3, 150, 40, 1, 299, 77])
    real = (torch.arange(300)[None, :] < lengths[:, None])[..., None]
    inputs = torch.randn(7, 300, 5) * real
    with torch.no_grad():
        want = run_bilstm(lstm, inputs, lengths, "reference")
        got = run_bilstm(lstm, inputs, lengths, "unpacked")
    assert not reorders and ((got - want) * real).abs().max() <= 1e-6


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="torch built without oneDNN")
@pytest.mark.filterwarnings("ignore:Dynamo does not know how to trace")
def test_prepacked_segments_without_rows_and_under_torch_compile():
    """Padding past the longest row gives a time segment without rows: on reordered weights it returns zeros (oneDNN
    itself would divide by zero). While `torch.compile` traces, the segments go through `torch.lstm` (fake tensors
    carry no reordered layout). Both equal the packed reference at every real token."""
    from torch import nn

    from modeling_cove.layers import run_bilstm

    torch.manual_seed(0)
    lstm = nn.LSTM(5, 4, batch_first=True, bidirectional=True)
    lengths = torch.tensor([3, 2, 7, 1])
    assert lstm_kernels.plan_time_segments([7, 3, 2, 1], 40, call_rows=0)[-1] == (7, 40, 0)
    real = (torch.arange(40)[None, :] < lengths[:, None])[..., None]
    inputs = torch.randn(4, 40, 5) * real
    with torch.no_grad():
        want = run_bilstm(lstm, inputs, lengths, "reference")
        got = run_bilstm(lstm, inputs, lengths, "unpacked")
        compiled = torch.compile(lambda v: run_bilstm(lstm, v, lengths, "unpacked"), backend="eager")(inputs)
    for result in (got, compiled):
        assert want.abs().sum() > 0 and ((result - want) * real).abs().max() <= 1e-6
