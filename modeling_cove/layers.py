"""Layers the heads (BCN `modeling_cove_bcn.py`, DCN `modeling_cove_dcn.py`, tagger `modeling_cove_tagger.py`) share,
each defined once.

- `masked_softmax`: a softmax that gives padding no weight (the BCN's biattention and self-attentive pooling, the
  DCN's coattention);
- `run_bilstm`: a one-layer biLSTM over right-padded rows, as if each row ran alone, by the strategy of `lstm_kernels`
  the model's `config.lstm_implementation` picks (the MT-LSTM's registry; `run_bilstm_packed` is the reference);
- `pair_segments`, `segment_gather`, `segment_scatter`: a pair (first text / question, second text / context) arrives
  as ONE sequence told apart by `token_type_ids`; each segment is cut out left-aligned, run on its own and put back;
- `run_encoder_checked`: the head's CoVe encoder on inputs the head has checked already (each input checked once);
- `maxout`: the max over groups of units (the BCN's maxout network, the DCN's highway maxout network);
- `require` (from `embeddings`): an up-front check that is a `ValueError` in eager mode (read with the forward's
  other checks inside a `HostRead`) and a runtime assertion while exporting;
- `CoveScalarMix`: ELMo's scalar mix over the encoder's layers (the BCN's and the tagger's `*scalar_mix` inputs);
- `encoder_needs_grad`, `head_init_`: whether a head runs its encoder under autograd, and a head layer's init.

Shapes: B batch, T time (the padded input), L the longest segment, C channels, H an LSTM's hidden size.
"""

import math
from typing import Callable, Optional, Sequence

import torch
from torch import nn

from .embeddings import require, require_tensor, rows_where
from .lstm_kernels import (LSTM_IMPLEMENTATIONS, BiLSTMStack, choose_lstm_implementation, lstm_autocast_fallback, pack,
                           unpack)
from .modeling_cove import CoveModel, CoveModelOutput, assemble_features

__all__ = ["assemble_head_inputs", "choose_lstm_implementation", "CoveScalarMix", "encoder_needs_grad", "head_init_",
           "masked_softmax", "maxout", "pair_segments", "require", "rows_where", "run_bilstm", "run_bilstm_packed",
           "run_encoder_checked", "scalar_mix_for", "segment_gather", "segment_scatter", "SentenceBoundaries",
           "valid_steps"]


# ----------------------------------------------------------------------------------------------------------------
# masked softmax and maxout
# ----------------------------------------------------------------------------------------------------------------


def masked_softmax(scores: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Softmax of `scores` over `dim` where the bool `mask` (broadcast against `scores`) is True; masked entries get
    probability 0. A slice must hold at least one unmasked entry (the heads refuse empty texts up front). Masked
    scores take the most negative value of the scores' own dtype (so bf16 scores stay bf16)."""
    return torch.softmax(scores.masked_fill(~mask, torch.finfo(scores.dtype).min), dim=dim)


def maxout(x: torch.Tensor, pool_size: int) -> torch.Tensor:
    """The max over consecutive groups of `pool_size` features: (..., units * pool_size) -> (..., units); output unit
    j pools the inputs j * p .. j * p + p - 1."""
    return x.view(*x.shape[:-1], x.shape[-1] // pool_size, pool_size).max(dim=-1).values


# ----------------------------------------------------------------------------------------------------------------
# biLSTM over right-padded rows
# ----------------------------------------------------------------------------------------------------------------


def valid_steps(lengths: torch.Tensor, time: int) -> torch.Tensor:
    """(B, T) bool: True at the first `lengths[b]` steps of row b."""
    return torch.arange(time, device=lengths.device)[None, :] < lengths[:, None]


class SentenceBoundaries(nn.Module):
    """Learned START and END vectors around every row: (B, T, D) right-padded features of `lengths` (B,) steps ->
    (B, T + 2, D) = [START, x_1, ..., x_n, END, 0, ...] with lengths + 2. A biLSTM then reads a state before the
    first token and after the last one (Cross-View Training's taggers do: their future/past views of the first and
    last tokens are those states). `tokens(x)` takes (B, T + 2, ...) back to the T token positions."""

    def __init__(self, dim: int):
        super().__init__()
        self.vectors = nn.Parameter(torch.zeros(2, dim))  # START, END; head_init_ draws them

    def forward(self, features: torch.Tensor, lengths: torch.Tensor) -> tuple:
        batch, _, dim = features.shape
        start, end = self.vectors.to(features.dtype)
        edge = features.new_zeros(batch, 1, dim)
        framed = torch.cat([start.expand(batch, 1, dim), features, edge], dim=1)  # (B, T + 2, D)
        at_end = torch.arange(framed.shape[1], device=features.device)[None, :] == (lengths + 1)[:, None]
        return torch.where(at_end[..., None], end, framed), lengths + 2

    @staticmethod
    def tokens(values: torch.Tensor) -> torch.Tensor:
        """(B, T + 2, ...) -> (B, T, ...): the token positions (a shorter row's END lands in its padding)."""
        return values[:, 1:-1]


def run_bilstm(lstm: nn.LSTM, inputs: torch.Tensor, lengths: torch.Tensor, implementation: str = "auto",
               host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
    """A one-layer, batch-first biLSTM over right-padded `inputs` (B, T, C) whose row b holds `lengths[b]` >= 1 steps.
    Returns (B, T, 2H), zero at padding; a row's values and gradients do not depend on the padding (each row as if
    alone). `host_lengths`: the same lengths on the host, where the forward has them (else read here: on a GPU a
    wait for the device).

    Run by the strategy `lstm_kernels.choose_lstm_implementation` picks for `implementation` (the model's
    `config.lstm_implementation`), the same ones as the MT-LSTM's: "reference" is `run_bilstm_packed`, the oracle;
    "unpacked" the padded rows on the fused kernel (on CPU sorted and in time segments); while `torch.export` traces,
    "traceable". Under autocast in a dtype whose LSTM kernel this machine lacks (bf16 on CPUs without AVX-512 bf16),
    the LSTM runs in fp32 with autocast off and its output comes in that dtype (`lstm_autocast_fallback`)."""
    stack = BiLSTMStack(lstm, implementation)
    if torch.compiler.is_exporting():
        host_lengths = lengths  # (the strategies plan on the host; export reads none)
    elif host_lengths is None:
        host_lengths = lengths.cpu()
    chosen = choose_lstm_implementation(stack, inputs, host_lengths, False, True, None)
    if chosen == "reference":
        return run_bilstm_packed(lstm, inputs, lengths, host_lengths)
    output = LSTM_IMPLEMENTATIONS[chosen](stack, inputs, host_lengths, False, True, None)[0][-1]  # garbage at padding
    return output * valid_steps(lengths, inputs.shape[1]).unsqueeze(-1).to(output.dtype)


def run_bilstm_packed(lstm: nn.LSTM, inputs: torch.Tensor, lengths: torch.Tensor,
                      host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
    """`run_bilstm`'s reference, as `nn.LSTM` runs it: on packed rows (`pack_padded_sequence(...,
    enforce_sorted=False)`, made by `lstm_kernels.pack` without a wait for the device), or on the padded tensor when
    every row fills it (nothing to pack); with `lstm_autocast_fallback`. (B, T, C) -> (B, T, 2H), zero at padding.
    `host_lengths`: `lengths` on the host (read here when not given)."""
    host_lengths = lengths.cpu() if host_lengths is None else host_lengths
    fallback = lstm_autocast_fallback(inputs.device.type)
    if fallback is not None:
        with torch.autocast(inputs.device.type, enabled=False):
            return run_bilstm_packed(lstm, inputs.float(), lengths, host_lengths).to(fallback)
    time = inputs.shape[1]
    if bool((host_lengths == time).all()):  # no padding
        output, _ = lstm(inputs)
    else:
        output, _ = lstm(pack(inputs, host_lengths, keep_sorted_rows=False))
        output = unpack(output, time)
    return output * valid_steps(lengths, time).unsqueeze(-1).to(output.dtype)


# ----------------------------------------------------------------------------------------------------------------
# pair segmentation by token_type_ids
# ----------------------------------------------------------------------------------------------------------------


def pair_segments(attention_mask: torch.Tensor, token_type_ids: Optional[torch.Tensor]):
    """The two segments of right-padded pair sequences, as `tokenizer(text, text_pair)` lays them out: (first,
    second), each (B, T) bool, True at the tokens (`attention_mask` 1) whose `token_type_ids` is 0 / 1. Padding
    belongs to neither, whatever its type id; other type ids to neither. Without `token_type_ids` every token is in
    the first segment. Which layouts and empty segments a head accepts is the head's own check."""
    tokens = attention_mask.bool()
    if token_type_ids is None:
        return tokens, torch.zeros_like(tokens)
    require_tensor(token_type_ids, "token_type_ids")
    if token_type_ids.shape != attention_mask.shape:
        raise ValueError(f"token_type_ids shape {tuple(token_type_ids.shape)} != attention_mask shape "
                         f"{tuple(attention_mask.shape)}")
    return tokens & (token_type_ids == 0), tokens & (token_type_ids == 1)


def segment_gather(x: torch.Tensor, segment: torch.Tensor, host_lengths: Optional[torch.Tensor] = None):
    """Cut one segment out of each row and left-align it, keeping the tokens' order.

    x (B, T, ...) (ids (B, T) or features (B, T, C)); segment (B, T) bool; `host_lengths` (B,): its row sums on the
    host, where the caller has them (else read here: on a GPU a wait for the device). Returns (gathered (B, L, ...),
    zero past each row's segment; positions (B, L), the segment's indices into T, arbitrary past its end; mask (B, L)
    bool), L = the longest segment in the batch, at least 1 (T while `torch.export` traces: no width from tensor
    values).
    """
    batch, time = segment.shape
    lengths = segment.sum(dim=1)  # (B,)
    if torch.compiler.is_exporting():
        width = time
    else:
        width = max(int((lengths.cpu() if host_lengths is None else host_lengths).max()), 1)
    # a stable sort on "not in the segment" puts the segment's positions first, in their original order
    positions = torch.sort((~segment).to(torch.int8), dim=1, stable=True).indices[:, :width]  # (B, L)
    mask = valid_steps(lengths, width)  # (B, L)
    trailing = [1] * (x.dim() - 2)
    index = positions.view(batch, width, *trailing).expand(batch, width, *x.shape[2:])
    return x.gather(1, index) * mask.view(batch, width, *trailing).to(x.dtype), positions, mask


def segment_scatter(values: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, time: int) -> torch.Tensor:
    """The inverse of `segment_gather`: a segment's `values` (B, L, C) back at their `positions` (B, L) of a
    (B, T=`time`, C) tensor that is zero everywhere else (entries past a row's `mask` (B, L) are left out)."""
    index = positions.unsqueeze(-1).expand(-1, -1, values.shape[-1])
    values = values * mask.unsqueeze(-1).to(values.dtype)  # entries past the segment add zeros wherever they point
    return values.new_zeros(values.shape[0], time, values.shape[-1]).scatter_add(1, index, values)


# ----------------------------------------------------------------------------------------------------------------
# the CoVe encoder inside a head
# ----------------------------------------------------------------------------------------------------------------


def run_encoder_checked(cove: CoveModel, inputs: torch.Tensor, attention_mask: torch.Tensor,
                        output_hidden_states: bool, host_lengths: Optional[torch.Tensor] = None) -> CoveModelOutput:
    """`cove(...)` (the head's `CoveModel`) on inputs the head's forward has checked already (ids in the vocabulary,
    word-vector shape, right padding), e.g. one segment of a checked pair: the encoder's forward without its own
    checks, so each input is checked once per forward. `inputs`: token ids (B, T) or word vectors (B, T, D);
    `attention_mask` (B, T) right-padded; `host_lengths` (B,): its row sums on the host, where the forward has them
    (else read here). No final states; returns the `CoveModelOutput` (return_dict)."""
    ids, vectors = (None, inputs) if inputs.is_floating_point() else (inputs, None)
    lengths = attention_mask.sum(dim=1).cpu() if host_lengths is None else host_lengths  # (B,) on the host
    return cove.forward_checked(ids, attention_mask, lengths, output_hidden_states, False, True, inputs_embeds=vectors)


# ----------------------------------------------------------------------------------------------------------------
# the CoVe encoder inside a head: autograd, the scalar mix, the head's init
# ----------------------------------------------------------------------------------------------------------------


def encoder_needs_grad(cove: CoveModel, inputs: torch.Tensor) -> bool:
    """Whether a head runs its encoder with autograd: a trainable encoder, or word vectors passed in (`inputs`
    floating point: `inputs_embeds`) that need a gradient (e.g. attributions w.r.t. `inputs_embeds`)."""
    needs = any(p.requires_grad for p in cove.parameters())
    needs = needs or (inputs.is_floating_point() and inputs.requires_grad)
    return torch.is_grad_enabled() and needs


class CoveScalarMix(nn.Module):
    """ELMo-style scalar mix (docs/paper.md §6): gamma * sum_k softmax(w)_k * h_k, with w initialised to 0 and gamma
    to 1."""

    def __init__(self, num_layers: int):
        super().__init__()
        self.scalar_weights = nn.Parameter(torch.zeros(num_layers))
        self.gamma = nn.Parameter(torch.ones(1))

    def forward(self, layers: Sequence[torch.Tensor]) -> torch.Tensor:
        if len(layers) != self.scalar_weights.shape[0]:
            raise ValueError(f"scalar mix expects {self.scalar_weights.shape[0]} layers, got {len(layers)}")
        weights = torch.softmax(self.scalar_weights, dim=0)
        return self.gamma * sum(weight * layer for weight, layer in zip(weights, layers))


def scalar_mix_for(config, reader: str) -> Optional[CoveScalarMix]:
    """The scalar mix of a head's input (`reader` "bcn" or "tagger") when `config.feature_layout(reader)` has one,
    else None. It mixes [g; g] with the encoder's layers, so the word vectors must be as wide as a direction's
    states: a ValueError naming the input field otherwise."""
    if not config.feature_layout(reader).has("scalar_mix"):
        return None
    if config.word_vector_dim != config.hidden_size:
        raise ValueError(
            f"{reader}_input={getattr(config, reader + '_input')!r} mixes [g; g] with the encoder layers, so 2 * "
            f"word_vector_dim ({2 * config.word_vector_dim}) must equal 2 * hidden_size ({2 * config.hidden_size})"
        )
    return CoveScalarMix(config.num_hidden_layers + 1)


def assemble_head_inputs(config, reader: str, cove: CoveModel, inputs: torch.Tensor,
                         attention_mask: torch.Tensor, hidden_states: Optional[tuple],
                         scalar_mix: Optional[CoveScalarMix] = None, layer_indices=(),
                         vectors: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Eq. 6 as a head reads it, `config.feature_layout(reader)` ("bcn", "dcn", "tagger"): w~ (B, T, D_in), zero at
    padding. `inputs`: checked ids (B, T) or word vectors (B, T, D); `hidden_states`: the encoder's (word vectors,
    layer 1, ..., layer L; entries the layout does not read may be None), or None when it reads no layer;
    `scalar_mix` (ELMo's mix, docs/paper.md §6) over [GloVe(w); GloVe(w)] and the layers `layer_indices`; `vectors`:
    GloVe(w) (B, T, 300), zero at padding, when the caller has looked it up already. The encoder's states are zero
    at padding as it returns them (the DCN, BCN and tagger all read them so)."""
    layout = config.feature_layout(reader)
    mask = attention_mask.unsqueeze(-1).to(cove.embeddings.weight.dtype)  # (B, T, 1)
    if vectors is None and (layout.has("word_vectors") or layout.has("scalar_mix")):
        vectors = (inputs.to(mask.dtype) if inputs.is_floating_point() else cove.embeddings(inputs)) * mask
    parts = {"word_vectors": vectors}  # GloVe(w), (B, T, 300); None when the layout does not read it
    if hidden_states is not None:  # eq. 5, CoVe(w): layer 1 and the top layer, each (B, T, 2h)
        parts["first_layer"], parts["top_layer"] = hidden_states[1], hidden_states[config.num_hidden_layers]
    if layout.has("scalar_mix"):  # gamma * sum_k softmax(w)_k h_k, k over [g; g] and the encoder's layers
        if scalar_mix is None or hidden_states is None:
            raise ValueError(f"{reader}_input={getattr(config, reader + '_input')!r} mixes the encoder's layers: pass "
                             "the head's scalar mix (layers.scalar_mix_for) and the encoder's hidden states")
        parts["scalar_mix"] = scalar_mix([torch.cat([vectors, vectors], dim=-1),
                                          *(hidden_states[k] for k in layer_indices)])
    if layout.has("char_ngrams"):  # looked up by id (`inputs_embeds` is refused with them)
        parts["char_ngrams"] = cove.char_ngram_embeddings(inputs) * mask
    return assemble_features(layout, parts)  # every part is zero at padding already


@torch.no_grad()
def head_init_(module: nn.Module) -> None:
    """A head layer's initialisation (the encoder keeps the MT's U(-r, r)): fan-in scaled uniform weights
    U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for linear layers and LSTMs (PyTorch's defaults; the papers give none for
    the heads: the MT's U(-0.1, 0.1) is 7x too wide for the BCN's 4800-wide maxout input and slowed early training in
    our runs), batch norm at (1, 0) with fresh statistics, a scalar mix at w = 0, gamma = 1, an embedding (the
    tagger's casing feature) N(0, 1) with its padding row zero, sentence boundary vectors N(0, 1). Every trainable kind a head holds must be here:
    `from_pretrained` leaves the weights it does not load uninitialised until this runs."""
    if isinstance(module, nn.Linear):
        bound = 1.0 / math.sqrt(module.in_features)
        nn.init.uniform_(module.weight, -bound, bound)
        if module.bias is not None:
            nn.init.uniform_(module.bias, -bound, bound)
    elif isinstance(module, nn.LSTM):
        bound = 1.0 / math.sqrt(module.hidden_size)
        for param in module.parameters():
            nn.init.uniform_(param, -bound, bound)
    elif isinstance(module, nn.BatchNorm1d):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)
        module.reset_running_stats()
    elif isinstance(module, CoveScalarMix):
        nn.init.zeros_(module.scalar_weights)
        nn.init.ones_(module.gamma)
    elif isinstance(module, SentenceBoundaries):
        nn.init.normal_(module.vectors, 0.0, 1.0)
    elif isinstance(module, nn.Embedding):
        nn.init.normal_(module.weight, 0.0, 1.0)
        if module.padding_idx is not None:
            module.weight[module.padding_idx].zero_()
