"""`CoveForTokenClassification` (modeling_cove/modeling_cove_tagger.py) on tiny configs, for every `tagger_input`
over both encoders (MT-LSTM, biLM): padding consistency, the loss against a hand cross-entropy, what trains and what
stays frozen, save/load, the LSTM implementations, the up-front checks and the optional outputs. The pipeline is
tested in tests/test_token_classification_pipeline.py, the common conventions in tests/test_common.py."""

import pytest
import torch
from conftest import assert_reproduces, assert_same_weights

from modeling_cove import CoveConfig, CoveForTokenClassification

pytestmark = pytest.mark.usefixtures("single_thread")

LABELS = ["O", "B-NP", "I-NP", "B-VP"]
TAGGER_INPUTS = ("vectors", "vectors+cove", "cove", "vectors+scalar_mix")
ENCODER_TYPES = ("mt_lstm", "bilm")
CASES = [(encoder, tagger_input) for encoder in ENCODER_TYPES for tagger_input in TAGGER_INPUTS]
ROWS = [[5, 9, 17, 30, 12, 7], [22, 4], [8, 39, 11, 6]]  # word ids (0-3 are special tokens), lengths 6, 2, 4


def tiny_config(encoder_type="mt_lstm", tagger_input="vectors+cove", **overrides) -> CoveConfig:
    """Vocabulary 40, dims 8 (word_vector_dim == hidden_size, as vectors+scalar_mix needs)."""
    fields = dict(vocab_size=40, word_vector_dim=8, hidden_size=8, num_hidden_layers=2, initializer_range=0.5,
                  encoder_type=encoder_type, tagger_input=tagger_input, tagger_hidden_size=6, tagger_module_dim=5,
                  tagger_dropout=0.3, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)),
                  label2id={name: i for i, name in enumerate(LABELS)})
    fields.update(overrides)
    return CoveConfig(**fields)


def build(encoder_type="mt_lstm", tagger_input="vectors+cove", seed=0, **overrides) -> CoveForTokenClassification:
    torch.manual_seed(seed)
    return CoveForTokenClassification(tiny_config(encoder_type, tagger_input, **overrides)).eval()


def batch(rows=ROWS, labels=True) -> dict:
    """Right-padded rows; labels: a tag per token, -100 on every third token (a later sub-word) and on padding."""
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows])
    inputs = {"input_ids": ids, "attention_mask": mask}
    if labels:
        tags = torch.tensor([[(3 * row + t) % len(LABELS) if t % 3 != 2 else -100 for t in range(width)]
                             for row in range(len(rows))])
        inputs["labels"] = tags.masked_fill(mask == 0, -100)
    return inputs


def row_alone(inputs: dict, row: int) -> dict:
    length = int(inputs["attention_mask"][row].sum())
    return {name: value[row : row + 1, :length] for name, value in inputs.items()}


@pytest.mark.parametrize("encoder_type,tagger_input", CASES)
def test_batch_equals_each_row_alone(encoder_type, tagger_input):
    model = build(encoder_type, tagger_input)
    inputs = batch(labels=False)
    with torch.no_grad():
        together = model(**inputs, output_hidden_states=True)
        for row in range(len(ROWS)):
            alone = model(**row_alone(inputs, row), output_hidden_states=True)
            length = len(ROWS[row])
            torch.testing.assert_close(together.logits[row, :length], alone.logits[0], rtol=0, atol=2e-7)
            for k, (a, b) in enumerate(zip(together.hidden_states, alone.hidden_states)):
                torch.testing.assert_close(a[row, :length], b[0], rtol=0, atol=8e-7, msg=lambda m: f"{k}: {m}")
                assert not a[row, length:].any(), f"hidden_states[{k}] is not zero at padding"


@pytest.mark.parametrize("encoder_type,tagger_input", CASES)
def test_loss_is_cross_entropy_over_labelled_tokens(encoder_type, tagger_input):
    model = build(encoder_type, tagger_input)
    inputs = batch()
    with torch.no_grad():
        output = model(**inputs)
    logits, labels = output.logits, inputs["labels"]
    # by hand: -log softmax at the gold label, averaged over the labelled positions only
    total, count = 0.0, 0
    for row in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            if labels[row, t] != -100:
                total -= torch.log_softmax(logits[row, t].double(), dim=-1)[labels[row, t]].item()
                count += 1
    assert count == 9  # rows of 6, 2 and 4 tokens, every third one unlabelled
    assert output.loss.item() == pytest.approx(total / count, abs=1e-6, rel=0)
    # the batch loss is the token-weighted mean of each row's own loss (padding adds no term)
    per_row = [model(**row_alone(inputs, row)).loss.item() for row in range(len(ROWS))]
    counts = [int((inputs["labels"][row] != -100).sum()) for row in range(len(ROWS))]
    assert sum(loss * n for loss, n in zip(per_row, counts)) / sum(counts) == pytest.approx(total / count, abs=6e-7, rel=0)
    unlabelled = {**inputs, "labels": torch.full_like(inputs["labels"], -100)}
    assert model(**unlabelled).loss.isnan()  # no labelled token: NaN, as F.cross_entropy (documented)


@pytest.mark.parametrize("encoder_type,tagger_input", CASES)
def test_gradients_reach_the_tagger_only(encoder_type, tagger_input):
    model = build(encoder_type, tagger_input).train()
    model(**batch()).loss.backward()
    for name, param in model.named_parameters():
        if name.startswith("cove."):  # word vectors and encoder: frozen
            assert not param.requires_grad and param.grad is None, f"frozen {name} got a gradient"
        else:
            assert param.grad is not None and torch.isfinite(param.grad).all(), f"no gradient reached {name}"
            assert param.grad.abs().sum() > 0, f"zero gradient at {name}"
    trained = {name.split(".")[0] for name, p in model.named_parameters() if p.grad is not None}
    expected = {"encoder", "classifier"} | ({"scalar_mix"} if tagger_input == "vectors+scalar_mix" else set())
    assert trained == expected


@pytest.mark.parametrize("encoder_type,tagger_input", CASES)
def test_save_and_load_give_equal_logits(tmp_path, encoder_type, tagger_input):
    model = build(encoder_type, tagger_input)
    inputs = batch(labels=False)
    model.save_pretrained(tmp_path)
    loaded = CoveForTokenClassification.from_pretrained(tmp_path).eval()
    assert loaded.config.tagger_input == tagger_input and loaded.config.encoder_type == encoder_type
    assert_same_weights(model, loaded)
    with torch.no_grad():  # float rounding at most (conftest.assert_reproduces says why not bit for bit)
        assert_reproduces(loaded(**inputs).logits, model(**inputs).logits, f"{encoder_type}, {tagger_input}")


@pytest.mark.parametrize("encoder_type,tagger_input", CASES)
def test_lstm_implementations_agree(encoder_type, tagger_input):
    reference = build(encoder_type, tagger_input, lstm_implementation="reference")
    unpacked = build(encoder_type, tagger_input, lstm_implementation="unpacked")
    inputs = batch()
    with torch.no_grad():
        a, b = reference(**inputs, output_hidden_states=True), unpacked(**inputs, output_hidden_states=True)
    torch.testing.assert_close(a.logits, b.logits, rtol=0, atol=2e-7)
    torch.testing.assert_close(a.loss, b.loss, rtol=0, atol=1e-6)  # equal here; 1.2e-7 apart with MKL's AVX2 kernels
    for x, y in zip(a.hidden_states, b.hidden_states):
        torch.testing.assert_close(x, y, rtol=0, atol=1e-6)


def test_hidden_states_are_the_inputs_and_each_bilstm_layer():
    model = build(tagger_input="vectors+cove")
    inputs = batch(labels=False)
    with torch.no_grad():
        output = model(**inputs, output_hidden_states=True)
        features, *layers = output.hidden_states
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        cove = model.cove(**inputs).last_hidden_state
        expected = torch.cat([model.cove.embeddings(inputs["input_ids"]), cove], dim=-1) * mask
        torch.testing.assert_close(features, expected, rtol=0, atol=0)
        assert len(layers) == model.config.tagger_num_layers
        for layer in layers:
            assert layer.shape == (3, 6, 2 * model.config.tagger_hidden_size)
        logits = model.classifier(torch.cat(layers, dim=-1))  # the prediction module over [h1; h2]
        torch.testing.assert_close(output.logits, logits, rtol=0, atol=0)
    assert model(**inputs).hidden_states is None


def reference_tagger(model, features: torch.Tensor) -> tuple:
    """The tagger written out for ONE unpadded sentence, from its weights, with torch's own `nn.LSTM` forward (not
    the model's kernels): [START;] w~ [; END] -> layer 1 -> layer 2 -> W · ReLU(W' · [h1; h2]) + b. features (n, D_in)
    -> (logits (n, labels), [h1, h2] each (n, 2H)), at the token positions."""
    states = features
    if model.boundaries is not None:
        start, end = model.boundaries.vectors
        states = torch.cat([start[None], states, end[None]])  # (n + 2, D_in)
    layers = []
    for lstm in model.encoder:
        states = lstm(states[None])[0][0]  # (n', 2H): a one-layer biLSTM over the whole sentence, no padding
        layers.append(states)
    if model.boundaries is not None:
        layers = [layer[1:-1] for layer in layers]
    module = model.classifier
    hidden = torch.relu(torch.cat(layers, dim=-1) @ module.hidden.weight.T)  # W' [h1; h2], (n, module_dim)
    return hidden @ module.output.weight.T + module.output.bias, layers


@pytest.mark.parametrize("boundary_tokens", [False, True])
@pytest.mark.parametrize("encoder_type", ENCODER_TYPES)
def test_logits_and_layers_equal_the_tagger_written_out(encoder_type, boundary_tokens):
    """Each row of a padded batch against `reference_tagger` on that sentence alone: the biLSTM layers (hidden
    states 1..L) and the logits. The prediction module's weights are drawn wide, so that its ReLU is live at every
    token (with the default draw some tokens' logits are the bias alone, which would hide an error in the states)."""
    model = build(encoder_type, tagger_boundary_tokens=boundary_tokens)
    with torch.no_grad():
        model.classifier.hidden.weight.normal_(0, 2.0)
        model.classifier.output.weight.normal_(0, 1.0)
        model.classifier.output.bias.normal_(0, 1.0)
    inputs = batch(labels=False)
    with torch.no_grad():
        output = model(**inputs, output_hidden_states=True)
        features, *layers = output.hidden_states
        for row, length in enumerate(inputs["attention_mask"].sum(1).tolist()):
            logits, expected_layers = reference_tagger(model, features[row, :length])
            hidden = torch.relu(torch.cat(expected_layers, -1) @ model.classifier.hidden.weight.T)
            assert (hidden > 0).any(dim=-1).all(), "a token with a dead module: choose another draw"
            for layer, expected in zip(layers, expected_layers):
                torch.testing.assert_close(layer[row, :length], expected, rtol=0, atol=1e-6)  # measured: 0
                assert not layer[row, length:].any()  # zero at padding
            torch.testing.assert_close(output.logits[row, :length], logits, rtol=0, atol=1e-6)  # measured <= 2.4e-7


def test_return_dict_false_is_the_tuple():
    model = build()
    inputs = batch()
    with torch.no_grad():
        output = model(**inputs, output_hidden_states=True)
        as_tuple = model(**inputs, output_hidden_states=True, return_dict=False)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == 3
    assert torch.equal(as_tuple[0], output.loss) and torch.equal(as_tuple[1], output.logits)
    assert all(torch.equal(a, b) for a, b in zip(as_tuple[2], output.hidden_states))
    with torch.no_grad():
        (logits,) = model(**batch(labels=False), return_dict=False)
    assert torch.equal(logits, output.logits)


def test_inputs_embeds_equal_input_ids():
    model = build()
    inputs = batch()
    with torch.no_grad():
        vectors = model.cove.embeddings(inputs["input_ids"])
        by_vectors = model(inputs_embeds=vectors, attention_mask=inputs["attention_mask"], labels=inputs["labels"])
        by_ids = model(**inputs)
    torch.testing.assert_close(by_vectors.logits, by_ids.logits, rtol=0, atol=0)
    torch.testing.assert_close(by_vectors.loss, by_ids.loss, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# the up-front checks


def test_check_inputs_errors():
    model = build(tagger_max_length=5)
    inputs = batch(labels=False)
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds, got neither"):
        model()
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds, got both"):
        model(input_ids=inputs["input_ids"], inputs_embeds=model.cove.embeddings(inputs["input_ids"]))
    empty = {"input_ids": inputs["input_ids"], "attention_mask": inputs["attention_mask"].clone()}
    empty["attention_mask"][1] = 0
    with pytest.raises(ValueError, match=r"row\(s\) \[1\] of this batch of 3 have no tokens"):
        model(**empty)
    with pytest.raises(ValueError, match=r"row\(s\) \[0\] of this batch have \[6\] tokens, more than "
                                         r"config.tagger_max_length=5"):
        model(**inputs)
    pair = {**batch([[5, 6, 7], [8, 9]], labels=False), "token_type_ids": torch.tensor([[0, 0, 1], [0, 0, 0]])}
    with pytest.raises(ValueError, match=r"row\(s\) \[0\] have second-text tokens"):
        model(**pair)
    with pytest.raises(ValueError, match=r"token_type_ids shape \(2, 2\) != attention_mask shape \(2, 3\)"):
        model(**{**pair, "token_type_ids": pair["token_type_ids"][:, :2]})
    with pytest.raises(TypeError, match="labels must be a torch.Tensor, got list"):
        model(**{**batch([[5, 6, 7]], labels=False), "labels": [[0, 1, 0]]})
    # token_type_ids 1 on padding only: not a pair
    pair["token_type_ids"] = torch.tensor([[0, 0, 0], [0, 0, 1]])
    assert model(**pair).logits.shape == (2, 3, len(LABELS))
    assert build(tagger_max_length=None)(**inputs).logits.shape == (3, 6, len(LABELS))  # None: no limit


def test_check_labels_errors():
    model = build()
    inputs = batch()
    with pytest.raises(ValueError, match=r"labels must have the shape of input_ids \(3, 6\).*got \(3, 5\)"):
        model(**{**inputs, "labels": inputs["labels"][:, :5]})
    with pytest.raises(ValueError, match=r"got \(3,\)"):
        model(**{**inputs, "labels": torch.tensor([0, 1, 2])})
    out_of_range = inputs["labels"].clone()
    out_of_range[2, 0] = len(LABELS)
    with pytest.raises(ValueError, match=r"row\(s\) \[2\] have labels outside \[0, 4\) and not -100"):
        model(**{**inputs, "labels": out_of_range})
    negative = inputs["labels"].clone()
    negative[0, 1] = -1
    with pytest.raises(ValueError, match=r"row\(s\) \[0\] have labels outside"):
        model(**{**inputs, "labels": negative})
    on_padding = inputs["labels"].clone()
    on_padding[1, 4] = 0
    with pytest.raises(ValueError, match=r"row\(s\) \[1\] have labels at padding positions"):
        model(**{**inputs, "labels": on_padding})
    with pytest.raises(TypeError, match="labels must be integer label ids, got dtype torch.float32"):
        model(**{**inputs, "labels": inputs["labels"].float()})
    with pytest.raises(TypeError, match="got dtype torch.bool"):
        model(**{**inputs, "labels": inputs["labels"] > 0})
    # int32 labels are integer ids: accepted, same loss
    assert torch.equal(model(**{**inputs, "labels": inputs["labels"].int()}).loss, model(**inputs).loss)


def test_scalar_mix_needs_equal_widths():
    with pytest.raises(ValueError, match=r"2 \* word_vector_dim \(12\) must equal 2 \* hidden_size \(16\)"):
        CoveForTokenClassification(tiny_config(tagger_input="vectors+scalar_mix", word_vector_dim=6))


def test_prediction_module_at_the_tokens_equals_every_position():
    """`CoveTaggerPredictionModule(states, mask)` runs at the tokens alone on CPU: the same logits as over every
    position (b at padding, where the states are zero), the same gradients, and every position while exporting."""
    from modeling_cove.modeling_cove_tagger import CoveTaggerPredictionModule

    torch.manual_seed(0)
    module = CoveTaggerPredictionModule(6, 5, 4)
    lengths = torch.tensor([4, 1, 3])
    mask = torch.arange(4)[None, :] < lengths[:, None]  # (3, 4)
    states = (torch.randn(3, 4, 6) * mask.unsqueeze(-1)).requires_grad_()
    dense = module(states)
    dense.pow(2).sum().backward()
    expected = [states.grad.clone(), *(p.grad.clone() for p in module.parameters())]
    states.grad = None
    module.zero_grad()
    masked = module(states, mask)
    # equal up to float32 rounding: a matrix product over the tokens alone may be blocked otherwise than over every
    # position (on a Zen 4 EPYC 8 of the 48 logits differ by 6e-8, one ulp; equal on a Xeon)
    torch.testing.assert_close(masked, dense, rtol=0, atol=1e-6)
    assert torch.equal(masked[~mask], module.output.bias.detach().expand(int((~mask).sum()), 4))
    masked.pow(2).sum().backward()
    for got, want in zip([states.grad, *(p.grad for p in module.parameters())], expected):
        torch.testing.assert_close(got, want, rtol=0, atol=1e-6)
    nothing = torch.zeros(3, 4, dtype=torch.bool)  # rows of padding alone: b everywhere
    zero = torch.zeros_like(states)
    torch.testing.assert_close(module(zero, nothing), module(zero), rtol=0, atol=0)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        in_bf16 = module(states, mask)
        assert in_bf16.dtype == module(states).dtype == torch.bfloat16
        torch.testing.assert_close(in_bf16, module(states), rtol=0, atol=0)
    model = build(tagger_input="vectors")
    inputs = batch(labels=False)
    exported = torch.export.export(model, (), {k: v for k, v in inputs.items()}, strict=False)
    with torch.no_grad():
        torch.testing.assert_close(exported.module()(**inputs).logits, model(**inputs).logits, rtol=0, atol=0)
