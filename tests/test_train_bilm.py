"""biLM pretraining (modeling_cove.training.commands.train_bilm, scripts/train_bilm.py): the CLI end to end on a tiny local text file,
exact resume after a run is cut short, and the corpus rules (training texts only, a held-out share, whole windows)."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import exit_of
from safetensors.torch import load_file
from transformers import AutoModel

from modeling_cove.build import create_cove_checkpoint
from modeling_cove.modeling_cove_bilm import CoveBiLMEncoder
from modeling_cove.training.commands import train_bilm
from modeling_cove.training.commands.train_bilm import SEED_STRIDE, WindowStore, split_heldout, token_stream
from modeling_cove.training.data.texts import corpus_texts
from modeling_cove.training.loops.accelerate_loop import epoch_batches

REPO = Path(__file__).resolve().parents[1]
WORDS = ["the", "a", "film", "is", "good", "bad", "very", "not", "plot", "actors", "and", ".", "was", "great"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """An encoder checkpoint (tokenizer + 8-d word vectors) and a 300-line text file of random sentences."""
    root = tmp_path_factory.mktemp("bilm")
    torch.manual_seed(0)
    encoder, tokenizer = create_cove_checkpoint(WORDS, torch.randn(len(WORDS) + 4, 8), hidden_size=8)
    encoder.save_pretrained(root / "init")
    tokenizer.save_pretrained(root / "init")
    rng = random.Random(0)
    lines = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(300)]
    (root / "corpus.txt").write_text("\n".join(lines) + "\n")
    return root, tokenizer


def arguments(setup, out: str, *extra) -> list:
    root, _ = setup
    return ["--init-from", str(root / "init"), "--corpus", str(root / "corpus.txt"), "--output-dir", str(root / out),
            "--seq-len", "6", "--batch-size", "8", "--hidden-size", "16", "--epochs", "2", "--dropout", "0.1",
            "--lr", "0.01", "--heldout-fraction", "0.1", "--num-threads", "1", "--log-every", "2", *extra]


def train(setup, out: str, *extra) -> subprocess.CompletedProcess:
    command = [sys.executable, str(REPO / "scripts" / "train_bilm.py"), *arguments(setup, out, *extra)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert result.returncode == 0, result.stderr[-4000:]
    return result


@pytest.fixture(scope="module")
def whole_run(setup):
    """Two epochs uninterrupted, through the CLI."""
    train(setup, "whole")
    return setup[0] / "whole"


def test_cli_end_to_end_writes_the_model_the_encoder_and_the_record(setup, whole_run):
    _, tokenizer = setup
    out = whole_run
    metrics = json.loads((out / "metrics.json").read_text())
    assert [e["epoch"] for e in metrics["epochs"]] == [1, 2]
    for record in metrics["epochs"]:
        for direction in ("forward", "backward"):
            assert 1 < record[f"heldout_{direction}_perplexity"] < len(WORDS) + 4
    first, last = metrics["epochs"][0], metrics["epochs"][-1]
    assert last["train_forward_perplexity"] < first["train_forward_perplexity"]  # it learns something
    assert metrics["train_tokens_per_second"] > 0 and metrics["data"]["heldout_texts"] == 30
    assert metrics["command"].startswith("python scripts/train_bilm.py") and metrics["commit"]
    assert (out / "curves.png").stat().st_size > 0 and (out / "encoder" / "README.md").is_file()
    assert json.loads((out / "encoder" / "bilm_metrics.json").read_text())["epochs"] == metrics["epochs"]
    encoder = AutoModel.from_pretrained(out / "encoder")
    assert isinstance(encoder.encoder, CoveBiLMEncoder) and encoder.config.freeze_encoder
    lm = load_file(out / "lm" / "model.safetensors")
    batch = tokenizer(["the film was great", "bad"], padding=True, return_tensors="pt")
    assert encoder(**batch).last_hidden_state.shape == (2, 4, 32)
    for name, tensor in encoder.state_dict().items():
        torch.testing.assert_close(tensor, lm[f"cove.{name}"], rtol=0, atol=0)
    # the last held-out perplexities are the saved model's, in eval mode, each direction its own, over the held-out
    # texts' windows rebuilt here (split with the run's seed, closed by </s>, cut into windows of seq_len + 1)
    from modeling_cove import CoveForBidirectionalLM

    model = CoveForBidirectionalLM.from_pretrained(out / "lm").eval()
    _, heldout = split_heldout(corpus_texts(str(setup[0] / "corpus.txt")), 0.1, train_bilm.BiLMSettings.seed)
    windows = WindowStore(token_stream(heldout, tokenizer), 6)
    with torch.no_grad():
        output = model(input_ids=windows.batch(range(len(windows))), labels=windows.batch(range(len(windows))))
    for direction in ("forward", "backward"):
        nll = getattr(output, f"{direction}_nll_sum").double() / getattr(output, f"{direction}_num_tokens")
        assert last[f"heldout_{direction}_perplexity"] == pytest.approx(float(nll.exp()), rel=1e-6, abs=0)
    assert last["heldout_forward_perplexity"] != last["heldout_backward_perplexity"]


@pytest.mark.slow
def test_resume_after_a_cut_continues_exactly(setup, whole_run, capsys):
    """A run killed after its checkpoint at step 3 (the later one deleted, as if never written) and resumed ends
    with the weights and records of the uninterrupted run (data order, optimizer, schedule, dropout RNG)."""
    root, _ = setup
    train(setup, "cut", "--max-steps", "5", "--save-steps", "3", "--keep-checkpoints", "5")
    checkpoints = sorted(p.name for p in (root / "cut" / "checkpoints").iterdir())
    assert checkpoints == ["step-00000003", "step-00000005"]
    subprocess.run(["rm", "-rf", str(root / "cut" / "checkpoints" / "step-00000005")], check=True)
    train(setup, "cut", "--resume")
    whole, resumed = load_file(root / "whole" / "lm" / "model.safetensors"), load_file(
        root / "cut" / "lm" / "model.safetensors")
    assert whole.keys() == resumed.keys()
    for name in whole:
        torch.testing.assert_close(resumed[name], whole[name], rtol=0, atol=0, msg=name)
    records = [json.loads((root / run / "metrics.json").read_text())["epochs"] for run in ("whole", "cut")]
    for a, b in zip(*records):
        assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}
    # the command's main, in this process: it stops before any work
    status, err = exit_of(train_bilm.main, arguments(setup, "cut", "--resume", "--seq-len", "7"), capsys)
    assert status == 2 and "different data/batching/model settings" in err
    started = json.loads((root / "cut" / "run_settings.json").read_text())
    assert started["processes"] == 1  # another number of processes holds other random states: refused too
    (root / "cut" / "run_settings.json").write_text(json.dumps({**started, "processes": 2}))
    status, err = exit_of(train_bilm.main, arguments(setup, "cut", "--resume"), capsys)
    assert status == 2 and "'processes': (2, 1)" in err


def test_corpus_windows_and_heldout(setup, tmp_path):
    root, tokenizer = setup
    texts = corpus_texts(str(root / "corpus.txt"))
    assert len(texts) == 300
    train_texts, heldout = split_heldout(texts, 0.1, seed=1)
    assert len(heldout) == 30 and not set(map(id, heldout)) & set(map(id, train_texts))
    assert split_heldout(texts, 0.1, seed=1) == (train_texts, heldout)
    stream = token_stream(["the film", "bad"], tokenizer)
    eos = tokenizer.eos_token_id
    assert stream.tolist() == tokenizer("the film", add_special_tokens=False)["input_ids"] + [eos] + \
        tokenizer("bad", add_special_tokens=False)["input_ids"] + [eos]
    store = WindowStore(torch.arange(11), seq_len=3)
    assert len(store) == 3 and store.batch([0, 2]).tolist() == [[0, 1, 2, 3], [6, 7, 8, 9]]  # overlap by one
    batches = epoch_batches(10, 3, seed=0, epoch=1, seed_stride=SEED_STRIDE)  # the biLM loop's windows
    assert len(batches) == 3 and all(len(b) == 3 for b in batches)
    assert batches == epoch_batches(10, 3, 0, 1, SEED_STRIDE) != epoch_batches(10, 3, 0, 2, SEED_STRIDE)
    with pytest.raises(ValueError, match="neither a local corpus"):
        corpus_texts(str(tmp_path / "missing.txt"))
    with pytest.raises(ValueError, match="give data_dir"):
        corpus_texts("imdb")


def test_local_corpora_are_training_splits_only(data_dir):
    """Every local corpus reads the rows the classifiers train on, never a validation or test row."""
    from modeling_cove.data import load_classification

    trec = load_classification("trec6", str(data_dir))
    texts = corpus_texts("trec", str(data_dir))
    assert texts == list(trec["train"]["text"])
    assert not set(texts) & (set(trec["validation"]["text"]) | set(trec["test"]["text"])) - set(trec["train"]["text"])
    snli = load_classification("snli", str(data_dir))
    pairs = set(corpus_texts("snli", str(data_dir)))
    assert pairs == set(snli["train"]["text"]) | set(snli["train"]["text_pair"])


def test_init_from_that_is_no_checkpoint_is_named(tmp_path, capsys):
    """A wrong --init-from stops with one line naming it (exit 2), before anything is written."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("a small text .\n")
    status, err = exit_of(train_bilm.main, ["--init-from", str(tmp_path / "missing"), "--corpus", str(corpus),
                                            "--output-dir", str(tmp_path / "out")], capsys)
    assert status == 2
    assert f"error: init_from '{tmp_path / 'missing'}' is not a loadable CoVe checkpoint" in err
    assert "Traceback" not in err and not (tmp_path / "out" / "metrics.json").exists()


def test_record_names_the_commit_the_run_started_from(setup, monkeypatch):
    """metrics.json (and the exported encoder's record) name the commit read when the run began, not the checkout's
    HEAD when it ended: a pretraining of an hour may outlive several commits."""
    from modeling_cove.training.commands import train_bilm as bilm

    root, _ = setup
    heads = iter(["commit-at-start"])
    monkeypatch.setattr(bilm, "git_commit", lambda *a, **k: next(heads, "commit-at-the-end"))
    settings = bilm.BiLMSettings(init_from=str(root / "init"), output_dir=str(root / "commit"),
                                 corpus=[str(root / "corpus.txt")], seq_len=6, batch_size=8, hidden_size=16,
                                 heldout_fraction=0.1, max_steps=2, log_every=1)
    metrics = bilm.train_bilm(settings, argv=["scripts/train_bilm.py"], cpu=True)
    assert metrics["commit"] == "commit-at-start"
    assert json.loads((root / "commit" / "metrics.json").read_text())["commit"] == "commit-at-start"
    assert json.loads((root / "commit" / "encoder" / "bilm_metrics.json").read_text())["commit"] == "commit-at-start"
