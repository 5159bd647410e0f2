"""CoveConfig: one configuration for the CoVe encoder and every head (MT decoder, BCN, DCN, biLM pretraining).

As with `BertConfig`, a single config class serves the base model and all heads, in transformers' typed style: each
field is a typed dataclass field with its default, grouped by the part of the model that reads it and documented in
the class docstring, and the `validate_*` methods check the values when a config is built or loaded.
"""

import functools
import math
import numbers
import re
import sys
from dataclasses import dataclass, fields

import numpy as np
from huggingface_hub.dataclasses import strict
from huggingface_hub.errors import StrictDataclassClassValidationError, StrictDataclassFieldValidationError
from transformers import PreTrainedConfig

__all__ = ["BCN_INPUT_CHOICES", "check_field_names", "COVE_OUTPUT_CHOICES", "CoveConfig", "DCN_INPUT_CHOICES",
           "ENCODER_TYPE_CHOICES", "FeatureLayout", "LSTM_IMPLEMENTATION_CHOICES", "pipelines_needing_remote_code",
           "TAGGER_INPUT_CHOICES"]

COVE_OUTPUT_CHOICES = ("top", "both")
BCN_INPUT_CHOICES = ("vectors+cove", "vectors", "cove", "scalar_mix", "vectors+scalar_mix")
BCN_POOLING_CHOICES = ("max", "mean", "min", "self")
DCN_INPUT_CHOICES = ("vectors+cove", "vectors", "cove")
TAGGER_INPUT_CHOICES = ("vectors+cove", "vectors", "cove", "vectors+scalar_mix")
LSTM_IMPLEMENTATION_CHOICES = ("auto", "reference", "unpacked", "single_call")  # modeling_cove/lstm_kernels.py
ENCODER_TYPE_CHOICES = ("mt_lstm", "bilm")  # CoveModel's encoder module (modeling_cove.encoder_class)


# eq. 6's parts, in the order they always take in a per-token feature vector w~ (FeatureLayout)
FEATURE_PARTS = ("word_vectors", "first_layer", "top_layer", "char_ngrams")
FEATURE_READERS = ("encoder", "bcn", "dcn", "tagger")


@dataclass(frozen=True)
class FeatureLayout:
    """The columns of a per-token feature vector w~ (eq. 6): its named parts in order, each as `(name, start, end)`.

    Parts: `"word_vectors"` (GloVe(w), word_vector_dim), `"first_layer"` (MT-LSTM layer 1, 2h), `"top_layer"`
    (MT-LSTM layer L: CoVe(w), 2h), `"char_ngrams"` (char_ngram_dim), and, for the BCN's `bcn_input="scalar_mix"`
    only, `"scalar_mix"` (2h) in place of the word vectors and layers. Built by `CoveConfig.feature_layout`; every
    model reads its columns from here instead of computing offsets."""

    # eq. 6, w~ = [GloVe(w); CoVe(w)]: its tensors go into these columns in `modeling_cove.assemble_features`
    parts: tuple  # ((name, start, end), ...) in column order, end-exclusive

    @classmethod
    def from_widths(cls, named_widths) -> "FeatureLayout":
        """The layout of the `(name, width)` pairs placed side by side in this order."""
        parts, start = [], 0
        for name, width in named_widths:
            parts.append((name, start, start + width))
            start += width
        return cls(tuple(parts))

    @property
    def names(self) -> tuple:
        return tuple(name for name, _, _ in self.parts)

    @property
    def size(self) -> int:
        """Total width D (the last part's end; 0 without parts)."""
        return self.parts[-1][2] if self.parts else 0

    def has(self, name: str) -> bool:
        return name in self.names

    def columns(self, name: str) -> tuple:
        """`(start, end)` of part `name`; a ValueError naming the parts there are when it is not one of them."""
        for part, start, end in self.parts:
            if part == name:
                return start, end
        raise ValueError(f"the feature layout has no part {name!r}; its parts are {list(self.names)}")

    def select(self, features, name: str):
        """Part `name` of `features` (..., D): its columns `features[..., start:end]` (a view)."""
        start, end = self.columns(name)
        return features[..., start:end]

    def span(self, names) -> tuple:
        """`(start, end)` of those of the parts `names` that are here, which must be neighbours; `(0, 0)` when none
        is (e.g. `("first_layer", "top_layer")`: the columns of the CoVe parts, eq. 6's CoVe(w))."""
        present = [(start, end) for name, start, end in self.parts if name in names]
        if not present:
            return 0, 0
        if any(a[1] != b[0] for a, b in zip(present, present[1:])):
            raise ValueError(f"the parts {list(names)} are not neighbours in the feature layout {list(self.names)}")
        return present[0][0], present[-1][1]

    def mt_lstm_layers(self, num_layers: int) -> list:
        """The `hidden_states` indices (1 = layer 1, L = the top layer) of the MT-LSTM parts, in column order."""
        return [{"first_layer": 1, "top_layer": num_layers}[name] for name in self.names
                if name in ("first_layer", "top_layer")]


def is_int(value) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def default_softmax_cutoffs(vocab_size: int) -> list:
    """The biLM's adaptive softmax cutoffs when `bilm_softmax_cutoffs` is None: the most frequent tenth of the ids in
    the head, the next two ninths and the rest as two tail clusters ([1] for a 2-word vocabulary)."""
    return sorted({c for c in (vocab_size // 10, vocab_size // 3) if 1 <= c <= vocab_size - 1}) or [1]


# The types of CoveConfig's number fields: an int field also takes numpy's integers, a float field ints and numpy's
# numbers (the config took them before its fields were typed); `CoveConfig.__post_init__` stores Python numbers.
Int = int | np.integer
Real = float | int | np.integer | np.floating

# Where the code once departed from the papers without a reason (docs/deviations.md): each such form is a bool field,
# field -> (value in a config saved before `paper_defaults_version` existed, the paper's form). A new config takes
# the paper's form (`paper_defaults_version=PAPER_DEFAULTS_VERSION`); a config.json without the marker loads as
# version 0, i.e. with the forms it was trained with (`CoveConfig.from_dict`).
PAPER_DEFAULTS_VERSION = 1
PAPER_FORM_FIELDS = {
    "encoder_dropout_all_layers": (False, True),
    "bcn_independent_dropout": (False, True),
    "bcn_pooling_dropout": (False, True),
    "bcn_final_batch_norm": (False, True),
    "dcn_hmn_end_previous_start": (False, True),
    "dcn_feedforward_dropout": (False, True),
}

# the fields that `validate_*` check by group, and the choices of each string field
POSITIVE_INT_FIELDS = (
    "vocab_size", "word_vector_dim", "hidden_size", "num_hidden_layers", "target_vocab_size", "decoder_embedding_dim",
    "decoder_hidden_size", "decoder_num_layers", "max_source_length", "bcn_feedforward_dim", "bcn_hidden_size",
    "bcn_maxout_pool", "dcn_hidden_size", "dcn_pool_size", "dcn_max_iterations", "dcn_max_answer_length",
    "tagger_hidden_size", "tagger_num_layers", "tagger_module_dim",
)
DROPOUT_FIELDS = ("encoder_dropout", "decoder_dropout", "bcn_dropout", "dcn_dropout", "tagger_dropout")
SWITCH_FIELDS = ("include_word_vectors", "freeze_embeddings", "freeze_encoder", "lowercase", "output_final_states",
                 "bilm_residual", "bilm_tie_softmax", "attention_bias", "bcn_batch_norm", "bcn_pair_input",
                 "tagger_boundary_tokens")
CHOICES = {
    "cove_output": COVE_OUTPUT_CHOICES, "lstm_implementation": LSTM_IMPLEMENTATION_CHOICES,
    "encoder_type": ENCODER_TYPE_CHOICES, "mt_loss_reduction": ("token_mean", "sentence"),
    "bcn_input": BCN_INPUT_CHOICES, "dcn_input": DCN_INPUT_CHOICES, "tagger_input": TAGGER_INPUT_CHOICES,
}
FINGERPRINT_PATTERN = r"[1-9][0-9]*:[0-9a-f]{16}"  # tokenization_cove.vocabulary_fingerprint

# What each field must be, in the words of the ValueError a bad value gets: "<field> must be <this>, got <value>"
REQUIREMENTS = {
    **dict.fromkeys(POSITIVE_INT_FIELDS + ("bcn_max_length", "tagger_max_length"), "an int >= 1"),
    **dict.fromkeys(("char_ngram_dim", "tagger_case_dim"), "an int >= 0"),
    **dict.fromkeys(DROPOUT_FIELDS, "a probability in [0, 1)"),
    "initializer_range": "a finite number > 0 (U(-r, r))",
    "length_penalty_alpha": "a number",
    **dict.fromkeys(SWITCH_FIELDS, "True or False"),
    **{name: f"one of {choices}" for name, choices in CHOICES.items()},
    "vocabulary_fingerprint": "None or '<size>:<16 lower-case hex digits>' (tokenization_cove.vocabulary_fingerprint)",
    "bilm_softmax_cutoffs": "None or increasing ints in [1, vocab_size - 1]",
    "bcn_pooling": f"a non-empty list of {BCN_POOLING_CHOICES}",
    "bcn_maxout_reductions": "a list of ints",
    **dict.fromkeys(PAPER_FORM_FIELDS, "True, False or None (the default of paper_defaults_version)"),
    "paper_defaults_version": f"an int in [0, {PAPER_DEFAULTS_VERSION}]",
    "pad_token_id": "an id of both vocabularies",
    **dict.fromkeys(("unk_token_id", "bos_token_id", "eos_token_id", "decoder_start_token_id"), "an int or None"),
}


def must_be(name: str, value, requirement: str = None) -> str:
    """The message of a bad value: `<name> must be <requirement or REQUIREMENTS[name]>, got <value>`."""
    return f"{name} must be {requirement or REQUIREMENTS[name]}, got {value!r}"


def _check(valid: bool, name: str, value, requirement: str = None) -> None:
    if not valid:
        raise ValueError(must_be(name, value, requirement))


def _plain(value):
    """`value` with numpy scalars as the Python numbers they equal and tuples as lists (what a config.json holds)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _value_errors(cls):
    """A bad value of `cls` is a `ValueError` naming the field and what it must be, as CoveConfig's always was:
    `@strict` reports a wrong type on assignment and a failed `validate_*` method with its own error classes, which
    are re-raised here as `ValueError` (chained): a wrong type with the field's `REQUIREMENTS`, a failed check with
    the message of its `validate_*` method."""
    strict_setattr, strict_init = cls.__setattr__, cls.__init__

    @functools.wraps(strict_setattr)
    def __setattr__(self, name, value):
        try:
            strict_setattr(self, name, value)
        except StrictDataclassFieldValidationError as error:
            raise ValueError(must_be(name, value) if name in REQUIREMENTS else str(error)) from error

    @functools.wraps(strict_init)
    def __init__(self, *args, **kwargs):
        try:
            strict_init(self, *args, **kwargs)
        except StrictDataclassClassValidationError as error:
            raise ValueError(str(error.__cause__)) from error

    cls.__setattr__, cls.__init__ = __setattr__, __init__
    return cls


@_value_errors
@strict
class CoveConfig(PreTrainedConfig):
    r"""
    Configuration of a CoVe model (McCann et al. 2017, "Learned in Translation: Contextualized Word Vectors").

    The per-token features w~ of eq. 6 (one concept, `CoveConfig.feature_layout`): a w~ is made of named parts,
    always in the order [word vectors; MT-LSTM layer 1; top layer; char n-grams], and `FeatureLayout` reports the
    columns of each. Which parts a model's w~ holds is said by the fields README users know, kept as they were
    (checkpoints saved before this layout existed load with the same behaviour, and no field was renamed):
        - `cove_output` chooses the MT-LSTM parts everywhere: `"top"` = the top layer, `"both"` = layer 1 and the
          top layer (a head's w~ and the encoder's output alike);
        - `char_ngram_dim > 0` appends the char n-grams everywhere;
        - the word vectors and whether CoVe is read at all depend on the reader: `include_word_vectors` for the
          encoder's own output (`CoveModel(...).last_hidden_state`, `feature_layout("encoder")`, which the MT head
          and `encode` read), `bcn_input` for the BCN (`feature_layout("bcn")`) and `dcn_input` for the DCN
          (`feature_layout("dcn")`): `"vectors+cove"` = word vectors and the CoVe parts, `"vectors"` = word
          vectors only, `"cove"` = the CoVe parts only (`"scalar_mix"`: one mixed part, BCN only).
    The heads run the encoder for the layers they read and build their own w~ (each text of a pair apart), so
    `include_word_vectors` changes only the encoder's output, never a head's input. Why three reader fields and not
    one: a checkpoint records all three, and an encoder checkpoint with `include_word_vectors=False` (CoVe(w) alone,
    as released) is what the heads start from, reading the word vectors as eq. 6 says.
    One exception kept from before: the BCN with a 1-layer MT-LSTM and `cove_output="both"` reads that layer once
    (layer 1 is the top layer), where the encoder output and the DCN hold it twice.

    Validation, when the config is built or loaded: every field has a type, checked on assignment too (an `int`
    field takes numpy's integers and a `float` field ints and numpy's numbers, stored as Python numbers; a list field
    takes a tuple, stored as a list), and the `validate_*` methods check the values: sizes, layer counts and lengths
    ints >= 1 (`char_ngram_dim` >= 0), dropouts in [0, 1), `initializer_range` > 0, each choice among its values,
    and `pad_token_id` an id of both vocabularies. A bad value is a `ValueError` that names the field and says what
    it must be.

    Args:
        > Encoder (MT-LSTM, docs/paper.md §1)

        vocab_size (`int`, *optional*, defaults to 50000):
            Number of rows of the (frozen) word-vector table, i.e. the size of the source vocabulary including
            the `[PAD]` (id 0) and `[UNK]` (id 1) rows, which are always zero vectors.
        word_vector_dim (`int`, *optional*, defaults to 300):
            Width of the word vectors (GloVe 840B: 300). The MT-LSTM reads exactly these vectors.
        hidden_size (`int`, *optional*, defaults to 300):
            Hidden size per direction of each MT-LSTM layer; a layer's output is `2 * hidden_size` wide.
        num_hidden_layers (`int`, *optional*, defaults to 2):
            Number of biLSTM layers of the MT-LSTM (the released CoVe has 2).
        encoder_dropout (`float`, *optional*, defaults to 0.0):
            Dropout of the MT-LSTM (placement: `encoder_dropout_all_layers`); active only in training mode, and a
            frozen encoder stays in eval mode, so in practice only MT pretraining sees it.
        encoder_dropout_all_layers (`bool`, *optional*):
            Paper form (§8.2: dropout on the inputs and outputs of all layers), `True`: `encoder_dropout` also drops
            the word vectors entering layer 1 and the top layer's output, besides the input of every later layer.
            `False`: between the layers only, as `nn.LSTM(dropout=...)`. Default: see `paper_defaults_version`.
        cove_output (`str`, *optional*, defaults to `"top"`):
            Which MT-LSTM layers make up `last_hidden_state`: `"top"` = the last layer (600-d, the CoVe vectors
            of eq. 5); `"both"` = first and last layer concatenated (the original `layer0=True`, 1200-d).
        include_word_vectors (`bool`, *optional*, defaults to `False`):
            Prepend the word vector to the output, giving eq. 6's `[GloVe(w); CoVe(w)]` (the original
            `residual_embeddings=True`).
        char_ngram_dim (`int`, *optional*, defaults to 0):
            Width of the character n-gram embeddings (Hashimoto et al. 2016; 100 in the paper). 0 disables them.
            When > 0 the model holds a frozen `(vocab_size, char_ngram_dim)` table (one precomputed mean n-gram
            vector per word) appended to `last_hidden_state`. Char n-grams never enter the MT-LSTM.
        freeze_embeddings (`bool`, *optional*, defaults to `True`):
            Keep the word vectors (and char n-gram table) fixed (`requires_grad=False`), as in the paper.
        freeze_encoder (`bool`, *optional*, defaults to `True`):
            Keep the MT-LSTM fixed. Downstream heads train with a frozen encoder (paper §5); MT and biLM
            pretraining set this to `False` (a translation or biLM model built with `True` warns: only its output
            layers would train).
        initializer_range (`float`, *optional*, defaults to 0.1):
            Half-width of the uniform initialisation U(-r, r) of all trainable weights (docs/paper.md §2).
        lowercase (`bool`, *optional*, defaults to `True`):
            Informational: whether the vocabulary was built from lower-cased text (the released MT-LSTM was).
            The tokenizer carries the behaviour; this mirrors it for model cards.
        vocabulary_fingerprint (`str` or `None`, *optional*, defaults to `None`):
            The vocabulary the word-vector rows are indexed by, as `"<size>:<16 hex digits>"`
            (`tokenization_cove.vocabulary_fingerprint(tokenizer)`: the start of the sha256 of the token list in id
            order). Set by `create_cove_checkpoint`; `tokenization_cove.check_tokenizer_matches(config, tokenizer)`
            refuses a tokenizer with another vocabulary. `None` (checkpoints from before the field): not checked.
        output_final_states (`bool`, *optional*, defaults to `False`):
            Default of `CoveModel.forward(output_final_states=...)`: also return the MT-LSTM's final h and c. Only
            the MT decoder needs them (`CoveForMachineTranslation` sets this to `True`). Without them, padded
            batches run unpacked on the fused LSTM kernel, faster on CPU than packing (same outputs): with more
            than one CPU thread, or one thread in float32, all of them (rows sorted inside, time segments); on a
            GPU, or one CPU thread under bf16 autocast, those that are mostly tokens (real tokens >= 0.7 x the
            padded batch); `encode`'s batches always.
        lstm_implementation (`str`, *optional*, defaults to `"auto"`):
            How the model's LSTMs run, with the same results (docs/lstm_kernels.md; set like transformers'
            `attn_implementation`, also as `from_pretrained(..., lstm_implementation=...)`). It governs every LSTM
            that reads a whole sequence: the encoder's (the MT-LSTM, or with `encoder_type="bilm"` the biLM's
            forward and backward stacks) and the heads' own biLSTMs (the BCN's encoder and two integrators, the
            DCN's encoder and fusion biLSTMs, the tagger's layers); each call of one of them picks its strategy by
            this key through `lstm_kernels.choose_lstm_implementation`. Not the MT decoder's `nn.LSTMCell` stack,
            which steps through time. `"reference"` (the oracle: packed rows, each row as if alone; for the MT-LSTM
            the paper's packed biLSTM, layer by layer), `"unpacked"` (padded rows on the fused kernel,
            one direction at a time; calls without final states; on CPU sorted and in time segments, except the
            biLM's stacks), `"single_call"` (the whole biLSTM as one `nn.LSTM` call; top layer only, no dropout
            between the layers; it never serves the biLM's two stacks), or `"auto"` (per device and call:
            `"single_call"` on CUDA; else `"unpacked"` as described above, in training on CPU from a mean row length
            (docs/lstm_kernels.md), and for the biLM's stacks wherever it serves; else the reference). A call the
            chosen strategy cannot serve runs the reference. Change it at run time with
            `model.set_lstm_implementation(...)`.

        > biLM encoder (ELMo-style, docs/bilm.md; read when `encoder_type="bilm"`)

        encoder_type (`str`, *optional*, defaults to `"mt_lstm"`):
            Which encoder `CoveModel` runs over the word vectors: `"mt_lstm"` (CoVe's MT-LSTM, a stacked biLSTM) or
            `"bilm"` (`CoveBiLMEncoder`: separate forward and backward LSTM stacks, pretrained as a bidirectional
            language model by `CoveForBidirectionalLM`). Both give `num_hidden_layers` layers of
            `2 * hidden_size`, so the feature layout and every head read either the same way.
            `lstm_implementation` governs the biLM's stacks as it does the MT-LSTM (see there).
        bilm_residual (`bool`, *optional*, defaults to `True`):
            Add each biLM layer's input to its output from layer 2 on (ELMo's residual connection).
        bilm_softmax_cutoffs (`list[int]` or `None`, *optional*, defaults to `None`):
            Cluster boundaries of the pretraining model's adaptive softmax over the vocabulary (ids below the first
            cutoff are the head's shortlist; ids are frequency-ordered when the vocabulary came from a
            frequency-sorted vectors file). `None`: `default_softmax_cutoffs(vocab_size)`.
        bilm_tie_softmax (`bool`, *optional*, defaults to `True`):
            One output layer shared by the forward and backward LM (ELMo); `False`: one per direction.

        > MT decoder (eqs. 2–4, docs/paper.md §2; read by `CoveForMachineTranslation`)

        target_vocab_size (`int`, *optional*, defaults to 50000):
            Size of the target (German) vocabulary.
        decoder_embedding_dim (`int`, *optional*, defaults to 300):
            Width of the randomly initialised target embeddings.
        decoder_hidden_size (`int`, *optional*, defaults to 600):
            Hidden size of the 2-layer decoder LSTM; equals the encoder output width (2 * hidden_size).
        decoder_num_layers (`int`, *optional*, defaults to 2):
            Number of decoder LSTM layers.
        decoder_dropout (`float`, *optional*, defaults to 0.2):
            Dropout on the inputs and outputs of all decoder layers (paper: 0.2).
        attention_bias (`bool`, *optional*, defaults to `False`):
            Whether the attention linears W1 and W2 of eqs. 3–4 have biases (the 2017 code had none).
        max_source_length (`int`, *optional*, defaults to 75):
            Longest source/target sentence (tokens) used for MT training; longer pairs are dropped.
        length_penalty_alpha (`float`, *optional*, defaults to 1.0):
            Length normalisation exponent used by beam search (`generate(length_penalty=...)` default).
        mt_loss_reduction (`str`, *optional*, defaults to `"token_mean"`):
            How `CoveForMachineTranslation` reduces the target-token NLL to its `loss`: `"token_mean"` (the mean
            token cross-entropy, as every transformers Seq2SeqLM) or `"sentence"` (the paper's: summed token NLL
            divided by the number of sentences in the batch). `nll_sum` and `num_tokens` are returned either way.

        > BCN classifier (eqs. 7–16, docs/paper.md §3; read by `CoveForSequenceClassification`)

        bcn_input (`str`, *optional*, defaults to `"vectors+cove"`):
            What the BCN reads per token: `"vectors+cove"` (eq. 6), `"vectors"` (the GloVe-only baseline),
            `"cove"` (CoVe only), `"scalar_mix"` (ELMo-style mix over {[g; g], layer 1, layer 2}, §6) or
            `"vectors+scalar_mix"` (ELMo's `[x; ELMo_task]`: the word vectors, then that mix; docs/bilm.md).
        bcn_feedforward_dim (`int`, *optional*, defaults to 300):
            Width of the ReLU feed-forward layer f applied to each input vector (eqs. 7–8).
        bcn_hidden_size (`int`, *optional*, defaults to 300):
            Hidden size per direction of the BCN encoder and integrator biLSTMs.
        bcn_pooling (`list[str]`, *optional*, defaults to `["max", "mean", "min", "self"]`):
            Pooling operations over time (eqs. 13–16), concatenated in this order.
        bcn_maxout_reductions (`list[int]`, *optional*, defaults to `[4, 2]`):
            Dimensionality reductions of the first two maxout layers of the classifier (paper: first 2, 4 or 8,
            then 2); the third layer projects to the classes.
        bcn_maxout_pool (`int`, *optional*, defaults to 4):
            Number of maxout channels per unit.
        bcn_batch_norm (`bool`, *optional*, defaults to `True`):
            Batch-normalise the maxout layers (paper); `False` gives AllenNLP's variant.
        bcn_final_batch_norm (`bool`, *optional*):
            Paper form (a batch-normalised maxout network), `True`: with `bcn_batch_norm`, the last maxout layer
            (the one that maps to the classes) is batch-normalised too. `False`: only the layers before it.
            Default: see `paper_defaults_version`.
        bcn_dropout (`float`, *optional*, defaults to 0.2):
            Dropout before every feed-forward layer (paper searched 0.1/0.2/0.3).
        bcn_pooling_dropout (`bool`, *optional*):
            Paper form (dropout before every feed-forward layer), `True`: `bcn_dropout` also drops the input of the
            self-attentive pooling's scorer (v, d of eq. 13; the pooled states themselves are not dropped).
            `False`: no dropout there. Default: see `paper_defaults_version`.
        bcn_independent_dropout (`bool`, *optional*):
            Paper form (a single text is duplicated, x = y, so each copy is dropped on its own), `True`: in training,
            x and y get independent `bcn_dropout` masks (two biLSTM runs for a single text). `False`: one mask and
            one biLSTM run serve both (same results in eval mode either way). Default: see
            `paper_defaults_version`.
        bcn_max_length (`int` or `None`, *optional*, defaults to 4096):
            Longest text (tokens; for a pair, each side) the BCN accepts. Its biattention (eqs. 9–10) holds
            `batch x len(x) x len(y)` affinities, so memory grows with the square of the length (20k tokens: several
            GB). Longer inputs are a `ValueError` that states that memory and the fix (`truncation=True` with the
            tokenizer's `model_max_length`). `None`: no limit.
        bcn_pair_input (`bool`, *optional*, defaults to `False`):
            Whether the model classifies sentence pairs (e.g. SNLI). `True`: every input must have a non-empty
            second text (`text_pair`); one without is a `ValueError` instead of being read as a single sentence.
            `False`: single texts (duplicated, x = y) and pairs are both accepted.

        > DCN question answering (docs/paper.md §4; read by `CoveForQuestionAnswering`)

        dcn_input (`str`, *optional*, defaults to `"vectors+cove"`):
            What the DCN reads per token: `"vectors+cove"` ([GloVe; CoVe], eq. 6), `"vectors"` (GloVe-only
            baseline) or `"cove"`.
        dcn_hidden_size (`int`, *optional*, defaults to 200):
            Hidden size ℓ of the document/question encoders, coattention, decoder LSTM and highway maxout network.
            Must be even: the document/question encoder is a biLSTM of ℓ / 2 per direction, so that D and Q are ℓ
            wide as the coattention and HMN sizes are stated. The DCN paper encodes with a one-direction LSTM of ℓ
            = 200, CoVe's appendix gives its LSTMs hidden size 300 (docs/deviations.md).
        dcn_pool_size (`int`, *optional*, defaults to 16):
            Maxout pool size p of the highway maxout networks.
        dcn_max_iterations (`int`, *optional*, defaults to 4):
            Maximum number of dynamic pointing decoder iterations (early stop when the span stops changing).
        dcn_max_answer_length (`int`, *optional*, defaults to 15):
            Longest answer span in tokens at inference (s <= e < s + max_answer_length).
        dcn_dropout (`float`, *optional*, defaults to 0.2):
            Dropout on the encoder outputs D', Q' and the fusion output U (which the decoder and the highway maxout
            networks read); more places with `dcn_feedforward_dropout`.
        dcn_feedforward_dropout (`bool`, *optional*):
            Paper form (CoVe §8.2: dropout before every feed-forward layer), `True`: `dcn_dropout` also drops w~
            before the feed-forward g, and inside each highway maxout network the decoder state h_i before W_D, r
            before W_1, m1 before W_2 and W_3, m2 before W_3 (u_t, u_s, u_e come from U, dropped already).
            `False`: none of these. Default: see `paper_defaults_version`.
        dcn_hmn_end_previous_start (`bool`, *optional*):
            Paper form (DCN §2.3: both networks read the previous estimates), `True`: HMN_end scores with
            u_{s_{i-1}}, as HMN_start. `False`: HMN_end reads the start chosen in the same iteration, u_{s_i}.
            Default: see `paper_defaults_version`.

        > Sequence labelling (docs/tagging.md; read by `CoveForTokenClassification`)

        tagger_input (`str`, *optional*, defaults to `"vectors+cove"`):
            What the tagger reads per token: `"vectors+cove"` ([GloVe; CoVe], eq. 6), `"vectors"` (the word vectors
            alone: the supervised baseline and what Cross-View Training reads), `"cove"`, or
            `"vectors+scalar_mix"` (ELMo's `[x; γ Σ_k softmax(w)_k h_k]` over {[g; g], layer 1, ..., layer L}: with a
            biLM encoder, `encoder_type="bilm"`, the `vectors+bilm` input; needs `word_vector_dim == hidden_size`).
        tagger_hidden_size (`int`, *optional*, defaults to 300):
            Hidden size per direction of each layer of the tagger's own (trained) biLSTM.
        tagger_num_layers (`int`, *optional*, defaults to 2):
            Layers of that biLSTM (CVT's taggers: 2). Cross-View Training's auxiliary modules read layer 1.
        tagger_module_dim (`int`, *optional*, defaults to 300):
            Width of the prediction module's hidden layer: p(y_i) = softmax(W · ReLU(W' · [h1_i; ...; hL_i]) + b),
            W' of shape (tagger_module_dim, 2 * tagger_hidden_size * tagger_num_layers) (CVT §3.1).
        tagger_dropout (`float`, *optional*, defaults to 0.5):
            Dropout on the tagger's input features and on each biLSTM layer's output (training mode only).
        tagger_case_dim (`int`, *optional*, defaults to 0):
            Width of a learned embedding of each token's casing as written (`modeling_cove_tagger.CASE_CLASSES`:
            lower, title, upper, mixed, digits, other), appended to w~; the input `case_ids` then carries it (the
            token-classification pipeline computes it from the raw text). For lower-cased vocabularies, where NER
            otherwise loses case. 0: none.
        tagger_boundary_tokens (`bool`, *optional*, defaults to `False`):
            Learned START and END vectors before the first and after the last token of every sentence, which the
            tagger's biLSTM reads (`layers.SentenceBoundaries`; Cross-View Training's taggers have them). Labels,
            logits and hidden states stay one per token.
        tagger_max_length (`int` or `None`, *optional*, defaults to 512):
            Longest sentence in tokens the tagger accepts; a longer one is a `ValueError` naming the row (`None`:
            no limit). Split longer texts into sentences; the pipeline's `truncation=True` would cut words off.

        > Paper forms (docs/deviations.md lists every difference from the papers)

        paper_defaults_version (`int`, *optional*, defaults to 1):
            Which default the paper-form fields above take when left at `None`: 1 (every new config) the papers'
            forms; 0 the forms of the code before they existed. A `config.json` saved without this key (every
            checkpoint from before) loads as 0 (`CoveConfig.from_dict`), so it keeps the behaviour it was trained
            with; `to_dict` writes the marker and every resolved field, so both kinds round-trip. A field given
            explicitly wins over the marker.

        > Special token ids (shared with the tokenizer)

        pad_token_id (`int`, *optional*, defaults to 0):
            `<pad>`: the padding id of both vocabularies, so it must be below `vocab_size` and `target_vocab_size`;
            its rows of the source table and of the MT target embeddings are kept at zero.
        unk_token_id (`int`, *optional*, defaults to 1):
            `<unk>`: the id of a word outside the vocabulary (a zero row of the word-vector table).
        bos_token_id (`int`, *optional*, defaults to 2):
            `<s>` of the MT target side.
        eos_token_id (`int`, *optional*, defaults to 3):
            `</s>` of the MT target side: generation stops there.
        decoder_start_token_id (`int`, *optional*, defaults to 2):
            The first input of the MT decoder (`<s>`).
    """

    model_type = "cove"

    # encoder (MT-LSTM)
    vocab_size: Int = 50000
    word_vector_dim: Int = 300
    hidden_size: Int = 300
    num_hidden_layers: Int = 2
    encoder_dropout: Real = 0.0
    encoder_dropout_all_layers: bool | None = None
    cove_output: str = "top"
    include_word_vectors: bool = False
    char_ngram_dim: Int = 0
    freeze_embeddings: bool = True
    freeze_encoder: bool = True
    initializer_range: Real = 0.1
    lowercase: bool = True
    vocabulary_fingerprint: str | None = None
    output_final_states: bool = False
    lstm_implementation: str = "auto"
    # biLM encoder
    encoder_type: str = "mt_lstm"
    bilm_residual: bool = True
    bilm_softmax_cutoffs: list[Int] | tuple[Int, ...] | None = None
    bilm_tie_softmax: bool = True
    # MT decoder
    target_vocab_size: Int = 50000
    decoder_embedding_dim: Int = 300
    decoder_hidden_size: Int = 600
    decoder_num_layers: Int = 2
    decoder_dropout: Real = 0.2
    attention_bias: bool = False
    max_source_length: Int = 75
    length_penalty_alpha: Real = 1.0
    mt_loss_reduction: str = "token_mean"
    # BCN
    bcn_input: str = "vectors+cove"
    bcn_feedforward_dim: Int = 300
    bcn_hidden_size: Int = 300
    bcn_pooling: list[str] | tuple[str, ...] = ("max", "mean", "min", "self")
    bcn_maxout_reductions: list[Int] | tuple[Int, ...] = (4, 2)
    bcn_maxout_pool: Int = 4
    bcn_batch_norm: bool = True
    bcn_final_batch_norm: bool | None = None
    bcn_dropout: Real = 0.2
    bcn_pooling_dropout: bool | None = None
    bcn_independent_dropout: bool | None = None
    bcn_max_length: Int | None = 4096
    bcn_pair_input: bool = False
    # DCN
    dcn_input: str = "vectors+cove"
    dcn_hidden_size: Int = 200
    dcn_pool_size: Int = 16
    dcn_max_iterations: Int = 4
    dcn_max_answer_length: Int = 15
    dcn_dropout: Real = 0.2
    dcn_feedforward_dropout: bool | None = None
    dcn_hmn_end_previous_start: bool | None = None
    # sequence labelling
    tagger_input: str = "vectors+cove"
    tagger_hidden_size: Int = 300
    tagger_num_layers: Int = 2
    tagger_module_dim: Int = 300
    tagger_dropout: Real = 0.5
    tagger_case_dim: Int = 0
    tagger_boundary_tokens: bool = False
    tagger_max_length: Int | None = 512
    # paper forms
    paper_defaults_version: Int = PAPER_DEFAULTS_VERSION
    # special tokens
    pad_token_id: Int | None = 0
    unk_token_id: Int | None = 1
    bos_token_id: Int | None = 2
    eos_token_id: Int | None = 3
    decoder_start_token_id: Int | None = 2

    def __post_init__(self, **kwargs):
        # numpy scalars and tuples as a config.json holds them (Python numbers, lists), so that the config saves
        for field in fields(self):
            value = getattr(self, field.name)
            if isinstance(value, (np.generic, list, tuple)):
                setattr(self, field.name, _plain(value))
        # a paper-form field left at None takes its form from the marker (0: the code's before, >= 1: the paper's)
        for name, (before, paper) in PAPER_FORM_FIELDS.items():
            if getattr(self, name) is None:
                setattr(self, name, paper if self.paper_defaults_version >= 1 else before)
        super().__post_init__(**kwargs)

    def validate_sizes(self):
        """Sizes, layer counts and lengths are ints >= 1 (`char_ngram_dim` >= 0, `bcn_max_length` may be None)."""
        for name in POSITIVE_INT_FIELDS:
            _check(getattr(self, name) >= 1, name, getattr(self, name))
        _check(self.char_ngram_dim >= 0, "char_ngram_dim", self.char_ngram_dim)
        _check(self.tagger_case_dim >= 0, "tagger_case_dim", self.tagger_case_dim)
        for name in ("bcn_max_length", "tagger_max_length"):
            _check(getattr(self, name) is None or getattr(self, name) >= 1, name, getattr(self, name))

    def validate_rates(self):
        """Dropouts are probabilities in [0, 1), `initializer_range` a finite number > 0 (NaN is neither)."""
        for name in DROPOUT_FIELDS:
            _check(0 <= getattr(self, name) < 1, name, getattr(self, name))
        _check(0 < self.initializer_range < math.inf, "initializer_range", self.initializer_range)

    def validate_choices(self):
        """Each string field is one of its choices, `bcn_pooling` a non-empty list of pooling operations."""
        for name, choices in CHOICES.items():
            _check(getattr(self, name) in choices, name, getattr(self, name))
        pooling = self.bcn_pooling
        _check(bool(pooling) and all(p in BCN_POOLING_CHOICES for p in pooling), "bcn_pooling", pooling)

    def validate_pad_token_id(self):
        """The pad row of the source table (and of the MT target embeddings) is `padding_idx`, kept at zero."""
        limit = min(self.vocab_size, self.target_vocab_size)
        if limit < 1:  # `validate_sizes` names the vocabulary size
            return
        _check(self.pad_token_id is not None and 0 <= self.pad_token_id < limit, "pad_token_id", self.pad_token_id,
               f"an id of both vocabularies, in [0, {limit}) (vocab_size={self.vocab_size}, "
               f"target_vocab_size={self.target_vocab_size})")

    def validate_vocabulary_fingerprint(self):
        """None (not checked) or `"<size>:<16 hex digits>"`, as `tokenization_cove.vocabulary_fingerprint` makes it."""
        fingerprint = self.vocabulary_fingerprint
        _check(fingerprint is None or re.fullmatch(FINGERPRINT_PATTERN, fingerprint) is not None,
               "vocabulary_fingerprint", fingerprint)

    def validate_softmax_cutoffs(self):
        """`bilm_softmax_cutoffs`: None or increasing ints >= 1, below the vocabulary size for a biLM."""
        cutoffs = self.bilm_softmax_cutoffs
        if cutoffs is None or self.vocab_size < 1:  # a bad vocab_size: `validate_sizes` names it
            return
        limit = self.vocab_size - 1 if self.encoder_type == "bilm" else math.inf
        _check(bool(cutoffs) and cutoffs[0] >= 1 and cutoffs == sorted(set(cutoffs)) and cutoffs[-1] <= limit,
               "bilm_softmax_cutoffs", cutoffs,
               f"None or increasing ints in [1, vocab_size - 1 = {self.vocab_size - 1}]")

    def validate_paper_defaults_version(self):
        """A marker this code knows: 0 (the forms of configs saved before it) to `PAPER_DEFAULTS_VERSION`."""
        version = self.paper_defaults_version
        _check(0 <= version <= PAPER_DEFAULTS_VERSION, "paper_defaults_version", version)

    @classmethod
    def from_dict(cls, config_dict: dict, **kwargs) -> "CoveConfig":
        """`PreTrainedConfig.from_dict`; a dict without `paper_defaults_version` (a config saved before the paper
        forms existed) is version 0, so its model keeps the forms it was trained with. The marker passed as a keyword
        (`from_pretrained(..., paper_defaults_version=1)`) resolves the fields as in `__init__`. Of `custom_pipelines`,
        only the entries this process needs the checkpoint's code for are kept (`pipelines_needing_remote_code`)."""
        marker = {"paper_defaults_version": kwargs.pop("paper_defaults_version",
                                                       config_dict.get("paper_defaults_version", 0))}
        config_dict = {**config_dict, **marker}
        if config_dict.get("custom_pipelines"):  # only the entries that need the checkpoint's code here
            config_dict["custom_pipelines"] = pipelines_needing_remote_code(config_dict["custom_pipelines"])
            if not config_dict["custom_pipelines"]:
                del config_dict["custom_pipelines"]
        return super().from_dict(config_dict, **kwargs)

    @property
    def encoder_output_size(self) -> int:
        """Width of a single MT-LSTM layer's output (both directions): 2 * hidden_size."""
        return 2 * self.hidden_size

    @property
    def softmax_cutoffs(self) -> list:
        """The biLM adaptive softmax's cutoffs: `bilm_softmax_cutoffs`, or `default_softmax_cutoffs(vocab_size)`."""
        if self.bilm_softmax_cutoffs is not None:
            return list(self.bilm_softmax_cutoffs)
        return default_softmax_cutoffs(self.vocab_size)

    @property
    def output_size(self) -> int:
        """Width of `CoveModel(...).last_hidden_state`: `feature_layout("encoder").size`."""
        return self.feature_layout("encoder").size

    def feature_layout(self, reader: str = "encoder") -> FeatureLayout:
        """Eq. 6's per-token features w~ as `reader` ("encoder", "bcn" or "dcn") has them: its parts and their
        columns (the class docstring says which fields choose them)."""
        if reader not in FEATURE_READERS:
            raise ValueError(f"reader must be one of {FEATURE_READERS}, got {reader!r}")
        layer = self.encoder_output_size
        mode = {"encoder": "vectors+cove" if self.include_word_vectors else "cove", "bcn": self.bcn_input,
                "dcn": self.dcn_input, "tagger": self.tagger_input}[reader]
        if mode in ("scalar_mix", "vectors+scalar_mix"):  # ELMo's [x; ELMo_task] with the vectors
            words = mode == "vectors+scalar_mix"
            widths = (("word_vectors", self.word_vector_dim if words else 0), ("scalar_mix", layer),
                      ("char_ngrams", self.char_ngram_dim))
        else:
            words, cove = "vectors" in mode, "cove" in mode
            # layer 1 is the top layer of a 1-layer MT-LSTM: the BCN reads it once (see the class docstring)
            first = cove and self.cove_output == "both" and (reader != "bcn" or self.num_hidden_layers > 1)
            widths = (("word_vectors", self.word_vector_dim if words else 0), ("first_layer", layer if first else 0),
                      ("top_layer", layer if cove else 0), ("char_ngrams", self.char_ngram_dim))
        return FeatureLayout.from_widths((name, width) for name, width in widths if width)

    def encoder_layers_read(self, reader: str) -> list:
        """Indices into `CoveModel(...).hidden_states` (0 = word vectors, k = encoder layer k) of the layers that
        `reader`'s input reads: those of `feature_layout(reader)`, every layer for a scalar mix. Empty for a
        word-vectors-only input (the encoder is not run at all)."""
        if self.feature_layout(reader).has("scalar_mix"):
            return list(range(1, self.num_hidden_layers + 1))
        return self.feature_layout(reader).mt_lstm_layers(self.num_hidden_layers)


def pipelines_needing_remote_code(custom_pipelines: dict) -> dict:
    """The entries of a checkpoint's `custom_pipelines` (task -> `{"impl": "module.Class", ...}`) that this process
    can run only from the checkpoint's own code: all but those whose task transformers' pipeline registry already
    maps to the class the entry names (`module.Class` as `Pipeline.save_pretrained` writes it: the last part of the
    module's name), i.e. a class `import modeling_cove` registered (`CoveTokenClassificationPipeline` as
    "token-classification"). `pipeline(task, model=path)` asks for `trust_remote_code=True` for every task its
    config lists there, even one the registry serves with that very class. Without the package (this file then
    runs as the checkpoint's remote code) the registry holds transformers' own pipelines and every entry stays, so
    `trust_remote_code=True` runs the checkpoint's pipeline. The registry is read only when transformers' pipelines
    module is loaded (before that, nothing can have been registered)."""
    registry = getattr(sys.modules.get("transformers.pipelines"), "PIPELINE_REGISTRY", None)
    if registry is None or not isinstance(custom_pipelines, dict):
        return custom_pipelines

    def registered(task: str, entry) -> bool:
        impl = registry.supported_tasks.get(task, {}).get("impl")
        return isinstance(impl, type) and isinstance(entry, dict) and \
            entry.get("impl") == f"{impl.__module__.rsplit('.', 1)[-1]}.{impl.__name__}"

    return {task: entry for task, entry in custom_pipelines.items() if not registered(task, entry)}


def check_field_names(names, source: str) -> None:
    """ValueError naming the first of `names` that is not a CoveConfig field, with its closest match. For scripts
    that set config fields by name (presets, overrides on the command line): a typo would otherwise be set on the
    config and recorded while the model keeps the default."""
    import difflib

    known = sorted(CoveConfig().to_dict())
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"{source}: {name!r} is not a CoveConfig field{hint}")
