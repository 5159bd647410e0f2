"""The resume state of MT pretraining: what a checkpoint holds besides Accelerate's model/optimizer/RNG state, how it
is written (never half), and how a run continues from it (mid-epoch, after a --max-steps stop, or a finished run
given larger limits).

A checkpoint `checkpoints/step-N/` is `Accelerator.save_state` (model, optimizer, every process's RNG states) plus
`trainer_state.json` (a TrainerState). The TrainerState is a JSON file rather than an object registered with
`Accelerator.register_for_checkpointing`, because Accelerate reads registered objects back with
`torch.load(weights_only=False)` (pickle); JSON also keeps it readable. Accelerate's automatic checkpoint naming is not
used either: it writes in place, and a run killed while saving would leave a checkpoint that looks complete; here
the state goes to a temporary folder renamed at the end.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from .mt_schedule import stop_reason
from .run_info import write_json

STATE_FILE = "trainer_state.json"


class TrainerState:
    """Everything besides model/optimizer/RNG needed to continue exactly. The epoch batches are a function of
    (seed, epoch), so (epoch, step_in_epoch) says which batch comes next."""

    def __init__(self, lr: float | None = None):
        self.epoch = 0  # completed epochs
        self.step_in_epoch = 0  # optimizer steps already taken in the current (incomplete) epoch
        self.global_step = 0
        self.lr = lr
        self.decay_started = False
        self.previous_val_ppl = None
        self.history = []  # one dict per completed epoch
        self.loss_log = []  # [global_step, mean loss per sentence, mean nll per token] every log_every steps
        self.epoch_nll_sum = 0.0  # of the current epoch, summed over processes
        self.epoch_tokens = 0
        self.running = []  # (loss, nll per token) of the steps since the last loss_log entry
        self.running_logged = False  # loss_log[-1] is `running` flushed at a --max-steps stop inside an epoch
        self.train_seconds = 0.0
        self.epoch_wall_seconds = []  # wall time of each finished epoch, evaluation included
        self.train_target_tokens = 0
        self.finished = False
        self.stop_reason = None  # why the run stopped (a sentence), None while it goes on

    def state_dict(self) -> dict:
        return dict(self.__dict__)

    def load_state_dict(self, state: dict):
        self.__dict__.update(state)


def checkpoint_dirs(output_dir: Path | str) -> list:
    """The complete checkpoints of a run, oldest first."""
    root = Path(output_dir) / "checkpoints"
    if not root.is_dir():
        return []
    dirs = [d for d in root.iterdir() if re.fullmatch(r"step-\d+", d.name) and (d / STATE_FILE).exists()]
    return sorted(dirs, key=lambda d: int(d.name.split("-")[1]))


def read_trainer_state(checkpoint: Path | str) -> dict:
    return json.loads((Path(checkpoint) / STATE_FILE).read_text())


def save_checkpoint(accelerator, output_dir: Path, state: TrainerState, keep: int):
    """`accelerator.save_state` into a temporary folder, the TrainerState beside it, then an atomic rename: a killed
    run never leaves a checkpoint that looks complete. Keeps the newest `keep` checkpoints (all when keep <= 0)."""
    final = Path(output_dir) / "checkpoints" / f"step-{state.global_step:08d}"
    tmp = final.with_name(final.name + ".tmp")
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        write_json(tmp / STATE_FILE, state.state_dict())
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        for old in checkpoint_dirs(output_dir)[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()


def restore_state(accelerator, output_dir: Path, settings: dict, time_budget_minutes=None) -> TrainerState | None:
    """Load the newest complete checkpoint of `output_dir` into the prepared model/optimizer (Accelerate) and return
    its TrainerState, decided for the limits given now; None when there is no checkpoint yet.

    - stopped by --max-steps inside an epoch, and steps are left: that epoch continues at its next batch;
    - finished at an epoch end, and the limits given now allow another epoch: the next epoch starts;
    - no steps left under --max-steps: finished, nothing is trained."""
    checkpoints = checkpoint_dirs(output_dir)
    if not checkpoints:
        return None
    accelerator.load_state(str(checkpoints[-1]))  # model, optimizer, RNG states of every process
    state = TrainerState()
    state.load_state_dict(read_trainer_state(checkpoints[-1]))
    accelerator.print(f"resumed from {checkpoints[-1]} (epoch {state.epoch}, step {state.global_step})")
    max_steps = settings.get("max_steps")
    steps_left = not max_steps or state.global_step < max_steps
    if not steps_left:
        state.finished = True
        state.stop_reason = f"max steps {max_steps} reached"
        accelerator.print(f"step {state.global_step} >= --max-steps {max_steps}: nothing to train")
    elif state.finished and state.step_in_epoch > 0:
        state.finished, state.stop_reason = False, None
        accelerator.print(f"continuing epoch {state.epoch + 1} at its step {state.step_in_epoch + 1}")
    elif state.finished:
        reason = stop_reason(state, settings, time_budget_minutes)
        if reason is None:
            state.finished, state.stop_reason = False, None
            accelerator.print(f"continuing a finished run: epoch {state.epoch + 1} fits the new limits")
        else:
            state.stop_reason = reason
            accelerator.print(f"finished run, nothing to train: {reason}")
    return state
