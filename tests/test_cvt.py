"""Cross-View Training (modeling_cove/training/loops/cvt.py) and the tagger CLI (modeling_cove/training/commands/train_tagger.py): the
views, the unlabelled loss against a hand computation, no gradient to a primary module from an unlabelled batch, a
teacher pass without dropout, multi-task, the exported tagger without auxiliary modules, and the CLI end to end
(exact resume, two processes)."""

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from conftest import assert_reproduces, require_data, tiny_tagging_setup
from modeling_cove import CoveConfig, CoveForTokenClassification
from modeling_cove.tokenization_cove import build_cove_tokenizer
from modeling_cove.training.commands import train_tagger as tg
from modeling_cove.training.loops.cvt import VIEWS, TaggerTraining, restricted_views

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("single_thread")


def tiny_tagger(seed=0, dropout=0.5, num_labels=3, **overrides) -> CoveForTokenClassification:
    torch.manual_seed(seed)
    config = CoveConfig(vocab_size=30, word_vector_dim=6, hidden_size=6, tagger_hidden_size=5, tagger_module_dim=4,
                        num_labels=num_labels, tagger_input="vectors", tagger_dropout=dropout, **overrides)
    return CoveForTokenClassification(config)


def batch(seed=1):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 30, (3, 6), generator=generator)
    mask = torch.tensor([[1] * 6, [1] * 4 + [0] * 2, [1] * 1 + [0] * 5])
    return ids * mask, mask


def test_restricted_views_shift_the_directions_and_mask_the_ends():
    first = torch.arange(2 * 4 * 4, dtype=torch.float).view(2, 4, 4)  # H = 2: [h→ (2); h← (2)]
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    views = restricted_views(first, mask)
    assert set(views) == set(VIEWS)
    assert torch.equal(views["fwd"][0], first[..., :2]) and torch.equal(views["bwd"][0], first[..., 2:])
    assert torch.equal(views["future"][0][:, 1:], first[:, :-1, :2])  # position i holds h→_{i−1}
    assert torch.equal(views["past"][0][:, :-1], first[:, 1:, 2:])  # position i holds h←_{i+1}
    assert views["future"][1].tolist() == [[False, True, True, True], [False, True, True, False]]
    assert views["past"][1].tolist() == [[True, True, True, False], [True, True, False, False]]
    assert torch.equal(views["fwd"][1], mask)


def test_unlabelled_loss_equals_a_hand_computation():
    """Without dropout the student's layer 1 is the teacher's: Σ_views mean over valid i of Σ_y p log(p / q)."""
    model = tiny_tagger(dropout=0.0)
    training = TaggerTraining(model, {"chunk": ["B-NP", "I-NP", "O"]}, cvt=True).train()
    ids, mask = batch()
    loss = training("unlabelled", ids, mask)
    with torch.no_grad():
        features = model.tagger_inputs(ids, mask)
        layers = model.encode(features, mask.sum(1)).layers
        p = torch.softmax(model.classifier(torch.cat(layers, dim=-1)), dim=-1)
        hidden = layers[0].shape[-1] // 2
        fwd, bwd = layers[0][..., :hidden], layers[0][..., hidden:]
        expected = 0.0
        for view in VIEWS:
            module = training.auxiliary["chunk"].views[view]
            terms = []
            for b in range(ids.shape[0]):
                n = int(mask[b].sum())
                for i in range(n):
                    state = {"fwd": fwd[b, i], "bwd": bwd[b, i], "future": fwd[b, i - 1] if i > 0 else None,
                             "past": bwd[b, i + 1] if i + 1 < n else None}[view]
                    if state is None:
                        continue
                    q = torch.softmax(module(state), dim=-1)
                    terms.append(float((p[b, i] * (p[b, i].log() - q.log())).sum()))
            expected += sum(terms) / len(terms)
    assert float(loss.detach()) == pytest.approx(expected, abs=1e-6, rel=0)  # measured 1.6e-7 with MKL's AVX2 kernels


def test_soft_target_loss_with_no_valid_position_is_zero_with_a_gradient_path():
    """A batch of one-token rows has no "future" or "past" position: the view's loss is 0 and still reaches the
    module (zero gradients, not missing ones)."""
    from modeling_cove.modeling_cove_tagger import CoveTaggerPredictionModule
    from modeling_cove.training.loops.cvt import soft_target_loss

    module = CoveTaggerPredictionModule(3, 4, 2)
    states = torch.randn(2, 1, 3, requires_grad=True)
    loss = soft_target_loss(module, states, torch.full((2, 1, 2), 0.5), torch.zeros(2, 1, dtype=torch.bool))
    loss.backward()
    assert float(loss) == 0.0
    assert all(p.grad is not None and not p.grad.any() for p in module.parameters())


@pytest.mark.parametrize("framed", [False, True])
def test_view_counts_are_the_positions_the_views_score(framed):
    """`view_counts` (what a process of several divides by) counts the positions `restricted_views` makes valid for
    the student the model really encodes; a view's sum over that count is its mean."""
    from modeling_cove.modeling_cove_tagger import CoveTaggerPredictionModule
    from modeling_cove.training.loops.cvt import soft_target_loss, token_masks, view_counts

    lengths = [3, 1, 2]
    model = tiny_tagger(dropout=0.0, tagger_boundary_tokens=framed).eval()
    ids = torch.tensor([[5, 6, 7], [8, 0, 0], [9, 10, 0]])
    student = model.encode(model.tagger_inputs(ids, ids > 0), torch.tensor(lengths))
    mask, present = token_masks(torch.tensor(lengths), student.mask.shape[1], framed)
    assert torch.equal(mask, student.mask.cpu())
    views = restricted_views(student.layers[0], mask, present)
    counts = view_counts(lengths, framed)
    assert counts == {**{view: int(valid.sum()) for view, (_, valid) in views.items()}, "full": 6}
    assert (counts["future"], counts["past"]) == ((6, 6) if framed else (3, 3))  # n - 1 a sentence without START/END
    states, valid = views["past"][0].detach(), views["past"][1]
    module = CoveTaggerPredictionModule(states.shape[-1], 4, 3).requires_grad_(False)
    targets = torch.softmax(torch.randn(3, mask.shape[1], 3), -1)
    assert float(soft_target_loss(module, states, targets, valid, count=counts["past"])) == pytest.approx(
        float(soft_target_loss(module, states, targets, valid)), rel=1e-6)


def test_an_unlabelled_batch_gives_the_primary_module_no_gradient():
    model = tiny_tagger(dropout=0.5)
    training = TaggerTraining(model, {"chunk": ["B-NP", "I-NP", "O"], "pos": ["N", "V"]}, cvt=True).train()
    training("unlabelled", *batch()).backward()
    primaries = list(model.classifier.parameters()) + list(training.primary.parameters())
    assert all(p.grad is None or not p.grad.any() for p in primaries)
    assert all(p.grad is None for p in model.encoder[1].parameters())  # layer 2: not on the student's path
    assert all(p.grad is not None and p.grad.any() for p in model.encoder[0].parameters())
    for task in ("chunk", "pos"):  # every task's auxiliary modules learn from one unlabelled batch
        assert all(p.grad is not None and p.grad.any() for p in training.auxiliary[task].parameters())


def test_a_labelled_batch_trains_its_task_only():
    model = tiny_tagger()
    training = TaggerTraining(model, {"chunk": ["B-NP", "I-NP", "O"], "pos": ["N", "V"]}, cvt=True).train()
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids % 2, torch.full_like(ids, -100))
    training("labelled", ids, mask, task="pos", labels=labels).backward()
    assert all(p.grad is None for p in model.classifier.parameters())
    assert all(p.grad is None for p in training.auxiliary.parameters())
    assert all(p.grad is not None and p.grad.any() for p in training.primary["pos"].parameters())
    assert all(p.grad is not None for p in model.encoder.parameters())


def test_a_labelled_batch_with_another_tasks_label_ids_is_an_error_naming_the_row_and_task():
    training = TaggerTraining(tiny_tagger(), {"chunk": ["B-NP", "I-NP", "O"], "pos": ["N", "V"]}, cvt=True).train()
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids % 2, torch.full_like(ids, -100))
    labels[1, 0] = 2  # a chunk label id: "pos" has 2 labels
    with pytest.raises(ValueError, match=r"row\(s\) \[1\] have labels outside \[0, 2\) .*the labels of task 'pos'"):
        training("labelled", ids, mask, task="pos", labels=labels)
    labels[1, 0] = 1
    training("labelled", ids, mask, task="pos", labels=labels)  # in range: no error
    with pytest.raises(ValueError, match="labels must have the shape of input_ids"):
        training("labelled", ids, mask, task="chunk", labels=labels[:, :2])


def test_the_teacher_pass_runs_without_dropout_and_restores_training_mode():
    model = tiny_tagger(dropout=0.5)
    training = TaggerTraining(model, {"chunk": ["B-NP", "I-NP", "O"]}, cvt=True).train()
    ids, mask = batch()
    first, second = training.soft_targets(ids, mask)["chunk"], training.soft_targets(ids, mask)["chunk"]
    assert training.training and model.training and model.dropout.training
    model.eval()
    expected = torch.softmax(model(input_ids=ids, attention_mask=mask).logits, dim=-1)
    assert torch.equal(first, second)
    assert torch.allclose(first, expected, rtol=0, atol=2e-7)


def test_the_labelled_loss_is_the_models_own():
    model = tiny_tagger(dropout=0.0)
    training = TaggerTraining(model, {"chunk": ["B-NP", "I-NP", "O"]}, cvt=False)
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))
    assert float(training("labelled", ids, mask, task="chunk", labels=labels)) == pytest.approx(
        float(model(input_ids=ids, attention_mask=mask, labels=labels).loss), abs=0, rel=0)
    with pytest.raises(ValueError, match="unlabelled steps need cvt=True"):
        training("unlabelled", ids, mask)


def test_the_exported_tagger_of_each_task_has_no_auxiliary_modules(tmp_path):
    model = tiny_tagger(dropout=0.0)
    training = TaggerTraining(model, {"chunk": ["B-NP", "I-NP", "O"], "pos": ["N", "V"]}, cvt=True)
    ids, mask = batch()
    pos = training.export_task_model("pos", ["N", "V"]).eval()
    pos.save_pretrained(tmp_path / "pos")
    loaded = CoveForTokenClassification.from_pretrained(tmp_path / "pos").eval()
    assert loaded.config.id2label == {0: "N", 1: "V"}
    assert not any("auxiliary" in k or "views" in k for k in load_file(tmp_path / "pos" / "model.safetensors"))
    training.eval()
    with torch.no_grad():
        features = model.tagger_inputs(ids, mask)
        expected = training.primary["pos"](torch.cat(model.encode(features, mask.sum(1)).layers, dim=-1))
        assert_reproduces(loaded(input_ids=ids, attention_mask=mask).logits, expected, "reloaded pos tagger")


def test_cvt_refuses_contextual_inputs_and_train_rest_needs_a_fraction():
    with pytest.raises(ValueError, match="restricted views"):
        tg.TaggerSettings(task=["conll2000"], encoder="e", output_dir="o", input="vectors+cove", cvt=True)
    with pytest.raises(ValueError, match="train-rest needs --train-fraction"):
        tg.TaggerSettings(task=["conll2000"], encoder="e", output_dir="o", cvt=True, unlabeled=["train-rest"])


def test_label_set_adds_the_inside_tag_of_every_chunk_type():
    from datasets import Dataset

    train = Dataset.from_dict({"words": [["a", "b"]], "tags": [["B-LST", "O"]], "text": ["a b"]})
    assert tg.label_set(train) == ["B-LST", "I-LST", "O"]
    validation = Dataset.from_dict({"words": [["c"]], "tags": [["B-UCP"]], "text": ["c"]})  # a rare tag
    assert tg.label_set(train, validation) == ["B-LST", "B-UCP", "I-LST", "I-UCP", "O"]


def test_a_sentence_over_the_maximum_length_is_an_error_naming_its_row():
    from datasets import Dataset

    tokenizer = build_cove_tokenizer(["a", "b"])
    split = Dataset.from_dict({"words": [["a"], ["a", "b", "a"]], "tags": [["O"], ["O", "O", "O"]],
                               "text": ["a", "a b a"]})
    with pytest.raises(ValueError, match="conll2000 train row 1: 3 tokens, more than"):
        tg.encode_split(split, tokenizer, {"O": 0}, "conll2000 train", max_length=2)


# ---------------------------------------------------------------------------------------------------------------
# the CLI


@pytest.fixture(scope="module")
def tiny_setup(tmp_path_factory):
    return tiny_tagging_setup(tmp_path_factory.mktemp("tagger"), "conll2000", 200)


def settings(setup, output_dir, **overrides):
    data_dir, encoder, preset = setup
    values = dict(task=["conll2000"], encoder=str(encoder), data_dir=str(data_dir), preset=str(preset),
                  limit_sentences=48, output_dir=str(output_dir), cvt=True, unlabeled=["train-rest"],
                  train_fraction=0.5)
    return tg.TaggerSettings(**{**values, **overrides})


def test_cli_run_writes_the_tagger_metrics_and_curves(tiny_setup, tmp_path):
    from transformers import AutoModelForTokenClassification

    metrics = tg.train_tagger(settings(tiny_setup, tmp_path / "run"), cpu=True)
    out = tmp_path / "run"
    assert {"best", "metrics.json", "curves.png", "best_state.safetensors"} <= {p.name for p in out.iterdir()}
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["results"]["conll2000"]["test"]["f1"] == metrics["results"]["conll2000"]["test"]["f1"]
    assert saved["global_step"] == 2 * 2 * 3  # 2 epochs x (3 labelled batches of 8 of 24 sentences + 3 unlabelled)
    assert saved["tokens_per_second_by_phase"]["unlabelled"] > 0 and saved["epochs"][0]["unlabelled_loss"] > 0
    assert saved["tasks"]["conll2000"]["test_sentences"] == 48
    encoder = Path(tiny_setup[1])  # the weights it read, as cove-train-classifier records them: their sha256
    assert saved["encoder_weights"] == hashlib.sha256((encoder / "model.safetensors").read_bytes()).hexdigest()
    tagger = AutoModelForTokenClassification.from_pretrained(out / "best")
    assert type(tagger).__name__ == "CoveForTokenClassification"
    assert all("I-" + tag[2:] in tagger.config.label2id for tag in tagger.config.label2id if tag.startswith("B-"))
    assert not any("auxiliary" in k for k in load_file(out / "best" / "model.safetensors"))
    record = json.loads((out / "best" / "eval_results.json").read_text())
    assert record["task"]["type"] == "token-classification"
    from modeling_cove.training.publishing.cards import build_card  # the card writer reads what the run wrote

    text = str(build_card(record, json.loads((out / "best" / "config.json").read_text()), "org/cove-chunker"))
    assert "CoveForTokenClassification" in text and "trust_remote_code=True" in text and "B-NP" in text


def test_cli_resumes_exactly(tiny_setup, tmp_path):
    """A run stopped at step 5 and resumed, with its data folder and encoder spelled otherwise (relative instead of
    absolute: the same places), ends as the run straight through; over other encoder weights, other hyperparameters
    or another number of processes it is refused, and a finished run whose best weights file is gone is an error."""
    straight = tg.train_tagger(settings(tiny_setup, tmp_path / "a", no_save_model=True), cpu=True)
    tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_save_model=True, max_steps=5, save_steps=1), cpu=True)
    data_dir, encoder, _ = tiny_setup
    elsewhere = dict(data_dir=os.path.relpath(data_dir), encoder=os.path.relpath(encoder))
    resumed = tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_save_model=True, resume=True, **elsewhere),
                              cpu=True)
    run_settings = json.loads((tmp_path / "b" / "run_settings.json").read_text())
    assert run_settings["encoder_weights"] == resumed["encoder_weights"] and len(resumed["encoder_weights"]) == 64
    (tmp_path / "b" / "run_settings.json").write_text(json.dumps({**run_settings, "encoder_weights": "0" * 64}))
    with pytest.raises(ValueError, match="encoder_weights"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_save_model=True, resume=True), cpu=True)
    # a run whose preset resolved other hyperparameters when it began (its file edited since): another run
    assert run_settings["resolved_hyperparameters"]["dropout"] == 0.5
    edited = dict(run_settings, resolved_hyperparameters={**run_settings["resolved_hyperparameters"], "dropout": 0.3})
    (tmp_path / "b" / "run_settings.json").write_text(json.dumps(edited))
    with pytest.raises(ValueError, match="resolved_hyperparameters"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_save_model=True, resume=True), cpu=True)
    # a run begun by another number of processes: each held its own random states and share of every batch
    assert run_settings["processes"] == 1
    (tmp_path / "b" / "run_settings.json").write_text(json.dumps({**run_settings, "processes": 2}))
    with pytest.raises(ValueError, match=r"'processes': \(2, 1\)"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_save_model=True, resume=True), cpu=True)
    (tmp_path / "b" / "run_settings.json").write_text(json.dumps(run_settings))
    assert resumed["global_step"] == straight["global_step"]
    assert [h["train_loss"] for h in resumed["epochs"]] == pytest.approx([h["train_loss"] for h in straight["epochs"]],
                                                                        abs=0, rel=0)
    a, b = (load_file(tmp_path / name / "best_state.safetensors") for name in ("a", "b"))
    assert all(torch.equal(a[k], b[k]) for k in a)
    (tmp_path / "b" / "best_state.safetensors").unlink()  # a finished run's folder copied without it
    (tmp_path / "b" / "metrics.json").unlink()
    with pytest.raises(RuntimeError, match=r"best_state.safetensors \(the best epoch's weights\) is missing"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_save_model=True, resume=True), cpu=True)


@pytest.mark.slow
def test_two_processes_train_like_one(tiny_setup, tmp_path, alone_with_the_cores):
    """`accelerate launch` with 2 CPU processes (DDP over gloo): every step both processes run the same phase (a
    rank in another phase would hang or fail DDP's reduction), the run ends with the one-process step count and,
    dropout off, with one process's losses and scores: each process divides its share's sums by the global batch's
    counts (its shares hold different numbers of tokens; without boundary states the future and past views score
    one position fewer a sentence, and the `full` view every token)."""
    data_dir, encoder, preset = tiny_setup
    hyperparameters = {"dropout": 0.0, "boundary_tokens": False, "full_module": True}
    flags = ["--task", "conll2000", "--encoder", str(encoder), "--data-dir", str(data_dir), "--preset", str(preset),
             "--limit-sentences", "48", "--cvt", "--unlabeled", "train-rest", "--train-fraction", "0.5",
             "--output-dir", str(tmp_path / "two"), "--no-save-model", "--hyperparameters",
             json.dumps(hyperparameters)]
    launcher = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
                str(REPO / "configuration" / "accelerate" / "cpu_ddp.yaml"), "--num_processes", "2",
                "--main_process_port", "0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    two = subprocess.run([*launcher, "-m", "modeling_cove.training.commands.train_tagger", *flags], capture_output=True, text=True,
                         timeout=300, env=env, cwd=REPO)
    assert two.returncode == 0, two.stderr[-3000:]
    saved = json.loads((tmp_path / "two" / "metrics.json").read_text())
    assert saved["machine"]["processes"] == 2 and saved["global_step"] == 12
    assert all(h["unlabelled_loss"] > 0 for h in saved["epochs"])
    one = tg.train_tagger(settings(tiny_setup, tmp_path / "one", no_save_model=True,
                                   hyperparameters=json.dumps(hyperparameters)), cpu=True)
    # measured: equal within 1e-7; each process's own token mean (before) was 9e-5 off in the second epoch
    for key in ("train_loss", "unlabelled_loss", "validation_main"):
        assert [h[key] for h in saved["epochs"]] == pytest.approx([h[key] for h in one["epochs"]], rel=1e-6), key
    assert [row[2] for row in saved["loss_log"]] == pytest.approx([row[2] for row in one["loss_log"]], rel=1e-6)


# ---------------------------------------------------------------------------------------------------------------
# the casing feature (config.tagger_case_dim)


def test_casing_classes_of_tokens_as_written():
    from modeling_cove.modeling_cove_tagger import CASE_CLASSES, case_ids_from_offsets, casing_class

    expected = {"paris": "lower", "Paris": "title", "A": "title", "NASA": "upper", "iPhone": "mixed",
                "McDonald": "mixed", "1999": "digits", "3rd": "lower", ",": "other", "": "<pad>"}
    assert {text: CASE_CLASSES[casing_class(text)] for text in expected} == expected
    assert case_ids_from_offsets("Hi NASA", [(0, 2), (3, 7), (0, 0)]) == [2, 3, 0]


def test_training_data_carries_each_token_case_as_written():
    """`encode_split` gives each token the casing class of its own characters in the word as written (the tokenizer
    lower-cases; the feature must not): a word the tokenizer splits gets one class per piece."""
    from datasets import Dataset

    from modeling_cove.modeling_cove_tagger import CASE_CLASSES
    from modeling_cove.tokenization_cove import build_cove_tokenizer

    words = [["Paris", "NASA", "iPhone", "1999", ",", "don't"]]
    split = Dataset.from_dict({"words": words, "tags": [["O"] * 6], "text": [" ".join(words[0])]})
    tokenizer = build_cove_tokenizer(["paris", "nasa", "iphone", "1999", ",", "do", "n't"])
    encoded = tg.encode_split(split, tokenizer, None, "toy", max_length=20)
    pieces = [tokenizer.convert_ids_to_tokens(i) for i in encoded.ids[0]]
    assert [CASE_CLASSES[c] for c in encoded.case_ids[0]] == ["title", "upper", "mixed", "digits", "other", "lower",
                                                              "lower"], pieces


def test_a_tagger_with_a_casing_feature_needs_case_ids_and_reads_them():
    model = tiny_tagger(dropout=0.0, tagger_case_dim=3).eval()
    ids, mask = batch()
    with pytest.raises(ValueError, match="pass case_ids of shape"):
        model(input_ids=ids, attention_mask=mask)
    with pytest.raises(ValueError, match=r"case_ids outside \[0, 7\)"):
        model(input_ids=ids, attention_mask=mask, case_ids=torch.full_like(ids, 9))
    lower, upper = torch.ones_like(ids) * mask, torch.full_like(ids, 3) * mask
    a = model(input_ids=ids, attention_mask=mask, case_ids=lower).logits
    b = model(input_ids=ids, attention_mask=mask, case_ids=upper).logits
    assert not torch.allclose(a, b)  # the casing changes the prediction
    alone = model(input_ids=ids[1:2, :4], attention_mask=mask[1:2, :4], case_ids=upper[1:2, :4]).logits
    assert torch.allclose(alone, b[1:2, :4], rtol=0, atol=2e-7)


def test_the_pipeline_gives_a_casing_tagger_the_case_of_the_raw_text(tmp_path):
    from transformers import pipeline

    from modeling_cove.modeling_cove_tagger import case_ids_from_offsets
    from modeling_cove.pipeline_cove import CoveTokenClassificationPipeline

    tokenizer = build_cove_tokenizer(["paris", "is", "nice", ",", "nasa", "."])
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=len(tokenizer), word_vector_dim=6, hidden_size=6, tagger_hidden_size=5,
                        tagger_module_dim=4, num_labels=3, tagger_input="vectors", tagger_case_dim=3,
                        id2label={0: "O", 1: "B-LOC", 2: "I-LOC"}, label2id={"O": 0, "B-LOC": 1, "I-LOC": 2})
    model = CoveForTokenClassification(config).eval()
    tagger = pipeline("token-classification", model=model, tokenizer=tokenizer,
                      pipeline_class=CoveTokenClassificationPipeline)
    text = "Paris is nice , NASA ."
    encoding = tokenizer(text, return_offsets_mapping=True)
    cases = torch.tensor([case_ids_from_offsets(text, encoding["offset_mapping"])])
    logits = model(input_ids=torch.tensor([encoding["input_ids"]]), case_ids=cases).logits[0]
    scores = torch.softmax(logits, dim=-1)
    out = tagger(text, aggregation_strategy="none")
    for entity in out:
        assert entity["score"] == pytest.approx(float(scores[entity["index"]].max()), abs=0, rel=0)
    assert cases.tolist() == [[2, 1, 1, 6, 3, 6]]
    words = tagger(["Paris", "is", "nice"], is_split_into_words=True)  # one pre-split sentence: [[entities]]
    assert [entity["word"] for entity in words[0]] == ["Paris", "is", "nice"]


def test_cli_trains_with_the_casing_feature(tiny_setup, tmp_path):
    from transformers import AutoModelForTokenClassification

    metrics = tg.train_tagger(settings(tiny_setup, tmp_path / "case", case_dim=4, epochs=1), cpu=True)
    assert all(math.isfinite(h["train_loss"]) and math.isfinite(h["unlabelled_loss"]) for h in metrics["epochs"])
    tagger = AutoModelForTokenClassification.from_pretrained(tmp_path / "case" / "best")
    assert tagger.config.tagger_case_dim == 4 and tagger.case_embeddings.weight.shape == (7, 4)
    assert torch.isfinite(tagger.case_embeddings.weight).all() and not tagger.case_embeddings.weight[0].any()


def test_a_tagger_built_on_an_encoder_checkpoint_initialises_every_new_weight(tiny_setup):
    """from_pretrained(encoder) leaves the weights it does not load to `_init_weights`: none may stay uninitialised
    (the casing embedding once did, and trained to NaN)."""
    model = CoveForTokenClassification.from_pretrained(tiny_setup[1], num_labels=3, tagger_input="vectors",
                                                       tagger_case_dim=4, tagger_hidden_size=5, tagger_module_dim=6)
    for name, param in model.named_parameters():
        assert torch.isfinite(param).all() and param.abs().max() < 10, name
    assert not model.case_embeddings.weight[0].any()


def test_cli_multi_task_run_exports_a_tagger_per_task(tiny_setup, tmp_path):
    """--task conll2000 ewt_upos --cvt: one encoder, a primary module per task, results and best/<task>/ for each."""
    from transformers import AutoModelForTokenClassification

    data_dir = require_data("ud_english_ewt").parent
    metrics = tg.train_tagger(settings(tiny_setup, tmp_path / "multi", task=["conll2000", "ewt_upos"],
                                       data_dir=str(data_dir), epochs=1, train_fraction=None, unlabeled=["sst"],
                                       limit_sentences=24), cpu=True)
    assert set(metrics["results"]) == {"conll2000", "ewt_upos"}
    assert 0 <= metrics["results"]["ewt_upos"]["test"]["accuracy"] <= 1
    assert metrics["global_step"] == 2 * (3 + 3)  # 3 labelled batches of 8 per task, each with an unlabelled one
    for task, kind in (("conll2000", "B-NP"), ("ewt_upos", "NOUN")):
        tagger = AutoModelForTokenClassification.from_pretrained(tmp_path / "multi" / "best" / task)
        assert kind in tagger.config.label2id
    # the saved tokenizer's windows fit the tagger (what the pipeline cuts a long text into, given `stride`)
    from transformers import AutoTokenizer, pipeline

    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "multi" / "best" / "ewt_upos")
    assert tokenizer.model_max_length == tagger.config.tagger_max_length == 512
    tagger.config.tagger_max_length = tokenizer.model_max_length = 12  # a short limit, as a tagger saved with it
    text = "the dog runs in the park . " * 5  # 35 tokens: windows of 12 overlapping by 4
    tagged = pipeline("token-classification", model=tagger, tokenizer=tokenizer, stride=4,
                      aggregation_strategy="simple", ignore_labels=[])(text)
    assert tagged and all(text[item["start"]:item["end"]] == item["word"] for item in tagged)
    assert max(item["end"] for item in tagged) > len(" ".join(text.split()[:12]))  # past the first window


def test_a_datasets_id_task_reads_the_hub_layout(monkeypatch):
    """--task hf:<id>[:<config>]@<tag column>, as users online name `datasets` ids (e.g. eriktks/conll2003): tested
    offline on an in-memory DatasetDict laid out like the Hub's (ClassLabel tags)."""
    import datasets

    features = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                                  "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-PER", "I-PER"]))})
    split = datasets.Dataset.from_dict({"tokens": [["John", "Smith", "runs"]], "ner_tags": [[1, 2, 0]]}, features)
    calls = []

    def load_dataset(name, config=None):
        calls.append((name, config))
        return datasets.DatasetDict({"train": split, "validation": split, "test": split})

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    splits, kind = tg.load_task("hf:eriktks/conll2003@ner_tags", data_dir=None)
    assert calls == [("eriktks/conll2003", None)] and kind == "f1"
    assert splits["test"][0]["words"] == ["John", "Smith", "runs"] and splits["test"][0]["tags"] == ["B-PER", "I-PER",
                                                                                                      "O"]
    with pytest.raises(ValueError, match="name the tag column"):
        tg.load_task("hf:eriktks/conll2003", data_dir=None)
    # the metric follows the tags, not the column's name: per-token accuracy for tags without B-/I- prefixes
    upos = datasets.Features({"tokens": datasets.Sequence(datasets.Value("string")),
                              "tags": datasets.Sequence(datasets.ClassLabel(names=["DET", "NOUN", "VERB"]))})
    split = datasets.Dataset.from_dict({"tokens": [["the", "dog", "runs"]], "tags": [[0, 1, 2]]}, upos)
    assert tg.load_task("hf:some/treebank@tags", data_dir=None)[1] == "accuracy"


def test_an_encoder_that_does_not_load_is_one_clear_error(tmp_path):
    with pytest.raises(ValueError, match="--encoder .* is not a loadable CoVe checkpoint"):
        tg.load_tokenizer(str(tmp_path / "missing"))


def test_a_seed_gives_the_other_tasks_primary_modules_the_same_weights_with_or_without_cvt():
    tasks = {"chunk": ["B-NP", "I-NP", "O"], "pos": ["N", "V"]}
    weights = []
    for cvt in (False, True):
        torch.manual_seed(3)
        weights.append(TaggerTraining(tiny_tagger(), tasks, cvt=cvt).primary.state_dict())
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
