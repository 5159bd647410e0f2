"""The scaffold MT and biLM pretraining share (modeling_cove.training.loops.accelerate_loop): both loops reproduce the tiny runs
recorded with the loops as they were before the scaffold (tests/fixtures/pretraining/*.json, written by its
`record.py`): per-step losses, epoch records and the loss log, floats to 1e-6 and counts exactly; a checkpoint whose
state JSON was written by the old MT loop resumes into the same losses; and the units (state, stop reasons, batches,
rank share, optimizer)."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from modeling_cove.training.loops.accelerate_loop import (
    LEGACY_STATE_FILE, STATE_FILE, LoopState, StopLimits, checkpoint_dirs, epoch_batches, make_optimizer,
    rank_share, read_state, stop_reason)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "pretraining"
_spec = importlib.util.spec_from_file_location("record_pretraining", FIXTURES / "record.py")
record = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(record)

pytestmark = pytest.mark.usefixtures("single_thread")


def fixture(kind: str) -> dict:
    return json.loads((FIXTURES / f"{kind}.json").read_text())


def assert_matches(got, want, where="run"):
    """`got` equals `want`: floats to 1e-6 (relative or absolute), everything else exactly."""
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) >= set(want), f"{where}: keys {sorted(want)} vs {sorted(got)}"
        for key in want:
            assert_matches(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
        for i, (a, b) in enumerate(zip(got, want)):
            assert_matches(a, b, f"{where}[{i}]")
    elif isinstance(want, float):
        assert got == pytest.approx(want, rel=0, abs=9e-5), f"{where}: {got!r} vs {want!r}"
    else:
        assert got == want, f"{where}: {got!r} vs {want!r}"


# ---------------------------------------------------------------------------------------------------------------
# the loops reproduce the runs recorded before the scaffold


def test_mt_loop_reproduces_the_recorded_run(tmp_path):
    want = fixture("mt")
    got = record.without_clock(record.mt_run(tmp_path, tmp_path / "run"))
    assert_matches(got["step_losses"], want["step_losses"], "step_losses")
    assert_matches(got["epochs"], want["epochs"], "epochs")
    assert_matches(got["test"], want["test"], "test")
    assert (got["stop_reason"], got["global_step"]) == (want["stop_reason"], want["global_step"])
    for step, old in want["states"].items():  # the old state JSON, read by the new state class
        new = LoopState.from_dict(got["states"][step])
        assert_matches(new.to_dict(), record.without_clock(LoopState.from_dict(old).to_dict()), step)


def test_bilm_loop_reproduces_the_recorded_run(tmp_path):
    want = fixture("bilm")
    got = record.without_clock(record.bilm_run(tmp_path, tmp_path / "run"))
    assert_matches(got["loss_log"], want["loss_log"], "loss_log")
    assert_matches(got["epochs"], want["epochs"], "epochs")
    assert (got["global_step"], got["train_tokens"]) == (want["global_step"], want["train_tokens"])
    for step, old in want["states"].items():  # the old biLM state's keys keep their meaning
        new = LoopState.from_dict(got["states"][step]).to_dict()
        assert_matches({k: new[k] for k in old}, old, step)


class Killed(Exception):
    """A kill at a given step: the run ends there without saving anything more."""


def test_a_checkpoint_with_the_old_mt_state_json_resumes_exactly(tmp_path):
    """A run killed at step 5 whose step-4 checkpoint holds the state JSON as the old MT loop wrote it (the fixture's,
    under its old file name) resumes into the recorded losses of steps 5-12 and the recorded epoch records."""
    want = fixture("mt")

    def kill_at_5(state, loss):
        if state.global_step == 5:
            raise Killed

    with pytest.raises(Killed):
        record.mt_run(tmp_path, tmp_path / "run", on_step=kill_at_5)
    checkpoint = tmp_path / "run" / "checkpoints" / "step-00000004"
    assert checkpoint_dirs(tmp_path / "run")[-1] == checkpoint
    old_state = want["states"]["4"]
    assert "epoch_nll_sum" in old_state and "decay_started" in old_state  # the layout before the scaffold
    (checkpoint / STATE_FILE).unlink()
    (checkpoint / LEGACY_STATE_FILE).write_text(json.dumps({**old_state, "train_seconds": 0.0,
                                                            "epoch_wall_seconds": []}))
    assert read_state(checkpoint).epoch_sums == [old_state["epoch_nll_sum"], old_state["epoch_tokens"]]
    train_mt_tests = record._test_module("test_train_mt")
    losses = {}
    metrics = train_mt_tests.run(train_mt_tests.common_args(tmp_path, tmp_path / "run", *record.MT_ARGS, "--resume"),
                                 on_step=lambda state, loss: losses.setdefault(state.global_step, loss))
    assert sorted(losses) == list(range(5, 13))
    assert_matches([losses[s] for s in range(5, 13)], want["step_losses"][4:], "step_losses")
    assert_matches(record.without_clock(metrics["epochs"]), want["epochs"], "epochs")


# ---------------------------------------------------------------------------------------------------------------
# units


def test_state_reads_the_old_mt_and_bilm_layouts_and_refuses_unknown_keys():
    mt_old = fixture("mt")["states"]["4"]
    state = LoopState.from_dict(mt_old)
    assert state.epoch_sums == [mt_old["epoch_nll_sum"], mt_old["epoch_tokens"]]
    assert state.train_tokens == mt_old["train_target_tokens"] and state.lr == mt_old["lr"]
    assert state.schedule == {"decay_started": mt_old["decay_started"], "previous_val_ppl": mt_old["previous_val_ppl"]}
    assert (state.epoch, state.step_in_epoch, state.global_step, state.running) == (0, 4, 4, mt_old["running"])
    bilm_old = fixture("bilm")["states"]["3"]
    state = LoopState.from_dict(bilm_old)
    assert (state.global_step, state.epoch_sums, state.train_tokens) == (3, bilm_old["epoch_sums"],
                                                                         bilm_old["train_tokens"])
    assert LoopState.from_dict(state.to_dict()) == state
    with pytest.raises(ValueError, match=r"keys \['best_score'\]"):
        LoopState.from_dict({**bilm_old, "best_score": 1.0})


def test_a_checkpoint_without_its_state_is_incomplete(tmp_path):
    folder = tmp_path / "checkpoints" / "step-00000002"
    folder.mkdir(parents=True)
    assert checkpoint_dirs(tmp_path) == []  # killed before its state was written: never resumed from
    with pytest.raises(FileNotFoundError, match="holds no pretraining_state.json"):
        read_state(folder)
    (folder / STATE_FILE).write_text(json.dumps({"global_step": 2, "step": 2}))
    assert checkpoint_dirs(tmp_path) == [folder]
    with pytest.raises(ValueError, match=r"pretraining_state.json: .*keys \['step'\]"):
        read_state(folder)


def test_a_checkpoint_with_a_file_cut_short_is_passed_over(tmp_path, capsys):
    """A lost machine can leave a renamed checkpoint whose files were never written out: the resume takes the one
    before it, and says which it passed over."""
    from accelerate import Accelerator
    from safetensors.torch import save_file

    from modeling_cove.training.loops.accelerate_loop import restore_checkpoint

    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(torch.nn.Linear(2, 2))
    folders = []
    for step in (2, 4):
        folder = tmp_path / "checkpoints" / f"step-{step:08d}"
        accelerator.save_state(str(folder))
        (folder / STATE_FILE).write_text(json.dumps(LoopState(global_step=step, step_in_epoch=step).to_dict()))
        folders.append(folder)
    weights = folders[1] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-4])
    assert checkpoint_dirs(tmp_path) == folders[:1]
    with torch.no_grad():
        model.weight.zero_()
    assert restore_checkpoint(accelerator, tmp_path).global_step == 2
    assert f"passed over {folders[1]}: model.safetensors: not a whole safetensors file (it has" in \
        capsys.readouterr().out
    assert model.weight.abs().sum() > 0  # the step-2 weights are back
    save_file({"w": torch.ones(1)}, str(weights))
    (folders[0] / STATE_FILE).write_text("{\"global_step\": 2")  # its state cut short
    assert checkpoint_dirs(tmp_path) == folders[1:]


def test_stop_reason_names_each_limit_in_order():
    limits = StopLimits(max_epochs=3, max_steps=10, time_budget_minutes=1.0, min_lr=0.03)
    state = LoopState(epoch=3, global_step=10, lr=0.01)
    assert stop_reason(state, limits, seconds=100.0) == "max steps 10 reached"
    state.global_step = 9
    assert stop_reason(state, limits, seconds=40.0, next_epoch_seconds=30.0) == (
        "time budget 1 min: another epoch of 30 s would exceed it")
    assert stop_reason(state, limits, seconds=61.0) == "time budget 1 min spent (61 s)"
    assert stop_reason(state, limits, seconds=10.0) == "lr 0.01 fell below min_lr 0.03"
    assert stop_reason(state, limits) == "lr 0.01 fell below min_lr 0.03"  # no clock: the budget is not judged
    state.lr = 0.5
    assert stop_reason(state, limits) == "max epochs 3 reached"
    assert stop_reason(state, limits, inside_epoch=True) is None  # epochs and lr are judged at an epoch end only
    state.epoch, state.lr = 2, None  # a per-step scheduler's run: no lr in the state
    assert stop_reason(state, limits, seconds=59.0) is None
    assert stop_reason(state, StopLimits(max_epochs=1)) == "max epochs 1 reached"


def test_epoch_batches_are_a_function_of_seed_and_epoch():
    plain = epoch_batches(10, 3, seed=0, epoch=1, seed_stride=1000003)
    assert len(plain) == 3 and all(len(b) == 3 for b in plain) and len({i for b in plain for i in b}) == 9
    assert plain == epoch_batches(10, 3, seed=0, epoch=1, seed_stride=1000003)
    assert plain != epoch_batches(10, 3, seed=0, epoch=2, seed_stride=1000003)
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(1, 40, size=1000), rng.integers(1, 40, size=1000)
    grouped = epoch_batches(1000, 64, 1, 1, 100003, lengths=(src, tgt), chunk_batches=5)
    assert grouped == epoch_batches(1000, 64, 1, 1, 100003, lengths=(src, tgt), chunk_batches=5)
    assert grouped != epoch_batches(1000, 64, 1, 2, 100003, lengths=(src, tgt), chunk_batches=5)
    assert sorted(i for b in grouped for i in b) == list(range(1000))  # every example once, the last batch kept
    spread = np.mean([np.ptp(src[b]) for b in grouped])
    assert spread < np.mean([np.ptp(src[b]) for b in epoch_batches(1000, 64, 1, 1, 100003)])  # grouped by length


def test_rank_share_splits_a_batch_over_the_processes():
    items = list(range(10))
    shares = [rank_share(items, rank, 3) for rank in range(3)]
    assert shares == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]


def test_make_optimizer_builds_the_named_optimizer_and_names_a_wrong_one():
    parameters = [torch.nn.Parameter(torch.zeros(2))]
    assert isinstance(make_optimizer("sgd", parameters, 1.0), torch.optim.SGD)
    adam = make_optimizer("adam", parameters, 1e-3)
    assert isinstance(adam, torch.optim.Adam) and adam.param_groups[0]["lr"] == 1e-3
    with pytest.raises(ValueError, match="unknown optimizer 'adagrad'; choose sgd or adam"):
        make_optimizer("adagrad", parameters, 0.1)


def test_adam_runs_fused_with_the_single_tensor_update_and_resumes_from_its_state():
    """The factory's Adam is the fused kernel; over steps with varied gradients its weights follow the single-tensor
    path's to float rounding, and a state written by the single-tensor path (every checkpoint from before the fused
    kernel) continues on the fused kernel as it would have there. A state of another number of parameter groups is
    still refused."""
    generator = torch.Generator().manual_seed(0)
    start = [0.1 * torch.randn(300, 40, generator=generator), 0.1 * torch.randn(7, generator=generator)]  # |w| < 0.5
    gradients = [[torch.randn(w.shape, generator=generator) for w in start] for _ in range(6)]

    def train(optimizer_of, steps, state=None):
        weights = [torch.nn.Parameter(w.clone()) for w in start]
        optimizer = optimizer_of(weights)
        if state is not None:
            for w, s in zip(weights, state[0]):
                w.data.copy_(s)
            optimizer.load_state_dict(state[1])
        for grads in steps:
            for w, g in zip(weights, grads):
                w.grad = g.clone()
            optimizer.step()
        return [w.detach().clone() for w in weights], optimizer.state_dict()

    fused = make_optimizer("adam", [torch.nn.Parameter(torch.zeros(2))], 1e-3)
    assert fused.param_groups[0]["fused"] is True
    single = lambda weights: torch.optim.Adam(weights, lr=1e-3, foreach=False)  # noqa: E731
    ours = lambda weights: make_optimizer("adam", weights, 1e-3)  # noqa: E731
    reference, _ = train(single, gradients)
    for got, want in zip(train(ours, gradients)[0], reference):
        torch.testing.assert_close(got, want, rtol=0, atol=3e-8)  # measured 3.7e-9 (Xeon); 1 ulp at |w| < 0.5
    halfway = train(single, gradients[:3])
    assert halfway[1]["param_groups"][0]["fused"] is None
    resumed, state = train(ours, gradients[3:], state=halfway)
    assert state["param_groups"][0]["fused"] is True  # the single-tensor state did not switch the kernel back
    for got, want in zip(resumed, reference):
        torch.testing.assert_close(got, want, rtol=0, atol=3e-8)
    two_groups = {**halfway[1], "param_groups": [halfway[1]["param_groups"][0]] * 2}
    with pytest.raises(ValueError, match="different number of parameter groups"):
        make_optimizer("adam", [torch.nn.Parameter(w.clone()) for w in start], 1e-3).load_state_dict(two_groups)


def test_one_export_for_a_trained_biLM_model_and_an_mt_checkpoint_folder(tmp_path):
    """`export_encoder` takes a trained model (here a fresh biLM) with its tokenizer as well as an MT checkpoint
    folder: a frozen `AutoModel` checkpoint equal to the model's encoder, its card and the run's record; a model
    without its tokenizer is refused by name."""
    from transformers import AutoModel

    from modeling_cove.training.commands.train_bilm import BiLMSettings, build_model
    from modeling_cove.training.publishing.export import export_encoder

    init, _ = record.bilm_setup(tmp_path)
    torch.manual_seed(0)
    model, tokenizer = build_model(BiLMSettings(init_from=str(init), output_dir=str(tmp_path / "run"), hidden_size=8))
    out = export_encoder(model, tmp_path / "encoder", {"global_step": 3}, tokenizer=tokenizer)
    assert json.loads((out / "bilm_metrics.json").read_text()) == {"global_step": 3}
    assert (out / "README.md").read_text().startswith("---") and not (out / "mt_metrics.json").exists()
    encoder = AutoModel.from_pretrained(out)
    assert encoder.config.freeze_encoder and encoder.config.architectures == ["CoveModel"]
    for name, tensor in encoder.state_dict().items():
        assert torch.equal(tensor, model.cove.state_dict()[name]), name
    with pytest.raises(ValueError, match="needs its `tokenizer`"):
        export_encoder(model, tmp_path / "again")
    with pytest.raises(FileNotFoundError, match="is not a checkpoint folder"):
        export_encoder(tmp_path / "missing", tmp_path / "again")
    with pytest.raises(ValueError, match=r"encoder is not a translation checkpoint \(its architectures: "
                                         r"\['CoveModel'\]\)"):
        export_encoder(out, tmp_path / "again")  # the export itself: an encoder, not what cove-train-mt saves


def test_run_folder_refuses_what_would_not_continue_exactly(tmp_path):
    from accelerate import Accelerator

    from modeling_cove.training.loops.accelerate_loop import RUN_SETTINGS_FILE, check_run_folder, start_run_folder

    out, keys = tmp_path / "run", ("seed", "batch_size")
    with pytest.raises(ValueError, match="nothing to resume"):
        check_run_folder(out, {"seed": 1}, keys, resume=True, overwrite=False)
    check_run_folder(out, {"seed": 1}, keys, resume=False, overwrite=False)  # a new folder
    start_run_folder(Accelerator(cpu=True), out, {"seed": 1, "batch_size": 8, "max_steps": 5}, resume=False)
    assert json.loads((out / RUN_SETTINGS_FILE).read_text()) == {"seed": 1, "batch_size": 8, "max_steps": 5}
    check_run_folder(out, {"seed": 1, "batch_size": 8, "max_steps": 9}, keys, resume=True, overwrite=False)
    with pytest.raises(ValueError, match=r"different data/batching/model settings \{'batch_size': \(8, 16\)\}"):
        check_run_folder(out, {"seed": 1, "batch_size": 16}, keys, resume=True, overwrite=False)
    with pytest.raises(ValueError, match="exists and is not empty"):
        check_run_folder(out, {"seed": 1}, keys, resume=False, overwrite=False)
    (out / "stale.txt").write_text("x")
    check_run_folder(out, {"seed": 2}, keys, resume=False, overwrite=True)
    start_run_folder(Accelerator(cpu=True), out, {"seed": 2}, resume=False)
    assert sorted(p.name for p in out.iterdir()) == [RUN_SETTINGS_FILE]  # overwrite cleared the folder
