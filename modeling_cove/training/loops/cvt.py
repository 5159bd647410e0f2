"""Cross-View Training (Clark, Luong, Manning, Le 2018, §3) for `CoveForTokenClassification` (docs/tagging.md).

One `TaggerTraining` module holds what a tagging run trains: the tagger (`model`: word features, its 2-layer biLSTM
and the first task's primary module), the primary modules of further tasks sharing that encoder (multi-task), and,
with CVT, each task's four auxiliary modules. Its `forward(phase, task, ...)` is one training step's loss:

- phase "labelled": the task's primary module on [h1; h2], cross-entropy over the labelled tokens; everything the
  path reaches learns (encoder, biLSTM, that primary module).
- phase "unlabelled": a teacher pass of the whole tagger in eval mode (no dropout) and without gradient gives each
  task's soft targets p_primary(y_i | x); a student pass with dropout runs the biLSTM's FIRST layer only, and each
  auxiliary module m of each task reads its restricted view of layer 1's directional states:
      fwd NN(h→_i)     bwd NN(h←_i)     future NN(h→_{i−1})     past NN(h←_{i+1})
  The loss is Σ_tasks Σ_m mean_i KL(p_primary,i ‖ p_m,i) over the tokens i that have the view. The first token has
  no h→_{i−1} and the last no h←_{i+1}: those positions are left out of that module's mean (masked, no learned
  boundary state). It reaches the auxiliary modules and the biLSTM's layer 1 (and the word features below it) — never
  a primary module, whose parameters get no gradient at all from this phase (tested).

Options (`CrossViewOptions`, all off by default; the `cvt-paper` tagging preset turns on the authors' values):
`full_module` adds a fifth auxiliary module over the student's whole [h1; h2] (its form has no ReLU, as the
authors'): the student then runs both layers, and layer 2 learns from unlabelled text too. `unlabeled_dropout` is the
student's dropout (the labelled steps keep the model's). `label_smoothing` smooths the labelled targets and the
teacher's soft targets alike: (1 − ε) p + ε / C. With sentence boundaries (`config.tagger_boundary_tokens`) the
first token's future view is the START state and the last token's past view the END state, so every token has all
views.

Both phases run inside one `forward` of one module, so DistributedDataParallel sees one graph per step; each phase
leaves some parameters unused (the auxiliaries in a labelled step, the primaries, and layer 2 unless the `full`
module reads it, in an unlabelled one),
which the loop declares with `find_unused_parameters=True`. The auxiliary modules are training-only: the exported
tagger is `model` alone (`export_task_model`), a resume checkpoint keeps the whole module.
"""

from __future__ import annotations

import copy
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from ...embeddings import HostRead
from ...layers import head_init_, valid_steps
from ...lstm_kernels import to_device_async
from ...modeling_cove_tagger import IGNORE_INDEX, CoveForTokenClassification, CoveTaggerPredictionModule, TaggerStates

__all__ = ["CrossViewModules", "CrossViewOptions", "LinearViewModule", "restricted_views", "smooth",
           "soft_target_loss", "TaggerTraining", "token_masks", "view_counts"]

VIEWS = ("fwd", "bwd", "future", "past")  # NN(h→_i), NN(h←_i), NN(h→_{i−1}), NN(h←_{i+1})


@dataclass
class CrossViewOptions:
    """How the unlabelled phase runs (module docstring); the defaults are the method's plain form."""

    full_module: bool = False  # a fifth auxiliary module over the student's [h1; h2]
    unlabeled_dropout: float | None = None  # the student's dropout; None: the model's (tagger_dropout)
    label_smoothing: float = 0.0  # ε, on labelled targets and on the teacher's soft targets


def smooth(targets: torch.Tensor, epsilon: float) -> torch.Tensor:
    """(1 − ε) p + ε / C over the last dimension (C classes): label smoothing of (soft) targets."""
    return targets * (1 - epsilon) + epsilon / targets.shape[-1] if epsilon else targets


def restricted_views(first_layer: torch.Tensor, mask: torch.Tensor, present: torch.Tensor | None = None) -> dict:
    """CVT's restricted views of the biLSTM's first layer (B, T, 2H) = [h→; h←] of right-padded rows with `mask`
    (B, T) bool at the tokens: view -> (states (B, T, H), valid (B, T) bool). Position i of "future" holds h→_{i−1},
    of "past" h←_{i+1}, valid where that position holds a state (`present`, default `mask`: without boundary states
    the first token has no future view and the last no past view; with them, `present` also marks START and END and
    every token has both). Positions that are not tokens are never valid."""
    present = mask if present is None else present
    hidden = first_layer.shape[-1] // 2
    forward, backward = first_layer[..., :hidden], first_layer[..., hidden:]
    first = torch.zeros_like(forward[:, :1])
    future = torch.cat([first, forward[:, :-1]], dim=1)  # (B, T, H): h→_{i−1}
    past = torch.cat([backward[:, 1:], first], dim=1)  # (B, T, H): h←_{i+1}
    none = torch.zeros_like(present[:, :1])
    has_future = mask & torch.cat([none, present[:, :-1]], dim=1)  # the previous position holds a state
    has_past = mask & torch.cat([present[:, 1:], none], dim=1)  # the next position holds a state
    return {"fwd": (forward, mask), "bwd": (backward, mask), "future": (future, has_future),
            "past": (past, has_past)}


def soft_target_loss(module: nn.Module, states: torch.Tensor, targets: torch.Tensor,
                     valid: torch.Tensor, count: float | None = None) -> torch.Tensor:
    """mean over the `valid` (B, T) positions of KL(targets ‖ softmax(module(states))), states (B, T, H) and targets
    (B, T, C): the cross-entropy with soft targets up to the targets' entropy (a constant here); with `count`, the
    sum over them divided by `count` instead (`TaggerTraining.forward`'s `counts`). The module runs at the valid
    positions alone. `kl_div(input, target)` takes log q first and p second and computes
    Σ p (log p − log q). Zero (with a gradient path to the module) when no position is valid. `valid` is read on the
    host (pass it there: `CrossViewModules` makes it from the lengths read with the checks); the positions go to
    the device without a wait, and the gather is the boolean mask's, without its wait."""
    positions = valid.cpu().nonzero(as_tuple=True)  # (rows, steps) of the valid positions, as `states[valid]` takes
    if positions[0].numel() == 0:
        return module(states[:, :0]).sum() * 0.0
    positions = tuple(to_device_async(index, states.device) for index in positions)
    log_q = torch.log_softmax(module(states[positions]).float(), dim=-1)  # (N, C)
    loss = nn.functional.kl_div(log_q, targets[positions].float(), reduction="batchmean" if count is None else "sum")
    return loss if count is None else loss / count


class LinearViewModule(CoveTaggerPredictionModule):
    """The `full` view's module: W · (W' · [h1; h2]) + b, the primary module's form without its ReLU (the CVT
    authors' form for this view)."""

    def forward(self, states: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.output(self.hidden(states))


def token_masks(lengths: torch.Tensor, width: int, framed: bool) -> tuple:
    """(tokens (B, width) bool, present (B, width) bool) of rows of `lengths` tokens on the host: the token
    positions, and the positions holding a state (with START/END, `framed`: the tokens at 1..n and the boundary
    states around them)."""
    mask = valid_steps(lengths, width - 2 if framed else width)
    mask = nn.functional.pad(mask, (1, 1)) if framed else mask  # tokens at 1..n
    return mask, valid_steps(lengths + 2 if framed else lengths, width)


def view_counts(lengths: list, framed: bool) -> dict:
    """view -> how many positions the views of rows of `lengths` tokens score (`restricted_views`; "full": every
    token): what a process of several divides its share's sums by, once over the whole global batch."""
    lengths = torch.tensor(lengths)
    mask, present = token_masks(lengths, int(lengths.max()) + (2 if framed else 0), framed)
    views = restricted_views(torch.zeros(*mask.shape, 2), mask, present)
    return {view: int(valid.sum()) for view, (_, valid) in views.items()} | {"full": int(mask.sum())}


class CrossViewModules(nn.Module):
    """One task's auxiliary prediction modules, each of the primary module's form over one view (H wide), and with
    `full_dim` the `full` view's module over [h1; h2] (`full_dim` wide)."""

    def __init__(self, hidden_size: int, module_dim: int, num_labels: int, full_dim: int = 0):
        super().__init__()
        self.views = nn.ModuleDict({view: CoveTaggerPredictionModule(hidden_size, module_dim, num_labels)
                                    for view in VIEWS})
        self.full = LinearViewModule(full_dim, module_dim, num_labels) if full_dim else None

    def forward(self, student: TaggerStates, targets: torch.Tensor, counts: dict | None = None) -> torch.Tensor:
        """Σ over the views of `soft_target_loss` against the primary module's `targets` (B, T', C), the positions
        of the `student`'s states (`counts`: view -> the count each view's sum is divided by, `view_counts`; default:
        its mean). The views' positions are made on the host, from the student's host lengths."""
        width = student.mask.shape[1]
        lengths = student.host_lengths if student.host_lengths is not None else student.lengths.cpu()
        mask, present = token_masks(lengths, width, student.framed)  # (B, T) on the host
        counts = counts or {}
        views = restricted_views(student.layers[0], mask, present)
        loss = sum(soft_target_loss(self.views[view], states, targets, valid, counts.get(view))
                   for view, (states, valid) in views.items())
        if self.full is not None:
            loss = loss + soft_target_loss(self.full, torch.cat(student.layers, dim=-1), targets, mask,
                                           counts.get("full"))
        return loss


class TaggerTraining(nn.Module):
    """The tagger, the other tasks' primary modules and (with `cvt`) every task's auxiliary modules (module
    docstring). `tasks`: task name -> its label names; the first task's primary module is `model.classifier`.
    `options.label_smoothing` applies to the labelled steps with or without `cvt`."""

    def __init__(self, model: CoveForTokenClassification, tasks: dict, cvt: bool,
                 options: CrossViewOptions | None = None):
        super().__init__()
        config = model.config
        self.model, self.task_names = model, list(tasks)
        self.options = options or CrossViewOptions()
        if len(model.config.id2label) != len(tasks[self.task_names[0]]):
            raise ValueError("the model's labels must be the first task's")
        states_dim = model.classifier.hidden.in_features  # [h1; ...; hL]
        self.primary = nn.ModuleDict({
            task: CoveTaggerPredictionModule(states_dim, config.tagger_module_dim, len(labels))
            for task, labels in list(tasks.items())[1:]})
        # initialised before the auxiliary modules draw theirs: a seed gives the primary modules the same weights
        # with or without `cvt`, so that the two columns of a multi-task comparison start alike
        self.primary.apply(head_init_)
        full_dim = states_dim if self.options.full_module else 0
        self.auxiliary = nn.ModuleDict({
            task: CrossViewModules(config.tagger_hidden_size, config.tagger_module_dim, len(labels), full_dim)
            for task, labels in tasks.items()}) if cvt else None
        if self.auxiliary is not None:
            self.auxiliary.apply(head_init_)

    def primary_module(self, task: str) -> nn.Module:
        return self.model.classifier if task == self.task_names[0] else self.primary[task]

    def checked(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                case_ids: torch.Tensor | None = None, labels: tuple | None = None) -> tuple:
        """(input_ids, attention mask, lengths (B,), the lengths on the host) of a batch, checked by the tagger's
        checks (`case_ids`: read by a model with a casing feature; `labels`: `(task, labels (B, T))` of a labelled
        step, ids of that task's labels or -100); the checks and the lengths in one host read."""
        with HostRead() as host:
            inputs, attention_mask, lengths = self.model.check_inputs(input_ids, None, attention_mask, None)
            self.model.check_case_ids(case_ids, attention_mask)
            if labels is not None:
                task, values = labels
                self.model.check_labels(values, attention_mask,
                                        num_labels=self.primary_module(task).output.out_features, task=task)
            host.read(lengths)
        return inputs, attention_mask, lengths, host.values[0]

    def features(self, batch: tuple, case_ids: torch.Tensor | None = None) -> torch.Tensor:
        """w~ (B, T, D_in) of a `checked` batch."""
        inputs, attention_mask, _, host_lengths = batch
        return self.model.tagger_inputs(inputs, attention_mask, case_ids, host_lengths)

    def primary_logits(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, case_ids: torch.Tensor | None,
                       tasks: list, batch: tuple | None = None) -> tuple:
        """({task: logits (B, T', C)} of the primary modules of `tasks` over [h1; ...; hL] (dropout as the mode
        says), the full `TaggerStates`) of a batch (`batch`: it `checked` already)."""
        batch = self.checked(input_ids, attention_mask, case_ids) if batch is None else batch
        states = self.model.encode(self.features(batch, case_ids), batch[2], host_lengths=batch[3])
        reads = torch.cat(states.layers, dim=-1)
        return {task: self.primary_module(task)(reads, states.mask) for task in tasks}, states

    def token_logits(self, task: str, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     case_ids: torch.Tensor | None = None) -> torch.Tensor:
        """`task`'s primary logits at the token positions, (B, T, C)."""
        logits, states = self.primary_logits(input_ids, attention_mask, case_ids, [task])
        return states.tokens(logits[task])

    def forward(self, phase: str, input_ids: torch.Tensor, attention_mask: torch.Tensor, task: str | None = None,
                labels: torch.Tensor | None = None, case_ids: torch.Tensor | None = None,
                counts: dict | None = None) -> torch.Tensor:
        """The loss of one step of `phase` ("labelled": `task`'s cross-entropy with `labels` (B, T), smoothed by
        `options.label_smoothing`; "unlabelled": the CVT loss over every task). Each loss is a mean over its
        positions (labelled tokens; each view's positions); with `counts` ("labelled", or view -> count of
        `view_counts`) its sum divided by that count instead: a process of several passes the global batch's counts
        over the number of processes, so that DDP's mean of the processes' gradients is the global batch's."""
        if phase == "labelled":
            batch = self.checked(input_ids, attention_mask, case_ids, labels=(task, labels))
            logits, states = self.primary_logits(input_ids, attention_mask, case_ids, [task], batch)
            logits = states.tokens(logits[task])  # (B, T, C)
            count = (counts or {}).get("labelled")
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten().long(),
                                               ignore_index=IGNORE_INDEX, reduction="mean" if count is None else "sum",
                                               label_smoothing=self.options.label_smoothing)
            return loss if count is None else loss / count
        if phase != "unlabelled" or self.auxiliary is None:
            raise ValueError(f"unknown phase {phase!r} (unlabelled steps need cvt=True)")
        batch = self.checked(input_ids, attention_mask, case_ids)  # once for the teacher and the student
        targets = self.soft_targets(input_ids, attention_mask, case_ids, batch)  # task -> (B, T', C)
        features = self.features(batch, case_ids)
        with self.student_dropout():  # layer 1 only unless the full module reads both
            student = self.model.encode(features, batch[2], num_layers=None if self.options.full_module else 1,
                                        host_lengths=batch[3])
        return sum(self.auxiliary[task](student, targets[task], counts) for task in self.task_names)

    @contextmanager
    def student_dropout(self):
        """The model's dropout set to `options.unlabeled_dropout` (when given) for the student pass, then back."""
        dropout, rate = self.model.dropout, self.options.unlabeled_dropout
        saved = dropout.p
        dropout.p = saved if rate is None else rate
        try:
            yield
        finally:
            dropout.p = saved

    @torch.no_grad()
    def soft_targets(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     case_ids: torch.Tensor | None = None, batch: tuple | None = None) -> dict:
        """Each task's p_primary(y_i | x) (B, T', C) from the full tagger in eval mode (no dropout), no gradient,
        smoothed by `options.label_smoothing`; the module's training mode is restored after. `batch`: the batch
        `checked` already."""
        was_training = self.training
        self.eval()
        try:
            logits, _ = self.primary_logits(input_ids, attention_mask, case_ids, self.task_names, batch)
            return {task: smooth(torch.softmax(values.float(), dim=-1), self.options.label_smoothing)
                    for task, values in logits.items()}
        finally:
            self.train(was_training)

    def export_task_model(self, task: str, labels: list) -> CoveForTokenClassification:
        """The tagger of `task` as a plain `CoveForTokenClassification` (a copy): the shared encoder with that task's
        primary module and labels; no auxiliary modules. Its word vectors are frozen again in the config (trained
        or not here), as every saved model's are: a later fine-tuning trains them only when asked."""
        model = copy.deepcopy(self.model)
        model.config.freeze_embeddings = True
        if task != self.task_names[0]:
            model.classifier = copy.deepcopy(self.primary[task])
            model.config.num_labels = len(labels)
            model.config.id2label = dict(enumerate(labels))
            model.config.label2id = {label: i for i, label in enumerate(labels)}
            model.num_labels = len(labels)
        return model
