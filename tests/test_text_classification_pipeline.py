"""CoveForSequenceClassification as transformers users run it end to end: `pipeline("text-classification")` (single
texts, pairs, batches, regression and multi-label heads, empty texts, texts beyond `bcn_max_length`, pair models
without a second text) and a `Trainer` step on single texts and pairs (every key the tokenizer and the collator
pass is accepted). Tiny checkpoints built in a temporary folder."""

import pytest
import torch

import modeling_cove  # noqa: F401  (registers the Auto classes)
from modeling_cove import CoveConfig, CoveForSequenceClassification
from modeling_cove.tokenization_cove import build_cove_tokenizer

pytestmark = pytest.mark.usefixtures("single_thread")

WORDS = ["the", "cat", "sat", "on", "mat", ".", "a", "man", "plays", "someone", "dog", "ran", "far", "away"]
LABELS = ["neg", "neutral", "pos"]


def save_classifier(path, seed=0, **overrides):
    """A tiny BCN with wide weights and its tokenizer (model_max_length 16) saved in `path`; returns the path."""
    tokenizer = build_cove_tokenizer(WORDS, model_max_length=16)
    values = dict(
        vocab_size=len(tokenizer), word_vector_dim=6, hidden_size=6, bcn_feedforward_dim=5, bcn_hidden_size=4,
        bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, num_labels=3,
        id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)},
    )
    values.update(overrides)
    torch.manual_seed(seed)
    model = CoveForSequenceClassification(CoveConfig(**values))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "embeddings" not in name:
                param.uniform_(-0.5, 0.5)
        model.cove.embeddings.weight.uniform_(-1, 1)
        model.cove.embeddings.zero_special_rows()
    model.eval().save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def classifier_at(path):
    from transformers import pipeline

    return pipeline("text-classification", model=str(path))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    return classifier_at(save_classifier(tmp_path_factory.mktemp("bcn")))


def logits_of(pipe, text, text_pair=None):
    encoded = pipe.tokenizer(text, text_pair, return_tensors="pt")
    with torch.no_grad():
        return pipe.model(**encoded).logits[0]


# ---------------------------------------------------------------------------------------------------------------
# keys passed by the tokenizer, the pipeline and Trainer
# ---------------------------------------------------------------------------------------------------------------


def test_pipeline_single_and_pair_match_the_model(classifier):
    text, pair = "The cat sat on the mat.", {"text": "A man plays.", "text_pair": "Someone plays."}
    for inputs, logits in ((text, logits_of(classifier, text)),
                           (pair, logits_of(classifier, pair["text"], pair["text_pair"]))):
        scores = classifier(inputs, top_k=None)
        probs = torch.softmax(logits, -1)
        assert {d["label"]: d["score"] for d in scores} == {
            name: pytest.approx(float(probs[i]), abs=1e-6) for i, name in enumerate(LABELS)
        }
    # batched and padded: each text as if alone
    texts = ["The cat sat on the mat.", "A dog ran.", "Someone plays far away."]
    for out, text in zip(classifier(texts, batch_size=2, top_k=None), texts):
        probs = torch.softmax(logits_of(classifier, text), -1)
        assert {d["label"]: d["score"] for d in out} == {
            name: pytest.approx(float(probs[i]), abs=1e-5) for i, name in enumerate(LABELS)
        }


def test_trainer_steps_on_single_texts_and_pairs(tmp_path):
    """A Trainer step passes input_ids, token_type_ids, attention_mask and labels from the tokenizer and the padding
    collator: accepted, and the loss is the model's own mean cross-entropy."""
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments

    path = save_classifier(tmp_path / "ckpt", seed=1)
    model = CoveForSequenceClassification.from_pretrained(path)
    tokenizer = classifier_at(path).tokenizer
    firsts = ["The cat sat.", "A man plays far away.", "A dog ran.", "Someone sat on the mat."]
    seconds = ["A dog sat.", "Someone plays.", "The cat ran away.", "A man sat."]
    rows = []
    for i, first in enumerate(firsts):
        rows.append({**tokenizer(first), "labels": i % 3})
        rows.append({**tokenizer(first, seconds[i]), "labels": (i + 1) % 3})
    assert set(rows[1]) == {"input_ids", "token_type_ids", "attention_mask", "labels"}
    collator = DataCollatorWithPadding(tokenizer)
    first_batch = collator(rows[:4])
    before = {name: p.detach().clone() for name, p in model.named_parameters() if p.requires_grad}
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, learning_rate=0.05,
        report_to=[], save_strategy="no", use_cpu=True, logging_steps=1, seed=0, dataloader_num_workers=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows, data_collator=collator)
    result = trainer.train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    changed = [name for name, p in model.named_parameters() if p.requires_grad and not torch.equal(p, before[name])]
    assert "feedforward.weight" in changed and "integrator_y.weight_ih_l0" in changed
    # the loss Trainer computes is the model's own: mean cross-entropy over the batch, by hand
    model.eval()
    loss = trainer.compute_loss(model, dict(first_batch))
    with torch.no_grad():
        logits = model(**{k: v for k, v in first_batch.items() if k != "labels"}).logits
    expected = -torch.log_softmax(logits, -1)[torch.arange(4), first_batch["labels"]].mean()
    assert loss.item() == pytest.approx(expected.item(), abs=0, rel=0)


@pytest.mark.parametrize("kernel", ["as this CPU runs", "simulated AVX2-only CPU"])
def test_trainer_with_bf16_and_the_pipeline_under_autocast_run_on_every_cpu(tmp_path, monkeypatch, kernel):
    """`Trainer(TrainingArguments(bf16=True))` (CPU bf16 autocast) trains the BCN, and the pipeline classifies under
    bf16 autocast, also where oneDNN has no bf16 LSTM (simulated on any CPU: the probe says so and `torch.lstm`
    raises oneDNN's error under autocast, as on an AVX2-only EPYC): the LSTMs then run in fp32."""
    from transformers import DataCollatorWithPadding, Trainer, TrainingArguments, pipeline

    from conftest import simulate_cpu_without_bf16_lstm

    if kernel != "as this CPU runs":
        simulate_cpu_without_bf16_lstm(monkeypatch)
    path = save_classifier(tmp_path / "ckpt", seed=2)
    model = CoveForSequenceClassification.from_pretrained(path)
    tokenizer = classifier_at(path).tokenizer
    texts = ["The cat sat.", "A man plays far away.", "A dog ran.", "Someone sat on the mat."]
    rows = [{**tokenizer(text), "labels": i % 3} for i, text in enumerate(texts)]
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=2, per_device_train_batch_size=4, bf16=True,
                             report_to=[], save_strategy="no", use_cpu=True, seed=0, dataloader_num_workers=0)
    result = Trainer(model=model, args=args, train_dataset=rows, data_collator=DataCollatorWithPadding(tokenizer)).train()
    assert result.global_step == 2 and torch.isfinite(torch.tensor(result.training_loss))
    model.eval()
    clf = pipeline("text-classification", model=model, tokenizer=tokenizer, top_k=None)
    exact = clf(texts)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fast = clf(texts)
    for exact_scores, bf16_scores in zip(exact, fast):
        by_label = {entry["label"]: entry["score"] for entry in exact_scores}
        assert all(abs(entry["score"] - by_label[entry["label"]]) < 0.02 for entry in bf16_scores)


# ---------------------------------------------------------------------------------------------------------------
# regression and multi-label heads through the pipeline
# ---------------------------------------------------------------------------------------------------------------


def test_pipeline_regression_and_multi_label_heads(tmp_path):
    text = "The cat sat on the mat."
    regression = classifier_at(save_classifier(tmp_path / "reg", num_labels=1, id2label={0: "score"},
                                               label2id={"score": 0}, problem_type="regression"))
    out = regression(text)
    assert out == [{"label": "score", "score": pytest.approx(float(logits_of(regression, text)[0]), abs=0, rel=0)}]
    multi = classifier_at(save_classifier(tmp_path / "multi", problem_type="multi_label_classification"))
    scores = {d["label"]: d["score"] for d in multi(text, top_k=None)}
    sigmoid = torch.sigmoid(logits_of(multi, text))
    assert scores == {name: pytest.approx(float(sigmoid[i]), abs=0, rel=0) for i, name in enumerate(LABELS)}


# ---------------------------------------------------------------------------------------------------------------
# bad input as a pipeline user meets it
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("empty", ["", "  "], ids=["empty", "whitespace"])
@pytest.mark.parametrize("batch_size", [1, 2])
def test_empty_text_in_a_batch_is_an_error_that_says_which_text(classifier, batch_size, empty):
    """Documented: an empty (or whitespace-only) text is an error saying that a text produced no tokens; inside the
    pipeline's batches the row it names is within the batch, and the message says so instead of passing it off as
    the caller's index."""
    with pytest.raises(ValueError, match="produced no tokens") as error:
        classifier(["a", "b", "c", empty], batch_size=batch_size)
    if batch_size == 2:
        message = str(error.value)
        assert "empty or only whitespace" in message and "not indices in your list" in message
    assert len(classifier(["a", "b", "c", "dog"], batch_size=batch_size)) == 4


def test_long_text_is_refused_with_the_fix_and_truncation_works(tmp_path):
    """A text above config.bcn_max_length (set to 16 here; default 4096) is a ValueError that names the limit, the
    biattention's memory and `truncation=True`; with truncation=True (model_max_length 16) the pipeline classifies
    the first 16 tokens."""
    clf = classifier_at(save_classifier(tmp_path / "short", bcn_max_length=16))
    long_text = " ".join(["the cat sat on the mat ."] * 6)  # 42 tokens
    with pytest.raises(ValueError, match=r"42 tokens, more than config.bcn_max_length=16.*GiB.*truncation=True"):
        clf(long_text)
    truncated = clf(long_text, truncation=True, top_k=None)
    first_16 = " ".join(clf.tokenizer.convert_ids_to_tokens(clf.tokenizer(long_text)["input_ids"][:16]))
    assert truncated == clf(first_16, top_k=None)


def test_pair_model_refuses_a_missing_or_empty_text_pair(tmp_path):
    clf = classifier_at(save_classifier(tmp_path / "snli", bcn_pair_input=True))
    premise, hypothesis = "A man plays.", "Someone plays."
    out = clf({"text": premise, "text_pair": hypothesis}, top_k=None)
    probs = torch.softmax(logits_of(clf, premise, hypothesis), -1)
    assert {d["label"]: d["score"] for d in out} == {
        name: pytest.approx(float(probs[i]), abs=1e-6) for i, name in enumerate(LABELS)
    }
    for bad in (premise, {"text": premise}, {"text": premise, "text_pair": ""}, {"text": premise, "text_pair": None},
                {"text": premise, "text_pair": "   "}):
        with pytest.raises(ValueError, match=r"bcn_pair_input=True.*no second text"):
            clf(bad)
