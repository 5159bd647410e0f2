"""The ELMo-style biLM encoder (Peters et al. 2018; docs/bilm.md), the encoder `CoveModel` runs when
`config.encoder_type == "bilm"` (`modeling_cove.encoder_class`).

`CoveBiLMEncoder` is a forward and a backward unidirectional LSTM stack over the same frozen word vectors. The backward
stack reads each row reversed within its own length, so padding never enters a row's states, and the two stacks never
see each other's states between layers (a stacked biLSTM, as CoVe's MT-LSTM, would feed the backward states of layer
1, which have read the future, into layer 2 of the forward LM). Layer k of its output is `[forward_k; backward_k]`,
`2 * hidden_size` wide: the shape of an MT-LSTM layer, so eq. 6's feature layout, the BCN, the DCN, the feature cache
and `encode` read it unchanged. Its pretraining head, `CoveForBidirectionalLM`, is in modeling_cove_bilm.py (which
needs `CoveModel`; this file needs nothing of modeling_cove.py, so the base model imports it).
"""

from typing import Optional

import torch
from torch import nn

from . import lstm_kernels
from .configuration_cove import CoveConfig

__all__ = ["CoveBiLMEncoder", "reversal_index", "reverse_rows"]


def reversal_index(lengths: torch.Tensor, time: int, device: torch.device) -> torch.Tensor:
    """(B, T) time index that reverses each row within its length and leaves its padding where it is: position t
    of row b reads `L_b - 1 - t` for t < L_b and t after. Applying it twice gives the identity."""
    steps = torch.arange(time, device=device).unsqueeze(0)  # (1, T)
    lengths = lstm_kernels.to_device_async(lengths, device).unsqueeze(1)  # (B, 1); host lengths: no wait
    return torch.where(steps < lengths, lengths - 1 - steps, steps)


def reverse_rows(states: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """`states` (B, T, C) with each row's time steps permuted by `index` (B, T) (`reversal_index`)."""
    return states.gather(1, index.unsqueeze(-1).expand_as(states))


class CoveBiLMEncoder(nn.Module):
    """Forward and backward unidirectional LSTM stacks (`config.num_hidden_layers` layers of `config.hidden_size`)
    over the word vectors; `config.bilm_residual` adds each layer's input to its output from layer 2 on (ELMo's
    residual connection). Same call and return as `CoveEncoder.forward`, so `CoveModel` runs either."""

    def __init__(self, config: CoveConfig):
        super().__init__()
        self.config = config
        self.num_layers = config.num_hidden_layers
        self.hidden_size = config.hidden_size
        self.dropout = config.encoder_dropout  # between the layers, as CoveEncoder
        self.residual = config.bilm_residual
        sizes = [config.word_vector_dim] + [config.hidden_size] * (config.num_hidden_layers - 1)
        self.forward_layers = nn.ModuleList(nn.LSTM(size, config.hidden_size, batch_first=True) for size in sizes)
        self.backward_layers = nn.ModuleList(nn.LSTM(size, config.hidden_size, batch_first=True) for size in sizes)
        self._autocast_cache = None  # read by `lstm_kernels.weights_cast_once` (CoveModel.encode), unused here

    def lstm_stacks(self) -> lstm_kernels.DirectionStacks:
        """The two stacks as `lstm_kernels.choose_lstm_implementation` takes them, with the current key."""
        return lstm_kernels.DirectionStacks(self.forward_layers, self.backward_layers, self.config.lstm_implementation)

    def forward(self, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool = True,
                top_only: bool = False, unpacked: Optional[bool] = None, out: Optional[torch.Tensor] = None):
        """vectors: (B, T, word_vector_dim) word vectors; lengths: (B,) tokens per row (>= 1), on the host.

        Returns a list with each layer's output (B, T, 2H) as `[forward; backward]`, and final h and c as (B, L, 2H)
        (the forward stack's state after the last token, the backward stack's after the first; None when
        `final_states=False`). `out`: a `(B, T, 2H)` tensor that receives the top layer (then the list's last
        entry). Outputs at padding are unspecified (CoveModel zeroes them). Each stack always runs every layer
        (`top_only` changes no strategy here).

        `config.lstm_implementation` picks the path through `lstm_kernels.choose_lstm_implementation`, as for the
        MT-LSTM and the heads' biLSTMs: "reference" runs packed rows (each row alone, the oracle); "unpacked" the
        padded rows on the fused kernel (padding comes after a row's tokens in both directions, so it never reaches
        them), for a batch with padding and without final states; "auto" runs "unpacked" wherever it serves: the
        biLM always gives the choice the hint `unpacked=True` (the caller's `unpacked`, the MT-LSTM's hint, is not
        read). "single_call" never serves the two stacks, so it runs the reference. While `torch.export` traces
        ("traceable"): the padded rows, packed for final states.
        """
        time = vectors.shape[1]
        index = reversal_index(lengths, time, vectors.device)
        chosen = lstm_kernels.choose_lstm_implementation(self.lstm_stacks(), vectors, lengths, final_states,
                                                         top_only, True)
        # packed for the reference, and for final states, which only packed rows give at each row's end (the
        # choice is the reference for them, except while exporting); a batch without padding has nothing to pack
        pack = (chosen == "reference" or final_states) and not bool((lengths == time).all())
        forward_layers, forward_h, forward_c = self.run_stack(self.forward_layers, vectors, lengths, pack)
        backward_layers, backward_h, backward_c = self.run_stack(self.backward_layers, reverse_rows(vectors, index),
                                                                 lengths, pack)
        outputs = [torch.cat([f, reverse_rows(b, index)], dim=-1) for f, b in zip(forward_layers, backward_layers)]
        outputs = lstm_kernels.top_layer_into(outputs, out)
        if not final_states:
            return outputs, None, None
        final_h = torch.cat([torch.stack(forward_h, dim=1), torch.stack(backward_h, dim=1)], dim=-1)  # (B, L, 2H)
        final_c = torch.cat([torch.stack(forward_c, dim=1), torch.stack(backward_c, dim=1)], dim=-1)
        return outputs, final_h, final_c

    def run_stack(self, layers: nn.ModuleList, inputs: torch.Tensor, lengths: torch.Tensor, pack: bool):
        """One direction's stack over right-padded `inputs` (B, T, C) read left to right. Returns each layer's
        output (B, T, H) and its final h and c (B, H) each (at every row's last token when `pack`, else at the
        last step, which is the same for rows without padding)."""
        time = inputs.shape[1]
        outputs, final_h, final_c = [], [], []
        layer_input = inputs
        for k, lstm in enumerate(layers):
            if k > 0 and self.dropout > 0 and self.training:
                layer_input = nn.functional.dropout(layer_input, self.dropout, training=True)
            # call_lstm_module: fp32 under autocast where this CPU lacks the dtype's LSTM kernel (bf16 on AVX2)
            if pack:
                packed_output, (h_n, c_n) = lstm_kernels.call_lstm_module(lstm, lstm_kernels.pack(layer_input, lengths))
                output = lstm_kernels.unpack(packed_output, time)
            else:
                output, (h_n, c_n) = lstm_kernels.call_lstm_module(lstm, layer_input)
            if k > 0 and self.residual:
                output = output + outputs[-1]  # ELMo: layer k's input (layer k-1's output, before dropout)
            outputs.append(output)
            final_h.append(h_n[0])
            final_c.append(c_n[0])
            layer_input = output
        return outputs, final_h, final_c
