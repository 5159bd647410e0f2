"""Foundation tests: CoveModel against a hand-written reference of the original encoder, conversion of weights in the
original Salesforce layout, padding consistency, save/load, Auto classes (offline Hub cache, remote code), bad input."""

import copy
import functools
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import modeling_cove  # noqa: F401  (registers the Auto classes)
from modeling_cove import CoveConfig, CoveModel, lstm_kernels
from modeling_cove.configuration_cove import FeatureLayout
from modeling_cove.modeling_cove import assemble_features
from modeling_cove.build import convert_salesforce_state_dict, create_cove_checkpoint, salesforce_shapes
from modeling_cove.lstm_kernels import bf16_lstm_kernel_available
from modeling_cove.tokenization_cove import SPECIAL_TOKENS

from conftest import REPO, assert_same_weights
from hf_cache import build_offline_cache, offline_env

WORDS = ["the", "cat", "sat", "on", "mat", ".", "a", "dog", "ran", "far", "away", "!"]
# a row against itself run alone, one LSTM strategy against another: measured at most 2.2e-8 on a Zen 4 (MKL's AVX2
# kernels round differently, by about 1e-7)
SAME_ROWS = 1e-6


def original_layout_state_dict(seed=0, dim=300, hidden=300):
    """Random tensors in exactly the released `wmtlstm-*.pth` layout: the state dict of nn.LSTM(300, 300, 2, bidir)."""
    torch.manual_seed(seed)
    lstm = nn.LSTM(dim, hidden, num_layers=2, bidirectional=True)
    for p in lstm.parameters():
        nn.init.uniform_(p, -0.3, 0.3)
    return {k: v.clone() for k, v in lstm.state_dict().items()}


def reference_forward(state_dict, vectors, lengths, residual=False, layer0=False):
    """The original encoder, written out: sort by length -> pack -> nn.LSTM -> unpack -> unsort; zero padding.
    layer0 runs layer 1 alone as a 1-layer LSTM with the layer-0 weights (what salesforce/cove did in 2018)."""
    dim = vectors.shape[-1]
    hidden = state_dict["weight_hh_l0"].shape[1]
    full = nn.LSTM(dim, hidden, num_layers=2, bidirectional=True, batch_first=True)
    full.load_state_dict(state_dict)
    first = nn.LSTM(dim, hidden, num_layers=1, bidirectional=True, batch_first=True)
    first.load_state_dict({k: v for k, v in state_dict.items() if "_l0" in k})
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    sorted_vectors = vectors[order]
    sorted_lengths = [lengths[i] for i in order]
    total = vectors.shape[1]

    def run(lstm):
        packed = pack_padded_sequence(sorted_vectors, sorted_lengths, batch_first=True)
        out, _ = lstm(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=total)
        unsorted = torch.empty_like(out)
        unsorted[order] = out
        return unsorted

    outputs = []
    if residual:
        outputs.append(vectors)
    if layer0:
        outputs.append(run(first))
    outputs.append(run(full))
    return torch.cat(outputs, dim=-1)


def write_vectors(path, words, dim, seed=1):
    g = torch.Generator().manual_seed(seed)
    table = torch.randn(len(words), dim, generator=g)
    with open(path, "w", encoding="utf-8") as f:
        for word, row in zip(words, table):
            f.write(word + " " + " ".join(f"{v:.5f}" for v in row.tolist()) + "\n")
    return {w: torch.tensor([float(f"{v:.5f}") for v in row.tolist()]) for w, row in zip(words, table)}


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A small CoVe checkpoint (8-d vectors, hidden 4) saved with the tokenizer."""
    torch.manual_seed(0)
    vectors = torch.randn(len(SPECIAL_TOKENS) + len(WORDS), 8)
    model, tokenizer = create_cove_checkpoint(WORDS, vectors, hidden_size=4, include_word_vectors=True,
                                              cove_output="both")
    path = tmp_path_factory.mktemp("ckpt") / "cove-tiny"
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, model, tokenizer


# ---------------------------------------------------------------------------------------------------------------
# conversion of the original weights


@pytest.mark.parametrize("mode", ["top", "both", "with_word_vectors"])
def test_conversion_matches_reference_encoder(tmp_path, mode):
    state = original_layout_state_dict()
    assert len(state) == 16 and sum(v.numel() for v in state.values()) == 3_609_600
    weights = tmp_path / "wmtlstm-test.pth"
    torch.save(state, weights)
    words = ["the", "cat", "sat", "on", "mat", ".", "unseen"]
    table = write_vectors(tmp_path / "glove.txt", words[:-1], 300)  # "unseen" has no vector -> zero row
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    out = tmp_path / "hf"
    args = ["--weights", str(weights), "--vectors", str(tmp_path / "glove.txt"), "--vocab-file",
            str(tmp_path / "vocab.txt"), "--output-dir", str(out)]
    if mode == "both":
        args += ["--cove-output", "both"]
    if mode == "with_word_vectors":
        args += ["--include-word-vectors"]
    if mode == "top":  # as a user runs it
        script = Path(__file__).resolve().parents[1] / "scripts" / "convert_salesforce_cove.py"
        subprocess.run([sys.executable, str(script), *args], check=True, capture_output=True)
    else:  # the same command's main(argv), in this process
        from modeling_cove.training.commands.convert_salesforce import main

        main(args)

    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(out).eval()
    tokenizer = AutoTokenizer.from_pretrained(out)
    sentences = ["the cat sat on the mat .", "the cat", "unseen cat sat ."]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        ours = model(**batch).last_hidden_state

    ids = [tokenizer(s)["input_ids"] for s in sentences]
    lengths = [len(i) for i in ids]
    vectors = torch.zeros(len(sentences), max(lengths), 300)
    for b, sentence_ids in enumerate(ids):
        for t, token_id in enumerate(sentence_ids):
            word = tokenizer.convert_ids_to_tokens(token_id)
            vectors[b, t] = table.get(word, torch.zeros(300))
    reference = reference_forward(state, vectors, lengths, residual=mode == "with_word_vectors", layer0=mode == "both")
    assert ours.shape == reference.shape == (3, 7, model.config.output_size)
    # on more than one thread the batch runs unpacked (oneDNN), the reference packed: float32 rounding apart
    assert (ours - reference).abs().max().item() <= 1e-5


def test_conversion_rejects_wrong_keys_and_shapes():
    config = CoveConfig()
    state = original_layout_state_dict()
    bad_shape = dict(state, weight_ih_l1=torch.zeros(1200, 300))
    with pytest.raises(ValueError, match=r"weight_ih_l1: checkpoint shape \(1200, 300\) != expected shape \(1200, 600\)"):
        convert_salesforce_state_dict(bad_shape, config)
    missing = {k: v for k, v in state.items() if k != "bias_hh_l0_reverse"}
    with pytest.raises(ValueError, match="missing keys \\['bias_hh_l0_reverse'\\]"):
        convert_salesforce_state_dict(missing, config)
    extra = dict(state, **{"decoder.weight": torch.zeros(3)})
    with pytest.raises(ValueError, match="unexpected keys \\['decoder.weight'\\]"):
        convert_salesforce_state_dict(extra, config)
    # DataParallel / module prefixes are accepted and renamed to the plain `encoder.rnn.` prefix
    renamed = convert_salesforce_state_dict({"module." + k: v for k, v in state.items()}, config)
    assert sorted(renamed) == sorted("encoder.rnn." + k for k in salesforce_shapes())
    assert set(renamed) <= set(CoveModel(CoveConfig(vocab_size=5)).state_dict())


def test_corrupted_weight_files_give_clear_errors(tmp_path):
    from modeling_cove.build import load_salesforce_state_dict

    bad = tmp_path / "broken.pth"
    bad.write_bytes(b"this is not a torch file")
    with pytest.raises(ValueError, match="could not read .*broken.pth"):
        load_salesforce_state_dict(bad)
    # a pickled module object is refused by weights_only=True
    torch.save(nn.LSTM(3, 3), tmp_path / "module.pth")
    with pytest.raises(ValueError, match="weights_only=True"):
        load_salesforce_state_dict(tmp_path / "module.pth")


# ---------------------------------------------------------------------------------------------------------------
# the encoder itself


@pytest.mark.parametrize("final_states", [False, True])
def test_batch_of_mixed_lengths_equals_each_sentence_alone(tiny_checkpoint, final_states):
    _, model, tokenizer = tiny_checkpoint
    sentences = ["the cat sat on the mat .", "a dog", "the dog ran far away !", "cat", "the cat sat on ."]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        together = model(**batch, output_hidden_states=True, output_final_states=final_states)
        for i, sentence in enumerate(sentences):
            alone = model(**tokenizer([sentence], return_tensors="pt"), output_hidden_states=True,
                          output_final_states=final_states)
            n = alone.last_hidden_state.shape[1]
            assert (together.last_hidden_state[i, :n] - alone.last_hidden_state[0]).abs().max() <= SAME_ROWS
            assert together.last_hidden_state[i, n:].abs().sum() == 0  # padding is zero
            for layer_batch, layer_alone in zip(together.hidden_states, alone.hidden_states):
                assert (layer_batch[i, :n] - layer_alone[0]).abs().max() <= SAME_ROWS
            if final_states:
                assert (together.final_hidden_state[i] - alone.final_hidden_state[0]).abs().max() <= SAME_ROWS
                assert (together.final_cell_state[i] - alone.final_cell_state[0]).abs().max() <= SAME_ROWS
            else:
                assert together.final_hidden_state is None and together.final_cell_state is None


def test_output_layout_and_hidden_states(tiny_checkpoint):
    _, model, tokenizer = tiny_checkpoint
    batch = tokenizer(["the cat sat ."], return_tensors="pt")
    with torch.no_grad():
        out = model(**batch, output_hidden_states=True, output_final_states=True)
    vectors, layer1, layer2 = out.hidden_states
    # include_word_vectors + cove_output="both": [GloVe; layer 1; layer 2] (eq. 6 with the original layer0 option)
    assert torch.equal(out.last_hidden_state, torch.cat([vectors, layer1, layer2], dim=-1))
    assert model.config.output_size == 8 + 8 + 8
    assert torch.equal(vectors[0], model.embeddings.weight[batch["input_ids"][0]])
    # the MT-LSTM is the plain 2-layer biLSTM
    with torch.no_grad():
        reference, _ = model.encoder.rnn(vectors)
    assert (reference - layer2).abs().max() <= SAME_ROWS
    # final states = last forward step and first backward step of each layer
    assert torch.equal(out.final_hidden_state[0, 1, :4], layer2[0, -1, :4])
    assert torch.equal(out.final_hidden_state[0, 1, 4:], layer2[0, 0, 4:])


def test_oov_and_padding_rows_are_zero_and_frozen(tiny_checkpoint):
    _, model, tokenizer = tiny_checkpoint
    assert model.embeddings.weight[tokenizer.pad_token_id].abs().sum() == 0
    assert model.embeddings.weight[tokenizer.unk_token_id].abs().sum() == 0
    assert not model.embeddings.weight.requires_grad  # freeze_embeddings=True by default
    assert not any(p.requires_grad for p in model.encoder.parameters())  # freeze_encoder=True by default
    trainable = CoveModel(CoveConfig(vocab_size=10, word_vector_dim=4, hidden_size=3, freeze_encoder=False))
    assert all(p.requires_grad for p in trainable.encoder.parameters())


def test_save_load_bit_exact_and_deterministic(tiny_checkpoint, tmp_path):
    path, model, tokenizer = tiny_checkpoint
    from transformers import AutoModel

    loaded = AutoModel.from_pretrained(path).eval()
    assert type(loaded) is CoveModel
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    batch = tokenizer(["the cat sat on the mat .", "a dog ran"], padding=True, return_tensors="pt")
    with torch.no_grad():
        first = loaded(**batch).last_hidden_state
        second = loaded(**batch).last_hidden_state
        original = model(**batch).last_hidden_state
    assert torch.equal(first, second) and torch.equal(first, original)
    assert (path / "model.safetensors").exists() and not list(path.glob("*.bin"))


def test_feature_extraction_pipeline(tiny_checkpoint):
    path, model, tokenizer = tiny_checkpoint
    from transformers import pipeline

    extractor = pipeline("feature-extraction", model=str(path))
    features = extractor("the cat sat .", return_tensors=True)
    with torch.no_grad():
        expected = model(**tokenizer(["the cat sat ."], return_tensors="pt")).last_hidden_state
    assert torch.equal(features, expected)


FEATURE_TEXTS = ["the cat sat on the mat .", "a dog", "the dog ran far away !", "", "cat", "a cat sat .",
                 "the cat sat on the mat .", "dog ran"]


@pytest.mark.parametrize("batch_size", [1, 3, 8])
def test_cove_feature_extraction_pipeline_equals_each_text_alone_in_input_order(tiny_checkpoint, batch_size):
    """The length-sorting pipeline: every result is the text's own tokens, as the model gives them for the text
    alone (hand-run below), in the input order, whatever the batch size; an empty text gives (1, 0, D)."""
    path, model, tokenizer = tiny_checkpoint
    from transformers import pipeline

    from modeling_cove import CoveFeatureExtractionPipeline

    extractor = pipeline("cove-feature-extraction", model=str(path))
    assert type(extractor) is CoveFeatureExtractionPipeline
    assert type(pipeline("feature-extraction", model=str(path))) is not CoveFeatureExtractionPipeline  # stock kept
    features = extractor(FEATURE_TEXTS, batch_size=batch_size, return_tensors=True)
    as_lists = extractor(tuple(FEATURE_TEXTS), batch_size=batch_size)
    assert len(features) == len(as_lists) == len(FEATURE_TEXTS)
    for text, got, listed in zip(FEATURE_TEXTS, features, as_lists):
        ids = tokenizer([text], return_tensors="pt")
        if ids["input_ids"].shape[1] == 0:
            assert got.shape == (1, 0, model.config.output_size) and listed == [[]]
            continue
        with torch.no_grad():
            alone = model(**ids).last_hidden_state  # (1, T_i, D)
        assert got.shape == alone.shape
        assert torch.equal(got, alone), text
        assert torch.equal(torch.tensor(listed), alone)
    single = extractor(FEATURE_TEXTS[0], return_tensors=True)  # one text: the stock code path
    assert torch.equal(single, features[0])
    with pytest.raises(ValueError, match="no tokens"):
        extractor("")
    assert extractor([]) == []  # a list in, as many results out
    assert extractor([""]) == [[[]]] and extractor(["", FEATURE_TEXTS[0]])[0] == [[]]  # a list of one as of more
    # truncation as a keyword beside tokenize_kwargs, as the stock pipeline takes it; the caller's dict untouched
    cut = {"max_length": 3}
    short = extractor(FEATURE_TEXTS[:2], truncation=True, tokenize_kwargs=cut, return_tensors=True)
    assert [f.shape[1] for f in short] == [3, 2] and cut == {"max_length": 3}  # ("a dog": 2 tokens)
    with pytest.raises(TypeError, match=r"item\(s\) \[1\] of 2 are not strings \(the first: None\)"):
        extractor([FEATURE_TEXTS[0], None])


# ---------------------------------------------------------------------------------------------------------------
# loading as users type it


def run_python(code: str, env: dict, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=240)


def test_auto_model_from_hub_id_offline_cache_with_and_without_package(tiny_checkpoint, tmp_path):
    path, model, tokenizer = tiny_checkpoint
    hf_home = tmp_path / "hf_home"
    build_offline_cache(hf_home, "org/cove-test", path)
    batch = tokenizer(["the cat sat on the mat .", "a dog"], padding=True, return_tensors="pt")
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
    torch.save(expected, tmp_path / "expected.pt")
    env = offline_env(hf_home)
    common = f"""
        import torch
        from transformers import AutoModel, AutoTokenizer
        tok = AutoTokenizer.from_pretrained("org/cove-test")
        batch = tok(["the cat sat on the mat .", "a dog"], padding=True, return_tensors="pt")
        with torch.no_grad():
            out = enc(**batch).last_hidden_state
        expected = torch.load({str(tmp_path / 'expected.pt')!r}, weights_only=True)
        assert torch.equal(out, expected), (out - expected).abs().max()
        print("OK", type(enc).__module__)
    """
    code_pkg = ("import modeling_cove\nfrom transformers import AutoModel\n"
                "enc = AutoModel.from_pretrained('org/cove-test').eval()\n") + textwrap.dedent(common)
    result = run_python(code_pkg, env, tmp_path)
    assert result.returncode == 0 and "OK modeling_cove.modeling_cove" in result.stdout, result.stderr[-3000:]
    # a fresh process in which modeling_cove cannot be imported: only trust_remote_code
    code_remote = ("import sys\nsys.modules['modeling_cove'] = None\nfrom transformers import AutoModel\n"
                   "enc = AutoModel.from_pretrained('org/cove-test', trust_remote_code=True).eval()\n"
                   ) + textwrap.dedent(common)
    result = run_python(code_remote, env, tmp_path)
    assert result.returncode == 0 and "OK transformers_modules" in result.stdout, result.stderr[-3000:]


def test_saved_config_carries_full_auto_map(tiny_checkpoint):
    path, _, _ = tiny_checkpoint
    config = json.loads((path / "config.json").read_text())
    assert config["model_type"] == "cove"
    auto_map = config["auto_map"]
    assert auto_map["AutoConfig"] == "configuration_cove.CoveConfig"
    assert auto_map["AutoModel"] == "modeling_cove.CoveModel"
    for ref in auto_map.values():  # every advertised class ships with its code file
        assert (path / (ref.split(".")[0] + ".py")).exists(), ref
    for head in ("modeling_cove_bcn.py", "modeling_cove_dcn.py", "modeling_cove_mt.py"):
        if (REPO / "modeling_cove" / head).exists():
            assert any(ref.startswith(head[:-3] + ".") for ref in auto_map.values()), head


# ---------------------------------------------------------------------------------------------------------------
# bad input


def test_bad_inputs_give_clear_errors_or_documented_results(tiny_checkpoint):
    _, model, tokenizer = tiny_checkpoint
    # empty string / whitespace only: the tokenizer gives no tokens and the model refuses an empty batch clearly
    for text in ["", "   \t "]:
        encoded = tokenizer([text], return_tensors="pt")
        assert encoded["input_ids"].shape == (1, 0)
        with pytest.raises(ValueError, match="produced no tokens"):
            model(**encoded)
    # a batch with one empty item: that row is all zeros (documented), the others are unchanged
    batch = tokenizer(["the cat sat .", ""], padding=True, return_tensors="pt")
    with torch.no_grad():
        out = model(**batch).last_hidden_state
        alone = model(**tokenizer(["the cat sat ."], return_tensors="pt")).last_hidden_state
    assert out[1].abs().max() == 0 and torch.equal(out[0], alone[0])
    with torch.no_grad():  # and zero final states (the MT decoder starts from them), the others' as alone
        states = model(**batch, output_final_states=True)
        alone_states = model(**tokenizer(["the cat sat ."], return_tensors="pt"), output_final_states=True)
    for got, reference in ((states.final_hidden_state, alone_states.final_hidden_state),
                           (states.final_cell_state, alone_states.final_cell_state)):
        assert got[1].abs().max() == 0 and got[0].abs().max() > 0
        assert torch.allclose(got[0], reference[0], rtol=0, atol=1e-7)
    # ids of a dtype nn.Embedding does not take: a clear error, not one inside torch; int32 runs
    with pytest.raises(TypeError, match="int64 or int32"):
        model(input_ids=batch["input_ids"].to(torch.int16))
    with torch.no_grad():
        as_int32 = model(input_ids=batch["input_ids"].int(), attention_mask=batch["attention_mask"])
        assert torch.equal(as_int32.last_hidden_state, model(**batch).last_hidden_state)
    # all-OOV sentence: every token is <unk> with a zero vector; CoVe still runs (the LSTM sees zero inputs)
    oov = tokenizer(["zyzzyva quux"], return_tensors="pt")
    assert oov["input_ids"].tolist() == [[tokenizer.unk_token_id] * 2]
    with torch.no_grad():
        oov_out = model(**oov, output_hidden_states=True)
    assert oov_out.hidden_states[0].abs().max() == 0 and oov_out.hidden_states[2].abs().max() > 0
    # longer than model_max_length: truncation=True cuts to the limit; the encoder itself has no length limit
    long_text = " ".join(["cat"] * (tokenizer.model_max_length + 10))
    truncated = tokenizer([long_text], truncation=True, return_tensors="pt")
    assert truncated["input_ids"].shape[1] == tokenizer.model_max_length
    # ids outside the vocabulary (tokenizer/checkpoint mismatch), wrong rank, left padding
    with pytest.raises(ValueError, match="outside \\[0, 16\\)"):
        model(input_ids=torch.tensor([[1, 99]]))
    with pytest.raises(ValueError, match="shape \\(batch, time\\)"):
        model(input_ids=torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="right-padded"):
        model(input_ids=torch.tensor([[0, 5, 6]]), attention_mask=torch.tensor([[0, 1, 1]]))
    with pytest.raises(TypeError, match="integer token ids"):
        model(input_ids=torch.tensor([[0.5, 1.0]]))
    # the tokenizer called without return_tensors="pt": lists (and NumPy arrays) named, not failing in the forward
    listed = tokenizer(["the cat"])
    for name in ("input_ids", "attention_mask"):
        given = {**{key: torch.tensor(value) for key, value in listed.items()}, name: listed[name]}
        with pytest.raises(TypeError, match=f"{name} must be a torch.Tensor, got list .*return_tensors=\"pt\""):
            model(**given)


def test_wrong_vector_dimension_and_corrupted_checkpoint(tiny_checkpoint, tmp_path):
    path, _, _ = tiny_checkpoint
    from modeling_cove.vectors import build_embedding_matrix

    (tmp_path / "v.txt").write_text("cat 0.1 0.2 0.3\ndog 0.4 0.5 0.6\n")
    with pytest.raises(ValueError, match="line 1"):
        build_embedding_matrix(tmp_path / "v.txt", ["cat", "dog"], dim=300)
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    from transformers import AutoModel

    from modeling_cove import CoveForSequenceClassification

    # an OSError naming the file and what is wrong with it (safetensors' own error named no file), for the Auto
    # classes, the base model and the heads
    for load in (AutoModel.from_pretrained, CoveModel.from_pretrained, CoveForSequenceClassification.from_pretrained):
        with pytest.raises(OSError, match="model.safetensors .*the end is missing") as info:
            load(broken)
        assert str(broken / "model.safetensors") in str(info.value)
        assert type(info.value.__cause__).__module__.startswith("safetensors")


def test_encode_bucketed_batches_equal_each_sentence_alone_in_order(tiny_checkpoint):
    _, model, tokenizer = tiny_checkpoint
    sentences = ["the cat sat on the mat .", "a dog", "", "the dog ran far away !", "cat", "a cat sat", "dog ran ."]
    encoded = model.encode(sentences, tokenizer, batch_size=3)
    assert len(encoded) == len(sentences)
    for sentence, vectors in zip(sentences, encoded):
        ids = tokenizer([sentence], return_tensors="pt")
        if ids["input_ids"].shape[1] == 0:
            assert vectors.shape == (0, model.config.output_size)
            continue
        with torch.no_grad():
            alone = model(**ids).last_hidden_state[0]
        assert vectors.shape == alone.shape and (vectors - alone).abs().max() <= SAME_ROWS
    # token ids work too, and equal-length batches (unpacked path) give the same numbers
    ids = [tokenizer(s)["input_ids"] for s in ["the cat sat", "a dog ran", "dog sat ."]]
    same = model.encode(ids, batch_size=8)
    separate = model.encode(ids, batch_size=1)
    for a, b in zip(same, separate):
        assert (a - b).abs().max() <= SAME_ROWS
    with pytest.raises(TypeError, match="list of texts"):
        model.encode("the cat", tokenizer)
    # id rows as tensors equal lists; every item is checked, not only the first, and named by position
    as_tensors = model.encode([torch.tensor(row) for row in ids], batch_size=8)
    as_arrays = model.encode([np.array(row) for row in ids], batch_size=8)
    assert all(torch.equal(a, b) and torch.equal(c, b) for a, c, b in zip(as_tensors, as_arrays, same))
    with pytest.raises(TypeError, match=r"item\(s\) \[1\] of 2 are not strings"):
        model.encode(["the cat", None], tokenizer)
    with pytest.raises(TypeError, match="item 0 is neither a text nor a sequence of token ids.*join them with spaces"):
        model.encode([["the", "cat"]], tokenizer)
    with pytest.raises(TypeError, match="item 1 is neither"):
        model.encode([ids[0], [4.0, 5.5]])


def test_encode_looks_up_vectors_time_major_and_returns_the_same(tiny_checkpoint, monkeypatch):
    """`encode`'s batches reach the encoder as (B, T, C) vectors that are time-major in memory (the kernels' layout:
    the encoder's transpose then copies nothing), padded and equal-length batches alike; the outputs equal forward's
    (batch-major lookup), GloVe columns included. Hidden states, which return the vectors, keep them contiguous."""
    _, model, tokenizer = tiny_checkpoint
    sentences = ["the cat sat on the mat .", "the dog ran far away !", "a dog", "the cat sat", "a dog ran"]
    layouts = []
    original = model.encoder.forward

    def record_layout(vectors, *args, **kwargs):
        layouts.append(vectors.transpose(0, 1).is_contiguous())  # time-major in memory
        return original(vectors, *args, **kwargs)

    monkeypatch.setattr(model.encoder, "forward", record_layout)
    encoded = model.encode(sentences, tokenizer, batch_size=2, num_workers=1)  # batches: lengths (7, 6), (3, 3), (2)
    assert layouts == [True, True, True]
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad():
        output = model(**batch, output_hidden_states=True)
    assert output.hidden_states[0].is_contiguous()
    for row, vectors in enumerate(encoded):
        expected = output.last_hidden_state[row, : len(vectors)]
        assert (vectors - expected).abs().max() <= SAME_ROWS
        assert torch.equal(vectors[:, : model.config.word_vector_dim], expected[:, : model.config.word_vector_dim])


SENTENCES = ["the cat sat on the mat .", "a dog", "", "the dog ran far away !", "cat", "a cat sat", "dog ran .",
             "the mat", "a dog sat on the mat", "far away"]


def test_encode_shares_batches_among_single_threaded_workers_on_cpu(tiny_checkpoint, monkeypatch):
    """With 2 intra-op threads, `encode` runs its batches on 2 host threads that each run with one intra-op thread,
    in inference mode and under the caller's autocast, on guided batches (the last ones shrink); results equal each
    input alone (and the one-worker path, whose batches are cut by size alone), in order; the caller's thread count
    is restored, for threads started later too."""
    import threading

    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model)  # autocast below fills the encoder's cast-weight cache: keep the shared one clean
    with torch.no_grad():
        alone = [model(**tokenizer([s], return_tensors="pt")).last_hidden_state[0] if tokenizer(s)["input_ids"]
                 else None for s in SENTENCES]
    seen = []
    original = model.encoder.forward

    def record_thread(*args, **kwargs):
        seen.append((threading.current_thread().name, torch.get_num_threads(), torch.is_inference_mode_enabled(),
                     torch.is_autocast_enabled("cpu")))
        return original(*args, **kwargs)

    monkeypatch.setattr(model.encoder, "forward", record_thread)
    # no floor of rows (10 inputs would make one batch): the guided cut alone
    monkeypatch.setattr(lstm_kernels, "length_bucketed_batches",
                        functools.partial(lstm_kernels.length_bucketed_batches, min_rows=1))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        # guided batches (token lengths, at most half the tokens still to batch): (7, 6) (6, 3) (3, 2) (2) (2) (1)
        # (0): 6 encoder calls (an empty batch needs none)
        encoded = model.encode(SENTENCES, tokenizer, batch_size=2, progress=True)
        workers = {name for name, *_ in seen}
        assert len(seen) == 6 and workers <= {"cove-encode-0", "cove-encode-1"}
        assert all(state == [1, True, False] for _, *state in seen)
        assert torch.get_num_threads() == 2
        started_later = []
        later = threading.Thread(target=lambda: started_later.append(torch.get_num_threads()))
        later.start()
        later.join()
        assert started_later == [2]
        seen.clear()
        one_worker = model.encode(SENTENCES, tokenizer, batch_size=2, num_workers=1)
        assert {name for name, *_ in seen} == {threading.current_thread().name}
        with torch.autocast("cpu", dtype=torch.bfloat16):
            seen.clear()
            bf16_workers = model.encode(SENTENCES, tokenizer, batch_size=2)
            assert len(seen) == 6 and all(state[-1] for state in seen)
            bf16_one = model.encode(SENTENCES, tokenizer, batch_size=2, num_workers=1)
    finally:
        torch.set_num_threads(threads)
    for vectors, single, reference, b16, b16_single in zip(encoded, one_worker, alone, bf16_workers, bf16_one):
        if reference is None:
            assert vectors.shape == single.shape == b16.shape == (0, model.config.output_size)
            continue
        assert vectors.shape == reference.shape and (vectors - reference).abs().max() <= SAME_ROWS
        torch.testing.assert_close(vectors, single, rtol=0, atol=0)  # other batches: equal up to rounding
        assert b16.dtype == b16_single.dtype
        assert (b16.float() - b16_single.float()).abs().max() <= 0.02 * reference.abs().max()
        assert (b16.float() - reference).abs().max() <= 0.05 * reference.abs().max()


def test_encode_workers_raise_the_first_error_and_reject_bad_counts(tiny_checkpoint, monkeypatch):
    """An exception in a worker stops the others at their next batch and is raised in the caller (thread count
    restored); `num_workers` below 1, not an int, or above 1 off the CPU, and `batch_size` below 1 or not an int,
    are clear errors before any work."""
    _, model, tokenizer = tiny_checkpoint
    for bad in (0, 2.5, True):
        with pytest.raises(ValueError, match="num_workers must be"):
            model.encode(SENTENCES, tokenizer, num_workers=bad)
    for bad in (0, -1, 8.0, None):
        with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
            model.encode(SENTENCES, tokenizer, batch_size=bad)
    with pytest.raises(ValueError, match="1 off the CPU; got 2 on meta"):
        copy.deepcopy(model).to("meta").encode(SENTENCES, tokenizer, num_workers=2)
    calls = []
    original = model.encoder.forward

    def fail_on_second(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("batch failed")
        return original(*args, **kwargs)

    monkeypatch.setattr(model.encoder, "forward", fail_on_second)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with pytest.raises(RuntimeError, match="batch failed"):
            model.encode(SENTENCES, tokenizer, batch_size=1)
        assert torch.get_num_threads() == 2
        assert 2 <= len(calls) < 9  # 9 batches with tokens: the ones after the error are never taken
    finally:
        torch.set_num_threads(threads)


def test_encode_on_single_call_devices_cuts_batches_by_size_and_equals_each_alone(tiny_checkpoint, monkeypatch):
    """Where the top layer runs as one packed call (CUDA; forced on CPU here), `encode` cuts its sorted batches by
    size alone (packing spends nothing on padding) and packs them without a sort (already longest first): results
    still equal each input alone, in order. A vocabulary mismatch is caught once on the host, with forward's
    message. cove_output="both" (layer 1 read: the per-layer path, unpacked) is cut by size too, and with the rows
    neither sorted nor segmented, as on a GPU, still equals each input alone."""
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model)
    model.config.cove_output = "top"
    sentences = ["the cat sat on the mat .", "a dog", "", "the dog ran far away !", "cat", "a cat sat", "dog ran ."]
    with torch.no_grad():
        alone = [model(**tokenizer([s], return_tensors="pt")).last_hidden_state[0] if tokenizer(s)["input_ids"]
                 else None for s in sentences]
    monkeypatch.setattr(lstm_kernels, "SINGLE_CALL_DEVICE_TYPES", ("cpu",))
    batch_sizes, packs = [], []
    original_batches, original_pack = lstm_kernels.length_bucketed_batches, lstm_kernels.pack
    monkeypatch.setattr(lstm_kernels, "length_bucketed_batches",
                        lambda *a, **k: [batch_sizes.append(len(b)) or b for b in original_batches(*a, **k)])
    monkeypatch.setattr(lstm_kernels, "pack", lambda *a: packs.append(original_pack(*a)) or packs[-1])
    encoded = model.encode(sentences, tokenizer, batch_size=4, num_workers=1)  # one worker: cut by size alone
    assert batch_sizes == [4, 3]  # lengths 7, 6, 3, 3 | 2, 1, 0: by size, not the 0.75 ratio
    assert packs and all(p.sorted_indices is None for p in packs)  # packed as they came: no sort, no index copy
    for vectors, reference in zip(encoded, alone):
        if reference is None:
            assert vectors.shape == (0, model.config.output_size)
        else:
            assert vectors.shape == reference.shape and (vectors - reference).abs().max() <= SAME_ROWS
    with pytest.raises(ValueError, match="outside \\[0, 16\\)"):
        model.encode([[1, 2], [99]])
    model.config.cove_output = "both"
    with torch.no_grad():
        alone = [model(**tokenizer([s], return_tensors="pt")).last_hidden_state[0] for s in sentences if s]
    monkeypatch.setattr(lstm_kernels, "SEGMENTED_DEVICE_TYPES", ())  # as on a GPU: unpacked rows unsorted, unsegmented
    batch_sizes.clear()
    encoded = model.encode(sentences, tokenizer, batch_size=4, num_workers=1)
    assert batch_sizes == [4, 3]  # the per-layer path too: by size (its padding is cut by time segments on CPU)
    for vectors, reference in zip([e for e, s in zip(encoded, sentences) if s], alone):
        assert vectors.shape == reference.shape and (vectors - reference).abs().max() <= SAME_ROWS


def test_pack_keeps_sorted_rows_in_place_and_sorts_others():
    from modeling_cove.lstm_kernels import pack

    x = torch.randn(3, 4, 2)
    in_order = pack(x, torch.tensor([4, 3, 1]))
    assert in_order.sorted_indices is None and in_order.batch_sizes.tolist() == [3, 2, 2, 1]
    shuffled = pack(x, torch.tensor([1, 4, 3]))
    assert shuffled.sorted_indices.tolist() == [1, 2, 0]
    assert torch.equal(shuffled.data[:3], x[[1, 2, 0], 0])


def test_length_bucketed_batches_sorted_near_equal_and_complete():
    from modeling_cove.lstm_kernels import length_bucketed_batches

    lengths = [5, 20, 19, 5, 0, 18, 14, 20, 6, 0]
    batches = length_bucketed_batches(lengths, batch_size=3)
    # longest first, stable among equals; a batch ends when full or when the next item is < 0.75 x its first
    assert batches == [[1, 7, 2], [5, 6], [8, 0, 3], [4, 9]]
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
    assert length_bucketed_batches([], batch_size=4) == []


def test_length_bucketed_batches_for_workers_shrink_to_a_share_of_what_is_left():
    """For W workers a batch of `min_rows` or more also ends before it would pass 1/W of the tokens not yet batched
    (guided scheduling): worked out by hand; with one worker the cut is by size and ratio alone."""
    from modeling_cove.lstm_kernels import length_bucketed_batches

    # no floor (min_rows=1). 80 tokens: a batch of up to 40, then 20 of the 40 left, 10 of 20, 5 of 10 (one item)
    assert length_bucketed_batches([10] * 8, batch_size=64, workers=2, min_rows=1) == [[0, 1, 2, 3], [4, 5], [6], [7]]
    # 3 workers, lengths 9, 6, 6, 3, 0, 0 (each 0 counted as 1) = 26 tokens: 9 + 6 > 26/3; 6 + 6 > 17/3; 6 + 3 > 11/3;
    # 3 + 1 > 5/3; 1 + 1 > 2/3: every item alone
    assert length_bucketed_batches([6, 0, 9, 3, 6, 0], batch_size=64, min_ratio=0.0, workers=3, min_rows=1) == [
        [2], [0], [4], [3], [1], [5]]
    # the size cap still applies: 3 of 80 tokens' share of 40; then 20 of 50's 25; 10 of 30's 15; 10; 10
    assert length_bucketed_batches([10] * 8, batch_size=3, workers=2, min_rows=1) == [[0, 1, 2], [3, 4], [5], [6], [7]]
    # the default floor of 8 rows: 20 of 400 tokens' 200; 10 of 200's 100; 8 of 100's 50 (the floor); the last 2
    assert [len(b) for b in length_bucketed_batches([10] * 40, batch_size=64, workers=2)] == [20, 10, 8, 2]
    lengths = [5, 20, 19, 5, 0, 18, 14, 20, 6, 0]
    assert length_bucketed_batches(lengths, 3, workers=1) == length_bucketed_batches(lengths, 3)
    # 28,160 tokens: full batches of 6,400 while half of what is left is more (14,080, 10,880, 7,680), then 44 of
    # 100 (under 8,960 / 2); the short items' batches shrink the same way down to one item
    lengths = [100] * 256 + [10] * 256
    batches = length_bucketed_batches(lengths, batch_size=64, min_ratio=0.0, workers=2, min_rows=1)
    assert [len(b) for b in batches[:4]] == [64, 64, 64, 44] and len(batches[-1]) == 1
    assert sorted(i for b in batches for i in b) == list(range(len(lengths)))


def test_plan_time_segments_minimises_the_cost_model():
    """Segments (start, end, rows) start at row ends and minimise sum of steps x (overhead + rows) + call cost;
    the costs below are worked out by hand (overhead 25 rows)."""
    from modeling_cove.lstm_kernels import plan_time_segments

    lengths = [100, 100, 100, 100, 60, 40, 20, 10]
    # one segment: 100 x 33 + 130 = 3430; cut at 40: 40 x 33 + 130 + 60 x 30 + 130 = 3380 (the least; at 60: 3400,
    # at 20: 3400, at 40 and 60: 3470)
    assert plan_time_segments(lengths, 100, 25, 130) == [(0, 40, 8), (40, 100, 5)]
    # calls for free: a cut at every row end never costs more
    assert plan_time_segments(lengths, 100, 25, 0) == [(0, 10, 8), (10, 20, 7), (20, 40, 6), (40, 60, 5),
                                                       (60, 100, 4)]
    # dear calls, or equal lengths: one segment of every row
    assert plan_time_segments(lengths, 100, 25, 10_000) == [(0, 100, 8)]
    assert plan_time_segments([5, 5], 5) == [(0, 5, 2)]
    # rows out of order: a segment keeps the prefix up to the last row still going (row 0 ended at 10)
    assert plan_time_segments([10, 100, 20], 100, 25, 0) == [(0, 10, 3), (10, 20, 3), (20, 100, 2)]


def segment_every_row_end(monkeypatch) -> list:
    """Make every row end a segment bound (no cost per call) and record the plans `lstm_kernels.run_unpacked` makes."""
    plans = []
    original = lstm_kernels.plan_time_segments
    monkeypatch.setattr(lstm_kernels, "plan_time_segments",
                        lambda lengths, time, **_: plans.append(original(lengths, time, call_rows=0)) or plans[-1])
    return plans


@pytest.mark.parametrize("segmented", [True, False], ids=["cpu", "gpu-like"])
def test_time_segments_equal_the_packed_path_in_values_and_gradients(tiny_checkpoint, monkeypatch, segmented):
    """Run in time segments (h and c carried, ended rows dropped) on rows given out of order (sorted inside and put
    back), the unpacked path must give what packing gives at every token of every layer (both directions), and a
    trainable encoder the same gradients. Off SEGMENTED_DEVICE_TYPES (a GPU; forced on CPU here) the same rows run
    unsorted, each direction in one call, with the same results."""
    if not segmented:
        monkeypatch.setattr(lstm_kernels, "SEGMENTED_DEVICE_TYPES", ())
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model).train()  # dropout is 0 in the tiny config: train mode changes no value
    for p in model.encoder.parameters():
        p.requires_grad_(True)
    sentences = ["a dog", "the cat sat on the mat .", "cat", "the dog ran far away !"]  # lengths 2, 7, 1, 6
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    lengths, real = batch["attention_mask"].sum(1), batch["attention_mask"].bool()
    vectors = model.embeddings(batch["input_ids"]) * batch["attention_mask"].unsqueeze(-1)
    plans = segment_every_row_end(monkeypatch)
    results = []
    for unpacked in (False, True):
        model.zero_grad()
        layers, _, _ = model.encoder(vectors, lengths, final_states=unpacked is False, unpacked=unpacked)
        sum((layer[real] * torch.linspace(-1, 1, layer.shape[-1])).sum() for layer in layers).backward()
        grads = [p.grad.clone() for p in model.encoder.parameters()]
        results.append(([layer[real].detach() for layer in layers], grads))
    if segmented:
        assert plans == [[(0, 1, 4), (1, 2, 3), (2, 6, 2), (6, 7, 1)]]  # rows sorted first; packing planned nothing
    else:
        assert plans == []  # one call per direction over the rows as given
    (packed_layers, packed_grads), (segmented_layers, segmented_grads) = results
    assert len(segmented_layers) == len(packed_layers) == model.config.num_hidden_layers
    for packed, segmented in zip(packed_layers + packed_grads, segmented_layers + segmented_grads):
        assert packed.abs().sum() > 0 and (packed - segmented).abs().max() <= SAME_ROWS


def test_encode_runs_a_mixed_batch_unpacked_and_equal_each_alone(tiny_checkpoint, monkeypatch, single_thread):
    """Lengths 7, 6, 2, 1 in batches of 8: one batch, cut by size alone, whose shortest row is 1/7 of its longest.
    `encode` runs it unpacked anyway (in time segments; forward alone on one thread under bf16 autocast packs it),
    and every input still equals itself run alone."""
    _, model, tokenizer = tiny_checkpoint
    sentences = ["the cat sat on the mat .", "the dog ran far away !", "a dog", "cat"]
    assert [len(tokenizer(s)["input_ids"]) for s in sentences] == [7, 6, 2, 1]
    with torch.no_grad():
        alone = [model(**tokenizer([s], return_tensors="pt")).last_hidden_state[0] for s in sentences]
    unpacked_runs = count_unpacked_runs(model, monkeypatch)
    encoded = model.encode(sentences, tokenizer, batch_size=8)
    assert len(unpacked_runs) == 1  # one batch, unpacked
    for vectors, reference in zip(encoded, alone):
        assert vectors.shape == reference.shape and (vectors - reference).abs().max() <= SAME_ROWS
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        model(**batch)  # forward on one thread under autocast packs it (fill 16 / 28 < UNPACKED_MIN_FILL)
    assert len(unpacked_runs) == 1
    with torch.no_grad():
        model(**batch)  # in float32 the segments share reordered weights (`prepacking_serves`): unpacked
    assert len(unpacked_runs) == 2


NEAR_EQUAL = ["the cat sat on the mat .", "the dog ran far away !", "a dog sat on the mat"]  # lengths 7, 6, 6


def count_strategy_calls(monkeypatch, name: str) -> list:
    """Records each run of the strategy `name` of `lstm_kernels.LSTM_IMPLEMENTATIONS`."""
    calls = []
    original = lstm_kernels.LSTM_IMPLEMENTATIONS[name]
    monkeypatch.setitem(lstm_kernels.LSTM_IMPLEMENTATIONS, name, lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


def count_unpacked_runs(model, monkeypatch) -> list:
    return count_strategy_calls(monkeypatch, "unpacked")


def test_unpacked_outputs_without_final_states_equal_packed(tiny_checkpoint, monkeypatch, single_thread):
    """Without final states (the default, config.output_final_states=False) a batch of near-equal lengths runs
    unpacked (each direction alone, backward reversed within its length): the outputs must equal the packed path's
    exactly where there are tokens, and be zero at padding. On one thread under bf16 autocast (no reordered weights
    for the segments) a batch that is mostly padding is packed."""
    _, model, tokenizer = tiny_checkpoint
    assert model.config.output_final_states is False
    unpacked_runs = count_unpacked_runs(model, monkeypatch)
    batch = tokenizer(NEAR_EQUAL, padding=True, return_tensors="pt")
    with torch.no_grad():
        packed = model(**batch, output_hidden_states=True, output_final_states=True)
        assert not unpacked_runs
        unpacked = model(**batch, output_hidden_states=True)
        assert len(unpacked_runs) == 1
        sparse = tokenizer(["the cat sat on the mat .", "a dog"], padding=True, return_tensors="pt")
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(**sparse)
        assert len(unpacked_runs) == 1  # lengths 7 and 2: fill 9 / 14 < UNPACKED_MIN_FILL, packed under autocast
    assert unpacked.final_hidden_state is None and unpacked.final_cell_state is None
    assert packed.final_hidden_state is not None
    assert (packed.last_hidden_state - unpacked.last_hidden_state).abs().max() <= SAME_ROWS
    for a, b in zip(packed.hidden_states, unpacked.hidden_states):
        assert (a - b).abs().max() <= SAME_ROWS
    padding = batch["attention_mask"] == 0
    assert padding.any() and unpacked.last_hidden_state[padding].abs().max() == 0


def test_the_packing_rule_and_an_unsorted_batch_run_unpacked_equal_packed(tiny_checkpoint, monkeypatch):
    """The default packing rule (`unpacked_by_default`): with more than one CPU thread every padded batch runs
    unpacked (sorted inside and cut in time segments), on one thread in float32 too; on a GPU, or a single CPU
    thread under bf16 autocast, only when its real tokens fill >= UNPACKED_MIN_FILL of it; in training on CPU from a
    mean length per row. A batch in arrival order
    (lengths 2, 7, 6, 6, 1: not sorted) run unpacked must equal the packed path at every token of every layer, and be
    zero at padding."""
    _, model, tokenizer = tiny_checkpoint
    rule = lstm_kernels.unpacked_by_default
    one_short, mostly_padding = torch.tensor([7, 6, 6, 2]), torch.tensor([7, 2])  # fill 0.75 and 9 / 14
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert rule(one_short, 7, torch.device("cpu")) and rule(mostly_padding, 7, torch.device("cpu"))
        assert rule(one_short, 7, torch.device("cuda")) and not rule(mostly_padding, 7, torch.device("cuda"))
        unpacked_runs = count_unpacked_runs(model, monkeypatch)
        batch = tokenizer(["a dog"] + NEAR_EQUAL + ["cat"], padding=True, return_tensors="pt")
        assert batch["attention_mask"].sum(1).tolist() == [2, 7, 6, 6, 1]
        with torch.no_grad():
            unpacked = model(**batch, output_hidden_states=True)
            assert len(unpacked_runs) == 1
            packed = model(**batch, output_hidden_states=True, output_final_states=True)
        torch.set_num_threads(1)
        assert rule(one_short, 7, torch.device("cpu")) and not rule(mostly_padding, 7, torch.device("cpu"))
        # training on CPU: unpacked from a mean length of UNPACKED_TRAINING_MIN_MEAN_LENGTH per row (one thread; more)
        for count, mean in zip((1, 2), lstm_kernels.UNPACKED_TRAINING_MIN_MEAN_LENGTH):
            torch.set_num_threads(count)
            assert rule(torch.tensor([mean + 3, mean - 3]), mean + 3, torch.device("cpu"), records_grad=True)
            assert not rule(torch.tensor([mean + 2, mean - 3]), mean + 2, torch.device("cpu"), records_grad=True)
            # a GPU keeps its fill rule in training
            assert not rule(torch.tensor([mean + 3, 1]), mean + 3, torch.device("cuda"), records_grad=True)
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(packed.hidden_states, unpacked.hidden_states):
        assert (a - b).abs().max() <= SAME_ROWS
    assert unpacked.last_hidden_state[batch["attention_mask"] == 0].abs().max() == 0


def test_unpacked_top_only_returns_the_top_layer_alone(tiny_checkpoint):
    """`lstm_kernels.run_unpacked` runs time-major and, asked for the top layer alone (`top_only`), builds no
    batch-major output for the layers below it: the one tensor it returns must equal the top of the full list, at
    every real token."""
    _, model, tokenizer = tiny_checkpoint
    batch = tokenizer(NEAR_EQUAL, padding=True, return_tensors="pt")
    lengths = batch["attention_mask"].sum(1)
    with torch.no_grad():
        vectors = model.embeddings(batch["input_ids"])
        every_layer, _, _ = model.encoder(vectors, lengths, final_states=False, unpacked=True)
        top, _, _ = model.encoder(vectors, lengths, final_states=False, top_only=True, unpacked=True)
    assert len(every_layer) == model.config.num_hidden_layers and len(top) == 1
    real = batch["attention_mask"].bool()
    assert torch.equal(top[0][real], every_layer[-1][real])


def test_encoder_writes_the_top_layer_into_a_column_slice_on_every_path(tiny_checkpoint, monkeypatch):
    """`CoveEncoder.forward(out=...)` with `out` a column slice of a wider tensor (as `CoveModel` passes its output):
    on the packed, uniform and unpacked paths (sorted and unsorted rows, in time segments) the top layer lands in
    those columns, every entry of them written (finite even at padding, which callers mask by product), the other
    columns untouched, and the value at each real token the same as without `out`; the list's last entry is `out`."""
    _, model, tokenizer = tiny_checkpoint
    plans = segment_every_row_end(monkeypatch)
    width = 2 * model.config.hidden_size
    cases = {"packed": (["a dog"] + NEAR_EQUAL + ["cat"], {"final_states": True}),
             "uniform": (["the cat sat", "a dog ran"], {"final_states": True}),
             "unpacked, sorted": (NEAR_EQUAL + ["a dog"], {"final_states": False, "unpacked": True}),
             "unpacked, unsorted": (["a dog"] + NEAR_EQUAL + ["cat"], {"final_states": False, "unpacked": True})}
    for name, (sentences, kwargs) in cases.items():
        batch = tokenizer(sentences, padding=True, return_tensors="pt")
        lengths, real = batch["attention_mask"].sum(1), batch["attention_mask"].bool()
        with torch.no_grad():
            vectors = model.embeddings(batch["input_ids"])
            expected, _, _ = model.encoder(vectors, lengths, **kwargs)
            wide = torch.full((*batch["input_ids"].shape, 3 + width + 2), float("nan"))
            layers, _, _ = model.encoder(vectors, lengths, out=wide[..., 3:3 + width], **kwargs)
        assert layers[-1].data_ptr() == wide[..., 3:].data_ptr(), name
        assert torch.isfinite(wide[..., 3:3 + width]).all(), name
        assert torch.isnan(wide[..., :3]).all() and torch.isnan(wide[..., 3 + width:]).all(), name
        assert torch.equal(wide[..., 3:3 + width][real], expected[-1][real]), name
    assert len(plans) == 4 and all(len(plan) > 1 for plan in plans)  # both unpacked cases ran in segments, twice
    with pytest.raises(ValueError, match="out must have shape"):
        model.encoder(vectors, lengths, out=torch.empty(1, 2, width))
    with pytest.raises(ValueError, match="out must be a column slice"):  # right shape, rows not one view
        model.encoder(vectors, lengths, out=torch.empty(vectors.shape[1], vectors.shape[0], width).transpose(0, 1))


def test_time_segments_set_the_rows_they_skip_to_zero(tiny_checkpoint):
    """`run_direction` in time segments: each segment writes its rows' steps, and the rows it leaves out (padding,
    past their ends) are set to exactly zero, not left as uninitialised memory."""
    _, model, _ = tiny_checkpoint
    torch.manual_seed(0)
    inputs = torch.randn(7, 4, model.config.word_vector_dim)  # (T, B, C), time-major
    segments = [(0, 1, 4), (1, 2, 3), (2, 6, 2), (6, 7, 1)]
    with torch.no_grad():
        stack = model.encoder.lstm_stack()
        weights = lstm_kernels.layer_weights(stack, 0)[:4]
        output = lstm_kernels.run_direction(stack, inputs, weights, segments)
        whole = lstm_kernels.run_direction(stack, inputs, weights)
    for start, end, rows in segments:
        assert torch.equal(output[start:end, rows:], torch.zeros_like(output[start:end, rows:]))
    assert torch.equal(output[:, 0], whole[:, 0])  # the row running all 7 steps is unchanged


@pytest.mark.parametrize("include_word_vectors", [True, False])
def test_the_concatenated_output_equals_its_parts_and_keeps_cat_dtypes_under_autocast(include_word_vectors):
    """`last_hidden_state` is one tensor the parts are written into (without hidden states, the encoder writes the
    top layer there itself): it must equal concatenating [word vectors;] layer 1; layer 2 from `hidden_states`, be
    zero at padding, and keep the dtype concatenating gives under bf16 autocast: fp32 with the fp32 word vectors or
    the fp32 padding mask in it, bf16 from the two layers alone."""
    torch.manual_seed(0)
    vectors = torch.randn(len(SPECIAL_TOKENS) + len(WORDS), 8)
    model, tokenizer = create_cove_checkpoint(WORDS, vectors, hidden_size=4, cove_output="both",
                                              include_word_vectors=include_word_vectors)
    model.eval()
    for sentences in (["a dog"] + NEAR_EQUAL, NEAR_EQUAL[1:]):  # padded; equal lengths
        batch = tokenizer(sentences, padding=True, return_tensors="pt")
        padding = batch["attention_mask"] == 0
        for autocast in (False, True):
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
                full = model(**batch, output_hidden_states=True)
                fast = model(**batch).last_hidden_state
            parts = list(full.hidden_states if include_word_vectors else full.hidden_states[1:])
            expected = torch.cat(parts, dim=-1)
            for output in (full.last_hidden_state, fast):
                assert output.dtype == expected.dtype and torch.equal(output, expected)
            bf16 = autocast and not include_word_vectors and not padding.any()
            assert expected.dtype == (torch.bfloat16 if bf16 else torch.float32)
            assert not padding.any() or fast[padding].abs().max() == 0


def test_assemble_features_puts_each_part_in_its_layout_columns():
    """Eq. 6's one assembler (the encoder, the BCN and the DCN call it): each part in the columns the layout gives,
    masked once at the end; into a given `out` (a part given as None is already there) or as a new tensor; a
    part the layout lacks is ignored; a missing one is a ValueError naming it."""
    layout = FeatureLayout.from_widths([("word_vectors", 2), ("first_layer", 3), ("top_layer", 3), ("char_ngrams", 1)])
    torch.manual_seed(0)
    parts = {name: torch.randn(2, 4, end - start) for name, start, end in layout.parts}
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.float32).unsqueeze(-1)
    unmasked = torch.zeros(2, 4, 9)
    unmasked[..., 0:2], unmasked[..., 2:5] = parts["word_vectors"], parts["first_layer"]
    unmasked[..., 5:8], unmasked[..., 8:9] = parts["top_layer"], parts["char_ngrams"]
    expected = unmasked * mask

    assert torch.equal(assemble_features(layout, parts, mask=mask), expected)
    assert torch.equal(assemble_features(layout, {**parts, "scalar_mix": torch.ones(2, 4, 7)}), unmasked)
    out = torch.full((2, 4, 9), float("nan"))
    out[..., 5:8] = parts["top_layer"]  # as the encoder writes its top layer into its columns itself
    assert assemble_features(layout, {**parts, "top_layer": None}, mask=mask, out=out) is out
    assert torch.equal(out, expected)
    only_top = FeatureLayout.from_widths([("top_layer", 3)])
    assert assemble_features(only_top, parts) is parts["top_layer"]
    with pytest.raises(ValueError, match="needs the parts \\['char_ngrams'\\]"):
        assemble_features(layout, {name: parts[name] for name in ("word_vectors", "first_layer", "top_layer")})
    with pytest.raises(ValueError, match="needs the parts \\['top_layer'\\]"):
        assemble_features(layout, {**parts, "top_layer": None})  # None only where `out` holds the part already


def test_unpacked_path_gives_the_packed_gradients(tiny_checkpoint):
    """A trainable encoder (freeze_encoder=False) gets the same gradients through the unpacked path (reversal by
    row index, garbage at padding masked) as through packing."""
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model).train()
    for p in model.encoder.parameters():
        p.requires_grad_(True)
    batch = tokenizer(NEAR_EQUAL, padding=True, return_tensors="pt")
    grads = []
    for final_states in (True, False):
        model.zero_grad()
        out = model(**batch, output_final_states=final_states).last_hidden_state
        (out * torch.linspace(-1, 1, out.shape[-1])).sum().backward()
        grads.append([p.grad.clone() for p in model.encoder.parameters()])
    for packed, unpacked in zip(*grads):
        assert packed.abs().sum() > 0
        assert (packed - unpacked).abs().max() <= SAME_ROWS


@pytest.mark.skipif(not bf16_lstm_kernel_available(),
                    reason="this CPU has no bf16 LSTM kernel (no AVX-512 bf16): the encoder runs its LSTMs in fp32 "
                           "under autocast and casts no weights")
def test_bf16_autocast_casts_frozen_weights_once_and_recasts_after_a_change(tiny_checkpoint, monkeypatch):
    """Under autocast the frozen encoder's weights are cast to bf16 once per layer (`lstm_kernels.layer_weights`)
    instead of at every `torch.lstm` call, and `encode` keeps the casts for all its batches
    (`lstm_kernels.weights_cast_once`). The result must equal autocast's own casting (the same encoder with
    weights that require grad, which autocast casts itself), and a change of a weight between calls must be seen,
    in place or through `.data` (no version counter sees that)."""
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model).eval()
    batch = tokenizer(NEAR_EQUAL + ["a dog"], padding=True, return_tensors="pt")

    def run(m):
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            return m(**batch).last_hidden_state

    autocast_own = copy.deepcopy(model)
    for p in autocast_own.encoder.parameters():
        p.requires_grad_(True)
    cast = run(model)
    assert torch.equal(cast, run(autocast_own))
    fp32 = model(**batch).last_hidden_state
    assert 0 < (cast.float() - fp32).abs().max() <= 0.02 * fp32.abs().max()
    assert not any(p.requires_grad for p in model.encoder.parameters())
    with torch.no_grad():  # an in-place change of a frozen weight: the next autocast call casts again
        model.encoder.rnn.weight_hh_l1.mul_(0.5)
        autocast_own.encoder.rnn.weight_hh_l1.mul_(0.5)
    changed = run(model)
    assert not torch.equal(changed, cast)
    assert torch.equal(changed, run(autocast_own))
    model.encoder.rnn.weight_hh_l1.data.mul_(2.0)  # through .data: the version counter stays
    autocast_own.encoder.rnn.weight_hh_l1.data.mul_(2.0)
    assert torch.equal(run(model), run(autocast_own)) and torch.equal(run(model), cast)

    casts = []  # (layer, first cast tensor) per call of layer_weights
    original = lstm_kernels.layer_weights
    monkeypatch.setattr(lstm_kernels, "layer_weights",
                        lambda stack, layer: record_cast(casts, original, stack, layer))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        encoded = model.encode(NEAR_EQUAL + ["a dog", "cat"], tokenizer, batch_size=2, num_workers=1)
    assert len(casts) == 3 * model.config.num_hidden_layers  # 3 batches, each layer once
    for layer in range(model.config.num_hidden_layers):
        same_layer = [c for l, c in casts if l == layer]
        assert same_layer[0].dtype == torch.bfloat16 and all(c is same_layer[0] for c in same_layer)
    assert model.encoder._autocast_cache is None  # dropped after the call
    for vectors, text in zip(encoded, NEAR_EQUAL + ["a dog", "cat"]):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            alone = model(**tokenizer([text], return_tensors="pt")).last_hidden_state[0]
        assert vectors.dtype == alone.dtype and torch.equal(vectors, alone)


@pytest.mark.parametrize("layout", ["top", "both", "with_word_vectors"])
def test_encode_gives_one_dtype_for_every_input(tiny_checkpoint, monkeypatch, layout):
    """Under bf16 autocast, a batch run in several time segments, a batch run in one, and an empty input all come
    back in the dtype that forward gives (bf16 for MT-LSTM layers alone, fp32 with the word vectors); a float64
    model gives float64 empty rows too."""
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model).eval()
    model.config.cove_output = "top" if layout == "top" else "both"
    model.config.include_word_vectors = layout == "with_word_vectors"
    plans = segment_every_row_end(monkeypatch)
    texts = ["the cat sat on the mat .", "a dog", "", "cat"]  # lengths 7, 2, 0, 1
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = model(**tokenizer(["a dog"], return_tensors="pt")).last_hidden_state.dtype
        encoded = model.encode(texts, tokenizer, batch_size=2, num_workers=1)  # batches (7, 2) and (1, 0)
    assert expected == (torch.float32 if layout == "with_word_vectors" else torch.bfloat16)
    assert any(len(plan) > 1 for plan in plans)  # the (7, 2) batch ran in segments
    assert [tuple(e.shape) for e in encoded] == [(7, model.config.output_size), (2, model.config.output_size),
                                                 (0, model.config.output_size), (1, model.config.output_size)]
    assert [e.dtype for e in encoded] == [expected] * 4
    wide = copy.deepcopy(model).double()
    assert [e.dtype for e in wide.encode(texts, tokenizer, batch_size=2, num_workers=1)] == [torch.float64] * 4


def record_cast(casts: list, original, encoder, layer: int) -> list:
    cast = original(encoder, layer)
    casts.append((layer, cast[0]))
    return cast


def test_single_call_path_equals_per_layer_path(tiny_checkpoint, monkeypatch):
    """On SINGLE_CALL_DEVICE_TYPES (CUDA) a top-layer-only request runs the whole biLSTM in one `self.rnn` call.
    Forced on CPU here: the top layer (mixed, near-equal and equal lengths) and the final states (reordered from
    (2L, B, H) to (B, L, 2H)) must equal the per-layer path, padding stays zero, and a request that reads layer 1
    (hidden states, cove_output="both") or dropout in training keeps the per-layer path."""
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model)
    model.config.cove_output = "top"  # the fixture's "both" reads layer 1
    batches = [NEAR_EQUAL, ["the cat sat on the mat .", "a dog"], ["a dog", "a cat"]]
    with torch.no_grad():
        expected = [model(**tokenizer(texts, padding=True, return_tensors="pt"), output_final_states=True)
                    for texts in batches]
        monkeypatch.setattr(lstm_kernels, "SINGLE_CALL_DEVICE_TYPES", ("cpu", "cuda"))
        calls = count_strategy_calls(monkeypatch, "single_call")
        for texts, reference in zip(batches, expected):
            batch = tokenizer(texts, padding=True, return_tensors="pt")
            got = model(**batch, output_final_states=True)
            assert (got.last_hidden_state - reference.last_hidden_state).abs().max() <= SAME_ROWS
            assert got.final_hidden_state.shape == reference.final_hidden_state.shape
            assert (got.final_hidden_state - reference.final_hidden_state).abs().max() <= SAME_ROWS
            assert (got.final_cell_state - reference.final_cell_state).abs().max() <= SAME_ROWS
            padding = batch["attention_mask"] == 0
            assert not padding.any() or got.last_hidden_state[padding].abs().max() == 0
            assert model(**batch).final_hidden_state is None
        assert len(calls) == 2 * len(batches)
        model(**tokenizer(batches[1], padding=True, return_tensors="pt"), output_hidden_states=True)
        assert len(calls) == 2 * len(batches)  # layer 1 read: per layer
        model.config.cove_output = "both"
        model(**tokenizer(batches[1], padding=True, return_tensors="pt"))
        assert len(calls) == 2 * len(batches)
    model.config.cove_output = "top"
    trained = copy.deepcopy(model)
    trained.encoder.train()  # a trainable encoder (a frozen one stays in eval mode, without dropout)
    trained.encoder.dropout = 0.2
    trained(**tokenizer(batches[1], padding=True, return_tensors="pt"))
    assert len(calls) == 2 * len(batches)  # dropout between the layers: per layer


def test_config_rejects_invalid_values(tmp_path):
    """Values that would crash later or silently misbehave are a clear ValueError when the config is built."""
    cases = [
        (dict(target_vocab_size=0), r"target_vocab_size must be an int >= 1, got 0"),
        (dict(decoder_embedding_dim=0), r"decoder_embedding_dim must be an int >= 1, got 0"),
        (dict(max_source_length=-1), r"max_source_length must be an int >= 1, got -1"),
        (dict(dcn_max_iterations=0), r"dcn_max_iterations must be an int >= 1, got 0"),
        (dict(hidden_size=2.5), r"hidden_size must be an int >= 1, got 2\.5"),
        (dict(vocab_size="10"), r"vocab_size must be an int >= 1, got '10'"),
        (dict(char_ngram_dim=None), r"char_ngram_dim must be an int >= 0, got None"),
        (dict(char_ngram_dim=-1), r"char_ngram_dim must be an int >= 0, got -1"),
        (dict(encoder_dropout=-1), r"encoder_dropout must be a probability in \[0, 1\), got -1"),
        (dict(decoder_dropout=1.0), r"decoder_dropout must be a probability in \[0, 1\), got 1\.0"),
        (dict(bcn_dropout=float("nan")), r"bcn_dropout must be a probability"),
        (dict(dcn_dropout="0.2"), r"dcn_dropout must be a probability in \[0, 1\), got '0\.2'"),
        (dict(initializer_range=0), r"initializer_range must be a finite number > 0 \(U\(-r, r\)\), got 0"),
        (dict(initializer_range=float("inf")), r"initializer_range must be a finite number > 0"),
        (dict(vocab_size=24, pad_token_id=30),
         r"pad_token_id must be an id of both vocabularies, in \[0, 24\) \(vocab_size=24, target_vocab_size=50000\)"),
        (dict(target_vocab_size=5, pad_token_id=5), r"pad_token_id .* in \[0, 5\)"),
        (dict(pad_token_id=None), r"pad_token_id must be an id of both vocabularies"),
    ]
    for overrides, message in cases:
        with pytest.raises(ValueError, match=message):
            CoveConfig(**overrides)
    # the boundaries are accepted, and a valid config survives save/load
    config = CoveConfig(vocab_size=1, target_vocab_size=1, char_ngram_dim=0, encoder_dropout=0.0,
                        decoder_dropout=0.999, initializer_range=1e-3, max_source_length=1)
    config.save_pretrained(tmp_path / "ok")
    assert CoveConfig.from_pretrained(tmp_path / "ok").decoder_dropout == 0.999
    # a checkpoint's config.json is validated when loaded
    saved = json.loads((tmp_path / "ok" / "config.json").read_text())
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text(json.dumps({**saved, "encoder_dropout": -1}))
    with pytest.raises(ValueError, match=r"encoder_dropout must be a probability in \[0, 1\), got -1"):
        CoveConfig.from_pretrained(tmp_path / "bad")


@pytest.mark.parametrize("cove_output", ["top", "both"])
def test_bf16_autocast_without_the_bf16_lstm_kernel_runs_the_lstm_in_fp32(cove_output, monkeypatch, caplog):
    """On a CPU whose oneDNN has no bf16 LSTM (AVX2 only), `forward` and `encode` under bf16 autocast run the MT-LSTM
    in fp32 and cast its outputs to bf16: the same dtypes as on a CPU with the kernel, values within bf16 rounding of
    fp32, and one warning. Forced here with the probe's answer, so it runs on every CPU."""
    monkeypatch.setattr(lstm_kernels, "_LSTM_KERNEL_SUPPORT", {("cpu", torch.bfloat16): False})
    torch.manual_seed(0)
    model, tokenizer = create_cove_checkpoint(WORDS, torch.randn(len(SPECIAL_TOKENS) + len(WORDS), 8), hidden_size=4,
                                              cove_output=cove_output, include_word_vectors=False)
    model.eval()
    batch = tokenizer(["a dog", "the cat sat on the mat ."], padding=True, return_tensors="pt")
    with torch.no_grad():
        reference = model(**batch, output_final_states=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fallback = model(**batch, output_final_states=True)
            fast = model(**batch).last_hidden_state
            hidden = model(**batch, output_hidden_states=True).hidden_states
            encoded = model.encode(["a dog", "the cat sat on the mat ."], tokenizer, batch_size=2)
    tokens = batch["attention_mask"].bool()
    for output in (fallback.last_hidden_state, fast):
        assert output.dtype == torch.float32  # the fp32 padding mask is multiplied in, as with the kernel
        torch.testing.assert_close(output, reference.last_hidden_state, rtol=0, atol=0.003)
        assert output[~tokens].abs().max() == 0
    assert all(layer.dtype == torch.float32 for layer in hidden[1:])  # masked at padding by the fp32 mask
    assert fallback.final_hidden_state.dtype == torch.float32  # a padded batch with final states runs packed: fp32
    torch.testing.assert_close(fallback.final_hidden_state.float(), reference.final_hidden_state, rtol=0,
                               atol=0)
    for row, vectors in enumerate(encoded):
        assert vectors.dtype == torch.bfloat16  # the MT-LSTM layers alone: autocast's dtype
        torch.testing.assert_close(vectors.float(), reference.last_hidden_state[row, tokens[row]], rtol=0,
                                   atol=0.003)
    warnings = [r for r in caplog.records if "no torch.bfloat16 LSTM kernel" in r.getMessage()]
    assert len(warnings) <= 1  # once per process (an earlier test may have warned already)


def test_the_bf16_lstm_probe_answers_what_the_kernel_does():
    """The capability probe agrees with a real `nn.LSTM` call under CPU bf16 autocast on this machine."""
    lstm = torch.nn.LSTM(3, 4, bidirectional=True, batch_first=True)
    try:
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            lstm(torch.randn(2, 5, 3))
        runs = True
    except RuntimeError:
        runs = False
    assert bf16_lstm_kernel_available() == runs


# ---------------------------------------------------------------------------------------------------------------
# transformers conventions


@pytest.mark.parametrize("final_states", [False, True])
def test_inputs_embeds_equal_the_input_ids_path(tiny_checkpoint, final_states):
    """Word-vector rows passed as `inputs_embeds` (padded batch, rows given non-zero at padding) give exactly what
    their ids give: every output field, hidden states included; the rows are zeroed at padding like looked-up ones."""
    _, model, tokenizer = tiny_checkpoint
    batch = tokenizer(["the cat sat on the mat .", "a dog", "cat"], padding=True, return_tensors="pt")
    rows = model.get_input_embeddings()(batch["input_ids"]).detach()
    rows = torch.where(batch["attention_mask"].bool().unsqueeze(-1), rows, torch.full_like(rows, 7.0))
    with torch.no_grad():
        by_ids = model(**batch, output_hidden_states=True, output_final_states=final_states)
        by_rows = model(inputs_embeds=rows, attention_mask=batch["attention_mask"], output_hidden_states=True,
                        output_final_states=final_states)
        fast = model(inputs_embeds=rows, attention_mask=batch["attention_mask"], output_final_states=final_states)
    assert by_ids.keys() == by_rows.keys()
    for name in by_ids.keys():
        expected, got = by_ids[name], by_rows[name]
        for e, g in zip(*((expected, got) if isinstance(expected, tuple) else ((expected,), (got,)))):
            assert torch.equal(e, g), name
    assert torch.equal(fast.last_hidden_state, by_ids.last_hidden_state)
    # word vectors in the output (include_word_vectors): the given rows, zero at padding
    assert torch.equal(by_rows.last_hidden_state[..., :8], rows * batch["attention_mask"].unsqueeze(-1))


def test_inputs_embeds_bad_uses_give_clear_errors(tiny_checkpoint):
    _, model, tokenizer = tiny_checkpoint
    batch = tokenizer(["the cat sat ."], return_tensors="pt")
    rows = model.get_input_embeddings()(batch["input_ids"]).detach()
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds, got both"):
        model(input_ids=batch["input_ids"], inputs_embeds=rows)
    with pytest.raises(ValueError, match="exactly one of input_ids and inputs_embeds, got neither"):
        model(attention_mask=batch["attention_mask"])
    with pytest.raises(ValueError, match="word_vector_dim=8"):
        model(inputs_embeds=rows[..., :5])
    with pytest.raises(ValueError, match="word_vector_dim=8"):
        model(inputs_embeds=rows[0])
    with pytest.raises(TypeError, match="floating-point"):
        model(inputs_embeds=rows.long())
    with pytest.raises(ValueError, match="inputs_embeds is empty"):
        model(inputs_embeds=rows[:, :0])
    with pytest.raises(ValueError, match="attention_mask shape \\(1, 3\\) != inputs_embeds shape \\(1, 4\\)"):
        model(inputs_embeds=rows, attention_mask=batch["attention_mask"][:, :3])
    # char n-gram vectors are looked up by id: rows alone cannot give them
    torch.manual_seed(0)
    ngram_model, _ = create_cove_checkpoint(WORDS, torch.randn(len(SPECIAL_TOKENS) + len(WORDS), 8), hidden_size=4,
                                            char_ngram_dim=3)
    with pytest.raises(ValueError, match="char_ngram_dim=3.*pass input_ids"):
        ngram_model(inputs_embeds=rows)
    # float64 rows are cast to the model's dtype: the same as fp32 rows
    with torch.no_grad():
        assert torch.equal(model(inputs_embeds=rows.double()).last_hidden_state,
                           model(inputs_embeds=rows).last_hidden_state)


@pytest.mark.parametrize("hidden_and_final", [False, True])
def test_return_dict_false_is_to_tuple(tiny_checkpoint, hidden_and_final):
    """`return_dict=False` gives exactly `ModelOutput.to_tuple()`: the same fields in the same positions, the
    `attention_mask` field (which the MT head and the feature-extraction pipeline read) included."""
    _, model, tokenizer = tiny_checkpoint
    batch = tokenizer(["the cat sat .", "a dog"], padding=True, return_tensors="pt")
    flags = dict(output_hidden_states=hidden_and_final, output_final_states=hidden_and_final)
    with torch.no_grad():
        as_dict = model(**batch, **flags).to_tuple()
        as_tuple = model(**batch, **flags, return_dict=False)
    assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_dict) == (5 if hidden_and_final else 2)
    for got, expected in zip(as_tuple, as_dict):
        if isinstance(expected, tuple):
            assert all(torch.equal(g, e) for g, e in zip(got, expected))
        else:
            assert torch.equal(got, expected)
    assert torch.equal(as_tuple[-1], batch["attention_mask"])


def test_unknown_keyword_arguments_and_output_attentions_are_errors(tiny_checkpoint):
    """An unknown keyword is a TypeError naming it (it was swallowed); `output_attentions=True` is a ValueError on
    the base model (no attention maps), while a head's encoder leaves the flag to the head."""
    _, model, tokenizer = tiny_checkpoint
    batch = tokenizer(["the cat sat ."], return_tensors="pt")
    with pytest.raises(TypeError, match="not_an_argument"):
        model(**batch, not_an_argument=1)
    with pytest.raises(ValueError, match="no attention maps"):
        model(**batch, output_attentions=True)
    with torch.no_grad():  # what tokenizers, pipelines and generate() pass is accepted
        out = model(**batch, output_attentions=False, return_dict=True)
    assert out.attentions is None and not model.inside_head
    from modeling_cove import CoveForSequenceClassification

    head = CoveForSequenceClassification(model.config)
    assert head.cove.inside_head
    with torch.no_grad():
        assert head.cove(**batch, output_attentions=True).attentions is None


@pytest.mark.parametrize("head", [False, True], ids=["CoveModel", "CoveForSequenceClassification"])
def test_resize_token_embeddings_adds_zero_frozen_rows_and_survives_save_load(tmp_path, head):
    """`tokenizer.add_tokens` + `resize_token_embeddings`: the new words get ZERO rows (the paper's unknown-word
    vector), so a new word encodes exactly as `<unk>`; the table stays frozen; `config.vocab_size` follows; char
    n-gram rows follow too; the pair round-trips through save_pretrained -> from_pretrained (the heads too)."""
    from modeling_cove import CoveForSequenceClassification

    torch.manual_seed(0)
    vectors = torch.randn(len(SPECIAL_TOKENS) + len(WORDS), 8)
    base, tokenizer = create_cove_checkpoint(WORDS, vectors, hidden_size=4, include_word_vectors=True,
                                             cove_output="both", char_ngram_dim=3)
    model = CoveForSequenceClassification(base.config).eval() if head else base
    cove = model.cove_encoder_model()
    old_size = model.config.vocab_size
    old_rows = cove.embeddings.weight.detach().clone()
    assert tokenizer.add_tokens(["zebra", "okapi"]) == 2
    model.resize_token_embeddings(len(tokenizer) + 1)  # one row past the tokenizer too
    assert model.config.vocab_size == cove.config.vocab_size == old_size + 3 == cove.embeddings.num_embeddings
    for table in (cove.embeddings, cove.char_ngram_embeddings):
        assert table.weight.shape[0] == old_size + 3 and not table.weight.requires_grad
        assert torch.equal(table.weight[old_size:], torch.zeros(3, table.weight.shape[1]))
    assert torch.equal(cove.embeddings.weight[:old_size], old_rows)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path).eval()
    assert loaded.config.vocab_size == old_size + 3
    assert_same_weights(model, loaded)
    assert not loaded.cove_encoder_model().embeddings.weight.requires_grad
    new_word = tokenizer(["the zebra sat"], return_tensors="pt")
    assert new_word["input_ids"][0, 1] == old_size
    unk = {**new_word, "input_ids": new_word["input_ids"].clone()}
    unk["input_ids"][0, 1] = tokenizer.unk_token_id
    encoder = loaded.cove_encoder_model()
    with torch.no_grad():  # word vectors and MT-LSTM layers: the new word is the unknown word (char n-grams differ)
        by_new = encoder(**new_word, output_hidden_states=True).hidden_states
        by_unk = encoder(**unk, output_hidden_states=True).hidden_states
    assert all(torch.equal(a, b) for a, b in zip(by_new, by_unk))
    with pytest.raises(ValueError, match="pad/unk rows"):
        model.resize_token_embeddings(1)
    # pad_to_multiple_of rounds up, with zero rows too
    loaded.resize_token_embeddings(pad_to_multiple_of=8)
    table = loaded.cove_encoder_model().embeddings.weight
    assert loaded.config.vocab_size == table.shape[0] == -(-(old_size + 3) // 8) * 8 == 24
    assert table[old_size:].abs().max() == 0


@pytest.mark.parametrize("flags", [{}, {"output_final_states": False, "output_hidden_states": True},
                                   {"output_final_states": True, "output_hidden_states": True}])
def test_torch_export_traces_and_gives_the_eager_outputs(tiny_checkpoint, flags):
    """`torch.export` traces CoveModel (it stopped at the id check's `int(ids.min())`): no Python branch on tensor
    values while exporting. The exported program, run on another padded batch of the same shape (an empty row in it),
    gives the eager outputs; the id and padding checks stay in the graph as runtime assertions."""
    _, model, tokenizer = tiny_checkpoint
    model = copy.deepcopy(model).eval()
    trace_batch = tokenizer(["the cat sat on the mat .", "a dog", "cat"], padding=True, return_tensors="pt")
    kwargs = dict(input_ids=trace_batch["input_ids"], attention_mask=trace_batch["attention_mask"])
    program = torch.export.export(model, args=(), kwargs={**kwargs, **flags})
    batch = tokenizer(["a dog ran far away !", "", "the mat"], padding="max_length", max_length=7,
                      return_tensors="pt")
    run = dict(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], **flags)
    with torch.no_grad():
        expected = model(**run)
        got = program.module()(**run)
    final_states = flags.get("output_final_states", False)
    names = ["last_hidden_state", "attention_mask"] + (["final_hidden_state", "final_cell_state"] if final_states
                                                       else [])
    assert got.keys() == expected.keys()
    assert expected.final_hidden_state is None or expected.final_hidden_state[1].abs().max() == 0
    for name in names:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=2e-7, msg=name)
    for g, e in zip(got.get("hidden_states", ()), expected.get("hidden_states", ())):
        torch.testing.assert_close(g, e, rtol=0, atol=2e-7)
    bad = dict(run, input_ids=batch["input_ids"].clone())
    bad["input_ids"][0, 0] = 99
    with pytest.raises(RuntimeError, match="outside \\[0, 16\\)"):
        program.module()(**bad)
    with pytest.raises(RuntimeError, match="right-padded"):
        program.module()(**dict(run, attention_mask=batch["attention_mask"].flip(1)))


def test_truncated_weights_named_when_loaded_as_remote_code(tiny_checkpoint, tmp_path):
    """The error translation also runs where the checkpoint's own code files are all there is (trust_remote_code in
    a process that cannot import modeling_cove, Hub id from the offline cache): an OSError naming the file."""
    path, _, _ = tiny_checkpoint
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) - 100])
    hf_home = tmp_path / "hf_home"
    build_offline_cache(hf_home, "org/cove-broken", broken)
    code = """
        import sys
        sys.modules['modeling_cove'] = None
        from transformers import AutoModel
        try:
            AutoModel.from_pretrained('org/cove-broken', trust_remote_code=True)
        except OSError as error:
            print("OSError", type(error.__cause__).__module__, error)
    """
    result = run_python(code, offline_env(hf_home), tmp_path)
    assert result.returncode == 0 and "OSError safetensors" in result.stdout, result.stderr[-3000:]
    assert "model.safetensors" in result.stdout and "the end is missing" in result.stdout, result.stdout


@pytest.mark.skipif(not bf16_lstm_kernel_available(),
                    reason="this CPU has no bf16 LSTM kernel (no avx512_bf16): nothing to compare the fallback with")
def test_the_bf16_fallback_gives_the_dtypes_of_the_kernel_on_every_path(tiny_checkpoint, monkeypatch):
    """Without the kernel (forced), every output of every path comes in the dtype it has with the kernel, within
    bf16 rounding of it: bf16 from padded-input LSTM calls (uniform batches, the unpacked path, encode), fp32 from
    packed ones (final states of a padded batch), which autocast runs in fp32 anyway (the fallback cast them to bf16
    before each LSTM call went through `autocast_lstm`)."""
    _, model, tokenizer = tiny_checkpoint
    padded = tokenizer(["a dog", "the cat sat on the mat ."], padding=True, return_tensors="pt")
    uniform = tokenizer(["a dog", "the cat"], padding=True, return_tensors="pt")
    texts = ["a dog", "the cat sat on the mat .", "cat"]

    def run():
        outputs = {}
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            for name, batch in (("padded", padded), ("uniform", uniform)):
                for final_states in (False, True):
                    for hidden in (False, True):
                        out = model(**batch, output_final_states=final_states, output_hidden_states=hidden)
                        key = f"{name} final={final_states} hidden={hidden}"
                        outputs[key + " last"] = out.last_hidden_state
                        for i, layer in enumerate(out.hidden_states or ()):
                            outputs[f"{key} hidden {i}"] = layer
                        if final_states:
                            outputs[key + " h"], outputs[key + " c"] = out.final_hidden_state, out.final_cell_state
            for i, vectors in enumerate(model.encode(texts, tokenizer, batch_size=3, num_workers=1)):
                outputs[f"encode {i}"] = vectors
        return outputs

    with_kernel = run()
    monkeypatch.setattr(lstm_kernels, "_LSTM_KERNEL_SUPPORT", {("cpu", torch.bfloat16): False})
    fallback = run()
    assert {out.dtype for out in with_kernel.values()} == {torch.float32, torch.bfloat16}  # both kinds are covered
    for key, expected in with_kernel.items():
        assert fallback[key].dtype == expected.dtype, key
        torch.testing.assert_close(fallback[key].float(), expected.float(), rtol=0, atol=0.01, msg=key)


def test_trainer_predict_passes_only_what_forward_names(tiny_checkpoint, tmp_path):
    """With forward's arguments all named (no **kwargs), Trainer drops the dataset's other columns ("text") by the
    signature and its predictions are the model's own outputs for the padded batch."""
    from datasets import Dataset
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    _, model, tokenizer = tiny_checkpoint
    texts = ["the cat sat on the mat .", "a dog"]
    data = Dataset.from_dict({"text": texts}).map(lambda row: tokenizer(row["text"]), batched=True)
    args = TrainingArguments(output_dir=str(tmp_path), per_device_eval_batch_size=2, report_to=[], use_cpu=True)
    trainer = Trainer(model=model, args=args, data_collator=DataCollatorWithPadding(tokenizer))
    predictions = trainer.predict(data).predictions
    hidden = predictions[0] if isinstance(predictions, tuple) else predictions
    with torch.no_grad():
        expected = model(**tokenizer(texts, padding=True, return_tensors="pt")).last_hidden_state
    torch.testing.assert_close(torch.as_tensor(hidden), expected, rtol=0, atol=0)
