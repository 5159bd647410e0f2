"""The recipes of docs/trainer_recipes.md for a plain `transformers.Trainer` — single-text classification, pair
classification (SNLI-style, token_type_ids), question answering (DCN) and sequence tagging — run as written:
`RECIPES` reads each snippet from that file, executed here on a tiny encoder (it replaces the Hub id) and tiny data
(it replaces `load_dataset`; for tagging, `load_tagging_splits` gives a slice of the real CoNLL-2000), in a
temporary working folder."""

import json
from pathlib import Path

import datasets
import pytest
import torch
from conftest import require_data
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from modeling_cove import CoveConfig, CoveModel
from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize

pytestmark = pytest.mark.usefixtures("single_thread")

HUB_ENCODER = "org/cove-large"

RECIPES_DOC = Path(__file__).resolve().parents[1] / "docs" / "trainer_recipes.md"
SECTION = "# Fine-tuning with a plain `transformers.Trainer`"


NAMES = ("classification", "pairs", "question_answering", "tagging")


def doc_recipes() -> dict:
    """The ```python blocks of docs/trainer_recipes.md, in order, by name: the test runs exactly the text a user
    copies."""
    text = RECIPES_DOC.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = [part.split("```", 1)[0] for part in section.split("```python\n")[1:]]
    assert len(blocks) == len(NAMES), f"expected {len(NAMES)} python blocks in {RECIPES_DOC.name}, got {len(blocks)}"
    return dict(zip(NAMES, blocks))


RECIPES = doc_recipes()


def tiny_encoder(folder, texts) -> str:
    """A small CoVe checkpoint over the words of `texts` (stands in for the Hub encoder)."""
    tokenizer = build_cove_tokenizer(list(dict.fromkeys(w for text in texts for w in moses_tokenize(text))))
    torch.manual_seed(0)
    CoveModel(CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=4)).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def run_recipe(name, data, tmp_path, monkeypatch, texts) -> dict:
    """Execute RECIPES[name] in tmp_path with `load_dataset` returning `data` and the Hub id naming a tiny encoder."""
    encoder = tiny_encoder(tmp_path / "encoder", texts)
    monkeypatch.setattr(datasets, "load_dataset", lambda *args, **kwargs: data)
    monkeypatch.chdir(tmp_path)
    code = RECIPES[name]
    assert code.count(HUB_ENCODER) == 1
    namespace = {}
    exec(compile(code.replace(HUB_ENCODER, encoder), f"<recipe {name}>", "exec"), namespace)
    return namespace


SENTENCES = [("a gripping , beautifully shot film .", 1), ("dull and far too long .", 0), ("a fine cast .", 1),
             ("the plot never works .", 0), ("warm , funny and wise .", 1), ("a mess .", 0)]


def test_classification_recipe(tmp_path, monkeypatch):
    features = Features({"idx": Value("int32"), "sentence": Value("string"),
                         "label": ClassLabel(names=["negative", "positive"])})
    split = Dataset.from_dict({"idx": list(range(len(SENTENCES))), "sentence": [s for s, _ in SENTENCES],
                               "label": [y for _, y in SENTENCES]}, features=features)
    data = DatasetDict({"train": split, "validation": split})
    namespace = run_recipe("classification", data, tmp_path, monkeypatch, [s for s, _ in SENTENCES])
    assert namespace["trainer"].state.global_step == 3  # 3 epochs of one batch
    assert 0.0 <= namespace["metrics"]["eval_accuracy"] <= 1.0 and "eval_macro_f1" in namespace["metrics"]
    best = tmp_path / "runs" / "bcn-sst2" / "best"
    assert (best / "model.safetensors").is_file() and (best / "tokenizer.json").is_file()
    record = json.loads((tmp_path / "runs" / "bcn-sst2" / "eval_results.json").read_text())
    assert record["training"]["steps_run"] == 3 and record["training"]["epochs_run"] == 3
    assert record["training"]["encoder"]["kind"] == "unknown"  # a fresh folder says nothing of its pretraining


def test_pair_classification_recipe(tmp_path, monkeypatch):
    pairs = [("a man plays a guitar .", "someone makes music .", 0), ("a man plays a guitar .", "a man sleeps .", 2),
             ("a dog runs .", "an animal moves .", 0), ("a dog runs .", "the dog is brown .", 1),
             ("two kids play .", "nobody plays .", 2), ("bad row", "no gold label", -1)]
    features = Features({"premise": Value("string"), "hypothesis": Value("string"),
                         "label": ClassLabel(names=["entailment", "neutral", "contradiction"])})
    split = Dataset.from_dict({"premise": [p for p, _, _ in pairs], "hypothesis": [h for _, h, _ in pairs],
                               "label": [y for _, _, y in pairs]}, features=features)
    data = DatasetDict({"train": split, "validation": split})
    texts = [t for p, h, _ in pairs for t in (p, h)] + ["someone makes music ."]
    namespace = run_recipe("pairs", data, tmp_path, monkeypatch, texts)
    assert len(namespace["data"]["train"]) == 5 and namespace["trainer"].state.global_step == 3
    assert namespace["data"]["train"][0]["token_type_ids"] == [0] * 6 + [1] * 4  # premise, then hypothesis
    model = namespace["model"]
    assert model.config.bcn_pair_input
    with pytest.raises(ValueError, match="second text"):  # the saved pair model refuses a single text
        namespace["classify"]("a man plays a guitar .")


def test_question_answering_recipe(tmp_path, monkeypatch):
    contexts = ["the cat sat on the mat .", "paris is the capital of france .", "the game was won by the broncos ."]
    questions = ["where did the cat sit ?", "what is the capital of france ?", "who won the game ?"]
    answers = ["on the mat", "paris", "the broncos"]
    features = Features({"id": Value("string"), "title": Value("string"), "context": Value("string"),
                         "question": Value("string"),
                         "answers": Sequence({"text": Value("string"), "answer_start": Value("int32")})})
    train = Dataset.from_dict({"id": ["1", "2", "3"], "title": ["t"] * 3, "context": contexts, "question": questions,
                               "answers": [{"text": [a], "answer_start": [c.index(a)]}
                                           for a, c in zip(answers, contexts)]}, features=features)
    texts = contexts + questions + ["The cat sat on the mat .", "Where did the cat sit ?"]
    namespace = run_recipe("question_answering", DatasetDict({"train": train}), tmp_path, monkeypatch, texts)
    assert namespace["stats"]["examples"] == 3 and len(namespace["train"]) == 3
    assert namespace["trainer"].state.global_step == 10  # 10 epochs of one batch
    answer = namespace["answer"]
    assert set(answer) == {"answer", "score", "start", "end"}
    assert answer["answer"] == "The cat sat on the mat ."[answer["start"]:answer["end"]]


def test_tagging_recipe(tmp_path, monkeypatch):
    """The tagger on a slice of CoNLL-2000 (64 training sentences, the validation sentences whose tags train has):
    the validation loss falls, every validation word gets a tag of the label set (its first token's), and the
    pipeline tags raw text with `word` as written."""
    from modeling_cove.training.data import tagging as tagging_data

    splits = tagging_data.load_tagging_splits("conll2000", require_data())
    train = splits["train"].select(range(64))
    known = set(tagging_data.label_list(train))
    validation = splits["validation"].select(range(40)).filter(lambda row: set(row["tags"]) <= known)
    data = DatasetDict({"train": train, "validation": validation, "test": splits["test"].select(range(8))})
    monkeypatch.setattr(tagging_data, "load_tagging_splits", lambda task, data_dir: data)
    texts = [" ".join(words) for words in train["words"]] + ["He reckons the current account deficit will narrow."]
    namespace = run_recipe("tagging", data, tmp_path, monkeypatch, texts)
    assert namespace["trainer"].state.global_step == 3 * 2  # 3 epochs of 2 batches of 32
    assert namespace["after"]["eval_loss"] < namespace["before"]["eval_loss"]
    labels, predicted = namespace["labels"], namespace["predicted"]
    assert labels == sorted(known) and namespace["model"].config.id2label == dict(enumerate(labels))
    assert len(predicted) == len(validation) > 0
    for words, tags in zip(validation["words"], predicted):
        assert len(tags) == len(words) and all(tag in labels for tag in tags)  # every word has a token here
    assert set(namespace["scores"]) >= {"precision", "recall", "f1", "accuracy"}
    assert 0.0 <= namespace["scores"]["f1"] <= 1.0
    text = "He reckons the current account deficit will narrow."
    assert namespace["chunks"] and all(chunk["word"] == text[chunk["start"]:chunk["end"]]
                                       for chunk in namespace["chunks"])
    assert (tmp_path / "runs" / "tagger-conll2000" / "model" / "pipeline_cove.py").is_file()
