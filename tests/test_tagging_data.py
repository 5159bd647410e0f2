"""Tests of the sequence-labelling data and scoring (modeling_cove/training/data/tagging.py and the `evaluate` module
modeling_cove/metrics/seqeval_cove): the real files' counts, the readers' errors, label alignment, scoring (cross-
checked against a conlleval-style chunk counter written here) and the tokenization mismatch rate."""

import lzma
from collections import Counter

import pytest
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

from conftest import require_data
from modeling_cove.tokenization_cove import build_cove_tokenizer
from modeling_cove.training.data.tagging import (
    IGNORE_INDEX,
    NO_TOKEN_TAG,
    TAGGING_TASKS,
    align_labels,
    check_tags,
    from_hub_dataset,
    label_list,
    labelled_subset,
    load_seqeval_metric,
    load_tagging_splits,
    read_conll_columns,
    read_conllu,
    score_tagging,
    tokenization_mismatch,
    word_predictions,
)


@pytest.fixture(scope="module")
def splits():
    """Every task's splits, read once for the module."""
    root = require_data()
    for task in TAGGING_TASKS.values():
        require_data(task.folder)
    return {name: load_tagging_splits(name, root) for name in TAGGING_TASKS}


def n_words(dataset):
    return sum(len(words) for words in dataset["words"])


# ---------------------------------------------------------------------------------------------------------------
# the real files (counts from each data folder's README)


def test_conll2000_counts_and_validation_rule(splits):
    data = splits["conll2000"]
    assert {split: len(data[split]) for split in data} == {"train": 8043, "validation": 893, "test": 2012}
    assert n_words(data["train"]) + n_words(data["validation"]) == 211727
    assert n_words(data["test"]) == 47377
    # validation = the sentences at 0-based index 9 mod 10 of train.txt, train = all the others, in file order
    whole = read_conll_columns(require_data("conll2000", "train.txt.xz"), num_columns=3, tag_column=2)
    assert len(whole) == 8936
    assert list(data["validation"]["words"]) == [s["words"] for i, s in enumerate(whole) if i % 10 == 9]
    assert list(data["train"]["words"]) == [s["words"] for i, s in enumerate(whole) if i % 10 != 9]
    assert list(data["train"]["tags"]) == [s["tags"] for i, s in enumerate(whole) if i % 10 != 9]
    assert data["train"][0]["words"][:4] == ["Confidence", "in", "the", "pound"]
    assert data["train"][0]["text"].startswith("Confidence in the pound ")
    tags = Counter(tag for tags in data["test"]["tags"] for tag in tags)
    assert (tags["I-NP"], tags["B-NP"], tags["O"], tags["I-LST"]) == (14376, 12422, 6180, 2)
    label2id = {tag: i for i, tag in enumerate(label_list(data["train"]))}
    assert len(label2id) == 22  # all of train.txt's 22 tags stay in the 9-in-10 kept for training
    check_tags(data["validation"], label2id, "validation")
    # test has a tag train never has (I-LST, twice): gold test tags are scored as strings, not checked
    with pytest.raises(ValueError, match=r"split 'test', row 1503: tag 'I-LST' is not in the label set"):
        check_tags(data["test"], label2id, "test")


def test_ewt_upos_counts_and_raw_text(splits):
    data = splits["ewt_upos"]
    assert {split: len(data[split]) for split in data} == {"train": 12544, "validation": 2001, "test": 2077}
    assert [n_words(data[split]) for split in ("train", "validation", "test")] == [204577, 25147, 25094]
    train_tags = Counter(tag for tags in data["train"]["tags"] for tag in tags)
    assert len(train_tags) == 17 and train_tags["NOUN"] == 34751 and train_tags["X"] == 400
    assert label_list(data["train"]) == sorted(train_tags)
    test_tags = Counter(tag for tags in data["test"]["tags"] for tag in tags)
    assert test_tags["PROPN"] == 2075 and test_tags["SYM"] == 109
    # raw text from `# text = ...`: multiword tokens are one surface token there but two words in `words`
    with_mwt = next(row for row in data["test"] if "n't" in row["words"])
    assert "n't" not in with_mwt["text"].split() and " ".join(with_mwt["words"]) != with_mwt["text"]


def test_wnut17_counts(splits):
    data = splits["wnut17"]
    assert {split: len(data[split]) for split in data} == {"train": 3394, "validation": 1009, "test": 1287}
    assert [n_words(data[split]) for split in ("train", "validation", "test")] == [62730, 15733, 23394]
    assert len(label_list(data["train"])) == 13
    label2id = {tag: i for i, tag in enumerate(label_list(data["train"]))}
    for split in ("validation", "test"):
        check_tags(data[split], label2id, split)
    test_entities = sum(len(conlleval_chunks(tags)) for tags in data["test"]["tags"])
    assert test_entities == 1079


def test_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="wnut17"):
        load_tagging_splits("wnut17", tmp_path)
    with pytest.raises(ValueError, match="unknown tagging task"):
        load_tagging_splits("conll2003", tmp_path)


# ---------------------------------------------------------------------------------------------------------------
# readers on small files


def write(path, text):
    if path.suffix == ".xz":
        with lzma.open(path, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["small.txt", "small.txt.xz"])
def test_conll_columns_plain_and_xz(tmp_path, name):
    path = write(tmp_path / name, "He PRP B-NP\nran VBD B-VP\n\n\n\nOK UH B-INTJ\n")  # no final blank line
    sentences = read_conll_columns(path, num_columns=3, tag_column=2)
    assert sentences == [
        {"words": ["He", "ran"], "tags": ["B-NP", "B-VP"], "text": "He ran"},
        {"words": ["OK"], "tags": ["B-INTJ"], "text": "OK"},
    ]


def test_conll_columns_errors_name_file_and_line(tmp_path):
    path = write(tmp_path / "bad.txt", "He PRP B-NP\nran VBD\n")
    with pytest.raises(ValueError, match=r"bad\.txt, line 2: 2 columns, expected 3"):
        read_conll_columns(path, num_columns=3, tag_column=2)
    path = write(tmp_path / "first.txt", "He PRP B-NP\n\nran VBD B-VP extra\n")  # column count from the first line
    with pytest.raises(ValueError, match=r"first\.txt, line 3: 4 columns, expected 3"):
        read_conll_columns(path)
    path = write(tmp_path / "empty.conll", "a\tO\n\tB-person\n")
    with pytest.raises(ValueError, match=r"empty\.conll, line 2: empty word"):
        read_conll_columns(path, num_columns=2, tag_column=1, separator="\t")


CONLLU = """# newdoc id = x
# sent_id = s1
# text = I don't know.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tknow\tknow\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tit\tit\tPRON\tPRP\t_\t_\t_\t_\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = s2
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
"""


def test_conllu_reader(tmp_path):
    sentences = read_conllu(write(tmp_path / "a.conllu.xz", CONLLU))
    assert sentences == [
        {"words": ["I", "do", "n't", "know", "."], "tags": ["PRON", "AUX", "PART", "VERB", "PUNCT"],
         "text": "I don't know."},
        {"words": ["Yes"], "tags": ["INTJ"], "text": "Yes"},  # no `# text`: the words joined
    ]
    assert read_conllu(write(tmp_path / "b.conllu", CONLLU), tag_field="xpos")[0]["tags"][:2] == ["PRP", "VBP"]


def test_conllu_errors_name_file_and_line(tmp_path):
    bad_fields = CONLLU.replace("4\tknow\tknow\tVERB", "4\tknow\tVERB")
    with pytest.raises(ValueError, match=r"f\.conllu, line 8: 9 TAB-separated fields, expected 10"):
        read_conllu(write(tmp_path / "f.conllu", bad_fields))
    with pytest.raises(ValueError, match=r"w\.conllu, line 4: empty word"):
        read_conllu(write(tmp_path / "w.conllu", CONLLU.replace("1\tI\tI", "1\t\tI")))
    no_words = "# sent_id = s0\n# text = \n\n" + CONLLU
    with pytest.raises(ValueError, match=r"n\.conllu, line 3: the sentence ending here has no words"):
        read_conllu(write(tmp_path / "n.conllu", no_words))


# ---------------------------------------------------------------------------------------------------------------
# Hub layout, subsets, label checks


def hub_like(splits_rows, names):
    features = Features({"id": Value("string"), "tokens": Sequence(Value("string")),
                         "ner_tags": Sequence(ClassLabel(names=names))})
    return DatasetDict({
        split: Dataset.from_dict({"id": [str(i) for i in range(len(rows))], "tokens": [r[0] for r in rows],
                                  "ner_tags": [r[1] for r in rows]}, features=features)
        for split, rows in splits_rows.items()
    })


def test_from_hub_dataset_with_and_without_validation():
    names = ["O", "B-person", "I-person"]
    rows = [([f"w{i}", "Ann", "Lee"], [0, 1, 2]) for i in range(12)]
    converted = from_hub_dataset(hub_like({"train": rows, "validation": rows[:2], "test": rows[:3]}, names),
                                 "ner_tags")
    assert {split: len(converted[split]) for split in converted} == {"train": 12, "validation": 2, "test": 3}
    assert converted["train"][0] == {"words": ["w0", "Ann", "Lee"], "tags": ["O", "B-person", "I-person"],
                                     "text": "w0 Ann Lee"}
    # train and test only (the Hub's conll2000): validation by the CoNLL-2000 rule, index 9 mod 10
    converted = from_hub_dataset(hub_like({"train": rows, "test": rows[:3]}, names), "ner_tags")
    assert list(converted["validation"]["words"]) == [rows[9][0]]
    assert list(converted["train"]["words"]) == [r[0] for i, r in enumerate(rows) if i != 9]
    with pytest.raises(ValueError, match="ClassLabel"):
        from_hub_dataset(hub_like({"train": rows, "test": rows}, names), "id")


def test_labelled_subset_fixed_and_nested():
    data = Dataset.from_dict({"words": [[str(i)] for i in range(100)]})
    kept, rest = labelled_subset(data, 0.1, seed=3)
    assert len(kept) == 10 and len(rest) == 90
    assert sorted(list(kept["words"]) + list(rest["words"])) == sorted(data["words"])
    assert list(kept["words"]) == list(labelled_subset(data, 0.1, seed=3)[0]["words"])
    assert list(kept["words"]) != list(labelled_subset(data, 0.1, seed=4)[0]["words"])
    larger = {w[0] for w in labelled_subset(data, 0.3, seed=3)[0]["words"]}
    assert {w[0] for w in kept["words"]} < larger
    assert len(labelled_subset(data, 1.0, seed=3)[1]) == 0
    with pytest.raises(ValueError, match="fraction"):
        labelled_subset(data, 0.0, seed=3)


def test_check_tags_names_split_row_and_tag():
    data = Dataset.from_dict({"words": [["a"], ["b", "c"]], "tags": [["O"], ["B-NP", "I-XX"]]})
    with pytest.raises(ValueError, match=r"split 'validation', row 1: tag 'I-XX' is not in the label set"):
        check_tags(data, {"O": 0, "B-NP": 1}, "validation")
    data = Dataset.from_dict({"words": [["a"], ["b", "c"]], "tags": [["O"], ["O"]]})
    with pytest.raises(ValueError, match=r"split 'train', row 1: 2 words but 1 tags"):
        check_tags(data, {"O": 0}, "train")


# ---------------------------------------------------------------------------------------------------------------
# token labels and back


@pytest.fixture(scope="module")
def tokenizer():
    return build_cove_tokenizer(["i", "don", "'t", "go"], lowercase=True)


def test_align_labels_word_split_in_two(tokenizer):
    label2id = {"B-NP": 0, "B-VP": 1, "I-VP": 2}
    encoding = tokenizer([["I", "don't", "go"]], is_split_into_words=True, padding="max_length", max_length=6)
    word_ids = encoding.word_ids(0)
    assert encoding.tokens(0)[:4] == ["i", "don", "'t", "go"] and word_ids == [0, 1, 1, 2, None, None]
    assert align_labels(word_ids, ["B-NP", "B-VP", "I-VP"], label2id) == [0, 1, IGNORE_INDEX, 2, -100, -100]


def test_word_predictions_word_without_tokens(tokenizer):
    words = ["I", "\x07", "don't", "go"]  # the control character is dropped: that word has no token
    word_ids = tokenizer(words, is_split_into_words=True).word_ids()
    assert word_ids == [0, 2, 2, 3]
    assert align_labels(word_ids, ["B-NP", "O", "B-VP", "I-VP"], {"B-NP": 0, "O": 1, "B-VP": 2, "I-VP": 3}) == [
        0, 2, -100, 3]
    predicted = word_predictions([5, 7, 8, 9, 0, 0], word_ids, num_words=4)  # two trailing padding positions
    assert predicted == [5, None, 7, 9]


# ---------------------------------------------------------------------------------------------------------------
# scoring


def test_score_tagging_f1_by_hand():
    gold = [["B-NP", "I-NP", "B-VP", "O"], ["B-NP", "B-PP", "B-NP"]]
    predicted = [["B-NP", "I-NP", "B-VP", "B-NP"], ["B-NP", None, "B-NP"]]
    # gold chunks: NP(0-1) VP(2) | NP(0) PP(1) NP(2) = 5; predicted: NP(0-1) VP(2) NP(3) | NP(0) <no-token>(1) NP(2)
    # = 6; correct: NP(0-1) VP(2) NP(0) NP(2) = 4 -> P = 4/6, R = 4/5, F1 = 2PR / (P + R) = 8/11
    result = score_tagging(gold, predicted, "f1")
    assert result["precision"] == 4 / 6 and result["recall"] == 4 / 5
    assert result["f1"] == pytest.approx(8 / 11, abs=1e-15, rel=0)  # measured 1.1e-16
    assert result["accuracy"] == 5 / 7 and result["words_without_tokens"] == 1
    assert set(result["per_type"]) == {"NP", "PP", "VP"} and result["per_type"]["PP"]["recall"] == 0.0
    explicit = score_tagging(gold, [predicted[0], ["B-NP", NO_TOKEN_TAG, "B-NP"]], "f1")  # None is scored as this tag
    assert explicit == {**result, "words_without_tokens": 0}
    # a None inside a chunk breaks that chunk: the gold NP(0-1) is then missed
    result = score_tagging([["B-NP", "I-NP"]], [["B-NP", None]], "f1")
    assert (result["precision"], result["recall"], result["f1"]) == (0.0, 0.0, 0.0)


def test_score_tagging_accuracy_counts_missing_words_as_errors():
    result = score_tagging([["NOUN", "VERB", "PUNCT"], ["X"]], [["NOUN", None, "PUNCT"], ["NOUN"]], "accuracy")
    assert result == {"accuracy": 0.5, "words": 4, "words_without_tokens": 1}
    with pytest.raises(ValueError, match="sentence 0: 2 gold tags but 1 predictions"):
        score_tagging([["O", "O"]], [["O"]], "accuracy")
    with pytest.raises(ValueError, match="kind"):
        score_tagging([["O"]], [["O"]], "macro")


def test_seqeval_module_per_type():
    result = load_seqeval_metric().compute(predictions=[["B-NP", "I-NP", "O"]], references=[["B-NP", "I-NP", "B-VP"]])
    assert (result["precision"], result["recall"], result["accuracy"]) == (1.0, 0.5, 2 / 3)
    assert result["per_type"]["NP"] == {"precision": 1.0, "recall": 1.0, "f1": 1.0, "number": 1}
    assert result["per_type"]["VP"]["number"] == 1 and result["per_type"]["VP"]["recall"] == 0.0


def conlleval_chunks(tags):
    """The chunks of one sentence as conlleval finds them: (start, end, type) with `end` inclusive. A chunk starts at
    B-X, or at I-X after O or after a chunk of another type; it ends before O, before B-, or before a type change."""
    chunks, start, kind = [], None, None
    for i, tag in enumerate(list(tags) + ["O"]):
        prefix, _, tag_type = tag.partition("-")
        ends = start is not None and (prefix in ("O", "B") or tag_type != kind)
        if ends:
            chunks.append((start, i - 1, kind))
            start, kind = None, None
        if prefix == "B" or (prefix == "I" and start is None):
            start, kind = i, tag_type
    return chunks


def conlleval_scores(gold, predicted):
    """conlleval's precision / recall / F1: a predicted chunk is correct when a gold chunk has the same start, end
    and type."""
    correct = found = expected = 0
    for gold_tags, predicted_tags in zip(gold, predicted):
        gold_chunks, predicted_chunks = set(conlleval_chunks(gold_tags)), conlleval_chunks(predicted_tags)
        correct += sum(chunk in gold_chunks for chunk in predicted_chunks)
        found += len(predicted_chunks)
        expected += len(gold_chunks)
    precision, recall = correct / found, correct / expected
    return precision, recall, 2 * precision * recall / (precision + recall)


def test_conlleval_counter_on_hand_cases():
    assert conlleval_chunks(["I-NP", "I-NP", "O", "I-VP", "B-VP", "I-PP", "I-NP"]) == [
        (0, 1, "NP"), (3, 3, "VP"), (4, 4, "VP"), (5, 5, "PP"), (6, 6, "NP")]


def test_score_tagging_matches_conlleval_on_corrupted_conll2000_test(splits):
    gold = list(splits["conll2000"]["test"]["tags"])
    assert sum(len(conlleval_chunks(tags)) for tags in gold) == 23852  # the README's chunk count
    replacements = ["O", "I-NP", "B-VP", "I-VP", "B-NP", "I-PP", "B-ADJP"]
    predicted, position, changed = [], 0, 0
    for tags in gold:  # every tenth tag (counted over the file) replaced, I- tags after O among them
        row = []
        for tag in tags:
            if position % 10 == 3:
                new = replacements[(position // 10) % len(replacements)]
                row.append(new if new != tag else "O" if tag != "O" else "B-PP")
                changed += 1
            else:
                row.append(tag)
            position += 1
        predicted.append(row)
    assert changed == 4738
    precision, recall, f1 = conlleval_scores(gold, predicted)
    result = score_tagging(gold, predicted, "f1")
    assert result["precision"] == pytest.approx(precision, abs=0, rel=0)
    assert result["recall"] == pytest.approx(recall, abs=0, rel=0)
    assert result["f1"] == pytest.approx(f1, abs=0, rel=0)
    assert 0.5 < f1 < 0.95 and result["words_without_tokens"] == 0


# ---------------------------------------------------------------------------------------------------------------
# tokenization of pre-split words vs raw text


def test_tokenization_mismatch_hand_example():
    tok = build_cove_tokenizer(["a"], lowercase=True)
    result = tokenization_mismatch(tok, [{"words": ["I", "do", "n't", "go"], "text": "I don't go"},
                                         {"words": ["Yes", "."], "text": "Yes."}])
    # "do" "n't" -> do | n | 't ... vs "don't" -> don | 't: sentence 0 differs, sentence 1 is identical
    assert result["sentences"] == 2 and result["mismatched_sentences"] == 1
    assert result["sentence_mismatch_rate"] == 0.5
    assert 0 < result["token_mismatch_rate"] < 1


def test_tokenization_mismatch_on_ewt_test(splits):
    test = splits["ewt_upos"]["test"]
    tok = build_cove_tokenizer(sorted({w for words in test["words"] for w in words}), lowercase=True)
    result = tokenization_mismatch(tok, test)
    # measured with the tokenizer of modeling_cove/tokenization_cove.py: UD's syntactic words and Moses' splits of
    # the raw text differ in about one sentence in eight (multiword tokens "do" + "n't" vs "don" + "'t", hyphenated
    # compounds that UD splits, abbreviations like "v.")
    assert result["sentences"] == 2077
    assert (result["mismatched_sentences"], result["split_tokens"], result["text_tokens"]) == (253, 26488, 26085)
    assert (result["unmatched_split_tokens"], result["unmatched_text_tokens"]) == (715, 312)
    assert result["sentence_mismatch_rate"] == 253 / 2077
    assert result["token_mismatch_rate"] == (715 + 312) / (26488 + 26085)
