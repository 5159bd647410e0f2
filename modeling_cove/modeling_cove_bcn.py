"""BCN: the biattentive classification network on CoVe inputs (McCann et al. 2017, §3, eqs. 6–16).

`CoveForSequenceClassification` reads one right-padded token sequence per example. A single sentence is duplicated
(x = y); a pair (premise, hypothesis) arrives as ONE concatenated sequence, as tokenizers and the
`text-classification` pipeline produce it, and is split inside `forward` with `token_type_ids` (0 = first text,
1 = second text; padding may have either) and `attention_mask`. Each text goes through the CoVe encoder on its own.

Data flow (shapes: B batch, T time, H = config.bcn_hidden_size):
    tokens -> w~ = [GloVe(w); CoVe(w)] (eq. 6, or the variant `config.bcn_input` names)          (B, T, D_in)
    -> split into x (B, Tx, D_in) and y (B, Ty, D_in)
    -> f = ReLU feed-forward, X = biLSTM(f(x)), Y = biLSTM(f(y))                    (eqs. 7–8)  (B, T*, 2H)
    -> biattention C_x, C_y                                                        (eqs. 9–10)
    -> X|y = biLSTM([X; X - C_y; X * C_y]), Y|x = biLSTM([Y; Y - C_x; Y * C_x])    (eqs. 11–12) (B, T*, 2H)
    -> pool max / mean / min / self-attentive over time, both sides                (eqs. 13–16) (B, 2 * P * 2H)
    -> batch-normalised maxout network -> logits                                                (B, num_labels)

The encoder is frozen when training the BCN (as in the paper), so its per-token outputs can be computed once per
dataset and passed back in as `cove_hidden_states` (see `compute_cove_hidden_states`); the result is identical to
running the encoder inside `forward`. Every LSTM runs as `config.lstm_implementation` says (`lstm_kernels`: packed
sequences in the reference, padded rows with each row reversed within its length for the backward direction
otherwise; the same values) and every softmax and pooling is masked, so padding never changes a result.
Texts are bounded by `config.bcn_max_length` (the biattention is T×T), and a pair
model (`config.bcn_pair_input`) refuses inputs without a second text; see `forward` for every check.
"""

from typing import NamedTuple, Optional, Sequence

import torch
from torch import nn
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import add_start_docstrings_to_model_forward

from .configuration_cove import CoveConfig
from .layers import (assemble_head_inputs, encoder_needs_grad, head_init_, masked_softmax, maxout, pair_segments,
                     require, rows_where, run_bilstm, run_encoder_checked, scalar_mix_for, segment_gather,
                     segment_scatter)
from .embeddings import HostRead, lengths_from_mask, require_features, require_tensor
from .modeling_cove import CoveModel, CovePreTrainedModel


# ----------------------------------------------------------------------------------------------------------------
# the two texts of a row (the shared layers are in layers.py)
# ----------------------------------------------------------------------------------------------------------------


class TextPair(NamedTuple):
    """Where the two texts of each row of one concatenated, right-padded sequence are (`split_pair`)."""

    first: torch.Tensor  # (B, T) bool: the first text x
    second: torch.Tensor  # (B, T) bool: the second text (all False in a row with a single text, then y = x)
    lx: torch.Tensor  # (B,) long: the first text's length
    ly: torch.Tensor  # (B,) long: the second text's length (0: a single text)
    host_lx: Optional[torch.Tensor] = None  # lx on the host, read with the forward's checks (`on_host`)
    host_ly: Optional[torch.Tensor] = None

    def on_host(self) -> "TextPair":
        """This pair with `host_lx` and `host_ly` (read here where missing: on a GPU a wait for the device)."""
        if self.host_lx is not None:
            return self
        return self._replace(host_lx=self.lx.cpu(), host_ly=self.ly.cpu())

    def has_pairs(self) -> bool:
        """Whether any row holds a second text (from the host lengths)."""
        return bool((self.on_host().host_ly > 0).any())


def split_pair(attention_mask: torch.Tensor, token_type_ids: Optional[torch.Tensor]) -> TextPair:
    """The first (x) and second (y) text of each row of one concatenated, right-padded sequence, checked.

    Expected layout per row: `lx` tokens of type 0, then `ly` tokens of type 1, then padding (any type id).
    `ly == 0` means a single text (it is then duplicated, x = y). Without `token_type_ids` every row is one text.
    """
    lengths = lengths_from_mask(attention_mask)  # raises on left padding / holes
    require(
        lengths > 0,
        "an input text produced no tokens (empty or only whitespace)",
        lambda: f"an input text produced no tokens (empty or only whitespace): row(s) {rows_where(lengths == 0)} of "
        f"this batch of {len(lengths)} (rows of one forward call: inside a pipeline with batch_size, of one batch, "
        "not indices in your list of texts). There is nothing to classify: leave out empty texts, e.g. "
        "`[t for t in texts if t.strip()]`.",
    )
    first, second = pair_segments(attention_mask, token_type_ids)
    if token_type_ids is None:
        return TextPair(first, second, lengths, torch.zeros_like(lengths))
    require(first | second | ~attention_mask.bool(),
            "token_type_ids must be 0 (first text) or 1 (second text) at every token")
    ly = second.sum(dim=1)
    lx = lengths - ly
    positions = torch.arange(attention_mask.shape[1], device=attention_mask.device)[None, :]
    expected = (positions >= lx[:, None]) & (positions < lengths[:, None])
    require(
        second == expected,
        "token_type_ids must mark the first text with 0 and then the second text with 1 in one contiguous run "
        "(layout: text 0 tokens, text 1 tokens, padding), as `tokenizer(text, text_pair)` returns them",
    )
    no_first = (ly > 0) & (lx == 0)
    require(~no_first, "a pair has an empty first text: nothing to classify",
            lambda: f"row(s) {rows_where(no_first)} are pairs with an empty first text: nothing to classify")
    return TextPair(first, second, lx, ly)


class TextStates(NamedTuple):
    """One side of the pair after a biLSTM: its tokens left-aligned, and where they sit in the input."""

    states: torch.Tensor  # (B, L, C), zero past each row's text
    mask: torch.Tensor  # (B, L) bool: the text's tokens
    lengths: torch.Tensor  # (B,) long
    positions: torch.Tensor  # (B, L) long: each token's index in the input sequence (arbitrary past the text)
    host_lengths: Optional[torch.Tensor] = None  # `lengths` on the host (planning the biLSTMs)


# ----------------------------------------------------------------------------------------------------------------
# BCN modules
# ----------------------------------------------------------------------------------------------------------------


def biattention(x: torch.Tensor, x_mask: torch.Tensor, y: torch.Tensor, y_mask: torch.Tensor,
                return_attention: bool = False):
    """Eqs. 9–10. x: X (B, n, d), y: Y (B, m, d); masks (B, n) / (B, m) bool.

    A = X Yᵀ (B, n, m); A_x = softmax(A) column-wise (over the x positions), A_y = softmax(Aᵀ) column-wise (over
    the y positions); C_x = A_xᵀ X (B, m, d) (x summarised for every y token), C_y = A_yᵀ Y (B, n, d) (y summarised
    for every x token). Padded positions get no attention weight; C rows at padded positions are zero.
    Returns (C_x, C_y), and with `return_attention` (C_x, C_y, A_x (B, n, m), A_y (B, m, n)): every column of a
    real token sums to 1 over the real positions of the first axis; rows and columns of padding are zero.
    """
    affinity = torch.bmm(x, y.transpose(1, 2))  # eq. 9: A = X Yᵀ, (B, n, m)
    # eq. 9: A_x, columns sum to 1 over x, (B, n, m); A_y, columns sum to 1 over y, (B, m, n); zero at padding
    attention_x = masked_softmax(affinity, x_mask[:, :, None], dim=1) * y_mask[:, None, :].to(affinity.dtype)
    attention_y = masked_softmax(affinity.transpose(1, 2), y_mask[:, :, None], dim=1) * x_mask[:, None, :].to(
        affinity.dtype
    )
    context_x = torch.bmm(attention_x.transpose(1, 2), x)  # eq. 10: C_x = A_xᵀ X, (B, m, d), zero at y padding
    context_y = torch.bmm(attention_y.transpose(1, 2), y)  # eq. 10: C_y = A_yᵀ Y, (B, n, d), zero at x padding
    if return_attention:
        return context_x, context_y, attention_x, attention_y
    return context_x, context_y


class CoveBCNPooling(nn.Module):
    """Eqs. 13–16: max, mean, min and self-attentive pooling over time (all masked), concatenated in
    `config.bcn_pooling` order. Self-attentive: beta = softmax(X|y v + d), x_self = X|yᵀ beta; `dropout` > 0 drops
    the scorer's input X|y (the pooled X|y is not dropped)."""

    def __init__(self, dim: int, poolings: Sequence[str], dropout: float = 0.0):
        super().__init__()
        self.poolings = list(poolings)
        self.self_attention = nn.Linear(dim, 1) if "self" in self.poolings else None  # v and d of eq. 13
        self.dropout = nn.Dropout(dropout)

    def forward(self, states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """states (B, T, C), zero at padding; mask (B, T) bool, >= 1 token per row -> (B, len(poolings) * C)."""
        valid = mask.unsqueeze(-1)  # (B, T, 1)
        pooled = []
        for name in self.poolings:
            if name == "max":
                pooled.append(states.masked_fill(~valid, float("-inf")).max(dim=1).values)
            elif name == "min":
                pooled.append(states.masked_fill(~valid, float("inf")).min(dim=1).values)
            elif name == "mean":
                count = mask.sum(dim=1, keepdim=True).to(states.dtype)
                pooled.append((states * valid.to(states.dtype)).sum(dim=1) / count)
            elif name == "self":
                scores = self.self_attention(self.dropout(states)).squeeze(-1)  # eq. 13: X|y v + d, (B, T)
                beta = masked_softmax(scores, mask, dim=1)  # eq. 13: beta, (B, T)
                pooled.append(torch.bmm(beta.unsqueeze(1), states).squeeze(1))  # eq. 15: X|yᵀ beta, (B, C)
            else:  # CoveConfig validates the names already
                raise ValueError(f"unknown pooling {name!r}")
        return torch.cat(pooled, dim=-1)


class CoveMaxout(nn.Module):
    """One maxout layer: dropout -> linear to `out_dim * pool` channels -> [batch norm] -> max over each group of
    `pool` channels. With batch norm, a training batch of ONE example uses the running statistics (batch statistics
    of a single example are undefined) instead of failing."""

    def __init__(self, in_dim: int, out_dim: int, pool: int, dropout: float, batch_norm: bool):
        super().__init__()
        self.out_dim, self.pool = out_dim, pool
        self.dropout = nn.Dropout(dropout)
        self.linear = nn.Linear(in_dim, out_dim * pool)
        self.norm = nn.BatchNorm1d(out_dim * pool) if batch_norm else None

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        hidden = self.linear(self.dropout(inputs))  # (B, out * pool)
        if self.norm is not None:
            if self.training and hidden.shape[0] == 1:
                norm = self.norm
                hidden = nn.functional.batch_norm(
                    hidden, norm.running_mean, norm.running_var, norm.weight, norm.bias, False, 0.0, norm.eps
                )
            else:
                hidden = self.norm(hidden)
        return maxout(hidden, self.pool)  # (B, out)


# ----------------------------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------------------------


PROBLEM_TYPES = (None, "single_label_classification", "multi_label_classification", "regression")
# (B, Tx, Ty) maps alive at once at the biattention's peak (eqs. 9–10: the affinity A, masked scores, A_x, A_y):
# measured on CPU, one 4000-token text (61 MB per fp32 map) raised peak RSS by 254 MB, about 4 maps.
BIATTENTION_MAPS = 4


def biattention_bytes(batch: int, x_time: int, y_time: int, element_size: int = 4) -> int:
    """Memory of the biattention's (batch, x_time, y_time) maps in one forward (eqs. 9–10), in bytes."""
    return BIATTENTION_MAPS * batch * x_time * y_time * element_size


def merge_pair(x: TextStates, y: TextStates, pair: TextPair) -> torch.Tensor:
    """Per-text states back at their positions in the input sequence: x's states (B, Tx, C) at the first text's,
    y's (B, Ty, C) at the second text's (nothing for a single text, whose y is x). (B, T, C), zero at padding."""
    time = pair.first.shape[1]
    placed = segment_scatter(x.states, x.positions, x.mask, time)
    return placed + segment_scatter(y.states, y.positions, y.mask & (pair.ly > 0)[:, None], time)


def bcn_layer_indices(config: CoveConfig) -> list:
    """Indices into `CoveModel(...).hidden_states` (0 = word vectors, k = MT-LSTM layer k) of the MT-LSTM layers that
    `config.bcn_input` reads (`config.encoder_layers_read("bcn")`). Empty for "vectors" (the MT-LSTM is not run)."""
    return config.encoder_layers_read("bcn")


def bcn_input_size(config: CoveConfig) -> int:
    """Width D_in of the per-token BCN input w~ for `config.bcn_input` (plus char n-grams when present)."""
    return config.feature_layout("bcn").size


BCN_INPUTS_DOCSTRING = r"""
    input_ids (`torch.LongTensor` of shape `(batch, time)`): token ids, right-padded. A pair is ONE concatenated
        sequence (first text, then second text), as `tokenizer(text, text_pair)` returns it.
    inputs_embeds (`torch.FloatTensor` of shape `(batch, time, word_vector_dim)`, *optional*): the word vectors
        GloVe(w) themselves instead of `input_ids` (e.g. your own GloVe rows), laid out like `input_ids` (pairs
        concatenated, `token_type_ids` as for ids), zeroed at padding and cast to the model's dtype: the same
        logits as the ids whose rows `model.get_input_embeddings()(input_ids)` are these. Exactly one of the two
        is required (else a `ValueError`); char n-gram models (`config.char_ngram_dim > 0`) need `input_ids`.
        Gradients reach `inputs_embeds` through the (frozen) encoder when it requires them.
    attention_mask (`torch.LongTensor` of shape `(batch, time)`, *optional*): 1 = token, 0 = padding.
    token_type_ids (`torch.LongTensor` of shape `(batch, time)`, *optional*): 0 = first text, 1 = second text.
        A row without type-1 tokens is a single text and is duplicated (x = y, as in the paper) — so a pair with
        an EMPTY second text is classified as its first text alone, unless `config.bcn_pair_input` is True: a
        pair model refuses such rows with a `ValueError`.
    labels (`torch.Tensor`, *optional*): gives `loss`, per `config.problem_type` (when None, inferred as
        transformers' heads do and stored: `num_labels == 1` -> "regression", integer labels ->
        "single_label_classification", else "multi_label_classification"):
        - "single_label_classification": class ids `(batch,)` in `[0, num_labels)`, mean cross-entropy;
        - "regression": numbers `(batch,)` or `(batch, 1)` (`num_labels == 1`) or `(batch, num_labels)`,
          mean squared error;
        - "multi_label_classification": multi-hot (or probabilities) `(batch, num_labels)` in [0, 1],
          `BCEWithLogitsLoss` (mean over batch and labels).
    cove_hidden_states (`tuple`, *optional*): precomputed encoder states from `compute_cove_hidden_states`
        (or `CoveModel(..., output_hidden_states=True).hidden_states` for single texts), laid out like
        `input_ids`; skips the MT-LSTM. Gives the same logits as computing them here.
    output_attentions (`bool`, *optional*): return `attentions = (A_x, A_y)`, the biattention maps of eqs. 9–10:
        A_x `(batch, Tx, Ty)` = column-wise softmax of A = X Yᵀ over the first text's tokens, A_y `(batch, Ty,
        Tx)` = column-wise softmax of Aᵀ over the second text's tokens. Tx is the longest first text of the
        batch, Ty the longest second text (for a single text y = x, Ty = Tx); positions are each text's own,
        from 0. Every column of a real token sums to 1 over the real tokens; padding rows and columns are 0.
        One map per direction (no heads, no layers).
    output_hidden_states (`bool`, *optional*): return `hidden_states`, each `(batch, time, ·)` laid out like
        `input_ids` and zero at padding: `(word vectors (300), MT-LSTM layer 1 (2h), ..., layer L (2h), BCN
        encoder biLSTM X / Y (eqs. 7–8, 2H), BCN integrator X|y / Y|x (eqs. 11–12, 2H))` — CoVe's per-text
        states (each text of a pair encoded on its own), then the BCN's: X and X|y at the first text's
        positions, Y and Y|x at the second text's. For a single text (y = x) the BCN entries hold X and X|y (Y
        equals X; Y|x, the same text through the other integrator, is not returned). Every MT-LSTM layer is
        returned, also those `config.bcn_input` does not read (then run for this output only).
    return_dict (`bool`, *optional*): False returns `SequenceClassifierOutput.to_tuple()`: (loss, logits,
        hidden_states, attentions), leaving out those that are None.

    Up-front checks (`ValueError`, nothing runs before them): a text with no tokens (empty or only whitespace;
    the message names the row of this call's batch: inside a pipeline with `batch_size`, a row of its batch, not
    the caller's index), a pair with an empty first text, on a pair model a missing second text, and a text (a
    pair's side) longer than `config.bcn_max_length` tokens (default 4096: the biattention is quadratic in the
    length; the message states its memory and to truncate, e.g. `pipeline(..., truncation=True)`, which cuts at
    the tokenizer's `model_max_length`). A text of only out-of-vocabulary words is classified from zero word
    vectors (the paper's OOV rule). Unknown keyword arguments are a `TypeError`.

    `torch.export.export` traces this forward: the checks above become runtime assertions in the graph (a
    `RuntimeError` with the message's first part), every batch takes the pair path (a single text as the pair
    (x, x), same logits), the biLSTMs run unpacked (`lstm_kernels.run_traceable`) and the attention maps are
    `(batch, T, T)` at the padded width T.
"""


class CoveForSequenceClassification(CovePreTrainedModel):
    """CoVe + BCN for single-sentence and sentence-pair classification (McCann et al. 2017, §3).

    `config.bcn_input` chooses what the BCN reads per token (its parts and columns: `config.feature_layout("bcn")`):
      - "vectors+cove": eq. 6, [GloVe(w); CoVe(w)] (CoVe = last MT-LSTM layer, or first and last with
        `cove_output="both"`);
      - "vectors": the GloVe-only baseline (the MT-LSTM is not run);
      - "cove": CoVe(w) only;
      - "scalar_mix": gamma * sum_k softmax(w)_k h_k over {[g; g], layer 1, ..., layer L} (ELMo style, docs/paper.md §6;
        needs 2 * word_vector_dim == 2 * hidden_size);
      - "vectors+scalar_mix": [GloVe(w); that mix], ELMo's [x; ELMo_task] (docs/bilm.md).
    With `char_ngram_dim > 0` the char n-gram vectors are appended in every mode.
    """

    def __init__(self, config: CoveConfig):
        super().__init__(config)
        if config.problem_type not in PROBLEM_TYPES:
            raise ValueError(f"problem_type must be one of {PROBLEM_TYPES}, got {config.problem_type!r}")
        if config.problem_type == "single_label_classification" and config.num_labels < 2:
            raise ValueError(
                f"problem_type='single_label_classification' needs num_labels >= 2, got {config.num_labels} "
                "(num_labels=1 is a regression head: problem_type='regression' or None)"
            )
        self.num_labels = config.num_labels
        hidden = config.bcn_hidden_size
        self.cove = CoveModel(config)
        self.layer_indices = bcn_layer_indices(config)
        self.scalar_mix = scalar_mix_for(config, "bcn")  # ELMo's mix for the "*scalar_mix" inputs, else None
        self.input_dropout = nn.Dropout(config.bcn_dropout)
        self.feedforward = nn.Linear(bcn_input_size(config), config.bcn_feedforward_dim)  # f of eqs. 7–8
        self.encoder = nn.LSTM(config.bcn_feedforward_dim, hidden, batch_first=True, bidirectional=True)
        self.integrator_x = nn.LSTM(6 * hidden, hidden, batch_first=True, bidirectional=True)  # eq. 11
        self.integrator_y = nn.LSTM(6 * hidden, hidden, batch_first=True, bidirectional=True)  # eq. 12
        pooling_dropout = config.bcn_dropout if config.bcn_pooling_dropout else 0.0
        self.pool_x = CoveBCNPooling(2 * hidden, config.bcn_pooling, pooling_dropout)  # v1, d1
        self.pool_y = CoveBCNPooling(2 * hidden, config.bcn_pooling, pooling_dropout)  # v2, d2
        # three-layer (by default) batch-normalised maxout network: reduce by r1, then r2, then project to classes
        # (the last one batch-normalised too with `bcn_final_batch_norm`)
        dims = [2 * len(config.bcn_pooling) * 2 * hidden]
        for reduction in config.bcn_maxout_reductions:
            if int(reduction) < 1 or dims[-1] // int(reduction) < 1:
                raise ValueError(f"bad bcn_maxout_reductions {config.bcn_maxout_reductions} for input width {dims[0]}")
            dims.append(dims[-1] // int(reduction))
        layers = [
            CoveMaxout(d_in, d_out, config.bcn_maxout_pool, config.bcn_dropout, config.bcn_batch_norm)
            for d_in, d_out in zip(dims[:-1], dims[1:])
        ]
        final_norm = config.bcn_batch_norm and config.bcn_final_batch_norm
        layers.append(CoveMaxout(dims[-1], config.num_labels, config.bcn_maxout_pool, config.bcn_dropout, final_norm))
        self.classifier = nn.ModuleList(layers)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module):
        """The encoder (`self.cove`) keeps the MT initialisation of `CovePreTrainedModel`; the BCN's layers get
        `layers.head_init_` (fan-in scaled uniform weights)."""
        if any(module is m for m in self.cove.modules()):
            super()._init_weights(module)
        else:
            head_init_(module)

    # ------------------------------------------------------------------------------------------------------------
    # CoVe features
    # ------------------------------------------------------------------------------------------------------------

    def cove_layers(self, inputs: torch.Tensor, attention_mask: torch.Tensor, layer_indices: list,
                    host_lengths: Optional[torch.Tensor] = None) -> tuple:
        """`self.cove(...).hidden_states` for the layers `layer_indices`, of checked `inputs`: token ids (B, T) or
        word vectors (B, T, 300) (`inputs_embeds`). When that is the top layer alone and the
        encoder's `last_hidden_state` is exactly that layer (no word vectors, no layer 1, no char n-grams in it), it
        is read from there: a top-layer-only request, which on a GPU runs the MT-LSTM as one cuDNN call
        (`lstm_kernels.run_single_call`) instead of per layer and direction. Same values either way (tested).
        `host_lengths`: the mask's row sums on the host, where the forward has them."""
        top = self.config.num_hidden_layers
        if list(layer_indices) == [top] and self.cove.output_is_top_layer():
            output = run_encoder_checked(self.cove, inputs, attention_mask, False, host_lengths)
            return (None,) * top + (output.last_hidden_state,)
        return run_encoder_checked(self.cove, inputs, attention_mask, True, host_lengths).hidden_states

    def compute_cove_hidden_states(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        layer_indices: Optional[Sequence[int]] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
    ) -> tuple:
        """The MT-LSTM outputs this model reads, laid out like `input_ids`: a tuple like `CoveModel.hidden_states`
        `(None, layer 1 (B, T, 2h) or None, ..., layer L (B, T, 2h) or None)` with only the layers
        `config.bcn_input` needs filled in (the word vectors, entry 0, are a cheap lookup and left to `forward`);
        `layer_indices` (1..L) asks for other layers instead (`forward(output_hidden_states=True)` asks for all).
        For a pair, each text is encoded on its own (as in the paper) and its states are put back at its positions.
        Zero at padding. Pass the result as `forward(..., cove_hidden_states=...)`, e.g. after caching it.
        `inputs_embeds` (B, T, 300): word vectors instead of `input_ids` (exactly one of the two), as in `forward`.
        """
        layer_indices = self.layer_indices if layer_indices is None else list(layer_indices)
        with HostRead() as host:  # the checks and the texts' lengths: one read from the device
            inputs, attention_mask = self.check_inputs(input_ids, inputs_embeds, attention_mask)
            pair = split_pair(attention_mask, token_type_ids)
            host.read(pair.lx), host.read(pair.ly)
        pair = pair._replace(host_lx=host.values[0], host_ly=host.values[1])
        return self.cove_hidden_states(inputs, attention_mask, pair, layer_indices)

    def cove_hidden_states(self, inputs: torch.Tensor, attention_mask: torch.Tensor, pair: TextPair,
                           layer_indices: list) -> tuple:
        """`compute_cove_hidden_states` of checked inputs (ids (B, T) or word vectors (B, T, 300)) split in `pair`.
        eq. 5: CoVe(w) = MT-LSTM(GloVe(w)), each text of a pair on its own."""
        states = [None] * (self.config.num_hidden_layers + 1)
        if not layer_indices:
            return tuple(states)
        with torch.set_grad_enabled(encoder_needs_grad(self.cove, inputs)):
            # single texts: one encoder pass (while exporting, the pair path below serves every batch)
            if not torch.compiler.is_exporting() and not pair.has_pairs():
                hidden = self.cove_layers(inputs, attention_mask, layer_indices, pair.on_host().host_lx)
                for k in layer_indices:
                    states[k] = hidden[k]
                return tuple(states)
            # pairs: encode the first and the second text separately (rows without a second text give zeros)
            time = attention_mask.shape[1]
            exporting = torch.compiler.is_exporting()
            pair = pair if exporting else pair.on_host()
            for side, host_lengths in ((pair.first, pair.host_lx), (pair.second, pair.host_ly)):
                segment, positions, mask = segment_gather(inputs, side, host_lengths)  # ids (B, L) or vectors
                hidden = self.cove_layers(segment, mask.long(), layer_indices, host_lengths)
                for k in layer_indices:  # back at the text's positions, (B, T, 2h)
                    placed = segment_scatter(hidden[k], positions, mask, time)
                    states[k] = placed if states[k] is None else states[k] + placed
            return tuple(states)

    def bcn_inputs(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, cove_hidden_states: tuple,
                   vectors: Optional[torch.Tensor] = None):
        """Eq. 6 (or the `bcn_input` variant): the per-token BCN input w~, (B, T, D_in), zero at padding
        (`layers.assemble_head_inputs` on `config.feature_layout("bcn")`). `vectors`: the word vectors GloVe(w)
        (B, T, 300), zero at padding, when already looked up."""
        return assemble_head_inputs(self.config, "bcn", self.cove, input_ids, attention_mask, cove_hidden_states,
                                    self.scalar_mix, self.layer_indices, vectors)

    def check_inputs(self, input_ids: Optional[torch.Tensor], inputs_embeds: Optional[torch.Tensor],
                     attention_mask: Optional[torch.Tensor]):
        """Exactly one of `input_ids` (B, T) and `inputs_embeds` (B, T, 300), checked by the encoder's own checks.
        Returns (that one, the (B, T) attention mask)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError(
                "CoveForSequenceClassification needs exactly one of input_ids and inputs_embeds (also when "
                f"cove_hidden_states are given), got {'both' if input_ids is not None else 'neither'}"
            )
        if inputs_embeds is not None:
            return inputs_embeds, self.cove.check_inputs_embeds(inputs_embeds, attention_mask)
        return input_ids, self.cove.check_inputs(input_ids, attention_mask)

    def check_cove_hidden_states(self, cove_hidden_states, input_ids: torch.Tensor) -> tuple:
        expected = self.config.num_hidden_layers + 1
        if not isinstance(cove_hidden_states, (tuple, list)) or len(cove_hidden_states) != expected:
            raise ValueError(
                f"cove_hidden_states must be a tuple of {expected} entries like CoveModel(...).hidden_states "
                "(word vectors, layer 1, ..., layer L; unused entries may be None)"
            )
        batch, time = input_ids.shape[:2]
        for k in self.layer_indices:
            state = cove_hidden_states[k]
            shape = (batch, time, self.config.encoder_output_size)
            if state is not None:
                require_features(state, f"cove_hidden_states[{k}]", self.cove.embeddings.weight.dtype)
            if state is None or tuple(state.shape) != shape:
                got = None if state is None else tuple(state.shape)
                raise ValueError(
                    f"cove_hidden_states[{k}] (MT-LSTM layer {k}) must have shape {shape} for "
                    f"bcn_input={self.config.bcn_input!r}, got {got}"
                )
        return tuple(cove_hidden_states)

    # ------------------------------------------------------------------------------------------------------------
    # up-front checks
    # ------------------------------------------------------------------------------------------------------------

    def check_pair_input(self, ly: torch.Tensor):
        """A pair model (`config.bcn_pair_input`) refuses rows without a second text instead of reading them as a
        single sentence."""
        if not self.config.bcn_pair_input:
            return
        require(
            ly > 0,
            "this model classifies sentence pairs (config.bcn_pair_input=True), but an input has no second text",
            lambda: f"this model classifies sentence pairs (config.bcn_pair_input=True), but row(s) "
            f"{rows_where(ly == 0)} of this batch of {len(ly)} have no second text (text_pair missing, None or "
            "empty): pass both texts, e.g. classifier({'text': premise, 'text_pair': hypothesis}) or "
            "tokenizer(premise, hypothesis), each with at least one token",
        )

    def check_length(self, lx: torch.Tensor, ly: torch.Tensor):
        """Texts (each side of a pair) longer than `config.bcn_max_length` tokens are a ValueError stating the
        biattention's memory and the fix, checked before anything runs."""
        limit = self.config.bcn_max_length
        if limit is None:
            return
        y_len = torch.where(ly > 0, ly, lx)  # a single text is its own y
        longest = torch.maximum(lx, y_len)  # (B,)

        def detail():
            batch, x_time, y_time, most = len(lx), int(lx.max()), int(y_len.max()), int(longest.max())
            element = self.feedforward.weight.element_size()
            size = biattention_bytes(batch, x_time, y_time, element) / 2**30
            square = biattention_bytes(1, most, most, element) / 2**30
            return (
                f"an input text has {most} tokens, more than config.bcn_max_length={limit}: the BCN's biattention "
                f"(eqs. 9–10) compares every token of one text with every token of the other, so its memory grows with "
                f"the product of the two lengths (this batch's {batch} x {x_time} x {y_time} attention maps: about "
                f"{size:.4g} GiB; one text of {most} tokens, or a pair of two such texts: {square:.4g} GiB). Truncate "
                f"the texts: pipeline(..., truncation=True) or tokenizer(..., truncation=True) cut them at the "
                f"tokenizer's model_max_length (or pass max_length="
                f"<= {limit}); or raise config.bcn_max_length (None: no limit) if that memory is available."
            )

        require(longest <= limit, f"an input text is longer than config.bcn_max_length={limit} tokens", detail)

    def check_labels(self, labels: torch.Tensor, batch: int) -> str:
        """Checks `labels` against the problem type and returns it: `config.problem_type`, or when that is None
        inferred as transformers' sequence-classification heads do (num_labels == 1: "regression"; integer labels:
        "single_label_classification"; else "multi_label_classification"); `forward` stores it in the config once
        the checks passed."""
        require_tensor(labels, "labels")
        problem_type = self.config.problem_type
        if problem_type is None:
            if self.num_labels == 1:
                problem_type = "regression"
            elif not labels.is_floating_point() and labels.dtype != torch.bool:
                problem_type = "single_label_classification"
            else:
                problem_type = "multi_label_classification"
        if problem_type == "single_label_classification":
            if tuple(labels.shape) not in ((batch,), (batch, 1)):  # (B, 1): flattened, as transformers' heads do
                raise ValueError(
                    f"labels must have shape ({batch},) for single_label_classification, got {tuple(labels.shape)} "
                    "(multi-hot labels: float, shape (batch, num_labels), problem_type='multi_label_classification')"
                )
            if labels.is_floating_point() or labels.dtype == torch.bool:
                raise TypeError(f"labels must be integer class ids, got dtype {labels.dtype}")
            require(
                (labels >= 0) & (labels < self.num_labels),
                f"labels must be class ids in [0, {self.num_labels})",
                lambda: f"labels must be class ids in [0, {self.num_labels}), got min {int(labels.min())}, "
                f"max {int(labels.max())} (config.id2label: {self.config.id2label})",
            )
        else:
            shapes = [(batch, self.num_labels)] + ([(batch,)] if problem_type == "regression" and self.num_labels == 1
                                                    else [])
            if tuple(labels.shape) not in shapes:
                raise ValueError(
                    f"labels must have shape {' or '.join(map(str, shapes))} for {problem_type}, got "
                    f"{tuple(labels.shape)}"
                )
            if labels.dtype == torch.bool and problem_type == "regression":
                raise TypeError("regression labels must be numbers (float), got dtype torch.bool")
            values = labels.float()
            require(torch.isfinite(values), f"labels must be finite for {problem_type}")
            if problem_type == "multi_label_classification":
                require(
                    (values >= 0) & (values <= 1),
                    "multi_label_classification labels must be multi-hot (or probabilities) in [0, 1]",
                    lambda: "multi_label_classification labels must be multi-hot (or probabilities) in [0, 1], got "
                    f"min {float(values.min())}, max {float(values.max())}",
                )
        return problem_type

    # ------------------------------------------------------------------------------------------------------------
    # forward: the paper's steps, each checked input read once
    # ------------------------------------------------------------------------------------------------------------

    @add_start_docstrings_to_model_forward(BCN_INPUTS_DOCSTRING)
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        cove_hidden_states: Optional[tuple] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
    ) -> SequenceClassifierOutput:
        config = self.config
        return_dict = return_dict if return_dict is not None else config.return_dict
        output_attentions = output_attentions if output_attentions is not None else config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else config.output_hidden_states
        )
        # up-front checks, once per input: nothing below checks them again; with the texts' lengths, one read
        with HostRead() as host:
            inputs, attention_mask = self.check_inputs(input_ids, inputs_embeds, attention_mask)  # ids or vectors
            pair = split_pair(attention_mask, token_type_ids)
            self.check_pair_input(pair.ly)
            self.check_length(pair.lx, pair.ly)
            problem_type = self.check_labels(labels, inputs.shape[0]) if labels is not None else None
            host.read(pair.lx), host.read(pair.ly)
        pair = pair._replace(host_lx=host.values[0], host_ly=host.values[1])
        if problem_type is not None:
            self.config.problem_type = problem_type

        # eqs. 5–6: CoVe(w), then w~ = [GloVe(w); CoVe(w)] (or the `bcn_input` variant), (B, T, D_in)
        cove_hidden_states = self.encoder_states(inputs, attention_mask, pair, cove_hidden_states, output_hidden_states)
        dtype = self.cove.embeddings.weight.dtype
        vectors = inputs.to(dtype) if inputs.is_floating_point() else self.cove.embeddings(inputs)  # GloVe(w)
        vectors = vectors * attention_mask.unsqueeze(-1).to(dtype)  # (B, T, 300), zero at padding
        word_inputs = self.bcn_inputs(input_ids, attention_mask, cove_hidden_states, vectors)  # w~, (B, T, D_in)

        x, y = self.encode_texts(word_inputs, pair)  # eqs. 7–8: X (B, Tx, 2H), Y (B, Ty, 2H)
        # eqs. 9–10: biattention; C_x (B, Ty, 2H), C_y (B, Tx, 2H), A_x (B, Tx, Ty), A_y (B, Ty, Tx)
        context_x, context_y, attention_x, attention_y = biattention(
            x.states, x.mask, y.states, y.mask, return_attention=True
        )
        x_given_y, y_given_x = self.integrate(x, y, context_x, context_y)  # eqs. 11–12: X|y, Y|x
        # eqs. 13–16: pool over time, join both sides (B, 2*P*2H); then the batch-normalised maxout network
        pooled = torch.cat([self.pool_x(x_given_y, x.mask), self.pool_y(y_given_x, y.mask)], dim=-1)
        logits = pooled
        for layer in self.classifier:
            logits = layer(logits)  # (B, num_labels) after the last layer

        hidden_states = None
        if output_hidden_states:  # each (B, T, ·) laid out like input_ids
            hidden_states = (
                vectors,
                *cove_hidden_states[1:],
                merge_pair(x, y, pair),  # X / Y, (B, T, 2H)
                merge_pair(x._replace(states=x_given_y), y._replace(states=y_given_x), pair),  # X|y / Y|x
            )
        output = SequenceClassifierOutput(
            loss=self.loss(logits, labels, problem_type),
            logits=logits,
            hidden_states=hidden_states,
            attentions=(attention_x, attention_y) if output_attentions else None,
        )
        return output if return_dict else output.to_tuple()

    def encoder_states(self, inputs: torch.Tensor, attention_mask: torch.Tensor, pair: TextPair,
                       cove_hidden_states: Optional[tuple], output_hidden_states: bool) -> tuple:
        """eq. 5, CoVe(w): the MT-LSTM layers `forward` reads (every layer when the hidden states are returned), from
        `cove_hidden_states` when given and holding them, else computed (each text of a pair on its own)."""
        every_layer = list(range(1, self.config.num_hidden_layers + 1))
        layer_indices = every_layer if output_hidden_states else self.layer_indices
        if cove_hidden_states is not None:
            cove_hidden_states = self.check_cove_hidden_states(cove_hidden_states, inputs)
            if all(cove_hidden_states[k] is not None for k in layer_indices):
                return cove_hidden_states
        return self.cove_hidden_states(inputs, attention_mask, pair, layer_indices)

    def encode_texts(self, inputs: torch.Tensor, pair: TextPair):
        """eqs. 7–8: X = biLSTM(f(x)), Y = biLSTM(f(y)) with f a ReLU feed-forward layer, x the first text and y the
        second (or x again: a single text is duplicated). w~ (B, T, D_in) -> (X, Y) as `TextStates` (B, T*, 2H).
        In training with `config.bcn_independent_dropout`, y is dropped with its own mask (a duplicated text too)."""
        features = torch.relu(self.feedforward(self.input_dropout(inputs)))  # f(w~), (B, T, F)
        own_mask = self.config.bcn_independent_dropout and self.training and self.input_dropout.p > 0
        features_y = torch.relu(self.feedforward(self.input_dropout(inputs))) if own_mask else features
        # single texts only: y = x, one biLSTM run (while exporting, the pair path serves every batch: no value branch)
        exporting = torch.compiler.is_exporting()
        pair = pair if exporting else pair.on_host()
        if not exporting and not pair.has_pairs():
            width = int(pair.host_lx.max())
            positions = torch.arange(width, device=features.device).expand(features.shape[0], width)  # (B, Tx)
            mask = positions < pair.lx[:, None]  # (B, Tx)
            x = TextStates(self.bilstm(self.encoder, features[:, :width], pair.lx, pair.host_lx), mask, pair.lx,
                           positions, pair.host_lx)
            if features_y is features:
                return x, x  # x = y: the same sequence through the same biLSTM, one run
            return x, x._replace(states=self.bilstm(self.encoder, features_y[:, :width], pair.lx, pair.host_lx))
        has_second = (pair.ly > 0)[:, None]  # (B, 1)
        host_y = None if exporting else torch.where(pair.host_ly > 0, pair.host_ly, pair.host_lx)
        sides = []
        # rows without a second text: y = x
        for values, side, host_lengths in ((features, pair.first, pair.host_lx),
                                           (features_y, torch.where(has_second, pair.second, pair.first), host_y)):
            segment, positions, mask = segment_gather(values, side, host_lengths)  # (B, T*, F)
            lengths = mask.sum(dim=1)
            sides.append(TextStates(self.bilstm(self.encoder, segment, lengths, host_lengths), mask, lengths,
                                    positions, host_lengths))
        return sides[0], sides[1]

    def bilstm(self, lstm: nn.LSTM, inputs: torch.Tensor, lengths: torch.Tensor,
               host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """`layers.run_bilstm` by the strategy `config.lstm_implementation` picks: (B, T, C) -> (B, T, 2H);
        `host_lengths`: `lengths` on the host."""
        return run_bilstm(lstm, inputs, lengths, self.config.lstm_implementation, host_lengths)

    def integrate(self, x: TextStates, y: TextStates, context_x: torch.Tensor, context_y: torch.Tensor):
        """eqs. 11–12: X|y = biLSTM([X; X - C_y; X * C_y]) and Y|x = biLSTM([Y; Y - C_x; Y * C_x]), two separate
        one-layer biLSTMs; (B, Tx, 2H) and (B, Ty, 2H)."""
        x_given_y = self.bilstm(
            self.integrator_x, torch.cat([x.states, x.states - context_y, x.states * context_y], dim=-1), x.lengths,
            x.host_lengths,
        )
        y_given_x = self.bilstm(
            self.integrator_y, torch.cat([y.states, y.states - context_x, y.states * context_x], dim=-1), y.lengths,
            y.host_lengths,
        )
        return x_given_y, y_given_x

    @staticmethod
    def loss(logits: torch.Tensor, labels: Optional[torch.Tensor], problem_type: Optional[str]):
        """The loss of `problem_type` (None without labels): mean cross-entropy, mean squared error, or
        `BCEWithLogitsLoss` averaged over batch and labels."""
        if problem_type == "single_label_classification":
            return nn.functional.cross_entropy(logits, labels.reshape(-1).long())
        if problem_type == "regression":
            return nn.functional.mse_loss(logits.reshape(labels.shape), labels.to(logits.dtype))
        if problem_type == "multi_label_classification":
            return nn.functional.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
        return None


__all__ = ["CoveForSequenceClassification"]
