"""modeling_cove.training.commands.train_qa (and its CLI, scripts/train_qa.py): a smoke run on a slice of the real SQuAD data whose
saved model answers through the pipeline as the run predicted, its evaluation JSON, bad overrides refused before
any work, and 2 processes under `accelerate launch` training like one."""

import json
import os
import subprocess
import sys

import pytest
import torch

from conftest import exit_of, REPO, require_data
from modeling_cove import CoveConfig, CoveModel
from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize
from modeling_cove.training.publishing.cards import check_record_matches_checkpoint, load_eval_json
from modeling_cove.training.commands import train_qa as train_qa_command
from modeling_cove.training.commands.train_qa import QAConfigError, QAOptions, model_overrides, train_qa

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture
def tiny_squad(tmp_path):
    """A tiny fresh CoVe checkpoint over the words of the first 40 training and 16 held-out SQuAD questions."""
    from modeling_cove.data import load_squad

    data_dir = require_data()
    data = load_squad(str(data_dir))
    train, heldout = data["train"].select(range(40)), data["validation"].select(range(16))
    texts = [t for split in (train, heldout) for column in ("context", "question") for t in split[column]]
    tokenizer = build_cove_tokenizer(list(dict.fromkeys(w for text in texts for w in moses_tokenize(text))))
    torch.manual_seed(0)
    encoder = CoveModel(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=4))
    encoder.save_pretrained(tmp_path / "cove")
    tokenizer.save_pretrained(tmp_path / "cove")
    return data_dir, tmp_path / "cove", heldout


def tiny_options(data_dir, checkpoint, output_dir, **overrides) -> dict:
    options = dict(checkpoint=str(checkpoint), data_dir=str(data_dir), output_dir=str(output_dir), limit_train=40,
                   limit_eval=16, max_steps=2, batch_size=8, model_override=["dcn_hidden_size=8", "dcn_pool_size=2"])
    options.update(overrides)
    return options


def test_train_qa_smoke(tiny_squad, tmp_path):
    from transformers import pipeline

    data_dir, checkpoint, heldout = tiny_squad
    out = tmp_path / "run"
    metrics = train_qa(QAOptions(**tiny_options(data_dir, checkpoint, out), threads=1))
    assert metrics["steps"] == 2 and metrics["data"]["heldout_questions"] == 16
    assert metrics["stop_reason"].startswith("max steps 2 reached (epoch") and not metrics["stopped_by_time_budget"]
    assert metrics["preprocessing"]["train"]["examples_used"] == 40
    assert metrics["model"]["dcn_input"] == "vectors+cove" and metrics["model"]["dcn_hidden_size"] == 8
    assert 0.0 <= metrics["heldout"]["f1"] <= 100.0 and metrics["baseline_sliding_window"]["f1"] >= 0.0
    assert (out / "curves.png").stat().st_size > 1000
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["heldout"] == metrics["heldout"] and saved["machine"]["world_size"] == 1
    # the card's input: held-out EM/F1 of the saved model, the steps really run and why it stopped
    record = load_eval_json(out / "eval_results.json")
    check_record_matches_checkpoint(record, out / "model")
    assert record["metrics"][1] == {"type": "f1", "value": round(metrics["heldout"]["f1"], 2)}
    assert record["training"]["steps_run"] == 2 and record["training"]["stop_reason"] == metrics["stop_reason"]
    assert record["training"]["encoder"]["kind"] == "unknown" and record["task"]["type"] == "question-answering"
    predictions = json.loads((out / "predictions.json").read_text())
    assert set(predictions) == set(heldout["id"])
    # the held-out EM/F1 are those of the predictions written, over every held-out question (the metric module alone)
    scored = train_qa_command.squad_metric().compute(
        predictions=[{"id": row["id"], "prediction_text": predictions[row["id"]]} for row in heldout],
        references=[{"id": row["id"], "answers": row["answers"]} for row in heldout])
    assert scored["exact_match"] == pytest.approx(metrics["heldout"]["exact_match"], rel=0, abs=1e-9)
    assert scored["f1"] == pytest.approx(metrics["heldout"]["f1"], rel=0, abs=1e-9)
    # the saved checkpoint answers through the pipeline with the same text the run predicted, for every question
    qa = pipeline("cove-question-answering", model=str(out / "model"))
    answers = qa([{"question": row["question"], "context": row["context"]} for row in heldout])
    assert [answer["answer"] for answer in answers] == [predictions[row["id"]] for row in heldout]


def test_train_qa_rejects_unknown_model_override_before_any_work(tmp_path, capsys):
    """A typo in --model-override (dcn_hiden_size) is refused with the close match named; nothing is written."""
    out = tmp_path / "run"
    with pytest.raises(QAConfigError, match=r"'dcn_hiden_size' is not a CoveConfig field \(did you mean "
                                            r"'dcn_hidden_size'\?\)"):
        train_qa(QAOptions(checkpoint=str(tmp_path / "missing"), output_dir=str(out),
                           model_override=["dcn_hiden_size=20"]))
    assert not out.exists()
    overrides = model_overrides(QAOptions(checkpoint="x", output_dir="y",
                                          model_override=["dcn_hidden_size=20", "dcn_pool_size=2"]))
    assert overrides["dcn_hidden_size"] == 20 and overrides["dcn_pool_size"] == 2 and overrides["dcn_dropout"] == 0.2
    status, err = exit_of(train_qa_command.main, ["--checkpoint", "x", "--output-dir", str(out), "--model-override",
                                                  "dcn_hidden_size"], capsys)  # the command's main, in this process
    assert status == 2 and "error: --model-override expects KEY=VALUE" in err
    assert not out.exists()


@pytest.mark.slow
def test_two_processes_train_like_one(tiny_squad, tmp_path, alone_with_the_cores):
    """`accelerate launch` with 2 CPU processes (DDP over gloo), as a user runs it: the global batch is split
    (same steps as one process) and, dropout off, its losses equal one process's on the same global batches (the 40
    examples fit in one of transformers' length groups, 50 per-process batches, at either batch size); the main
    process alone writes the feature cache and the outputs, and the metrics JSON has the same keys as a
    one-process run's."""
    data_dir, checkpoint, _ = tiny_squad
    sizes = ["dcn_hidden_size=8", "dcn_pool_size=2", "dcn_dropout=0.0"]
    flags = ["--checkpoint", str(checkpoint), "--data-dir", str(data_dir), "--limit-train", "40", "--limit-eval",
             "16", "--epochs", "1", "--batch-size", "8", "--model-override", *sizes,
             "--cache-dir", str(tmp_path / "cache"), "--no-baseline"]
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(REPO / "configuration" / "accelerate" / "cpu_ddp.yaml"), "--num_processes", "2",
                "--main_process_port", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    two = subprocess.run([*launcher, str(REPO / "scripts" / "train_qa.py"), *flags, "--output-dir",
                          str(tmp_path / "two")], capture_output=True, text=True, timeout=600, env=env, cwd=REPO)
    assert two.returncode == 0, two.stderr[-3000:]
    one = train_qa(QAOptions(**tiny_options(data_dir, checkpoint, tmp_path / "one", max_steps=None, epochs=1,
                                            cache_dir=str(tmp_path / "cache"), no_baseline=True,
                                            model_override=sizes)))
    saved = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert saved["machine"]["world_size"] == 2 and saved["training"]["per_device_train_batch_size"] == 4
    assert set(saved) == set(one) and saved["steps"] == one["steps"] > 0
    assert saved["stop_reason"] == one["stop_reason"] == f"max epochs 1 reached ({one['steps']} steps)"
    assert two.stdout.count("training stopped: max epochs 1 reached") == 1  # logged once, by the main process
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == [
        "curves.png", "eval_results.json", "metrics.json", "model", "predictions.json"]
    check_record_matches_checkpoint(load_eval_json(tmp_path / "two" / "eval_results.json"), tmp_path / "two" / "model")
    assert [p.suffix for p in (tmp_path / "cache").iterdir()] == [".safetensors"]  # one entry, written once
    assert len(saved["history"]) == 1 and 0.0 <= saved["heldout"]["f1"] <= 100.0
    # the same global batches: the first step's loss and all-reduced gradient norm, and the held-out loss after the
    # epoch, equal one process's. Not the weights: a parameter whose gradient is zero in exact arithmetic (a bias that
    # shifts every position's score alike) gets rounding noise, which Adam's normalisation turns into steps of ~lr.
    first, last = saved["log_history"][0], saved["log_history"][1]
    assert (first["loss"], first["grad_norm"]) == pytest.approx((one["log_history"][0]["loss"],
                                                                  one["log_history"][0]["grad_norm"]), rel=1e-5)
    assert last["eval_loss"] == pytest.approx(one["log_history"][1]["eval_loss"], rel=1e-5)


def test_the_checkpoint_flag_takes_the_other_commands_name_too():
    """--encoder, as cove-train-classifier and cove-train-tagger name the encoder they build on, is --checkpoint."""
    from modeling_cove.training.common.cli import parse_options

    for flag in ("--checkpoint", "--encoder"):
        assert parse_options(QAOptions, [flag, "runs/cove", "--output-dir", "out"]).checkpoint == "runs/cove"
