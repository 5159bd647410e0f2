"""The ELMo-style biLM encoder and its pretraining model (modeling_cove_bilm.py): no direction sees the other side,
padding never reaches a token, the output has an MT-LSTM layer's shape for every head, and the pretraining loss is
the adaptive softmax's exact NLL of the next (forward) and previous (backward) token."""

import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoModel, AutoModelForPreTraining

from conftest import assert_reproduces, simulate_cpu_without_bf16_lstm
from modeling_cove import CoveConfig, CoveForQuestionAnswering, CoveForSequenceClassification, CoveModel, lstm_kernels
from modeling_cove.build import create_cove_checkpoint
from modeling_cove.modeling_cove_bilm import (
    CoveBiLMEncoder,
    CoveForBidirectionalLM,
    reversal_index,
)

WORDS = ["the", "a", "film", "is", "good", "bad", "very", "not", "plot", "actors", "and", "."]
DIM = 4  # word_vector_dim == hidden_size: the BCN's scalar mix mixes [g; g] with the layers


def tiny_config(**overrides) -> CoveConfig:
    values = dict(vocab_size=len(WORDS) + 4, target_vocab_size=len(WORDS) + 4, word_vector_dim=DIM, hidden_size=DIM,
                  encoder_type="bilm", bilm_softmax_cutoffs=[4, 9], bilm_residual=True, bilm_tie_softmax=True,
                  freeze_encoder=False)
    values.update(overrides)
    return CoveConfig(**values)


@pytest.fixture(scope="module")
def checkpoint():
    """A trained-from-scratch biLM's encoder checkpoint and tokenizer (random weights, fixed seed)."""
    torch.manual_seed(0)
    vectors = torch.randn(len(WORDS) + 4, DIM)
    encoder, tokenizer = create_cove_checkpoint(WORDS, vectors, encoder_type="bilm", hidden_size=DIM,
                                                bilm_softmax_cutoffs=[4, 9], seed=3)
    return encoder.eval(), tokenizer


def ragged_batch(seed: int = 0):
    """Word vectors (3, 7, DIM) and row lengths 7, 4, 2 (right padding)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(3, 7, DIM, generator=generator), torch.tensor([7, 4, 2])


def encoder_layers(encoder, vectors, lengths) -> list:
    with torch.no_grad():
        return encoder(vectors, lengths, final_states=False)[0]


def test_reversal_index_reverses_each_row_within_its_length():
    index = reversal_index(torch.tensor([3, 1, 4]), 4, torch.device("cpu"))
    assert index.tolist() == [[2, 1, 0, 3], [0, 1, 2, 3], [3, 2, 1, 0]]


@pytest.mark.parametrize("residual", [True, False])
def test_forward_states_do_not_see_the_future_nor_backward_states_the_past(residual):
    torch.manual_seed(1)
    encoder = CoveBiLMEncoder(tiny_config(bilm_residual=residual)).eval()
    vectors, lengths = ragged_batch()
    before = encoder_layers(encoder, vectors, lengths)
    for row, length in enumerate(lengths.tolist()):
        for t in range(length):
            later, earlier = vectors.clone(), vectors.clone()
            later[row, t + 1:] = torch.randn_like(later[row, t + 1:])  # the future of t (and the padding)
            earlier[row, :t] = torch.randn_like(earlier[row, :t])  # the past of t
            after_later, after_earlier = encoder_layers(encoder, later, lengths), encoder_layers(encoder, earlier,
                                                                                                  lengths)
            for layer, changed_later, changed_earlier in zip(before, after_later, after_earlier):
                assert torch.equal(changed_later[row, :t + 1, :DIM], layer[row, :t + 1, :DIM])  # forward
                assert torch.equal(changed_earlier[row, t:length, DIM:], layer[row, t:length, DIM:])  # back
                if t + 1 < length:  # and each direction does read the side it should
                    assert not torch.allclose(changed_later[row, t + 1, :DIM], layer[row, t + 1, :DIM])
                if t > 0:
                    assert not torch.allclose(changed_earlier[row, t - 1, DIM:], layer[row, t - 1, DIM:])


def test_padding_never_reaches_a_token_and_final_states_are_each_rows_ends():
    torch.manual_seed(2)
    # without the residual, layer k's output is its LSTM's h, which the final states must hold at the rows' ends
    encoder = CoveBiLMEncoder(tiny_config(num_hidden_layers=3, bilm_residual=False)).eval()
    vectors, lengths = ragged_batch()
    with torch.no_grad():
        layers, final_h, _ = encoder(vectors, lengths, final_states=True)
        for row, length in enumerate(lengths.tolist()):
            alone, alone_h, alone_c = encoder(vectors[row:row + 1, :length], lengths[row:row + 1])
            for layer, single in zip(layers, alone):
                torch.testing.assert_close(layer[row, :length], single[0], rtol=0, atol=5e-7)
            torch.testing.assert_close(final_h[row], alone_h[0], rtol=0, atol=5e-7)
            for k, layer in enumerate(layers):  # h_n: the forward state at the last token, the backward at the first
                torch.testing.assert_close(final_h[row, k, :DIM], layer[row, length - 1, :DIM], rtol=0, atol=0)
                torch.testing.assert_close(final_h[row, k, DIM:], layer[row, 0, DIM:], rtol=0, atol=0)
    assert final_h.shape == (3, 3, 2 * DIM) and alone_c.shape == (1, 3, 2 * DIM)


def test_residual_adds_layer_one_to_layer_two():
    encoder = CoveBiLMEncoder(tiny_config(bilm_residual=True)).eval()
    for stack in (encoder.forward_layers, encoder.backward_layers):
        for parameter in stack[1].parameters():
            torch.nn.init.zeros_(parameter)  # a zero LSTM outputs zeros: layer 2 is then layer 1 itself
    vectors, lengths = ragged_batch()
    first, second = encoder_layers(encoder, vectors, lengths)
    torch.testing.assert_close(second, first, rtol=0, atol=0)


@pytest.mark.parametrize("auto_single_call", [False, True], ids=["auto_as_on_cpu", "auto_as_on_cuda"])
def test_the_stacks_choose_their_path_through_the_lstm_kernels_registry(monkeypatch, auto_single_call):
    """The biLM asks `lstm_kernels.choose_lstm_implementation`, as the MT-LSTM and the heads' biLSTMs do, once per
    call: packed rows where it answers "reference" (that key, final states, and "single_call", which no single call
    of two stacks serves), the padded rows where it answers "unpacked" ("unpacked", and "auto" in inference and in
    training alike: the biLM always hints unpacked); a batch without padding is never packed."""
    if auto_single_call:  # "auto" as on CUDA, where it runs the MT-LSTM and the heads' biLSTMs as one call
        monkeypatch.setattr(lstm_kernels, "SINGLE_CALL_DEVICE_TYPES", ("cpu",))
    chosen, packed = [], []
    choose, pack = lstm_kernels.choose_lstm_implementation, lstm_kernels.pack
    monkeypatch.setattr(lstm_kernels, "choose_lstm_implementation", lambda *a: chosen.append(choose(*a)) or chosen[-1])
    monkeypatch.setattr(lstm_kernels, "pack", lambda *a: packed.append(1) or pack(*a))
    encoder = CoveBiLMEncoder(tiny_config())
    vectors, lengths = ragged_batch()
    full_vectors, full_lengths = vectors[:, :2], torch.tensor([2, 2, 2])
    for key, final_states, training, want in [
            ("reference", False, False, "reference"), ("reference", True, False, "reference"),
            ("unpacked", False, False, "unpacked"), ("unpacked", True, False, "reference"),
            ("auto", False, False, "unpacked"), ("auto", False, True, "unpacked"), ("auto", True, False, "reference"),
            ("single_call", False, False, "reference"), ("single_call", True, False, "reference")]:
        encoder.config.lstm_implementation = key
        encoder.train(training)
        chosen.clear()
        packed.clear()
        with torch.set_grad_enabled(training):
            encoder(vectors.clone().requires_grad_(training), lengths, final_states=final_states)
        assert chosen == [want] and bool(packed) == (want == "reference"), (key, final_states, training)
        packed.clear()
        with torch.no_grad():
            encoder(full_vectors, full_lengths, final_states=final_states)
        assert not packed, (key, final_states)


def test_biLM_config_fields_default_and_are_checked():
    config = CoveConfig()
    assert (config.encoder_type, config.bilm_residual, config.bilm_tie_softmax) == ("mt_lstm", True, True)
    assert type(CoveModel(CoveConfig(vocab_size=20, target_vocab_size=20, word_vector_dim=4, hidden_size=4)).encoder
                ).__name__ == "CoveEncoder"
    assert tiny_config(bilm_softmax_cutoffs=None, vocab_size=50000).softmax_cutoffs == [5000, 16666]
    assert tiny_config(bilm_softmax_cutoffs=None).softmax_cutoffs == [1, 5]
    assert tiny_config().softmax_cutoffs == [4, 9]
    for bad in ([9, 4], [0, 4], [4, 16], [], "4"):
        with pytest.raises(ValueError, match="bilm_softmax_cutoffs must be"):
            tiny_config(bilm_softmax_cutoffs=bad)
    with pytest.raises(ValueError, match="encoder_type must be one of"):
        tiny_config(encoder_type="elmo")
    with pytest.raises(ValueError, match="bilm_residual must be True or False"):
        tiny_config(bilm_residual=1)


# ----------------------------------------------------------------------------------------------------------------
# CoveModel over the biLM: the encoder every head loads
# ----------------------------------------------------------------------------------------------------------------


def test_cove_model_runs_the_bilm_encoder_and_batch_equals_single(checkpoint):
    encoder, tokenizer = checkpoint
    assert isinstance(encoder.encoder, CoveBiLMEncoder)
    texts = ["the film is very good .", "bad plot", "not good and not bad actors ."]
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        out = encoder(**batch, output_hidden_states=True)
        assert out.last_hidden_state.shape[-1] == 2 * DIM
        for row, text in enumerate(texts):
            single = encoder(**tokenizer([text], return_tensors="pt"))
            length = single.last_hidden_state.shape[1]
            torch.testing.assert_close(out.last_hidden_state[row, :length], single.last_hidden_state[0], rtol=0,
                                       atol=7e-8)
            assert out.last_hidden_state[row, length:].abs().sum() == 0
        encoded = encoder.encode(texts, tokenizer=tokenizer)
    for row, features in enumerate(encoded):
        torch.testing.assert_close(features, out.last_hidden_state[row, :features.shape[0]], rtol=0, atol=0)


@pytest.mark.parametrize("final_states", [False, True])  # padded rows on the fused kernel; packed rows
def test_bf16_autocast_on_a_cpu_without_the_bf16_lstm_kernel(checkpoint, monkeypatch, final_states):
    """As on an AVX2-only CPU, on any machine (conftest.simulate_cpu_without_bf16_lstm: an LSTM called under bf16
    autocast fails as oneDNN fails there): both stacks take the fp32 fallback, and the layers come within bf16
    tolerance of the fp32 forward, in the dtype autocast gives (bf16 padded, fp32 packed)."""
    encoder = checkpoint[0].encoder
    vectors, lengths = ragged_batch()
    with torch.no_grad():
        expected = encoder(vectors, lengths, final_states=final_states)
    simulate_cpu_without_bf16_lstm(monkeypatch)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        actual = encoder(vectors, lengths, final_states=final_states)
    for k, (layer, reference) in enumerate(zip(actual[0], expected[0])):
        assert layer.dtype == (torch.float32 if final_states else torch.bfloat16)
        for row, length in enumerate(lengths.tolist()):
            torch.testing.assert_close(layer[row, :length].float(), reference[row, :length], rtol=0, atol=0.003,
                                       msg=lambda m: f"layer {k + 1}, row {row}: {m}")
    if final_states:
        torch.testing.assert_close(actual[1].float(), expected[1], rtol=0, atol=0)


def test_save_and_auto_load_round_trip(checkpoint, tmp_path):
    encoder, tokenizer = checkpoint
    lm = CoveForBidirectionalLM(encoder.config)
    lm.cove.load_state_dict(encoder.state_dict())
    lm.save_pretrained(tmp_path / "lm")
    tokenizer.save_pretrained(tmp_path / "lm")
    assert (tmp_path / "lm" / "model.safetensors").is_file() and (tmp_path / "lm" / "modeling_cove_bilm.py").is_file()
    config = json.loads((tmp_path / "lm" / "config.json").read_text())
    assert config["encoder_type"] == "bilm" and config["auto_map"]["AutoModelForPreTraining"].endswith(
        "CoveForBidirectionalLM")
    reloaded = AutoModelForPreTraining.from_pretrained(tmp_path / "lm")
    assert type(reloaded) is CoveForBidirectionalLM
    for name, tensor in lm.state_dict().items():
        torch.testing.assert_close(reloaded.state_dict()[name], tensor, rtol=0, atol=0, msg=name)
    plain = AutoModel.from_pretrained(tmp_path / "lm")  # the encoder alone
    assert type(plain) is CoveModel and isinstance(plain.encoder, CoveBiLMEncoder)
    batch = tokenizer(["the film is good", "bad"], padding=True, return_tensors="pt")
    with torch.no_grad():
        assert_reproduces(plain(**batch).last_hidden_state, encoder(**batch).last_hidden_state, "AutoModel")


def test_remote_code_load_without_the_package(checkpoint, tmp_path):
    encoder, tokenizer = checkpoint
    encoder.save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    batch = tokenizer(["the film is good", "bad plot"], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = encoder(**batch).last_hidden_state
    script = (
        "import sys, json, torch\n"
        "sys.modules['modeling_cove'] = None\n"
        "import transformers\n"
        f"path = {str(tmp_path / 'ckpt')!r}\n"
        "tok = transformers.AutoTokenizer.from_pretrained(path, trust_remote_code=True)\n"
        "model = transformers.AutoModel.from_pretrained(path, trust_remote_code=True).eval()\n"
        "batch = tok(['the film is good', 'bad plot'], padding=True, return_tensors='pt')\n"
        "with torch.no_grad():\n"
        "    out = model(input_ids=batch['input_ids'], attention_mask=batch['attention_mask']).last_hidden_state\n"
        "print(json.dumps({'module': type(model).__module__, 'encoder': type(model.encoder).__name__,\n"
        "                  'out': out.tolist()}))\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_MODULES_CACHE": str(tmp_path / "modules")}
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    info = json.loads(result.stdout.strip().splitlines()[-1])
    assert info["module"].startswith("transformers_modules.") and info["encoder"] == "CoveBiLMEncoder"
    assert_reproduces(torch.tensor(info["out"]), expected, "remote code")


def test_bcn_and_dcn_read_the_bilm_layers(checkpoint, tmp_path):
    encoder, tokenizer = checkpoint
    encoder.save_pretrained(tmp_path / "enc")
    batch = tokenizer(["the film is very good .", "bad plot"], padding=True, return_tensors="pt")
    with torch.no_grad():
        states = encoder(**batch, output_hidden_states=True).hidden_states
        for bcn_input in ("scalar_mix", "vectors+cove"):
            bcn = CoveForSequenceClassification.from_pretrained(tmp_path / "enc", num_labels=2, bcn_input=bcn_input,
                                                                cove_output="both").eval()
            assert isinstance(bcn.cove.encoder, CoveBiLMEncoder)
            read = bcn.compute_cove_hidden_states(**batch)
            for k in bcn.layer_indices:
                torch.testing.assert_close(read[k], states[k], rtol=0, atol=0)
            assert bcn(**batch).logits.shape == (2, 2)
        pair = tokenizer(["is the film good ?"], ["the film is very good ."], return_tensors="pt")
        dcn = CoveForQuestionAnswering.from_pretrained(tmp_path / "enc", dcn_input="vectors+cove").eval()
        features = dcn.compute_cove_features(**pair)
        question = tokenizer(["is the film good ?"], return_tensors="pt")
        length = question["input_ids"].shape[1]
        torch.testing.assert_close(features[0, :length], encoder(**question).last_hidden_state[0], rtol=0, atol=0)
        assert dcn(**pair).start_logits.shape == pair["input_ids"].shape


def test_feature_cache_holds_the_bilm_layers(checkpoint, tmp_path):
    """The frozen-feature cache runs a biLM encoder as it runs the MT-LSTM: the rows it stores are the layers."""
    from modeling_cove.feature_cache import compute_features, feature_cache_key

    encoder, tokenizer = checkpoint
    encoder.save_pretrained(tmp_path / "enc")
    bcn = CoveForSequenceClassification.from_pretrained(tmp_path / "enc", num_labels=2, cove_output="both").eval()
    texts = ["the film is very good .", "bad plot", "not good and not bad actors ."]
    rows = {"input_ids": tokenizer(texts)["input_ids"]}
    cached = compute_features(bcn, rows, batch_size=2)
    with torch.no_grad():
        for i, text in enumerate(texts):
            states = encoder(**tokenizer([text], return_tensors="pt"), output_hidden_states=True).hidden_states
            torch.testing.assert_close(cached[i], torch.cat([states[1][0], states[2][0]], dim=-1), rtol=0, atol=7e-8)
    other = CoveForSequenceClassification.from_pretrained(tmp_path / "enc", num_labels=2, cove_output="both")
    torch.nn.init.zeros_(other.cove.encoder.backward_layers[0].weight_hh_l0)
    assert feature_cache_key(bcn, rows) != feature_cache_key(other, rows)  # the biLM's weights key the cache


# ----------------------------------------------------------------------------------------------------------------
# The pretraining loss
# ----------------------------------------------------------------------------------------------------------------


def full_log_softmax(softmax: torch.nn.AdaptiveLogSoftmaxWithLoss, states: torch.Tensor) -> torch.Tensor:
    """The adaptive softmax's distribution over the whole vocabulary, by hand: the head's log-softmax over the
    shortlist and one entry per tail cluster; a tail word's log-probability = its cluster's entry + its log-softmax
    within the cluster."""
    head = torch.log_softmax(softmax.head(states), dim=-1)  # (N, shortlist + clusters)
    parts = [head[:, :softmax.shortlist_size]]
    for i, tail in enumerate(softmax.tail):
        parts.append(head[:, softmax.shortlist_size + i:softmax.shortlist_size + i + 1]
                     + torch.log_softmax(tail(states), dim=-1))
    return torch.cat(parts, dim=-1)  # (N, V)


@torch.no_grad()
def hand_nll(lm, out, labels: torch.Tensor, mask: torch.Tensor, direction: str) -> tuple:
    """(mean NLL, count) of `direction` by hand: every real position t whose neighbour t + 1 (forward) or t - 1
    (backward) is a real token with a label, scored with the full distribution over the vocabulary."""
    state, step = (out.forward_hidden_state, 1) if direction == "forward" else (out.backward_hidden_state, -1)
    softmax = lm.output_layer(direction)
    nll, count = 0.0, 0
    for row in range(labels.shape[0]):
        for t in range(labels.shape[1]):
            target = t + step
            if not mask[row, t] or not 0 <= target < labels.shape[1] or not mask[row, target]:
                continue
            if labels[row, target] == -100:
                continue
            log_probs = full_log_softmax(softmax, state[row, t].unsqueeze(0))[0]
            torch.testing.assert_close(torch.logsumexp(log_probs, 0), torch.tensor(0.0), atol=1e-6, rtol=0)
            nll -= float(log_probs[labels[row, target]])
            count += 1
    return nll / count, count


@pytest.mark.parametrize("tie", [True, False])
def test_loss_equals_a_hand_computation(checkpoint, tie):
    encoder, tokenizer = checkpoint
    config = CoveConfig.from_dict({**encoder.config.to_dict(), "bilm_tie_softmax": tie})
    torch.manual_seed(4)
    lm = CoveForBidirectionalLM(config).eval()
    lm.cove.load_state_dict(encoder.state_dict())
    batch = tokenizer(["the film is very good .", "bad plot", "not good actors"], padding=True, return_tensors="pt")
    labels = batch["input_ids"].clone()
    labels[0, 2] = -100  # not a target in either direction
    with torch.no_grad():
        out = lm(**batch, labels=labels)
    expected = {}
    for direction in ("forward", "backward"):
        expected[direction], count = hand_nll(lm, out, labels, batch["attention_mask"].bool(), direction)
        assert int(getattr(out, f"{direction}_num_tokens")) == count
        assert float(getattr(out, f"{direction}_loss")) == pytest.approx(expected[direction], abs=2e-6, rel=0)
    assert float(out.loss) == pytest.approx((expected["forward"] + expected["backward"]) / 2, abs=2e-6, rel=0)
    assert (lm.backward_softmax is None) == tie
    with torch.no_grad():
        torch.testing.assert_close(lm.log_probs(out.forward_hidden_state[:1, :2]),
                                   full_log_softmax(lm.softmax, out.forward_hidden_state[0, :2]).unsqueeze(0),
                                   rtol=0, atol=0)


def test_loss_trains_the_encoder_and_keeps_the_vectors(checkpoint):
    encoder, tokenizer = checkpoint
    lm = CoveForBidirectionalLM(CoveConfig.from_dict({**encoder.config.to_dict(), "freeze_encoder": False}))
    lm.cove.load_state_dict(encoder.state_dict())
    batch = tokenizer(["the film is very good .", "bad plot"], padding=True, return_tensors="pt")
    lm(**batch, labels=batch["input_ids"]).loss.backward()
    assert lm.cove.embeddings.weight.grad is None  # frozen word vectors
    assert all(p.grad is not None for p in lm.cove.encoder.parameters())
    assert lm.softmax.head.weight.grad is not None  # (a tail cluster gets one only when a target is in it)
    as_tuple = lm(**batch, labels=batch["input_ids"], return_dict=False)
    assert torch.equal(as_tuple[0], lm(**batch, labels=batch["input_ids"]).loss)


def test_bad_inputs_are_named(checkpoint):
    encoder, tokenizer = checkpoint
    lm = CoveForBidirectionalLM(encoder.config)
    batch = tokenizer(["the film"], return_tensors="pt")
    with pytest.raises(ValueError, match="labels must have the inputs' shape"):
        lm(**batch, labels=batch["input_ids"][:, :1])
    with pytest.raises(ValueError, match=r"token ids in \[0, 16\)"):
        lm(**batch, labels=batch["input_ids"] + 100)
    with pytest.raises(TypeError, match="labels must be integer"):
        lm(**batch, labels=batch["input_ids"].float())
    with pytest.raises(TypeError, match="unexpected keyword"):
        lm(**batch, bogus=1)
    with pytest.raises(ValueError, match="encoder_type='bilm'"):
        CoveForBidirectionalLM(tiny_config(encoder_type="mt_lstm"))
    with pytest.raises(ValueError, match="direction"):
        lm.output_layer("sideways")


def test_elmo_input_is_the_vectors_then_the_mix(checkpoint, tmp_path):
    """bcn_input="vectors+scalar_mix": ELMo's [x; gamma * sum_k s_k h_k] over {[x; x], layer 1, layer 2}."""
    encoder, tokenizer = checkpoint
    encoder.save_pretrained(tmp_path / "enc")
    bcn = CoveForSequenceClassification.from_pretrained(tmp_path / "enc", num_labels=2,
                                                        bcn_input="vectors+scalar_mix").eval()
    assert bcn.config.feature_layout("bcn").names == ("word_vectors", "scalar_mix")
    batch = tokenizer(["the film is very good .", "bad plot"], padding=True, return_tensors="pt")
    with torch.no_grad():
        torch.nn.init.normal_(bcn.scalar_mix.scalar_weights)
        states = encoder(**batch, output_hidden_states=True).hidden_states
        inputs = bcn.bcn_inputs(batch["input_ids"], batch["attention_mask"], states)
        weights = torch.softmax(bcn.scalar_mix.scalar_weights, 0)
        mix = bcn.scalar_mix.gamma * sum(w * h for w, h in zip(weights, [torch.cat([states[0]] * 2, -1),
                                                                         *states[1:]]))
        torch.testing.assert_close(inputs, torch.cat([states[0], mix], dim=-1), rtol=0, atol=0)
        assert bcn(**batch).logits.shape == (2, 2)
