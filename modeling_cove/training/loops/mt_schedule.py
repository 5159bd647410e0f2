"""The learning-rate schedule of MT pretraining (docs/paper.md §2); the run stops by `accelerate_loop.stop_reason`.

Paper: SGD with lr 1.0; after every epoch, once the validation perplexity has risen for the first time, the lr is
halved (and from then on every epoch); training stops when the lr falls below 0.03. The stop threshold is 0.03 x the
initial lr by default (the paper's ratio), so that an Adam run at lr 1e-3 is not stopped after its first epoch by a
threshold meant for SGD at lr 1.0.

transformers' schedulers change the lr per step on a fixed plan and torch's ReduceLROnPlateau waits for `patience`
bad epochs and never decays on its own afterwards; the paper's rule (decay every epoch once perplexity has risen
once) is neither, hence this small class.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PerplexitySchedule", "resolve_min_lr"]

MIN_LR_RATIO = 0.03  # the paper's stop threshold (0.03) relative to its lr (1.0)


def resolve_min_lr(lr: float, min_lr: float | None) -> float:
    """The stop threshold: `min_lr` as given, or MIN_LR_RATIO x `lr` when None; a threshold at or above the initial
    lr would stop the run after its first epoch, so it is refused."""
    if lr <= 0:
        raise ValueError(f"lr must be > 0, got {lr}")
    if min_lr is None:
        return MIN_LR_RATIO * lr
    if min_lr >= lr:
        raise ValueError(f"min_lr {min_lr:g} >= lr {lr:g}: the run would stop after its first epoch; give a min_lr "
                         f"below the lr (default: {MIN_LR_RATIO} x lr = {MIN_LR_RATIO * lr:g})")
    return min_lr


@dataclass
class PerplexitySchedule:
    """After each epoch: multiply the lr by `lr_decay` once validation perplexity has risen for the first time (and
    every epoch from then on), optionally also from epoch `start_decay_at` on (OpenNMT-py's -start_decay_at)."""

    lr_decay: float = 0.5
    start_decay_at: int | None = None

    @staticmethod
    def initial_memory() -> dict:
        """What the schedule remembers between epochs (a `LoopState.schedule`), before the first epoch."""
        return {"decay_started": False, "previous_val_ppl": None}

    def after_epoch(self, state, epoch: int, val_perplexity: float) -> float:
        """Update `state.lr` and the schedule's memory `state.schedule` (a `LoopState`'s) after `epoch`
        (1-based) ended with `val_perplexity`; returns the new lr."""
        memory = state.schedule
        previous = memory.get("previous_val_ppl")
        rose = previous is not None and val_perplexity > previous
        scheduled = self.start_decay_at is not None and epoch >= self.start_decay_at
        if memory.get("decay_started") or rose or scheduled:
            memory["decay_started"] = True
            state.lr *= self.lr_decay
        memory["previous_val_ppl"] = val_perplexity
        return state.lr
