"""What a tagging run on a step budget needs beside the scaffold (docs/tagging.md, "The CVT authors' recipe"):

- `StepBudgetBatches`: the labelled and unlabelled batches of each evaluation period, a pure function of (seed,
  period) as exact resume needs: every task reads an endless stream of its data epochs, a labelled step picks its
  task in proportion to the tasks' sizes or to their square roots (the CVT authors' sampling), and the unlabelled
  sentences are read from an `UnlabelledStream`.
- `UnlabelledStream`: the unlabelled batches of a CVT run, in seeded passes over every sentence, batched by length
  as the labelled ones are (the CVT authors batch both by length).
- `lr_factor`: the CVT authors' learning-rate schedule, linear warm-up and then 1 / (1 + d·√t).
- `WeightAverage`: an exponential moving average of the trainable weights, which validation, test and the saved
  tagger use (the CVT authors' evaluation weights); the tagger updates it after each labelled step (the authors:
  after every step), so that a supervised and a CVT run average over the same labelled steps.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

__all__ = ["lr_factor", "StepBudgetBatches", "TASK_SAMPLING", "UnlabelledStream", "WeightAverage"]

TASK_SAMPLING = ("proportional", "sqrt")  # a labelled step's task: p ∝ training sentences, or ∝ their square root
DRAW_OFFSET = 2_000_000  # the task draws' generator seed: seed x stride + period + this
UNLABELLED_OFFSET = 1_000_000  # the unlabelled passes' generator seed: seed x stride + pass + this


def lr_factor(labelled_step: int, warmup_steps: int, decay: float) -> float:
    """The learning-rate multiplier of the `labelled_step`-th labelled step (counted from 1): min(1, t / warm-up)
    / (1 + decay · √t), the CVT authors' schedule (warm-up 0: none; decay 0: constant). They count every optimizer
    step; we count labelled steps, so that a supervised run and a CVT run see the same rate at the same labelled
    step, and an unlabelled step takes the rate of the labelled step before it."""
    t = max(labelled_step, 1)
    warm = min(1.0, t / warmup_steps) if warmup_steps else 1.0
    return warm / (1.0 + decay * math.sqrt(t))


class UnlabelledStream:
    """The unlabelled batches of a CVT run, numbered 0, 1, ... over the whole run, a pure function of (seed, batch
    number) as exact resume needs. The sentences (`lengths`: their token counts) are read in passes, each sentence
    once per pass; pass k is `epoch_batches` of a permutation seeded by seed x stride + k + UNLABELLED_OFFSET: sorted
    by length within chunks of `chunk_batches` batches of `batch_size`, cut into batches, the batches shuffled. So a
    batch holds sentences of similar lengths, as the CVT authors batch (by length buckets), and its biLSTM steps are
    mostly real tokens; a pass's last chunk may end in one smaller batch."""

    def __init__(self, lengths, batch_size: int, seed: int, seed_stride: int, chunk_batches: int):
        self.lengths = np.asarray(lengths)
        self.batch_size, self.seed, self.stride, self.chunk_batches = batch_size, seed, seed_stride, chunk_batches
        # a chunk holds whole batches, so only a pass's last batch can be smaller
        self.per_pass = math.ceil(len(self.lengths) / batch_size)
        self.reading = (None, None)  # (pass, its batches) last read

    def batches(self, first: int, count: int) -> list:
        """Unlabelled batches `first` ... `first + count - 1` (lists of sentence indices)."""
        from .accelerate_loop import epoch_batches

        found = []
        for b in range(first, first + count):
            read = b // self.per_pass
            if read != self.reading[0]:
                self.reading = (read, epoch_batches(len(self.lengths), self.batch_size, self.seed,
                                                    read + UNLABELLED_OFFSET, self.stride, lengths=(self.lengths,),
                                                    chunk_batches=self.chunk_batches))
            found.append(self.reading[1][b % self.per_pass])
        return found


class StepBudgetBatches:
    """The batches of evaluation period p (1, 2, ...): `steps_per_period` labelled slots (fewer in the last period
    of `labelled_steps`), each followed by `unlabeled_ratio` unlabelled batches. `task_batches[t](data_epoch)`
    gives task t's labelled batches of one pass over its data (a pure function of the data epoch, 1, 2, ...);
    `sizes[t]` its training sentences; `unlabelled`: the run's `UnlabelledStream` (None: no unlabelled steps)."""

    def __init__(self, task_batches: list, sizes: list, labelled_steps: int, steps_per_period: int,
                 sampling: str, seed: int, seed_stride: int, unlabelled: UnlabelledStream | None = None,
                 unlabeled_ratio: int = 0):
        if sampling not in TASK_SAMPLING:
            raise ValueError(f"task_sampling must be one of {TASK_SAMPLING}, got {sampling!r}")
        self.task_batches, self.labelled_steps, self.per_period = task_batches, labelled_steps, steps_per_period
        weights = np.array(sizes, dtype=float) ** (0.5 if sampling == "sqrt" else 1.0)
        self.weights = torch.tensor(weights / weights.sum())
        self.seed, self.stride = seed, seed_stride
        self.unlabelled, self.ratio = unlabelled, unlabeled_ratio
        self.cache = {}  # (task, data epoch) -> that pass's batches

    @property
    def periods(self) -> int:
        return math.ceil(self.labelled_steps / self.per_period)

    def slots(self, period: int) -> int:
        return min(self.per_period, self.labelled_steps - (period - 1) * self.per_period)

    def draws(self, period: int) -> list:
        """The task index of each labelled slot of `period`."""
        if len(self.weights) == 1:
            return [0] * self.slots(period)
        generator = torch.Generator().manual_seed(self.seed * self.stride + period + DRAW_OFFSET)
        return torch.multinomial(self.weights, self.slots(period), replacement=True, generator=generator).tolist()

    def task_batch(self, task: int, index: int) -> list:
        """Batch `index` (from 0) of task `task`'s endless stream of data epochs."""
        if (task, 1) not in self.cache:
            self.cache[(task, 1)] = self.task_batches[task](1)
        per_epoch = len(self.cache[(task, 1)])
        data_epoch = index // per_epoch + 1
        if (task, data_epoch) not in self.cache:
            self.cache = {key: value for key, value in self.cache.items()  # this task's older passes go
                          if key[0] != task or key[1] in (1, data_epoch - 1)}
            self.cache[(task, data_epoch)] = self.task_batches[task](data_epoch)
        return self.cache[(task, data_epoch)][index % per_epoch]

    def __call__(self, period: int) -> list:
        """Period `period`'s batches: ("labelled", task, rows) and ("unlabelled", None, rows) in training order."""
        used = [0] * len(self.task_batches)  # batches each task's stream gave before this period
        for earlier in range(1, period):
            for task in self.draws(earlier):
                used[task] += 1
        unlabelled_done = (period - 1) * self.per_period * self.ratio
        batches = []
        for slot, task in enumerate(self.draws(period)):
            batches.append(("labelled", task, self.task_batch(task, used[task])))
            used[task] += 1
            if self.ratio and self.unlabelled is not None:
                batches += [("unlabelled", None, rows) for rows in
                            self.unlabelled.batches(unlabelled_done + slot * self.ratio, self.ratio)]
        return batches


class WeightAverage:
    """An exponential moving average of `parameters` (the trainable ones): each `update()` sets
    a ← decay · a + (1 − decay) · w (the tagger calls it after each labelled step), starting from the weights at the
    first update. `swapped_in()` puts the averages into the parameters for a while (validation, test, saving) and the
    trained weights back after; `apply()` puts them in for good.
    Ours, not `torch.optim.swa_utils.AveragedModel`: that keeps a second copy of the whole module, frozen word
    vectors included, and checkpoints through pickle; this one keeps the trainable tensors and saves safetensors."""

    FILE = "weight_average.safetensors"

    def __init__(self, named_parameters: list, decay: float):
        self.decay = decay
        self.names = [name for name, _ in named_parameters]
        self.parameters = [p for _, p in named_parameters]
        self.average = None  # set at the first update

    @torch.no_grad()
    def update(self):
        if self.average is None:
            self.average = [p.detach().clone() for p in self.parameters]
            return
        for average, parameter in zip(self.average, self.parameters):
            average.lerp_(parameter.detach(), 1.0 - self.decay)

    @torch.no_grad()
    def apply(self, values: list | None = None):
        """Copy the averages (or `values`) into the parameters; nothing before the first update."""
        values = self.average if values is None else values
        for parameter, value in zip(self.parameters, values or []):
            parameter.copy_(value)

    @contextmanager
    def swapped_in(self):
        trained = [p.detach().clone() for p in self.parameters] if self.average is not None else None
        self.apply()
        try:
            yield
        finally:
            self.apply(trained)

    def save(self, folder: Path):
        from safetensors.torch import save_file

        if self.average is not None:
            save_file({n: a.detach().cpu().contiguous() for n, a in zip(self.names, self.average)},
                      str(Path(folder) / self.FILE))

    def load(self, folder: Path):
        """The averages a checkpoint `folder` holds (none when the run had not stepped yet)."""
        from safetensors.torch import load_file

        path = Path(folder) / self.FILE
        if not path.is_file():
            self.average = None
            return
        saved = load_file(str(path))
        missing = sorted(set(self.names) - set(saved))
        if missing:
            raise ValueError(f"{path} lacks the averages of {missing[:5]}: not this run's checkpoint")
        self.average = [saved[n].to(p.device, p.dtype) for n, p in zip(self.names, self.parameters)]
