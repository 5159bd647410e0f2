"""Model-agnostic checks in the manner of transformers' common model tests, written once (`CoveModelTesterMixin`) and
applied to the base model and every head: `CoveModel`, `CoveForSequenceClassification` (BCN),
`CoveForQuestionAnswering` (DCN), `CoveForMachineTranslation` (MT), `CoveForTokenClassification` (tagger). Each
class supplies its tiny inputs (`prepare_inputs`) and names the outputs compared by value (`main_outputs`); the
checks are the conventions a transformers user relies on: tuple == `to_tuple()`, unknown keyword arguments rejected,
`inputs_embeds`, `output_attentions`, `output_hidden_states`, `resize_token_embeddings`, save/load, padding, dtypes
and bf16 autocast (also with the fp32 LSTM fallback forced), training gradients, `torch.export`. `TestCoveConfig`
checks the config in the manner of transformers' `ConfigTester`."""

import dataclasses
import inspect
import json
import re

import pytest
import torch
from conftest import assert_reproduces, assert_same_weights, simulate_cpu_without_bf16_lstm
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedConfig
from transformers.utils import ModelOutput

import modeling_cove  # noqa: F401  (registers the Auto classes)
from modeling_cove import (
    CoveConfig,
    CoveForMachineTranslation,
    CoveForQuestionAnswering,
    CoveForSequenceClassification,
    CoveForTokenClassification,
    CoveModel,
)
from modeling_cove import lstm_kernels
from modeling_cove.configuration_cove import PAPER_FORM_FIELDS

pytestmark = pytest.mark.usefixtures("single_thread")

LABELS = ["neg", "neutral", "pos"]
UNK = 1
# bf16 keeps 8 significant bits (relative rounding 2^-8 = 0.4%); a few LSTM steps and layers compound it. On the CPU
# an output may differ from fp32 by 3% of its largest magnitude (measured on a Zen 4 with avx512_bf16: at most 1.2%,
# the MT logits; 0.3-0.9% for the others); cuDNN's bf16 on a GPU keeps the looser, absolute bound it was run with.
BF16_SHARE_OF_MAX = 0.03
BF16_GPU_TOLERANCE = dict(rtol=0.05, atol=0.05)


def assert_close_bf16(actual: torch.Tensor, expected: torch.Tensor, name: str) -> None:
    """`actual` (a bf16 run's output) within BF16_SHARE_OF_MAX of `expected`'s largest magnitude (the fp32 run's)."""
    torch.testing.assert_close(actual.float(), expected, rtol=0, atol=BF16_SHARE_OF_MAX * expected.abs().max().item(),
                               msg=lambda m: f"{name}: {m}")
# fields that hold one value for the whole batch, so a row alone cannot reproduce them
BATCH_LEVEL_FIELDS = ("loss", "nll_sum", "num_tokens")


def tiny_config(**overrides) -> CoveConfig:
    """One tiny config that every class accepts (the MT decoder is 2 * hidden_size wide, the DCN size even)."""
    fields = dict(
        vocab_size=24, word_vector_dim=6, hidden_size=4, num_hidden_layers=2, initializer_range=0.5,
        target_vocab_size=20, decoder_embedding_dim=5, decoder_hidden_size=8, decoder_dropout=0.1,
        max_source_length=12,
        bcn_feedforward_dim=5, bcn_hidden_size=4, bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, bcn_dropout=0.1,
        num_labels=len(LABELS), id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)},
        dcn_hidden_size=6, dcn_pool_size=3, dcn_max_iterations=3, dcn_dropout=0.1,
    )
    fields.update(overrides)
    return CoveConfig(**fields)


def right_padded(rows, pad=0):
    """Lists of ints -> (B, T) right-padded long tensor and its (B, T) attention mask."""
    width = max(len(r) for r in rows)
    ids = torch.tensor([list(r) + [pad] * (width - len(r)) for r in rows], dtype=torch.long)
    mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.long)
    return ids, mask


def random_words(generator, count, vocab_size=24):
    """`count` word ids, never a special token (ids 0-3)."""
    return torch.randint(4, vocab_size, (count,), generator=generator).tolist()


def tensors_of(value, name="output"):
    """[(name, tensor)] for every tensor inside `value` (a tensor or nested tuples/lists of them), in order."""
    if isinstance(value, torch.Tensor):
        return [(name, value)]
    if isinstance(value, (tuple, list)):
        return [item for i, part in enumerate(value) for item in tensors_of(part, f"{name}[{i}]")]
    raise AssertionError(f"{name}: unexpected output type {type(value).__name__}")


def assert_equal_structure(actual, expected, name="output"):
    """`actual` and `expected` hold the same tensors in the same nesting, bit for bit."""
    actual_tensors, expected_tensors = tensors_of(actual, name), tensors_of(expected, name)
    assert [n for n, _ in actual_tensors] == [n for n, _ in expected_tensors], (name, "structure differs")
    for (what, a), (_, e) in zip(actual_tensors, expected_tensors):
        assert a.shape == e.shape and a.dtype == e.dtype, (what, a.shape, e.shape, a.dtype, e.dtype)
        assert torch.equal(a, e), what


def crop_like(batch_value: torch.Tensor, row: int, alone: torch.Tensor) -> torch.Tensor:
    """Row `row` of a batched tensor cut to the shape of the same row run alone (batch dim 1)."""
    region = tuple(slice(0, size) for size in alone.shape[1:])
    return batch_value[row : row + 1][(slice(None), *region)]


def text_spans(inputs: dict, row: int) -> list:
    """[(start, end)] of each text in row `row` of a pair batch: the runs of equal `token_type_ids` among its tokens."""
    length = int(inputs["attention_mask"][row].sum())
    types = inputs["token_type_ids"][row, :length].tolist()
    bounds = [0] + [t for t in range(1, length) if types[t] != types[t - 1]] + [length]
    return list(zip(bounds[:-1], bounds[1:]))


def two_segment_inputs(g: torch.Generator, segments: list) -> dict:
    """Right-padded rows of random words, each `first + second` long, as the tokenizer gives a pair: the first
    segment type 0, the second type 1 (a second segment of 0 words: a single text)."""
    ids, mask = right_padded([random_words(g, first + second) for first, second in segments])
    types = torch.zeros_like(ids)
    for row, (first, second) in enumerate(segments):
        types[row, first : first + second] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def logits_and_loss(output) -> dict:
    """The outputs a head is compared by: its logits, and its loss where labels were given."""
    values = {"logits": output.logits}
    if output.get("loss") is not None:
        values["loss"] = output.loss
    return values


class CoveModelTesterMixin:
    """Conventions every CoVe model class keeps. A subclass sets `model_class` and writes `prepare_inputs`; it may
    override `main_outputs` (the outputs compared by value) and the `check_*` hooks for what is class-specific."""

    model_class = None
    has_attention_maps = False  # the class has real attention maps (BCN biattention, DCN coattention, MT decoder)
    config_overrides = {}
    bf16_load_overrides = {}  # config overrides of the bf16 case of test_load_in_dtype (a head whose path is discrete)

    # ----- hooks ----------------------------------------------------------------------------------------------

    def build_model(self, seed: int = 0, **overrides):
        """A tiny model in eval mode, deterministic per `seed`."""
        torch.manual_seed(seed)
        return self.model_class(tiny_config(**{**self.config_overrides, **overrides})).eval()

    def prepare_inputs(self, model, seed: int = 0, labels: bool = True) -> dict:
        """A right-padded batch of 3 rows of different lengths (labels included with `labels=True`)."""
        raise NotImplementedError

    def main_outputs(self, output, inputs: dict) -> dict:
        """name -> tensor of the outputs compared by value (same keys for every call with the same inputs)."""
        raise NotImplementedError

    def row_inputs(self, inputs: dict, row: int) -> dict:
        """Row `row` of the batch alone, without its padding: tensors laid out like `input_ids` are cut to the row's
        length, other per-row tensors (labels) keep their width."""
        length = int(inputs["attention_mask"][row].sum())
        shape = inputs["input_ids"].shape
        alone = {}
        for name, value in inputs.items():
            if isinstance(value, torch.Tensor) and value.shape[:2] == shape:
                alone[name] = value[row : row + 1, :length]
            elif isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == shape[0]:
                alone[name] = value[row : row + 1]
            else:
                alone[name] = value
        return alone

    def check_hidden_states(self, model, inputs: dict, output) -> None:
        """What `output_hidden_states=True` must return for this class, by value where a reference exists."""
        states = output.hidden_states
        assert states is not None, f"{self.model_class.__name__}: output_hidden_states=True returned no hidden_states"
        batch = inputs["input_ids"].shape[0]
        for name, state in tensors_of(states, "hidden_states"):
            assert state.shape[0] == batch and torch.isfinite(state).all(), (name, state.shape)

    def check_resized(self, model, old_vocab_size: int) -> None:
        """Class-specific checks after `resize_token_embeddings(old_vocab_size + 3)`."""

    def forward(self, model, inputs: dict, **kwargs):
        with torch.no_grad():
            return model(**inputs, **kwargs)

    # ----- conventions ----------------------------------------------------------------------------------------

    def test_forward_signature_starts_with_main_input(self):
        model = self.build_model()
        parameters = list(inspect.signature(model.forward).parameters)
        assert parameters[0] == model.main_input_name == "input_ids"
        assert "return_dict" in parameters and "attention_mask" in parameters

    def test_return_dict_false_is_to_tuple(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        as_dict = self.forward(model, inputs)
        assert isinstance(as_dict, ModelOutput)
        as_tuple = self.forward(model, inputs, return_dict=False)
        assert isinstance(as_tuple, tuple) and len(as_tuple) == len(as_dict.to_tuple()), (
            f"return_dict=False gave {len(as_tuple)} elements, to_tuple() has {len(as_dict.to_tuple())} "
            f"({list(as_dict.keys())})"
        )
        assert_equal_structure(as_tuple, as_dict.to_tuple())

    def test_return_dict_false_is_to_tuple_with_hidden_states(self):
        """Also with the optional outputs: hidden states (every class) and attention maps (the heads with them)."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        options = dict(output_hidden_states=True)
        if self.has_attention_maps:
            options["output_attentions"] = True
        as_dict = self.forward(model, inputs, **options)
        as_tuple = self.forward(model, inputs, **options, return_dict=False)
        assert len(as_tuple) == len(as_dict.to_tuple()), (len(as_tuple), list(as_dict.keys()))
        assert_equal_structure(as_tuple, as_dict.to_tuple())

    def test_config_return_dict_false_gives_the_same_tuple(self):
        """`config.return_dict=False` (no argument) gives the same tuple: a head reads its encoder's outputs by name
        whatever the config says."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        as_dict = self.forward(model, inputs, output_hidden_states=True)
        model.config.return_dict = False
        as_tuple = self.forward(model, inputs, output_hidden_states=True)
        assert isinstance(as_tuple, tuple)
        assert_equal_structure(as_tuple, as_dict.to_tuple())

    def test_unknown_keyword_argument_is_type_error(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        with pytest.raises(TypeError, match="not_an_argument"):
            self.forward(model, inputs, not_an_argument=1)

    def test_left_padding_is_value_error(self):
        """CoVe reads right-padded rows only (packing); a left-padded mask is refused up front, naming the fix."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        mask = inputs["attention_mask"].clone()
        row = int(mask.sum(dim=1).argmin())  # a row with padding, made left-padded
        mask[row] = mask[row].flip(0)
        with pytest.raises(ValueError, match="right-padded"):
            self.forward(model, {**inputs, "attention_mask": mask})

    def test_deterministic_in_eval_mode(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        first, second = self.forward(model, inputs), self.forward(model, inputs)
        assert_equal_structure(second.to_tuple(), first.to_tuple())

    def test_input_embeddings_get_and_set(self):
        model = self.build_model()
        embeddings = model.get_input_embeddings()
        assert isinstance(embeddings, nn.Embedding)
        assert embeddings.weight.shape == (model.config.vocab_size, model.config.word_vector_dim)
        assert embeddings is model.cove_encoder_model().embeddings
        replacement = nn.Embedding(model.config.vocab_size, model.config.word_vector_dim)
        model.set_input_embeddings(replacement)
        assert model.get_input_embeddings() is replacement

    def test_inputs_embeds_equal_input_ids(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        expected = self.main_outputs(self.forward(model, inputs), inputs)
        with torch.no_grad():
            embeds = model.get_input_embeddings()(inputs["input_ids"])  # the word vectors, (B, T, D)
        by_vectors = {k: v for k, v in inputs.items() if k != "input_ids"}
        by_vectors["inputs_embeds"] = embeds
        actual = self.main_outputs(self.forward(model, by_vectors), inputs)
        for name in expected:
            assert_reproduces(actual[name], expected[name], name)

    def test_inputs_embeds_are_the_rows_used(self):
        """A user's own word vectors (not the model's table) give what the model gives with those rows as its table;
        whatever the caller leaves at padded positions is ignored."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        g = torch.Generator().manual_seed(5)
        table = torch.randn(model.get_input_embeddings().weight.shape, generator=g)
        table[[model.config.pad_token_id, UNK]] = 0.0  # the special rows stay zero, as in every CoVe table
        with_table = self.build_model()
        with torch.no_grad():
            with_table.get_input_embeddings().weight.copy_(table)
        expected = self.main_outputs(self.forward(with_table, inputs), inputs)
        rows = F.embedding(inputs["input_ids"], table)  # (B, T, D)
        rows[~inputs["attention_mask"].bool()] = 1e3  # garbage at padding
        by_vectors = {k: v for k, v in inputs.items() if k != "input_ids"}
        by_vectors["inputs_embeds"] = rows
        actual = self.main_outputs(self.forward(model, by_vectors), inputs)
        for name in expected:
            torch.testing.assert_close(actual[name], expected[name], rtol=0, atol=0,
                                       msg=lambda m: f"{name}: {m}")

    def test_inputs_embeds_with_input_ids_is_value_error(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        with torch.no_grad():
            embeds = model.get_input_embeddings()(inputs["input_ids"])
        with pytest.raises(ValueError, match="inputs_embeds"):
            self.forward(model, {**inputs, "inputs_embeds": embeds})

    def test_output_attentions(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        if not self.has_attention_maps:
            with pytest.raises((ValueError, NotImplementedError), match="attention"):
                self.forward(model, inputs, output_attentions=True)
            return
        batch = self.forward(model, inputs, output_attentions=True)
        maps = self.attention_maps(batch)
        assert maps, f"{self.model_class.__name__}: output_attentions=True returned no attention maps"
        assert not self.attention_maps(self.forward(model, inputs)), "attention maps returned without being asked"
        for row in range(inputs["input_ids"].shape[0]):
            alone_inputs = self.row_inputs(inputs, row)
            alone = self.attention_maps(self.forward(model, alone_inputs, output_attentions=True))
            assert [n for n, _ in alone] == [n for n, _ in maps]
            for (name, batch_map), (_, alone_map) in zip(maps, alone):
                self.check_attention_map(f"{name} row {row}", batch_map[row : row + 1], alone_map)

    @staticmethod
    def attention_maps(output) -> list:
        """[(name, tensor)] of every attention map in `output` (attentions, cross/encoder/decoder attentions)."""
        maps = []
        for field in ("attentions", "encoder_attentions", "decoder_attentions", "cross_attentions"):
            value = getattr(output, field, None)
            if value is not None:
                maps += tensors_of(value, field)
        return maps

    @staticmethod
    def check_attention_map(what: str, batch_map: torch.Tensor, alone_map: torch.Tensor):
        """A softmax over one of the last two dims: in the row run alone (no padding) every slice along that dim
        sums to 1; in the padded batch the same row holds the same weights at its real positions and sums to 1 over
        them too, so padding gets no weight."""
        assert batch_map.dim() == alone_map.dim() >= 3 and (alone_map >= 0).all() and (batch_map >= 0).all(), what
        sums = [alone_map.sum(dim=d) for d in (-1, -2)]
        normalised = [d for d, s in zip((-1, -2), sums) if torch.allclose(s, torch.ones_like(s), atol=1e-5)]
        assert normalised, f"{what}: the map alone sums to 1 over neither of its last two dims"
        real = crop_like(batch_map, 0, alone_map)
        torch.testing.assert_close(real, alone_map, rtol=0, atol=5e-7, msg=lambda m: f"{what}: {m}")
        dim = normalised[0]
        # over the full padded dim, restricted to the real positions of the other dim: padding holds no weight
        other = alone_map.shape[-2] if dim == -1 else alone_map.shape[-1]
        totals = batch_map.sum(dim=dim)[..., :other]
        torch.testing.assert_close(totals, torch.ones_like(totals), atol=1e-6, rtol=0,
                                   msg=lambda m: f"{what}: weight on padding: {m}")

    def test_output_hidden_states(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        output = self.forward(model, inputs, output_hidden_states=True)
        self.check_hidden_states(model, inputs, output)
        default = self.forward(model, inputs)
        for name, value in default.items():  # asking for hidden states changes no other output
            if name in output and "hidden_states" not in name:
                assert_equal_structure(output[name], value, name)
        model.config.output_hidden_states = True  # the config's default, as in every transformers model
        by_config = self.forward(model, inputs)
        assert_equal_structure(by_config.to_tuple(), output.to_tuple())

    def test_resize_token_embeddings_adds_zero_frozen_rows(self, tmp_path):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        old = model.get_input_embeddings().weight.detach().clone()
        before = self.main_outputs(self.forward(model, inputs), inputs)
        n = model.config.vocab_size
        model.resize_token_embeddings(n + 3)
        weight = model.get_input_embeddings().weight
        assert weight.shape == (n + 3, old.shape[1]) and model.config.vocab_size == n + 3
        assert torch.equal(weight[:n], old), "resizing changed the existing word vectors"
        assert torch.equal(weight[n:], torch.zeros(3, old.shape[1])), (
            f"new rows are not the unknown-word vector (zero): max |x| {weight[n:].abs().max():.3f}"
        )
        assert not weight.requires_grad, "the resized word-vector table must stay frozen"
        self.check_resized(model, n)
        after = self.main_outputs(self.forward(model, inputs), inputs)
        for name in before:
            assert_reproduces(after[name], before[name], name)
        # a new word reads as the unknown word (zero vector, as in the paper)
        new_word, unknown = dict(inputs), dict(inputs)
        new_word["input_ids"], unknown["input_ids"] = inputs["input_ids"].clone(), inputs["input_ids"].clone()
        new_word["input_ids"][0, 0], unknown["input_ids"][0, 0] = n + 1, UNK
        by_new = self.main_outputs(self.forward(model, new_word), new_word)
        by_unknown = self.main_outputs(self.forward(model, unknown), unknown)
        for name in by_new:
            assert_reproduces(by_new[name], by_unknown[name], name)
        # and the pair survives save -> from_pretrained
        model.save_pretrained(tmp_path)
        loaded = self.model_class.from_pretrained(tmp_path)
        assert loaded.config.vocab_size == n + 3
        loaded_weight = loaded.get_input_embeddings().weight
        assert torch.equal(loaded_weight, weight) and not loaded_weight.requires_grad
        self.check_resized(loaded, n)
        reloaded = self.main_outputs(self.forward(loaded.eval(), new_word), new_word)
        for name in by_new:
            assert_reproduces(reloaded[name], by_new[name], name)

    def test_save_and_load_round_trip(self, tmp_path):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        expected = self.forward(model, inputs)
        model.save_pretrained(tmp_path)
        assert (tmp_path / "model.safetensors").is_file() and not list(tmp_path.glob("*.bin"))
        loaded = self.model_class.from_pretrained(tmp_path)
        assert type(loaded) is self.model_class and not loaded.training
        assert_same_weights(model, loaded)
        frozen = {name for name, p in model.named_parameters() if not p.requires_grad}
        assert frozen == {name for name, p in loaded.named_parameters() if not p.requires_grad}
        actual = self.forward(loaded, inputs)
        assert list(actual.keys()) == list(expected.keys())
        for (name, a), (_, e) in zip(tensors_of(actual.to_tuple()), tensors_of(expected.to_tuple())):
            assert_reproduces(a, e, name)

    def test_loads_encoder_from_base_checkpoint(self, tmp_path):
        """A head starts from a saved `CoveModel` (the encoder weights load, the head's are initialised); the base
        model loads from the head's checkpoint with the same encoder."""
        torch.manual_seed(3)
        base = CoveModel(tiny_config(**self.config_overrides)).eval()
        base.save_pretrained(tmp_path / "base")
        head, info = self.model_class.from_pretrained(tmp_path / "base", output_loading_info=True)
        encoder = head.cove_encoder_model()
        assert_same_weights(base, encoder)
        # exactly the head's own weights are reported missing (and initialised), nothing unexpected
        prefix = "" if head is encoder else head.base_model_prefix + "."
        own = {name for name in head.state_dict() if not name.startswith(prefix)} if prefix else set()
        assert set(info["missing_keys"]) == own and not info["unexpected_keys"] and not info["mismatched_keys"]
        head.save_pretrained(tmp_path / "head")
        assert_same_weights(base, CoveModel.from_pretrained(tmp_path / "head"))

    def test_batch_equals_each_row_alone(self):
        """Padding changes nothing: each row run alone equals its row of the padded batch (every per-row output)."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        batch = self.forward(model, inputs)
        for row in range(inputs["input_ids"].shape[0]):
            alone = self.forward(model, self.row_inputs(inputs, row))
            assert list(alone.keys()) == list(batch.keys())
            for field, value in alone.items():
                if field in BATCH_LEVEL_FIELDS:
                    continue
                for (name, a), (_, b) in zip(tensors_of(value, field), tensors_of(batch[field], field)):
                    cropped = crop_like(b, row, a)
                    assert cropped.shape == a.shape, (name, row, cropped.shape, a.shape)
                    torch.testing.assert_close(cropped, a, rtol=0, atol=1e-6,
                                               msg=lambda m: f"{name}, row {row}: {m}")

    @pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
    def test_load_in_dtype(self, tmp_path, dtype):
        """`from_pretrained(dtype=...)` gives a model of that dtype whose outputs match fp32 (fp64: to fp32 rounding,
        bf16: within bf16 tolerance)."""
        model = self.build_model(**(self.bf16_load_overrides if dtype == torch.bfloat16 else {}))
        inputs = self.prepare_inputs(model)
        expected = self.main_outputs(self.forward(model, inputs), inputs)
        model.save_pretrained(tmp_path)
        loaded = self.model_class.from_pretrained(tmp_path, dtype=dtype)
        assert loaded.dtype == dtype
        assert {p.dtype for p in loaded.parameters()} == {dtype}
        actual = self.main_outputs(self.forward(loaded, inputs), inputs)
        for name in expected:
            # a loss may be computed in fp32 from low-precision logits (as the MT head does); everything else keeps
            # the model's dtype
            assert actual[name].dtype == dtype or (name == "loss" and actual[name].dtype == torch.float32), (
                name, actual[name].dtype)
            if dtype == torch.bfloat16:
                assert_close_bf16(actual[name], expected[name], name)
            else:  # fp64 differs from fp32 by fp32's rounding (measured: at most 4.5e-8)
                torch.testing.assert_close(actual[name].float(), expected[name], rtol=0, atol=5e-7,
                                           msg=lambda m: f"{name}: {m}")

    def run_bf16_autocast(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        expected = self.main_outputs(self.forward(model, inputs), inputs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            actual = self.main_outputs(self.forward(model, inputs), inputs)
        for name in expected:
            assert_close_bf16(actual[name], expected[name], name)

    def test_bf16_autocast_forward(self):
        """Runs on every CPU (with the bf16 LSTM kernel, or with the fp32 fallback where it is missing)."""
        self.run_bf16_autocast()

    def test_bf16_autocast_forward_with_fallback_forced(self, monkeypatch):
        """As on a CPU without the bf16 LSTM kernel (AVX2 only), on any machine: the fallback is forced and every
        LSTM call that autocast would run in bf16 fails as oneDNN fails there, so an LSTM that does not take the
        fallback (the encoder's or a head's own) fails this test on an AVX-512 machine too."""
        simulate_cpu_without_bf16_lstm(monkeypatch)
        assert lstm_kernels.lstm_autocast_fallback("cpu") is None  # autocast off: nothing to fall back from
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert lstm_kernels.lstm_autocast_fallback("cpu") == torch.bfloat16
        self.run_bf16_autocast()

    @pytest.mark.parametrize("freeze_encoder", [True, False])
    def test_training_step_reaches_trainable_parameters_only(self, freeze_encoder):
        model = self.build_model(freeze_encoder=freeze_encoder).train()
        inputs = self.prepare_inputs(model)
        trainable = {name for name, p in model.named_parameters() if p.requires_grad}
        cove_prefix = "" if isinstance(model, CoveModel) else model.base_model_prefix + "."
        assert not any(name.startswith(cove_prefix + "embeddings") for name in trainable), "word vectors train"
        encoder = {name for name, _ in model.named_parameters() if name.startswith(cove_prefix + "encoder.")}
        assert encoder and (encoder <= trainable) != freeze_encoder
        output = model(**inputs)
        if not trainable:  # the base model with a frozen encoder: nothing to train, no graph
            assert not output.last_hidden_state.requires_grad
            return
        loss = output.loss if output.get("loss") is not None else output.last_hidden_state.pow(2).mean()
        loss.backward()
        for name, param in model.named_parameters():
            if name in trainable:
                assert param.grad is not None and torch.isfinite(param.grad).all(), f"no gradient reached {name}"
            else:
                assert param.grad is None, f"frozen {name} got a gradient"
        if not freeze_encoder:  # an unfrozen MT-LSTM learns
            assert all(bool(model.get_parameter(name).grad.abs().sum() > 0) for name in encoder)

    @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (none on this machine)")
    def test_same_outputs_on_gpu(self):
        """On a GPU (cuDNN, and the encoder's single-call path) the outputs match the CPU's, in fp32 and under bf16
        autocast."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        expected = self.main_outputs(self.forward(model, inputs), inputs)
        on_gpu = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}
        model.cuda()
        actual = self.main_outputs(self.forward(model, on_gpu), on_gpu)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            in_bf16 = self.main_outputs(self.forward(model, on_gpu), on_gpu)
        for name in expected:
            torch.testing.assert_close(actual[name].cpu(), expected[name], rtol=1e-4, atol=1e-4,
                                       msg=lambda m: f"{name}: {m}")
            torch.testing.assert_close(in_bf16[name].float().cpu(), expected[name], **BF16_GPU_TOLERANCE,
                                       msg=lambda m: f"{name} (bf16): {m}")

    def export_inputs(self, model, seed: int) -> dict:
        return self.prepare_inputs(model, seed=seed)

    def test_torch_export_matches_eager(self):
        """`torch.export` traces the model (no Python branch on tensor values) and the program gives the eager
        outputs, also on a second batch of the same shape with other words and other padding."""
        model = self.build_model()
        inputs = self.export_inputs(model, seed=0)
        exported = torch.export.export(model, args=(), kwargs=inputs, strict=False)
        program = exported.module()
        for seed in (0, 1):
            batch = self.export_inputs(model, seed=seed)
            expected = self.main_outputs(self.forward(model, batch), batch)
            with torch.no_grad():
                actual = self.main_outputs(program(**batch), batch)
            for name in expected:
                torch.testing.assert_close(actual[name], expected[name], rtol=0, atol=1e-6,
                                           msg=lambda m: f"{name}, batch {seed}: {m}")


# ---------------------------------------------------------------------------------------------------------------
# the classes


class TestCoveModel(CoveModelTesterMixin):
    model_class = CoveModel
    has_attention_maps = False

    def prepare_inputs(self, model, seed=0, labels=True):
        g = torch.Generator().manual_seed(seed)
        lengths = [5, 2, 4] if seed == 0 else [3, 5, 1]
        ids, mask = right_padded([random_words(g, n) for n in lengths])
        return {"input_ids": ids, "attention_mask": mask}

    def main_outputs(self, output, inputs):
        return {"last_hidden_state": output.last_hidden_state}

    def test_added_tokens_and_resize_survive_save_and_load(self, tmp_path):
        """`tokenizer.add_tokens` + `resize_token_embeddings(len(tokenizer))`: the pair saves and loads (the loaded
        tokenizer still matches the checkpoint), and an added word reads as an unknown word (zero vector)."""
        from transformers import AutoTokenizer

        from modeling_cove.build import create_cove_checkpoint
        from modeling_cove.tokenization_cove import check_tokenizer_matches

        words = ["the", "cat", "sat", "on", "mat", "."]
        vectors = torch.randn(len(words) + 4, 6, generator=torch.Generator().manual_seed(0))
        model, tokenizer = create_cove_checkpoint(words, vectors, hidden_size=4)
        assert tokenizer.add_tokens(["zebra", "quokka"]) == 2
        model.resize_token_embeddings(len(tokenizer))
        model.save_pretrained(tmp_path)
        tokenizer.save_pretrained(tmp_path)
        loaded, loaded_tokenizer = CoveModel.from_pretrained(tmp_path), AutoTokenizer.from_pretrained(tmp_path)
        assert len(loaded_tokenizer) == loaded.config.vocab_size == len(words) + 6
        check_tokenizer_matches(loaded.config, loaded_tokenizer)
        # everything the tokenizer returns goes to forward, as the feature-extraction pipeline passes it
        added = loaded_tokenizer(["the zebra sat on the quokka"], return_tensors="pt")
        unknown = loaded_tokenizer(["the xyzzy sat on the plugh"], return_tensors="pt")
        assert added["input_ids"][0, [1, 5]].tolist() == [len(words) + 4, len(words) + 5]
        assert unknown["input_ids"][0, [1, 5]].tolist() == [UNK, UNK]
        with torch.no_grad():
            assert_reproduces(loaded(**added).last_hidden_state, loaded(**unknown).last_hidden_state, "added words")

    def check_hidden_states(self, model, inputs, output):
        states = output.hidden_states
        config = model.config
        assert states is not None and len(states) == config.num_hidden_layers + 1
        batch, time = inputs["input_ids"].shape
        assert states[0].shape == (batch, time, config.word_vector_dim)
        for layer in states[1:]:
            assert layer.shape == (batch, time, config.encoder_output_size)
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        with torch.no_grad():
            vectors = model.get_input_embeddings()(inputs["input_ids"]) * mask
        assert_reproduces(states[0], vectors, "hidden_states[0] (word vectors)")
        assert_reproduces(states[-1], output.last_hidden_state, "hidden_states[-1] (top layer)")


class TestCoveForSequenceClassification(CoveModelTesterMixin):
    model_class = CoveForSequenceClassification
    has_attention_maps = True

    def prepare_inputs(self, model, seed=0, labels=True):
        """Two single texts and one pair (first text type 0, second type 1), as the tokenizer gives them. Every
        `prepare_inputs` gives one shape for both seeds (the exported program of `test_torch_export_matches_eager`
        has static shapes)."""
        g = torch.Generator().manual_seed(seed)
        texts = [(5, 0), (2, 2), (3, 0)] if seed == 0 else [(2, 3), (3, 0), (4, 0)]  # the same width, 5
        inputs = two_segment_inputs(g, texts)
        if labels:
            inputs["labels"] = torch.tensor([0, 2, 1])
        return inputs

    def main_outputs(self, output, inputs):
        return logits_and_loss(output)

    def check_hidden_states(self, model, inputs, output):
        """The first L + 1 entries are CoveModel's hidden states of each text run alone (a pair's texts are encoded
        apart), at that text's positions."""
        super().check_hidden_states(model, inputs, output)
        layers = model.config.num_hidden_layers + 1
        assert len(output.hidden_states) >= layers
        for row in range(inputs["input_ids"].shape[0]):
            for start, end in text_spans(inputs, row):
                with torch.no_grad():
                    alone = model.cove(inputs["input_ids"][row : row + 1, start:end], output_hidden_states=True)
                for k in range(layers):
                    torch.testing.assert_close(output.hidden_states[k][row, start:end], alone.hidden_states[k][0],
                                               rtol=0, atol=0, msg=lambda m: f"row {row} layer {k}: {m}")

    def test_biattention_maps_from_hidden_states(self):
        """Eq. 9's A = X Yᵀ from the returned BCN encoder states X and Y (X at the first text's positions, Y at the
        second's; Y = X for a single text): A_x is its softmax over the x tokens, A_y the softmax of Aᵀ over the y
        tokens."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        output = self.forward(model, inputs, output_hidden_states=True, output_attentions=True)
        attention_x, attention_y = output.attentions
        encoder_states = output.hidden_states[model.config.num_hidden_layers + 1]  # X / Y, (B, T, 2H)
        for row in range(inputs["input_ids"].shape[0]):
            spans = text_spans(inputs, row)
            x = encoder_states[row, spans[0][0] : spans[0][1]]
            y = encoder_states[row, spans[-1][0] : spans[-1][1]]
            affinity = x @ y.T  # eq. 9, (n, m)
            n, m = affinity.shape
            torch.testing.assert_close(attention_x[row, :n, :m], torch.softmax(affinity, dim=0), rtol=0, atol=2e-7)
            torch.testing.assert_close(attention_y[row, :m, :n], torch.softmax(affinity.T, dim=0), rtol=0, atol=2e-7)

    def test_load_with_other_label_count(self, tmp_path):
        """Fine-tuning a checkpoint on a task with other labels: refused unless `ignore_mismatched_sizes=True`, which
        keeps every weight but the output layer's."""
        model = self.build_model()
        model.save_pretrained(tmp_path)
        labels = dict(id2label={i: f"l{i}" for i in range(5)}, label2id={f"l{i}": i for i in range(5)})  # 5 labels
        with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
            self.model_class.from_pretrained(tmp_path, **labels)
        loaded = self.model_class.from_pretrained(tmp_path, ignore_mismatched_sizes=True, **labels).eval()
        inputs = self.prepare_inputs(loaded, labels=False)
        assert self.forward(loaded, inputs).logits.shape == (3, 5)
        original, reloaded = model.state_dict(), loaded.state_dict()
        output_layer = f"classifier.{len(model.classifier) - 1}."
        for name, tensor in original.items():
            if not name.startswith(output_layer):
                assert torch.equal(reloaded[name], tensor), name

    @pytest.mark.parametrize("problem_type", ["regression", "multi_label_classification"])
    def test_problem_types(self, problem_type):
        """transformers' sequence-classification problem types, each with its loss computed from the logits."""
        num_labels = 1 if problem_type == "regression" else 3
        model = self.build_model(problem_type=problem_type, num_labels=num_labels, id2label=None, label2id=None)
        inputs = self.prepare_inputs(model, labels=False)
        if problem_type == "regression":
            labels = torch.tensor([0.5, -1.0, 2.0])
        else:
            labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        output = self.forward(model, {**inputs, "labels": labels})
        assert output.logits.shape == (3, num_labels)
        if problem_type == "regression":
            expected = F.mse_loss(output.logits.squeeze(-1), labels)
        else:
            expected = F.binary_cross_entropy_with_logits(output.logits, labels)
        torch.testing.assert_close(output.loss, expected, rtol=0, atol=0)


class TestCoveForQuestionAnswering(CoveModelTesterMixin):
    model_class = CoveForQuestionAnswering
    has_attention_maps = True
    # In eval a row stops iterating once its argmax span repeats, and the loss sums the iterations it ran: bf16
    # rounding can flip a near-tied argmax and so add or drop a whole loss term (seen on an AVX2-only CPU, whose bf16
    # LSTM is not oneDNN's). One iteration compares the same computation in both dtypes.
    bf16_load_overrides = {"dcn_max_iterations": 1}

    def prepare_inputs(self, model, seed=0, labels=True):
        """(question, context) pairs as one sequence: question type 0, context type 1; answers inside the context."""
        g = torch.Generator().manual_seed(seed)
        pairs = [(2, 4), (3, 2), (1, 3)] if seed == 0 else [(1, 5), (2, 2), (3, 3)]
        inputs = two_segment_inputs(g, pairs)
        if labels:
            inputs["start_positions"] = torch.tensor([q + 1 for q, _ in pairs])
            inputs["end_positions"] = torch.tensor([q + c - 1 for q, c in pairs])
        return inputs

    def main_outputs(self, output, inputs):
        context = inputs["token_type_ids"].bool() & inputs["attention_mask"].bool()
        # the scores of context tokens (elsewhere the dtype's most negative value, which differs between dtypes)
        values = {name: torch.where(context, getattr(output, name), torch.zeros((), dtype=getattr(output, name).dtype))
                  for name in ("start_logits", "end_logits")}
        if output.get("loss") is not None:
            values["loss"] = output.loss
        return values

    def check_hidden_states(self, model, inputs, output):
        """`hidden_states[0]` is w~ of eq. 6 at every token: [word vectors; CoVe of the token's own text (question or
        context) run alone through CoveModel]."""
        super().check_hidden_states(model, inputs, output)
        inputs_width = model.config.word_vector_dim + model.config.encoder_output_size
        assert output.hidden_states[0].shape == (*inputs["input_ids"].shape, inputs_width)
        for row in range(inputs["input_ids"].shape[0]):
            for start, end in text_spans(inputs, row):
                ids = inputs["input_ids"][row : row + 1, start:end]
                with torch.no_grad():
                    expected = torch.cat([model.cove.embeddings(ids), model.cove(ids).last_hidden_state], dim=-1)
                torch.testing.assert_close(output.hidden_states[0][row, start:end], expected[0], rtol=0,
                                           atol=0, msg=lambda m: f"row {row}, tokens {start}:{end}: {m}")

    def test_start_and_end_outside_the_context_mean_no_answer(self):
        """transformers' SQuAD features label a window without the answer 0/0: such a row adds nothing to the loss
        (the loss equals that of the other rows alone)."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        no_answer = {**inputs, "start_positions": inputs["start_positions"].clone(),
                     "end_positions": inputs["end_positions"].clone()}
        no_answer["start_positions"][1] = no_answer["end_positions"][1] = 0
        loss = self.forward(model, no_answer).loss
        keep = [0, 2]
        others = {name: value[keep] for name, value in inputs.items()}
        time = int(others["attention_mask"].sum(dim=1).max())
        others = {name: value[:, :time] if value.dim() == 2 else value for name, value in others.items()}
        # equal up to float32 rounding: the rows kept run as a smaller batch (measured 2.4e-7, one ulp, on Zen 4)
        torch.testing.assert_close(loss, self.forward(model, others).loss, rtol=0, atol=1e-6)


class TestCoveForMachineTranslation(CoveModelTesterMixin):
    model_class = CoveForMachineTranslation
    has_attention_maps = True

    def prepare_inputs(self, model, seed=0, labels=True):
        """Sources of different lengths; labels end in </s> (3) and are padded with -100, 4 steps (not the source
        width, so per-row cutting never mistakes them for source tensors)."""
        g = torch.Generator().manual_seed(seed)
        sources = [5, 2, 4] if seed == 0 else [3, 5, 1]
        targets = [3, 4, 2] if seed == 0 else [4, 2, 3]
        ids, mask = right_padded([random_words(g, n) for n in sources])
        rows = [random_words(g, n - 1, vocab_size=model.config.target_vocab_size) + [3] for n in targets]
        target_ids, _ = right_padded(rows, pad=-100)
        inputs = {"input_ids": ids, "attention_mask": mask}
        if labels:
            inputs["labels"] = target_ids
        else:
            inputs["decoder_input_ids"] = torch.cat(
                [torch.full((len(rows), 1), 2), target_ids[:, :-1].clamp(min=0)], dim=1)
        return inputs

    def main_outputs(self, output, inputs):
        return logits_and_loss(output)

    def check_hidden_states(self, model, inputs, output):
        with torch.no_grad():
            encoder = model.get_encoder()(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"],
                                          output_hidden_states=True)
        assert output.encoder_hidden_states is not None, "no encoder_hidden_states"
        assert len(output.encoder_hidden_states) == len(encoder.hidden_states)
        for k, (actual, expected) in enumerate(zip(output.encoder_hidden_states, encoder.hidden_states)):
            assert_reproduces(actual, expected, f"encoder_hidden_states[{k}]")
        assert output.decoder_hidden_states is not None, "output_hidden_states=True returned no decoder_hidden_states"
        batch, steps = inputs["labels"].shape
        for name, state in tensors_of(output.decoder_hidden_states, "decoder_hidden_states"):
            assert state.shape[:2] == (batch, steps) and torch.isfinite(state).all(), (name, state.shape)

    def check_resized(self, model, old_vocab_size):
        """The source vocabulary grew; the target side (decoder embeddings, output layer) did not."""
        config = model.config
        assert model.get_output_embeddings().weight.shape == (config.target_vocab_size, config.decoder_hidden_size)
        assert model.get_decoder().embed_tokens.weight.shape[0] == config.target_vocab_size

    def test_loss_is_mean_token_cross_entropy(self):
        """As every Seq2SeqLM: the mean cross-entropy over the target tokens (pad and -100 ignored)."""
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        output = self.forward(model, inputs)
        labels = inputs["labels"]
        targets = labels.masked_fill(labels == model.config.pad_token_id, -100)
        expected = F.cross_entropy(output.logits.reshape(-1, output.logits.shape[-1]), targets.reshape(-1),
                                   ignore_index=-100)
        torch.testing.assert_close(output.loss, expected, rtol=0, atol=0)

    def test_get_encoder_of_another_modality_is_the_model(self):
        model = self.build_model()
        assert model.get_encoder() is model.cove
        assert model.get_encoder(modality="image") is model


class TestCoveForTokenClassification(CoveModelTesterMixin):
    model_class = CoveForTokenClassification
    config_overrides = dict(tagger_hidden_size=4, tagger_module_dim=5, tagger_dropout=0.1)

    def prepare_inputs(self, model, seed=0, labels=True):
        """Single sentences of different lengths (width 5 for both seeds); a label per token, -100 on one later
        sub-word per row and on padding."""
        g = torch.Generator().manual_seed(seed)
        lengths = [5, 2, 4] if seed == 0 else [3, 5, 1]
        ids, mask = right_padded([random_words(g, n) for n in lengths])
        inputs = {"input_ids": ids, "attention_mask": mask}
        if labels:
            tags = torch.randint(0, len(LABELS), ids.shape, generator=g)
            tags[:, 1] = -100
            inputs["labels"] = tags.masked_fill(mask == 0, -100)
        return inputs

    def main_outputs(self, output, inputs):
        # the logits of tokens (at padding they come from zero states and mean nothing)
        values = {"logits": output.logits * inputs["attention_mask"].unsqueeze(-1).to(output.logits.dtype)}
        if output.get("loss") is not None:
            values["loss"] = output.loss
        return values

    def check_hidden_states(self, model, inputs, output):
        """(w~, biLSTM layer 1, ..., layer L): w~ = [word vectors; CoVe] (the default "vectors+cove") of each
        sentence, zero at padding."""
        super().check_hidden_states(model, inputs, output)
        config = model.config
        assert len(output.hidden_states) == config.tagger_num_layers + 1
        mask = inputs["attention_mask"].unsqueeze(-1).float()
        with torch.no_grad():
            expected = torch.cat([model.cove.embeddings(inputs["input_ids"]),
                                  model.cove(inputs["input_ids"], inputs["attention_mask"]).last_hidden_state], -1)
        torch.testing.assert_close(output.hidden_states[0], expected * mask, rtol=0, atol=0)
        for layer in output.hidden_states[1:]:
            assert layer.shape == (*inputs["input_ids"].shape, 2 * config.tagger_hidden_size)

    def test_loss_is_mean_cross_entropy_over_labelled_tokens(self):
        model = self.build_model()
        inputs = self.prepare_inputs(model)
        output = self.forward(model, inputs)
        labelled = inputs["labels"] != -100
        expected = F.cross_entropy(output.logits[labelled], inputs["labels"][labelled])
        torch.testing.assert_close(output.loss, expected, rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------------------------
# the config, in the manner of transformers' ConfigTester


def config_parameters():
    """CoveConfig's own fields (the dataclass fields PreTrainedConfig does not declare)."""
    inherited = {field.name for field in dataclasses.fields(PreTrainedConfig)}
    return [field for field in dataclasses.fields(CoveConfig) if field.name not in inherited]


class TestCoveConfig:
    def test_every_field_is_defaulted_documented_and_stored(self):
        doc = CoveConfig.__doc__
        config = CoveConfig()
        for param in config_parameters():
            assert param.default is not dataclasses.MISSING, f"{param.name} has no default"
            assert re.search(rf"`?{param.name}`? \(`", doc) or f"`{param.name}`" in doc, (
                f"{param.name} is not documented in CoveConfig's docstring"
            )
            stored = getattr(config, param.name)
            default = list(param.default) if isinstance(param.default, tuple) else param.default
            if param.name in PAPER_FORM_FIELDS:  # None: the paper's form in a new config (paper_defaults_version)
                default = PAPER_FORM_FIELDS[param.name][1] if default is None else default
            assert stored == default, (param.name, stored, param.default)

    def test_common_properties(self):
        config = tiny_config()
        for name in ("vocab_size", "hidden_size", "num_hidden_layers", "pad_token_id", "eos_token_id",
                     "bos_token_id", "decoder_start_token_id", "initializer_range"):
            assert hasattr(config, name), name
        config.num_labels = 5
        assert len(config.id2label) == len(config.label2id) == 5
        assert config.output_size == config.encoder_output_size == 2 * config.hidden_size
        assert CoveConfig(cove_output="both", include_word_vectors=True, char_ngram_dim=3, hidden_size=4,
                          word_vector_dim=6).output_size == 6 + 2 * 8 + 3

    def test_non_default_values_round_trip(self, tmp_path):
        values = dict(vocab_size=31, word_vector_dim=7, hidden_size=5, num_hidden_layers=3, encoder_dropout=0.25,
                      cove_output="both", include_word_vectors=True, char_ngram_dim=2, freeze_encoder=False,
                      lowercase=False, bcn_pooling=["max", "self"], bcn_maxout_reductions=[8, 2],
                      dcn_input="vectors", target_vocab_size=33, num_labels=4)
        config = CoveConfig(**values)
        for name, value in values.items():
            assert getattr(config, name) == value, name
        as_dict = config.to_dict()
        assert CoveConfig.from_dict(as_dict).to_dict() == as_dict
        assert CoveConfig.from_dict(json.loads(config.to_json_string())).to_dict() == as_dict
        config.to_json_file(tmp_path / "config.json")
        assert CoveConfig.from_json_file(tmp_path / "config.json").to_dict() == as_dict
        config.save_pretrained(tmp_path / "saved")
        loaded = CoveConfig.from_pretrained(tmp_path / "saved")
        assert loaded.to_dict() == as_dict
        assert set(config.to_diff_dict()) >= set(values) - {"num_labels"}
        assert CoveConfig.from_pretrained(tmp_path / "saved", hidden_size=9).hidden_size == 9

    def test_save_and_load_from_subfolder(self, tmp_path):
        config = tiny_config()
        config.save_pretrained(tmp_path / "sub")
        loaded = CoveConfig.from_pretrained(tmp_path, subfolder="sub")
        assert loaded.to_dict() == config.to_dict()

    def test_every_field_survives_from_dict(self):
        """Each field set to a valid value of its own (non-default where the field allows) is kept through to_dict ->
        from_dict. A field added to CoveConfig must get a value here (the test names it)."""
        changed = dict(vocab_size=40, word_vector_dim=8, hidden_size=3, num_hidden_layers=1, encoder_dropout=0.5,
                       cove_output="both", include_word_vectors=True, char_ngram_dim=4, freeze_embeddings=False,
                       freeze_encoder=False, initializer_range=0.2, lowercase=False, output_final_states=True,
                       target_vocab_size=41, decoder_embedding_dim=9, decoder_hidden_size=10, decoder_num_layers=3,
                       decoder_dropout=0.3, attention_bias=True, max_source_length=50, length_penalty_alpha=0.6,
                       bcn_input="scalar_mix", bcn_feedforward_dim=11, bcn_hidden_size=12, bcn_pooling=["min"],
                       bcn_maxout_reductions=[2], bcn_maxout_pool=2, bcn_batch_norm=False, bcn_dropout=0.1,
                       dcn_input="cove", dcn_hidden_size=14, dcn_pool_size=4, dcn_max_iterations=2,
                       dcn_max_answer_length=5, dcn_dropout=0.4, pad_token_id=0, unk_token_id=1, bos_token_id=5,
                       eos_token_id=6, decoder_start_token_id=7, mt_loss_reduction="sentence", bcn_max_length=None,
                       bcn_pair_input=True, vocabulary_fingerprint="40:0123456789abcdef",
                       encoder_dropout_all_layers=False, bcn_final_batch_norm=False, bcn_pooling_dropout=False,
                       bcn_independent_dropout=False, dcn_feedforward_dropout=False,
                       dcn_hmn_end_previous_start=False, paper_defaults_version=0, encoder_type="bilm",
                       bilm_residual=False, bilm_softmax_cutoffs=[10, 100], bilm_tie_softmax=False,
                       lstm_implementation="reference", tagger_input="vectors", tagger_hidden_size=13,
                       tagger_num_layers=3, tagger_module_dim=15, tagger_dropout=0.2, tagger_max_length=None,
                       tagger_case_dim=3, tagger_boundary_tokens=True)
        missing = [param.name for param in config_parameters() if param.name not in changed]
        assert not missing, f"fields without a value in this test: {missing}"
        for param in config_parameters():
            config = CoveConfig(**{param.name: changed[param.name]})
            restored = CoveConfig.from_dict(config.to_dict())
            assert getattr(restored, param.name) == changed[param.name], param.name
