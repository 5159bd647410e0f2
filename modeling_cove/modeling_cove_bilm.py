"""An ELMo-style bidirectional language model on the CoVe stack (Peters et al. 2018; docs/bilm.md).

Its encoder, `CoveBiLMEncoder` (modeling_cove_bilm_encoder.py, re-exported here), is the encoder `CoveModel` runs when
`config.encoder_type == "bilm"`: a forward and a backward unidirectional LSTM stack over the same frozen word vectors,
layer k of its output `[forward_k; backward_k]`.

`CoveForBidirectionalLM` pretrains it: the forward top state at t predicts token t+1, the backward top state at t
predicts token t-1, through one output layer shared by the two directions (`config.bilm_tie_softmax`), an adaptive
softmax (`torch.nn.AdaptiveLogSoftmaxWithLoss`, Grave et al. 2017) over the source vocabulary. Its loss is the mean
of the two directions' mean token NLL.
"""

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from transformers.utils import ModelOutput

from .configuration_cove import CoveConfig
from .modeling_cove import CoveModel, CovePreTrainedModel
from .modeling_cove_bilm_encoder import CoveBiLMEncoder, reversal_index, reverse_rows  # noqa: F401  (re-exported)

__all__ = ["CoveBiLMEncoder", "CoveBiLMOutput", "CoveForBidirectionalLM"]


@dataclass
class CoveBiLMOutput(ModelOutput):
    """Output of `CoveForBidirectionalLM`.

    Args:
        loss (`torch.FloatTensor`, returned with `labels`): `(forward_loss + backward_loss) / 2`.
        forward_loss, backward_loss (`torch.FloatTensor`, returned with `labels`): each direction's mean NLL per
            predicted token (forward: token t+1 from the state at t; backward: token t-1); perplexity =
            `exp(loss)`. 0 for a direction with no target in the batch.
        forward_nll_sum, backward_nll_sum (`torch.FloatTensor`, returned with `labels`): the summed NLL per
            direction, to pool batches and processes exactly.
        forward_num_tokens, backward_num_tokens (`torch.LongTensor`, returned with `labels`): tokens counted.
        forward_hidden_state, backward_hidden_state (`torch.FloatTensor` of shape `(batch, time, hidden_size)`): the
            top layer's states of each direction, zero at padding (what the output layer reads).
        hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`): the encoder's
            `(word vectors, layer 1, ..., layer L)`, each layer `[forward; backward]` as `CoveModel` gives them.
    """

    loss: Optional[torch.FloatTensor] = None
    forward_loss: Optional[torch.FloatTensor] = None
    backward_loss: Optional[torch.FloatTensor] = None
    forward_nll_sum: Optional[torch.FloatTensor] = None
    backward_nll_sum: Optional[torch.FloatTensor] = None
    forward_num_tokens: Optional[torch.LongTensor] = None
    backward_num_tokens: Optional[torch.LongTensor] = None
    forward_hidden_state: Optional[torch.FloatTensor] = None
    backward_hidden_state: Optional[torch.FloatTensor] = None
    hidden_states: Optional[tuple] = None


class CoveForBidirectionalLM(CovePreTrainedModel):
    """biLM pretraining (docs/bilm.md): `self.cove` (a `CoveModel` over `CoveBiLMEncoder`) and an adaptive softmax
    over the source vocabulary, shared by the two directions unless `config.bilm_tie_softmax` is False.
    `AutoModel.from_pretrained` of its checkpoint gives the encoder alone (the output layer is reported unused)."""

    trains_encoder = True

    def __init__(self, config: CoveConfig):
        super().__init__(config)
        if config.encoder_type != "bilm":
            raise ValueError(f"CoveForBidirectionalLM needs config.encoder_type='bilm', got {config.encoder_type!r}")
        self.cove = CoveModel(config)
        self.dropout = nn.Dropout(config.encoder_dropout)
        self.softmax = self.new_softmax(config)
        self.backward_softmax = None if config.bilm_tie_softmax else self.new_softmax(config)
        self.post_init()
        self.freeze_frozen_parts()

    @staticmethod
    def new_softmax(config: CoveConfig) -> nn.AdaptiveLogSoftmaxWithLoss:
        return nn.AdaptiveLogSoftmaxWithLoss(config.hidden_size, config.vocab_size,
                                             cutoffs=config.softmax_cutoffs, div_value=4.0)

    def get_input_embeddings(self):
        return self.cove.embeddings

    def output_layer(self, direction: str) -> nn.AdaptiveLogSoftmaxWithLoss:
        """The adaptive softmax of `direction` ("forward" or "backward")."""
        if direction not in ("forward", "backward"):
            raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
        return self.backward_softmax if direction == "backward" and self.backward_softmax is not None else self.softmax

    def log_probs(self, hidden_state: torch.Tensor, direction: str = "forward") -> torch.Tensor:
        """Full log-probabilities over the vocabulary, `(..., vocab_size)`, of top-layer states `(..., hidden_size)`
        (`forward_hidden_state` predicts the next token, `backward_hidden_state` the previous one)."""
        flat = hidden_state.reshape(-1, hidden_state.shape[-1])
        return self.output_layer(direction).log_prob(flat).reshape(*hidden_state.shape[:-1], -1)

    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
    ) -> CoveBiLMOutput:
        """
        input_ids / inputs_embeds, attention_mask, token_type_ids: as `CoveModel.forward` (right-padded rows).
        labels: (B, T) token ids in `[0, vocab_size)`, -100 = not predicted (usually `input_ids`); the forward LM
        predicts `labels[:, t + 1]` from the state at t, the backward LM `labels[:, t - 1]`; padding is never a
        target. return_dict=False: `to_tuple()`. Any other keyword argument is a TypeError.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        encoded = self.cove(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids,
                            inputs_embeds=inputs_embeds, output_hidden_states=True, return_dict=True)
        hidden = self.config.hidden_size
        top = encoded.hidden_states[-1]  # (B, T, 2H) = [forward; backward], zero at padding
        forward_state, backward_state = top[..., :hidden], top[..., hidden:]
        losses = {} if labels is None else self.direction_losses(forward_state, backward_state, labels,
                                                                encoded.attention_mask)
        output = CoveBiLMOutput(**losses, forward_hidden_state=forward_state, backward_hidden_state=backward_state,
                                hidden_states=encoded.hidden_states if output_hidden_states else None)
        return output if return_dict else output.to_tuple()

    def direction_losses(self, forward_state: torch.Tensor, backward_state: torch.Tensor, labels: torch.Tensor,
                         attention_mask: torch.Tensor) -> dict:
        """`CoveBiLMOutput`'s loss fields: each direction's NLL sum, token count and mean, and their mean."""
        self.check_labels(labels, attention_mask)
        real = attention_mask.bool()
        targets = labels.masked_fill(~real, -100)  # padding is never predicted, nor does it predict
        losses = {}
        for direction, states, shifted, predicts in (
                ("forward", forward_state[:, :-1], targets[:, 1:], real[:, :-1]),
                ("backward", backward_state[:, 1:], targets[:, :-1], real[:, 1:])):
            valid = (shifted != -100) & predicts
            picked = self.output_layer(direction)(self.dropout(states[valid]), shifted[valid])
            nll_sum, count = -picked.output.sum(), valid.sum()
            losses.update({f"{direction}_nll_sum": nll_sum, f"{direction}_num_tokens": count,
                           f"{direction}_loss": nll_sum / count.clamp(min=1)})
        losses["loss"] = (losses["forward_loss"] + losses["backward_loss"]) / 2
        return losses

    def check_labels(self, labels: torch.Tensor, attention_mask: torch.Tensor):
        """ValueError/TypeError naming what is wrong with `labels`: shape, dtype, ids out of range."""
        if not isinstance(labels, torch.Tensor) or labels.shape != attention_mask.shape:
            shape = tuple(labels.shape) if isinstance(labels, torch.Tensor) else type(labels).__name__
            raise ValueError(f"labels must have the inputs' shape {tuple(attention_mask.shape)}, got {shape}")
        if labels.dtype not in (torch.long, torch.int):
            raise TypeError(f"labels must be integer token ids, got dtype {labels.dtype}")
        bad = (labels != -100) & ((labels < 0) | (labels >= self.config.vocab_size))
        if bool(bad.any()):
            raise ValueError(f"labels must be token ids in [0, {self.config.vocab_size}) or -100, got "
                             f"{int(labels[bad][0])}")
