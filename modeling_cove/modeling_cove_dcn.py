"""DCN question-answering head: `CoveForQuestionAnswering` (docs/paper.md §4; Xiong et al. 2017, CoVe paper §6).

Question and context arrive as ONE pair sequence from the tokenizer (question = segment 0, context = segment 1 via
`token_type_ids`, right padding). `forward` splits the pair, runs the frozen CoVe encoder on each segment on its
own (the MT-LSTM never sees across the question/context boundary), and then:

    w~ = [GloVe(w); CoVe(w)]                                   eq. 6, the parts of `config.feature_layout("dcn")`
    D', Q' = biLSTM(tanh(W w~ + b))                           eqs. 7-8 with a tanh feed-forward (§4), shared weights
    sentinels d_0, q_0 appended;  Q = tanh(W_Q Q' + b_Q)      question projection
    L = D Q^T;  A^Q = softmax over the document, A^D = softmax over the question (padding masked)
    C^Q = A^Q^T D;  C^D = A^D [Q; C^Q];  U = biLSTM([D; C^D])  coattention + fusion (sentinel column dropped)
    h_i = LSTM(h_{i-1}, [u_s; u_e]);  alpha = HMN_start, beta = HMN_end   dynamic pointing decoder, <= 4 iterations
                                                               (both HMNs on the previous estimates u_s, u_e)

Shapes are written batch-first: D is `(B, m+1, l)` with the sentinel at index 0 (the paper's column order does not
matter for the masked softmaxes, and index 0 keeps padding on the right).

Iterations. Training (`model.train()`): every example runs all `config.dcn_max_iterations` iterations and the loss
is the cumulative cross-entropy over all of them. Inference (`model.eval()`): an example stops as soon as its span
(s_i, e_i) equals (s_{i-1}, e_{i-1}); its scores are then frozen, so a batch gives the same result as each example
alone. The initial guess is s_0 = first context token, e_0 = last context token (the whole context).

Labels. `start_positions`/`end_positions` are positions in the input sequence. A row whose start or end is not a
context token (0, the label transformers' SQuAD preprocessing gives a window without the answer; -100; a position
>= the sequence length; a question or padding position) means "no answer in this window": that row adds nothing to
the loss, as transformers' QA heads ignore out-of-range positions (`CrossEntropyLoss(ignore_index=...)`). The DCN has
no [CLS] position to point at, so such a row is left out of the loss as a whole (start and end, every iteration).

`torch.export`: while tracing, the forward has no Python branch on tensor values (input checks become runtime
assertions, segments are gathered at the full width T, the biLSTMs run unpacked with each row reversed within its
length for the backward direction, the decoder runs every iteration with stopped rows frozen): the exported program
gives the eager results (tested). Its batch size may vary; its sequence length is the traced one (`torch.lstm`
unrolls over time), so pad every input to that length (padding changes no result).

Precomputed features: the encoder is frozen, so run `compute_cove_features(...)` once per dataset and pass the
result as `cove_features=` to skip the MT-LSTM on later epochs (identical results, tested). Only the MT-LSTM
outputs are cached; the word vectors (and char n-grams) are looked up from `input_ids` as usual.

Word vectors instead of ids: `inputs_embeds` (B, T, word_vector_dim) with `attention_mask` and `token_type_ids`
replaces `input_ids` (exactly one of the two): the rows stand for `model.cove.embeddings(input_ids)`, feed both the
MT-LSTM and the GloVe part of w~, and give the results of `input_ids` with those rows (tested). Models with char
n-grams (looked up by id) need `input_ids`.
"""

from dataclasses import dataclass
from typing import Optional

import torch
from torch import nn
from transformers.modeling_outputs import QuestionAnsweringModelOutput

from .configuration_cove import DCN_INPUT_CHOICES, CoveConfig
from .layers import (assemble_head_inputs, encoder_needs_grad, masked_softmax, maxout, pair_segments, require,
                     rows_where, run_bilstm, run_encoder_checked, segment_gather, segment_scatter, valid_steps)
from .embeddings import HostRead, lengths_from_mask, require_features, require_tensor
from .lstm_kernels import to_device_async
from .modeling_cove import CoveModel, CovePreTrainedModel

QUESTION_SEGMENT, CONTEXT_SEGMENT = 0, 1
IGNORE_INDEX = -100  # start/end position that is ignored by the loss (as in nn.CrossEntropyLoss)
# Device types on which the decoder stops early (eval): it reads back which rows converged once per iteration, and
# then scores only the rows still running and stops when none is. Elsewhere (a GPU) it runs every iteration with
# stopped rows frozen and reads nothing back: the same outputs (tests/test_dcn.py). Switched by tests.
EARLY_STOP_READ_DEVICE_TYPES = ("cpu",)


@dataclass
class CoveQuestionAnsweringModelOutput(QuestionAnsweringModelOutput):
    """`QuestionAnsweringModelOutput` of the DCN.

    Args:
        loss (`torch.FloatTensor` of shape `()`, with labels): cumulative cross-entropy over the decoder iterations,
            `sum_i (CE(alpha_i, s*) + CE(beta_i, e*)) / 2`, averaged over the rows whose answer lies in the window
            (start and end are context tokens); other rows are "no answer in this window" and ignored. 0 (with a
            gradient graph) when no row has an answer.
        start_logits, end_logits (`torch.FloatTensor` of shape `(batch, time)`): final-iteration scores over the
            FULL input sequence; every position that is not a context token holds `torch.finfo(dtype).min`.
        hidden_states (`tuple(torch.FloatTensor)`, with `output_hidden_states=True`): three tensors over the FULL
            input sequence (`time` positions, zero at padding):
            `[0]` w~ (eq. 6), the DCN's input per token, `(batch, time, input_size)` (word vectors, the MT-LSTM's
            CoVe outputs and char n-grams per `config.dcn_input`; the MT-LSTM ran on question and context apart);
            `[1]` the shared encoder's output (eqs. 7-8), `(batch, time, dcn_hidden_size)`: D' at context tokens,
            Q' (before the question projection) at question tokens;
            `[2]` U, the coattention fusion biLSTM's output, `(batch, time, 2 * dcn_hidden_size)` at context
            tokens, zero elsewhere.
        attentions (`tuple(torch.FloatTensor)`, with `output_attentions=True`): the coattention maps `(A^Q, A^D)`,
            each `(batch, m + 1, n + 1)` with m / n the longest context / question in the batch (both the
            sequence length `time` in a program made by `torch.export`). Row 0 is the
            document sentinel, row i >= 1 the i-th context token in input order (the i-th position with
            `token_type_ids == 1`); column 0 is the question sentinel, column j >= 1 the j-th question token.
            A^Q is normalised over the document (each column sums to 1 over the rows), A^D over the question (each
            row sums to 1); rows and columns of padding are zero.
        iteration_spans (`torch.LongTensor` of shape `(batch, max_iterations, 2)`): (start, end) argmax of each
            iteration as positions in the input sequence; after an example stopped its last span is repeated.
        num_iterations (`torch.LongTensor` of shape `(batch,)`): iterations each example ran.
    """

    iteration_spans: Optional[torch.LongTensor] = None
    num_iterations: Optional[torch.LongTensor] = None


def cove_feature_size(config: CoveConfig) -> int:
    """Width of the MT-LSTM part of w~ (0 when `config.dcn_input == "vectors"`): 2h, or 4h with
    `cove_output="both"` (first and last layer); the columns of those parts in `config.feature_layout("dcn")`."""
    start, end = config.feature_layout("dcn").span(("first_layer", "top_layer"))
    return end - start


def dcn_input_size(config: CoveConfig) -> int:
    """Width of w~, the per-token input of the DCN, for `config.dcn_input` (default "vectors+cove"):
    [word vectors;] [CoVe;] [char n-grams], `config.feature_layout("dcn").size`."""
    return config.feature_layout("dcn").size


def best_spans(start_logits: torch.Tensor, end_logits: torch.Tensor, max_answer_length: int = 15, top_k: int = 1,
               mask: Optional[torch.Tensor] = None):
    """The `top_k` spans (s, e, p) with s <= e < s + max_answer_length maximising p = P_start(s) * P_end(e).

    start_logits, end_logits: (T,) scores of one example (e.g. a row of the model output); `mask` (T,) bool marks
    the allowed positions (default: positions above the masked-out value). Probabilities are softmaxes over the
    allowed positions. Returns a list of (start, end, probability), best first (fewer if fewer spans exist).
    """
    if start_logits.dim() != 1 or start_logits.shape != end_logits.shape:
        raise ValueError(f"best_spans expects two (T,) score vectors, got {tuple(start_logits.shape)} and "
                         f"{tuple(end_logits.shape)}")
    if max_answer_length < 1 or top_k < 1:
        raise ValueError(f"max_answer_length and top_k must be >= 1, got {max_answer_length} and {top_k}")
    if mask is None:  # (in the logits' own dtype: its most negative value marks "not context")
        mask = start_logits > torch.finfo(start_logits.dtype).min
    mask = mask.to(device=start_logits.device, dtype=torch.bool)
    start_logits, end_logits = start_logits.detach().float(), end_logits.detach().float()  # scores, no graph
    if not bool(mask.any()):
        return []
    neg = torch.finfo(torch.float32).min
    log_p_start = torch.log_softmax(start_logits.masked_fill(~mask, neg), dim=0)
    log_p_end = torch.log_softmax(end_logits.masked_fill(~mask, neg), dim=0)
    # only the band e = s + d, 0 <= d < max_answer_length, can hold an answer: score it as (T, L)
    length = start_logits.shape[0]
    band = min(max_answer_length, length)
    positions = torch.arange(length, device=start_logits.device)
    ends = positions.unsqueeze(1) + positions[:band].unsqueeze(0)  # (T, L): e = s + d
    inside = ends < length
    ends = ends.clamp(max=length - 1)
    allowed = inside & mask.unsqueeze(1) & mask[ends]
    scores = (log_p_start.unsqueeze(1) + log_p_end[ends]).masked_fill(~allowed, float("-inf"))
    k = min(top_k, int(allowed.sum()))
    values, flat = scores.flatten().topk(k)
    return [(int(i) // band, int(i) // band + int(i) % band, float(v.exp())) for v, i in zip(values, flat)]


class HighwayMaxoutNetwork(nn.Module):
    """Highway maxout network (DCN §2.3; hidden l, pool p):

        r   = tanh(W_D [h_i; u_s; u_e])            (no bias)
        m1  = max_p(W_1 [u_t; r] + b_1)
        m2  = max_p(W_2 m1 + b_2)
        out = max_p(W_3 [m1; m2] + b_3)

    `W_1 [u_t; r]` is split as `W_1u u_t + W_1r r`: the `u_t` part does not change between decoder iterations, so
    `project_document(U)` computes it once per forward and `forward` reuses it (same numbers, 4x less work).
    `dropout` > 0 (`config.dcn_feedforward_dropout`) drops the input of every layer not dropped already: h_i before
    W_D, r before W_1, m1 before W_2 and W_3 (one mask), m2 before W_3 (u_t, u_s, u_e come from the dropped U).
    """

    def __init__(self, hidden_size: int, pool_size: int, dropout: float = 0.0):
        super().__init__()
        self.hidden_size, self.pool_size = hidden_size, pool_size
        self.dropout = nn.Dropout(dropout)
        self.state_projection = nn.Linear(5 * hidden_size, hidden_size, bias=False)  # W_D
        self.maxout1 = nn.Linear(3 * hidden_size, hidden_size * pool_size)  # W_1, b_1 over [u_t; r]
        self.maxout2 = nn.Linear(hidden_size, hidden_size * pool_size)  # W_2, b_2
        self.maxout3 = nn.Linear(2 * hidden_size, pool_size)  # W_3, b_3 over [m1; m2]

    def project_document(self, document: torch.Tensor) -> torch.Tensor:
        """W_1u u_t + b_1 for every position: (B, m, 2l) -> (B, m, l*p)."""
        two_l = 2 * self.hidden_size
        return nn.functional.linear(document, self.maxout1.weight[:, :two_l], self.maxout1.bias)

    def forward(self, document_projection: torch.Tensor, state: torch.Tensor, u_start: torch.Tensor,
                u_end: torch.Tensor, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        """document_projection (B, m, l*p) from `project_document`, or (N, l*p) of N positions of the rows `rows`
        (N,); state h_i (B, l); u_start, u_end (B, 2l). Returns scores (B, m), or (N,) for positions."""
        r = torch.tanh(self.state_projection(torch.cat([self.dropout(state), u_start, u_end], dim=-1)))  # (B, l)
        r_part = nn.functional.linear(self.dropout(r), self.maxout1.weight[:, 2 * self.hidden_size:])  # W_1r r
        r_part = r_part.unsqueeze(1) if rows is None else r_part[rows]  # (B, 1, l*p) over m, or (N, l*p)
        m1 = self.dropout(maxout(document_projection + r_part, self.pool_size))  # (B, m, l) or (N, l)
        m2 = maxout(self.maxout2(m1), self.pool_size)
        return maxout(self.maxout3(torch.cat([m1, self.dropout(m2)], dim=-1)), self.pool_size).squeeze(-1)


class CoattentionEncoder(nn.Module):
    """Document/question encoders (eqs. 7-8, tanh feed-forward), sentinels, coattention and the fusion biLSTM.
    `config.dcn_feedforward_dropout` also drops w~ before the feed-forward g."""

    def __init__(self, config: CoveConfig, input_size: int):
        super().__init__()
        hidden = config.dcn_hidden_size
        self.config = config  # `config.lstm_implementation` is read at every call (`set_lstm_implementation`)
        self.dropout = nn.Dropout(config.dcn_dropout)
        self.input_dropout = nn.Dropout(config.dcn_dropout if config.dcn_feedforward_dropout else 0.0)
        self.feedforward = nn.Linear(input_size, hidden)  # g(w~) = tanh(W w~ + b)
        self.encoder_lstm = nn.LSTM(hidden, hidden // 2, batch_first=True, bidirectional=True)  # shared D/Q
        self.document_sentinel = nn.Parameter(torch.zeros(hidden))
        self.question_sentinel = nn.Parameter(torch.zeros(hidden))
        self.question_projection = nn.Linear(hidden, hidden)  # Q = tanh(W_Q Q' + b_Q)
        self.fusion_lstm = nn.LSTM(3 * hidden, hidden, batch_first=True, bidirectional=True)

    def encode(self, features: torch.Tensor, mask: torch.Tensor,
               host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """eqs. 7-8: biLSTM(tanh(W w~ + b)); (B, L, input) -> (B, L, l), zero at padding. `host_lengths`: the mask's
        row sums on the host, where the forward has them."""
        projected = torch.tanh(self.feedforward(self.input_dropout(features)))  # g(w~), (B, L, l)
        return self.dropout(run_bilstm(self.encoder_lstm, projected, mask.sum(dim=1), self.config.lstm_implementation,
                                       host_lengths))

    @staticmethod
    def with_sentinel(x: torch.Tensor, mask: torch.Tensor, sentinel: torch.Tensor):
        """Put the trainable sentinel at index 0: (B, L, l) -> (B, L+1, l), mask (B, L+1) (sentinel always on)."""
        x = torch.cat([sentinel.expand(x.shape[0], 1, -1), x], dim=1)
        return x, torch.cat([mask.new_ones(mask.shape[0], 1), mask], dim=1)

    @staticmethod
    def coattention(document: torch.Tensor, document_mask: torch.Tensor, question: torch.Tensor,
                    question_mask: torch.Tensor):
        """document (B, m+1, l), question (B, n+1, l) with sentinels; masks bool. Returns C^D (B, m+1, 2l),
        A^Q (B, m+1, n+1) (normalised over documents) and A^D (B, m+1, n+1) (normalised over questions)."""
        affinity = document @ question.transpose(1, 2)  # L = D Q^T, (B, m+1, n+1)
        attention_q = masked_softmax(affinity, document_mask.unsqueeze(2), dim=1)  # A^Q: over the document
        attention_d = masked_softmax(affinity, question_mask.unsqueeze(1), dim=2)  # A^D: over the question
        summary_q = attention_q.transpose(1, 2) @ document  # C^Q = D A^Q, (B, n+1, l)
        context_d = attention_d @ torch.cat([question, summary_q], dim=-1)  # C^D = [Q; C^Q] A^D, (B, m+1, 2l)
        return context_d, attention_q, attention_d

    def forward(self, document_features, document_mask, question_features, question_mask, document_lengths=None,
                question_lengths=None):
        """Features (B, m, input) / (B, n, input) with bool masks (and their row sums on the host, where the forward
        has them). Returns U (B, m, 2l), D' (B, m, l), Q' (B, n, l) (zero at padding), A^Q and A^D (B, m+1, n+1)
        with sentinels at index 0 and zero rows/columns of padding."""
        encoded_document = self.encode(document_features, document_mask, document_lengths)  # D' (B, m, l)
        encoded_question = self.encode(question_features, question_mask, question_lengths)  # Q' (B, n, l)
        document, document_mask_s = self.with_sentinel(encoded_document, document_mask, self.document_sentinel)
        question, question_mask_s = self.with_sentinel(encoded_question, question_mask, self.question_sentinel)
        question = torch.tanh(self.question_projection(question))  # Q = tanh(W_Q Q' + b_Q), sentinel included
        context_d, attention_q, attention_d = self.coattention(document, document_mask_s, question, question_mask_s)
        fusion_input = torch.cat([document, context_d], dim=-1)[:, 1:]  # [D; C^D] without the sentinel column
        lengths = document_mask.sum(dim=1)
        fused = self.dropout(run_bilstm(self.fusion_lstm, fusion_input, lengths, self.config.lstm_implementation,
                                        document_lengths))  # U, (B, m, 2l)
        pairs = (document_mask_s.unsqueeze(2) & question_mask_s.unsqueeze(1)).to(attention_q.dtype)  # (B, m+1, n+1)
        return fused, encoded_document, encoded_question, attention_q * pairs, attention_d * pairs


class DynamicPointingDecoder(nn.Module):
    """h_i = LSTM(h_{i-1}, [u_{s_{i-1}}; u_{e_{i-1}}]); alpha = HMN_start(u_t, h_i, u_{s_{i-1}}, u_{e_{i-1}}),
    s_i = argmax alpha; beta = HMN_end(u_t, h_i, u_{s_{i-1}}, u_{e_{i-1}}), e_i = argmax beta (DCN §2.3).

    With `config.dcn_hmn_end_previous_start=False` (configs saved before that field) HMN_end reads the start just
    chosen, u_{s_i}, instead (docs/deviations.md)."""

    def __init__(self, config: CoveConfig):
        super().__init__()
        hidden = config.dcn_hidden_size
        self.max_iterations = config.dcn_max_iterations
        self.end_reads_previous_start = config.dcn_hmn_end_previous_start
        self.cell = nn.LSTMCell(4 * hidden, hidden)
        hmn_dropout = config.dcn_dropout if config.dcn_feedforward_dropout else 0.0
        self.hmn_start = HighwayMaxoutNetwork(hidden, config.dcn_pool_size, hmn_dropout)
        self.hmn_end = HighwayMaxoutNetwork(hidden, config.dcn_pool_size, hmn_dropout)

    def forward(self, document: torch.Tensor, mask: torch.Tensor, early_stop: bool,
                host_mask: Optional[torch.Tensor] = None):
        """document U (B, m, 2l), mask (B, m) bool (`host_mask`: the same on the host, where the forward has it).
        Returns per-iteration start/end scores (I, B, m) (masked with finfo.min), spans (B, I, 2) doc-local, and
        `active` (I, B) bool: whether each example ran iteration i. Stopping early (`early_stop`) on
        EARLY_STOP_READ_DEVICE_TYPES, I is the iterations the last row ran; elsewhere every iteration runs (stopped
        rows frozen, the same outputs) and nothing is read back."""
        batch, _, _ = document.shape
        rows = torch.arange(batch, device=document.device)
        exporting = torch.compiler.is_exporting()
        # the HMNs score the real positions only (padding is masked out anyway; windows of a batch differ in length)
        # and, stopping early, only the rows still running; under torch.export every position (no data-dependent
        # shapes), the plain form and the oracle of the other (tests/test_dcn.py). The positions are found on the
        # host and go to the device without a wait.
        positions = host_positions = None
        if not exporting:
            host_positions = (mask.cpu() if host_mask is None else host_mask).nonzero(as_tuple=True)  # (N,), (N,)
            positions = tuple(to_device_async(index, document.device) for index in host_positions)
        scored = document if positions is None else document[positions]  # (B, m, 2l) or (N, 2l)
        proj_start = self.hmn_start.project_document(scored)  # (B, m, l*p) or (N, l*p), shared by all iterations
        proj_end = self.hmn_end.project_document(scored)
        start = torch.zeros(batch, dtype=torch.long, device=document.device)  # s_0 = first context token
        end = mask.sum(dim=1) - 1  # e_0 = last context token
        h = document.new_zeros(batch, self.cell.hidden_size)
        c = document.new_zeros(batch, self.cell.hidden_size)
        done = torch.zeros(batch, dtype=torch.bool, device=document.device)
        reads_back = early_stop and not exporting and document.device.type in EARLY_STOP_READ_DEVICE_TYPES
        done_on_host = torch.zeros(batch, dtype=torch.bool)  # `done` as last read back (reads_back)
        start_scores, end_scores, spans, active = [], [], [], []
        alpha = beta = None
        for _ in range(self.max_iterations):
            u_start, u_end = document[rows, start], document[rows, end]  # (B, 2l)
            h_new, c_new = self.cell(torch.cat([u_start, u_end], dim=-1), (h, c))
            live = None  # (N',) the indices among the positions of the rows still running, once a row stopped
            if reads_back and bool(done_on_host.any()):  # (done only changes then)
                live = to_device_async((~done_on_host)[host_positions[0]].nonzero().flatten(), document.device)
            # (B, m), finfo.min off the context; autocast's dtype under autocast
            alpha_new = self.scores(self.hmn_start, proj_start, positions, live, mask, h_new, u_start, u_end)
            start_new = alpha_new.argmax(dim=1)
            u_start_end = u_start if self.end_reads_previous_start else document[rows, start_new]  # (B, 2l)
            beta_new = self.scores(self.hmn_end, proj_end, positions, live, mask, h_new, u_start_end, u_end)
            end_new = beta_new.argmax(dim=1)
            keep = done.unsqueeze(1)  # finished examples keep their scores, span and state
            alpha = alpha_new if alpha is None else torch.where(keep, alpha, alpha_new)
            beta = beta_new if beta is None else torch.where(keep, beta, beta_new)
            h, c = torch.where(keep, h, h_new), torch.where(keep, c, c_new)
            converged = (start_new == start) & (end_new == end)
            start, end = torch.where(done, start, start_new), torch.where(done, end, end_new)
            active.append(~done)
            start_scores.append(alpha)
            end_scores.append(beta)
            spans.append(torch.stack([start, end], dim=1))
            if early_stop:
                done = done | converged
                # stopped rows are frozen, so running on changes nothing: while exporting and off
                # EARLY_STOP_READ_DEVICE_TYPES, no data-dependent break; else one read of `done` per iteration
                if reads_back:
                    done_on_host = done.cpu()
                    if bool(done_on_host.all()):
                        break
        while len(spans) < self.max_iterations:  # pad the record of stopped batches with the final span
            spans.append(spans[-1])
        return torch.stack(start_scores), torch.stack(end_scores), torch.stack(spans, dim=1), torch.stack(active)

    @staticmethod
    def scores(hmn: HighwayMaxoutNetwork, projection: torch.Tensor, positions: Optional[tuple],
               live: Optional[torch.Tensor], mask: torch.Tensor, state: torch.Tensor, u_start: torch.Tensor,
               u_end: torch.Tensor) -> torch.Tensor:
        """`hmn`'s scores (B, m), finfo.min where `mask` is False: over every position (`positions` None, projection
        (B, m, l*p)) or over the real ones (`positions`: their rows and columns (N,), projection (N, l*p)), where
        `live` (N',), the indices of those of rows still running, is given only over them (the others: finfo.min,
        which the caller replaces by the scores those rows stopped with)."""
        if positions is None:
            scores = hmn(projection, state, u_start, u_end)
            return scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
        position_rows, position_columns = positions
        if live is not None:  # the gather a boolean mask makes, from indices found on the host
            projection = projection.index_select(0, live)
            position_rows, position_columns = position_rows.index_select(0, live), position_columns.index_select(0, live)
        values = hmn(projection, state, u_start, u_end, position_rows)  # (N',)
        return values.new_full(mask.shape, torch.finfo(values.dtype).min).index_put(
            (position_rows, position_columns), values)


class CoveForQuestionAnswering(CovePreTrainedModel):
    """CoVe + DCN for extractive question answering (SQuAD). See the module docstring for the equations."""

    def __init__(self, config: CoveConfig):
        super().__init__(config)
        mode = getattr(config, "dcn_input", "vectors+cove")
        if mode not in DCN_INPUT_CHOICES:
            raise ValueError(f"dcn_input must be one of {DCN_INPUT_CHOICES}, got {mode!r}")
        if config.dcn_hidden_size < 2 or config.dcn_hidden_size % 2:
            raise ValueError(f"dcn_hidden_size must be even (a biLSTM of l/2 per direction), got "
                             f"{config.dcn_hidden_size}")
        if config.dcn_pool_size < 1 or config.dcn_max_iterations < 1 or config.dcn_max_answer_length < 1:
            raise ValueError("dcn_pool_size, dcn_max_iterations and dcn_max_answer_length must be >= 1")
        self.dcn_input = mode
        self.input_size = dcn_input_size(config)
        self.cove_size = cove_feature_size(config)
        self.cove = CoveModel(config)
        self.coattention_encoder = CoattentionEncoder(config, self.input_size)
        self.decoder = DynamicPointingDecoder(config)
        self.post_init()

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, CoattentionEncoder):
            r = self.config.initializer_range
            nn.init.uniform_(module.document_sentinel, -r, r)
            nn.init.uniform_(module.question_sentinel, -r, r)

    # ----- inputs ---------------------------------------------------------------------------------------------

    def segment_masks(self, attention_mask: torch.Tensor, token_type_ids: Optional[torch.Tensor]):
        """(question mask, context mask), each (B, T) bool. Clear errors for missing segments."""
        if token_type_ids is None:
            raise ValueError(
                "CoveForQuestionAnswering needs token_type_ids to tell the question (0) from the context (1): "
                "tokenize question and context as a pair, tokenizer(question, context)"
            )
        question, context = pair_segments(attention_mask, token_type_ids)  # types QUESTION_ / CONTEXT_SEGMENT
        for name, segment in (("question", question), ("context", context)):
            missing = ~segment.any(dim=1)  # (B,)
            require(~missing, f"a row has no {name} tokens",
                    lambda missing=missing, name=name: f"rows {rows_where(missing)} have no {name} tokens (empty "
                    f"{name} after tokenization?)")  # (bound now: the check is read after the loop)
        return question, context

    def run_cove(self, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """MT-LSTM outputs used by the DCN for one right-padded segment: ids (B, L) or word vectors (B, L, D) with
        its (B, L) mask -> (B, L, cove_size), zero at padding (the last layer; first and last with
        `cove_output="both"`). For callers with segments of their own (the SQuAD feature cache): checks them first,
        as `forward` checks its inputs. With `config.dcn_input="vectors"` (no CoVe read) a ValueError."""
        if not self.cove_size:
            raise ValueError("run_cove: this model reads no CoVe (config.dcn_input='vectors'), so it has no MT-LSTM "
                             "features to compute")
        with HostRead() as host:  # the checks and the lengths: one read
            self.checked_tokens(None if tokens.is_floating_point() else tokens,
                                tokens if tokens.is_floating_point() else None, mask)
            host.read(mask.sum(dim=1))
        return self.segment_cove(tokens, mask, host.values[0])

    def segment_cove(self, tokens: torch.Tensor, mask: torch.Tensor,
                     host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """`run_cove` of a segment cut from inputs `forward` has checked already: the encoder does not check it
        again. eq. 5: CoVe(w) = MT-LSTM(GloVe(w)), (B, L, cove_size). `host_lengths`: the mask's row sums on the
        host, where the caller has them."""
        with torch.set_grad_enabled(encoder_needs_grad(self.cove, tokens)):
            hidden = run_encoder_checked(self.cove, tokens, mask.long(), True, host_lengths).hidden_states
            # the MT-LSTM parts of `config.feature_layout("dcn")`, in its order: [layer 1;] top layer
            layout = self.config.feature_layout("dcn")
            layers = [hidden[k] for k in layout.mt_lstm_layers(self.config.num_hidden_layers)]
            return torch.cat(layers, dim=-1) if len(layers) > 1 else layers[0]

    def word_inputs(self, tokens: torch.Tensor, mask: torch.Tensor, cove: Optional[torch.Tensor]):
        """eq. 6, w~ = [GloVe(w); CoVe(w)] (per `config.dcn_input`, + char n-grams; `layers.assemble_head_inputs`
        on `config.feature_layout("dcn")`): ids (B, L) or word vectors (B, L, D), with `cove` (B, L, cove_size)
        holding the MT-LSTM parts side by side ([layer 1;] top layer; None without them) -> (B, L, input_size)."""
        layout, hidden = self.config.feature_layout("dcn"), None
        if cove is not None:  # the parts back at their places in the encoder's hidden states (1: layer 1, L: top)
            top = self.config.num_hidden_layers
            hidden = [None] * (top + 1)
            names = [name for name in layout.names if name in ("first_layer", "top_layer")]
            widths = [end - start for name, start, end in layout.parts if name in names]
            for name, part in zip(names, cove.split(widths, dim=-1)):
                hidden[1 if name == "first_layer" else top] = part
        return assemble_head_inputs(self.config, "dcn", self.cove, tokens, mask, hidden)

    def checked_tokens(self, input_ids: Optional[torch.Tensor], inputs_embeds: Optional[torch.Tensor],
                       attention_mask: Optional[torch.Tensor]):
        """Up-front checks of exactly one of `input_ids` (B, T) / `inputs_embeds` (B, T, word_vector_dim). Returns
        (the ids or the word vectors in the model's dtype, the (B, T) attention mask)."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("CoveForQuestionAnswering needs exactly one of input_ids and inputs_embeds (word-vector "
                             "rows), got " + ("both" if input_ids is not None else "neither"))
        if inputs_embeds is not None:
            attention_mask = self.cove.check_inputs_embeds(inputs_embeds, attention_mask)
            tokens = inputs_embeds.to(self.cove.embeddings.weight.dtype)
        else:
            tokens, attention_mask = input_ids, self.cove.check_inputs(input_ids, attention_mask)
        lengths_from_mask(attention_mask)  # right padding, as in CoveModel (a ValueError naming it otherwise)
        return tokens, attention_mask

    def compute_cove_features(self, input_ids: Optional[torch.Tensor] = None,
                              attention_mask: Optional[torch.Tensor] = None,
                              token_type_ids: Optional[torch.Tensor] = None,
                              inputs_embeds: Optional[torch.Tensor] = None) -> Optional[torch.Tensor]:
        """MT-LSTM features at every position of the pair sequence, (B, T, cove_size), zero at padding: the
        encoder runs on the question and on the context separately. Pass them back as `cove_features=` (the
        encoder is frozen; a frozen encoder also stays in eval mode, so there is no encoder dropout). None when
        `config.dcn_input == "vectors"` (no MT-LSTM). `inputs_embeds` (B, T, word_vector_dim) may replace
        `input_ids`."""
        if self.cove_size == 0:
            return None
        with HostRead() as host:  # the checks and the segments' lengths: one read
            tokens, attention_mask = self.checked_tokens(input_ids, inputs_embeds, attention_mask)
            segments = self.segment_masks(attention_mask, token_type_ids)
            for seg in segments:
                host.read(seg.sum(dim=1))
        features = None
        for seg, host_lengths in zip(segments, host.values):
            segment, positions, mask = segment_gather(tokens, seg, host_lengths)
            seg_features = self.segment_cove(segment, mask, host_lengths)  # (B, L, C), zero at padding
            if features is None:
                features = seg_features.new_zeros(*attention_mask.shape, seg_features.shape[-1])
            index = positions.unsqueeze(-1).expand(-1, -1, seg_features.shape[-1])
            features = features.scatter_add(1, index, seg_features)  # padding slots add zeros
        return features

    def context_labels(self, positions: Optional[torch.Tensor], context_positions: torch.Tensor,
                       context_mask: torch.Tensor, name: str) -> Optional[torch.Tensor]:
        """Map start/end positions in the input sequence (B,) to indices among the context tokens. A position that
        is not a context token (0, -100, >= the sequence length, a question or padding position) becomes
        IGNORE_INDEX: "no answer in this window"."""
        if positions is None:
            return None
        require_tensor(positions, name)
        if positions.is_floating_point() or positions.is_complex() or positions.dtype == torch.bool:
            raise TypeError(f"{name} must hold integer positions, got dtype {positions.dtype}")
        positions = positions.reshape(-1).to(device=context_positions.device, dtype=torch.long)
        if positions.shape[0] != context_positions.shape[0]:
            raise ValueError(f"{name} has {positions.shape[0]} entries for a batch of {context_positions.shape[0]}")
        hits = (context_positions == positions.unsqueeze(1)) & context_mask  # (B, m)
        return torch.where(hits.any(dim=1), hits.long().argmax(dim=1), torch.full_like(positions, IGNORE_INDEX))

    def check_cove_features(self, cove_features: Optional[torch.Tensor], shape: torch.Size):
        """`cove_features`, when given, must be `compute_cove_features`' (B, T, cove_size) for inputs of `shape`."""
        if cove_features is None:
            return
        require_features(cove_features, "cove_features", self.cove.embeddings.weight.dtype)
        expected = (*shape, self.cove_size)
        if self.cove_size == 0 or tuple(cove_features.shape) != expected:
            raise ValueError(
                f"cove_features must have shape {expected} (from compute_cove_features), got "
                f"{tuple(cove_features.shape)}" + (" (dcn_input='vectors' uses no CoVe)" if not self.cove_size else "")
            )

    def segment_features(self, tokens: torch.Tensor, mask: torch.Tensor, cove_features: Optional[torch.Tensor],
                         segment: torch.Tensor, host_lengths: Optional[torch.Tensor] = None) -> torch.Tensor:
        """eq. 6, w~ of one segment (question or context) of the pair: its tokens left-aligned, ids (B, L) or word
        vectors (B, L, D), with `mask` (B, L) (`host_lengths`: its row sums on the host); CoVe from `cove_features`
        (B, T, cove_size) at the `segment` (B, T) when given, else the MT-LSTM run on the segment alone. Returns
        (B, L, input_size)."""
        cove = None
        if cove_features is not None:
            cove = segment_gather(cove_features, segment, host_lengths)[0]  # (B, L, cove_size)
        elif self.cove_size:
            cove = self.segment_cove(tokens, mask, host_lengths)  # eq. 5: CoVe(w) = MT-LSTM(GloVe(w)), (B, L, C)
        return self.word_inputs(tokens, mask, cove)

    @staticmethod
    def loss(start_scores: torch.Tensor, end_scores: torch.Tensor, active: torch.Tensor,
             start_labels: Optional[torch.Tensor], end_labels: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
        """The cumulative cross-entropy over the decoder iterations each example ran, `sum_i (CE(alpha_i, s*) +
        CE(beta_i, e*)) / 2`, averaged over the rows whose answer lies in the window; scores (I, B, m), `active`
        (I, B), labels (B,) among the context tokens. None without labels."""
        if start_labels is None:
            return None
        # a row with start or end outside the context has no answer in this window: left out as a whole
        labelled = (start_labels != IGNORE_INDEX) & (end_labels != IGNORE_INDEX)  # (B,)
        start_labels = start_labels.masked_fill(~labelled, IGNORE_INDEX)
        end_labels = end_labels.masked_fill(~labelled, IGNORE_INDEX)
        ce = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX, reduction="none")
        total = start_scores.new_zeros(())
        for alpha, beta, ran in zip(start_scores, end_scores, active):
            per_example = (ce(alpha, start_labels) + ce(beta, end_labels)) / 2  # (B,)
            total = total + (per_example * (ran & labelled).to(per_example.dtype)).sum()
        return total / labelled.sum().clamp(min=1)

    @staticmethod
    def full_sequence_scores(scores: torch.Tensor, context_positions: torch.Tensor, context_mask: torch.Tensor,
                             context_segment: torch.Tensor) -> torch.Tensor:
        """Context-token scores (B, m) at their positions of the input sequence (B, T); every position that is not
        a context token holds the most negative value of the scores' dtype (autocast's under autocast)."""
        neg = torch.finfo(scores.dtype).min
        full = scores.new_full(context_segment.shape, neg)
        full = full.scatter(1, context_positions, scores.masked_fill(~context_mask, neg))
        # padding slots of context_positions point at arbitrary positions: restore "not context" there
        return full.masked_fill(~context_segment, neg)

    @staticmethod
    def full_sequence_states(time: int, word_inputs: tuple, encoded: tuple, document: torch.Tensor,
                             question_at: tuple, context_at: tuple) -> tuple:
        """`hidden_states` over the full input sequence (B, T, ·), zero where they do not apply: w~ (question,
        context), the shared encoder's Q' / D' (question, context), U (context); `*_at` = (positions, mask) (B, L)."""
        def place(question, context):
            return segment_scatter(question, *question_at, time) + segment_scatter(context, *context_at, time)

        return place(*word_inputs), place(*encoded), segment_scatter(document, *context_at, time)


    # ----- forward --------------------------------------------------------------------------------------------

    def forward(
        self,
        input_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        token_type_ids: Optional[torch.Tensor] = None,
        cove_features: Optional[torch.Tensor] = None,
        start_positions: Optional[torch.Tensor] = None,
        end_positions: Optional[torch.Tensor] = None,
        output_attentions: Optional[bool] = None,
        output_hidden_states: Optional[bool] = None,
        return_dict: Optional[bool] = None,
        inputs_embeds: Optional[torch.Tensor] = None,
    ) -> CoveQuestionAnsweringModelOutput:
        """
        input_ids (B, T): question + context as one pair sequence, right-padded.
        inputs_embeds (B, T, word_vector_dim): word-vector rows instead of `input_ids` (exactly one of the two; the
            results of the ids whose `model.cove.embeddings` rows these are). Needs no char n-grams.
        attention_mask (B, T): 1 = token (default: all). token_type_ids (B, T): 0 = question, 1 = context (required).
        cove_features (B, T, cove_size): precomputed `compute_cove_features(...)`; skips the MT-LSTM.
        start_positions, end_positions (B,): answer span as input positions. A row whose start or end is not a
            context token (e.g. 0, -100, >= T) has no answer in this window and is ignored by the loss.
        output_attentions: also return the coattention maps (A^Q, A^D); output_hidden_states: also return w~, the
            encoder's D'/Q' and U (see `CoveQuestionAnsweringModelOutput`). Defaults: the config's.
        return_dict: False returns `output.to_tuple()` (the fields that are not None, in order).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        output_attentions = output_attentions if output_attentions is not None else self.config.output_attentions
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        # up-front checks, once per input: nothing below checks them again; with the segments' lengths, one read
        with HostRead() as host:
            tokens, attention_mask = self.checked_tokens(input_ids, inputs_embeds, attention_mask)  # (B, T[, D])
            if (start_positions is None) != (end_positions is None):
                raise ValueError("pass both start_positions and end_positions, or neither")
            question_seg, context_seg = self.segment_masks(attention_mask, token_type_ids)  # (B, T) bool each
            self.check_cove_features(cove_features, attention_mask.shape)
            host.read(question_seg.sum(dim=1)), host.read(context_seg.sum(dim=1))
        question_lengths, context_lengths = host.values  # (B,) each, on the host
        question_tokens, question_positions, question_mask = segment_gather(tokens, question_seg,
                                                                            question_lengths)  # (B, n[, D])
        context_tokens, context_positions, context_mask = segment_gather(tokens, context_seg,
                                                                         context_lengths)  # (B, m[, D])
        start_labels = self.context_labels(start_positions, context_positions, context_mask, "start_positions")
        end_labels = self.context_labels(end_positions, context_positions, context_mask, "end_positions")

        # eq. 6: w~ per segment, the MT-LSTM run on the question and on the context apart; (B, n, C), (B, m, C)
        question_features = self.segment_features(question_tokens, question_mask, cove_features, question_seg,
                                                  question_lengths)
        context_features = self.segment_features(context_tokens, context_mask, cove_features, context_seg,
                                                 context_lengths)
        # eqs. 7-8, coattention and fusion: U (B, m, 2l), D' (B, m, l), Q' (B, n, l), A^Q and A^D (B, m+1, n+1)
        document, encoded_document, encoded_question, attention_q, attention_d = self.coattention_encoder(
            context_features, context_mask, question_features, question_mask, context_lengths, question_lengths)
        # dynamic pointing decoder: scores (I, B, m) per iteration, spans (B, I, 2), `active` (I, B)
        start_scores, end_scores, spans, active = self.decoder(
            document, context_mask, early_stop=not self.training,
            host_mask=valid_steps(context_lengths, context_mask.shape[1]))

        hidden_states = None
        if output_hidden_states:  # each over the full input sequence, zero where it does not apply
            hidden_states = self.full_sequence_states(
                attention_mask.shape[1], (question_features, context_features), (encoded_question, encoded_document),
                document, (question_positions, question_mask), (context_positions, context_mask))
        output = CoveQuestionAnsweringModelOutput(
            loss=self.loss(start_scores, end_scores, active, start_labels, end_labels),
            start_logits=self.full_sequence_scores(start_scores[-1], context_positions, context_mask, context_seg),
            end_logits=self.full_sequence_scores(end_scores[-1], context_positions, context_mask, context_seg),
            hidden_states=hidden_states,
            attentions=(attention_q, attention_d) if output_attentions else None,
            iteration_spans=context_positions.gather(1, spans.flatten(1)).view_as(spans),  # input positions
            num_iterations=active.long().sum(dim=0),
        )
        return output if return_dict else output.to_tuple()


__all__ = ["CoveForQuestionAnswering", "CoveQuestionAnsweringModelOutput", "HighwayMaxoutNetwork",
           "CoattentionEncoder", "DynamicPointingDecoder", "best_spans"]
