"""The BIOES label scheme (`cove-train-tagger --label-scheme bioes`): `to_bioes` / `to_bio` on every gold sentence of
the three tasks, the label set and the aligned labels, scoring in the task's own IOB2 (against a hand computation),
a tiny run end to end, the token-classification pipeline grouping a BIOES tagger's entities as a BIO tagger's, and
the setting's checks (docs/tagging.md, "Label schemes")."""

import json

import numpy as np
import pytest
import torch
from torch import nn

from conftest import require_data, tiny_tagging_setup
from modeling_cove import CoveTokenClassificationPipeline
from modeling_cove.modeling_cove_tagger import bioes_label_to_bio, has_bioes_labels
from modeling_cove.tokenization_cove import build_cove_tokenizer
from modeling_cove.training.commands import train_tagger as tg
from modeling_cove.training.data.tagging import (TAGGING_TASKS, load_tagging_splits, score_tagging, to_bio, to_bioes,
                                                 uses_chunk_tags, word_predictions)
from modeling_cove.training.loops.accelerate_loop import RUN_SETTINGS_FILE, check_run_folder
from test_token_classification_pipeline import fixed_logits_pipeline, tiny_tagger

pytestmark = pytest.mark.usefixtures("single_thread")

TASKS = ("conll2000", "ewt_upos", "wnut17")


# ---------------------------------------------------------------------------------------------------------------
# the conversion


def bioes_errors(tags: list) -> list:
    """Where a BIOES sequence is ill-formed: a tag outside B/I/E/S/O of a chunk tag set, an I-X or E-X that does
    not continue a B-X or I-X of its type, a B-X or I-X not followed by I-X or E-X of its type."""
    errors = []
    for position, tag in enumerate(tags):
        before = tags[position - 1] if position else "O"
        after = tags[position + 1] if position + 1 < len(tags) else "O"
        prefix, kind = tag[:2], tag[2:]
        if tag != "O" and prefix not in ("B-", "I-", "E-", "S-"):
            errors.append((position, tag, "not a BIOES tag"))
        if prefix in ("I-", "E-") and before not in ("B-" + kind, "I-" + kind):
            errors.append((position, tag, f"after {before}"))
        if prefix in ("B-", "I-") and after not in ("I-" + kind, "E-" + kind):
            errors.append((position, tag, f"before {after}"))
    return errors


def test_to_bioes_marks_single_and_last_words():
    iob2 = ["B-NP", "I-NP", "I-NP", "B-VP", "O", "B-NP", "B-NP", "I-NP", "O", "B-PP"]
    bioes = ["B-NP", "I-NP", "E-NP", "S-VP", "O", "S-NP", "B-NP", "E-NP", "O", "S-PP"]
    assert to_bioes(iob2) == bioes
    assert to_bio(bioes) == iob2
    assert to_bioes([]) == [] and to_bio([]) == []
    assert to_bioes(bioes) == bioes  # gold already in BIOES (a Hub dataset tagged so) is kept, not encoded twice


def test_an_inside_tag_that_starts_a_chunk_is_read_as_conlleval_reads_it():
    """IOB1 style (none of the tasks' files has it): I-X after O or after another type starts a chunk, which comes
    back as B-X, the same chunk for seqeval."""
    iob1 = ["I-PER", "I-PER", "O", "I-LOC", "I-ORG", "I-ORG"]
    assert to_bioes(iob1) == ["B-PER", "E-PER", "O", "S-LOC", "B-ORG", "E-ORG"]
    assert to_bio(to_bioes(iob1)) == ["B-PER", "I-PER", "O", "B-LOC", "B-ORG", "I-ORG"]
    gold = [iob1]
    assert score_tagging(gold, [to_bio(to_bioes(iob1))], "f1")["f1"] == 1.0


def test_to_bio_maps_label_by_label_and_never_fails():
    predicted = [None, "E-X", "I-X", "S-Y", "O", "E-Y", "B-Z", "NOUN", "S-", "E"]
    assert to_bio(predicted) == [None, "I-X", "I-X", "B-Y", "O", "I-Y", "B-Z", "NOUN", "B-", "E"]
    assert [bioes_label_to_bio(label) for label in ("S-LOC", "E-LOC", "SCONJ", "B-LOC")] == \
        ["B-LOC", "I-LOC", "SCONJ", "B-LOC"]


def test_tags_without_chunk_prefixes_pass_through():
    upos = ["PRON", "VERB", "SCONJ", "PUNCT", "X", "SYM"]
    assert to_bioes(upos) == upos and to_bio(upos) == upos
    assert not uses_chunk_tags(upos) and uses_chunk_tags(["O", "B-NP"]) and uses_chunk_tags(["I-NP"])
    assert not has_bioes_labels(["O", "B-NP", "I-NP", "SCONJ"]) and has_bioes_labels(["O", "E-NP"])


@pytest.fixture(scope="module")
def gold_splits():
    data_dir = require_data()
    for task in TASKS:
        require_data(TAGGING_TASKS[task].folder)
    return {task: load_tagging_splits(task, data_dir) for task in TASKS}


@pytest.mark.parametrize("task", TASKS)
def test_every_gold_sentence_round_trips_and_is_well_formed_bioes(gold_splits, task):
    chunked = task != "ewt_upos"
    sentences = 0
    for split_name, split in gold_splits[task].items():
        for row, tags in enumerate(split["tags"]):
            bioes = to_bioes(tags)
            assert to_bio(bioes) == tags, (split_name, row)
            if chunked:
                assert bioes_errors(bioes) == [], (split_name, row, tags)
            else:
                assert bioes == tags, (split_name, row)
            sentences += 1
    assert sentences == {"conll2000": 10_948, "ewt_upos": 16_622, "wnut17": 5_690}[task]
    labels = {tag for split in gold_splits[task].values() for tags in split["tags"] for tag in to_bioes(tags)}
    assert uses_chunk_tags(labels) == chunked
    assert any(tag.startswith("S-") for tag in labels) == chunked and any(tag.startswith("E-") for tag in labels) == \
        chunked


# ---------------------------------------------------------------------------------------------------------------
# labels, alignment and scoring in the tagger CLI


def tag_split(rows: list):
    from datasets import Dataset

    return Dataset.from_dict({"words": [[f"w{i}" for i in range(len(tags))] for tags in rows], "tags": rows,
                              "text": [" ".join(f"w{i}" for i in range(len(tags))) for tags in rows]})


def test_the_bioes_label_set_has_every_form_of_every_type_seen():
    train = tag_split([["B-NP", "I-NP", "O", "B-LST"]])
    validation = tag_split([["B-UCP", "I-UCP"]])
    assert tg.label_set(train, validation) == ["B-LST", "B-NP", "B-UCP", "I-LST", "I-NP", "I-UCP", "O"]
    assert tg.label_set(train, validation, label_scheme="bioes") == sorted(
        [f"{prefix}-{kind}" for prefix in "BIES" for kind in ("LST", "NP", "UCP")] + ["O"])
    upos = tag_split([["NOUN", "SCONJ"]])
    assert tg.label_set(upos, label_scheme="bioes") == ["NOUN", "SCONJ"]


def test_encoded_tags_stay_the_gold_and_the_labels_are_aligned_from_bioes():
    split = tag_split([["B-NP", "I-NP", "O", "B-VP"]])
    tokenizer = build_cove_tokenizer(["w0", "w1", "w2", "w3"])
    labels = tg.label_set(split, label_scheme="bioes")
    label2id = {label: i for i, label in enumerate(labels)}
    encoded = tg.encode_split(split, tokenizer, label2id, "toy train", max_length=10, label_scheme="bioes")
    assert encoded.tags == [["B-NP", "I-NP", "O", "B-VP"]]
    assert [labels[i] for i in encoded.labels[0]] == ["B-NP", "E-NP", "O", "S-VP"]
    with pytest.raises(ValueError, match="tag 'I-NP' is not in the label set"):
        tg.encode_split(split, tokenizer, {"B-NP": 0, "O": 1, "B-VP": 2}, "toy train", max_length=10)


class FixedTagger(nn.Module):
    """What `predict_tags` reads of a `TaggerTraining`: a task's logits at each token position, those of `table` at
    its token id."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        self.table = table

    def token_logits(self, task, ids, mask, cases):
        return self.table[ids]


def test_scores_are_of_the_predictions_mapped_back_against_the_original_gold():
    labels = ["B-NP", "E-NP", "I-NP", "O", "S-NP", "S-VP"]
    gold = [["B-NP", "I-NP", "B-VP", "O"], ["B-NP", "O", "B-NP", "I-NP", "I-NP"]]
    tokenizer = build_cove_tokenizer([f"w{i}" for i in range(5)])
    split = tag_split(gold)
    data = tg.encode_split(split, tokenizer, None, "toy test", max_length=10)
    # the tagger's labels per token id: w0 S-NP, w1 E-NP, w2 S-VP, w3 I-NP, w4 E-NP (ill-formed after I-NP: fine)
    table = torch.zeros(len(tokenizer), len(labels))
    for word, label in zip(("w0", "w1", "w2", "w3", "w4"), ("S-NP", "E-NP", "S-VP", "I-NP", "E-NP")):
        table[tokenizer.convert_tokens_to_ids(word), labels.index(label)] = 5.0
    tagger = FixedTagger(table)
    raw = tg.predict_tags(tagger, "toy", data, labels, 8, "cpu")
    assert raw == [["S-NP", "E-NP", "S-VP", "I-NP"], ["S-NP", "E-NP", "S-VP", "I-NP", "E-NP"]]
    mapped = tg.predict_tags(tagger, "toy", data, labels, 8, "cpu", label_scheme="bioes")
    assert mapped == [to_bio(tags) for tags in raw]
    result = tg.score(tagger, "toy", data, labels, "f1", 8, "cpu", label_scheme="bioes")
    by_hand = score_tagging(gold, mapped, "f1")
    assert result["f1"] == by_hand["f1"] and result["accuracy"] == by_hand["accuracy"]
    # chunks of the mapped predictions: [0,1] NP, [2] VP, [3] NP | [0,1] NP, [2] VP, [3,4] NP; of the gold:
    # [0,1] NP, [2] VP | [0] NP, [2,4] NP: 2 of 6 predicted chunks are right, 2 of 4 gold ones found
    assert by_hand["precision"] == 2 / 6 and by_hand["recall"] == 2 / 4
    assert tg.score(tagger, "toy", data, labels, "f1", 8, "cpu")["f1"] != result["f1"]  # unmapped: not the same


def test_a_bad_label_scheme_is_an_error_naming_the_option():
    with pytest.raises(ValueError, match=r"--label-scheme must be one of bio, bioes, got 'BIOES'"):
        tg.TaggerSettings(task=["conll2000"], encoder="e", output_dir="o", label_scheme="BIOES")
    assert "label_scheme" in tg.RESUME_KEYS
    assert tg.TaggerSettings(task=["conll2000"], encoder="e", output_dir="o").label_scheme is None  # the preset's
    assert tg.HYPERPARAMETER_DEFAULTS["label_scheme"] == "bio"
    with pytest.raises(ValueError, match="label_scheme='BIOES' must be one of"):
        tg.check_hyperparameters({**tg.HYPERPARAMETER_DEFAULTS, "label_scheme": "BIOES"}, "a preset")


def test_the_command_line_refuses_a_bad_label_scheme(capsys):
    with pytest.raises(SystemExit) as stopped:
        tg.main(["--task", "conll2000", "--encoder", "e", "--output-dir", "o", "--label-scheme", "iobes"])
    assert stopped.value.code == 2 and "label-scheme" in capsys.readouterr().err


def test_a_run_recorded_before_the_option_resumes_with_the_presets_scheme(tmp_path):
    (tmp_path / RUN_SETTINGS_FILE).write_text(json.dumps({"seed": 1}))
    keys = ("seed", "label_scheme")
    check_run_folder(tmp_path, {"seed": 1, "label_scheme": None}, keys, True, False, defaults=tg.ADDED_SETTINGS)
    with pytest.raises(ValueError, match="label_scheme"):
        check_run_folder(tmp_path, {"seed": 1, "label_scheme": "bioes"}, keys, True, False,
                         defaults=tg.ADDED_SETTINGS)


# ---------------------------------------------------------------------------------------------------------------
# a tiny run


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory):
    return tiny_tagging_setup(tmp_path_factory.mktemp("bioes"), "wnut17", 300, "learning_rate: 0.01\n")


def hand_predictions(model, tokenizer, split) -> list:
    """Each test sentence's word tags from the saved tagger, one sentence at a time: the first token's argmax."""
    data = tg.encode_split(split, tokenizer, None, "test", max_length=512)
    labels = [model.config.id2label[i] for i in range(model.config.num_labels)]
    predicted = []
    with torch.no_grad():
        for ids, word_ids, tags in zip(data.ids, data.word_ids, data.tags):
            best = model(input_ids=torch.tensor([ids])).logits[0].argmax(-1).tolist()
            predicted.append([labels[i] for i in word_predictions(best, word_ids, len(tags))])
    return predicted


def test_a_multi_task_run_converts_the_chunk_task_only_and_keeps_every_gold(tiny_encoder):
    data_dir, encoder, preset = tiny_encoder
    require_data("conll2000"), require_data("ud_english_ewt")
    settings = tg.TaggerSettings(task=["conll2000", "ewt_upos"], encoder=str(encoder), data_dir=str(data_dir),
                                 preset=str(preset), limit_sentences=40, output_dir="unused", label_scheme="bioes")
    tokenizer = build_cove_tokenizer(["the", "a"])
    tasks, _ = tg.prepare_tasks(settings, tokenizer, tg.load_hyperparameters(settings))
    chunks, upos = tasks
    assert (chunks.label_scheme, upos.label_scheme) == ("bioes", "bio")
    assert "S-NP" in chunks.labels and "E-NP" in chunks.labels and not has_bioes_labels(upos.labels)
    for task in tasks:
        splits, _ = tg.load_task(task.name, data_dir, 40)
        for name in ("train", "validation", "test"):
            assert getattr(task, name).tags == [list(tags) for tags in splits[name]["tags"]], (task.name, name)
        learned = [[task.labels[i] for i in row if i != -100] for row in task.validation.labels]
        assert learned == tg.scheme_tags(splits["validation"]["tags"], task.label_scheme)
    assert chunks.counts["test_tags_unseen_in_train"] == 0


def test_a_tiny_bioes_run_learns_bioes_and_scores_in_the_tasks_iob2(tiny_encoder, tmp_path):
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    data_dir, encoder, preset = tiny_encoder
    settings = tg.TaggerSettings(task=["wnut17"], encoder=str(encoder), data_dir=str(data_dir), preset=str(preset),
                                 limit_sentences=48, output_dir=str(tmp_path / "run"), label_scheme="bioes")
    metrics = tg.train_tagger(settings, cpu=True)
    assert metrics["tasks"]["wnut17"]["label_scheme"] == "bioes"
    assert metrics["settings"]["label_scheme"] == "bioes"
    model = AutoModelForTokenClassification.from_pretrained(tmp_path / "run" / "best").eval()
    labels = set(model.config.id2label.values())
    kinds = {label[2:] for label in labels if label != "O"}
    assert labels == {"O"} | {f"{prefix}-{kind}" for prefix in "BIES" for kind in kinds} and len(kinds) >= 2
    assert has_bioes_labels(labels)
    test = load_tagging_splits("wnut17", data_dir)["test"].select(range(48))
    raw = hand_predictions(model, AutoTokenizer.from_pretrained(tmp_path / "run" / "best"), test)
    by_hand = score_tagging(list(test["tags"]), [to_bio(tags) for tags in raw], "f1")
    result = metrics["results"]["wnut17"]["test"]
    for key in ("f1", "precision", "recall", "accuracy"):
        assert result[key] == pytest.approx(by_hand[key], abs=1e-12), key
    assert not any(tag.startswith(("S-", "E-")) for tags in test["tags"] for tag in tags)  # the gold stayed IOB2


# ---------------------------------------------------------------------------------------------------------------
# the pipeline

WORDS = "paris france is nice . new york city don 't".split()
BIOES = ["O", "B-LOC", "I-LOC", "E-LOC", "S-LOC", "S-MISC"]
AS_BIO = [bioes_label_to_bio(label) for label in BIOES]  # the same predictions, read as IOB2
LOGITS = {"paris": "S-LOC", "france": "S-LOC", "new": "B-LOC", "york": "I-LOC", "city": "E-LOC", "don": "S-MISC"}
TEXTS = ["Paris France is nice. New York City", "New York, Paris"]
PRE_SPLIT = [["Paris", "don't", "New", "York", "City"], ["France", "is", "nice"]]
STRATEGIES = ("simple", "first", "average", "max")


@pytest.fixture(scope="module")
def tokenizer():
    return build_cove_tokenizer(WORDS)


def fixed_pipeline(tokenizer, labels: list, monkeypatch) -> CoveTokenClassificationPipeline:
    """A tagger with `labels` whose logits per token id are fixed: each word of LOGITS strongly its label's index
    in BIOES (with some mass elsewhere, so that average / max have something to weigh), "'t" leaning O."""
    table = torch.zeros(len(tokenizer), len(labels))
    table[:, 0] = 2.0
    for word, label in LOGITS.items():
        table[tokenizer.convert_tokens_to_ids(word)] = torch.linspace(0.0, 1.0, len(labels))
        table[tokenizer.convert_tokens_to_ids(word), BIOES.index(label)] = 4.0
    table[tokenizer.convert_tokens_to_ids("'t"), 0] = 6.0
    return fixed_logits_pipeline(tiny_tagger(tokenizer, labels), tokenizer, table, monkeypatch)


def plain(results) -> list:
    return [[{k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in e.items()} for e in r]
            for r in results]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_pipeline_groups_a_bioes_taggers_entities_as_a_bio_taggers(tokenizer, monkeypatch, strategy):
    bioes = fixed_pipeline(tokenizer, BIOES, monkeypatch)
    bio = fixed_pipeline(tokenizer, AS_BIO, monkeypatch)
    assert plain(bioes(TEXTS, aggregation_strategy=strategy)) == plain(bio(TEXTS, aggregation_strategy=strategy))
    assert plain(bioes(PRE_SPLIT, is_split_into_words=True, aggregation_strategy=strategy)) == \
        plain(bio(PRE_SPLIT, is_split_into_words=True, aggregation_strategy=strategy))
    groups = [(e["entity_group"], e["word"]) for e in bioes(TEXTS[0], aggregation_strategy=strategy)]
    assert groups == [("LOC", "Paris"), ("LOC", "France"), ("LOC", "New York City")]  # two S-LOC: two entities


def test_the_pipeline_without_aggregation_keeps_the_models_own_labels(tokenizer, monkeypatch):
    bioes = fixed_pipeline(tokenizer, BIOES, monkeypatch)
    tokens = bioes(TEXTS[0])
    assert [(e["word"], e["entity"]) for e in tokens] == [("Paris", "S-LOC"), ("France", "S-LOC"),
                                                          ("New", "B-LOC"), ("York", "I-LOC"), ("City", "E-LOC")]
    (words,) = bioes([PRE_SPLIT[0]], is_split_into_words=True, aggregation_strategy="first")
    assert [(e["entity_group"], e["word"]) for e in words] == [("LOC", "Paris"), ("MISC", "don't"),
                                                               ("LOC", "New York City")]
