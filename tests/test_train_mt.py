"""MT pretraining (modeling_cove.training.commands.train_mt and scripts/train_mt.py): batching, vocabulary/ids, the lr schedule and
its stops, resume as a unit (kill at a step in-process, resume, identical losses), 2-process CPU DDP under
`accelerate launch` == 1 process, SIGKILL + --resume == uninterrupted, outputs (metrics JSON, curve PNG, exported
encoder), bad arguments. Tiny configs on a toy EN->DE corpus written here."""

import gzip
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import exit_of
from safetensors.torch import load_file

from modeling_cove.training.publishing.cards import encoder_export_card
from modeling_cove.training.common.cli import parse_options
from modeling_cove.training.publishing.export import export_encoder
from modeling_cove.training.commands import train_mt as train_mt_command
from modeling_cove.training.commands.train_mt import MTArguments, MTSetupError, load_model_preset, resolve_mt_settings, train_mt
from modeling_cove.training.data.translation import encode_split, select_target_words, target_tokenize
from modeling_cove.training.loops.mt_schedule import PerplexitySchedule, resolve_min_lr
from modeling_cove.training.loops.mt import SEED_STRIDE
from modeling_cove.training.loops.accelerate_loop import LoopState, StopLimits, checkpoint_dirs, epoch_batches, read_state, stop_reason

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "train_mt.py"
TINY = {"word_vector_dim": 8, "hidden_size": 4, "decoder_hidden_size": 8, "decoder_embedding_dim": 6}
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_EVALUATE_OFFLINE": "1",
       "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}

EN = ["a", "man", "woman", "dog", "runs", "sits", "on", "the", "red", "blue", "street", "grass", "two", "people"]
DE = {"a": "ein", "man": "mann", "woman": "frau", "dog": "hund", "runs": "läuft", "sits": "sitzt", "on": "auf",
      "the": "der", "red": "roten", "blue": "blauen", "street": "straße", "grass": "wiese", "two": "zwei",
      "people": "leute"}


def write_toy_corpus(root: Path, seed: int = 0) -> Path:
    """`root/multi30k/{train,val,test_2016_flickr}.{en,de}.gz`, the layout load_translation reads."""
    rng = random.Random(seed)
    folder = root / "multi30k"
    folder.mkdir(parents=True)
    for stem, n in (("train", 96), ("val", 16), ("test_2016_flickr", 16)):
        en, de = [], []
        for _ in range(n):
            words = [rng.choice(EN) for _ in range(rng.randint(2, 7))]
            en.append(" ".join(words).capitalize() + ".")
            de.append(" ".join(DE[w] for w in words).capitalize() + ".")
        if stem == "train":  # one pair longer than --max-length 12: dropped and counted
            en.append(" ".join(["a"] * 14) + ".")
            de.append(" ".join(["ein"] * 14) + ".")
        for lang, lines in (("en", en), ("de", de)):
            with gzip.open(folder / f"{stem}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy")
    write_toy_corpus(root / "data")
    rng = np.random.default_rng(0)
    with open(root / "vectors.txt", "w", encoding="utf-8") as f:  # GloVe text format, 8-d; "people" has none
        for word in EN[:-1] + ["."]:
            f.write(word + " " + " ".join(f"{x:.4f}" for x in rng.normal(size=8)) + "\n")
    return root


def common_args(toy, out, *extra, overrides=None):
    return ["--output-dir", str(out), "--data-dir", str(toy / "data"), "--vectors", str(toy / "vectors.txt"),
            "--config-overrides", json.dumps({**TINY, **(overrides or {})}), "--batch-size", "16",
            "--max-length", "12", "--num-threads", "1", "--source-min-freq", "1", *extra]


def weights(out: Path) -> dict:
    return load_file(str(out / "mt" / "model.safetensors"))


def arguments(argv: list) -> MTArguments:
    """MTArguments from a command line, parsed as cove-train-mt parses it."""
    return parse_options(MTArguments, argv)


def run(argv: list, **kwargs):
    return train_mt(arguments(argv), **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# units


def read_trainer_state(checkpoint) -> dict:
    return read_state(checkpoint).to_dict()


def mt_batches(src, tgt, batch_size, chunk_batches, seed, epoch):
    """The MT loop's length-grouped epoch batches."""
    return epoch_batches(len(src), batch_size, seed, epoch, SEED_STRIDE, lengths=(src, tgt),
                         chunk_batches=chunk_batches)


def test_epoch_batches_are_a_function_of_seed_and_epoch():
    rng = np.random.default_rng(0)
    src = rng.integers(1, 40, size=1000)
    tgt = rng.integers(1, 40, size=1000)
    a = mt_batches(src, tgt, 64, 5, seed=1, epoch=1)
    assert a == mt_batches(src, tgt, 64, 5, seed=1, epoch=1)
    assert a != mt_batches(src, tgt, 64, 5, seed=1, epoch=2)
    assert sorted(i for b in a for i in b) == list(range(1000))  # every pair once
    assert sum(len(b) < 64 for b in a) <= 4  # at most one short batch per chunk of 5 * 64 = 320 pairs
    # length grouping: within a batch the source lengths spread far less than in random batches
    spread = np.mean([src[b].max() - src[b].min() for b in a])
    perm = rng.permutation(1000)
    random_spread = np.mean([src[perm[i : i + 64]].max() - src[perm[i : i + 64]].min() for i in range(0, 1000, 64)])
    assert spread < 0.35 * random_spread, (spread, random_spread)


def test_unknown_target_tokens_map_to_unk_and_are_counted():
    from datasets import Dataset

    ds = Dataset.from_dict({"src_tokens": [["a", "dog"], ["zebra"]], "tgt_tokens": [["ein", "hund"], ["zebra", "ein"]]})
    src_vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "a": 4, "dog": 5}
    tgt_vocab = {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "ein": 4, "hund": 5}
    out = encode_split(ds, src_vocab, tgt_vocab, eos_id=3, unk_id=1)
    assert out["src_ids"] == [[4, 5], [1]]
    assert out["tgt_ids"] == [[4, 5, 3], [1, 4, 3]]
    assert out["src_unk"] == [0, 1] and out["tgt_unk"] == [0, 1]


def test_target_side_is_lowercased_german_moses():
    assert target_tokenize("Zwei Männer, die Fußball spielen.") == [
        "zwei", "männer", ",", "die", "fußball", "spielen", "."]
    assert select_target_words({"b": 2, "a": 2, "c": 1, "</s>": 9}, min_freq=2, max_size=50) == ["a", "b"]


def test_schedule_halves_once_perplexity_rose_and_stops_below_min_lr():
    """The paper's rule: no decay while validation perplexity falls; from its first rise on, halve after every epoch
    (also when it falls again); --start-decay-at also starts it; the run stops once lr < min_lr."""
    def fresh():
        return LoopState(lr=1.0, schedule=PerplexitySchedule.initial_memory())

    schedule, state = PerplexitySchedule(lr_decay=0.5), fresh()
    lrs = [schedule.after_epoch(state, epoch, ppl) for epoch, ppl in enumerate([50.0, 30.0, 31.0, 20.0, 19.0], 1)]
    assert lrs == [1.0, 1.0, 0.5, 0.25, 0.125]
    assert state.schedule == {"decay_started": True, "previous_val_ppl": 19.0}
    scheduled, state = PerplexitySchedule(lr_decay=0.5, start_decay_at=2), fresh()
    assert [scheduled.after_epoch(state, e, 10.0 - e) for e in (1, 2, 3)] == [1.0, 0.5, 0.25]

    limits = StopLimits(max_epochs=30, min_lr=resolve_min_lr(1.0, None))
    assert limits.min_lr == 0.03  # the paper's threshold at its lr
    state = fresh()
    for epoch in range(1, 30):  # perplexity rises after epoch 1: 0.5, 0.25, ... until below 0.03
        state.epoch = epoch
        schedule.after_epoch(state, epoch, 10.0 + epoch)
        if stop_reason(state, limits):
            break
    assert state.epoch == 7 and state.lr == 0.5 ** 6  # 0.03125 after epoch 6 is not below 0.03 yet
    assert stop_reason(state, limits) == "lr 0.015625 fell below min_lr 0.03"
    state.global_step = 40
    assert stop_reason(state, StopLimits(30, max_steps=40, min_lr=0.03)) == "max steps 40 reached"
    assert stop_reason(fresh(), StopLimits(0, min_lr=0.03)) == "max epochs 0 reached"
    # the MT loop judges its time budget between epochs: the epochs so far plus one more like the last
    assert stop_reason(fresh(), StopLimits(30, time_budget_minutes=2), 90.0, 50.0).startswith("time budget 2 min")
    assert stop_reason(fresh(), StopLimits(30, time_budget_minutes=3), 90.0, 50.0) is None


def test_min_lr_default_follows_the_lr_and_a_min_lr_above_it_is_refused(capsys):
    """The Adam variant: lr 1e-3 gets min_lr 3e-5 (0.03 x lr), with or without a preset; a min_lr >= lr is an error
    naming both values, from the library and from the command line."""
    assert resolve_min_lr(1e-3, None) == 3e-5 and resolve_min_lr(1e-3, 1e-4) == 1e-4
    adam = ["--output-dir", "x", "--optimizer", "adam", "--lr", "0.001"]
    assert resolve_mt_settings(arguments(adam), {})["min_lr"] == 3e-5
    assert resolve_mt_settings(arguments(adam), load_model_preset("cove-small"))["min_lr"] == 3e-5
    with pytest.raises(MTSetupError, match=r"min_lr 0.03 >= lr 0.001"):
        resolve_mt_settings(arguments([*adam, "--min-lr", "0.03"]), {})
    status, err = exit_of(train_mt_command.main, [*adam, "--min-lr", "0.001"], capsys)  # the command, in-process
    assert status == 2 and "error: min_lr 0.001 >= lr 0.001" in err


# ---------------------------------------------------------------------------------------------------------------
# distributed, resume, outputs


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
def test_two_process_cpu_ddp_matches_one_process(toy, tmp_path, alone_with_the_cores):
    """`accelerate launch --config_file configuration/accelerate/cpu_ddp.yaml --num_processes 2` (gloo DDP, global
    batch 16 = 8 per process) ends with identical weights on both ranks, equal to one process on the same global
    batches (dropout off)."""
    args = ["--max-epochs", "1", "--max-steps", "4", "--no-bleu", "--no-test", "--no-export"]
    overrides = {"decoder_dropout": 0.0, "encoder_dropout": 0.0}
    ddp = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
         str(REPO / "configuration" / "accelerate" / "cpu_ddp.yaml"), "--num_processes", "2",
         "--main_process_port", str(free_port()), str(SCRIPT),
         *common_args(toy, tmp_path / "ddp", *args, overrides=overrides)],
        env=ENV, capture_output=True, text=True, timeout=300,
    )
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    assert "stopped: max steps 4 reached" in ddp.stdout + ddp.stderr
    run(common_args(toy, tmp_path / "single", *args, overrides=overrides))

    metrics = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    assert metrics["machine"]["processes"] == 2 and "MULTI_CPU" in metrics["machine"]["distributed_type"]
    fingerprints = metrics["replica_weight_sha256"]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1]
    a, b = weights(tmp_path / "ddp"), weights(tmp_path / "single")
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=1e-4, msg=name)
    last = load_file(str(checkpoint_dirs(tmp_path / "single")[-1] / "model.safetensors"))
    assert all(torch.equal(last[name], b[name]) for name in b)  # the last checkpoint holds the final weights
    single = json.loads((tmp_path / "single" / "metrics.json").read_text())
    assert abs(metrics["epochs"][0]["val_perplexity"] - single["epochs"][0]["val_perplexity"]) < 1e-3


def test_two_processes_stop_on_validation_bleu_together(toy, tmp_path, alone_with_the_cores):
    """Early stopping under 2-process DDP: every process scores the gathered translations, so both take the same stop
    after the same epoch (a hang otherwise) and load the same best weights: the first epoch of the highest validation
    BLEU, the run stopped at the first epoch not above it (the toy's BLEU rises from epoch 1 to 2, then falls)."""
    args = ["--max-epochs", "6", "--early-stopping-patience", "1", "--no-test", "--no-export"]
    ddp = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
         str(REPO / "configuration" / "accelerate" / "cpu_ddp.yaml"), "--num_processes", "2",
         "--main_process_port", str(free_port()), str(SCRIPT), *common_args(toy, tmp_path / "ddp", *args)],
        env=ENV, capture_output=True, text=True, timeout=300,
    )
    assert ddp.returncode == 0, ddp.stderr[-3000:]
    metrics = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    bleus = [e["val_bleu"] for e in metrics["epochs"]]
    best = bleus.index(max(bleus))
    assert metrics["stop_reason"] == "early stopping: no better validation BLEU in 1 epochs"
    assert len(bleus) == best + 2 and bleus[-1] <= bleus[best] and best >= 1  # a rise, then the first epoch not above
    assert metrics["best_epoch"] == {"epoch": best + 1, "global_step": 6 * (best + 1), "val_bleu": bleus[best]}
    fingerprints = metrics["replica_weight_sha256"]
    assert len(fingerprints) == 2 and fingerprints[0] == fingerprints[1]
    kept, last = weights(tmp_path / "ddp"), load_file(str(checkpoint_dirs(tmp_path / "ddp")[-1] / "model.safetensors"))
    best_state = load_file(str(tmp_path / "ddp" / "best_state.safetensors"))
    assert all(torch.equal(tensor, best_state[name]) for name, tensor in kept.items())
    assert not all(torch.equal(tensor, last[name]) for name, tensor in kept.items())  # not the last epoch's


RESUME_ARGS = ["--max-epochs", "3", "--save-steps", "2", "--seed", "7"]


@pytest.fixture(scope="module")
def reference_run(toy, tmp_path_factory):
    """A complete tiny run: 3 epochs of 6 steps, dropout 0.2, BLEU every epoch, beam-2 test BLEU, export."""
    out = tmp_path_factory.mktemp("runs") / "reference"
    run(common_args(toy, out, *RESUME_ARGS, "--test-num-beams", "2"))
    return out


@pytest.mark.slow
def test_sigkill_then_resume_equals_uninterrupted_run(toy, tmp_path, reference_run):
    """SIGKILL a run after its first checkpoint, --resume it, and get the weights of the uninterrupted run bit for
    bit (data order, RNG, lr schedule and step restored; evaluation does not disturb training)."""
    args = RESUME_ARGS
    reference = reference_run

    killed = tmp_path / "killed"
    proc = subprocess.Popen([sys.executable, str(SCRIPT), *common_args(toy, killed, *args, "--no-bleu", "--no-test",
                                                                       "--no-export")],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 240
    while not checkpoint_dirs(killed):
        assert proc.poll() is None, f"run ended before its first checkpoint: {proc.stderr.read()[-3000:]}"
        assert time.time() < deadline, "no checkpoint within 240 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    proc.stderr.close()
    state = read_trainer_state(checkpoint_dirs(killed)[-1])
    assert not state["finished"] and state["global_step"] < 18

    run(common_args(toy, killed, *args, "--resume", "--no-bleu", "--no-test", "--no-export"))
    a, b = weights(reference), weights(killed)
    for name in a:
        assert torch.equal(a[name], b[name]), name
    ref_metrics = json.loads((reference / "metrics.json").read_text())
    res_metrics = json.loads((killed / "metrics.json").read_text())
    assert [e["val_perplexity"] for e in ref_metrics["epochs"]] == [e["val_perplexity"] for e in res_metrics["epochs"]]

    # outputs of the complete run: metrics, curves, data statistics, test BLEU, exported encoder
    assert (reference / "curves.png").stat().st_size > 1000
    assert len(ref_metrics["epochs"]) == 3 and ref_metrics["epochs"][-1]["global_step"] == 18
    assert all(e["val_bleu"] is not None for e in ref_metrics["epochs"])
    data = ref_metrics["data"]
    assert data["train_pairs"] == 97 and data["train_pairs_dropped_too_long"] == 1 and data["train_pairs_kept"] == 96
    assert data["source_train_token_coverage_by_vectors"] < 100  # "people" has no vector (a zero row)
    assert ref_metrics["test"]["num_beams"] == 2 and 0 <= ref_metrics["test"]["bleu"] <= 100
    assert ref_metrics["train_target_tokens_per_second"] > 0
    assert ref_metrics["stop_reason"] == res_metrics["stop_reason"] == "max epochs 3 reached"
    assert ref_metrics["commit"] and ref_metrics["machine"]["cpu"] and ref_metrics["command"].startswith("python ")
    assert "3 complete epochs, 18 optimizer steps (stopped: max epochs 3 reached)" in (
        reference / "encoder" / "README.md").read_text()


def test_exported_encoder_loads_with_auto_classes(reference_run):
    import modeling_cove  # noqa: F401
    from transformers import AutoModel, AutoTokenizer

    from modeling_cove.modeling_cove_mt import CoveForMachineTranslation

    encoder = AutoModel.from_pretrained(reference_run / "encoder").eval()
    tokenizer = AutoTokenizer.from_pretrained(reference_run / "encoder")
    assert type(encoder).__name__ == "CoveModel" and encoder.config.freeze_encoder
    assert encoder.config.output_final_states is False  # not the MT model's True: feature extraction's fast path
    assert (reference_run / "encoder" / "README.md").read_text().count("CoVe") >= 2
    mt = CoveForMachineTranslation.from_pretrained(reference_run / "mt").eval()
    batch = tokenizer(["A man runs on the street.", "Two dogs."], padding=True, return_tensors="pt")
    with torch.no_grad():
        got = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        want = mt.cove(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    torch.testing.assert_close(got, want, rtol=0, atol=1e-7)


def test_export_with_another_vocabulary(toy, reference_run, tmp_path):
    """--vocab-from: the same MT-LSTM over another vocabulary built from the same vectors; other vectors refused."""
    from transformers import AutoModel, AutoTokenizer

    from modeling_cove.build import create_cove_checkpoint
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS
    from modeling_cove.vectors import build_embedding_matrix

    words = ["woman", "dog", "zebra", "a", "grass"]  # "zebra" has no vector
    matrix, found = build_embedding_matrix(toy / "vectors.txt", SPECIAL_TOKENS + words, dim=8)
    encoder, tokenizer = create_cove_checkpoint(words, matrix, hidden_size=4)
    encoder.save_pretrained(tmp_path / "vocab")
    tokenizer.save_pretrained(tmp_path / "vocab")
    export_encoder(reference_run / "mt", tmp_path / "export", vocab_from=tmp_path / "vocab")
    exported = AutoModel.from_pretrained(tmp_path / "export")
    trained = AutoModel.from_pretrained(reference_run / "encoder")
    assert exported.config.vocab_size == len(SPECIAL_TOKENS) + 5 and exported.config.freeze_encoder
    torch.testing.assert_close(exported.embeddings.weight, matrix, rtol=0, atol=0)
    # the export's own tokenizer is the one it accepts (its fingerprint is the new vocabulary's, not the MT run's)
    assert exported.config.vocabulary_fingerprint == encoder.config.vocabulary_fingerprint
    vectors = exported.encode(["a dog"], AutoTokenizer.from_pretrained(tmp_path / "export"))
    assert vectors[0].shape == (2, exported.config.encoder_output_size)
    for name, tensor in trained.encoder.state_dict().items():
        assert torch.equal(exported.encoder.state_dict()[name], tensor)

    with torch.no_grad():
        encoder.embeddings.weight.add_(1.0)  # vectors that differ from the training run's
    encoder.save_pretrained(tmp_path / "other")
    tokenizer.save_pretrained(tmp_path / "other")
    with pytest.raises(ValueError, match="different word vectors"):
        export_encoder(reference_run / "mt", tmp_path / "bad", vocab_from=tmp_path / "other")


def test_export_of_a_run_that_trained_its_word_vectors_is_frozen(reference_run, tmp_path):
    """An MT run may train its word vectors (--config-overrides '{"freeze_embeddings": false}'): the exported
    encoder is CoVe as the heads read it, every part fixed, its trained vectors kept."""
    import shutil

    from transformers import AutoModel

    shutil.copytree(reference_run / "mt", tmp_path / "mt")
    config = json.loads((tmp_path / "mt" / "config.json").read_text())
    (tmp_path / "mt" / "config.json").write_text(json.dumps({**config, "freeze_embeddings": False}))
    export_encoder(tmp_path / "mt", tmp_path / "export")
    exported = AutoModel.from_pretrained(tmp_path / "export")
    assert exported.config.freeze_embeddings and not any(p.requires_grad for p in exported.parameters())
    trained = AutoModel.from_pretrained(reference_run / "encoder")
    torch.testing.assert_close(exported.embeddings.weight, trained.embeddings.weight, rtol=0, atol=0)


def test_a_failed_export_check_leaves_nothing_beside_the_output(reference_run, tmp_path, monkeypatch):
    """An export whose own check fails is an error and leaves neither the output nor its temporary folder."""
    from modeling_cove.training.publishing import export

    def failing_check(folder, model, same_vocabulary):
        raise RuntimeError("exported encoder does not reproduce the trained model's encoder outputs")

    monkeypatch.setattr(export, "check_export", failing_check)
    with pytest.raises(RuntimeError, match="does not reproduce"):
        export_encoder(reference_run / "mt", tmp_path / "export")
    assert not (tmp_path / "export").exists() and not (tmp_path / "export.tmp").exists()


def test_bad_arguments(toy, tmp_path):
    with pytest.raises(ValueError, match="--vectors FILE"):
        run(["--output-dir", str(tmp_path / "a"), "--data-dir", str(toy / "data"), "--max-steps", "1",
                       "--config-overrides", json.dumps(TINY)])
    with pytest.raises(MTSetupError, match="nothing to resume"):
        run(common_args(toy, tmp_path / "b", "--resume"))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "run_settings.json").write_text(json.dumps({"seed": 1}))
    with pytest.raises(MTSetupError, match="different data/batching/model settings"):
        run(common_args(toy, tmp_path / "c", "--resume"))
    with pytest.raises(MTSetupError, match="exists and is not empty"):
        run(common_args(toy, tmp_path / "c"))


@pytest.mark.parametrize("name", ["cove-small", "cove-medium", "cove-large"])
def test_presets_resolve_to_valid_configs(name):
    from modeling_cove import CoveConfig, CoveForMachineTranslation

    preset = load_model_preset(name)
    assert preset == load_model_preset(REPO / "configuration" / "models" / f"{name}.json")  # by name or by path
    settings = resolve_mt_settings(arguments(["--output-dir", "x"]), preset)
    assert settings["dataset"] == {"cove-small": "multi30k", "cove-medium": "iwslt", "cove-large": "wmt17"}[name]
    assert (settings["lr"], settings["min_lr"], settings["batch_size"], settings["max_length"]) == (1.0, 0.03, 64, 75)
    assert settings["grad_clip"] == 5.0 and settings["max_vocab"] == 50000
    config = CoveConfig(**settings["config_overrides"], vocab_size=10, target_vocab_size=10)
    assert not config.freeze_encoder and config.freeze_embeddings and config.decoder_dropout == 0.2
    assert (config.hidden_size, config.decoder_hidden_size, config.decoder_embedding_dim) == (300, 600, 300)
    CoveForMachineTranslation(config)  # a valid MT model (sizes of docs/paper.md §2)
    # the command line wins over the preset
    args = arguments(["--output-dir", "x", "--lr", "0.5", "--config-overrides", '{"decoder_dropout": 0.3}'])
    settings = resolve_mt_settings(args, preset)
    assert settings["lr"] == 0.5 and settings["config_overrides"]["decoder_dropout"] == 0.3
    # from Python the overrides may be a dict
    python_args = MTArguments(output_dir="x", lr=0.5, config_overrides={"decoder_dropout": 0.3})
    assert resolve_mt_settings(python_args, preset) == settings


def test_init_from_checkpoint_keeps_word_vectors_fixed(toy, tmp_path):
    """--init-from a CoVe checkpoint (as build_vocab.py writes): its tokenizer and vectors are used, the vectors stay
    fixed through training (also after from_pretrained), the MT-LSTM trains."""
    from modeling_cove.build import create_cove_checkpoint
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS
    from modeling_cove.vectors import build_embedding_matrix

    words = EN + ["."]
    matrix, _ = build_embedding_matrix(toy / "vectors.txt", SPECIAL_TOKENS + words, dim=8)
    encoder, tokenizer = create_cove_checkpoint(words, matrix, hidden_size=4, seed=3)
    encoder.save_pretrained(tmp_path / "vocab")
    tokenizer.save_pretrained(tmp_path / "vocab")
    (tmp_path / "vocab" / "build_info.json").write_text(json.dumps({"vectors": str(toy / "vectors.txt")}))
    out = tmp_path / "run"
    run(["--output-dir", str(out), "--data-dir", str(toy / "data"), "--init-from", str(tmp_path / "vocab"),
                   "--config-overrides", json.dumps({"decoder_hidden_size": 8, "decoder_embedding_dim": 6}),
                   "--batch-size", "16", "--max-steps", "3", "--num-threads", "1", "--no-bleu", "--no-test",
                   "--no-export"])
    trained = weights(out)
    torch.testing.assert_close(trained["cove.embeddings.weight"], matrix, atol=0, rtol=0)
    start = encoder.state_dict()
    assert not torch.equal(trained["cove.encoder.rnn.weight_ih_l0"], start["encoder.rnn.weight_ih_l0"])
    stats = json.loads((out / "metrics.json").read_text())["data"]
    assert stats["source_vocab_size"] == len(tokenizer) and stats["source_vocab_from"] == str(tmp_path / "vocab")
    assert stats["source_vectors"] == str(toy / "vectors.txt")  # cove-build-vocab's record: the card names it


def test_init_from_that_is_no_checkpoint_is_named(toy, tmp_path, capsys):
    """A wrong --init-from (a missing folder, read by transformers as a Hub id) stops with one line naming it: the
    command's main in this process, exit status 2."""
    status, err = exit_of(train_mt_command.main, ["--output-dir", str(tmp_path / "run"), "--data-dir",
                                                  str(toy / "data"), "--init-from", str(tmp_path / "missing"),
                                                  "--max-steps", "1", "--num-threads", "1"], capsys)
    assert status == 2
    assert f"error: --init-from '{tmp_path / 'missing'}' is not a loadable CoVe checkpoint" in err
    assert "Traceback" not in err and not (tmp_path / "run" / "metrics.json").exists()


def trainer_state(out: Path) -> dict:
    return read_trainer_state(checkpoint_dirs(out)[-1])


def test_max_steps_stop_then_resume_equals_uninterrupted_run(toy, tmp_path):
    """--max-steps 3 (inside epoch 1 of 6 steps), then --resume --max-steps 8, equals one --max-steps 8 run: the
    epoch's remaining batches are trained, the lr is not decayed at the stop, the partial epoch record and loss-log
    entry are replaced; a second --resume with the same --max-steps trains nothing."""
    quick = ["--seed", "7", "--no-bleu", "--no-test", "--no-export"]
    whole, split = tmp_path / "whole", tmp_path / "split"
    run(common_args(toy, whole, *quick, "--max-steps", "8"))
    run(common_args(toy, split, *quick, "--max-steps", "3"))
    stopped = trainer_state(split)
    assert (stopped["epoch"], stopped["step_in_epoch"], stopped["global_step"], stopped["lr"]) == (0, 3, 3, 1.0)
    assert len(stopped["loss_log"]) == 1 and stopped["loss_log"][0][0] == 3  # the 3 steps are logged (item 6)
    # the schedule is the first run's: another lr, floor or decay start is refused, naming it; the budget may grow
    for flags, key in ((("--lr", "0.5"), "'lr'"), (("--min-lr", "0.001"), "'min_lr'"),
                       (("--start-decay-at", "2"), "'start_decay_at'"), (("--grad-clip", "1.0"), "'grad_clip'")):
        with pytest.raises(MTSetupError, match=key):
            run(common_args(toy, split, *quick, "--max-steps", "8", "--resume", *flags))
    run(common_args(toy, split, *quick, "--max-steps", "8", "--resume"))

    a, b = weights(whole), weights(split)
    for name in a:
        torch.testing.assert_close(a[name], b[name], rtol=0, atol=0, msg=name)
    ref, res = trainer_state(whole), trainer_state(split)
    assert [e["global_step"] for e in ref["history"]] == [e["global_step"] for e in res["history"]] == [6, 8]
    for key in ("epoch", "steps", "complete", "lr"):
        assert [e[key] for e in ref["history"]] == [e[key] for e in res["history"]], key
    assert [e["complete"] for e in res["history"]] == [True, False]
    for key in ("train_nll_per_token", "val_nll_per_token"):
        np.testing.assert_allclose([e[key] for e in ref["history"]], [e[key] for e in res["history"]], rtol=1e-6)
    # the loss log: one entry per epoch end / stop with the default --log-every 10
    assert [r[0] for r in ref["loss_log"]] == [r[0] for r in res["loss_log"]] == [6, 8]
    np.testing.assert_allclose(ref["loss_log"], res["loss_log"], rtol=1e-6)
    assert (res["epoch"], res["step_in_epoch"], res["global_step"]) == (1, 2, 8)

    run(common_args(toy, split, *quick, "--max-steps", "8", "--resume"))
    assert trainer_state(split)["global_step"] == 8
    for name, tensor in weights(split).items():
        assert torch.equal(tensor, b[name]), name


def test_adam_at_a_small_lr_runs_every_max_step(toy, tmp_path):
    """`--optimizer adam --lr 0.001 --max-steps 25` runs 25 steps (over 5 epochs of 6): no min_lr meant for SGD at lr
    1.0 stops it after the first epoch; the stop and its reason are in metrics.json and the encoder's card."""
    out = tmp_path / "adam"
    metrics = run(common_args(toy, out, "--optimizer", "adam", "--lr", "0.001", "--max-steps", "25", "--no-bleu",
                              "--no-test"))
    assert metrics["global_step"] == 25 and metrics["stop_reason"] == "max steps 25 reached"
    assert metrics["settings"]["min_lr"] == 3e-5
    assert [e["complete"] for e in metrics["epochs"]] == [True] * 4 + [False]
    assert json.loads((out / "metrics.json").read_text())["stop_reason"] == "max steps 25 reached"
    assert "4 complete epochs, 25 optimizer steps (stopped: max steps 25 reached)" in (
        out / "encoder" / "README.md").read_text()


class Killed(Exception):
    """Stands for a kill at a given step: the run ends there without saving anything more."""


def test_resume_mid_epoch_continues_the_loss_sequence_exactly(toy, tmp_path):
    """Unit test of resume, in-process: a run killed at step 5 (its last checkpoint at step 4, inside epoch 1)
    and resumed gives the per-step losses of the uninterrupted run bit for bit, and the same loss log and weights."""
    argv = ["--max-epochs", "2", "--save-steps", "2", "--log-every", "1", "--seed", "3", "--no-bleu", "--no-test",
            "--no-export"]
    reference, losses = tmp_path / "reference", {}
    run(common_args(toy, reference, *argv), on_step=lambda state, loss: losses.setdefault(state.global_step, loss))
    assert sorted(losses) == list(range(1, 13))

    def kill_at_5(state, loss):
        if state.global_step == 5:
            raise Killed
        killed_losses.append(loss)

    killed, killed_losses, resumed_losses = tmp_path / "killed", [], []
    with pytest.raises(Killed):
        run(common_args(toy, killed, *argv), on_step=kill_at_5)
    assert read_trainer_state(checkpoint_dirs(killed)[-1])["global_step"] == 4
    metrics = run(common_args(toy, killed, *argv, "--resume"), on_step=lambda state, loss: resumed_losses.append(loss))
    assert killed_losses == [losses[step] for step in range(1, 5)]
    assert resumed_losses == [losses[step] for step in range(5, 13)]
    assert trainer_state(killed)["loss_log"] == trainer_state(reference)["loss_log"]
    assert [r[1] for r in trainer_state(killed)["loss_log"]] == [losses[step] for step in range(1, 13)]
    for name, tensor in weights(reference).items():
        assert torch.equal(weights(killed)[name], tensor), name
    assert metrics["stop_reason"] == "max epochs 2 reached"


def test_resume_refuses_other_model_settings_and_config_typos(toy, tmp_path):
    """--config-overrides, --optimizer and --vectors-lowercase are fixed by the first run (mt/config.json, the
    vocabulary, the optimizer state): --resume with other values is refused like other data settings; an unknown
    CoveConfig key is refused before anything is written."""
    out = tmp_path / "run"
    out.mkdir()
    args = arguments(common_args(toy, out))
    (out / "run_settings.json").write_text(json.dumps(resolve_mt_settings(args, {})))
    for extra, changed in ((["--optimizer", "adam"], "optimizer"), (["--vectors-lowercase"], "vectors_lowercase")):
        with pytest.raises(MTSetupError, match=f"different data/batching/model settings.*'{changed}'"):
            run(common_args(toy, out, "--resume", *extra))
    with pytest.raises(MTSetupError, match="'config_overrides'"):
        run(common_args(toy, out, "--resume", overrides={"decoder_dropout": 0.5}))
    # a run begun by two processes (each with its own random states and share of the batch) is not resumed by one;
    # a run that recorded no count (older than the key) is taken as it is
    (out / "run_settings.json").write_text(json.dumps({**resolve_mt_settings(args, {}), "processes": 2}))
    with pytest.raises(MTSetupError, match=r"'processes': \(2, 1\)"):
        run(common_args(toy, out, "--resume"))
    with pytest.raises(ValueError, match=r"'decoder_hiden_size' is not a CoveConfig field \(did you mean "
                                         r"'decoder_hidden_size'\?\)"):
        run(common_args(toy, tmp_path / "typo", overrides={"decoder_hiden_size": 8}))
    with pytest.raises(ValueError, match="must be a JSON object"):
        run(["--output-dir", str(tmp_path / "list"), "--config-overrides", "[1]"])
    assert not (tmp_path / "typo").exists() and not (tmp_path / "list").exists()


def test_wrong_inputs_leave_the_output_folder_unwritten(toy, tmp_path, capsys):
    """A --data-dir typo (or a missing --vectors file) fails before run_settings.json is written, so the corrected
    command runs in the same folder without --overwrite."""
    out = tmp_path / "run"

    def with_value(option, value):
        args = common_args(toy, out, "--max-steps", "1", "--no-bleu", "--no-test", "--no-export")
        args[args.index(option) + 1] = value
        return args

    with pytest.raises(SystemExit) as exit_info:  # a usage error: the flag names no folder
        run(with_value("--data-dir", str(toy / "dtaa")))
    assert exit_info.value.code == 2 and (not out.exists() or not any(out.iterdir()))
    assert f"--data-dir must be an existing folder, got '{toy / 'dtaa'}'" in capsys.readouterr().err
    with pytest.raises(MTSetupError, match="--vectors .*missing.txt is not a file"):
        run(with_value("--vectors", str(toy / "missing.txt")))
    assert not out.exists() or not any(out.iterdir())
    run(common_args(toy, out, "--max-steps", "1", "--no-bleu", "--no-test", "--no-export"))
    assert trainer_state(out)["global_step"] == 1


def test_encoder_card_describes_the_run_optimisation():
    """The exported encoder's card states the optimizer and lr schedule of the run, not always the paper's."""
    from modeling_cove import CoveConfig

    config = CoveConfig(vocab_size=10, word_vector_dim=8, hidden_size=4)
    adam = {"settings": {"optimizer": "adam", "lr": 0.001, "lr_decay": 0.9, "start_decay_at": 3, "min_lr": 3e-5,
                         "grad_clip": 5.0, "batch_size": 64}, "epochs": []}
    card = str(encoder_export_card("mt", config, adam, path=Path("enc")))
    assert ("- Optimisation: Adam lr 0.001, multiplied by 0.9 each epoch after validation perplexity first rose or "
            "from epoch 3 on, stop below 3e-05 (differs from docs/paper.md §2 (SGD lr 1, halved)); gradient-norm clip "
            "5.0; global batch 64 sentences;") in card
    assert "SGD lr 0.001" not in card
    paper = {"settings": {**adam["settings"], "optimizer": "sgd", "lr": 1.0, "lr_decay": 0.5, "start_decay_at": None,
                          "min_lr": 0.03}}
    assert ("- Optimisation: SGD lr 1.0, halved each epoch after validation perplexity first rose, stop below 0.03 "
            "(the schedule of docs/paper.md §2);") in str(encoder_export_card("mt", config, paper, path=Path("enc")))
    assert "- Optimisation: not recorded;" in str(encoder_export_card("mt", config, None, path=Path("enc")))


class ScriptedBleu:
    """Stands for compute_bleu: validation BLEU by epoch from a script (the toy model's own BLEU is 0 throughout),
    counting from `first_epoch`."""

    def __init__(self, script: list, first_epoch: int = 1):
        self.script, self.epoch = script, first_epoch

    def __call__(self, hyps, refs) -> dict:
        bleu = self.script[self.epoch - 1]
        self.epoch += 1
        return {"bleu": bleu, "sacrebleu": bleu}


def test_early_stopping_on_validation_bleu_keeps_the_best_epoch(toy, tmp_path, monkeypatch):
    """--early-stopping-patience 2 with validation BLEU 10, 20, 15, 12 stops after epoch 4 and tests, saves and exports
    the weights of epoch 2, the same as a run of 2 epochs; a run stopped at max epochs 3 and resumed with 8 ends the
    same way (the best epoch's weights survive the resume); the card names the epoch. A run killed after its best
    epoch's checkpoint, before the weights file (here: the file removed), writes them on resume from that checkpoint;
    past it, the resume stops with a clear error. Patience fixes the validation beam; it needs BLEU."""
    from modeling_cove.training.loops import mt as mt_loop

    quick = ["--seed", "5", "--no-test", "--eval-num-beams", "1"]
    script = [10.0, 20.0, 15.0, 12.0, 30.0, 30.0]
    two = tmp_path / "two"
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script))
    run(common_args(toy, two, *quick, "--max-epochs", "2"))
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script))
    stopped = tmp_path / "stopped"
    metrics = run(common_args(toy, stopped, *quick, "--max-epochs", "8", "--early-stopping-patience", "2"))
    assert [e["val_bleu"] for e in metrics["epochs"]] == script[:4]
    assert metrics["stop_reason"] == "early stopping: no better validation BLEU in 2 epochs"
    assert metrics["best_epoch"] == {"epoch": 2, "global_step": 12, "val_bleu": 20.0}
    for name, tensor in weights(two).items():
        assert torch.equal(weights(stopped)[name], tensor), name
    exported = load_file(str(stopped / "encoder" / "model.safetensors"))
    for name, tensor in load_file(str(two / "encoder" / "model.safetensors")).items():
        assert torch.equal(exported[name], tensor), name
    assert ("4 complete epochs, 24 optimizer steps (stopped: early stopping: no better validation BLEU in 2 epochs); "
            "these are the weights of epoch 2 (step 12), the best validation BLEU (20.00)") in (
        stopped / "encoder" / "README.md").read_text()

    resumed = tmp_path / "resumed"
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script))
    first = run(common_args(toy, resumed, *quick, "--max-epochs", "3", "--early-stopping-patience", "2"))
    assert first["stop_reason"] == "max epochs 3 reached" and first["best_epoch"]["epoch"] == 2
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script, first_epoch=4))
    again = run(common_args(toy, resumed, *quick, "--max-epochs", "8", "--early-stopping-patience", "2", "--resume"))
    assert [e["val_bleu"] for e in again["epochs"]] == script[:4] and again["best_epoch"] == metrics["best_epoch"]
    for name, tensor in weights(two).items():
        assert torch.equal(weights(resumed)[name], tensor), name
    with pytest.raises(MTSetupError, match="'early_stopping_patience'"):
        run(common_args(toy, resumed, *quick, "--max-epochs", "9", "--resume"))  # patience off: another run
    with pytest.raises(MTSetupError, match="'eval_num_beams'"):
        run(common_args(toy, resumed, "--seed", "5", "--no-test", "--eval-num-beams", "2", "--max-epochs", "9",
                        "--early-stopping-patience", "2", "--resume"))

    lost = tmp_path / "lost"  # the best epoch's checkpoint saved, its weights file not yet
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script))
    run(common_args(toy, lost, *quick, "--max-epochs", "2", "--early-stopping-patience", "2"))
    (lost / "best_state.safetensors").unlink()
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script, first_epoch=3))
    again = run(common_args(toy, lost, *quick, "--max-epochs", "8", "--early-stopping-patience", "2", "--resume"))
    assert again["best_epoch"] == metrics["best_epoch"] and again["stop_reason"] == metrics["stop_reason"]
    for name, tensor in weights(two).items():
        assert torch.equal(weights(lost)[name], tensor), name
    (lost / "best_state.safetensors").unlink()  # now the newest checkpoint is epoch 4's, past the best
    with pytest.raises(RuntimeError, match="does not hold the weights of epoch 2, the best validation BLEU, and the "
                                           "checkpoint resumed from is past it"):
        run(common_args(toy, lost, *quick, "--max-epochs", "9", "--early-stopping-patience", "2", "--resume"))
    with pytest.raises(MTSetupError, match="early_stopping_patience 1 watches the validation BLEU, which --no-bleu"):
        run(common_args(toy, tmp_path / "nobleu", "--no-bleu", "--early-stopping-patience", "1"))


def test_a_resume_past_a_cut_short_checkpoint_replays_to_the_same_best_epoch(toy, tmp_path, monkeypatch, capsys):
    """The newest checkpoint (epoch 3's, the best) left cut short by a lost machine: the resume passes over it, names
    it, and replays epoch 3 from epoch 2's checkpoint while the best weights saved at epoch 3 wait to be written again;
    it ends as the run without the loss (validation BLEU 20, 10, 30, 25, 22: best epoch 3, stopped after epoch 5)."""
    from modeling_cove.training.loops import mt as mt_loop

    quick = ["--seed", "5", "--no-test", "--eval-num-beams", "1", "--early-stopping-patience", "2"]
    script = [20.0, 10.0, 30.0, 25.0, 22.0]
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script))
    whole = run(common_args(toy, tmp_path / "whole", *quick, "--max-epochs", "8"))
    assert whole["best_epoch"] == {"epoch": 3, "global_step": 18, "val_bleu": 30.0}
    out = tmp_path / "cut"
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script))
    run(common_args(toy, out, *quick, "--max-epochs", "3"))
    newest = checkpoint_dirs(out)[-1]
    assert newest.name == "step-00000018"
    (newest / "model.safetensors").write_bytes((newest / "model.safetensors").read_bytes()[:-8])
    capsys.readouterr()
    monkeypatch.setattr(mt_loop, "compute_bleu", ScriptedBleu(script, first_epoch=3))
    again = run(common_args(toy, out, *quick, "--max-epochs", "8", "--resume"))
    assert f"passed over {newest}: model.safetensors: not a whole safetensors file" in capsys.readouterr().out
    assert (again["best_epoch"], again["stop_reason"]) == (whole["best_epoch"], whole["stop_reason"])
    for name, tensor in weights(tmp_path / "whole").items():
        assert torch.equal(weights(out)[name], tensor), name
    (out / "best_state.safetensors").write_bytes(bytes(64))  # the best weights themselves cut short
    with pytest.raises(RuntimeError, match=r"best_state.safetensors \(the best epoch's weights\) is not whole "
                                           r"\(not a whole safetensors file .*start it again"):
        run(common_args(toy, out, *quick, "--max-epochs", "9", "--resume"))


def test_resume_finds_the_data_in_another_spelling_of_its_place(toy, tmp_path, monkeypatch):
    """A run started with absolute folders resumes from relative spellings of the same places (`same_place`);
    another vectors file is refused, naming it."""
    quick = ["--seed", "7", "--no-bleu", "--no-test", "--no-export"]
    out = tmp_path / "run"
    run(common_args(toy, out, *quick, "--max-steps", "3"))
    monkeypatch.chdir(toy)
    relative = ["--output-dir", str(out), "--data-dir", "data", "--vectors", "./vectors.txt",
                "--config-overrides", json.dumps(TINY), "--batch-size", "16", "--max-length", "12",
                "--num-threads", "1", "--source-min-freq", "1"]
    metrics = run(relative + quick + ["--max-steps", "4", "--resume"])
    assert metrics["global_step"] == 4
    (toy / "other.txt").write_text((toy / "vectors.txt").read_text())
    with pytest.raises(MTSetupError, match="'vectors'"):
        run([a if a != "./vectors.txt" else "other.txt" for a in relative] + quick + ["--max-steps", "5", "--resume"])


def test_encoder_card_names_the_vectors_of_an_init_from_checkpoint(tmp_path):
    """A run started --init-from a cove-build-vocab checkpoint: the card names the vectors file that checkpoint was
    built from (the run's data record, else its build_info.json), so a stand-in is said to be one; without either, the
    checkpoint's folder."""
    from modeling_cove import CoveConfig

    config = CoveConfig(vocab_size=10, word_vector_dim=8, hidden_size=4)
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    (vocab / "build_info.json").write_text(json.dumps({"vectors": "data/vectors/w2v-lower-300d.txt.xz"}))
    metrics = {"settings": {"init_from": str(vocab), "vectors": None}, "epochs": []}
    card = str(encoder_export_card("mt", config, metrics, path=Path("enc")))
    assert ("- Word vectors (fixed): `data/vectors/w2v-lower-300d.txt.xz`. Stand-in word2vec vectors, NOT GloVe "
            "840B.") in card
    (vocab / "build_info.json").unlink()
    assert f"- Word vectors (fixed): `{vocab}`." in str(encoder_export_card("mt", config, metrics, path=Path("enc")))
    # a run that recorded its vectors in its data record (exported from another folder than it ran in): that file
    metrics["data"] = {"source_vectors": "data/vectors/w2v-lower-300d.txt.xz"}
    assert ("- Word vectors (fixed): `data/vectors/w2v-lower-300d.txt.xz`. Stand-in word2vec vectors, NOT GloVe "
            "840B.") in str(encoder_export_card("mt", config, metrics, path=Path("enc")))
