"""The attentional MT model used to pretrain CoVe (McCann et al. 2017, §2, eqs. 2–4).

`CoveForMachineTranslation` = the CoVe encoder (`self.cove`, a `CoveModel`: fixed word vectors + MT-LSTM) and an
attentional LSTM decoder:

- eq. 2: h_t^dec = LSTM([z_{t-1}; h~_{t-1}], h_{t-1}^dec)        2-layer LSTM with input feeding
- eq. 3: α_t = softmax(H (W1 h_t^dec + b1))                       Luong "general" attention, padding masked
- eq. 4: h~_t = tanh(W2 [Hᵀα_t; h_t^dec] + b2)                   context-adjusted state (b1, b2 only with
                                                                    `config.attention_bias`; the 2017 code had none)
- output: p(ŵ_t | ...) = softmax(W_out h~_t + b_out)

Eq. 4 is written as the paper's prose, Luong et al. and OpenNMT-py compute it; the typeset equation places the
bracket differently (docs/deviations.md).

The decoder starts from the encoder's final (h, c) of each layer (both directions concatenated, 600-d) and from
h~_0 = 0. Dropout (`config.decoder_dropout`, paper 0.2) is applied to the target embeddings, between the decoder
LSTM layers and to h~_t (which is also what is fed back as input feed, as in OpenNMT-py).

Because the encoder is held as `self.cove`, the weights cross-load: `AutoModel.from_pretrained(mt_checkpoint)` gives
the CoVe encoder alone (the decoder weights are reported as unused).

Tokenizers: the source side uses the CoVe tokenizer (`tokenization_cove.build_cove_tokenizer`, the encoder's
vocabulary); the target side is a second word-level tokenizer built with `add_eos=True`, saved with the checkpoint in
the subfolder `target_tokenizer/` (load it with `load_target_tokenizer(path)`).

Generation (`generate()`, greedy and beam search with length normalisation) goes through `GenerationMixin`: the
recurrent decoder state is the output field and `forward` argument `cache = (h (B, L, H), c (B, L, H),
input_feed (B, H))` (transformers' name for the decoding state since 5.24; `past_key_values`, its older name, is the
field on older releases and is accepted by `forward` as well), all batch-first so that beam search can reorder it with
`_reorder_cache`. Each generation step runs the decoder over the newest token only. By default a translation has at
most `config.max_source_length` tokens + `</s>` (`generation_config.max_length = max_source_length + 2`, counting the
leading `<s>`); `max_length` or `max_new_tokens` passed to `generate()` override it. Finished rows of a batch are
padded with `pad_token_id` after their `</s>` (greedy and beam search alike). With `output_attentions=True,
return_dict_in_generate=True`, `cross_attentions` holds the attention weights α_t of every generated step.
"""

from dataclasses import dataclass, fields
from typing import Optional

import torch
from torch import nn
from transformers import GenerationMixin
from transformers.modeling_outputs import Seq2SeqLMOutput

from .configuration_cove import CoveConfig
from .embeddings import HostRead, lengths_from_mask, require, require_token_ids, rows_where
from .modeling_cove import CoveModel, CoveModelOutput, CovePreTrainedModel

TARGET_TOKENIZER_SUBFOLDER = "target_tokenizer"

# transformers >= 5.24 names the decoding state `cache` (in outputs and in `forward`), earlier 5.x `past_key_values`:
# the output field generate() reads the state from and feeds back to `prepare_inputs_for_generation`
CACHE_FIELD = "cache" if "cache" in {f.name for f in fields(Seq2SeqLMOutput)} else "past_key_values"


@dataclass
class CoveSeq2SeqLMOutput(Seq2SeqLMOutput):
    """`Seq2SeqLMOutput` of `CoveForMachineTranslation`.

    Args:
        loss (`torch.FloatTensor`, returned with `labels`):
            With `config.mt_loss_reduction="token_mean"` (default) the mean cross-entropy over the counted target
            tokens (`nll_sum / num_tokens`, as every transformers Seq2SeqLM); with `"sentence"` the paper's training
            loss, `nll_sum / batch size`.
        logits (`torch.FloatTensor` of shape `(batch, target_time, target_vocab_size)`): scores before softmax.
        cache (`tuple`, returned with `use_cache=True`; named `past_key_values` on transformers < 5.24):
            Decoder state after the last step: `(h (B, L, H), c (B, L, H), input_feed h~ (B, H))`.
        decoder_hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`):
            `decoder_num_layers + 1` tensors of shape `(batch, target_time, decoder_hidden_size)`: the output h_t of
            each decoder LSTM layer (eq. 2) at every step, then the attentional state h~_t (eq. 4, before dropout)
            that the output layer reads.
        cross_attentions (`tuple(torch.FloatTensor)`, returned with `output_attentions=True`):
            One tensor `(batch, 1, target_time, source_time)`: the attention weights α_t of eq. 3 (the decoder has
            no self-attention: `decoder_attentions` stays None).
        encoder_last_hidden_state (`torch.FloatTensor` of shape `(batch, source_time, config.output_size)`):
            The encoder's `last_hidden_state`.
        encoder_hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`):
            The encoder's `hidden_states` (see `CoveModelOutput`).
        nll_sum (`torch.FloatTensor`, returned with `labels`): summed target-token NLL (a scalar).
        num_tokens (`torch.LongTensor`, returned with `labels`): number of target tokens counted in `nll_sum`.
            Per-token NLL = `nll_sum / num_tokens`; perplexity = `exp(nll_sum / num_tokens)`.
    """

    nll_sum: Optional[torch.FloatTensor] = None
    num_tokens: Optional[torch.LongTensor] = None


class CoveAttention(nn.Module):
    """Luong "general" attention (eq. 3) and the attentional hidden state h~ (eq. 4)."""

    def __init__(self, config: CoveConfig):
        super().__init__()
        context_size = config.encoder_output_size  # H: MT-LSTM top layer, 2 * hidden_size
        hidden = config.decoder_hidden_size
        self.linear_in = nn.Linear(hidden, context_size, bias=config.attention_bias)  # W1 (b1)
        self.linear_out = nn.Linear(context_size + hidden, hidden, bias=config.attention_bias)  # W2 (b2)

    def forward(self, query: torch.Tensor, context: torch.Tensor, context_mask: torch.Tensor):
        """query h_t^dec: (B, H); context H: (B, S, C); context_mask: (B, S) bool, True = source token.

        Returns h~_t (B, H) and α_t (B, S)."""
        # eq. 3: α_t = softmax(H (W1 h_t + b1)) over the source tokens (padding gets weight exactly 0)
        scores = torch.bmm(context, self.linear_in(query).unsqueeze(2)).squeeze(2)  # (B, S)
        scores = scores.masked_fill(~context_mask, float("-inf"))
        alpha = torch.softmax(scores, dim=-1)  # (B, S)
        attended = torch.bmm(alpha.unsqueeze(1), context).squeeze(1)  # Hᵀα_t, (B, C)
        # eq. 4: h~_t = tanh(W2 [Hᵀα_t; h_t] + b2)
        h_tilde = torch.tanh(self.linear_out(torch.cat([attended, query], dim=-1)))  # (B, H)
        return h_tilde, alpha


class CoveStackedLSTM(nn.Module):
    """A stack of `nn.LSTMCell`s run one time step at a time (input feeding needs h~_{t-1} before step t), with
    dropout between the layers. Per step this is ~2x faster on CPU than calling a multi-layer `nn.LSTM` on a
    length-1 sequence."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int, dropout: float):
        super().__init__()
        self.layers = nn.ModuleList(
            [nn.LSTMCell(input_size if i == 0 else hidden_size, hidden_size) for i in range(num_layers)]
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, inputs: torch.Tensor, h: torch.Tensor, c: torch.Tensor):
        """inputs: (B, C); h, c: (B, L, H). Returns the top layer's output (B, H) and the new h, c (B, L, H) (the
        new h holds every layer's output of this step)."""
        new_h, new_c = [], []
        for i, layer in enumerate(self.layers):
            h_i, c_i = layer(inputs, (h[:, i], c[:, i]))
            new_h.append(h_i)
            new_c.append(c_i)
            inputs = self.dropout(h_i) if i + 1 < len(self.layers) else h_i
        return inputs, torch.stack(new_h, dim=1), torch.stack(new_c, dim=1)


class CoveDecoder(nn.Module):
    """The 2-layer input-feeding LSTM decoder (eq. 2) with attention (eqs. 3–4); returns h~ for every step."""

    def __init__(self, config: CoveConfig):
        super().__init__()
        self.hidden_size = config.decoder_hidden_size
        self.embed_tokens = nn.Embedding(
            config.target_vocab_size, config.decoder_embedding_dim, padding_idx=config.pad_token_id
        )
        self.dropout = nn.Dropout(config.decoder_dropout)
        self.rnn = CoveStackedLSTM(
            config.decoder_embedding_dim + config.decoder_hidden_size,  # [z_{t-1}; h~_{t-1}] (input feeding)
            config.decoder_hidden_size,
            num_layers=config.decoder_num_layers,
            dropout=config.decoder_dropout,  # between layers
        )
        self.attention = CoveAttention(config)

    def forward(
        self,
        decoder_input_ids: Optional[torch.Tensor],
        context: torch.Tensor,
        context_mask: torch.Tensor,
        state: tuple,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        inputs_embeds: Optional[torch.Tensor] = None,
    ):
        """decoder_input_ids: (B, T), or None with `inputs_embeds` (B, T, E), the target embeddings z themselves;
        context: (B, S, C); context_mask: (B, S) bool; state: (h (B, L, H), c (B, L, H), input_feed (B, H)).

        Returns h~ for all steps (B, T, H) (after dropout), the new state, α (B, T, S) or None, and the hidden states
        or None: each layer's h_t (B, T, H) then h~ before dropout (B, T, H)."""
        h, c, input_feed = state  # (B, L, H), (B, L, H), (B, H)
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(decoder_input_ids)
        embedded = self.dropout(inputs_embeds)  # z, (B, T, E)
        outputs, alphas, layer_states, h_tildes = [], [], [], []
        for t in range(embedded.shape[1]):
            # eq. 2 with input feeding: h_t^dec = LSTM([z_{t-1}; h~_{t-1}], h_{t-1}^dec)
            rnn_input = torch.cat([embedded[:, t], input_feed], dim=-1)  # (B, E + H)
            rnn_output, h, c = self.rnn(rnn_input, h, c)  # (B, H)
            h_tilde, alpha = self.attention(rnn_output, context, context_mask)  # eqs. 3–4
            input_feed = self.dropout(h_tilde)  # dropout on the output; the dropped h~ is also fed back
            outputs.append(input_feed)
            if output_attentions:
                alphas.append(alpha)
            if output_hidden_states:
                layer_states.append(h)  # every layer's h_t, (B, L, H)
                h_tildes.append(h_tilde)
        new_state = (h, c, input_feed)
        attentions = torch.stack(alphas, dim=1) if output_attentions else None
        hidden_states = None
        if output_hidden_states:
            per_layer = torch.stack(layer_states, dim=2)  # (B, L, T, H)
            hidden_states = tuple(per_layer.unbind(1)) + (torch.stack(h_tildes, dim=1),)
        return torch.stack(outputs, dim=1), new_state, attentions, hidden_states


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Teacher forcing inputs: [<s>, w_1, ..., w_{T-1}] from labels [w_1, ..., w_T] (-100 -> pad)."""
    shifted = labels.new_full(labels.shape, pad_token_id)
    shifted[:, 1:] = labels[:, :-1]
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill(shifted == -100, pad_token_id)


class CoveForMachineTranslation(CovePreTrainedModel, GenerationMixin):
    """CoVe MT model: `self.cove` (the encoder that becomes CoVe) + the attentional decoder of eqs. 2–4.

    Inputs: source `input_ids`/`attention_mask` (right-padded, from the CoVe tokenizer); `labels` (B, T) target ids
    ending in `</s>` (from the target tokenizer; -100 or pad = ignored); `decoder_input_ids` default to `labels`
    shifted right behind `<s>`. The `loss` is the mean token cross-entropy, or the paper's summed token NLL / batch
    size with `config.mt_loss_reduction="sentence"`; `nll_sum` and `num_tokens` come with either (`cove-train-mt`
    trains on `nll_sum` / global batch size, the paper's loss across processes).
    """

    trains_encoder = True

    def __init__(self, config: CoveConfig):
        if config.decoder_num_layers != config.num_hidden_layers:
            raise ValueError(
                f"decoder_num_layers ({config.decoder_num_layers}) must equal num_hidden_layers "
                f"({config.num_hidden_layers}): each decoder layer starts from the final state of one encoder layer"
            )
        if config.decoder_hidden_size != config.encoder_output_size:
            raise ValueError(
                f"decoder_hidden_size ({config.decoder_hidden_size}) must equal 2 * hidden_size "
                f"({config.encoder_output_size}): the decoder starts from the encoder's concatenated final states"
            )
        config.is_encoder_decoder = True
        config.tie_word_embeddings = False
        config.output_final_states = True  # generate() calls get_encoder() with the config's default
        super().__init__(config)
        self.cove = CoveModel(config)
        self.decoder = CoveDecoder(config)
        self.lm_head = nn.Linear(config.decoder_hidden_size, config.target_vocab_size)  # W_out, b_out
        self.post_init()
        self.freeze_frozen_parts()
        if self.generation_config is not None:
            self.generation_config.decoder_start_token_id = config.decoder_start_token_id
            self.generation_config.bos_token_id = config.bos_token_id
            self.generation_config.eos_token_id = config.eos_token_id
            self.generation_config.pad_token_id = config.pad_token_id
            self.generation_config.length_penalty = config.length_penalty_alpha
            # <s> + up to max_source_length (75) tokens + </s>. Set as max_length, not max_new_tokens: transformers
            # lets a stored max_new_tokens win over a max_length passed to generate().
            self.generation_config.max_length = config.max_source_length + 2

    @torch.no_grad()
    def _init_weights(self, module):
        """The recipe's U(-r, r) (docs/paper.md §2), the random target embeddings included (pad row zero); linear
        biases start at zero (docs/deviations.md)."""
        if module is getattr(getattr(self, "decoder", None), "embed_tokens", None):
            r = self.config.initializer_range
            nn.init.uniform_(module.weight, -r, r)
            module.weight[self.config.pad_token_id].zero_()
        else:
            super()._init_weights(module)

    # --- accessors used by transformers / GenerationMixin ---
    def get_encoder(self, modality: Optional[str] = None):
        """The text encoder `self.cove` for `modality=None`; for another modality ("image", "video", "audio") what
        `PreTrainedModel.get_encoder` gives a model without such an encoder (the model itself), and its `ValueError`
        for an unknown modality."""
        if modality is None:
            return self.cove
        return super().get_encoder(modality=modality)

    def get_decoder(self):
        return self.decoder

    def get_input_embeddings(self):
        return self.cove.get_input_embeddings()

    def get_output_embeddings(self):
        return self.lm_head

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        return False  # the state is (h, c, input_feed), not attention keys/values

    @staticmethod
    def _reorder_cache(cache, beam_idx):
        return tuple(state.index_select(0, beam_idx.to(state.device)) for state in cache)

    def generate(self, inputs=None, generation_config=None, **kwargs):
        """`GenerationMixin.generate`, where a length passed here replaces the stored default length, and every row's
        tokens after its first `</s>` are `pad_token_id`.

        transformers prefers a stored `generation_config.max_new_tokens` (checkpoints saved by earlier versions of
        this model have one) over a `max_length` passed to `generate()`, and warns when a `max_new_tokens` passed to
        `generate()` meets the stored `max_length`. Passing only one of the two unsets the other one here.
        transformers' beam search fills finished rows with `pad_token_id or eos_token_id`, i.e. with `</s>` when the
        pad id is 0 (as here): the rows are re-padded with the pad id.
        The sources are checked first (`check_source`), before transformers repeats each row once per beam or
        returned sequence: an error names the caller's batch indices.
        """
        source_mask = self.generation_source_mask(inputs, kwargs)
        if source_mask is not None:
            self.check_source(source_mask)
        if kwargs.get("max_length") is not None and kwargs.get("max_new_tokens") is None:
            kwargs["max_new_tokens"] = None
        elif kwargs.get("max_new_tokens") is not None and kwargs.get("max_length") is None:
            kwargs["max_length"] = None
        output = super().generate(inputs, generation_config=generation_config, **kwargs)
        config = generation_config if generation_config is not None else self.generation_config
        pad_token_id = kwargs.get("pad_token_id", config.pad_token_id)
        eos_token_id = kwargs.get("eos_token_id", config.eos_token_id)
        prompt = kwargs.get("decoder_input_ids")
        prompt_length = prompt.shape[1] if isinstance(prompt, torch.Tensor) else 1  # <s> by default
        sequences = output if isinstance(output, torch.Tensor) else output.sequences
        if pad_token_id is not None and eos_token_id is not None:
            self.pad_after_eos(sequences[:, prompt_length:], pad_token_id, eos_token_id)
        return output

    def generation_source_mask(self, inputs: Optional[torch.Tensor], kwargs: dict) -> Optional[torch.Tensor]:
        """The (B, S) mask of the sources `generate(inputs, **kwargs)` translates, in the caller's rows: the
        `attention_mask` given, else that of `encoder_outputs`, else all tokens of `input_ids` / `inputs_embeds`
        (checked as the encoder checks them); None when there is none of these."""
        attention_mask = kwargs.get("attention_mask")
        encoder_outputs = kwargs.get("encoder_outputs")
        if encoder_outputs is not None:
            return attention_mask if attention_mask is not None else getattr(encoder_outputs, "attention_mask", None)
        input_ids = inputs if inputs is not None else kwargs.get("input_ids")
        if isinstance(input_ids, torch.Tensor):
            return self.cove.check_inputs(input_ids, attention_mask)
        if isinstance(kwargs.get("inputs_embeds"), torch.Tensor):
            return self.cove.check_inputs_embeds(kwargs["inputs_embeds"], attention_mask)
        return attention_mask

    @staticmethod
    def pad_after_eos(sequences: torch.Tensor, pad_token_id: int, eos_token_id) -> torch.Tensor:
        """In place: every id after the first of `eos_token_id` (an id or a list of ids) in each row of `sequences`
        (B, T) becomes `pad_token_id`. Returns `sequences`."""
        eos = torch.as_tensor(eos_token_id, device=sequences.device).reshape(-1)
        is_eos = torch.isin(sequences, eos).long()  # (B, T)
        after_eos = (is_eos.cumsum(dim=1) - is_eos) > 0  # an </s> came earlier in the row
        return sequences.masked_fill_(after_eos, pad_token_id)

    def prepare_inputs_for_generation(
        self,
        decoder_input_ids,
        cache=None,
        past_key_values=None,
        attention_mask=None,
        encoder_outputs=None,
        use_cache=None,
        output_attentions=None,
        output_hidden_states=None,
        **kwargs,
    ):
        """The inputs of one `forward` call during `generate()`. generate() hands the decoder state back as `cache`
        (transformers >= 5.24) or `past_key_values` (earlier); with a state, the decoder reads only the newest token.
        `output_attentions` / `output_hidden_states` are passed on (they make `generate(...,
        return_dict_in_generate=True)` return `cross_attentions` / hidden states). Other generation bookkeeping
        (`next_sequence_length`, `is_first_iteration`, ...) is not needed by this model."""
        state = cache if cache is not None else past_key_values
        if state is not None:
            decoder_input_ids = decoder_input_ids[:, -1:]
        return {
            "input_ids": None,
            "attention_mask": attention_mask,
            "encoder_outputs": encoder_outputs,
            "decoder_input_ids": decoder_input_ids,
            "cache": state,
            "use_cache": use_cache if use_cache is not None else True,
            "output_attentions": output_attentions,
            "output_hidden_states": output_hidden_states,
        }

    # --- helpers ---
    def context_from_encoder(self, encoder_last_hidden_state: torch.Tensor) -> torch.Tensor:
        """H of eq. 3: the MT-LSTM's top layer (B, S, 2h), wherever `config` places it in `last_hidden_state`
        (which may also hold the word vectors, the first layer or char n-grams)."""
        layout = self.config.feature_layout("encoder")
        if encoder_last_hidden_state.shape[-1] != layout.size:
            raise ValueError(
                f"encoder output has width {encoder_last_hidden_state.shape[-1]}, config.output_size is {layout.size}"
            )
        return layout.select(encoder_last_hidden_state, "top_layer")

    def check_source(self, attention_mask: torch.Tensor) -> torch.Tensor:
        """Clear errors for empty sources and sources longer than `config.max_source_length` (`require`s: inside a
        `HostRead` read with the forward's other checks; while `torch.export` traces the model, runtime assertions
        in the graph). Returns the sources' lengths (B,)."""
        lengths = lengths_from_mask(attention_mask)
        limit = self.config.max_source_length
        summary = f"source sentences must have 1 to max_source_length={limit} tokens"

        def too_long():
            rows = rows_where(lengths > limit)
            return (f"source sentence(s) at batch index {rows} have {[int(lengths[i]) for i in rows]} tokens, more "
                    f"than config.max_source_length={limit}; shorten them (e.g. tokenizer truncation=True, "
                    f"max_length={limit}) or raise max_source_length")

        require(lengths > 0, summary, lambda: f"source sentence(s) at batch index {rows_where(lengths == 0)} are "
                "empty: there is nothing to translate")
        require(lengths <= limit, summary, too_long)
        return lengths

    def check_target_ids(self, ids: torch.Tensor, name: str, allow_ignore_index: bool = False):
        """Clear errors for target ids outside the target vocabulary. -100 (the loss's ignore index) is accepted
        only with `allow_ignore_index=True` (labels): decoder inputs are embedded, so they must be real ids. While
        `torch.export` traces the model, a runtime assertion in the graph instead (no Python branch on values)."""
        vocab = self.config.target_vocab_size
        valid = ((ids >= 0) & (ids < vocab)) | ((ids == -100) & allow_ignore_index)
        if not allow_ignore_index and not torch.compiler.is_exporting():  # (exporting: `valid` refuses -100 too)
            require(~(ids == -100).any(),
                    f"{name} contain -100: -100 marks ignored positions in labels only; decoder inputs must be target "
                    f"token ids (pad with pad_token_id={self.config.pad_token_id}, or pass labels and let the model "
                    f"build decoder_input_ids)")
        require(valid.all(), f"{name} contain ids outside [0, {vocab}) (-100 only in labels)",
                lambda: f"{name} contain ids outside [0, {vocab}) (e.g. {ids[~valid][:5].tolist()}): the target "
                f"tokenizer does not match this checkpoint (target_vocab_size={vocab})")

    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        decoder_input_ids: Optional[torch.Tensor] = None,
        decoder_attention_mask: Optional[torch.Tensor] = None,
        encoder_outputs: Optional[CoveModelOutput] = None,
        cache: Optional[tuple] = None,
        labels: Optional[torch.Tensor] = None,
        use_cache: Optional[bool] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        past_key_values: Optional[tuple] = None,
        decoder_inputs_embeds: Optional[torch.Tensor] = None,
    ) -> CoveSeq2SeqLMOutput:
        """
        input_ids / attention_mask: (B, S) source, right-padded. labels: (B, T) target ids (-100 / pad ignored).
        inputs_embeds: (B, S, config.word_vector_dim) source word vectors instead of `input_ids` (see
        `CoveModel.forward`); exactly one of the two unless `encoder_outputs` is given.
        decoder_input_ids: (B, T) target ids (no -100), the shape of `labels` when both are given; default
        `shift_tokens_right(labels)`.
        decoder_inputs_embeds: (B, T, config.decoder_embedding_dim) target embeddings instead of `decoder_input_ids`
        (not both: a ValueError), cast to the model's dtype: the same as the ids whose rows
        `model.get_decoder().embed_tokens(decoder_input_ids)` are these.
        decoder_attention_mask: accepted and not needed (padded target steps only influence later steps of the same
        row; their loss is masked by labels).
        encoder_outputs: a `CoveModelOutput` to reuse (generation). cache: decoder state to continue from (the
        `cache` of an earlier call); `past_key_values` is its older name (give one of the two).
        output_hidden_states: also return the encoder's and the decoder's hidden states (see `CoveSeq2SeqLMOutput`).
        output_attentions: also return the attention weights α of eq. 3 as `cross_attentions`.
        return_dict=False returns `CoveSeq2SeqLMOutput.to_tuple()` (its fields that are not None, in order).
        An unknown keyword argument is a `TypeError` naming it.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        use_cache = use_cache if use_cache is not None else not self.training
        output_attentions = bool(
            output_attentions if output_attentions is not None else self.config.output_attentions
        )
        output_hidden_states = bool(
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        if past_key_values is not None:
            if cache is not None:
                raise ValueError("give the decoder state as cache or as past_key_values (its older name), not both")
            cache = past_key_values

        attention_mask, decoder_input_ids, decoder_inputs_embeds, lengths = self.checked_inputs(
            input_ids, inputs_embeds, attention_mask, encoder_outputs, cache, labels, decoder_input_ids,
            decoder_inputs_embeds)
        if encoder_outputs is None:
            encoder_outputs = self.cove.forward_checked(  # the decoder starts from the final states
                input_ids, attention_mask, lengths, output_hidden_states, True, True, inputs_embeds=inputs_embeds)
        context = self.context_from_encoder(encoder_outputs.last_hidden_state)  # H, (B, S, 2h)
        context_mask = attention_mask.bool()  # (B, S)
        state = self.decoder_state(cache, encoder_outputs, context)
        h_tilde, new_state, alphas, decoder_hidden_states = self.decoder(
            decoder_input_ids, context, context_mask, state,
            output_attentions=output_attentions, output_hidden_states=output_hidden_states,
            inputs_embeds=decoder_inputs_embeds,
        )
        logits = self.lm_head(h_tilde)  # softmax(W_out h~_t + b_out) before the softmax, (B, T, V)
        loss, nll_sum, num_tokens = self.target_loss(logits, labels)
        output = CoveSeq2SeqLMOutput(
            loss=loss,
            logits=logits,
            decoder_hidden_states=decoder_hidden_states,
            cross_attentions=(alphas.unsqueeze(1),) if output_attentions else None,
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states if output_hidden_states else None,
            nll_sum=nll_sum,
            num_tokens=num_tokens,
            **{CACHE_FIELD: new_state if use_cache else None},
        )
        return output if return_dict else output.to_tuple()

    def checked_inputs(self, input_ids, inputs_embeds, attention_mask, encoder_outputs, cache, labels,
                       decoder_input_ids, decoder_inputs_embeds) -> tuple:
        """`forward`'s checks, read from the device at once with the sources' lengths when the encoder is to run
        (`HostRead`). Returns (the (B, S) source mask, the decoder inputs as `checked_decoder_inputs` gives them,
        the sources' lengths on the host or None)."""
        with HostRead() as host:
            attention_mask, lengths = self.checked_source(input_ids, inputs_embeds, attention_mask, encoder_outputs)
            if cache is None and lengths is None:
                self.check_source(attention_mask)
            batch = (attention_mask if encoder_outputs is None else encoder_outputs.last_hidden_state).shape[0]
            decoder_inputs = self.checked_decoder_inputs(labels, decoder_input_ids, decoder_inputs_embeds, batch)
            if lengths is not None:
                host.read(lengths)
        return (attention_mask, *decoder_inputs, host.values[0] if lengths is not None else None)

    def checked_source(self, input_ids, inputs_embeds, attention_mask, encoder_outputs) -> tuple:
        """The source checked (ids or word vectors, its mask, `check_source`) when the encoder is to run on it, else
        the given `encoder_outputs` checked. Returns ((B, S) mask, the sources' lengths (B,) or None when
        `encoder_outputs` are given)."""
        if encoder_outputs is None:
            if (input_ids is None) == (inputs_embeds is None):
                raise ValueError(
                    "CoveForMachineTranslation needs exactly one of input_ids and inputs_embeds (or encoder_outputs), "
                    "got " + ("both" if input_ids is not None else "neither")
                )
            if inputs_embeds is not None:
                attention_mask = self.cove.check_inputs_embeds(inputs_embeds, attention_mask)
            else:
                attention_mask = self.cove.check_inputs(input_ids, attention_mask)
            return attention_mask, self.check_source(attention_mask)
        if not isinstance(encoder_outputs, CoveModelOutput):
            raise TypeError("encoder_outputs must be the CoveModelOutput returned by model.get_encoder()(...)")
        return (encoder_outputs.attention_mask if attention_mask is None else attention_mask), None

    def checked_decoder_inputs(self, labels: Optional[torch.Tensor], decoder_input_ids: Optional[torch.Tensor],
                               decoder_inputs_embeds: Optional[torch.Tensor], batch: int) -> tuple:
        """The decoder inputs, checked against the batch and `labels`: `(decoder_input_ids (B, T), None)`, the ids
        given or `labels` shifted right, or `(None, decoder_inputs_embeds (B, T, E))` in the model's dtype."""
        if decoder_input_ids is not None and decoder_inputs_embeds is not None:
            raise ValueError("CoveForMachineTranslation takes decoder_input_ids or decoder_inputs_embeds, not both")
        if labels is not None:
            require_token_ids(labels, "labels")
            if labels.dim() != 2 or labels.shape[0] != batch:
                raise ValueError(f"labels must have shape (batch={batch}, time), got {tuple(labels.shape)}")
            self.check_target_ids(labels, "labels", allow_ignore_index=True)
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = shift_tokens_right(
                    labels, self.config.pad_token_id, self.config.decoder_start_token_id
                )
        if decoder_inputs_embeds is not None:
            self.check_decoder_inputs_embeds(decoder_inputs_embeds, batch)
            name, steps = "decoder_inputs_embeds", decoder_inputs_embeds.shape[:2]
            decoder_inputs_embeds = decoder_inputs_embeds.to(self.decoder.embed_tokens.weight.dtype)
        elif decoder_input_ids is None:
            raise ValueError("CoveForMachineTranslation needs labels or decoder_input_ids (or decoder_inputs_embeds)")
        else:
            require_token_ids(decoder_input_ids, "decoder_input_ids")
            if decoder_input_ids.dim() != 2 or decoder_input_ids.shape[0] != batch:
                raise ValueError(
                    f"decoder_input_ids must have shape (batch={batch}, time), got "
                    f"{tuple(decoder_input_ids.shape)}"
                )
            self.check_target_ids(decoder_input_ids, "decoder_input_ids")
            name, steps = "decoder_input_ids", decoder_input_ids.shape
        if labels is not None and labels.shape != steps:
            raise ValueError(
                f"labels {tuple(labels.shape)} and {name} {tuple(steps)} must have the same shape: "
                f"labels[:, t] is the target of decoder step t (omit {name} to use labels shifted right)"
            )
        return decoder_input_ids, decoder_inputs_embeds

    def check_decoder_inputs_embeds(self, decoder_inputs_embeds: torch.Tensor, batch: int):
        """Clear errors for target embeddings of the wrong type, shape or device."""
        if not isinstance(decoder_inputs_embeds, torch.Tensor) or not decoder_inputs_embeds.is_floating_point():
            raise TypeError("decoder_inputs_embeds must be a floating-point tensor of target embeddings, got "
                            f"{getattr(decoder_inputs_embeds, 'dtype', type(decoder_inputs_embeds).__name__)}")
        width = self.config.decoder_embedding_dim
        shape = tuple(decoder_inputs_embeds.shape)
        if len(shape) != 3 or shape[0] != batch or shape[2] != width:
            raise ValueError(f"decoder_inputs_embeds must have shape (batch={batch}, time, decoder_embedding_dim="
                             f"{width}), got {shape}")
        device = self.decoder.embed_tokens.weight.device
        if decoder_inputs_embeds.device != device:
            raise ValueError(f"decoder_inputs_embeds is on {decoder_inputs_embeds.device}, the model on {device}: "
                             "move one of them")

    def decoder_state(self, cache, encoder_outputs: CoveModelOutput, context: torch.Tensor) -> tuple:
        """The decoder's (h, c, input feed) to start from: the `cache` of an earlier call, else the encoder's."""
        if cache is None and encoder_outputs.final_hidden_state is None:
            raise ValueError("encoder_outputs hold no final states: run the encoder with output_final_states=True")
        if cache is None:
            # decoder init: encoder final (h, c) per layer (B, L, 600); first input feed h~_0 = 0
            state = (
                encoder_outputs.final_hidden_state,
                encoder_outputs.final_cell_state,
                context.new_zeros(context.shape[0], self.config.decoder_hidden_size),
            )
        else:
            if not isinstance(cache, (tuple, list)) or len(cache) != 3:
                raise TypeError(
                    "cache must be the (h, c, input_feed) tuple returned as `cache` by an earlier call, got "
                    f"{type(cache).__name__}"
                )
            state = tuple(cache)
        return state

    def target_loss(self, logits: torch.Tensor, labels: Optional[torch.Tensor]) -> tuple:
        """(loss, summed token NLL, number of target tokens) of `logits` (B, T, V) against `labels` (B, T); Nones
        without labels."""
        loss = nll_sum = num_tokens = None
        if labels is not None:
            targets = labels.long().masked_fill(labels == self.config.pad_token_id, -100)  # (int32 ids too)
            nll_sum = nn.functional.cross_entropy(
                logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), ignore_index=-100, reduction="sum"
            )
            num_tokens = (targets != -100).sum()
            if self.config.mt_loss_reduction == "sentence":
                loss = nll_sum / labels.shape[0]  # the paper's: summed token NLL divided by the batch size
            else:
                loss = nll_sum / num_tokens  # mean token cross-entropy (NaN when no token counts, as F.cross_entropy)
        return loss, nll_sum, num_tokens

    # --- convenience for users and scripts ---
    def check_tokenizers(self, source_tokenizer=None, target_tokenizer=None):
        """Raise if a tokenizer's vocabulary size does not match this checkpoint's config."""
        if source_tokenizer is not None and len(source_tokenizer) != self.config.vocab_size:
            raise ValueError(
                f"source tokenizer has {len(source_tokenizer)} tokens but the checkpoint's encoder has "
                f"vocab_size={self.config.vocab_size}: tokenizer and checkpoint do not match"
            )
        if target_tokenizer is not None and len(target_tokenizer) != self.config.target_vocab_size:
            raise ValueError(
                f"target tokenizer has {len(target_tokenizer)} tokens but the checkpoint has "
                f"target_vocab_size={self.config.target_vocab_size}: tokenizer and checkpoint do not match "
                f"(load the one saved in '{TARGET_TOKENIZER_SUBFOLDER}/')"
            )

    @torch.no_grad()
    def translate(
        self,
        sentences: list,
        source_tokenizer,
        target_tokenizer,
        num_beams: int = 1,
        batch_size: int = 64,
        max_new_tokens: Optional[int] = None,
        skip_special_tokens: bool = True,
    ) -> list:
        """Translate raw source sentences; returns the target token strings joined by spaces (lowercased Moses-style
        tokens, as the model was trained). Empty or too long sentences raise a `ValueError` naming them."""
        self.check_tokenizers(source_tokenizer, target_tokenizer)
        max_new_tokens = max_new_tokens or self.config.max_source_length + 1
        results = []
        for start in range(0, len(sentences), batch_size):
            chunk = sentences[start : start + batch_size]
            enc = source_tokenizer(chunk, padding=True, return_tensors="pt", return_token_type_ids=False)
            lengths = enc["attention_mask"].sum(dim=1)
            for i, n in enumerate(lengths.tolist()):
                if n == 0:
                    raise ValueError(f"sentence {start + i} ({chunk[i]!r}) has no tokens: nothing to translate")
                if n > self.config.max_source_length:
                    raise ValueError(
                        f"sentence {start + i} has {n} tokens, more than max_source_length="
                        f"{self.config.max_source_length}"
                    )
            out = self.generate(
                input_ids=enc["input_ids"].to(self.device),
                attention_mask=enc["attention_mask"].to(self.device),
                num_beams=num_beams,
                max_new_tokens=max_new_tokens,
            )
            results += target_tokenizer.batch_decode(out, skip_special_tokens=skip_special_tokens)
        return [" ".join(text.split()) for text in results]


def load_target_tokenizer(path: str, **kwargs):
    """The target-side tokenizer saved with an MT checkpoint (`<path>/target_tokenizer/`)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, subfolder=TARGET_TOKENIZER_SUBFOLDER, **kwargs)


__all__ = [
    "CoveForMachineTranslation",
    "CoveSeq2SeqLMOutput",
    "CoveAttention",
    "CoveDecoder",
    "CoveStackedLSTM",
    "shift_tokens_right",
    "load_target_tokenizer",
    "TARGET_TOKENIZER_SUBFOLDER",
]
