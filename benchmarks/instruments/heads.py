"""Speed of the task heads (BCN `CoveForSequenceClassification`, DCN `CoveForQuestionAnswering`) side by side with
a plain-PyTorch roofline of the same layers, in one process. Random weights: speed does not depend on them.

Four sections: BCN on single sentences (SST-2 test), BCN on sentence pairs (SNLI dev), DCN on SQuAD dev windows, the
tagger (`CoveForTokenClassification` as `cove-train-tagger` builds it) on CoNLL-2000 test sentences.
Each times three things, each on three sides run in interleaved rounds (ours["auto"], ours["reference"], roofline):

- `pipeline`: inference as a user calls it, `pipeline("text-classification")` / `pipeline("cove-question-answering")`
  / `pipeline("cove-token-classification")` on the inputs in arrival order (the roofline side tokenizes the same
  batches and runs them: the stock text-classification pipeline batches the list as it comes, ours run it longest
  first, `lstm_kernels.order_longest_first`);
- `sorted`: inference on length-sorted batches, `model(**batch)` under `torch.inference_mode` (BCN: the tokenizer call
  `tokenizer(batch, padding=True)` included on both sides; DCN: pre-tokenized windows, no tokenizer on either side);
- `train`: one training step per batch as the CLI's Trainer runs it, with the CoVe features from the feature cache
  as the CLI passes them (batches collated beforehand on both sides): forward with labels, backward, gradient
  clipping at `max_grad_norm`, the optimizer step (the BCN's and DCN's: the Trainer's optimizer class and arguments;
  the tagger's: the tagging CLI's `make_optimizer`, on both sides), zero_grad; on
  the batches the CLI trains on: the BCN's in arrival order (the classifier samples at random), the DCN's and the
  tagger's grouped by length (as `cove-train-qa` and `cove-train-tagger` batch).

The roofline (`RooflineBCN`, `RooflineDCN`) is the same layers written plainly: raw `nn.LSTM`s (weights copied from
the model), the same Linear / bmm / softmax / pooling / maxout / batch norm / dropout, on uniform-length batches holding
the same tokens (a batch of B texts with N real tokens -> B rows of round(N / B) tokens; each text of a pair and each
segment of a window at its own mean length): no masks, no packing, no padding. The DCN roofline runs the decoder for
exactly as many iterations as the model ran on that batch (`num_iterations` of its output, the batch's maximum).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import nn

from modeling_cove.lstm_kernels import order_longest_first
from .common import synchronize

SIDES = ("auto", "reference", "roofline")  # ours under each lstm_implementation, then the roofline
SECTIONS = ("bcn_single", "bcn_pair", "dcn", "tagger")
KINDS = ("pipeline", "sorted", "train")
SIZES = {"full": {"sst2": 1024, "snli": 1024, "squad": 256, "conll2000": 1024},
         "quick": {"sst2": 96, "snli": 96, "squad": 32, "conll2000": 96}}


# ----------------------------------------------------------------------------------------------------------------
# the roofline: the heads' layers in plain PyTorch
# ----------------------------------------------------------------------------------------------------------------


def copied(module: nn.Module, make: Callable[[], nn.Module]) -> nn.Module:
    """A fresh module `make()` holding `module`'s parameters and buffers (copied, not shared)."""
    fresh = make()
    fresh.load_state_dict(module.state_dict())
    return fresh


def copied_lstm(lstm: nn.LSTM) -> nn.LSTM:
    """A batch-first `nn.LSTM` of `lstm`'s sizes holding its weights."""
    return copied(lstm, lambda: nn.LSTM(lstm.input_size, lstm.hidden_size, num_layers=lstm.num_layers,
                                        bidirectional=lstm.bidirectional, batch_first=True))


def copied_linear(linear: nn.Linear) -> nn.Linear:
    return copied(linear, lambda: nn.Linear(linear.in_features, linear.out_features, bias=linear.bias is not None))


def maxout(x: torch.Tensor, pool: int) -> torch.Tensor:
    """(..., units * pool) -> (..., units): the max over consecutive groups of `pool` channels."""
    return x.view(*x.shape[:-1], x.shape[-1] // pool, pool).max(dim=-1).values


class RooflineWordInputs(nn.Module):
    """w~ = [GloVe(w); CoVe(w)] (eq. 6) of uniform rows: an `nn.Embedding` lookup and the MT-LSTM as one raw
    `nn.LSTM(300, 300, 2, bidirectional)` call (its top layer), or the cached CoVe states when given. Frozen, as in
    the heads."""

    def __init__(self, model):
        super().__init__()
        self.embeddings = nn.Embedding.from_pretrained(model.cove.embeddings.weight.detach().clone(), freeze=True)
        self.mt_lstm = copied_lstm(model.cove.encoder.rnn).requires_grad_(False)

    def forward(self, ids: torch.Tensor, cove: Optional[torch.Tensor] = None) -> torch.Tensor:
        """ids (B, T); cove (B, T, 600) cached MT-LSTM states or None -> (B, T, 900)."""
        vectors = self.embeddings(ids)  # (B, T, 300)
        if cove is None:
            with torch.no_grad():
                cove = self.mt_lstm(vectors)[0]  # (B, T, 600)
        return torch.cat([vectors, cove], dim=-1)


class RooflineBCN(nn.Module):
    """The BCN of `model` (a `CoveForSequenceClassification` reading "vectors+cove") on uniform batches: ReLU
    feed-forward, encoder biLSTM (eqs. 7-8), biattention (eqs. 9-10), the two integrator biLSTMs (eqs. 11-12), the
    config's poolings (eqs. 13-16) and the batch-normalised maxout network, with the model's dropouts (a single text
    gets its own dropout mask for y in training when `config.bcn_independent_dropout`, as in the model)."""

    def __init__(self, model):
        super().__init__()
        config = model.config
        if config.bcn_input != "vectors+cove" or config.char_ngram_dim:
            raise ValueError("the BCN roofline reads [GloVe; CoVe] (bcn_input='vectors+cove', no char n-grams)")
        self.words = RooflineWordInputs(model)
        self.dropout = nn.Dropout(config.bcn_dropout)
        self.independent_dropout = bool(config.bcn_independent_dropout)
        self.feedforward = copied_linear(model.feedforward)
        self.encoder = copied_lstm(model.encoder)
        self.integrator_x = copied_lstm(model.integrator_x)
        self.integrator_y = copied_lstm(model.integrator_y)
        self.poolings = list(config.bcn_pooling)
        self.pool_dropout = nn.Dropout(model.pool_x.dropout.p)
        self.self_x = copied_linear(model.pool_x.self_attention) if "self" in self.poolings else None
        self.self_y = copied_linear(model.pool_y.self_attention) if "self" in self.poolings else None
        self.maxout_pool = config.bcn_maxout_pool
        self.linears = nn.ModuleList(copied_linear(layer.linear) for layer in model.classifier)
        self.norms = nn.ModuleList(
            copied(layer.norm, lambda n=layer.norm: nn.BatchNorm1d(n.num_features, eps=n.eps, momentum=n.momentum))
            if layer.norm is not None else nn.Identity() for layer in model.classifier)

    def pool(self, states: torch.Tensor, scorer: Optional[nn.Linear]) -> torch.Tensor:
        """(B, T, C) -> (B, P * C): max, mean, min, self-attentive over time."""
        pooled = []
        for name in self.poolings:
            if name == "max":
                pooled.append(states.max(dim=1).values)
            elif name == "mean":
                pooled.append(states.mean(dim=1))
            elif name == "min":
                pooled.append(states.min(dim=1).values)
            else:
                beta = torch.softmax(scorer(self.pool_dropout(states)).squeeze(-1), dim=1)  # (B, T)
                pooled.append(torch.bmm(beta.unsqueeze(1), states).squeeze(1))
        return torch.cat(pooled, dim=-1)

    def forward(self, x_ids: torch.Tensor, y_ids: Optional[torch.Tensor] = None, x_cove: Optional[torch.Tensor] = None,
                y_cove: Optional[torch.Tensor] = None) -> torch.Tensor:
        """x_ids (B, n), y_ids (B, m) or None (a single text: y = x); x_cove / y_cove (B, n / m, 600) cached CoVe
        states or None (the MT-LSTM runs). Returns logits (B, num_labels)."""
        w_x = self.words(x_ids, x_cove)  # (B, n, 900)
        f_x = torch.relu(self.feedforward(self.dropout(w_x)))  # (B, n, F)
        x = self.encoder(f_x)[0]  # X, (B, n, 2H)
        if y_ids is not None:
            y = self.encoder(torch.relu(self.feedforward(self.dropout(self.words(y_ids, y_cove)))))[0]  # Y
        elif self.training and self.independent_dropout and self.dropout.p > 0:
            y = self.encoder(torch.relu(self.feedforward(self.dropout(w_x))))[0]
        else:
            y = x
        affinity = torch.bmm(x, y.transpose(1, 2))  # A, (B, n, m)
        context_x = torch.bmm(torch.softmax(affinity, dim=1).transpose(1, 2), x)  # C_x, (B, m, 2H)
        context_y = torch.bmm(torch.softmax(affinity.transpose(1, 2), dim=1).transpose(1, 2), y)  # C_y, (B, n, 2H)
        x_given_y = self.integrator_x(torch.cat([x, x - context_y, x * context_y], dim=-1))[0]
        y_given_x = self.integrator_y(torch.cat([y, y - context_x, y * context_x], dim=-1))[0]
        hidden = torch.cat([self.pool(x_given_y, self.self_x), self.pool(y_given_x, self.self_y)], dim=-1)
        for linear, norm in zip(self.linears, self.norms):
            hidden = maxout(norm(linear(self.dropout(hidden))), self.maxout_pool)
        return hidden  # (B, num_labels)


class RooflineHMN(nn.Module):
    """A highway maxout network of the DCN decoder. As in the model, W_1's document half is applied once per forward
    (`project_document`), not at every iteration."""

    def __init__(self, hmn, dropout: float):
        super().__init__()
        self.hidden, self.pool = hmn.hidden_size, hmn.pool_size
        self.dropout = nn.Dropout(dropout)
        self.state_projection = copied_linear(hmn.state_projection)
        self.maxout1 = copied_linear(hmn.maxout1)
        self.maxout2 = copied_linear(hmn.maxout2)
        self.maxout3 = copied_linear(hmn.maxout3)

    def project_document(self, document: torch.Tensor) -> torch.Tensor:
        """(B, m, 2l) -> (B, m, l * p)."""
        return nn.functional.linear(document, self.maxout1.weight[:, : 2 * self.hidden], self.maxout1.bias)

    def forward(self, projection, state, u_start, u_end) -> torch.Tensor:
        """projection (B, m, l * p), state (B, l), u_start / u_end (B, 2l) -> scores (B, m)."""
        r = torch.tanh(self.state_projection(torch.cat([self.dropout(state), u_start, u_end], dim=-1)))
        r_part = nn.functional.linear(self.dropout(r), self.maxout1.weight[:, 2 * self.hidden:])
        m1 = self.dropout(maxout(projection + r_part.unsqueeze(1), self.pool))  # (B, m, l)
        m2 = maxout(self.maxout2(m1), self.pool)
        return maxout(self.maxout3(torch.cat([m1, self.dropout(m2)], dim=-1)), self.pool).squeeze(-1)


class RooflineDCN(nn.Module):
    """The DCN of `model` (a `CoveForQuestionAnswering` reading "vectors+cove") on uniform batches: tanh
    feed-forward and the shared encoder biLSTM on question and document, sentinels, question projection,
    coattention, fusion biLSTM, and the dynamic pointing decoder (LSTMCell and the two highway maxout networks) for
    a given number of iterations, with the model's dropouts."""

    def __init__(self, model):
        super().__init__()
        config = model.config
        if config.dcn_input != "vectors+cove" or config.char_ngram_dim or config.cove_output != "top":
            raise ValueError("the DCN roofline reads [GloVe; CoVe top layer] (dcn_input='vectors+cove')")
        encoder, decoder = model.coattention_encoder, model.decoder
        self.words = RooflineWordInputs(model)
        self.dropout = nn.Dropout(config.dcn_dropout)
        self.input_dropout = nn.Dropout(encoder.input_dropout.p)
        self.feedforward = copied_linear(encoder.feedforward)
        self.encoder_lstm = copied_lstm(encoder.encoder_lstm)
        self.document_sentinel = nn.Parameter(encoder.document_sentinel.detach().clone())
        self.question_sentinel = nn.Parameter(encoder.question_sentinel.detach().clone())
        self.question_projection = copied_linear(encoder.question_projection)
        self.fusion_lstm = copied_lstm(encoder.fusion_lstm)
        self.cell = copied(decoder.cell, lambda: nn.LSTMCell(decoder.cell.input_size, decoder.cell.hidden_size))
        self.end_reads_previous_start = bool(decoder.end_reads_previous_start)
        self.hmn_start = RooflineHMN(decoder.hmn_start, decoder.hmn_start.dropout.p)
        self.hmn_end = RooflineHMN(decoder.hmn_end, decoder.hmn_end.dropout.p)

    def encode(self, ids: torch.Tensor, cove: Optional[torch.Tensor]) -> torch.Tensor:
        """(B, L) ids -> (B, L, l): biLSTM(tanh(W w~ + b)), dropped."""
        projected = torch.tanh(self.feedforward(self.input_dropout(self.words(ids, cove))))  # g(w~), (B, L, l)
        return self.dropout(self.encoder_lstm(projected)[0])

    def forward(self, question_ids: torch.Tensor, context_ids: torch.Tensor, iterations: int,
                question_cove: Optional[torch.Tensor] = None, context_cove: Optional[torch.Tensor] = None):
        """question_ids (B, n), context_ids (B, m), `iterations` decoder steps; *_cove (B, n / m, 600) cached CoVe
        states or None. Returns start and end scores, each (iterations, B, m)."""
        document = self.encode(context_ids, context_cove)  # D', (B, m, l)
        question = self.encode(question_ids, question_cove)  # Q', (B, n, l)
        batch = document.shape[0]
        document = torch.cat([self.document_sentinel.expand(batch, 1, -1), document], dim=1)  # D, (B, m+1, l)
        question = torch.cat([self.question_sentinel.expand(batch, 1, -1), question], dim=1)
        question = torch.tanh(self.question_projection(question))  # Q, (B, n+1, l)
        affinity = document @ question.transpose(1, 2)  # L, (B, m+1, n+1)
        summary_q = torch.softmax(affinity, dim=1).transpose(1, 2) @ document  # C^Q, (B, n+1, l)
        context_d = torch.softmax(affinity, dim=2) @ torch.cat([question, summary_q], dim=-1)  # C^D, (B, m+1, 2l)
        fused = self.dropout(self.fusion_lstm(torch.cat([document, context_d], dim=-1)[:, 1:])[0])  # U, (B, m, 2l)

        rows = torch.arange(batch, device=fused.device)
        proj_start, proj_end = self.hmn_start.project_document(fused), self.hmn_end.project_document(fused)
        start = torch.zeros(batch, dtype=torch.long, device=fused.device)
        end = torch.full_like(start, fused.shape[1] - 1)
        h = c = fused.new_zeros(batch, self.cell.hidden_size)
        start_scores, end_scores = [], []
        for _ in range(iterations):
            u_start, u_end = fused[rows, start], fused[rows, end]  # (B, 2l)
            h, c = self.cell(torch.cat([u_start, u_end], dim=-1), (h, c))
            alpha = self.hmn_start(proj_start, h, u_start, u_end)  # (B, m)
            new_start = alpha.argmax(dim=1)
            beta = self.hmn_end(proj_end, h, u_start if self.end_reads_previous_start else fused[rows, new_start],
                                u_end)
            start, end = new_start, beta.argmax(dim=1)
            start_scores.append(alpha)
            end_scores.append(beta)
        return torch.stack(start_scores), torch.stack(end_scores)

    @staticmethod
    def loss(start_scores: torch.Tensor, end_scores: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor):
        """The cumulative cross-entropy over the iterations, averaged over the rows (every row has an answer)."""
        total = sum((nn.functional.cross_entropy(a, starts, reduction="sum")
                     + nn.functional.cross_entropy(b, ends, reduction="sum")) / 2
                    for a, b in zip(start_scores, end_scores))
        return total / starts.shape[0]


class RooflineTagger(nn.Module):
    """The tagger of `model` (a `CoveForTokenClassification` reading "vectors") on uniform batches: word vectors,
    dropout, the biLSTM layers as raw `nn.LSTM`s with dropout after each, the prediction module W ReLU(W' [h1; h2])."""

    def __init__(self, model):
        super().__init__()
        if model.config.tagger_input != "vectors" or model.config.tagger_case_dim:
            raise ValueError("the tagger roofline reads the word vectors alone (tagger_input='vectors', no casing)")
        self.embeddings = nn.Embedding.from_pretrained(model.cove.embeddings.weight.detach().clone(), freeze=True)
        self.dropout = nn.Dropout(model.config.tagger_dropout)
        self.layers = nn.ModuleList(copied_lstm(lstm) for lstm in model.encoder)
        self.hidden = copied_linear(model.classifier.hidden)
        self.output = copied_linear(model.classifier.output)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids (B, T) -> logits (B, T, num_labels)."""
        states, layers = self.dropout(self.embeddings(ids)), []
        for lstm in self.layers:
            states = self.dropout(lstm(states)[0])
            layers.append(states)
        return self.output(torch.relu(self.hidden(torch.cat(layers, dim=-1))))


# ----------------------------------------------------------------------------------------------------------------
# timing
# ----------------------------------------------------------------------------------------------------------------


def timed_rounds(fns: dict, repeats: int, progress=None) -> dict:
    """Wall times of every function in `fns` over `repeats` rounds, each round running them once in turn
    (A, B, C, A, B, C, ...), synchronised on a GPU. Returns {name: [seconds per round]}."""
    times = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            synchronize()
            start = time.perf_counter()
            fn()
            synchronize()
            times[name].append(time.perf_counter() - start)
            if progress is not None:
                progress.update(1)
    return times


def figures(seconds: list, tokens: int) -> dict:
    """Best, median and spread (max - min, also as a fraction of the best) of the rounds, and tokens/s of the
    best round."""
    best = min(seconds)
    return {"best_s": round(best, 4), "median_s": round(statistics.median(seconds), 4),
            "spread_s": round(max(seconds) - best, 4), "spread_fraction": round((max(seconds) - best) / best, 3),
            "tokens": tokens, "tokens_per_s": round(tokens / best, 1), "rounds_s": [round(s, 4) for s in seconds]}


# ----------------------------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------------------------


def chunks(items: list, size: int) -> list:
    return [items[start:start + size] for start in range(0, len(items), size)]


def uniform_ids(batch: int, length: int, vocab_size: int, generator: torch.Generator, device) -> torch.Tensor:
    """(batch, max(1, length)) token ids of real words (not the special tokens)."""
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS

    return torch.randint(len(SPECIAL_TOKENS), vocab_size, (batch, max(1, length)), generator=generator).to(device)


def uniform_length(tokens: int, batch: int) -> int:
    return max(1, round(tokens / batch))


def optimizer_like_trainer(training_args, model: nn.Module) -> torch.optim.Optimizer:
    """The optimizer `transformers.Trainer` builds from `training_args` for the trainable parameters of `model`
    (its class and arguments; weight decay 0 in both CLIs, so one parameter group). Returns (optimizer, its class
    and arguments as text)."""
    from transformers import Trainer

    optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(training_args, model)
    optimizer = optimizer_cls([p for p in model.parameters() if p.requires_grad], **kwargs)
    return optimizer, f"{optimizer_cls.__name__}({', '.join(f'{k}={v}' for k, v in sorted(kwargs.items()))})"


def training_step(model: nn.Module, optimizer, max_grad_norm: float, loss_of: Callable[[], torch.Tensor]):
    """One optimizer step as the Trainer takes it: forward with labels, backward, clipping, step, zero_grad."""
    loss = loss_of()
    loss.backward()
    torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], max_grad_norm)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def with_implementation(model, implementation: str, fn: Callable) -> Callable:
    """`fn` run with `model`'s MT-LSTM under `implementation`."""
    def run():
        model.set_lstm_implementation(implementation)
        return fn()
    return run


# ----------------------------------------------------------------------------------------------------------------
# the benchmark
# ----------------------------------------------------------------------------------------------------------------


class Section:
    """One section's timed functions: `fns[kind][side]` (kinds `KINDS`, sides `SIDES`), the real tokens each runs
    (`tokens[kind][side]`; the roofline's: its uniform batches'), and what it records besides (`info`)."""

    def __init__(self, what: str):
        self.what = what
        self.fns = {kind: {} for kind in KINDS}
        self.tokens = {kind: {} for kind in KINDS}
        self.info = {}
        self.models = []
        self.extra = {}  # name -> (fn, tokens): timed on our side alone (no roofline), e.g. the CVT step pair

    def add(self, kind: str, ours: Callable, model, roofline: Callable, tokens: int, roofline_tokens: int):
        """ours under "auto" and "reference" (set on `model` before each call), and the roofline."""
        self.fns[kind] = {"auto": with_implementation(model, "auto", ours),
                          "reference": with_implementation(model, "reference", ours), "roofline": roofline}
        self.tokens[kind] = {"auto": tokens, "reference": tokens, "roofline": roofline_tokens}
        self.models.append(model)


def load_inputs(data_dir: str, sizes: dict) -> dict:
    """The first `sizes[...]` SST-2 test sentences, SNLI test pairs and SQuAD held-out (dev) questions."""
    from modeling_cove.data import load_classification, load_squad

    def first(split, n):
        return split.select(range(min(n, len(split))))

    from modeling_cove.training.data.tagging import load_tagging_splits

    return {"sst2": first(load_classification("sst2", data_dir)["test"], sizes["sst2"]),
            "snli": first(load_classification("snli", data_dir)["test"], sizes["snli"]),
            "squad": first(load_squad(data_dir)["validation"], sizes["squad"]),
            "conll2000": first(load_tagging_splits("conll2000", data_dir)["test"], sizes["conll2000"])}


def save_encoder(inputs: dict, out_dir: Path):
    """A random CoVe checkpoint (`encoder.random_cove_model`: 300-d vectors, MT-LSTM 300) over the words of every input,
    saved to `out_dir`. Returns (out_dir, tokenizer)."""
    from transformers import AutoTokenizer

    from .training import save_random_checkpoint, source_words

    texts = [*inputs["sst2"]["text"], *inputs["snli"]["text"], *inputs["snli"]["text_pair"],
             *inputs["squad"]["question"], *sorted(set(inputs["squad"]["context"])), *inputs["conll2000"]["text"]]
    save_random_checkpoint(source_words(texts), out_dir)
    return out_dir, AutoTokenizer.from_pretrained(out_dir)


@torch.inference_mode()
def max_abs_diff(model, batches: list, outputs: Callable) -> float:
    """Largest |ours["auto"] - ours["reference"]| over `outputs(model(**batch))` (a list of tensors) of `batches`;
    the model is left on "auto"."""
    diff = 0.0
    for batch in batches:
        model.set_lstm_implementation("reference")
        expected = outputs(model(**batch))
        model.set_lstm_implementation("auto")
        for a, b in zip(outputs(model(**batch)), expected):
            diff = max(diff, (a.float() - b.float()).abs().max().item())
    return diff


@dataclass
class UniformBatches:
    """The roofline's inputs: ids of real words below `vocab_size` (`uniform_ids`) on `device`, drawn from the
    section's one `generator` (its random CoVe states, answers and labels too), in the order the section asks."""

    vocab_size: int
    generator: torch.Generator
    device: torch.device

    def of(self, groups: list, counts: list) -> tuple:
        """The uniform batches of `groups` (lists of input indices) and the tokens they hold. `counts`: per segment
        (a text of a pair, the question or the context of a window), the real tokens of each input; a batch's N
        real tokens of a segment become (B, round(N / B)) ids. A None count is a segment the inputs lack (a single
        sentence's second text): None ids, no tokens. Returns ([per batch, a tuple of ids per segment], tokens)."""
        out, tokens = [], 0
        for group in groups:
            lengths = [0 if c is None else uniform_length(sum(c[i] for i in group), len(group)) for c in counts]
            out.append(tuple(None if c is None else
                             uniform_ids(len(group), length, self.vocab_size, self.generator, self.device)
                             for c, length in zip(counts, lengths)))
            tokens += len(group) * sum(lengths)
        return out, tokens


def roofline_inference(roofline: nn.Module, groups: list, inputs: list, tokenize: Callable) -> Callable:
    """The roofline's side of an inference kind: per batch `groups[k]`, the same tokenizer call as ours
    (`tokenize(group)`, its result unused), then the roofline on the batch's uniform ids `inputs[k]`."""
    @torch.inference_mode()
    def run():
        for group, ids in zip(groups, inputs):
            tokenize(group)  # the same tokenizer call as the measured side
            roofline(*ids)
    return run


# ----------------------------------------------------------------------------------------------------------------
# the BCN sections
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class BCNTexts:
    """A BCN section's inputs in arrival order: the texts kept (those with tokens, on each side of a pair), their
    second texts (None: single sentences), the classifier CLI's tokenized split (`data`) and the real tokens of each
    input's first and second text (`x_tokens`, `y_tokens`)."""

    tokenizer: object
    data: object
    texts: list
    seconds: Optional[list]
    x_tokens: list
    y_tokens: list

    @property
    def pair(self) -> bool:
        return self.seconds is not None

    @property
    def counts(self) -> list:
        """`UniformBatches.of`'s counts: a second segment for pairs alone."""
        return [self.x_tokens, self.y_tokens if self.pair else None]

    @property
    def real_tokens(self) -> int:
        return sum(self.x_tokens) + sum(self.y_tokens)

    def tokenize(self, group: list, **kwargs):
        """The tokenizer on the texts of `group` (and their second texts), as ours call it."""
        texts = [self.texts[i] for i in group]
        return self.tokenizer(*((texts, [self.seconds[i] for i in group]) if self.pair else (texts,)), **kwargs)


def bcn_texts(rows, tokenizer) -> BCNTexts:
    """`rows` (text[, text_pair], label) tokenized as the classifier CLI tokenizes them."""
    from modeling_cove.training.commands.train_classifier import tokenize_splits

    pair = "text_pair" in rows.column_names
    splits, _ = tokenize_splits({"train": rows}, tokenizer)
    data = splits["train"]
    kept = [i for i, types in enumerate(tokenizer(*([list(rows["text"]), list(rows["text_pair"])] if pair
                                                    else [list(rows["text"])]))["token_type_ids"])
            if types and (not pair or 0 < sum(types) < len(types))]
    return BCNTexts(tokenizer, data, texts=[rows["text"][i] for i in kept],
                    seconds=[rows["text_pair"][i] for i in kept] if pair else None,
                    x_tokens=[len(t) - sum(t) for t in data["token_type_ids"]],
                    y_tokens=[sum(t) for t in data["token_type_ids"]])


def bcn_pipeline(section: Section, model, roofline: RooflineBCN, bcn: BCNTexts, uniform: UniformBatches,
                 batch_size: int):
    """(a) `pipeline("text-classification")` on the inputs in arrival order (the stock pipeline batches the list as
    it comes); the roofline on the same batches."""
    from transformers import pipeline

    classifier = pipeline("text-classification", model=model, tokenizer=bcn.tokenizer, batch_size=batch_size,
                          device=uniform.device)
    pipe_inputs = [{"text": t, "text_pair": p} for t, p in zip(bcn.texts, bcn.seconds)] if bcn.pair else bcn.texts
    groups = chunks(list(range(len(bcn.texts))), batch_size)
    inputs, tokens = uniform.of(groups, bcn.counts)
    section.add("pipeline", lambda: classifier(pipe_inputs), model,
                roofline_inference(roofline, groups, inputs, bcn.tokenize), bcn.real_tokens, tokens)


def bcn_sorted(section: Section, model, roofline: RooflineBCN, bcn: BCNTexts, uniform: UniformBatches,
               batch_size: int):
    """(b) length-sorted batches, `model(**tokenizer(batch, padding=True))`, the tokenizer call on both sides; and
    the largest logit difference of ours under "auto" and "reference" on the first two batches."""
    groups = chunks(order_longest_first([x + y for x, y in zip(bcn.x_tokens, bcn.y_tokens)]), batch_size)

    def tokenize(group):
        return bcn.tokenize(group, padding=True, return_tensors="pt")

    @torch.inference_mode()
    def ours():
        for group in groups:
            model(**tokenize(group).to(uniform.device))

    inputs, tokens = uniform.of(groups, bcn.counts)
    section.add("sorted", ours, model, roofline_inference(roofline, groups, inputs, tokenize), bcn.real_tokens,
                tokens)
    checked = [tokenize(group).to(uniform.device) for group in groups[:2]]
    section.info["max_abs_diff_logits_auto_vs_reference"] = max_abs_diff(model, checked, lambda out: [out.logits])


def bcn_training_batches(trainer, bcn: BCNTexts, batch_size: int, feature_batch_size: int, device) -> tuple:
    """The classifier CLI's training batches of `bcn`: CoVe features computed and cached as the CLI caches them,
    full batches in arrival order (a smaller slice than one batch: one batch of all of it), collated on `device`.
    Leaves `trainer` in training mode. Returns (the batches' input indices, the batches)."""
    from modeling_cove.feature_cache import compute_features
    from modeling_cove.training.data.collators import BCNCollator
    from .training import to_device

    store = compute_features(trainer, bcn.data, feature_batch_size)
    trainer.train()  # computing the features left eval mode
    size = len(bcn.data)
    data = bcn.data.add_column("feature_store", [0] * size).add_column("feature_row", list(range(size)))
    collator = BCNCollator(pad_token_id=trainer.config.pad_token_id, layer_indices=list(trainer.layer_indices),
                           num_states=trainer.config.num_hidden_layers + 1,
                           layer_width=trainer.config.encoder_output_size, stores=[store])
    groups = [g for g in chunks(list(range(len(data))), batch_size) if len(g) == batch_size]
    groups = groups or [list(range(len(data)))]
    return groups, [to_device(collator([data[i] for i in group]), device) for group in groups]


def bcn_training(section: Section, trainer, bcn: BCNTexts, hp: dict, uniform: UniformBatches, trainer_dir: Path):
    """(c) training steps of `trainer` on the CLI's batches (`bcn_training_batches`) with the Trainer's optimizer,
    against the roofline's steps on random CoVe states of the same shapes. Returns (batches, the optimizer as
    text)."""
    from modeling_cove.training.commands.train_classifier import make_training_arguments

    device, generator = uniform.device, uniform.generator
    groups, batches = bcn_training_batches(trainer, bcn, hp["batch_size"], hp["feature_batch_size"], device)
    training_args = make_training_arguments(trainer_dir, hp, seed=1, evaluate_during_training=False,
                                            use_cpu=device.type == "cpu")
    optimizer, optimizer_name = optimizer_like_trainer(training_args, trainer)
    plain = RooflineBCN(trainer).to(device).train()
    plain_optimizer = optimizer_like_trainer(training_args, plain)[0]
    width = trainer.config.encoder_output_size
    plain_inputs, plain_tokens = uniform.of(groups, bcn.counts)
    plain_cove = [(torch.randn(*x.shape, width, generator=generator).to(device),
                   None if y is None else torch.randn(*y.shape, width, generator=generator).to(device))
                  for x, y in plain_inputs]

    def ours():
        for batch in batches:
            training_step(trainer, optimizer, hp["max_grad_norm"], lambda: trainer(**batch).loss)

    def roofline():
        for batch, (x, y), (cx, cy) in zip(batches, plain_inputs, plain_cove):
            training_step(plain, plain_optimizer, hp["max_grad_norm"],
                          lambda: nn.functional.cross_entropy(plain(x, y, cx, cy), batch["labels"]))

    tokens = sum(bcn.x_tokens[i] + bcn.y_tokens[i] for group in groups for i in group)
    section.add("train", ours, trainer, roofline, tokens, plain_tokens)
    return len(batches), optimizer_name


def bcn_section(rows, task: str, encoder_dir: Path, tokenizer, device: torch.device, work: Path) -> Section:
    """BCN on `rows` (text[, text_pair], label): the pipeline, length-sorted batches and training steps at the task's
    batch size (`configuration/tasks/<task>.yaml`), against `RooflineBCN`."""
    from modeling_cove.training.commands.train_classifier import build_model, load_hyperparameters

    pair = "text_pair" in rows.column_names
    hp = load_hyperparameters(task)
    batch_size, labels = hp["batch_size"], rows.features["label"].names
    model = build_model(encoder_dir, "vectors+cove", labels, hp, seed=1, pair_input=pair).to(device).eval()
    roofline = RooflineBCN(model).to(device).eval()
    uniform = UniformBatches(model.config.vocab_size, torch.Generator().manual_seed(0), device)
    bcn = bcn_texts(rows, tokenizer)
    section = Section(f"BCN ({'sentence pairs, SNLI test' if pair else 'single sentences, SST-2 test'}), "
                      f"{len(bcn.texts)} inputs, batch {batch_size}, random weights")
    bcn_pipeline(section, model, roofline, bcn, uniform, batch_size)
    bcn_sorted(section, model, roofline, bcn, uniform, batch_size)
    # (c) training steps on cached CoVe features, full batches in arrival order
    trainer = build_model(encoder_dir, "vectors+cove", labels, hp, seed=1, pair_input=pair).to(device)
    train_batches, optimizer_name = bcn_training(section, trainer, bcn, hp, uniform, work / f"{task}-trainer")
    section.info.update(inputs=len(bcn.texts), real_tokens=bcn.real_tokens, batch_size=batch_size,
                        train_batches=train_batches, optimizer=optimizer_name,
                        mean_length_first_text=round(sum(bcn.x_tokens) / len(bcn.texts), 2),
                        mean_length_second_text=round(sum(bcn.y_tokens) / len(bcn.texts), 2) if pair else None)
    return section


# ----------------------------------------------------------------------------------------------------------------
# the DCN section
# ----------------------------------------------------------------------------------------------------------------


@dataclass
class DCNWindows:
    """A DCN section's questions (`examples`) cut into windows as the QA CLI cuts them for evaluation (`window`:
    max_length, doc_stride, max_question_length; `features`: `prepare_eval_features`' columns), with the real
    question and context tokens of each window."""

    examples: object
    tokenizer: object
    window: dict
    features: dict
    q_tokens: list
    c_tokens: list
    pad_id: int
    device: torch.device

    @property
    def counts(self) -> list:
        """`UniformBatches.of`'s counts: the question, then the context."""
        return [self.q_tokens, self.c_tokens]

    @property
    def real_tokens(self) -> int:
        return sum(self.q_tokens) + sum(self.c_tokens)

    def batch(self, group: list) -> dict:
        """The windows of `group` padded into one batch of model inputs on the device."""
        from modeling_cove.feature_cache import pad_rows

        return {k: v.to(self.device) for k, v in pad_rows([self.features["input_ids"][i] for i in group],
                                                          [self.features["token_type_ids"][i] for i in group],
                                                          self.pad_id).items()}


def dcn_windows(examples, tokenizer, window: dict, pad_id: int, device) -> DCNWindows:
    """`examples`' questions cut into the QA CLI's evaluation windows (`prepare_eval_features`)."""
    from modeling_cove.squad_preprocessing import prepare_eval_features

    features = prepare_eval_features(examples, tokenizer, **window)
    return DCNWindows(examples, tokenizer, window, features,
                      q_tokens=[types.count(0) for types in features["token_type_ids"]],  # question tokens per window
                      c_tokens=[types.count(1) for types in features["token_type_ids"]],  # context tokens per window
                      pad_id=pad_id, device=device)


@torch.inference_mode()
def decoder_iterations(model, windows: DCNWindows, groups: list) -> list:
    """The decoder iterations `model` runs on each batch of windows (its rows' maximum): the roofline runs as many."""
    return [int(model(**windows.batch(group)).num_iterations.max()) for group in groups]


def dcn_pipeline(section: Section, model, roofline: RooflineDCN, windows: DCNWindows, uniform: UniformBatches,
                 batch_size: int) -> list:
    """(a) `pipeline("cove-question-answering")` on the questions in arrival order (it runs them longest first),
    `batch_size` windows per forward; the roofline on the pipeline's batches, after the pipeline's tokenizer call per
    question. Returns the decoder iterations per batch."""
    from transformers import pipeline

    from modeling_cove.squad_preprocessing import tokenize_windows

    questions, contexts = list(windows.examples["question"]), list(windows.examples["context"])
    qa = pipeline("cove-question-answering", model=model, tokenizer=windows.tokenizer, batch_size=batch_size,
                  device=uniform.device)
    pipe_inputs = [{"question": q, "context": c} for q, c in zip(questions, contexts)]
    # the pipeline's batches: each question's windows in turn, questions in the order the pipeline runs a list
    windows_of = {}
    for w, question in enumerate(windows.features["example_index"]):
        windows_of.setdefault(question, []).append(w)
    groups = chunks([w for question in order_longest_first(type(qa).length_keys(pipe_inputs))
                     for w in windows_of[question]], batch_size)
    iterations = decoder_iterations(model, windows, groups)
    inputs, tokens = uniform.of(groups, windows.counts)
    window = windows.window

    @torch.inference_mode()
    def roofline_pipeline():
        for q, c in zip(questions, contexts):  # the pipeline's tokenizer call, per question
            tokenize_windows(windows.tokenizer, [q], [c], window["max_length"], window["doc_stride"],
                             window["max_question_length"])
        for (q_ids, c_ids), count in zip(inputs, iterations):
            roofline(q_ids, c_ids, count)

    section.add("pipeline", lambda: qa(pipe_inputs), model, roofline_pipeline, windows.real_tokens, tokens)
    return iterations


def dcn_sorted(section: Section, model, roofline: RooflineDCN, windows: DCNWindows, uniform: UniformBatches,
               batch_size: int) -> list:
    """(b) length-sorted window batches, pre-tokenized (no tokenizer on either side); and the largest start / end
    logit difference of ours under "auto" and "reference" on the first two batches. Returns the decoder iterations
    per batch."""
    groups = chunks(order_longest_first([q + c for q, c in zip(windows.q_tokens, windows.c_tokens)]), batch_size)
    batches = [windows.batch(group) for group in groups]
    iterations = decoder_iterations(model, windows, groups)
    inputs, tokens = uniform.of(groups, windows.counts)

    @torch.inference_mode()
    def ours():
        for batch in batches:
            model(**batch)

    @torch.inference_mode()
    def roofline_sorted():
        for (q_ids, c_ids), count in zip(inputs, iterations):
            roofline(q_ids, c_ids, count)

    section.add("sorted", ours, model, roofline_sorted, windows.real_tokens, tokens)

    def context_logits(out):
        """Start and end logits, the positions masked with the dtype's lowest value (no answer there) set to 0."""
        return [out.start_logits.masked_fill(out.start_logits == torch.finfo(out.start_logits.dtype).min, 0),
                out.end_logits.masked_fill(out.end_logits == torch.finfo(out.end_logits.dtype).min, 0)]

    section.info["max_abs_diff_logits_auto_vs_reference"] = max_abs_diff(model, batches[:2], context_logits)
    return iterations


def dcn_training_batches(trainer, windows: DCNWindows, batch_size: int) -> tuple:
    """The QA CLI's training batches of `windows`' questions: its training windows, CoVe features cached per distinct
    segment as the CLI caches them, full batches grouped by length, collated on the device. Leaves `trainer` in
    training mode. Returns (the training windows' rows, the batches' row indices, the batches)."""
    from modeling_cove.feature_cache import cached_features, distinct_segments
    from modeling_cove.squad_preprocessing import prepare_train_features
    from modeling_cove.training.commands.train_qa import rows_of
    from modeling_cove.training.data.collators import QACollator
    from .training import to_device

    features, _ = prepare_train_features(windows.examples, windows.tokenizer, **windows.window)
    segments, (keyed,) = distinct_segments([features])
    cache = cached_features(trainer, segments, batch_size=64)
    trainer.train()  # caching the features left eval mode
    rows = rows_of(keyed, ("input_ids", "token_type_ids", "start_positions", "end_positions", "question_key",
                           "context_key"))
    collator = QACollator(cache, windows.pad_id)
    order = order_longest_first([len(row["input_ids"]) for row in rows])
    groups = [g for g in chunks(order, batch_size) if len(g) == batch_size] or [order]
    return rows, groups, [to_device(collator([rows[i] for i in group]), windows.device) for group in groups]


def dcn_training(section: Section, trainer, windows: DCNWindows, settings: dict, uniform: UniformBatches,
                 trainer_dir: Path) -> tuple:
    """(c) training steps of `trainer` on the CLI's batches (`dcn_training_batches`) with the Trainer's optimizer,
    every decoder iteration, against the roofline's steps on random CoVe states and answers of the same shapes.
    Returns (training windows, batches, the optimizer as text)."""
    from modeling_cove.training.commands.train_qa import make_training_arguments as qa_training_arguments

    device, generator = uniform.device, uniform.generator
    rows, groups, batches = dcn_training_batches(trainer, windows, int(settings["batch_size"]))
    tq = [r["token_type_ids"].count(0) for r in rows]
    tc = [r["token_type_ids"].count(1) for r in rows]
    training_args = qa_training_arguments(trainer_dir, settings, int(settings["seed"]))
    optimizer, optimizer_name = optimizer_like_trainer(training_args, trainer)
    plain = RooflineDCN(trainer).to(device).train()
    plain_optimizer = optimizer_like_trainer(training_args, plain)[0]
    plain_inputs, plain_tokens = uniform.of(groups, [tq, tc])
    width = trainer.cove_size
    plain_extra = [(torch.randn(*q.shape, width, generator=generator).to(device),
                    torch.randn(*c.shape, width, generator=generator).to(device),
                    torch.randint(c.shape[1], (c.shape[0],), generator=generator).to(device),
                    torch.randint(c.shape[1], (c.shape[0],), generator=generator).to(device))
                   for q, c in plain_inputs]
    iterations = trainer.config.dcn_max_iterations  # training runs every iteration
    max_grad_norm = float(settings["max_grad_norm"])

    def ours():
        for batch in batches:
            training_step(trainer, optimizer, max_grad_norm, lambda: trainer(**batch).loss)

    def roofline():
        for (q, c), (cq, cc, starts, ends) in zip(plain_inputs, plain_extra):
            training_step(plain, plain_optimizer, max_grad_norm,
                          lambda: plain.loss(*plain(q, c, iterations, cq, cc), starts, ends))

    tokens = sum(tq[i] + tc[i] for group in groups for i in group)
    section.add("train", ours, trainer, roofline, tokens, plain_tokens)
    return len(rows), len(batches), optimizer_name


def dcn_section(examples, encoder_dir: Path, tokenizer, device: torch.device, work: Path) -> Section:
    """DCN (the QA CLI's default preset) on SQuAD held-out questions: the QA pipeline over their windows, length-sorted
    window batches (the CLI's evaluation batch size) and training steps at the CLI's batch size on cached CoVe
    features, against `RooflineDCN`."""
    from modeling_cove.training.common.presets import load_preset
    from modeling_cove.training.commands.train_qa import QAOptions, load_model, resolve_qa_settings

    options = QAOptions(checkpoint=str(encoder_dir), output_dir="-")  # the command's defaults
    settings = resolve_qa_settings(options)
    preset = {k: v for k, v in load_preset(options.model_preset, "models").items()
              if not k.startswith("_") and k != "path"}
    model = load_model(str(encoder_dir), preset)[0].to(device).eval()
    roofline = RooflineDCN(model).to(device).eval()
    uniform = UniformBatches(model.config.vocab_size, torch.Generator().manual_seed(0), device)
    eval_batch, train_batch = int(settings["eval_batch_size"]), int(settings["batch_size"])
    window = {k: settings[k] for k in ("max_length", "doc_stride", "max_question_length")}
    windows = dcn_windows(examples, tokenizer, window, model.config.pad_token_id, device)
    q_tokens, c_tokens = windows.q_tokens, windows.c_tokens
    section = Section(f"DCN ({Path(options.model_preset).stem} preset), {len(examples)} SQuAD held-out questions, "
                      f"{len(q_tokens)} windows, inference batch {eval_batch}, training batch {train_batch}, "
                      "random weights")
    pipeline_iterations = dcn_pipeline(section, model, roofline, windows, uniform, eval_batch)
    sorted_iterations = dcn_sorted(section, model, roofline, windows, uniform, eval_batch)
    # (c) training steps on cached CoVe features (the CLI's segment cache), length-grouped full batches
    trainer = load_model(str(encoder_dir), preset)[0].to(device)
    train_windows, train_batches, optimizer_name = dcn_training(section, trainer, windows, settings, uniform,
                                                                work / "qa")
    section.info.update(questions=len(examples), windows=len(q_tokens), real_tokens=windows.real_tokens,
                        eval_batch_size=eval_batch, train_batch_size=train_batch, train_windows=train_windows,
                        train_batches=train_batches, optimizer=optimizer_name,
                        decoder_iterations={"pipeline": pipeline_iterations, "sorted": sorted_iterations,
                                            "train": trainer.config.dcn_max_iterations},
                        mean_question_length=round(sum(q_tokens) / len(q_tokens), 2),
                        mean_context_length=round(sum(c_tokens) / len(c_tokens), 2))
    return section


# ----------------------------------------------------------------------------------------------------------------
# the tagger section
# ----------------------------------------------------------------------------------------------------------------


def tagger_pipeline(section: Section, model, roofline: RooflineTagger, texts: list, tokenizer,
                    uniform: UniformBatches, lengths: list, batch_size: int):
    """(a) `pipeline("cove-token-classification")` on the raw texts in arrival order; the roofline on the pipeline's
    batches, after the same tokenizer call."""
    from transformers import pipeline

    tagging = pipeline("cove-token-classification", model=model, tokenizer=tokenizer, batch_size=batch_size,
                       device=uniform.device)
    # the roofline runs the pipeline's batches: the texts in the order the pipeline runs a list (longest first)
    groups = chunks(order_longest_first(type(tagging).length_keys(texts)), batch_size)
    inputs, tokens = uniform.of(groups, [lengths])
    run = roofline_inference(roofline, groups, inputs,
                             lambda g: tokenizer([texts[i] for i in g], return_offsets_mapping=True))

    def ours():
        model.eval()  # each timed function sets its mode: the training part shares `model`
        return tagging(texts)

    section.add("pipeline", ours, model, run, sum(lengths), tokens)


def tagger_sorted(section: Section, model, roofline: RooflineTagger, words: list, tokenizer, uniform: UniformBatches,
                  lengths: list, batch_size: int):
    """(b) length-sorted batches of pre-split words, `model(**tokenizer(batch, is_split_into_words=True))`, the
    tokenizer call on both sides; and the largest logit difference of ours under "auto" and "reference" on the first
    two batches."""
    groups = chunks(order_longest_first(lengths), batch_size)

    def tokenize(group):
        return tokenizer([words[i] for i in group], is_split_into_words=True, padding=True, return_tensors="pt")

    @torch.inference_mode()
    def ours():
        model.eval()
        for group in groups:
            model(**tokenize(group).to(uniform.device))

    inputs, tokens = uniform.of(groups, [lengths])
    section.add("sorted", ours, model, roofline_inference(roofline, groups, inputs, tokenize), sum(lengths), tokens)
    checked = [tokenize(group).to(uniform.device) for group in groups[:2]]
    section.info["max_abs_diff_logits_auto_vs_reference"] = max_abs_diff(model, checked, lambda out: [out.logits])


def tagger_training_batches(data, batch_size: int, device) -> tuple:
    """The batches of the tagging CLI's first epoch (epochs count from 1; sentences of similar lengths batched
    together, `labelled_batches`), padded on `device`. Returns (their sentence indices, [(ids, mask, labels)])."""
    from modeling_cove.modeling_cove_tagger import IGNORE_INDEX
    from modeling_cove.training.commands import train_tagger as tg

    groups = tg.labelled_batches(data, batch_size, seed=1, epoch=1)
    batches = []
    for group in groups:
        ids, mask = tg.pad([data.ids[i] for i in group], device)
        batches.append((ids, mask, tg.pad([data.labels[i] for i in group], device, IGNORE_INDEX)[0]))
    return groups, batches


def tagger_training(section: Section, training, data, num_labels: int, hp: dict, uniform: UniformBatches,
                    lengths: list) -> tuple:
    """(c) labelled steps of the CLI's loop (`training`: TaggerTraining, Adam, clipping) on the batches of its first
    epoch, against the roofline's steps on random labels. Returns (the batches, their real tokens)."""
    device, model = uniform.device, training.model
    training.train()
    optimizer = cli_optimizer(training, hp)
    groups, batches = tagger_training_batches(data, hp["batch_size"], device)
    plain = RooflineTagger(model).to(device).train()
    plain_optimizer = cli_optimizer(plain, hp)  # the same optimizer: the ratio is the model's
    plain_inputs, plain_tokens = uniform.of(groups, [lengths])
    plain_labels = [torch.randint(0, num_labels, ids.shape, generator=uniform.generator).to(device)
                    for (ids,) in plain_inputs]

    def ours():
        training.train()
        for ids, mask, target in batches:
            training_step(training, optimizer, hp["max_grad_norm"],
                          lambda: training("labelled", ids, mask, task="conll2000", labels=target))

    def roofline():
        for (ids,), target in zip(plain_inputs, plain_labels):
            training_step(plain, plain_optimizer, hp["max_grad_norm"], lambda: nn.functional.cross_entropy(
                plain(ids).flatten(0, 1), target.flatten()))

    tokens = sum(lengths[i] for group in groups for i in group)
    section.add("train", ours, model, roofline, tokens, plain_tokens)
    return batches, tokens


def cli_optimizer(module: nn.Module, hp: dict) -> torch.optim.Optimizer:
    """The optimizer `cove-train-tagger` builds from its hyperparameters `hp`, over `module`'s trainable weights."""
    from modeling_cove.training.loops.accelerate_loop import make_optimizer

    return make_optimizer(hp["optimizer"], [p for p in module.parameters() if p.requires_grad], hp["learning_rate"],
                          hp["momentum"])


def tagger_cvt_steps(cvt, hp: dict, batches: list, device) -> Callable:
    """Cross-View Training steps of `cvt` (a `TaggerTraining` with its auxiliary modules, task conll2000) on
    `batches`, with the CLI's optimizer and, with `hp`'s `ema_decay`, its moving average of the weights updated after
    each labelled step: per batch, a labelled step and an unlabelled step (teacher pass, student, views), the
    unlabelled one on the same sentences with their labels unused."""
    from modeling_cove.training.loops.tagger_schedule import WeightAverage

    cvt = cvt.to(device).train()
    optimizer = cli_optimizer(cvt, hp)
    trainable = [(name, p) for name, p in cvt.named_parameters() if p.requires_grad]
    average = WeightAverage(trainable, hp["ema_decay"]) if hp.get("ema_decay") else None

    def steps():
        cvt.train()
        for ids, mask, target in batches:
            training_step(cvt, optimizer, hp["max_grad_norm"],
                          lambda: cvt("labelled", ids, mask, task="conll2000", labels=target))
            if average is not None:
                average.update()
            training_step(cvt, optimizer, hp["max_grad_norm"], lambda: cvt("unlabelled", ids, mask))
    steps.training, steps.optimizer, steps.average, steps.hp = cvt, optimizer, average, hp  # for a reader, the tests
    return steps


def chosen_cvt_recipe() -> dict:
    """The hyperparameter overrides over the `cvt-paper` preset that the CVT table runs with: the cumulative
    ablation's choice (`choice.recipe_overrides` of benchmarks/results/tagging_ablation.json)."""
    import json

    from .common import RESULTS_DIR

    path = Path(__file__).resolve().parents[2] / RESULTS_DIR / "tagging_ablation.json"
    if not path.is_file():
        raise ValueError(f"{path} is missing: the CVT table's recipe is chosen there (run_tagging_ablation.py)")
    return json.loads(path.read_text())["choice"]["recipe_overrides"]


def cli_tagger(rows, settings, tokenizer) -> tuple:
    """What `cove-train-tagger` builds from `settings` for CoNLL-2000 `rows` (the one task; every split these rows):
    (its hyperparameters, its labels in their label scheme, the encoded rows, the `TaggerTraining`)."""
    from modeling_cove.training.commands import train_tagger as tg

    hp = tg.load_hyperparameters(settings)
    labels = tg.label_set(rows, label_scheme=hp["label_scheme"])
    label2id = {label: i for i, label in enumerate(labels)}
    data = tg.encode_split(rows, tokenizer, label2id, "conll2000 test", hp["max_length"], hp["label_scheme"])
    task = tg.TaskRun("conll2000", labels, "f1", data, data, data, {})
    return hp, labels, data, tg.build_training(settings, hp, [task], tokenizer)


# the CVT table's vocabulary (its word-vector checkpoint: docs/results_method.md); with trained word vectors a
# step's gradient, optimizer and moving average cover every row of it
TABLE_VOCABULARY = 43_194
QUICK_TABLE_VOCABULARY = 2_000  # --quick's, a smoke run


def tagger_recipe_cvt_steps(rows, out_dir: Path, device: torch.device,
                            vocabulary_size: int = TABLE_VOCABULARY) -> tuple:
    """(Cross-View Training steps as the CVT table runs them, their labelled and unlabelled tokens): the `cvt-paper`
    preset (trained word vectors, START/END states, the `full` module, the moving average, tags in its label scheme)
    with the table's overrides (`chosen_cvt_recipe`: the optimizer and its schedule), a labelled and an unlabelled
    step per batch of the CLI's first epoch, on a random checkpoint saved to `out_dir` over the sentences' words and
    as many more as `vocabulary_size`."""
    import json

    from transformers import AutoTokenizer

    from modeling_cove.training.commands import train_tagger as tg

    from .training import save_random_checkpoint, source_words

    words = source_words(rows["text"])
    fillers = [f"unseen{i}" for i in range(max(vocabulary_size - len(words), 0))]  # rows no sentence reads
    encoder_dir = save_random_checkpoint(words + fillers, out_dir)
    tokenizer = AutoTokenizer.from_pretrained(encoder_dir)
    settings = tg.TaggerSettings(task=["conll2000"], encoder=str(encoder_dir), output_dir="-", cvt=True,
                                 preset="cvt-paper", hyperparameters=json.dumps(chosen_cvt_recipe()))
    hp, _, data, training = cli_tagger(rows, settings, tokenizer)
    _, batches = tagger_training_batches(data, hp["batch_size"], device)
    steps = tagger_cvt_steps(training, hp, batches, device)
    return steps, 2 * sum(data.lengths().tolist())


def tagger_section(rows, encoder_dir: Path, tokenizer, device: torch.device,
                   table_vocabulary: int = TABLE_VOCABULARY) -> Section:
    """The tagger on CoNLL-2000 test sentences (`rows`: words, tags, text) as `cove-train-tagger` builds it
    ("vectors", the preset's sizes): `pipeline("cove-token-classification")` on the raw text in arrival order,
    length-sorted batches of pre-split words, and labelled training steps at the CLI's batch size (its optimizer,
    clipping), against `RooflineTagger`; plus, timed on our side alone (tokens/s), a Cross-View Training step pair
    (labelled + unlabelled) on that tagger and one as the CVT table trains (`tagger_recipe_cvt_steps`, over
    `table_vocabulary` words)."""
    from modeling_cove.training.commands import train_tagger as tg
    from modeling_cove.training.loops.cvt import TaggerTraining

    settings = tg.TaggerSettings(task=["conll2000"], encoder=str(encoder_dir), output_dir="-")
    hp, labels, data, training = cli_tagger(rows, settings, tokenizer)
    model = training.model.to(device).eval()
    roofline = RooflineTagger(model).to(device).eval()
    uniform = UniformBatches(model.config.vocab_size, torch.Generator().manual_seed(0), device)
    batch_size, lengths = hp["batch_size"], data.lengths().tolist()
    section = Section(f"tagger (CoNLL-2000 test sentences, input vectors), {len(lengths)} sentences, batch "
                      f"{batch_size}, random weights")
    tagger_pipeline(section, model, roofline, list(rows["text"]), tokenizer, uniform, lengths, batch_size)
    tagger_sorted(section, model, roofline, list(rows["words"]), tokenizer, uniform, lengths, batch_size)
    batches, train_tokens = tagger_training(section, training, data, len(labels), hp, uniform, lengths)
    cvt = TaggerTraining(model, {"conll2000": labels}, cvt=True)
    section.extra = {"cvt_step_pair": (tagger_cvt_steps(cvt, hp, batches, device), 2 * train_tokens),
                     "cvt_table_step_pair": tagger_recipe_cvt_steps(rows, encoder_dir.parent / "table-vocabulary",
                                                                    device, table_vocabulary)}
    real_tokens = sum(lengths)
    section.info.update(inputs=len(lengths), real_tokens=real_tokens, batch_size=batch_size,
                        train_batches=len(batches),
                        optimizer=f"make_optimizer({hp['optimizer']!r}, lr={hp['learning_rate']})",
                        mean_length=round(real_tokens / len(lengths), 2), tagger_hidden_size=hp["hidden_size"],
                        unlabelled_batches_in_cvt_timing="the labelled batches' sentences, labels unused")
    return section


def run_section(name: str, section: Section, threads: list, repeats: int, warmup: bool) -> dict:
    """Every kind of `section` at every thread count: `repeats` interleaved rounds of (auto, reference, roofline),
    figures per side and the ratios roofline time / our time (1.0: as fast as the roofline)."""
    from tqdm.auto import tqdm

    if warmup:  # one untimed call of each (first-call allocations, lazy initialisation, optimizer states)
        for fns in [*section.fns.values(), {name: fn for name, (fn, _) in section.extra.items()}]:
            for fn in fns.values():
                fn()
    results = {"what": section.what, **section.info}
    with tqdm(total=len(threads) * len(KINDS) * len(SIDES) * repeats, desc=name, unit=" runs") as progress:
        for count in threads:
            torch.set_num_threads(count)
            per_kind = {}
            for kind in KINDS:
                times = timed_rounds(section.fns[kind], repeats, progress)
                sides = {side: figures(times[side], section.tokens[kind][side]) for side in SIDES}
                roof = sides["roofline"]["best_s"]
                per_kind[kind] = {**sides,
                                  "ratio_auto_to_roofline": round(roof / sides["auto"]["best_s"], 3),
                                  "ratio_reference_to_roofline": round(roof / sides["reference"]["best_s"], 3)}
            for extra, (fn, tokens) in section.extra.items():  # ours alone, "auto"
                per_kind[extra] = figures(timed_rounds({extra: fn}, repeats)[extra], tokens)
            results[f"threads_{count}"] = per_kind
    for model in section.models:  # leave the models on the default
        model.set_lstm_implementation("auto")
    return results


def summary_table(results: dict, threads: list) -> str:
    """One line per section, kind and thread count: tokens/s of each side and the two ratios."""
    lines = [f"{'section':<12}{'kind':<10}{'threads':>8}{'auto tok/s':>13}{'ref tok/s':>13}{'roof tok/s':>13}"
             f"{'auto/roof':>11}{'ref/roof':>10}"]
    for name, section in results.items():
        for count in threads:
            for kind in KINDS:
                r = section[f"threads_{count}"][kind]
                lines.append(f"{name:<12}{kind:<10}{count:>8}{r['auto']['tokens_per_s']:>13,.0f}"
                             f"{r['reference']['tokens_per_s']:>13,.0f}{r['roofline']['tokens_per_s']:>13,.0f}"
                             f"{r['ratio_auto_to_roofline']:>11.3f}{r['ratio_reference_to_roofline']:>10.3f}")
            for extra, r in section[f"threads_{count}"].items():
                if extra not in KINDS:  # timed on our side alone
                    lines.append(f"{name:<12}{extra:<10}{count:>8}{r['tokens_per_s']:>13,.0f}")
    return "\n".join(lines)


def bench_heads(data_dir: str, device: str = "cpu", quick: bool = False, repeats: int = 3, threads=(1, 2),
                sizes: Optional[dict] = None, sections=SECTIONS) -> tuple:
    """The whole benchmark: inputs (`SIZES`, or `sizes`), a random checkpoint over their words, then each of
    `sections` built and timed. Returns (settings, results)."""
    import transformers

    transformers.logging.set_verbosity_error()  # the heads' "newly initialised" load reports
    sizes = sizes or SIZES["quick" if quick else "full"]
    device = torch.device(device)
    inputs = load_inputs(data_dir, sizes)
    results = {}
    with tempfile.TemporaryDirectory(prefix="cove-bench-heads-") as tmp:
        work = Path(tmp)
        encoder_dir, tokenizer = save_encoder(inputs, work / "encoder")
        builders = {"bcn_single": lambda: bcn_section(inputs["sst2"], "sst2", encoder_dir, tokenizer, device, work),
                    "bcn_pair": lambda: bcn_section(inputs["snli"], "snli", encoder_dir, tokenizer, device, work),
                    "dcn": lambda: dcn_section(inputs["squad"], encoder_dir, tokenizer, device, work),
                    "tagger": lambda: tagger_section(inputs["conll2000"], encoder_dir, tokenizer, device,
                                                     QUICK_TABLE_VOCABULARY if quick else TABLE_VOCABULARY)}
        for name in sections:
            print(f"{name}: preparing", flush=True)
            results[name] = run_section(name, builders[name](), list(threads), repeats, warmup=not quick)
    settings = {"device": str(device), "threads": list(threads), "repeats": repeats, "sizes": sizes,
                "sides": {"auto": 'ours, lstm_implementation="auto"',
                          "reference": 'ours, lstm_implementation="reference"',
                          "roofline": "the same layers in plain PyTorch on uniform-length batches (heads.py)"},
                "ratio": "roofline best time / our best time (1.0: as fast as the roofline)"}
    return settings, results
