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

Both phases run inside one `forward` of one module, so DistributedDataParallel sees one graph per step; each phase
leaves some parameters unused (the auxiliaries in a labelled step, the primaries and layer 2 in an unlabelled one),
which the loop declares with `find_unused_parameters=True`. The auxiliary modules are training-only: the exported
tagger is `model` alone (`export_task_model`), a resume checkpoint keeps the whole module.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from ...modeling_cove_tagger import IGNORE_INDEX, CoveForTokenClassification, CoveTaggerPredictionModule

__all__ = ["CrossViewModules", "restricted_views", "soft_target_loss", "TaggerTraining"]

VIEWS = ("fwd", "bwd", "future", "past")  # NN(h→_i), NN(h←_i), NN(h→_{i−1}), NN(h←_{i+1})


def restricted_views(first_layer: torch.Tensor, mask: torch.Tensor) -> dict:
    """CVT's restricted views of the biLSTM's first layer (B, T, 2H) = [h→; h←] of right-padded rows with `mask`
    (B, T) bool: view -> (states (B, T, H), valid (B, T) bool). Position i of "future" holds h→_{i−1} (invalid at
    i = 0), of "past" h←_{i+1} (invalid at each row's last token); padding is never valid."""
    hidden = first_layer.shape[-1] // 2
    forward, backward = first_layer[..., :hidden], first_layer[..., hidden:]
    first = torch.zeros_like(forward[:, :1])
    future = torch.cat([first, forward[:, :-1]], dim=1)  # (B, T, H): h→_{i−1}
    past = torch.cat([backward[:, 1:], first], dim=1)  # (B, T, H): h←_{i+1}
    has_future = mask.clone()
    has_future[:, 0] = False
    has_past = torch.cat([mask[:, 1:], torch.zeros_like(mask[:, :1])], dim=1)  # the next position is a token
    return {"fwd": (forward, mask), "bwd": (backward, mask), "future": (future, has_future),
            "past": (past, has_past)}


def soft_target_loss(module: nn.Module, states: torch.Tensor, targets: torch.Tensor,
                     valid: torch.Tensor) -> torch.Tensor:
    """mean over the `valid` (B, T) positions of KL(targets ‖ softmax(module(states))), states (B, T, H) and targets
    (B, T, C): the cross-entropy with soft targets up to the targets' entropy (a constant here). The module runs at
    the valid positions alone. `kl_div(input, target)` takes log q first and p second and computes
    Σ p (log p − log q). Zero (with a gradient path to the module) when no position is valid."""
    if not bool(valid.any()):
        return module(states[:, :0]).sum() * 0.0
    log_q = torch.log_softmax(module(states[valid]).float(), dim=-1)  # (N, C)
    return nn.functional.kl_div(log_q, targets[valid].float(), reduction="batchmean")


class CrossViewModules(nn.Module):
    """One task's auxiliary prediction modules, each of the primary module's form over one view (H wide)."""

    def __init__(self, hidden_size: int, module_dim: int, num_labels: int):
        super().__init__()
        self.views = nn.ModuleDict({view: CoveTaggerPredictionModule(hidden_size, module_dim, num_labels)
                                    for view in VIEWS})

    def forward(self, first_layer: torch.Tensor, mask: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Σ over the views of `soft_target_loss` against the primary module's `targets` (B, T, C)."""
        views = restricted_views(first_layer, mask)
        return sum(soft_target_loss(self.views[view], states, targets, valid) for view, (states, valid) in
                   views.items())


class TaggerTraining(nn.Module):
    """The tagger, the other tasks' primary modules and (with `cvt`) every task's auxiliary modules (module
    docstring). `tasks`: task name -> its label names; the first task's primary module is `model.classifier`."""

    def __init__(self, model: CoveForTokenClassification, tasks: dict, cvt: bool):
        super().__init__()
        config = model.config
        self.model, self.task_names = model, list(tasks)
        if len(model.config.id2label) != len(tasks[self.task_names[0]]):
            raise ValueError("the model's labels must be the first task's")
        self.primary = nn.ModuleDict({
            task: CoveTaggerPredictionModule(model.classifier.hidden.in_features, config.tagger_module_dim,
                                             len(labels))
            for task, labels in list(tasks.items())[1:]})
        self.auxiliary = nn.ModuleDict({
            task: CrossViewModules(config.tagger_hidden_size, config.tagger_module_dim, len(labels))
            for task, labels in tasks.items()}) if cvt else None
        from ...layers import head_init_

        self.primary.apply(head_init_)
        if self.auxiliary is not None:
            self.auxiliary.apply(head_init_)

    def primary_module(self, task: str) -> nn.Module:
        return self.model.classifier if task == self.task_names[0] else self.primary[task]

    def features(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                 case_ids: torch.Tensor | None = None) -> tuple:
        """(w~ (B, T, D_in), lengths (B,)) of a checked batch (`case_ids`: read by a model with a casing feature)."""
        inputs, attention_mask, lengths = self.model.check_inputs(input_ids, None, attention_mask, None)
        self.model.check_case_ids(case_ids, attention_mask)
        return self.model.tagger_inputs(inputs, attention_mask, case_ids), lengths

    def primary_states(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                       case_ids: torch.Tensor | None = None) -> tuple:
        """([h1; ...; hL] (B, T, 2H·L), what every primary module reads (dropout as the mode says), and the token mask
        (B, T)) of a checked batch."""
        features, lengths = self.features(input_ids, attention_mask, case_ids)
        states = self.model.encode(features, lengths)
        return torch.cat(states.layers, dim=-1), states.mask

    def forward(self, phase: str, input_ids: torch.Tensor, attention_mask: torch.Tensor, task: str | None = None,
                labels: torch.Tensor | None = None, case_ids: torch.Tensor | None = None) -> torch.Tensor:
        """The loss of one step of `phase` ("labelled": `task`'s cross-entropy with `labels` (B, T); "unlabelled":
        the CVT loss over every task)."""
        if phase == "labelled":
            logits = self.primary_module(task)(*self.primary_states(input_ids, attention_mask, case_ids))  # (B, T, C)
            return nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten().long(),
                                               ignore_index=IGNORE_INDEX)
        if phase != "unlabelled" or self.auxiliary is None:
            raise ValueError(f"unknown phase {phase!r} (unlabelled steps need cvt=True)")
        targets = self.soft_targets(input_ids, attention_mask, case_ids)  # task -> (B, T, C)
        features, lengths = self.features(input_ids, attention_mask, case_ids)
        student = self.model.encode(features, lengths, num_layers=1)  # with dropout, layer 1 only
        return sum(self.auxiliary[task](student.layers[0], student.mask, targets[task]) for task in self.task_names)

    @torch.no_grad()
    def soft_targets(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     case_ids: torch.Tensor | None = None) -> dict:
        """Each task's p_primary(y_i | x) (B, T, C) from the full tagger in eval mode (no dropout), no gradient; the
        module's training mode is restored after."""
        was_training = self.training
        self.eval()
        try:
            states, mask = self.primary_states(input_ids, attention_mask, case_ids)
            return {task: torch.softmax(self.primary_module(task)(states, mask).float(), dim=-1)
                    for task in self.task_names}
        finally:
            self.train(was_training)

    def export_task_model(self, task: str, labels: list) -> CoveForTokenClassification:
        """The tagger of `task` as a plain `CoveForTokenClassification` (a copy): the shared encoder with that task's
        primary module and labels; no auxiliary modules."""
        model = copy.deepcopy(self.model)
        if task != self.task_names[0]:
            model.classifier = copy.deepcopy(self.primary[task])
            model.config.num_labels = len(labels)
            model.config.id2label = dict(enumerate(labels))
            model.config.label2id = {label: i for i, label in enumerate(labels)}
            model.num_labels = len(labels)
        return model
