"""The README's recipes for a plain `transformers.Trainer` — single-text classification, pair classification
(SNLI-style, token_type_ids) and question answering (DCN) — run as written: `RECIPES` holds each snippet's exact
text (the README shows the same), executed here on a tiny encoder (it replaces the Hub id) and tiny data (it replaces
`load_dataset`), in a temporary working folder."""

import json
import textwrap

import datasets
import pytest
import torch
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from modeling_cove import CoveConfig, CoveModel
from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize

pytestmark = pytest.mark.usefixtures("single_thread")

HUB_ENCODER = "org/cove-large"

RECIPES = {
    "classification": textwrap.dedent('''\
        import modeling_cove                                     # registers CoVe with the Auto classes
        from datasets import load_dataset
        from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments, pipeline
        from modeling_cove import CoveForSequenceClassification
        from modeling_cove.training.classifier import make_compute_metrics   # accuracy and macro-F1, offline

        encoder = "org/cove-large"                               # a CoVe checkpoint: tokenizer, vectors, MT-LSTM
        tokenizer = AutoTokenizer.from_pretrained(encoder)
        data = load_dataset("stanfordnlp/sst2")                  # columns idx, sentence, label
        data = data.map(lambda rows: tokenizer(rows["sentence"]), batched=True, remove_columns=["idx", "sentence"])
        labels = data["train"].features["label"].names
        model = CoveForSequenceClassification.from_pretrained(  # the encoder loaded and frozen, the BCN new
            encoder, num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={name: i for i, name in enumerate(labels)})
        args = TrainingArguments("runs/bcn-sst2", num_train_epochs=3, per_device_train_batch_size=64,
                                 learning_rate=1e-3, eval_strategy="epoch", save_strategy="epoch",
                                 load_best_model_at_end=True, metric_for_best_model="accuracy", save_total_limit=1,
                                 report_to="none")
        trainer = Trainer(model=model, args=args, train_dataset=data["train"], eval_dataset=data["validation"],
                          processing_class=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
                          compute_metrics=make_compute_metrics())
        trainer.train()
        metrics = trainer.evaluate()                             # the best epoch: eval_accuracy, eval_macro_f1
        trainer.save_model("runs/bcn-sst2/best")                 # weights (safetensors), config, tokenizer
        pipeline("text-classification", model="runs/bcn-sst2/best")("A gripping , beautifully shot film .")

        # the model card's input (push_to_hub.py --eval-json): figures of exactly these weights, what really ran
        from modeling_cove.training.cards import describe_encoder, make_eval_record, write_eval_json
        record = make_eval_record(
            "runs/bcn-sst2/best", task={"type": "text-classification"},
            dataset={"name": "SST-2", "id": "stanfordnlp/sst2", "split": "validation"},
            metrics=[{"type": "accuracy", "value": round(100 * metrics["eval_accuracy"], 2)}],
            training={"command": "the Trainer recipe", "encoder": describe_encoder(encoder),
                      "epochs_run": trainer.state.epoch, "steps_run": trainer.state.global_step})
        write_eval_json("runs/bcn-sst2/eval_results.json", record)
        '''),
    "pairs": textwrap.dedent('''\
        import modeling_cove
        from datasets import load_dataset
        from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments, pipeline
        from modeling_cove import CoveForSequenceClassification
        from modeling_cove.training.classifier import make_compute_metrics

        encoder = "org/cove-large"
        tokenizer = AutoTokenizer.from_pretrained(encoder)
        data = load_dataset("stanfordnlp/snli").filter(lambda row: row["label"] != -1)   # -1: no gold label
        # a pair: token_type_ids 0 on the premise, 1 on the hypothesis; the BCN encodes each side on its own
        data = data.map(lambda rows: tokenizer(rows["premise"], rows["hypothesis"]), batched=True,
                        remove_columns=["premise", "hypothesis"])
        labels = data["train"].features["label"].names           # entailment, neutral, contradiction
        model = CoveForSequenceClassification.from_pretrained(
            encoder, num_labels=len(labels), id2label=dict(enumerate(labels)),
            label2id={name: i for i, name in enumerate(labels)},
            bcn_pair_input=True)                                 # the checkpoint refuses a missing second text
        args = TrainingArguments("runs/bcn-snli", num_train_epochs=3, per_device_train_batch_size=64,
                                 learning_rate=1e-3, eval_strategy="epoch", save_strategy="epoch",
                                 load_best_model_at_end=True, metric_for_best_model="accuracy", save_total_limit=1,
                                 report_to="none")
        trainer = Trainer(model=model, args=args, train_dataset=data["train"], eval_dataset=data["validation"],
                          processing_class=tokenizer, data_collator=DataCollatorWithPadding(tokenizer),
                          compute_metrics=make_compute_metrics())
        trainer.train()
        trainer.save_model("runs/bcn-snli/best")
        classify = pipeline("text-classification", model="runs/bcn-snli/best")
        classify({"text": "A man plays a guitar .", "text_pair": "Someone makes music ."})
        '''),
    "question_answering": textwrap.dedent('''\
        import modeling_cove
        from datasets import Dataset, load_dataset
        from transformers import AutoTokenizer, DataCollatorWithPadding, Trainer, TrainingArguments, pipeline
        from modeling_cove import CoveForQuestionAnswering
        from modeling_cove.squad_preprocessing import prepare_train_features

        encoder = "org/cove-large"
        tokenizer = AutoTokenizer.from_pretrained(encoder)
        squad = load_dataset("rajpurkar/squad")
        # windows of question + context (384 tokens, contexts overlapping by 128) that hold the answer, with its
        # start/end token; every skipped example is counted in `stats`
        features, stats = prepare_train_features(squad["train"], tokenizer, max_length=384, doc_stride=128)
        columns = ("input_ids", "token_type_ids", "start_positions", "end_positions")
        train = Dataset.from_dict({name: features[name] for name in columns})
        model = CoveForQuestionAnswering.from_pretrained(encoder)   # the encoder loaded and frozen, the DCN new
        args = TrainingArguments("runs/dcn-squad", num_train_epochs=10, per_device_train_batch_size=32,
                                 learning_rate=1e-3, max_grad_norm=5.0, save_strategy="no", report_to="none")
        trainer = Trainer(model=model, args=args, train_dataset=train, processing_class=tokenizer,
                          data_collator=DataCollatorWithPadding(tokenizer))
        trainer.train()
        trainer.save_model("runs/dcn-squad/model")
        qa = pipeline("question-answering", model="runs/dcn-squad/model", trust_remote_code=True)
        answer = qa(question="Where did the cat sit ?", context="The cat sat on the mat .")  # answer, score, start, end
        '''),
}


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
