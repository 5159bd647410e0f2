"""Why a training run stopped, worded one way for every loop — the Accelerate loop (MT, biLM, tagger), the glue
around transformers' `Trainer` (BCN, DCN) and early stopping in either: the reason first, then, in parentheses where
the loop knows it, where the run was. These sentences go into each run's metrics.json and model card."""

from __future__ import annotations

__all__ = ["early_stopping", "max_epochs", "max_steps", "min_lr", "no_better_in", "stopped_early", "time_budget",
           "where"]


def max_steps(limit: int) -> str:
    return f"max steps {limit} reached"


def max_epochs(limit: float) -> str:
    return f"max epochs {limit:g} reached"


def time_budget(minutes: float, seconds: float | None = None, next_epoch_seconds: float = 0.0) -> str:
    """The budget of `minutes` spent (`seconds` so far), or about to be: another epoch of `next_epoch_seconds`
    would exceed it (a loop that stops only between epochs)."""
    if next_epoch_seconds:
        return f"time budget {minutes:g} min: another epoch of {next_epoch_seconds:.0f} s would exceed it"
    return f"time budget {minutes:g} min spent" + (f" ({seconds:.0f} s)" if seconds is not None else "")


def min_lr(lr: float, limit: float) -> str:
    return f"lr {lr:g} fell below min_lr {limit:g}"


def early_stopping(patience: int, metric: str, unit: str) -> str:
    """No better validation `metric` in `patience` `unit` ("evaluations", "epochs")."""
    return f"early stopping: no better validation {metric} in {patience} {unit}"


def no_better_in(scores: list, patience: int) -> bool:
    """Whether the last `patience` of `scores` (validation scores in order, higher better) hold none above the best
    before them: the early-stopping rule of every loop (False while patience is 0 or there are not more scores)."""
    return bool(patience) and len(scores) > patience and max(scores[-patience:]) <= max(scores[:-patience])


def stopped_early(step: int, planned: int) -> str:
    """Stopped by something the loop does not name (a user's callback)."""
    return f"stopped at step {step} of {planned} by a callback"


def where(reason: str, *position: str) -> str:
    """`reason` with where the run was: where(r, "step 6", "epoch 1.20") -> "r (step 6, epoch 1.20)"."""
    return f"{reason} ({', '.join(position)})"
