"""modeling_cove.training.commands.train_classifier (and its CLI, scripts/train_classifier.py): Trainer set-up (gradient accumulation does not scale the loss), the CoVe feature cache
and collator (same logits as the live encoder), tokenisation of bad rows, task configs, model building per Table 2
column, and an end-to-end smoke run on a slice of the real TREC-6 data whose saved model works in a pipeline."""

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

import modeling_cove  # noqa: F401
from modeling_cove import CoveConfig, CoveForSequenceClassification, CoveModel
from modeling_cove.feature_cache import cached_features
from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize
from modeling_cove.training.commands import train_classifier as tc
from modeling_cove.training.publishing.cards import check_record_matches_checkpoint, load_eval_json
from modeling_cove.training.data.collators import BCNCollator
from modeling_cove.training.loops.trainer import TimeBudget, incomplete_checkpoints, last_checkpoint, stop_reason
from transformers import TrainerCallback
from modeling_cove.training.common.presets import PresetError

from conftest import exit_of, REPO, require_data

pytestmark = pytest.mark.usefixtures("single_thread")


TASKS = ("sst2", "sst5", "trec6", "trec50", "imdb", "snli")


def tiny_bcn(seed=0, model_class=CoveForSequenceClassification, **overrides):
    values = dict(vocab_size=40, word_vector_dim=6, hidden_size=6, bcn_feedforward_dim=5, bcn_hidden_size=4,
                  bcn_maxout_reductions=[2, 2], bcn_maxout_pool=2, bcn_dropout=0.0, bcn_batch_norm=False,
                  num_labels=3, id2label={0: "a", 1: "b", 2: "c"}, label2id={"a": 0, "b": 1, "c": 2})
    values.update(overrides)
    torch.manual_seed(seed)
    return model_class(CoveConfig(**values))


class TrapModel(CoveForSequenceClassification):
    """What docs/transformers_notes.md warns about: a model that accepts loss kwargs (so Trainer stops dividing by the
    accumulation steps) but ignores `num_items_in_batch`."""

    accepts_loss_kwargs = True

    def forward(self, num_items_in_batch=None, **kwargs):
        return super().forward(**kwargs)


def toy_dataset(n=32, seed=0, pairs=False):
    generator = torch.Generator().manual_seed(seed)
    rows = {"input_ids": [], "token_type_ids": [], "labels": [], "length": []}
    for _ in range(n):
        first = int(torch.randint(2, 8, (1,), generator=generator))
        second = int(torch.randint(1, 5, (1,), generator=generator)) if pairs else 0
        ids = torch.randint(4, 40, (first + second,), generator=generator).tolist()
        rows["input_ids"].append(ids)
        rows["token_type_ids"].append([0] * first + [1] * second)
        rows["labels"].append(int(torch.randint(0, 3, (1,), generator=generator)))
        rows["length"].append(first + second)
    rows["feature_store"] = [0] * n
    rows["feature_row"] = list(range(n))
    return Dataset.from_dict(rows)


def hyperparameters(**overrides):
    hp = dict(tc.HYPERPARAMETER_DEFAULTS)
    hp.update(overrides)
    return hp


def train_toy(tmp_path, gradient_accumulation_steps, batch_size, steps=3, model_class=CoveForSequenceClassification):
    model = tiny_bcn(model_class=model_class)
    ds = toy_dataset()
    store = cached_features(model, ds, batch_size=16)
    collator = BCNCollator(0, list(model.layer_indices), 3, 12, [store])
    args = tc.make_training_arguments(
        tmp_path / f"ga{gradient_accumulation_steps}", hyperparameters(), seed=0, max_steps=steps,
        gradient_accumulation_steps=gradient_accumulation_steps, batch_size=batch_size, sampling="random",
        evaluate_during_training=False, logging_steps=1)
    trainer = tc.build_trainer(model, args, ds, None, collator)
    trainer.train()
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h and "train_loss" not in h]
    return losses, {k: v.clone() for k, v in model.state_dict().items()}


def test_gradient_accumulation_does_not_scale_the_loss(tmp_path):
    """Accumulating 2 x 4 examples must equal one batch of 8 (the loss-kwargs trap of docs/transformers_notes.md):
    same logged losses, same weights after 3 optimizer steps (no batch norm / dropout, whose statistics depend on
    the batch)."""
    assert CoveForSequenceClassification.accepts_loss_kwargs is False
    losses_1, weights_1 = train_toy(tmp_path, gradient_accumulation_steps=1, batch_size=8)
    losses_2, weights_2 = train_toy(tmp_path, gradient_accumulation_steps=2, batch_size=4)
    assert len(losses_1) == len(losses_2) == 3
    assert losses_1 == pytest.approx(losses_2, rel=0, abs=1e-6)
    assert 0.5 < losses_1[0] < 2.0  # ~ln 3 at the start: a mean, not a sum or a doubled value
    for name, tensor in weights_1.items():
        assert torch.allclose(tensor, weights_2[name], atol=1e-5), name
    # negative control: the same harness catches a model that falls into the trap (loss kwargs accepted, ignored)
    trap_1, _ = train_toy(tmp_path / "trap", 1, 8, model_class=TrapModel)
    trap_2, _ = train_toy(tmp_path / "trap", 2, 4, model_class=TrapModel)
    assert trap_1 == pytest.approx(losses_1, abs=0, rel=0)
    # summed, not averaged: equal here, 2.4e-7 apart with MKL's AVX2 kernels (MKL_ENABLE_INSTRUCTIONS=AVX2)
    assert trap_2 == pytest.approx([2 * x for x in losses_1], abs=2e-6, rel=0)
    changed = [n for n in weights_1 if not n.startswith("cove.") and not torch.equal(weights_1[n], tiny_bcn().state_dict()[n])]
    assert changed  # training did update the BCN


@pytest.mark.parametrize("pairs", [False, True])
def test_cached_features_through_collator_equal_live_encoder(pairs):
    model = tiny_bcn(seed=1, bcn_dropout=0.0).eval()
    ds = toy_dataset(n=10, seed=1, pairs=pairs)
    store = cached_features(model, ds, batch_size=4)
    cached = BCNCollator(0, list(model.layer_indices), 3, 12, [store])
    live = BCNCollator(0)
    rows = [ds[i] for i in range(len(ds))]
    batch_cached, batch_live = cached(rows), live(rows)
    assert "cove_hidden_states" in batch_cached and "cove_hidden_states" not in batch_live
    with torch.no_grad():
        logits_cached = model(**batch_cached).logits
        logits_live = model(**batch_live).logits
    assert torch.equal(logits_cached, logits_live)
    # each stored row is the encoder run on that example alone
    for i in (0, 7):
        ids = torch.tensor([ds[i]["input_ids"]])
        types = torch.tensor([ds[i]["token_type_ids"]])
        alone = model.compute_cove_hidden_states(ids, torch.ones_like(ids), types)[2][0]
        assert torch.allclose(store[i], alone, rtol=0, atol=7e-8)


def test_feature_cache_hits_and_keys_on_encoder_weights(tmp_path):
    model = tiny_bcn(seed=2)
    ds = toy_dataset(n=12, seed=2)
    first = cached_features(model, ds, tmp_path, "toy-train", batch_size=5)
    second = cached_features(model, ds, tmp_path, "toy-train", batch_size=5)
    info1, info2 = first.info(), second.info()
    assert not info1["hit"] and info2["hit"] and info1["path"] == info2["path"]
    assert torch.equal(first.states, second.states) and torch.equal(first.offsets, second.offsets)
    with torch.no_grad():
        model.cove.encoder.rnn.weight_hh_l1.add_(0.01)  # another encoder -> another cache entry
    info3 = cached_features(model, ds, tmp_path, "toy-train", batch_size=5).info()
    assert not info3["hit"] and info3["path"] != info1["path"]
    info4 = cached_features(model, ds.select(range(11)), tmp_path, "toy-train", batch_size=5).info()
    assert info4["path"] not in (info1["path"], info3["path"])  # other tokens -> another entry


def test_tokenize_splits_drops_and_counts_empty_rows():
    tokenizer = build_cove_tokenizer(["a", "man", "plays", "."])
    features = Features({"text": Value("string"), "text_pair": Value("string"),
                         "label": ClassLabel(names=["x", "y"])})
    split = Dataset.from_dict({"text": ["a man plays .", "", "a man", "plays"],
                               "text_pair": ["a man", "a man", "", "plays ."], "label": [0, 1, 0, 1]},
                              features=features)
    out, dropped = tc.tokenize_splits(DatasetDict({"train": split}), tokenizer)
    assert dropped == {"train": 2}
    assert out["train"]["labels"][:] == [0, 1]
    assert out["train"]["token_type_ids"][0] == [0, 0, 0, 0, 1, 1]
    assert out["train"]["length"][:] == [6, 3]
    single = Dataset.from_dict({"text": ["a man", "", "plays ."], "label": [0, 1, 1]},
                               features=Features({"text": Value("string"), "label": ClassLabel(names=["x", "y"])}))
    out, dropped = tc.tokenize_splits(DatasetDict({"train": single}), tokenizer, max_length=1)
    assert dropped == {"train": 1} and out["train"]["input_ids"][:] == [[4], [6]]


def test_subsample_splits_draws_the_same_random_subsets_every_time(capsys):
    features = Features({"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])})
    sorted_by_label = Dataset.from_dict({"text": [f"t{i}" for i in range(40)], "label": [0] * 20 + [1] * 20},
                                        features=features)  # like IMDb's test file: all negatives first
    raw = lambda: DatasetDict({s: sorted_by_label for s in ("train", "validation", "test")})  # noqa: E731
    out, cut = tc.subsample_splits(raw(), max_train=10, max_eval=8)
    assert cut == {"train": "10 of 40", "validation": "8 of 40", "test": "8 of 40"}
    assert [len(out[s]) for s in ("train", "validation", "test")] == [10, 8, 8]
    assert set(out["train"]["text"]) <= set(sorted_by_label["text"]) and len(set(out["train"]["text"])) == 10
    assert 0 < sum(out["train"]["label"]) < 10  # random, not the first 10 (all negative)
    again, _ = tc.subsample_splits(raw(), max_train=10, max_eval=8)
    assert again["train"]["text"] == out["train"]["text"] and again["test"]["text"] == out["test"]["text"]
    whole, cut = tc.subsample_splits(raw(), max_train=100)  # a cap above the size keeps the split as it is
    assert cut == {} and whole["train"]["text"] == sorted_by_label["text"] and len(whole["test"]) == 40
    with pytest.raises(ValueError, match="--max-eval-examples must be >= 1"):
        tc.subsample_splits(raw(), max_eval=0)
    # on the command line: a usage error before any work
    status, err = exit_of(tc.main, ["--task", "imdb", "--encoder", "enc", "--max-train-examples", "0"], capsys)
    assert status == 2 and "--max-train-examples must be an integer >= 1, got 0" in err


def test_train_fraction_takes_nested_subsets_of_the_training_split(capsys):
    """--train-fraction (the sample-efficiency curve): that share of the training split, rounded, from the same fixed
    permutation as --max-train-examples, so 10% lies inside 25%; validation and test stay whole."""
    features = Features({"text": Value("string"), "label": ClassLabel(names=["neg", "pos"])})
    data = Dataset.from_dict({"text": [f"t{i}" for i in range(40)], "label": [0, 1] * 20}, features=features)
    raw = lambda: DatasetDict({s: data for s in ("train", "validation", "test")})  # noqa: E731
    tenth, cut = tc.subsample_splits(raw(), train_fraction=0.1)
    quarter, _ = tc.subsample_splits(raw(), train_fraction=0.25)
    assert cut == {"train": "4 of 40"} and len(quarter["train"]) == 10 and len(tenth["test"]) == 40
    assert quarter["train"]["text"][:4] == tenth["train"]["text"]
    assert tc.subsample_splits(raw(), max_train=4)[0]["train"]["text"] == tenth["train"]["text"]
    assert tc.subsample_splits(raw(), train_fraction=0.001)[1] == {"train": "1 of 40"}  # never empty
    with pytest.raises(ValueError, match=r"train_fraction must be in \(0, 1\], got 1.5"):
        tc.ClassifierOptions(task="trec6", encoder="enc", train_fraction=1.5)
    with pytest.raises(ValueError, match="not both"):
        tc.ClassifierOptions(task="trec6", encoder="enc", train_fraction=0.5, max_train_examples=3)
    status, err = exit_of(tc.main, ["--task", "trec6", "--encoder", "enc", "--train-fraction", "0"], capsys)
    assert status == 2 and "must be in (0, 1], got 0.0" in err
    status, err = exit_of(tc.main, ["--task", "trec6", "--encoder", "enc", "--train-fraction", "0.5",
                                    "--max-train-examples", "3"], capsys)
    assert status == 2 and "give train_fraction or max_train_examples, not both" in err


def test_task_configs_load_and_are_checked(tmp_path):
    for task in TASKS:
        hp = tc.load_hyperparameters(task)
        assert hp["learning_rate"] == 1e-3 and hp["batch_size"] >= 16 and hp["epochs"] > 0
        assert set(hp["paper_table2"]) == {"random", "vectors", "vectors+cove"}
    assert tc.load_hyperparameters("trec6", overrides={"epochs": 2, "dropout": None})["epochs"] == 2
    bad = tmp_path / "bad.yaml"
    bad.write_text("task: trec6\nepocs: 3\n")
    with pytest.raises(PresetError, match="unknown preset keys \\['epocs'\\]"):
        tc.load_hyperparameters("trec6", bad)
    with pytest.raises(PresetError, match="not 'sst2'"):
        tc.load_hyperparameters("sst2", tc.TASK_CONFIG_DIR / "trec6.yaml")


@pytest.fixture
def tiny_encoder_dir(tmp_path):
    words = ["what", "is", "the", "name", "of", "?", "who", "how", "many", "city", "a", "in", "did", "when", "where"]
    tokenizer = build_cove_tokenizer(words)
    torch.manual_seed(0)
    encoder = CoveModel(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=8))
    path = tmp_path / "encoder"
    encoder.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path, encoder


def test_build_model_columns(tiny_encoder_dir):
    path, encoder = tiny_encoder_dir
    hp = hyperparameters(bcn_hidden_size=4, feedforward_dim=5, maxout_reductions=[2, 2])
    vectors = tc.build_model(path, "vectors", ["p", "q"], hp, seed=3)
    assert torch.equal(vectors.cove.embeddings.weight, encoder.embeddings.weight)
    assert not vectors.cove.embeddings.weight.requires_grad and vectors.layer_indices == []
    cove = tc.build_model(path, "vectors+cove", ["p", "q"], hp, seed=3)
    assert cove.layer_indices == [2] and cove.config.id2label == {0: "p", 1: "q"}
    assert all(not p.requires_grad for p in cove.cove.parameters())
    random = tc.build_model(path, "random", ["p", "q"], hp, seed=3)
    weight = random.cove.embeddings.weight
    assert weight.requires_grad and random.config.bcn_input == "vectors"
    assert not torch.equal(weight, encoder.embeddings.weight)
    assert torch.equal(weight[:2], torch.zeros_like(weight[:2]))  # PAD and UNK stay zero
    real = encoder.embeddings.weight[2:]
    assert abs(float(weight[2:].detach().std()) / float(real[real.abs().sum(1) > 0].std()) - 1) < 0.35
    assert all(not p.requires_grad for p in random.cove.encoder.parameters())
    frozen = tc.build_model(path, "random", ["p", "q"], hp, seed=3, freeze_random=True)
    assert not frozen.cove.embeddings.weight.requires_grad
    assert torch.equal(frozen.cove.embeddings.weight, weight)  # same seed, same random vectors
    assert not cove.config.bcn_pair_input  # a single-text task
    pair = tc.build_model(path, "vectors+cove", ["p", "q"], hp, seed=3, pair_input=True)
    assert pair.config.bcn_pair_input  # a pair task (SNLI): the checkpoint refuses inputs without a second text
    with pytest.raises(ValueError, match="second text"):
        pair(**build_cove_tokenizer(["what", "is"])(["what is"], return_tensors="pt"))


def train(**options) -> dict:
    return tc.train_classifier(tc.ClassifierOptions(**options))


def run_cli(argv, launcher=(sys.executable,), timeout=300):
    """scripts/train_classifier.py as a user runs it (a fresh interpreter with the installed package)."""
    script = REPO / "scripts" / "train_classifier.py"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run([*launcher, str(script), *argv], capture_output=True, text=True, timeout=timeout, env=env,
                          cwd=REPO)


def tiny_trec6_setup(tmp_path):
    """Real TREC-6, a tiny fresh encoder over its first 300 training questions' words, and a tiny task yaml."""
    data_dir = require_data("trec")
    data_dir = data_dir.parent
    from modeling_cove.data import load_classification

    raw = load_classification("trec6", str(data_dir))
    words = sorted({t for text in raw["train"]["text"][:300] for t in moses_tokenize(text)})
    tokenizer = build_cove_tokenizer(words)
    torch.manual_seed(0)
    encoder = CoveModel(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=8))
    encoder_dir = tmp_path / "encoder"
    encoder.save_pretrained(encoder_dir)
    tokenizer.save_pretrained(encoder_dir)
    config = tmp_path / "tiny.yaml"
    config.write_text("task: trec6\nepochs: 1\nbatch_size: 8\neval_batch_size: 16\nbcn_hidden_size: 4\n"
                      "feedforward_dim: 6\nmaxout_reductions: [2, 2]\nlogging_steps: 1\nfeature_batch_size: 16\n"
                      "paper_table2: {vectors+cove: 94.7}\n")
    return data_dir, raw, encoder_dir, config


def test_end_to_end_smoke_run_on_trec6(tmp_path):
    """A few optimizer steps on a slice of real TREC-6 with a tiny fresh encoder: metrics JSON, curve PNG, and a
    best/ folder that works in pipeline("text-classification") with the reported test accuracy."""
    data_dir, raw, encoder_dir, config = tiny_trec6_setup(tmp_path)
    out = tmp_path / "run"
    common = dict(task="trec6", encoder=str(encoder_dir), bcn_input="vectors+cove", data_dir=str(data_dir),
                  config=str(config))
    results = train(**common, limit=40, max_steps=3, output_dir=str(out), cache_dir=str(tmp_path / "cache"), seed=2)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["test"] == results["test"] and saved["global_steps"] == 3
    assert saved["stop_reason"].startswith("max steps 3 reached (epoch") and saved["world_size"] == 1
    assert saved["splits"] == {"train": 40, "validation": 40, "test": 40}
    assert saved["feature_cache"]["train"]["hit"] is False
    assert saved["paper_table2_validation_accuracy"] == 94.7
    assert saved["scalar_mix"] is None and saved["git"]["commit"]  # read when the run started
    assert saved["epochs"] and saved["epochs"][0]["train_seconds"] > 0
    assert saved["machine"]["device"] == "cpu" and saved["machine"]["cuda"] is None  # the device trained on
    assert 0.0 <= saved["test"]["accuracy"] <= 1.0 and 0.0 <= saved["test"]["macro_f1"] <= 1.0
    assert (out / "curve.png").stat().st_size > 1000
    assert not (out / "checkpoints").exists()
    # the evaluation JSON for push_to_hub.py: the test figures, fingerprinting the saved best checkpoint
    record = load_eval_json(out / "eval_results.json")
    check_record_matches_checkpoint(record, out / "best")
    assert record["metrics"][0] == {"type": "accuracy", "value": round(100 * saved["test"]["accuracy"], 2)}
    assert record["dataset"]["key"] == "trec6" and record["dataset"]["num_examples"] == 40
    assert record["paper_column"] == "+CoVe-S" and record["training"]["seed"] == 2
    # what really ran (not the yaml's epochs) and what the encoder is: a fresh folder without build/MT records
    assert record["training"]["steps_run"] == 3 and record["training"]["epochs_run"] == saved["epochs_run"]
    assert record["training"]["stop_reason"] == saved["stop_reason"] and "epochs" not in record["training"][
        "hyperparameters"]
    assert record["training"]["encoder"] == {"kind": "unknown", "path": str(encoder_dir)}

    from transformers import pipeline

    pipe = pipeline("text-classification", model=str(out / "best"))
    test = raw["test"].select(range(40))
    names = test.features["label"].names
    predictions = [names.index(p["label"]) for p in pipe(list(test["text"]))]
    accuracy = sum(int(p == g) for p, g in zip(predictions, test["label"])) / 40
    assert accuracy == pytest.approx(saved["test"]["accuracy"], abs=0, rel=0)

    # a second run reuses the cached features; --overwrite --no-save-model removes the first run's best/ and
    # eval_results.json (push_to_hub.py would publish them beside the new metrics) and keeps files of others
    (out / "notes.txt").write_text("not written by train_classifier.py\n")
    again = train(**common, limit=40, max_steps=1, output_dir=str(out), cache_dir=str(tmp_path / "cache"),
                  no_save_model=True, overwrite=True)
    assert all(info["hit"] for info in again["feature_cache"].values())
    assert sorted(p.name for p in out.iterdir()) == ["curve.png", "metrics.json", "notes.txt", "run_settings.json"]
    assert json.loads((out / "metrics.json").read_text())["global_steps"] == 1
    # too big for the cache limit: the MT-LSTM runs inside every step instead, same script otherwise
    live = train(**common, limit=16, max_steps=1, output_dir=str(tmp_path / "run3"),
                 cache_dir=str(tmp_path / "cache3"), no_save_model=True, max_cache_gb=0)
    assert live["feature_cache"] == {} and not (tmp_path / "cache3").exists()
    assert 0.0 <= live["test"]["accuracy"] <= 1.0


class Killed(Exception):
    """Stands for a kill of the process right after a checkpoint was written."""


class KillAfterSave(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Killed


def resume_setup(tmp_path, yaml: str) -> dict:
    """The options of a tiny TREC-6 run of 5-step epochs under the task yaml lines `yaml`."""
    data_dir, _, encoder_dir, _ = tiny_trec6_setup(tmp_path)
    config = tmp_path / "resume.yaml"
    config.write_text("task: trec6\nepochs: 3\nbatch_size: 8\neval_batch_size: 16\nbcn_hidden_size: 4\n"
                      "feedforward_dim: 6\nmaxout_reductions: [2, 2]\nlogging_steps: 1\nfeature_batch_size: 16\n"
                      "dropout: 0.3\n" + yaml)
    return dict(task="trec6", encoder=str(encoder_dir), bcn_input="vectors+cove", data_dir=str(data_dir),
                config=str(config), limit=40, learning_rate=0.01, cache_dir=str(tmp_path / "cache"), seed=3)


def killed_after_save(monkeypatch, step: int, **options):
    """A run killed right after its checkpoint of `step` was written."""
    build_trainer = tc.build_trainer
    monkeypatch.setattr(tc, "build_trainer", lambda model, args, train, evaluation, collator, callbacks=():
                        build_trainer(model, args, train, evaluation, collator, (*callbacks, KillAfterSave(step))))
    with pytest.raises(Killed):
        train(**options)
    monkeypatch.undo()


def curve(run: dict) -> list:
    return [(h["step"], h["eval_loss"]) for h in run["log_history"] if "eval_loss" in h]


def test_a_run_stopped_inside_an_epoch_resumes_to_the_uninterrupted_result(tmp_path, monkeypatch, capsys):
    """--resume from the last checkpoint (step 6 of 5-step epochs: inside the second) ends as the run without the
    stop: the same validation curve, test figures and best weights, bit for bit (batch order, dropout and optimizer
    state restored), with the epoch times of before the stop kept; other settings, a run never started and a new run
    over an unfinished one are refused by name."""
    common = resume_setup(tmp_path, "eval_steps: 3\nearly_stopping_patience: 4\n")
    whole = train(**common, output_dir=str(tmp_path / "whole"))
    out = tmp_path / "stopped"
    killed_after_save(monkeypatch, 6, **common, output_dir=str(out))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["checkpoint-3", "checkpoint-6"]
    with pytest.raises(FileExistsError, match="holds an unfinished run .*--resume continues it"):
        train(**common, output_dir=str(out))
    with pytest.raises(tc.ResumeError, match=r"different .*'seed': \(3, 4\).*or --overwrite to start afresh"):
        train(**{**common, "seed": 4}, output_dir=str(out), resume=True)
    with pytest.raises(tc.ResumeError, match="no run started there: nothing to resume"):
        train(**common, output_dir=str(tmp_path / "never"), resume=True)
    with pytest.raises(tc.ResumeError, match=r"'hyperparameters': {'sampling': \('random', 'group_by_length'\)}"):
        train(**common, output_dir=str(out), resume=True, sampling="group_by_length")  # the yaml's value overridden
    killed_after_save(monkeypatch, 6, **common, sampling="group_by_length", output_dir=str(tmp_path / "grouped"))
    with pytest.raises(tc.ResumeError, match="checkpoint-6 lies inside an epoch, and group_by_length sampling"):
        train(**common, sampling="group_by_length", output_dir=str(tmp_path / "grouped"), resume=True)

    cut = tmp_path / "cut"  # a machine lost while its last checkpoint's files were not yet written out
    shutil.copytree(out, cut)
    optimizer = cut / "checkpoints" / "checkpoint-6" / "optimizer.pt"
    optimizer.write_bytes(bytes(optimizer.stat().st_size))
    capsys.readouterr()
    from_three = train(**common, output_dir=str(cut), resume=True, threads=1)
    assert f"resume: passed over {optimizer.parent}: optimizer.pt: not a whole torch.save" in capsys.readouterr().out
    assert from_three["resumed_from_step"] == 3 and from_three["test"] == whole["test"]

    resumed = train(**common, output_dir=str(out), resume=True, threads=1)
    assert resumed["resumed_from_step"] == 6 and whole["resumed_from_step"] is None
    assert resumed["global_steps"] == whole["global_steps"] == 15
    assert resumed["test"] == whole["test"] and resumed["best"] == whole["best"] and curve(resumed) == curve(whole)
    assert (out / "best" / "model.safetensors").read_bytes() == (
        tmp_path / "whole" / "best" / "model.safetensors").read_bytes()
    # the Trainer's loss and seconds cover the steps since the resume: kept apart, the whole run's left unknown
    assert resumed["train_loss"] is None and resumed["since_resume"]["train_loss"] > 0 and whole["train_loss"] > 0
    assert resumed["started_at_commit"] == json.loads((out / "run_settings.json").read_text())["commit"]
    # the first epoch was timed before the stop; the second, resumed at its step 6, is marked and left out of the means
    assert [(e["step"], e.get("resumed", False)) for e in resumed["epochs"]] == [(5, False), (10, True), (15, False)]
    assert resumed["seconds_per_epoch_mean"] == round((resumed["epochs"][0]["train_seconds"]
                                                       + resumed["epochs"][2]["train_seconds"]) / 2, 2)
    with pytest.raises(FileExistsError, match="finished run .*nothing to resume"):
        train(**common, output_dir=str(out), resume=True)


def test_a_run_stopped_at_the_end_of_its_training_resumes_to_the_same_end(tmp_path, monkeypatch):
    """A kill after the checkpoint where early stopping fired, or after the last step of a run whose last epoch is a
    fraction, resumes to the same end (replayed from the best checkpoint; the Trainer, resumed at that end, would
    take more steps); an evaluation at an epoch's last step keeps that epoch's time in its checkpoint; a run folder
    given relative to another working folder resumes. An ended run whose best checkpoint is its last inside an
    epoch cannot replay, and says so."""
    common = resume_setup(tmp_path, "eval_steps: 1\nearly_stopping_patience: 1\n")
    whole = train(**common, output_dir=str(tmp_path / "whole"), epochs=6)
    assert whole["stop_reason"].startswith("early stopping") and whole["global_steps"] < 30
    killed_after_save(monkeypatch, whole["global_steps"], **common, epochs=6, output_dir=str(tmp_path / "early"))
    resumed = train(**common, epochs=6, output_dir=str(tmp_path / "early"), resume=True)
    assert resumed["resumed_from_step"] == whole["best"]["step"] < whole["global_steps"] == resumed["global_steps"]
    assert (resumed["test"], resumed["stop_reason"]) == (whole["test"], whole["stop_reason"])

    common = resume_setup(tmp_path, "eval_steps: 5\n")  # 2.6 epochs: 13 steps, the best before the last
    whole = train(**common, output_dir=str(tmp_path / "whole-f"), epochs=2.6)
    assert whole["global_steps"] == 13 and whole["best"]["step"] < 13
    assert [(e["step"], e.get("partial", False)) for e in whole["epochs"]] == [(5, False), (10, False), (13, True)]
    killed_after_save(monkeypatch, 13, **common, epochs=2.6, output_dir=str(tmp_path / "end"))
    resumed = train(**common, epochs=2.6, output_dir=str(tmp_path / "end"), resume=True)
    assert (resumed["global_steps"], resumed["test"], resumed["best"]) == (13, whole["test"], whole["best"])

    only_at_the_end = {**common, "config": str(tmp_path / "end.yaml"), "epochs": 2.6}  # its one evaluation, the best
    yaml = Path(common["config"]).read_text()
    Path(only_at_the_end["config"]).write_text(yaml.replace("eval_steps: 5", "eval_steps: 13"))
    killed_after_save(monkeypatch, 13, **only_at_the_end, output_dir=str(tmp_path / "best-last"))
    with pytest.raises(tc.ResumeError, match="ended at step 13, without an earlier whole best checkpoint .*overwrite"):
        train(**only_at_the_end, output_dir=str(tmp_path / "best-last"), resume=True)

    killed_after_save(monkeypatch, 10, **common, epochs=2.6, output_dir=str(tmp_path / "epochs"))
    saved = json.loads((tmp_path / "epochs" / "checkpoints" / "checkpoint-10" / "trainer_state.json").read_text())
    assert [e["step"] for e in saved["stateful_callbacks"]["EpochTimer"]["attributes"]["epochs"]] == [5, 10]
    monkeypatch.chdir(tmp_path / "epochs")  # the folder given relative to it now, absolute at the start
    resumed = train(**{**common, "epochs": 2.6}, output_dir=".", resume=True)
    assert (resumed["test"], resumed["best"]) == (whole["test"], whole["best"])
    assert [e["step"] for e in resumed["epochs"]] == [5, 10, 13]


def test_a_moved_run_resumed_at_its_end_tests_its_best_checkpoint(tmp_path, monkeypatch):
    """A run killed after the checkpoint of its last whole epoch, its folder then moved: the Trainer drops the best
    checkpoint recorded at the old place and trains no more (no save re-derives it), so without `FindBestCheckpoint`
    the resume would test the last weights instead of the best's. A best checkpoint lost or cut short is refused by
    name, not tested in its place."""
    common = resume_setup(tmp_path, "eval_steps: 5\n")
    whole = train(**common, output_dir=str(tmp_path / "whole"), epochs=2)
    assert whole["global_steps"] == 10 and whole["best"]["step"] == 5  # the best is not the last
    killed_after_save(monkeypatch, 10, **common, epochs=2, output_dir=str(tmp_path / "before"))
    shutil.move(tmp_path / "before", tmp_path / "after")
    shutil.copytree(tmp_path / "after", tmp_path / "best-lost")
    resumed = train(**common, epochs=2, output_dir=str(tmp_path / "after"), resume=True)
    assert resumed["resumed_from_step"] == 10 and resumed["global_steps"] == 10
    assert (resumed["test"], resumed["best"]) == (whole["test"], whole["best"])
    best = tmp_path / "best-lost" / "checkpoints" / "checkpoint-5"
    (best / "config.json").write_bytes(bytes((best / "config.json").stat().st_size))  # read by the Trainer too
    with pytest.raises(tc.ResumeError, match=r"checkpoint-10 records its best checkpoint .*checkpoint-5, not whole "
                                             r"\(config.json: not valid JSON.*--overwrite runs it again"):
        train(**common, epochs=2, output_dir=str(tmp_path / "best-lost"), resume=True)
    shutil.rmtree(best)
    with pytest.raises(tc.ResumeError, match=r"checkpoint-5, not whole \(folder missing\)"):
        train(**common, epochs=2, output_dir=str(tmp_path / "best-lost"), resume=True)


def test_the_last_checkpoint_is_the_newest_whole_one(tmp_path):
    """A checkpoint a kill cut short (no optimizer, no weights, or a process's random state missing: the processes
    write theirs without waiting for each other; or a file the Trainer was writing in place cut short) is passed
    over."""
    from safetensors.torch import save_file

    def checkpoint(step, *names):
        folder = tmp_path / f"checkpoint-{step}"
        folder.mkdir()
        for name in names:
            if name.endswith(".json"):
                (folder / name).write_text(json.dumps({"global_step": step}))
            elif name.endswith(".safetensors"):
                save_file({"w": torch.ones(3)}, str(folder / name))
            else:
                torch.save({"step": step}, folder / name)
        return folder

    whole = ("trainer_state.json", "optimizer.pt", "scheduler.pt", "model.safetensors")
    assert last_checkpoint(tmp_path / "none") is None and last_checkpoint(tmp_path) is None
    checkpoint(3, *whole, "rng_state.pth", "rng_state_0.pth", "rng_state_1.pth")
    checkpoint(12, *whole[1:], "rng_state.pth")  # its state not written yet
    checkpoint(9, *whole[:3], "rng_state.pth")  # no weights: deleted under way
    checkpoint(6, *whole, "rng_state.pth", "rng_state_0.pth")
    cut = checkpoint(15, *whole, "rng_state.pth")
    (cut / "optimizer.pt").write_bytes((cut / "optimizer.pt").read_bytes()[:100])
    (tmp_path / "checkpoint-x").mkdir()
    assert last_checkpoint(tmp_path) == str(tmp_path / "checkpoint-6")
    assert last_checkpoint(tmp_path, world_size=2) == str(tmp_path / "checkpoint-3")
    assert {path.name: problem for path, problem in incomplete_checkpoints(tmp_path).items()} == {
        "checkpoint-9": "no weights (*.safetensors)", "checkpoint-12": "trainer_state.json: missing",
        "checkpoint-15": "optimizer.pt: not a whole torch.save archive (no zip directory at its end)"}
    assert [path.name for path in incomplete_checkpoints(tmp_path, world_size=2)] == [
        "checkpoint-6", "checkpoint-9", "checkpoint-12", "checkpoint-15"]


def test_scalar_mix_run_records_the_learned_layer_weights(tmp_path):
    """--bcn-input scalar_mix: metrics.json holds softmax(w) and gamma of the kept (best) checkpoint, in layer order."""
    data_dir, _, encoder_dir, config = tiny_trec6_setup(tmp_path)
    out = tmp_path / "run"
    train(task="trec6", encoder=str(encoder_dir), bcn_input="scalar_mix", data_dir=str(data_dir), config=str(config),
          limit=24, max_steps=3, learning_rate=0.05, output_dir=str(out), cache_dir=str(tmp_path / "cache"),
          max_train_examples=30)
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["subsample"] == {"train": "30 of 4906"}  # recorded (TREC-6 train; cut before --limit)
    # the encoder's identity, for the table's one-encoder-per-cell check
    assert saved["encoder_type"] == "mt_lstm" and saved["train_fraction"] is None
    assert saved["encoder_weights"] == hashlib.sha256((encoder_dir / "model.safetensors").read_bytes()).hexdigest()
    notes = json.loads((out / "eval_results.json").read_text())["training"]["notes"]
    assert notes == ["random subsets (seed 13), not the full splits: train 30 of 4906"]  # and in the model card
    mix = saved["scalar_mix"]
    assert mix["layers"] == ["[vectors; vectors]", "layer 1", "layer 2"]
    best = CoveForSequenceClassification.from_pretrained(out / "best").scalar_mix
    expected = torch.softmax(best.scalar_weights.detach(), 0)
    assert not torch.allclose(expected, torch.full((3,), 1 / 3))  # trained away from the uniform start
    assert mix["weights"] == pytest.approx(expected.tolist(), abs=1e-4)
    assert mix["gamma"] == pytest.approx(float(best.gamma.detach()), abs=1e-4)


@pytest.mark.slow
def test_two_processes_train_like_one(tmp_path, alone_with_the_cores):
    """`accelerate launch` with 2 CPU processes (DDP over gloo), as a user runs it: rank 1 no longer crashes on the
    best checkpoint; the main process alone writes the feature cache, best/, the eval JSON, metrics and curves; the
    global batch is split (same optimizer steps and, without batch norm and dropout, the same losses as one process)
    and the metrics JSON has the same keys."""
    data_dir, _, encoder_dir, config = tiny_trec6_setup(tmp_path)
    config.write_text(config.read_text().replace("epochs: 1", "epochs: 2") + "batch_norm: false\ndropout: 0.0\n")
    flags = ["--task", "trec6", "--encoder", str(encoder_dir), "--data-dir", str(data_dir), "--config", str(config),
             "--limit", "40", "--cache-dir", str(tmp_path / "cache")]
    launcher = (sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(REPO / "configuration" / "accelerate" / "cpu_ddp.yaml"), "--num_processes", "2",
                "--main_process_port", "0")
    two = run_cli(flags + ["--output-dir", str(tmp_path / "two")], launcher=launcher)
    assert two.returncode == 0, two.stderr[-3000:]
    one = train(task="trec6", encoder=str(encoder_dir), data_dir=str(data_dir), config=str(config), limit=40,
                cache_dir=str(tmp_path / "cache"), output_dir=str(tmp_path / "one"))
    saved = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert saved["world_size"] == 2 and saved["per_device_train_batch_size"] == 4 and one["world_size"] == 1
    assert set(saved) == set(json.loads(json.dumps(one, default=str)))
    assert saved["global_steps"] == one["global_steps"] == 10  # 2 epochs of 40 examples in global batches of 8
    # batch norm and dropout off, the same global batches train alike: every step's loss and all-reduced gradient
    # norm equal one process's (not the evaluation loss: DDP evens out the last evaluation batches with repeated
    # examples, which enter those batches' mean losses)
    steps = [log[key] for log in saved["log_history"] if "loss" in log for key in ("loss", "grad_norm")]
    assert len(steps) == 20 and steps == pytest.approx(
        [log[key] for log in one["log_history"] if "loss" in log for key in ("loss", "grad_norm")], rel=1e-5)
    assert [log["eval_accuracy"] for log in saved["log_history"] if "eval_accuracy" in log] == [
        log["eval_accuracy"] for log in one["log_history"] if "eval_accuracy" in log]
    assert saved["stop_reason"] == one["stop_reason"] == "max epochs 2 reached (10 steps)"
    assert two.stdout.count("training stopped: max epochs 2 reached") == 1  # logged once, by the main process
    assert sorted(p.name for p in (tmp_path / "two").iterdir()) == ["best", "curve.png", "eval_results.json",
                                                                    "metrics.json", "run_settings.json"]
    assert json.loads((tmp_path / "two" / "run_settings.json").read_text())["world_size"] == 2  # a resume key
    check_record_matches_checkpoint(load_eval_json(tmp_path / "two" / "eval_results.json"), tmp_path / "two" / "best")
    assert saved["feature_cache"]["train"]["hit"] is False and one["feature_cache"]["train"]["hit"] is True
    assert sorted(p.suffix for p in (tmp_path / "cache").iterdir()) == [".safetensors"] * 3  # no leftover tmp files
    assert 0.0 <= saved["test"]["accuracy"] <= 1.0


KILLING_LAUNCH = """import sys
from transformers import TrainerCallback
from modeling_cove.training.commands import train_classifier as tc


class Kill(TrainerCallback):
    def on_save(self, args, state, control, **kwargs):
        if state.global_step == {step}:
            raise SystemExit(3)


build_trainer = tc.build_trainer
tc.build_trainer = lambda model, args, train, evaluation, collator, callbacks=(): build_trainer(
    model, args, train, evaluation, collator, (*callbacks, Kill()))
tc.main(sys.argv[1:])
"""


@pytest.mark.slow
def test_two_processes_resume_as_they_would_have_run_on(tmp_path, alone_with_the_cores):
    """Two processes killed after the checkpoint of step 6 (inside the second epoch) and launched again with
    --resume end as the two processes that ran on: the same evaluations, steps and test figures."""
    data_dir, _, encoder_dir, config = tiny_trec6_setup(tmp_path)
    config.write_text(config.read_text().replace("epochs: 1", "epochs: 2") + "eval_steps: 3\n")
    flags = ["--task", "trec6", "--encoder", str(encoder_dir), "--data-dir", str(data_dir), "--config", str(config),
             "--limit", "40", "--cache-dir", str(tmp_path / "cache"), "--seed", "5"]
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(REPO / "configuration" / "accelerate" / "cpu_ddp.yaml"), "--num_processes", "2",
                "--main_process_port", "0"]
    killing = tmp_path / "killing_launch.py"
    killing.write_text(KILLING_LAUNCH.format(step=6))
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}

    def launch(script, *extra):
        return subprocess.run([*launcher, str(script), *flags, *extra], capture_output=True, text=True, timeout=300,
                              env=env, cwd=REPO)

    ran_on = launch(REPO / "scripts" / "train_classifier.py", "--output-dir", str(tmp_path / "on"))
    assert ran_on.returncode == 0, ran_on.stderr[-3000:]
    assert launch(killing, "--output-dir", str(tmp_path / "killed")).returncode != 0
    assert sorted(p.name for p in (tmp_path / "killed" / "checkpoints" / "checkpoint-6").glob("rng_state*")) == [
        "rng_state_0.pth", "rng_state_1.pth"]
    resumed = launch(REPO / "scripts" / "train_classifier.py", "--output-dir", str(tmp_path / "killed"), "--resume")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    on, again = (json.loads((tmp_path / name / "metrics.json").read_text()) for name in ("on", "killed"))
    assert again["resumed_from_step"] == 6 and again["global_steps"] == on["global_steps"] == 10
    assert [(h["step"], h["eval_loss"]) for h in again["log_history"] if "eval_loss" in h] == [
        (h["step"], h["eval_loss"]) for h in on["log_history"] if "eval_loss" in h]
    assert (again["test"], again["best"]) == (on["test"], on["best"])


def test_stop_reason_names_each_way_a_run_ends():
    """Every run logs and records why it stopped: its planned end (epochs or max steps), the time budget, early
    stopping; TimeBudget stops the Trainer once its minutes have passed."""
    from types import SimpleNamespace

    from transformers import EarlyStoppingCallback, TrainerControl

    def trainer(global_step, max_steps=-1, planned=10, epoch=2.0):
        args = SimpleNamespace(max_steps=max_steps, num_train_epochs=2.0, metric_for_best_model="accuracy")
        return SimpleNamespace(args=args, state=SimpleNamespace(global_step=global_step, max_steps=planned,
                                                                epoch=epoch))

    assert stop_reason(trainer(10)) == "max epochs 2 reached (10 steps)"
    assert stop_reason(trainer(3, max_steps=3, planned=3, epoch=0.6)) == "max steps 3 reached (epoch 0.60 of 2)"
    patience = EarlyStoppingCallback(early_stopping_patience=2)
    patience.early_stopping_patience_counter = 2  # two evaluations without a better accuracy
    assert stop_reason(trainer(6, epoch=1.2), early_stopping=patience) == (
        "early stopping: no better validation accuracy in 2 evaluations (step 6, epoch 1.20)")
    budget = TimeBudget(minutes=1e-9)
    control = TrainerControl()
    budget.on_train_begin(None, None, control)
    budget.on_step_end(SimpleNamespace(device="cpu"), None, control)
    assert control.should_training_stop and budget.stopped
    assert stop_reason(trainer(4, epoch=0.8), time_budget=budget)== "time budget 1e-09 min spent (step 4)"
    assert stop_reason(trainer(10), time_budget=budget) == "max epochs 2 reached (10 steps)"  # the end came first
    idle = TimeBudget(minutes=None)
    idle.on_train_begin(None, None, TrainerControl())
    idle.on_step_end(None, None, control := TrainerControl())
    assert not control.should_training_stop and not idle.stopped


def test_check_run_refuses_a_folder_that_is_not_a_checkpoint(tmp_path):
    """An --encoder folder without config.json is named before any work, not failed on in the tokenizer loader."""
    options = tc.ClassifierOptions(task="trec6", encoder=str(tmp_path / "empty"), output_dir=str(tmp_path / "run"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"--encoder .*empty is not a checkpoint directory \(no config.json\)"):
        tc.check_run(options, tmp_path / "run")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text("{}")
    with pytest.raises(FileExistsError, match="already holds a finished run"):
        tc.check_run(options, tmp_path / "run")
