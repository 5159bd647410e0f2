"""CoVe encoder: frozen word vectors + MT-LSTM (McCann et al. 2017, eqs. 1, 5, 6).

Parameter names are chosen so that the released Salesforce state dict (`wmtlstm-*.pth`, the state dict of
`nn.LSTM(300, 300, num_layers=2, bidirectional=True)`) maps onto this model by a plain prefix rename:
`weight_ih_l0` -> `encoder.rnn.weight_ih_l0` (and `cove.encoder.rnn.weight_ih_l0` inside a head).
"""

import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput
from transformers.utils import logging

from . import lstm_kernels  # as a module: its device-type constants are switched at run time (tests, users)
from .lstm_kernels import LSTM_IMPLEMENTATION_CHOICES  # `from .x import` is what the remote-code loader follows
from .configuration_cove import CoveConfig, FeatureLayout
from .embeddings import CoveInputChecks, CoveWordEmbeddings, HostRead, lengths_from_mask, resize_source_vocabulary
from .hub import checkpoint_code, raise_for_unreadable_weights
from .modeling_cove_bilm_encoder import CoveBiLMEncoder
from .tokenization_cove import check_tokenizer_matches

logger = logging.get_logger(__name__)

__all__ = ["assemble_features", "CoveEncoder", "CoveModel", "CoveModelOutput", "CovePreTrainedModel", "encoder_class"]


@dataclass
class CoveModelOutput(BaseModelOutput):
    """`BaseModelOutput` of the CoVe encoder.

    Args:
        last_hidden_state (`torch.FloatTensor` of shape `(batch, time, config.output_size)`):
            Per `config`: `[word vectors]; [layer 1]; layer 2; [char n-grams]`. Zero at padded positions.
        hidden_states (`tuple(torch.FloatTensor)`, returned with `output_hidden_states=True`):
            `(word vectors (B, T, 300), MT-LSTM layer 1 (B, T, 600), MT-LSTM layer 2 (B, T, 600))`.
        final_hidden_state (`torch.FloatTensor` of shape `(batch, num_layers, 2 * hidden_size)`):
            Final `h` of each MT-LSTM layer, forward and backward directions concatenated (decoder init, §2).
        final_cell_state (`torch.FloatTensor` of shape `(batch, num_layers, 2 * hidden_size)`):
            Final `c` of each layer, same layout. Both are None with `output_final_states=False`.
        attention_mask (`torch.LongTensor` of shape `(batch, time)`): the mask the encoder used (1 = token); the
            last entry of `to_tuple()` and of `return_dict=False` (the MT head and the feature pipelines read it).
        attentions: always None: the encoder has no attention maps (`output_attentions=True` is a ValueError).
    """

    final_hidden_state: Optional[torch.FloatTensor] = None
    final_cell_state: Optional[torch.FloatTensor] = None
    attention_mask: Optional[torch.LongTensor] = None


class CoveEncoder(nn.Module):
    """The MT-LSTM (eq. 1): a 2-layer biLSTM, 300 per direction, over the word vectors. `self.rnn` holds exactly the
    released weights.

    `forward` is the reference, as the paper and the original code run it: the rows packed (padding never reaches a
    token), the biLSTM, the layers unpacked; here one layer at a time (`torch.lstm` on the layer's own weights), so
    that layer 1 is at hand (`cove_output="both"`, `hidden_states`) without running anything twice.
    `config.lstm_implementation` hands a call to a faster strategy of `lstm_kernels` with the same results ("auto":
    per device and request, as `lstm_kernels.choose_lstm_implementation` says; docs/lstm_kernels.md).
    Dropout (training only): `config.encoder_dropout` on the input of every layer after the first, and with
    `config.encoder_dropout_all_layers` (the paper's form) on the word vectors and the top layer's output too.
    """

    def __init__(self, config: CoveConfig):
        super().__init__()
        self.config = config  # read at every call: `set_lstm_implementation` may change the strategy
        self.num_layers = config.num_hidden_layers
        self.hidden_size = config.hidden_size
        self.dropout = config.encoder_dropout
        self.dropout_all_layers = config.encoder_dropout_all_layers
        self.rnn = nn.LSTM(
            config.word_vector_dim,
            config.hidden_size,
            num_layers=config.num_hidden_layers,
            bidirectional=True,
            batch_first=True,
        )
        self._autocast_cache = None  # (layer, dtype) -> cast weights inside `lstm_kernels.weights_cast_once`

    def forward(self, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool = True,
                top_only: bool = False, unpacked: Optional[bool] = None, out: Optional[torch.Tensor] = None):
        """vectors: (B, T, 300) word vectors, zero at padding; lengths: (B,) tokens per row (>= 1), on the host.

        Returns a list with each layer's output (B, T, 2H), and final h and c as (B, L, 2H) (None when
        `final_states=False`). `top_only=True` says only the last layer will be read (a strategy may then return it
        alone). `unpacked`: the caller's hint to "auto" (`encode`: True; None: `lstm_kernels.unpacked_by_default`).
        `out`: a `(B, T, 2H)` tensor (a column slice of the caller's output is fine) that receives the top layer, and
        is then the list's last entry. Zero at padding here; unspecified in the other strategies (callers mask).
        """
        self.check_out(out, vectors)
        if self.dropout_all_layers and self.dropout > 0 and self.training:  # the word vectors and the top output
            vectors = nn.functional.dropout(vectors, self.dropout, training=True)
            outputs, final_h, final_c = self.run(vectors, lengths, final_states, top_only, unpacked, None)
            top = nn.functional.dropout(outputs[-1], self.dropout, training=True)
            return lstm_kernels.top_layer_into(outputs[:-1] + [top], out), final_h, final_c
        return self.run(vectors, lengths, final_states, top_only, unpacked, out)

    def lstm_stack(self) -> lstm_kernels.BiLSTMStack:
        """The MT-LSTM as the strategies of `lstm_kernels` take it: `self.rnn` with its key, dropout and cast cache."""
        return lstm_kernels.BiLSTMStack(self.rnn, self.config.lstm_implementation, self.dropout, self.training,
                                        self._autocast_cache)

    def run(self, vectors: torch.Tensor, lengths: torch.Tensor, final_states: bool, top_only: bool,
            unpacked: Optional[bool], out: Optional[torch.Tensor]):
        """`forward` without the dropout of the word vectors and the top layer: the chosen strategy, or the
        reference below (dropout between the layers)."""
        stack = self.lstm_stack()
        implementation = lstm_kernels.choose_lstm_implementation(stack, vectors, lengths, final_states, top_only,
                                                                 unpacked)
        if implementation != "reference":
            return lstm_kernels.LSTM_IMPLEMENTATIONS[implementation](stack, vectors, lengths, final_states, top_only,
                                                                     out)
        time = vectors.shape[1]
        packed = None if bool((lengths == time).all()) else lstm_kernels.pack(vectors, lengths)  # equal: no packing
        layer_input = vectors if packed is None else packed.data  # (B, T, 300), or packed (N, 300)
        outputs, final_h, final_c = [], [], []
        for layer in range(self.num_layers):
            if layer > 0 and self.dropout > 0 and self.training:  # dropout between the layers
                layer_input = nn.functional.dropout(layer_input, self.dropout, training=True)
            # one biLSTM layer: (B, T, 2H) or packed (N, 2H) as [forward; backward]; h_n, c_n (2, B, H)
            batch_sizes = None if packed is None else packed.batch_sizes
            layer_output, h_n, c_n = lstm_kernels.run_lstm_layer(stack, layer, layer_input, batch_sizes)
            if packed is None:
                outputs.append(layer_output)
            else:
                outputs.append(lstm_kernels.unpack(packed._replace(data=layer_output), time))
                if packed.unsorted_indices is not None:  # h_n and c_n come in sorted order: back to batch order
                    h_n = h_n.index_select(1, packed.unsorted_indices)
                    c_n = c_n.index_select(1, packed.unsorted_indices)
            final_h.append(torch.cat([h_n[0], h_n[1]], dim=-1))  # [forward; backward] (B, 2H)
            final_c.append(torch.cat([c_n[0], c_n[1]], dim=-1))
            layer_input = layer_output
        outputs = lstm_kernels.top_layer_into(outputs, out)
        if not final_states:
            return outputs, None, None
        return outputs, torch.stack(final_h, dim=1), torch.stack(final_c, dim=1)  # (B, L, 2H)

    def check_out(self, out: Optional[torch.Tensor], vectors: torch.Tensor):
        """`out` must be None or a `(B, T, 2H)` column slice of a contiguous tensor (written as B*T rows of a view)."""
        batch, time, _ = vectors.shape
        if out is not None and out.shape != (batch, time, 2 * self.hidden_size):
            raise ValueError(f"out must have shape {(batch, time, 2 * self.hidden_size)}, got {tuple(out.shape)}")
        if out is not None and (out.stride(2) != 1 or out.stride(0) != time * out.stride(1)):
            raise ValueError("out must be a column slice of a contiguous (B, T, D) tensor (its rows are written as "
                             f"B*T rows of one view), got strides {out.stride()}")


def encoder_class(encoder_type: str) -> type:
    """The encoder module `CoveModel` runs for `config.encoder_type` (the one place it is chosen, as transformers
    picks an attention implementation): `"mt_lstm"` CoveEncoder, `"bilm"` the ELMo-style `CoveBiLMEncoder`
    (modeling_cove_bilm_encoder.py). Both take and return the same (`CoveEncoder.forward`)."""
    if encoder_type == "mt_lstm":
        return CoveEncoder
    if encoder_type == "bilm":
        return CoveBiLMEncoder
    raise ValueError(f"encoder_type must be 'mt_lstm' or 'bilm', got {encoder_type!r}")


def token_id_row(item, position: int) -> list:
    """One item of `CoveModel.encode` given as token ids (a list, tuple, 1-D integer tensor or array) as ints; a
    TypeError naming the item's position otherwise (pre-split words, floats, None)."""
    row = item.tolist() if hasattr(item, "tolist") else item  # a tensor or a NumPy array
    if isinstance(row, (list, tuple)) and all(isinstance(t, numbers.Integral) and not isinstance(t, bool)
                                              for t in row):
        return [int(t) for t in row]
    raise TypeError(f"encode: item {position} is neither a text nor a sequence of token ids: {item!r:.80} (pre-split "
                    "words: join them with spaces; every item must be of the first item's kind)")


# eq. 6, w~ = [GloVe(w); CoVe(w)] (+ MT-LSTM layer 1, + char n-grams): assembled here for the encoder, the BCN, the DCN
def assemble_features(layout: FeatureLayout, parts: dict, mask: Optional[torch.Tensor] = None,
                      out: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The per-token features w~ (B, T, `layout.size`): each part of `layout` (`config.feature_layout(reader)`) in its
    columns, then times `mask` (B, T, 1) when given (zero at padding; the parts may be masked already).

    `parts` maps each of the layout's part names to its (B, T, width) tensor (names the layout lacks are ignored).
    Written into `out` (B, T, `layout.size`) when given, where a part given as None is in its columns already (the
    encoder writes its top layer there itself); else a new tensor, the parts side by side (`torch.cat`: the promoted
    dtype of the parts)."""
    missing = [name for name in layout.names if name not in parts or (out is None and parts[name] is None)]
    if missing:
        raise ValueError(f"eq. 6 needs the parts {missing} of the feature layout {list(layout.names)}")
    if out is None:
        tensors = [parts[name] for name in layout.names]
        features = torch.cat(tensors, dim=-1) if len(tensors) > 1 else tensors[0]
        return features if mask is None else features * mask
    for name, start, end in layout.parts:
        if parts[name] is not None:
            out[..., start:end] = parts[name]
    return out if mask is None else out.mul_(mask)


class CovePreTrainedModel(PreTrainedModel):
    config_class = CoveConfig
    base_model_prefix = "cove"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = False
    # Trainer must not pass `num_items_in_batch`: our heads compute mean losses themselves (docs/transformers_notes.md).
    accepts_loss_kwargs = False
    _no_split_modules = []

    def cove_encoder_model(self) -> "CoveModel":
        """The CoveModel inside this model (itself for the base model, `self.cove` for a head)."""
        return self if isinstance(self, CoveModel) else getattr(self, self.base_model_prefix)

    def set_lstm_implementation(self, implementation: str):
        """Run the model's LSTMs (the encoder's, MT-LSTM or biLM, and a head's own biLSTMs) with `implementation`
        from the next call on (`config.lstm_implementation`: "auto", "reference", "unpacked" or "single_call"; same
        results, other speed), in this model and its encoder, and save it with the config. A method rather than a
        forward argument (as transformers' `set_attn_implementation`): it reaches every encoder call, those a head,
        a pipeline, `Trainer` or `encode` makes included."""
        if implementation not in LSTM_IMPLEMENTATION_CHOICES:
            raise ValueError(f"lstm_implementation must be one of {LSTM_IMPLEMENTATION_CHOICES}, got "
                             f"{implementation!r}")
        self.config.lstm_implementation = implementation
        self.cove_encoder_model().encoder.config.lstm_implementation = implementation
        return self

    def post_init(self):
        """`PreTrainedModel.post_init`; in a head, also marks its `CoveModel` as serving a head (`inside_head`): the
        head's `output_attentions` asks for the head's own attention maps, which the encoder then does not refuse."""
        super().post_init()
        if not isinstance(self, CoveModel) and isinstance(getattr(self, self.base_model_prefix, None), CoveModel):
            self.cove_encoder_model().inside_head = True

    def _resize_token_embeddings(self, new_num_tokens, pad_to_multiple_of=None, mean_resizing=True):
        """`resize_token_embeddings`' hook: the source tables get `new_num_tokens` rows, the new ones ZERO (the
        paper's vector for a word without one), whatever `mean_resizing` says (`embeddings.resize_source_vocabulary`
        says the rest)."""
        return resize_source_vocabulary(self, new_num_tokens, pad_to_multiple_of)

    # a pretraining model (translation, the biLM), whose purpose is to train the encoder: a frozen one is warned of
    trains_encoder = False

    def freeze_frozen_parts(self):
        """Apply `config.freeze_embeddings` / `config.freeze_encoder` (`requires_grad=False`)."""
        cove = self.cove_encoder_model()
        if self.config.freeze_embeddings:
            cove.embeddings.weight.requires_grad_(False)
            if cove.char_ngram_embeddings is not None:
                cove.char_ngram_embeddings.weight.requires_grad_(False)
        if self.config.freeze_encoder:
            cove.encoder.requires_grad_(False)
            if self.trains_encoder:
                logger.warning_once(
                    f"{type(self).__name__}: config.freeze_encoder=True (the default, for the downstream heads) keeps "
                    "the encoder fixed, so training updates only the output layers; to pretrain the encoder build "
                    "the model from CoveConfig(..., freeze_encoder=False)")
        return self

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        """`PreTrainedModel.from_pretrained`, with the frozen parts frozen again, and an unreadable weights file (a
        truncated or corrupt `model.safetensors`, for which safetensors names no file) an `OSError` naming the file,
        what is wrong with it and the fix (`hub.raise_for_unreadable_weights`)."""
        try:
            model = super().from_pretrained(*args, **kwargs)
        except Exception as error:
            if not type(error).__module__.startswith("safetensors"):
                raise
            checkpoint = args[0] if args else kwargs.get("pretrained_model_name_or_path")
            raise_for_unreadable_weights(error, checkpoint, subfolder=kwargs.get("subfolder") or "",
                                         cache_dir=kwargs.get("cache_dir"), revision=kwargs.get("revision"))
        # transformers 5.x loads checkpoint tensors as new `nn.Parameter`s with requires_grad=True, undoing the
        # freezing done in `__init__`: apply it again so Trainer/optimizers never update a frozen encoder.
        if isinstance(model, tuple):  # output_loading_info=True
            return (model[0].freeze_frozen_parts(), *model[1:])
        return model.freeze_frozen_parts()

    def train(self, mode: bool = True):
        """A frozen encoder stays in eval mode (no MT-LSTM dropout), so cached features equal live
        ones and a frozen encoder is exactly the pretrained function."""
        super().train(mode)
        if self.config.freeze_encoder:
            self.cove_encoder_model().encoder.eval()
        return self

    def save_pretrained(self, save_directory, *args, push_to_hub: bool = False, **kwargs):
        """`PreTrainedModel.save_pretrained` (safetensors) plus Hub remote code (`hub.checkpoint_code`): config.json
        names in `auto_map` every class whose code files are here and in `custom_pipelines` this architecture's
        pipelines, and exactly their flat code files lie next to the weights, so that a process without
        `modeling_cove` installed loads the checkpoint through every class the config names, with
        `trust_remote_code=True`. (Running as remote code, only the files that model imported are here, and the
        config then names only their classes.) `push_to_hub=True` uploads the folder after the code files are in
        it (`push_to_hub`, with `repo_id` defaulting to the folder's name, `token`, `commit_message`, `private`,
        `revision`, `create_pr` from the keyword arguments)."""
        code = checkpoint_code(type(self), encoder_type=self.config.encoder_type)
        code.apply_to(self.config)
        hub_kwargs = {}
        if push_to_hub:
            hub_kwargs = {key: kwargs.pop(key) for key in ("repo_id", "commit_message", "commit_description",
                                                           "private", "revision", "create_pr", "tags")
                          if key in kwargs}
            hub_kwargs.setdefault("repo_id", Path(save_directory).name)
            hub_kwargs["token"] = kwargs.get("token")
        result = super().save_pretrained(save_directory, *args, **kwargs)
        if kwargs.get("is_main_process", True):
            code.copy_to(save_directory)
            if push_to_hub:
                self.push_to_hub(**hub_kwargs)
        return result

    @torch.no_grad()
    def _init_weights(self, module):
        """Uniform U(-r, r) for LSTM/linear weights (docs/paper.md §2), N(0, 1) word vectors with zero PAD/UNK rows."""
        r = self.config.initializer_range
        if isinstance(module, (nn.LSTM, nn.LSTMCell)):
            for param in module.parameters():
                nn.init.uniform_(param, -r, r)
        elif isinstance(module, nn.Linear):
            nn.init.uniform_(module.weight, -r, r)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, 0.0, 1.0)
            if isinstance(module, CoveWordEmbeddings):
                module.zero_special_rows()
        elif isinstance(module, (nn.BatchNorm1d, nn.LayerNorm)):
            if module.weight is not None:
                nn.init.ones_(module.weight)
            if module.bias is not None:
                nn.init.zeros_(module.bias)


class CoveModel(CoveInputChecks, CovePreTrainedModel):
    """The CoVe encoder: word vectors (frozen) -> MT-LSTM. `last_hidden_state` is CoVe(w) (eq. 5), or eq. 6's
    `[GloVe(w); CoVe(w)]` with `config.include_word_vectors`, optionally with both layers and char n-grams. With
    `config.encoder_type="bilm"` the MT-LSTM's place is taken by the ELMo-style biLM (`encoder_class`), whose layers
    have the same shape."""

    def __init__(self, config: CoveConfig):
        super().__init__(config)
        self.embeddings = CoveWordEmbeddings(
            config.vocab_size, config.word_vector_dim, config.pad_token_id, config.unk_token_id
        )
        self.char_ngram_embeddings = (
            nn.Embedding(config.vocab_size, config.char_ngram_dim, padding_idx=config.pad_token_id)
            if config.char_ngram_dim > 0
            else None
        )
        self.encoder = encoder_class(config.encoder_type)(config)
        # True when a head holds this model (`self.cove`): `output_attentions` then asks for the head's maps
        self.inside_head = False
        self.post_init()
        self.freeze_frozen_parts()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        output_final_states: Optional[bool] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
    ) -> CoveModelOutput:
        """
        input_ids: (B, T) token ids, right-padded. attention_mask: (B, T), 1 = token (default: all tokens).
        inputs_embeds: (B, T, config.word_vector_dim) word vectors instead of `input_ids` (e.g. your own GloVe rows),
        zeroed at padding and cast to the model's dtype; the same as `input_ids` whose rows
        `model.get_input_embeddings()(input_ids)` are these. Exactly one of the two is required (else a ValueError);
        models with char n-gram embeddings (`config.char_ngram_dim > 0`, looked up by id) need `input_ids`.
        token_type_ids: accepted (tokenizers return them) and ignored by the encoder.
        output_final_states: False skips the final h/c (None in the output) and lets padded batches run unpacked
        where `config.lstm_implementation` says so (same outputs; docs/lstm_kernels.md). Default:
        config.output_final_states.
        output_attentions: the MT-LSTM has no attention maps, so True is a ValueError here. Inside a head (its
        `self.cove`) the flag asks for the head's own maps (BCN biattention, DCN coattention, MT decoder), and the
        encoder ignores it.
        return_dict=False: the output's `to_tuple()` (the fields that are not None, in order, `attention_mask` last).
        Any other keyword argument is a TypeError naming it.
        A row with no tokens (all-zero mask) gives zero outputs (a defined result, not an error).
        """
        if output_attentions and not self.inside_head:
            raise ValueError(
                "output_attentions=True: CoveModel has no attention maps (the CoVe encoder is an LSTM). The heads "
                "return their own (BCN biattention, DCN coattention, MT decoder attention)."
            )
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("CoveModel needs exactly one of input_ids and inputs_embeds, got "
                             + ("both" if input_ids is not None else "neither"))
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        if output_final_states is None:
            output_final_states = self.config.output_final_states
        with HostRead() as host:  # the checks and the lengths: one read from the device
            if inputs_embeds is not None:
                attention_mask = self.check_inputs_embeds(inputs_embeds, attention_mask)
            else:
                attention_mask = self.check_inputs(input_ids, attention_mask)
            host.read(lengths_from_mask(attention_mask))
        lengths = host.values[0]  # (B,) on the host: packing and the checks below read it
        return self.forward_checked(input_ids, attention_mask, lengths, output_hidden_states, output_final_states,
                                    return_dict, inputs_embeds=inputs_embeds)

    def reads_top_layer_only(self, output_hidden_states: bool) -> bool:
        """Whether a forward reads the MT-LSTM's top layer alone: no hidden states, no layer 1 in the output."""
        return not output_hidden_states and not self.config.feature_layout().has("first_layer")

    def output_is_top_layer(self) -> bool:
        """Whether `last_hidden_state` is the top MT-LSTM layer and nothing else (CoVe(w) of eq. 5: the encoder's
        feature layout has no other part)."""
        return self.config.feature_layout().names == ("top_layer",)

    def output_dtype(self, vectors: torch.Tensor, masked: bool) -> torch.dtype:
        """The dtype of `last_hidden_state` for word `vectors`: what concatenating its parts gives (the top layer
        alone: its own). Under autocast the MT-LSTM's layers come in the autocast dtype, word vectors and char
        n-grams in the model's, and a layer masked at padding (`masked`) in their promotion (the mask has the
        model's dtype)."""
        device_type = vectors.device.type
        dtype = torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else vectors.dtype
        layout = self.config.feature_layout()
        if layout.has("word_vectors") or layout.has("char_ngrams") or masked:
            dtype = torch.promote_types(dtype, vectors.dtype)
        return dtype

    def forward_checked(self, input_ids: Optional[torch.Tensor], attention_mask: Optional[torch.Tensor],
                        lengths: torch.Tensor, output_hidden_states: bool, output_final_states: bool, return_dict: bool,
                        unpacked: Optional[bool] = None, zero_padding: bool = True,
                        inputs_embeds: Optional[torch.Tensor] = None):
        """`forward` after its checks: `input_ids` (B, T) valid ids, `attention_mask` (B, T) right-padded (None = no
        padding), `lengths` (B,) its row sums *on the host*. Reads nothing back from the device on the way, so on a
        GPU the host can queue the next batch while this one runs (`encode`). `unpacked`: see `CoveEncoder.forward`.
        `zero_padding=False` skips zeroing the outputs at padding (they hold garbage there) for a caller that cuts
        each row to its length (`encode`); no path lets padding reach a real token, so that changes nothing else.
        `inputs_embeds` (B, T, word_vector_dim), checked, replaces the lookup of `input_ids` (then None)."""
        shape = (input_ids if inputs_embeds is None else inputs_embeds[..., 0]).shape  # (B, T)
        if attention_mask is None:
            attention_mask = torch.ones(shape, dtype=torch.long, device=self.embeddings.weight.device)
        exporting = torch.compiler.is_exporting()  # no Python branch on tensor values then: always masked
        mask_outputs = zero_padding and (exporting or bool((lengths < shape[1]).any()))  # else a mask of ones
        mask = attention_mask.unsqueeze(-1).to(self.embeddings.weight.dtype) if mask_outputs else None  # (B, T, 1)
        vectors = self.word_vectors(input_ids, inputs_embeds, time_major=bool(unpacked) and not output_hidden_states)
        if mask_outputs:
            vectors = vectors * mask  # GloVe(w), (B, T, 300)
        # eq. 6: w~ = [GloVe(w); CoVe(w)] (+ first layer, + char n-grams, per config), as one (B, T, D) tensor whose
        # parts are written into their columns. Unless the hidden states are returned too (they keep the encoder's own
        # top layer), the encoder writes the top layer there itself: no concatenation copy.
        output = None  # None: the output is the top layer alone
        if not self.output_is_top_layer():
            output = vectors.new_empty(*shape, self.config.output_size, dtype=self.output_dtype(vectors, mask_outputs))
        top_start, top_end = self.top_layer_columns()
        top_in_output = output is not None and not output_hidden_states
        # eq. 1/5: CoVe(w) = MT-LSTM(GloVe(w)); empty rows run on one pad step and are masked to zero below
        layers, final_h, final_c = self.encoder(vectors, lengths.clamp(min=1), final_states=output_final_states,
                                                top_only=self.reads_top_layer_only(output_hidden_states),
                                                unpacked=unpacked,
                                                out=output[..., top_start:top_end] if top_in_output else None)
        if final_h is not None and (exporting or bool((lengths == 0).any())):  # empty rows ran on a pad step: zero
            has_tokens = (lengths > 0).to(device=final_h.device, dtype=final_h.dtype).view(-1, 1, 1)  # (B, 1, 1)
            final_h, final_c = final_h * has_tokens, final_c * has_tokens
        # zero at padding: the layers where they are returned as they are, (B, T, 600) each; `output` once, below
        if mask_outputs and (output is None or output_hidden_states):
            layers = [layer * mask for layer in layers]
        if output is not None:
            self.fill_output(output, vectors, layers, input_ids, mask, top_written=top_in_output)
        output = CoveModelOutput(
            last_hidden_state=layers[-1] if output is None else output,
            hidden_states=(vectors, *layers) if output_hidden_states else None,
            final_hidden_state=final_h,
            final_cell_state=final_c,
            attention_mask=attention_mask,
        )
        return output if return_dict else output.to_tuple()

    def word_vectors(self, input_ids: Optional[torch.Tensor], inputs_embeds: Optional[torch.Tensor],
                     time_major: bool) -> torch.Tensor:
        """GloVe(w), (B, T, 300): the caller's `inputs_embeds` in the model's dtype, or the rows of `input_ids`;
        `time_major` (`encode`'s unpacked batches) looks them up time-major in memory, the layout the LSTM kernels
        read, so the encoder's transpose to it copies nothing (only for vectors that are not returned)."""
        if inputs_embeds is not None:
            return inputs_embeds.to(self.embeddings.weight.dtype)
        if time_major:
            return self.embeddings(input_ids.t()).transpose(0, 1)
        return self.embeddings(input_ids)

    def top_layer_columns(self) -> tuple:
        """Where the top MT-LSTM layer lies in `last_hidden_state`'s columns (eq. 6 layout): (start, end)."""
        return self.config.feature_layout().columns("top_layer")

    def fill_output(self, output: torch.Tensor, vectors: torch.Tensor, layers: list, input_ids: Optional[torch.Tensor],
                    mask: Optional[torch.Tensor], top_written: bool):
        """Eq. 6 into `output` (B, T, D) (`assemble_features` on `config.feature_layout()`): [word vectors; layer 1;
        top layer; char n-grams] (the top layer only unless the encoder wrote it there, `top_written`), then padding
        zeroed with `mask` (B, T, 1) when given (every part at once, the top layer too where the encoder wrote it)."""
        layout = self.config.feature_layout()
        parts = {"word_vectors": vectors, "first_layer": layers[0], "top_layer": None if top_written else layers[-1]}
        if layout.has("char_ngrams"):
            parts["char_ngrams"] = self.char_ngram_embeddings(input_ids)  # zero at pad ids (padding_idx)
        assemble_features(layout, parts, mask=mask, out=output)

    @torch.inference_mode()
    def encode(
        self,
        texts: list,
        tokenizer=None,
        batch_size: int = 64,
        progress: bool = False,
        num_workers: Optional[int] = None,
    ) -> list:
        """Texts (or lists of token ids) -> one `(T_i, config.output_size)` tensor per input, in the input order.

        The fast path for feature extraction: inputs sorted by length and cut into batches of up to `batch_size`
        neighbours (`lstm_kernels.length_bucketed_batches`), run without final states and with the hint to run
        unpacked (on CPU: the fused kernel, in time segments; where the top layer runs as one call, CUDA: packed).
        The ids are checked once on the host, and nothing in the loop reads back from the device. On CPU with more
        than one intra-op thread the batches are shared among that many host threads with one each
        (`lstm_kernels.run_on_cpu_workers`, guided batches); `num_workers` overrides the count (1: one batch at a
        time on every intra-op thread; more than 1 on CPU only). docs/lstm_kernels.md says why. Results equal
        running each input alone (tested), whatever the workers. An empty input gives a `(0, output_size)` tensor.
        `tokenizer` is required for strings; it must be the checkpoint's tokenizer. Runs in the model's current mode
        (eval after `from_pretrained`).
        """
        if isinstance(texts, str):
            raise TypeError("encode expects a list of texts; wrap a single text in a list")
        device = self.embeddings.weight.device
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        if num_workers is not None and (isinstance(num_workers, bool) or not isinstance(num_workers, int)
                                        or num_workers < 1 or (num_workers > 1 and device.type != "cpu")):
            raise ValueError(f"num_workers must be None or an int >= 1, and 1 off the CPU; got {num_workers!r} on "
                             f"{device}")
        texts = list(texts)
        if texts and isinstance(texts[0], str):
            if tokenizer is None:
                raise ValueError("encode needs the tokenizer to encode strings")
            check_tokenizer_matches(self.config, tokenizer)
            not_texts = [i for i, text in enumerate(texts) if not isinstance(text, str)]
            if not_texts:
                raise TypeError(f"encode: item(s) {not_texts[:10]} of {len(texts)} are not strings; give every item "
                                "as a text, or every item as a sequence of token ids")
            ids = tokenizer(texts, add_special_tokens=True)["input_ids"]
        else:
            ids = [token_id_row(item, i) for i, item in enumerate(texts)]
        workers = lstm_kernels.cpu_worker_count(device) if num_workers is None else num_workers
        return lstm_kernels.encode_in_batches(self, ids, batch_size, workers, progress)
