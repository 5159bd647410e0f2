"""The glue around transformers' `Trainer` that the BCN and DCN commands share: their `TrainingArguments` (the
global batch split over a distributed launch's processes), the callbacks that time epochs (their records kept in the
checkpoints), stop on a time budget and find a resumed run's best checkpoint, which checkpoint a resume can start
from, why a run stopped, and printing on the main process only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import torch
from transformers import TrainerCallback, TrainerState, TrainingArguments
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME, TRAINER_STATE_NAME
from transformers.trainer_callback import ExportableState
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from ..common.files import folder_problem
from . import stopping

__all__ = ["checkpoint_folder", "checkpoint_problem", "checkpoint_step", "complete_checkpoint", "EpochTimer",
           "FindBestCheckpoint", "incomplete_checkpoints", "last_checkpoint", "live_callback", "log",
           "per_device_batch_size", "stop_reason", "TimeBudget", "trainer_state", "training_arguments", "whole_epoch"]


def log(message: str, trainer_args=None):
    """Print on the main process only (every process of a distributed run reaches the same point)."""
    if trainer_args is None or trainer_args.process_index == 0:
        print(message, flush=True)


def per_device_batch_size(batch_size: int, world_size: int) -> int:
    """The share of a global batch of `batch_size` examples each of `world_size` processes takes per step."""
    if batch_size % world_size:
        raise ValueError(f"batch_size {batch_size} does not split over {world_size} processes: choose a multiple "
                         f"of {world_size} (--batch-size)")
    return batch_size // world_size


def training_arguments(output_dir, global_batch_size: int, seed: int, use_cpu=None, **arguments) -> TrainingArguments:
    """`TrainingArguments` with what every head's run shares: the global batch of `global_batch_size` examples split
    over the processes of a distributed launch (WORLD_SIZE, set by accelerate launch / torchrun), no reporting, no
    dataloader workers, every column kept (the collators read more than the model's inputs), the first step logged,
    and the GPU when there is one (`use_cpu` None; on a CPU machine N launched processes make one DDP job over gloo).
    `arguments`: the run's own settings."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    return TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=per_device_batch_size(global_batch_size, world_size),
        seed=seed,
        report_to="none",
        dataloader_num_workers=0,
        remove_unused_columns=False,
        logging_first_step=True,
        use_cpu=not torch.cuda.is_available() if use_cpu is None else use_cpu,
        **arguments,
    )


class EpochTimer(TrainerCallback, ExportableState):
    """Wall time of each epoch's training part (evaluations inside the epoch subtracted), and CPU seconds. An epoch
    closes at its last step, before the evaluation and checkpoint of that step, so a checkpoint holds its record;
    the records travel in the Trainer's checkpoints (`ExportableState`; restored with
    `restore_callback_states_from_checkpoint`), so a resumed run keeps the epochs before its stop. The epoch it
    resumed inside is marked `resumed` (it timed only the steps after the checkpoint), one left before its last step
    `partial` (early stopping, a step budget)."""

    def __init__(self):
        self.epochs, self._start, self._cpu_start, self._eval, self._resumed = [], None, None, 0.0, False

    def state(self) -> dict:
        return {"args": {}, "attributes": {"epochs": self.epochs}}

    def on_epoch_begin(self, args, state, control, **kwargs):
        self._start, self._cpu_start, self._eval = time.time(), time.process_time(), 0.0
        self._resumed = not whole_epoch(state.epoch)  # a checkpoint's step inside this epoch

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        self._eval += float((metrics or {}).get("eval_runtime", 0.0))

    def on_step_end(self, args, state, control, **kwargs):
        if whole_epoch(state.epoch):
            self._close(state)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._close(state, partial=True)  # an epoch left before its last step (early stopping, --max-steps)

    def _close(self, state, partial=False):
        if self._start is None:
            return
        seconds = time.time() - self._start - self._eval
        # CPU seconds of this process (all threads), evaluations inside the epoch included: robust to other load
        cpu_seconds = time.process_time() - self._cpu_start
        flags = {"resumed": self._resumed, "partial": partial}
        self.epochs.append({"epoch": round(state.epoch, 3), "step": state.global_step,
                            "train_seconds": round(seconds, 2), "cpu_seconds": round(cpu_seconds, 2),
                            **{flag: True for flag, value in flags.items() if value}})
        self._start = None


def whole_epoch(epoch: float | None) -> bool:
    """Whether the Trainer's fractional epoch count `epoch` stands at an epoch boundary."""
    return epoch is not None and abs(epoch - round(epoch)) < 1e-9


class FindBestCheckpoint(TrainerCallback):
    """Keeps a resumed run's best checkpoint: the Trainer drops a recorded `best_model_checkpoint` that is not a
    folder where it looks (the run folder moved since, or given relative to another working folder), and, resumed
    where it saves no more (at its end), would then load and test the last weights; this finds it again in the output
    folder by its step (`best_global_step`)."""

    def on_train_begin(self, args, state, control, **kwargs):
        if state.best_global_step and not (state.best_model_checkpoint and Path(state.best_model_checkpoint).is_dir()):
            folder = checkpoint_folder(args.output_dir, state.best_global_step)
            if folder.is_dir():
                state.best_model_checkpoint = str(folder)


def live_callback(trainer, kind: type):
    """The trainer's callback of class `kind` now: resuming from a checkpoint replaces a stateful callback with one
    rebuilt from the checkpoint's state, so a reference kept from before `train()` may be stale."""
    return next((callback for callback in trainer.callback_handler.callbacks if isinstance(callback, kind)), None)


CHECKPOINT_FILES = (TRAINER_STATE_NAME, OPTIMIZER_NAME, SCHEDULER_NAME)  # the state: written last by rank 0


def checkpoint_problem(folder: Path | str, world_size: int = 1) -> str | None:
    """What keeps the Trainer checkpoint `folder` of a run of `world_size` processes from being whole, None when it
    is: its state, optimizer, schedule, weights and every process's random state must be there (a kill while the
    Trainer writes one, or deletes one, leaves a part; the processes write their random states without waiting for
    each other), and no file in it cut short (`file_problem`: the Trainer writes each file in place, and reads the
    model's config as well on a resume)."""
    folder = Path(folder)
    rng = ["rng_state.pth"] if world_size <= 1 else [f"rng_state_{rank}.pth" for rank in range(world_size)]
    missing = [name for name in (*CHECKPOINT_FILES, *rng) if not (folder / name).is_file()]
    if missing:
        return f"{missing[0]}: missing"
    if not any(folder.glob("*.safetensors")):
        return "no weights (*.safetensors)"
    return folder_problem(folder)


def complete_checkpoint(folder: Path | str, world_size: int = 1) -> bool:
    """Whether the Trainer checkpoint `folder` of a run of `world_size` processes is whole (`checkpoint_problem`)."""
    return checkpoint_problem(folder, world_size) is None


def checkpoint_folder(output_dir: Path | str, step: int) -> Path:
    """The Trainer's checkpoint folder of `step` in `output_dir` (checkpoint-<step>)."""
    return Path(output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{step}"


def checkpoint_step(folder: Path | str) -> int:
    """The step of a Trainer checkpoint folder (checkpoint-<step>)."""
    return int(Path(folder).name.split("-")[-1])


def trainer_state(checkpoint: Path | str) -> TrainerState:
    """The Trainer's state saved in a checkpoint folder."""
    return TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_NAME))


def checkpoint_folders(folder: Path | str) -> list:
    """The Trainer checkpoint folders (checkpoint-<step>) in `folder`, complete or not, oldest first."""
    found = [path for path in Path(folder).glob(f"{PREFIX_CHECKPOINT_DIR}-*") if path.name.split("-")[-1].isdigit()]
    return sorted(found, key=checkpoint_step)


def last_checkpoint(folder: Path | str, world_size: int = 1) -> str | None:
    """The newest complete Trainer checkpoint in `folder` of a run of `world_size` processes (`complete_checkpoint`),
    None when there is none."""
    found = [path for path in checkpoint_folders(folder) if complete_checkpoint(path, world_size)]
    return str(found[-1]) if found else None


def incomplete_checkpoints(folder: Path | str, world_size: int = 1) -> dict:
    """The Trainer checkpoint folders in `folder` that a resume passes over, oldest first, each with its
    `checkpoint_problem`."""
    problems = {path: checkpoint_problem(path, world_size) for path in checkpoint_folders(folder)}
    return {path: problem for path, problem in problems.items() if problem}


def stop_reason(trainer, early_stopping=None, time_budget=None) -> str:
    """Why `trainer.train()` returned (`stopping`'s wording), from the Trainer's state and the callbacks that can
    stop it early (a `TimeBudget`, an `EarlyStoppingCallback`). A run that reached its planned last step ran its
    budget, whatever else fired then."""
    args, state = trainer.args, trainer.state
    if state.global_step >= state.max_steps:
        if args.max_steps > 0:
            return stopping.where(stopping.max_steps(args.max_steps),
                                  f"epoch {state.epoch:.2f} of {args.num_train_epochs:g}")
        return stopping.where(stopping.max_epochs(args.num_train_epochs), f"{state.global_step} steps")
    if time_budget is not None and time_budget.stopped:
        return stopping.where(stopping.time_budget(time_budget.seconds / 60), f"step {state.global_step}")
    patience = getattr(early_stopping, "early_stopping_patience", None)
    if patience and early_stopping.early_stopping_patience_counter >= patience:
        return stopping.where(stopping.early_stopping(patience, args.metric_for_best_model, "evaluations"),
                              f"step {state.global_step}", f"epoch {state.epoch:.2f}")
    return stopping.stopped_early(state.global_step, state.max_steps)


class TimeBudget(TrainerCallback):
    """Stops training once `minutes` have passed (checked after every step; None or 0: no budget)."""

    def __init__(self, minutes=None):
        self.seconds = None if minutes in (None, 0) else 60.0 * minutes
        self.start, self.stopped = None, False

    def on_train_begin(self, args, state, control, **kwargs):
        self.start = time.time()

    def on_step_end(self, args, state, control, **kwargs):
        if self.seconds is None:
            return
        over = time.time() - self.start > self.seconds
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # every process must stop at the same step (or the others wait forever in the next all-reduce)
            flag = torch.tensor([float(over)], device=args.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            over = bool(flag.item())
        if over:
            control.should_training_stop = True
            self.stopped = True
