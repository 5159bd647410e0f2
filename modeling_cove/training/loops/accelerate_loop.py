"""The loop MT pretraining (`loops/mt.py`, `MTPretraining`), biLM pretraining (`commands/train_bilm.py`,
`BiLMPretraining`) and tagger training (`commands/train_tagger.py`, `TaggerLoop`) run on. Each reads the same way:

    setup -> for each epoch: its batches -> a step per batch (stop inside the epoch?) ->
             end of epoch (evaluate, lr schedule, checkpoint, record) -> stop? -> finish (export)

Here lives what the loops have in common: the run folder and the settings a resume must keep
(`check_run_folder`, `start_run_folder`), the resume state (`LoopState`, one JSON file per checkpoint),
the reasons a run stops (`stop_reason`), each process's share of a batch under DDP (`rank_share`), the epoch batches
as a function of (seed, epoch) (`epoch_batches`), the optimizer factory (`make_optimizer`), checkpoints that are
written atomically, rotated and restored (`save_checkpoint`, `restore_checkpoint`), and the loop itself
(`AccelerateLoop`). A loop brings its own data, step, evaluation, lr schedule and exported encoder.

Why not a subclass of transformers' `Trainer`: the MT schedule (docs/paper.md §2) changes the lr after each epoch
from the validation perplexity, which no per-step scheduler expresses; the MT loss is the summed NLL over the
*global* batch; exact resume inside an epoch relies on a batch order that is a pure function of (seed, epoch); and
the `Trainer`'s checkpoints keep their RNG states as pickles. The classifier and QA heads do use the `Trainer`
(`loops/trainer.py`). Accelerate gives these loops the devices, DDP and the checkpoint files.

A checkpoint `checkpoints/step-N/` is `Accelerator.save_state` (model, optimizer, scheduler, every process's RNG
states) plus `pretraining_state.json` (a `LoopState`; checkpoints written before this module hold it as
`trainer_state.json`, read as well). The state is a JSON file rather than an object registered
with `Accelerator.register_for_checkpointing`, because Accelerate reads registered objects back with
`torch.load(weights_only=False)` (pickle); JSON also keeps it readable. Accelerate's automatic checkpoint naming is
not used either: it writes in place, and a run killed while saving would leave a checkpoint that looks complete;
here the checkpoint goes to a temporary folder renamed at the end.
"""

from __future__ import annotations

import json
import operator
import re
import shutil
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from ..common.files import commit_tmp, file_problem, folder_problem, fresh_tmp, write_json
from . import stopping

__all__ = ["AccelerateLoop", "BEST_STATE_FILE", "check_best_state", "check_run_folder", "checkpoint_dirs",
           "epoch_batches", "LoopState", "end_run", "make_accelerator", "make_optimizer", "rank_share", "read_state",
           "restore_checkpoint", "RUN_SETTINGS_FILE", "same_if_recorded", "same_place", "same_places",
           "same_with_defaults", "save_checkpoint", "start_run_folder", "state_file", "stop_reason", "StopLimits"]

STATE_FILE = "pretraining_state.json"
BEST_STATE_FILE = "best_state.safetensors"  # in the run folder: the weights of the best epoch (the loops that keep it)
LEGACY_STATE_FILE = "trainer_state.json"  # what checkpoints written before this module hold (read, never written)


@dataclass
class LoopState:
    """Everything besides Accelerate's model/optimizer/scheduler/RNG states that a run needs to continue exactly.
    The epoch batches are a function of (seed, epoch), so (epoch, step_in_epoch) says which batch comes next."""

    epoch: int = 0  # completed epochs
    step_in_epoch: int = 0  # optimizer steps already taken in the current (incomplete) epoch
    global_step: int = 0
    lr: float | None = None  # the lr of a per-epoch schedule (MT); None where a per-step scheduler owns it (biLM)
    schedule: dict = field(default_factory=dict)  # that schedule's memory (MT: decay_started, previous_val_ppl)
    epoch_sums: list = field(default_factory=list)  # the current epoch's training sums (NLL sums, token counts)
    train_tokens: int = 0  # training target tokens seen, all processes
    train_seconds: float = 0.0
    epoch_wall_seconds: list = field(default_factory=list)  # wall time of each finished epoch, evaluation included
    loss_log: list = field(default_factory=list)  # [global_step, loss, ...] every log_every steps
    running: list = field(default_factory=list)  # MT: (loss, NLL per token) of the steps since the last log entry
    running_logged: bool = False  # MT: loss_log[-1] is `running` flushed at a stop inside an epoch
    history: list = field(default_factory=list)  # one record per epoch (and one for a stop inside an epoch)
    finished: bool = False
    stop_reason: str | None = None  # why the run stopped (a sentence); None while it goes on

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "LoopState":
        """A state from `to_dict()`'s JSON, or from the JSON that MT checkpoints held before this class (their
        `decay_started`/`previous_val_ppl`, `epoch_nll_sum`/`epoch_tokens` and `train_target_tokens`)."""
        values = dict(values)
        if "epoch_nll_sum" in values:
            values["epoch_sums"] = [values.pop("epoch_nll_sum"), values.pop("epoch_tokens")]
        if "train_target_tokens" in values:
            values["train_tokens"] = values.pop("train_target_tokens")
        if "decay_started" in values:
            values["schedule"] = {"decay_started": values.pop("decay_started"),
                                  "previous_val_ppl": values.pop("previous_val_ppl")}
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"the pretraining state has keys {unknown} that no pretraining state holds")
        return cls(**values)


# ---------------------------------------------------------------------------------------------------------------
# stops, batches, optimizer


@dataclass
class StopLimits:
    """The limits a run stops at; None (or 0 for max_steps) means no limit."""

    max_epochs: int
    max_steps: int | None = None
    time_budget_minutes: float | None = None
    min_lr: float | None = None


def stop_reason(state: LoopState, limits: StopLimits, seconds: float | None = None,
                next_epoch_seconds: float = 0.0, inside_epoch: bool = False) -> str | None:
    """Why the run stops now, or None to go on. In order: max_steps reached; the time budget, when the `seconds`
    spent plus `next_epoch_seconds` (what another epoch would take, for a loop that stops only between epochs)
    exceed it (None: not judged now); and at an epoch end only, the lr fell below min_lr or the last epoch ended."""
    if limits.max_steps and state.global_step >= limits.max_steps:
        return stopping.max_steps(limits.max_steps)
    budget = limits.time_budget_minutes
    if budget is not None and seconds is not None and seconds + next_epoch_seconds > 60 * budget:
        return stopping.time_budget(budget, seconds, next_epoch_seconds)
    if inside_epoch:
        return None
    if limits.min_lr is not None and state.lr is not None and state.lr < limits.min_lr:
        return stopping.min_lr(state.lr, limits.min_lr)
    if state.epoch >= limits.max_epochs:
        return stopping.max_epochs(limits.max_epochs)
    return None


def rank_share(items: list, rank: int, world: int) -> list:
    """Process `rank`'s share of a list of batches (or of a batch's examples): every `world`-th item from `rank`."""
    return items[rank::world]


def epoch_batches(num_items: int, batch_size: int, seed: int, epoch: int, seed_stride: int, lengths: tuple = (),
                  chunk_batches: int = 1) -> list:
    """The epoch's global batches (lists of item indices), a pure function of (seed, epoch), which exact resume
    relies on. A permutation seeded by `seed * seed_stride + epoch` (each loop keeps its stride, so that runs begun
    earlier replay the same order), then:
    - no `lengths`: cut into full batches (a last partial one is dropped);
    - `lengths` (arrays, the first the primary key): length grouping, every batch kept: sort by length within chunks
      of `chunk_batches` batches, cut into batches, shuffle the batches."""
    generator = torch.Generator().manual_seed(seed * seed_stride + epoch)
    order = torch.randperm(num_items, generator=generator)
    if not lengths:
        order = order.tolist()
        return [order[i:i + batch_size] for i in range(0, num_items - batch_size + 1, batch_size)]
    order = order.numpy()
    chunk = batch_size * max(chunk_batches, 1)
    batches = []
    for start in range(0, len(order), chunk):
        part = order[start:start + chunk]
        part = part[np.lexsort(tuple(key[part] for key in reversed(lengths)))]
        batches += [part[i:i + batch_size].tolist() for i in range(0, len(part), batch_size)]
    shuffle = torch.randperm(len(batches), generator=generator).tolist()
    return [batches[i] for i in shuffle]


def make_accelerator(cpu: bool, find_unused_parameters: bool, batch_size: int | None = None):
    """The Accelerator of a loop on this scaffold. On the CPU when `cpu` or without a GPU: Accelerator(cpu=True) is
    what makes torchrun / `accelerate launch` on a CPU machine real DDP over gloo (docs/transformers_notes.md).
    `find_unused_parameters`: whether a step may leave trainable parameters without a gradient (DDP must be told).
    `batch_size`, the global batch, must split evenly over the processes: a ValueError naming both otherwise."""
    from accelerate import Accelerator, DistributedDataParallelKwargs

    accelerator = Accelerator(cpu=cpu or not torch.cuda.is_available(),
                              kwargs_handlers=[DistributedDataParallelKwargs(
                                  find_unused_parameters=find_unused_parameters)])
    if batch_size is not None and batch_size % accelerator.num_processes:
        raise ValueError(f"batch_size {batch_size} must be a multiple of the {accelerator.num_processes} processes")
    return accelerator


# The final barrier of every multi-process run, kept until the process ends (see `end_run`).
_FINAL_BARRIERS: list = []


def end_run(accelerator):
    """The last collective of a run (every process waits for the others), then `accelerator.end_training()`.

    The barrier's work handle is kept for the rest of the process. torch's gloo workers can otherwise hold the last
    reference to a collective whose tensors were made in Python (e.g. an object gather) and free it only after the
    main thread has started tearing the process group down; freeing it needs the interpreter lock that the tearing-down
    thread holds while it waits for them, and the process never exits (docs/transformers_notes.md, "Ending a gloo run"). The gloo barrier holds
    every collective still pending when it starts; one started earlier has been freed by then. Other backends: a plain
    `wait_for_everyone()`."""
    distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
    if accelerator.num_processes > 1 and distributed and torch.distributed.get_backend() == "gloo":
        work = torch.distributed.barrier(async_op=True)
        work.wait()
        _FINAL_BARRIERS.append(work)
    else:
        accelerator.wait_for_everyone()
    accelerator.end_training()


OPTIMIZERS = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam}


def make_optimizer(name: str, parameters: list, lr: float, momentum: float = 0.0) -> torch.optim.Optimizer:
    """`name` (sgd: the paper's MT optimizer, with `momentum` the CVT authors'; adam) over `parameters` at learning
    rate `lr`."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose {' or '.join(OPTIMIZERS)}")
    if name == "sgd":
        return torch.optim.SGD(parameters, lr=lr, momentum=momentum)
    # the fused kernel: one pass over each parameter where the default on CPU (single-tensor) makes about six; the
    # same update up to float rounding (tested), and it resumes from a checkpoint of the default path
    # (docs/design.md)
    optimizer = OPTIMIZERS[name](parameters, lr=lr, fused=True)
    optimizer.register_load_state_dict_pre_hook(_keep_implementation)
    return optimizer


_IMPLEMENTATION_KEYS = ("fused", "foreach")  # how an optimizer runs its update, not what the update is


def _keep_implementation(optimizer: torch.optim.Optimizer, state_dict: dict) -> dict | None:
    """A loaded optimizer state keeps this optimizer's kernel: `load_state_dict` takes every key of the saved
    groups, so a checkpoint of torch's default path (single-tensor on CPU, foreach on CUDA), as every checkpoint
    written before the fused kernel, would otherwise switch it back. A state with another number of groups is left
    to torch, which refuses it."""
    if len(state_dict["param_groups"]) != len(optimizer.param_groups):
        return None
    groups = [{**saved, **{key: group[key] for key in _IMPLEMENTATION_KEYS if key in group}}
              for saved, group in zip(state_dict["param_groups"], optimizer.param_groups)]
    return {**state_dict, "param_groups": groups}


# ---------------------------------------------------------------------------------------------------------------
# the run folder and its checkpoints

RUN_SETTINGS_FILE = "run_settings.json"  # the settings of the run's first start, what a resume is compared with


def check_run_folder(output_dir: Path | str, settings: dict, resume_keys, resume: bool, overwrite: bool,
                     defaults: dict | None = None, same: dict | None = None):
    """Before anything is loaded or written: a resumed run needs the first run's settings, with the same values of
    `resume_keys` (the data order, vocabularies, model and optimizer are built from them once); a new run an empty
    or missing folder, or `overwrite`. A ValueError says which. A key of `defaults` that the first run did not
    record (a setting added since) is taken at its value there, the value the first run ran with. `same`: key ->
    `equal(first run's value, now)` for a key whose values can differ in spelling only (a folder given relative once
    and absolute once); the others compare with ==."""
    output_dir = Path(output_dir)
    run_file = output_dir / RUN_SETTINGS_FILE
    if resume:
        if not run_file.exists():
            raise ValueError(f"resume: {run_file} does not exist (nothing to resume)")
        previous = {**(defaults or {}), **json.loads(run_file.read_text())}
        equal = {key: (same or {}).get(key, operator.eq) for key in resume_keys}
        changed = {k: differences(previous.get(k), settings.get(k)) for k in resume_keys
                   if not equal[k](previous.get(k), settings.get(k))}
        if changed:
            raise ValueError(f"resume with different data/batching/model settings {changed} (first run, now): the "
                             "run would not continue exactly; use the original ones")
    elif output_dir.exists() and any(output_dir.iterdir()) and not overwrite:
        raise ValueError(f"{output_dir} exists and is not empty (resume or overwrite)")


def differences(first, now):
    """(first, now), or for two dicts only their entries that differ: {key: (first, now)}."""
    if isinstance(first, dict) and isinstance(now, dict):
        return {k: (first.get(k), now.get(k)) for k in {**first, **now} if first.get(k) != now.get(k)}
    return first, now


def same_place(first, now) -> bool:
    """Two spellings of one path (relative and absolute, `..` or not): equal resolved; None only equals None. Both
    are resolved in the working directory of now: a run started with relative paths resumes from the same relative
    place on another machine; one started with absolute paths resumes where those paths are."""
    if first is None or now is None:
        return first is now
    return Path(first).resolve() == Path(now).resolve()


def check_best_state(path: Path) -> None:
    """A RuntimeError naming `path`, the best epoch's weights (`BEST_STATE_FILE`), when it is not whole
    (`file_problem`: a machine lost before it was written out) instead of a failure deep in safetensors."""
    problem = file_problem(path)
    if problem:
        raise RuntimeError(f"{path} (the best epoch's weights) is not whole ({problem}): the run cannot keep its "
                           "best epoch; start it again")


def same_if_recorded(first, now) -> bool:
    """A resume key compared only where the first run recorded it (older runs did not): equal, or unrecorded."""
    return first is None or first == now


def same_with_defaults(first: dict | None, now: dict, defaults: dict) -> bool:
    """Two dicts of settings alike, a key `first` lacks (a setting added since it was recorded) counting at its value
    in `defaults`; a `first` of None (recorded before these settings were) is taken as it is."""
    if first is None:
        return True
    return all(first.get(key, defaults.get(key)) == value for key, value in now.items())


def same_places(first, now, is_place=None) -> bool:
    """Two lists naming the same files in the same order (`same_place`); None only equals None. With `is_place`, a
    list of names and paths: two entries that are both paths (`is_place`) compare by place, any others as written."""
    if first is None or now is None or len(first) != len(now):
        return first == now
    return all(same_place(a, b) if is_place is None or (is_place(a) and is_place(b)) else a == b
               for a, b in zip(first, now))


def start_run_folder(accelerator, output_dir: Path | str, settings: dict, resume: bool):
    """Clear the folder of a new run (what `check_run_folder` allowed: overwrite), then record `settings`."""
    output_dir = Path(output_dir)
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if not resume:
            shutil.rmtree(output_dir, ignore_errors=True)
        output_dir.mkdir(parents=True, exist_ok=True)
        write_json(output_dir / RUN_SETTINGS_FILE, settings)
    accelerator.wait_for_everyone()



def state_file(checkpoint: Path | str) -> Path | None:
    """The state JSON of a checkpoint folder (`STATE_FILE`, or `LEGACY_STATE_FILE` in an older one); None when it
    has none, i.e. the checkpoint is incomplete."""
    for name in (STATE_FILE, LEGACY_STATE_FILE):
        if (Path(checkpoint) / name).is_file():
            return Path(checkpoint) / name
    return None


def _checkpoint_problem(folder: Path) -> str | None:
    """What keeps a checkpoint folder from being complete, None when it is: its state file missing (a save killed
    before the rename leaves no such folder; one of an older layout may) or a file cut short (`file_problem`: a
    machine lost before the system wrote the renamed files out can leave one)."""
    if state_file(folder) is None:
        return f"{STATE_FILE}: missing"
    return folder_problem(folder)


def _step_folders(output_dir: Path | str) -> list:
    """The checkpoint folders (checkpoints/step-N) of a run, complete or not, oldest first."""
    root = Path(output_dir) / "checkpoints"
    found = [d for d in root.iterdir() if re.fullmatch(r"step-\d+", d.name)] if root.is_dir() else []
    return sorted(found, key=lambda d: int(d.name.split("-")[1]))


def checkpoint_dirs(output_dir: Path | str) -> list:
    """The complete checkpoints of a run, oldest first: each with its state file, no file cut short."""
    return [d for d in _step_folders(output_dir) if _checkpoint_problem(d) is None]


def read_state(checkpoint: Path | str) -> LoopState:
    """The `LoopState` of a checkpoint folder."""
    path = state_file(checkpoint)
    if path is None:
        raise FileNotFoundError(f"{checkpoint} holds no {STATE_FILE}: not a complete pretraining checkpoint")
    try:
        return LoopState.from_dict(json.loads(path.read_text()))
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def save_checkpoint(accelerator, output_dir: Path | str, state: LoopState, keep: int, extra=None):
    """`accelerator.save_state` into a temporary folder, the state beside it, then an atomic rename: a killed run
    never leaves a checkpoint that looks complete. Keeps the newest `keep` checkpoints (all when keep <= 0).
    `extra(folder)`, on the main process, writes what else the loop keeps (e.g. averaged weights) into it."""
    final = Path(output_dir) / "checkpoints" / f"step-{state.global_step:08d}"
    tmp = final.with_name(final.name + ".tmp")
    if accelerator.is_main_process:
        fresh_tmp(final)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        if extra is not None:
            extra(tmp)
        write_json(tmp / STATE_FILE, state.to_dict())
        commit_tmp(tmp, final)
        for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def restore_checkpoint(accelerator, output_dir: Path | str) -> LoopState | None:
    """Load the newest complete checkpoint of `output_dir` into the prepared objects (Accelerate) and return its
    state; None when there is none."""
    folders = _step_folders(output_dir)
    problems = [_checkpoint_problem(folder) for folder in folders]
    checkpoints = [folder for folder, problem in zip(folders, problems) if problem is None]
    newest = folders.index(checkpoints[-1]) if checkpoints else -1
    for folder, problem in list(zip(folders, problems))[newest + 1:]:
        accelerator.print(f"resume: passed over {folder}: {problem}")
    if not checkpoints:
        return None
    accelerator.load_state(str(checkpoints[-1]))  # model, optimizer, scheduler, RNG states of every process
    state = read_state(checkpoints[-1])
    accelerator.print(f"resumed from {checkpoints[-1]} (epoch {state.epoch}, step {state.global_step})")
    return state


# ---------------------------------------------------------------------------------------------------------------
# the loop


class AccelerateLoop:
    """An epoch loop over a prepared model, with exact resume. A subclass calls `__init__`, prepares its model
    (`self.model`) and optimizer with the accelerator, calls `start()`, and implements the hooks:
    `epoch_batches(epoch)`, `train_step(batch)` (one optimizer step and the state's counters), `evaluate(epoch,
    stopped, epoch_start)` (the epoch's record), `fresh_epoch_sums()` and `finish()` (the export); optionally
    `schedule(epoch, record)`, `close_epoch_log(stopped)`, `write_record()` and `seconds(inside_epoch)`."""

    model = None
    state: LoopState

    def __init__(self, accelerator, output_dir, limits: StopLimits, seed: int, save_steps: int = 0,
                 keep_checkpoints: int = 2):
        self.accelerator, self.output_dir, self.limits, self.seed = accelerator, Path(output_dir), limits, seed
        self.save_steps, self.keep_checkpoints = save_steps, keep_checkpoints  # save_steps 0: at epoch ends only
        self.train_started = None  # when training (not data preparation) began in this process

    # --- hooks -----------------------------------------------------------------------------------------------

    def epoch_batches(self, epoch: int) -> list:
        raise NotImplementedError

    def train_step(self, batch: list) -> dict:
        """One optimizer step on a global batch (this process trains on its share); returns the progress bar's
        figures (the loop adds the tokens per second)."""
        raise NotImplementedError

    def evaluate(self, epoch: int, stopped: str | None, epoch_start: float) -> dict:
        raise NotImplementedError

    def fresh_epoch_sums(self) -> list:
        raise NotImplementedError

    def finish(self):
        raise NotImplementedError

    def schedule(self, epoch: int, record: dict):
        """The lr schedule after a complete epoch (none by default: a per-step scheduler steps in `train_step`)."""

    def close_epoch_log(self, stopped: str | None):
        """The loss log at the end of an epoch or at a stop inside it (nothing by default)."""

    def write_record(self):
        """metrics.json and the curves of the run so far (nothing by default)."""

    def save_extra(self, folder: Path):
        """Write what the loop keeps beside Accelerate's states into a checkpoint `folder` (main process; nothing by
        default)."""

    def restore_extra(self, folder: Path):
        """Read back what `save_extra` wrote, from the checkpoint `folder` a resume starts from (every process)."""

    def seconds(self, inside_epoch: bool) -> tuple:
        """(seconds spent, seconds another epoch would take) for the time budget; seconds None: not judged now.
        By default: the training time of this process so far, judged at every step."""
        return (time.time() - self.train_started if self.train_started else 0.0), 0.0

    # --- the scaffold ----------------------------------------------------------------------------------------

    def why_stop(self, inside_epoch: bool = False) -> str | None:
        """`stop_reason` now, with this loop's limits and clock."""
        seconds, next_epoch_seconds = self.seconds(inside_epoch)
        return stop_reason(self.state, self.limits, seconds, next_epoch_seconds, inside_epoch=inside_epoch)

    def start(self, resume: bool, fresh: LoopState):
        """The newest checkpoint's state (with `resume`), decided for the limits given now, or `fresh` with the
        dropout streams seeded per process:
        - max_steps already reached: finished, nothing is trained;
        - stopped inside an epoch: that epoch continues at its next batch;
        - at an epoch end: finished unless the limits given now allow another epoch."""
        from accelerate.utils import set_seed

        accelerator = self.accelerator
        state = restore_checkpoint(accelerator, self.output_dir) if resume else None
        if resume and state is None:
            accelerator.print("resume: no complete checkpoint yet, starting from the beginning")
        if state is None:
            set_seed(self.seed + accelerator.process_index)  # dropout streams: distinct per process
            self.state = fresh
            return
        self.state = state
        self.restore_extra(checkpoint_dirs(self.output_dir)[-1])
        reason = stop_reason(state, self.limits, inside_epoch=True)  # no clock given: max_steps alone
        if reason is not None:
            accelerator.print(f"step {state.global_step} >= max_steps {self.limits.max_steps}: nothing to train")
        elif state.step_in_epoch > 0:
            accelerator.print(f"continuing epoch {state.epoch + 1} at its step {state.step_in_epoch + 1}")
        else:
            reason = self.why_stop()
            accelerator.print(f"finished run, nothing to train: {reason}" if reason else
                              f"continuing at epoch {state.epoch + 1}: it fits the limits")
        state.finished, state.stop_reason = reason is not None, reason

    def train(self):
        """Epochs until a stop reason."""
        self.train_started = time.time()
        while not self.state.finished:
            self.run_epoch(self.state.epoch + 1)
        self.accelerator.print(f"stopped: {self.state.stop_reason}")

    def run_epoch(self, epoch: int):
        """The rest of `epoch` from its step `state.step_in_epoch`, then its end."""
        from tqdm.auto import tqdm

        state = self.state
        batches = self.epoch_batches(epoch)
        self.model.train()
        epoch_start = time.time()
        bar = tqdm(total=len(batches), initial=state.step_in_epoch, desc=f"epoch {epoch}", unit="step",
                   disable=not self.accelerator.is_local_main_process, dynamic_ncols=True)
        stopped = None
        for batch in batches[state.step_in_epoch:]:
            step_start = time.time()
            figures = self.train_step(batch)
            state.train_seconds += time.time() - step_start
            bar.update(1)
            bar.set_postfix(**figures, tok_s=f"{state.train_tokens / max(state.train_seconds, 1e-9):.0f}")
            inside = state.step_in_epoch < len(batches)  # not at the epoch's last batch
            reason = self.why_stop(inside_epoch=True)
            if reason is not None and inside:
                stopped = reason
                break
            if self.save_steps and state.global_step % self.save_steps == 0 and inside:
                save_checkpoint(self.accelerator, self.output_dir, state, self.keep_checkpoints, self.save_extra)
        bar.close()
        self.end_of_epoch(epoch, stopped, epoch_start)

    def end_of_epoch(self, epoch: int, stopped: str | None, epoch_start: float):
        """End of an epoch, or a stop inside it: loss log, evaluation, lr schedule, stop, checkpoint, record. A stop
        inside the epoch keeps its position, sums and lr, so that resume with larger limits continues exactly as an
        uninterrupted run."""
        state = self.state
        self.close_epoch_log(stopped)
        record = self.evaluate(epoch, stopped, epoch_start)
        if state.history and state.history[-1]["epoch"] == epoch and not state.history[-1]["complete"]:
            state.history.pop()  # the record of this epoch's earlier stop inside it, now superseded
        state.history.append(record)
        if stopped is not None:
            state.finished, state.stop_reason = True, stopped
        else:
            self.schedule(epoch, record)
            state.epoch, state.step_in_epoch = epoch, 0
            state.epoch_sums = self.fresh_epoch_sums()
            state.epoch_wall_seconds.append(time.time() - epoch_start)
            state.stop_reason = self.why_stop()
            state.finished = state.stop_reason is not None
        save_checkpoint(self.accelerator, self.output_dir, state, self.keep_checkpoints, self.save_extra)
        self.write_record()
