"""A sequence tagger on CoVe inputs: the tagger of Cross-View Training (Clark et al. 2018, §3.1) over any encoder.

`CoveForTokenClassification` labels every token of one right-padded sentence per row (chunking, POS, NER):

    tokens -> w~ = [GloVe(w); CoVe(w)] (eq. 6, or the variant `config.tagger_input` names)        (B, T, D_in)
    -> dropout -> biLSTM layer 1 -> dropout -> h1 = [h→1; h←1]                                      (B, T, 2H)
    -> biLSTM layer 2 -> dropout -> h2                                                             (B, T, 2H)
    -> primary module p(y_i) = softmax(W · ReLU(W' · [h1_i; h2_i]) + b)                           (B, T, labels)

The biLSTM is the tagger's own and is trained; the word vectors and the encoder (MT-LSTM or biLM) are frozen, as in
the other heads (`config.freeze_embeddings=False` trains the vectors). Labels are per token, -100 where a token carries no label (later tokens of a word, as
`tokenizer(words, is_split_into_words=True).word_ids()` aligns them; docs/tagging.md). Cross-View Training's
auxiliary modules read layer 1's two directions (`TaggerStates`); they are training-only and live in the training
package (`modeling_cove.training.loops.cvt`), so a saved tagger holds and needs none of them. Every LSTM runs as
`config.lstm_implementation` says (`layers.run_bilstm`), and a row's outputs do not depend on the padding.
"""

from typing import NamedTuple, Optional

import torch
from torch import nn
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.utils import add_start_docstrings_to_model_forward

from .configuration_cove import CoveConfig
from .embeddings import HostRead, lengths_from_mask, require_tensor
from .layers import (SentenceBoundaries, assemble_head_inputs, encoder_needs_grad, head_init_, pair_segments, require,
                     rows_where, run_bilstm, run_encoder_checked, scalar_mix_for, valid_steps)
from .modeling_cove import CoveModel, CovePreTrainedModel

IGNORE_INDEX = -100  # a token without a label (transformers' convention, `nn.CrossEntropyLoss`'s default)
# the casing of a token as written (`casing_class`), the optional word feature `case_ids` (config.tagger_case_dim)
CASE_CLASSES = ("<pad>", "lower", "title", "upper", "mixed", "digits", "other")
# BIOES (single, begin, inside, end, outside), the chunk encoding of Cross-View Training's taggers, read as IOB2:
# the prefixes that change (`bioes_label_to_bio`); B-, I- and O mean the same in both
BIOES_TO_BIO = {"S-": "B-", "E-": "I-"}


def casing_class(text: str) -> int:
    """The index in CASE_CLASSES of a token's text as written: no letters -> "digits" (any digit) or "other";
    every letter lower -> "lower"; one capital letter first, the rest lower (or a single capital) -> "title"; every
    letter upper -> "upper"; else "mixed". Empty text (no token) -> "<pad>"."""
    letters = [c for c in text if c.isalpha()]
    if not text:
        return 0
    if not letters:
        return 5 if any(c.isdigit() for c in text) else 6
    if all(c.islower() for c in letters):
        return 1
    if letters[0].isupper() and all(c.islower() for c in letters[1:]):
        return 2
    return 3 if all(c.isupper() for c in letters) else 4


def case_ids_from_offsets(text: str, offsets) -> list:
    """`casing_class` of each token of `text` from its (start, end) character offsets (`return_offsets_mapping`)."""
    return [casing_class(text[start:end]) for start, end in offsets]


def bioes_label_to_bio(label):
    """One BIOES label in IOB2: S-X -> B-X (a one-word chunk begins), E-X -> I-X (the last word of a chunk
    continues it); any other label (B-X, I-X, O, a UPOS tag, None for a word without a token) is returned as it is.
    Label by label, so an ill-formed predicted sequence (E-X after O, ...) maps without error."""
    if isinstance(label, str) and label[:2] in BIOES_TO_BIO:
        return BIOES_TO_BIO[label[:2]] + label[2:]
    return label


def has_bioes_labels(labels) -> bool:
    """Whether a tagger's labels (e.g. `config.id2label.values()`) are BIOES: any label starts with "S-" or "E-"."""
    return any(isinstance(label, str) and label[:2] in BIOES_TO_BIO for label in labels)


class TaggerStates(NamedTuple):
    """The tagger's biLSTM states of a batch: `layers[k]` (B, T', 2H) = [h→_{k+1}; h←_{k+1}], zero at padding (and
    dropped out in training); `lengths` (B,) tokens per row; `mask` (B, T') bool, True at tokens. T' = T, or T + 2
    with sentence boundaries (`framed`: position 0 START, the tokens at 1..n, END at n + 1, then padding)."""

    layers: list
    lengths: torch.Tensor
    mask: torch.Tensor
    framed: bool = False
    host_lengths: Optional[torch.Tensor] = None  # `lengths` on the host, where the forward read them

    def tokens(self, values: torch.Tensor) -> torch.Tensor:
        """(B, T', ...) values over the states' positions -> (B, T, ...) at the token positions."""
        return SentenceBoundaries.tokens(values) if self.framed else values


class CoveTaggerPredictionModule(nn.Module):
    """CVT's prediction module (§3.1): logits W · ReLU(W' · h) + b over the labels, per token. The primary module reads
    [h1; h2]; Cross-View Training's auxiliary modules have the same form over their restricted views."""

    def __init__(self, input_dim: int, module_dim: int, num_labels: int):
        super().__init__()
        self.hidden = nn.Linear(input_dim, module_dim, bias=False)  # W'
        self.output = nn.Linear(module_dim, num_labels)  # W, b

    def forward(self, states: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        """(..., input_dim) -> (..., num_labels). With `mask` (the leading dims of `states`, bool, True at tokens) on
        CPU, the module runs at the tokens and at one zero state, whose value (b) every other position gets, as on the
        zero states padding holds: the same logits and gradients for less work on ragged batches. Every position on a
        GPU (where the boolean gather would make the host wait) and while `torch.export` traces. (The tagger's mask
        on CPU comes from the lengths read on the host: the gather reads nothing back.)"""
        if mask is None or states.device.type != "cpu" or torch.compiler.is_exporting():
            return self.output(torch.relu(self.hidden(states)))
        positions = mask.nonzero(as_tuple=True)
        rows = torch.cat([states[positions], states.new_zeros(1, states.shape[-1])])  # the tokens, then a zero state
        values = self.output(torch.relu(self.hidden(rows)))  # (N + 1, num_labels); the last: b, padding's value
        padding = values[-1].expand(*mask.shape, values.shape[-1])
        return padding.index_put(positions, values[:-1])


TAGGER_INPUTS_DOCSTRING = r"""
    input_ids (`torch.LongTensor` of shape `(batch, time)`): token ids of one sentence per row, right-padded.
    attention_mask (`torch.LongTensor` of shape `(batch, time)`, *optional*): 1 = token, 0 = padding.
    token_type_ids (`torch.LongTensor`, *optional*): accepted as tokenizers return it; a tagger reads one text, so
        a row with type-1 tokens (a pair) is a `ValueError`.
    labels (`torch.LongTensor` of shape `(batch, time)`, *optional*): a label id in `[0, num_labels)` per token, or
        -100 for tokens without a label (later tokens of a word, special tokens); padding must be -100. Gives
        `loss`: the mean cross-entropy over the labelled tokens (NaN when no token of the batch is labelled, as
        `F.cross_entropy` and transformers' token-classification heads give).
    inputs_embeds (`torch.FloatTensor` of shape `(batch, time, word_vector_dim)`, *optional*): the word vectors
        instead of `input_ids` (exactly one of the two).
    case_ids (`torch.LongTensor` of shape `(batch, time)`, *optional*): each token's casing as written, indices into
        `CASE_CLASSES` (`case_ids_from_offsets(text, offset_mapping)`); required when `config.tagger_case_dim > 0`,
        ignored otherwise.
    output_hidden_states (`bool`, *optional*): return `hidden_states` = (w~ (B, T, D_in), biLSTM layer 1, ...,
        layer L (each (B, T, 2H))), zero at padding.
    output_attentions (`bool`, *optional*): True is a `ValueError`: the tagger has no attention maps.
    return_dict (`bool`, *optional*): False returns `TokenClassifierOutput.to_tuple()`.

    Up-front checks (`ValueError` naming the rows of this batch, before anything runs): a sentence with no tokens,
    a sentence longer than `config.tagger_max_length` tokens, a pair, and labels of another shape, out of range
    or on padding. `logits` are (B, T, num_labels); at padding they are computed from zero states and mean nothing.
"""


class CoveForTokenClassification(CovePreTrainedModel):
    """CoVe (or biLM) features + a trained 2-layer biLSTM + CVT's prediction module, one label per token.

    `config.tagger_input` chooses the per-token input (its parts: `config.feature_layout("tagger")`): "vectors"
    (the word vectors alone, the supervised baseline and the input of Cross-View Training), "vectors+cove" (eq. 6),
    "cove", or "vectors+scalar_mix" (ELMo's mix over a frozen biLM when `config.encoder_type == "bilm"`).
    """

    def __init__(self, config: CoveConfig):
        super().__init__(config)
        layout = config.feature_layout("tagger")
        self.num_labels = config.num_labels
        hidden = config.tagger_hidden_size
        self.cove = CoveModel(config)
        self.layer_indices = config.encoder_layers_read("tagger")
        self.scalar_mix = scalar_mix_for(config, "tagger")  # ELMo's mix for "vectors+scalar_mix", else None
        self.dropout = nn.Dropout(config.tagger_dropout)
        self.case_embeddings = (nn.Embedding(len(CASE_CLASSES), config.tagger_case_dim, padding_idx=0)
                                if config.tagger_case_dim else None)
        sizes = [layout.size + config.tagger_case_dim] + [2 * hidden] * (config.tagger_num_layers - 1)
        self.boundaries = SentenceBoundaries(sizes[0]) if config.tagger_boundary_tokens else None
        self.encoder = nn.ModuleList(nn.LSTM(size, hidden, batch_first=True, bidirectional=True) for size in sizes)
        self.classifier = CoveTaggerPredictionModule(2 * hidden * config.tagger_num_layers, config.tagger_module_dim,
                                                     config.num_labels)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module):
        """The encoder (`self.cove`) keeps the MT initialisation; the tagger's layers get `layers.head_init_`."""
        if any(module is m for m in self.cove.modules()):
            super()._init_weights(module)
        else:
            head_init_(module)

    # ------------------------------------------------------------------------------------------------------------
    # checks
    # ------------------------------------------------------------------------------------------------------------

    def check_inputs(self, input_ids, inputs_embeds, attention_mask, token_type_ids) -> tuple:
        """Exactly one of `input_ids` (B, T) / `inputs_embeds` (B, T, D), checked by the encoder's own checks; every
        row one sentence of 1..`tagger_max_length` tokens. Returns (inputs, attention mask, lengths (B,)). Inside a
        `HostRead` the value checks wait for its one read (`forward` reads the lengths with them)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("CoveForTokenClassification needs exactly one of input_ids and inputs_embeds, got "
                             f"{'both' if input_ids is not None else 'neither'}")
        if inputs_embeds is not None:
            inputs, attention_mask = inputs_embeds, self.cove.check_inputs_embeds(inputs_embeds, attention_mask)
        else:
            inputs, attention_mask = input_ids, self.cove.check_inputs(input_ids, attention_mask)
        lengths = lengths_from_mask(attention_mask)  # (B,); left padding or holes: a ValueError
        require(lengths > 0, "a sentence has no tokens",
                lambda: f"row(s) {rows_where(lengths == 0)} of this batch of {len(lengths)} have no tokens (an empty "
                "sentence, or one the tokenizer turned into nothing): a tagger needs at least one token per row")
        limit = self.config.tagger_max_length
        if limit is not None:
            require(lengths <= limit, f"a sentence is longer than config.tagger_max_length={limit} tokens",
                    lambda: f"row(s) {rows_where(lengths > limit)} of this batch have "
                    f"{[int(n) for n in lengths[lengths > limit]]} tokens, more than config.tagger_max_length="
                    f"{limit} (the token-classification pipeline runs a list longest first: rows count in its "
                    "batches, not in the list given): split the text into sentences (truncation would leave words "
                    f"unlabelled), give the pipeline stride= with a tokenizer whose model_max_length is <= {limit} "
                    "(it then tags windows), or raise config.tagger_max_length (None: no limit)")
        if token_type_ids is not None:
            first, _ = pair_segments(attention_mask, token_type_ids)  # (B, T) each; checks the tensor and its shape
            pair = attention_mask.bool() & ~first  # tokens of any segment but the first
            require(~pair.any(dim=1), "a tagger reads one sentence per row, but a row is a pair",
                    lambda: f"row(s) {rows_where(pair.any(dim=1))} have second-text tokens (token_type_ids 1): "
                    "tag each sentence on its own")
        return inputs, attention_mask, lengths

    def check_labels(self, labels: torch.Tensor, attention_mask: torch.Tensor, num_labels: int | None = None,
                     task: str | None = None) -> None:
        """`labels` (B, T) integer ids in [0, num_labels) at tokens or -100, and -100 at padding (`num_labels`,
        `task`: another task's labels, a multi-task training's; default this model's)."""
        num_labels = self.num_labels if num_labels is None else num_labels
        names = f"the labels of task {task!r}" if task is not None else f"config.id2label: {self.config.id2label}"
        require_tensor(labels, "labels")
        if tuple(labels.shape) != tuple(attention_mask.shape):
            raise ValueError(f"labels must have the shape of input_ids {tuple(attention_mask.shape)} (one label id or "
                             f"-100 per token), got {tuple(labels.shape)}")
        if labels.is_floating_point() or labels.dtype == torch.bool:
            raise TypeError(f"labels must be integer label ids, got dtype {labels.dtype}")
        known = (labels == IGNORE_INDEX) | ((labels >= 0) & (labels < num_labels))
        require(known.all(dim=1), f"labels must be ids in [0, {num_labels}) or -100",
                lambda: f"row(s) {rows_where(~known.all(dim=1))} have labels outside [0, {num_labels}) and not "
                f"-100 ({names})")
        on_padding = (labels != IGNORE_INDEX) & ~attention_mask.bool()
        require(~on_padding.any(dim=1), "a label lies on padding",
                lambda: f"row(s) {rows_where(on_padding.any(dim=1))} have labels at padding positions "
                "(attention_mask 0): they would be ignored; labels at padding must be -100")

    # ------------------------------------------------------------------------------------------------------------
    # the steps
    # ------------------------------------------------------------------------------------------------------------

    def check_case_ids(self, case_ids: Optional[torch.Tensor], attention_mask: torch.Tensor) -> None:
        """`case_ids` (B, T) in [0, len(CASE_CLASSES)) when the model reads them (`config.tagger_case_dim > 0`)."""
        if self.case_embeddings is None:
            return
        if case_ids is None or tuple(case_ids.shape) != tuple(attention_mask.shape):
            raise ValueError(f"this tagger reads each token's casing (config.tagger_case_dim="
                             f"{self.config.tagger_case_dim}): pass case_ids of shape {tuple(attention_mask.shape)} "
                             "(case_ids_from_offsets(text, offset_mapping); the token-classification pipeline does it)"
                             + ("" if case_ids is None else f", got {tuple(case_ids.shape)}"))
        known = (case_ids >= 0) & (case_ids < len(CASE_CLASSES))
        require(known.all(dim=1), f"case_ids must be in [0, {len(CASE_CLASSES)})",
                lambda: f"row(s) {rows_where(~known.all(dim=1))} have case_ids outside [0, {len(CASE_CLASSES)})")

    def tagger_inputs(self, inputs: torch.Tensor, attention_mask: torch.Tensor,
                      case_ids: Optional[torch.Tensor] = None,
                      host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Eq. 6 (or the `tagger_input` variant; `layers.assemble_head_inputs`): w~ (B, T, D_in), zero at padding,
        then the casing embedding when the model has one. `inputs`: checked ids (B, T) or word vectors (B, T, D);
        `case_ids` checked (B, T); `host_lengths` (B,): the rows' lengths on the host, where the forward has them."""
        hidden = None
        if self.layer_indices:  # eq. 5, CoVe(w) (or the biLM's layers)
            with torch.set_grad_enabled(encoder_needs_grad(self.cove, inputs)):
                hidden = run_encoder_checked(self.cove, inputs, attention_mask, True, host_lengths)
            hidden = hidden.hidden_states
        features = assemble_head_inputs(self.config, "tagger", self.cove, inputs, attention_mask, hidden,
                                        self.scalar_mix, self.layer_indices)
        if self.case_embeddings is None:
            return features
        mask = attention_mask.unsqueeze(-1).to(features.dtype)
        return torch.cat([features, self.case_embeddings(case_ids) * mask], dim=-1)  # (B, T, D_in + case dim)

    def encode(self, features: torch.Tensor, lengths: torch.Tensor, num_layers: Optional[int] = None,
               host_lengths: Optional[torch.Tensor] = None) -> TaggerStates:
        """The tagger's biLSTM over w~ (B, T, D_in): dropout on its input and on each layer's output (training mode),
        the first `num_layers` layers (all by default; Cross-View Training's student pass needs layer 1 only). With
        `config.tagger_boundary_tokens` the biLSTM reads START, w~_1..n, END: the states are framed (T + 2 wide).
        `host_lengths`: `lengths` on the host (read here when not given, unless exporting); on CPU the mask is
        made from them (the same tensor there), so that the prediction module's gather reads nothing back."""
        exporting = torch.compiler.is_exporting()
        if host_lengths is None and not exporting:
            host_lengths = lengths.cpu()
        on_cpu = features.device.type == "cpu" and not exporting
        mask = valid_steps(host_lengths if on_cpu else lengths, features.shape[1])  # (B, T)
        steps, host_steps = lengths, host_lengths
        if self.boundaries is not None:
            features, steps = self.boundaries(features, lengths)  # (B, T + 2, D_in)
            host_steps = None if exporting else host_lengths + 2
            mask = nn.functional.pad(mask, (1, 1))  # tokens at 1..n
        states, layers = self.dropout(features), []
        for lstm in self.encoder[:num_layers]:
            states = self.dropout(run_bilstm(lstm, states, steps, self.config.lstm_implementation,
                                             host_steps))  # (B, T', 2H)
            layers.append(states)
        return TaggerStates(layers, lengths, mask, framed=self.boundaries is not None, host_lengths=host_lengths)

    @add_start_docstrings_to_model_forward(TAGGER_INPUTS_DOCSTRING)
    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
        case_ids: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
    ) -> TokenClassifierOutput:
        config = self.config
        if output_attentions:
            raise ValueError("CoveForTokenClassification has no attention maps to return (output_attentions=True): "
                             "its layers are LSTMs and feed-forward modules")
        return_dict = return_dict if return_dict is not None else config.return_dict
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else config.output_hidden_states
        )
        with HostRead() as host:  # the checks and the lengths: one read from the device
            inputs, attention_mask, lengths = self.check_inputs(input_ids, inputs_embeds, attention_mask,
                                                                token_type_ids)
            if labels is not None:
                self.check_labels(labels, attention_mask)
            self.check_case_ids(case_ids, attention_mask)
            host.read(lengths)
        host_lengths = host.values[0]

        features = self.tagger_inputs(inputs, attention_mask, case_ids, host_lengths)  # w~, (B, T, D_in)
        states = self.encode(features, lengths, host_lengths=host_lengths)  # h1, ..., hL, each (B, T, 2H)
        logits = self.classifier(torch.cat(states.layers, dim=-1), states.mask)  # primary module, (B, T', labels)
        logits = states.tokens(logits)  # (B, T, labels)

        loss = None
        if labels is not None:  # mean over the labelled tokens
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten().long(),
                                               ignore_index=IGNORE_INDEX)
        hidden_states = None
        if output_hidden_states:  # w~ and each layer at the token positions, zero at padding
            at_tokens = states.tokens(states.mask)[..., None]
            hidden_states = (features, *(states.tokens(h) * at_tokens for h in states.layers))
        output = TokenClassifierOutput(loss=loss, logits=logits, hidden_states=hidden_states)
        return output if return_dict else output.to_tuple()


__all__ = ["BIOES_TO_BIO", "CASE_CLASSES", "IGNORE_INDEX", "CoveForTokenClassification", "CoveTaggerPredictionModule",
           "TaggerStates", "bioes_label_to_bio", "casing_class", "case_ids_from_offsets", "has_bioes_labels"]
