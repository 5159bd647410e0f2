"""The recipes of docs/trainer_recipes.md for a plain `transformers.Trainer` — single-text classification, pair classification
(SNLI-style, token_type_ids) and question answering (DCN) — run as written: `RECIPES` reads each snippet from that file,
executed here on a tiny encoder (it replaces the Hub id) and tiny data (it replaces
`load_dataset`), in a temporary working folder."""

import json
from pathlib import Path

import datasets
import pytest
import torch
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from modeling_cove import CoveConfig, CoveModel
from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize

pytestmark = pytest.mark.usefixtures("single_thread")

HUB_ENCODER = "org/cove-large"

RECIPES_DOC = Path(__file__).resolve().parents[1] / "docs" / "trainer_recipes.md"
SECTION = "# Fine-tuning with a plain `transformers.Trainer`"


def doc_recipes() -> dict:
    """The three ```python blocks of docs/trainer_recipes.md, in order, by name: the test runs exactly the text
    a user copies."""
    text = RECIPES_DOC.read_text(encoding="utf-8")
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    blocks = [part.split("```", 1)[0] for part in section.split("```python\n")[1:]]
    assert len(blocks) == 3, f"expected 3 python blocks in docs/trainer_recipes.md, found {len(blocks)}"
    return dict(zip(("classification", "pairs", "question_answering"), blocks))


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
