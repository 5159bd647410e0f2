"""Dataset adapters: the documented sizes, splits and columns of the real data, and the TSV layout of examples/."""

import pytest

from modeling_cove.data import load_classification, load_squad, load_translation, ptb_tree_leaves, read_tsv_splits

from conftest import REPO, require_data


@pytest.mark.parametrize("task, sizes, num_labels", [
    ("trec6", (4906, 546, 500), 6),
    ("trec50", (4906, 546, 500), 50),
    ("sst2", (67349, 872, 1821), 2),
    ("sst5", (8544, 1101, 2210), 5),
    ("snli", (8857, 985, 9824), 3),
])
def test_local_classification_splits(task, sizes, num_labels):
    data = load_classification(task, require_data())
    assert tuple(len(data[s]) for s in ("train", "validation", "test")) == sizes
    assert data["train"].features["label"].num_classes == num_labels
    # the validation split held out of train is disjoint from what is left and deterministic
    again = load_classification(task, require_data())
    assert again["validation"]["text"] == data["validation"]["text"]
    assert len(data["validation"]) + len(data["train"]) == sizes[0] + sizes[1]
    if task == "snli":
        assert data["train"].column_names == ["text", "text_pair", "label"]
        assert data["test"][0]["text_pair"]


def test_trec_and_sst_rows():
    trec = load_classification("trec6", require_data())
    assert trec["test"][0]["text"] == "How far is it from Denver to Aspen ?"
    assert trec["test"].features["label"].int2str(trec["test"][0]["label"]) == "NUM"
    assert ptb_tree_leaves("(3 (2 -LRB-) (2 (2 it) (2 ``)) (2 \\/))") == '( it " /'


def test_translation_and_squad():
    mt = load_translation(require_data())
    assert {k: len(v) for k, v in mt.items()} == {"train": 29000, "validation": 1014, "test": 1000}
    assert mt["test"][0]["src"].startswith("A man in an orange hat")
    squad = load_squad(require_data())
    train_titles, eval_titles = set(squad["train"]["title"]), set(squad["validation"]["title"])
    assert len(train_titles) == 38 and len(eval_titles) == 10 and not train_titles & eval_titles
    assert len(squad["train"]) + len(squad["validation"]) == 10570
    row = squad["validation"][0]
    start = row["answers"]["answer_start"][0]
    assert row["context"][start:start + len(row["answers"]["text"][0])] == row["answers"]["text"][0]


def test_tsv_layout_of_the_embedded_examples(tmp_path):
    mt = load_translation(REPO / "examples" / "en_de", "tsv")
    assert {k: len(v) for k, v in mt.items()} == {"train": 4800, "validation": 200, "test": 200}
    clf = load_classification("tsv", REPO / "examples" / "sentiment")
    assert clf["train"].features["label"].names == ["negative", "positive"]
    # bad TSV files: clear errors with the file and line
    for split in ("train", "validation", "test"):
        (tmp_path / f"{split}.tsv").write_text("text\tlabel\na good film\tpositive\n")
    (tmp_path / "test.tsv").write_text("text\tlabel\nno label here\n")
    with pytest.raises(ValueError, match="test.tsv, line 2: 1 fields, header has 2"):
        read_tsv_splits(tmp_path, ("text", "label"))
    with pytest.raises(ValueError, match="lacks column"):
        read_tsv_splits(tmp_path, ("en", "de"))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_classification("trec6", tmp_path / "nowhere")
    with pytest.raises(ValueError, match="unknown task"):
        load_classification("mnli", tmp_path)


def test_tsv_with_byte_order_mark(tmp_path):
    for split, text in (("train", "a good film\tpositive\nbad\tnegative\n"), ("validation", "fine\tpositive\n"),
                        ("test", "dull\tnegative\n")):
        # train.tsv starts with a UTF-8 BOM (as Excel writes it): the first column is still "text"
        data = ("\ufeff" if split == "train" else "") + "text\tlabel\n" + text
        (tmp_path / f"{split}.tsv").write_bytes(data.encode("utf-8"))
    rows = read_tsv_splits(tmp_path, ("text", "label"))
    assert rows["train"] == [{"text": "a good film", "label": "positive"}, {"text": "bad", "label": "negative"}]
    clf = load_classification("tsv", tmp_path)
    assert clf["train"]["text"] == ["a good film", "bad"] and clf["train"]["label"] == [1, 0]
    assert clf["train"].features["label"].names == ["negative", "positive"]


def test_tsv_pair_column_is_kept_with_a_header_only_train_file(tmp_path):
    """A pair task whose train.tsv has only its header: the text_pair column of the other splits is kept (it used to
    be decided on train's first row alone and dropped); splits that disagree on the column are an error."""
    files = {"train": "", "validation": "a cat\ta dog\tyes\n", "test": "the mat\ta hat\tno\n"}
    for split, text in files.items():
        (tmp_path / f"{split}.tsv").write_text("text\ttext_pair\tlabel\n" + text)
    clf = load_classification("tsv", tmp_path)
    assert clf["train"].num_rows == 0 and "text_pair" in clf["train"].column_names
    assert clf["validation"]["text_pair"] == ["a dog"] and clf["test"]["text_pair"] == ["a hat"]
    assert clf["test"].features["label"].names == ["no", "yes"] and clf["test"]["label"] == [0]
    (tmp_path / "test.tsv").write_text("text\tlabel\nthe mat\tno\n")
    with pytest.raises(ValueError, match="some splits have a text_pair column and some do not"):
        load_classification("tsv", tmp_path)
