"""Data and scoring of the sequence-labelling tasks: chunking (CoNLL-2000), UPOS tagging (UD English EWT) and named
entities (WNUT-17), as word-level `datasets.DatasetDict`s with string tags.

- `read_conll_columns` / `read_conllu`: the two file formats -> sentences (`words`, `tags`, `text`).
- `TAGGING_TASKS`: each task's files under `--data-dir`, its metric, and the Hub dataset a user online would name.
- `load_tagging_splits(task, data_dir)` -> train / validation / test; `from_hub_dataset` turns a Hub-layout
  DatasetDict (ClassLabel tags) into the same layout.
- `labelled_subset`: a fixed random fraction of train kept labelled (the rest serves as unlabelled text).
- `label_list`, `check_tags`: the label set of train and the check that a split fits it.
- `align_labels`, `word_predictions`: word tags -> token labels (first token of each word) and back.
- `to_bioes`, `to_bio`: one sentence's IOB2 tags in BIOES (the CVT authors' encoding of chunks) and back;
  `uses_chunk_tags`: whether a task's tags are chunks / entities at all (B-/I- prefixes), i.e. whether BIOES applies.
- `score_tagging`: chunk F1 (seqeval, conlleval-compatible) or token accuracy, counting words without tokens as
  errors; `tokenization_mismatch`: how far the pre-split words' tokens differ from the raw text's.

The files each task reads, the CoNLL-2000 validation rule and the scoring rules are documented in docs/tagging.md.
"""

from __future__ import annotations

import difflib
import lzma
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

# IGNORE_INDEX: the label of positions the loss and the metrics skip; bioes_label_to_bio: one label of `to_bio`
from ...modeling_cove_tagger import IGNORE_INDEX, bioes_label_to_bio

__all__ = ["align_labels", "check_tags", "from_hub_dataset", "is_conll2000_validation", "label_list", "labelled_subset",
           "load_seqeval_metric", "load_tagging_splits", "read_conll_columns", "read_conllu", "score_tagging",
           "TAGGING_TASKS", "TaggingTask", "to_bio", "to_bioes", "tokenization_mismatch", "uses_chunk_tags",
           "word_predictions"]

SPLITS = ("train", "validation", "test")
NO_TOKEN_TAG = "B-<no-token>"  # what score_tagging puts in place of a word without a token (kind "f1")
# CoNLL-2000 has no development set: the training sentences whose 0-based index in train.txt is 9 mod 10 (every
# tenth sentence: 9, 19, 29, ...) are the validation split, and only the others are trained on.
CONLL2000_VALIDATION_EVERY = 10
CONLL2000_VALIDATION_REMAINDER = 9
CONLLU_FIELDS = 10
CONLLU_TAG_FIELDS = {"upos": 3, "xpos": 4}
CHUNK_PREFIXES = ("B-", "I-")


@dataclass(frozen=True)
class TaggingTask:
    """A sequence-labelling task read from local files.

    Attributes:
        name: the task's name (`--task`).
        folder: the sub-folder of `--data-dir` holding its files.
        files: split name -> file name inside `folder` (xz-compressed when the name ends in `.xz`); a task without
            a "validation" file takes it from train (`validation_from_train`).
        file_format: "conll" (one word per line, columns) or "conllu" (CoNLL-U).
        num_columns: the number of columns of every word line ("conll" only).
        separator: the column separator ("conll"; None = any run of whitespace).
        tag_column: the column of the tag ("conll", 0-based; the word is column 0) or the CoNLL-U field name.
        metric: "f1" (chunk / entity F1 over IOB2 tags) or "accuracy" (token accuracy).
        hub_id, hub_config, hub_tag_column: the Hugging Face `datasets` id (and config) of the same data and its
            tag column (ClassLabel ids), for `from_hub_dataset`; its words are in the column "tokens".
        validation_from_train: validation = the fixed tenth of train described at `CONLL2000_VALIDATION_EVERY`.
    """

    name: str
    folder: str
    files: dict
    file_format: str
    metric: str
    hub_id: str
    hub_tag_column: str
    tag_column: object = -1
    num_columns: Optional[int] = None
    separator: Optional[str] = None
    hub_config: Optional[str] = None
    validation_from_train: bool = False


TAGGING_TASKS = {
    "conll2000": TaggingTask(
        name="conll2000", folder="conll2000", files={"train": "train.txt.xz", "test": "test.txt.xz"},
        file_format="conll", num_columns=3, separator=None, tag_column=2, metric="f1",
        hub_id="conll2000", hub_tag_column="chunk_tags", validation_from_train=True,
    ),
    "ewt_upos": TaggingTask(
        name="ewt_upos", folder="ud_english_ewt",
        files={"train": "en_ewt-ud-train.conllu.xz", "validation": "en_ewt-ud-dev.conllu.xz",
               "test": "en_ewt-ud-test.conllu.xz"},
        file_format="conllu", tag_column="upos", metric="accuracy",
        hub_id="universal_dependencies", hub_config="en_ewt", hub_tag_column="upos",
    ),
    "wnut17": TaggingTask(
        name="wnut17", folder="wnut17",
        files={"train": "wnut17train.conll.xz", "validation": "emerging.dev.conll.xz",
               "test": "emerging.test.annotated.xz"},
        file_format="conll", num_columns=2, separator="\t", tag_column=1, metric="f1",
        hub_id="leondz/wnut_17", hub_tag_column="ner_tags",
    ),
}

FEATURES = Features({
    "words": Sequence(Value("string")),
    "tags": Sequence(Value("string")),
    "text": Value("string"),
})


# ---------------------------------------------------------------------------------------------------------------
# readers


def _read_lines(path: Path):
    """(line number, line without its end) of a text file, xz-decompressed when its name ends in `.xz`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    opener = lzma.open if path.suffix == ".xz" else open
    with opener(path, "rt", encoding="utf-8", newline="") as f:
        for number, line in enumerate(f, start=1):
            yield number, line.rstrip("\r\n")


def _sentence(words: list, tags: list, text: Optional[str]) -> dict:
    return {"words": words, "tags": tags, "text": text if text is not None else " ".join(words)}


def read_conll_columns(path, num_columns: Optional[int] = None, tag_column: int = -1,
                       separator: Optional[str] = None) -> list:
    """Sentences of a CoNLL column file: one word per line (word first, then `num_columns - 1` more columns), a blank
    (or whitespace-only) line ends a sentence; runs of blank lines count as one break.

    Args:
        path: the file; read as xz when its name ends in `.xz`, else as plain UTF-8 text.
        num_columns: the number of columns every word line has; None = that of the first word line.
        tag_column: the column holding the tag (0-based; negative counts from the end).
        separator: the column separator; None splits at any run of whitespace (leading/trailing ignored).

    Returns:
        a list of dicts with `words` (list[str]), `tags` (list[str]) and `text` (the words joined by " ").

    Raises:
        ValueError naming the file and line: a line with another number of columns, an empty word or tag.
    """
    sentences, words, tags = [], [], []
    for number, line in _read_lines(path):
        if not line.strip():
            if words:
                sentences.append(_sentence(words, tags, None))
                words, tags = [], []
            continue
        fields = line.split() if separator is None else line.split(separator)
        if num_columns is None:
            num_columns = len(fields)
        if len(fields) != num_columns:
            raise ValueError(f"{path}, line {number}: {len(fields)} columns, expected {num_columns}: {line!r}")
        word, tag = fields[0], fields[tag_column]
        if not word.strip():
            raise ValueError(f"{path}, line {number}: empty word: {line!r}")
        if not tag.strip():
            raise ValueError(f"{path}, line {number}: empty tag: {line!r}")
        words.append(word)
        tags.append(tag)
    if words:  # a file may lack the final blank line
        sentences.append(_sentence(words, tags, None))
    return sentences


def read_conllu(path, tag_field: str = "upos") -> list:
    """Sentences of a CoNLL-U file (10 TAB-separated fields a word line: docs/tagging.md, "Data"): the FORM and the
    `tag_field` ("upos" or "xpos") of each syntactic word. Comment lines are skipped except `# text = ...` (the raw
    sentence); multiword-token lines (ID like `3-4`) and empty nodes (ID like `8.1`) are skipped, so `words` are the
    syntactic words (`do`, `n't` for the surface token `don't`).

    Returns:
        a list of dicts with `words`, `tags` and `text` (the `# text` comment, else the words joined by " ").

    Raises:
        ValueError naming the file and line: a word line without 10 TAB-separated fields, an empty FORM or tag, a
        sentence (comments, then a blank line) without any word.
    """
    if tag_field not in CONLLU_TAG_FIELDS:
        raise ValueError(f"tag_field must be one of {', '.join(CONLLU_TAG_FIELDS)}, got {tag_field!r}")
    tag_index = CONLLU_TAG_FIELDS[tag_field]
    sentences, words, tags, text, started = [], [], [], None, False
    for number, line in _read_lines(path):
        if not line.strip():
            if started:
                if not words:
                    raise ValueError(f"{path}, line {number}: the sentence ending here has no words")
                sentences.append(_sentence(words, tags, text))
            words, tags, text, started = [], [], None, False
            continue
        started = True
        if line.startswith("#"):
            key, sep, value = line[1:].partition("=")
            if sep and key.strip() == "text":
                text = value.strip()
            continue
        fields = line.split("\t")
        if len(fields) != CONLLU_FIELDS:
            raise ValueError(f"{path}, line {number}: {len(fields)} TAB-separated fields, expected {CONLLU_FIELDS}: "
                             f"{line!r}")
        if "-" in fields[0] or "." in fields[0]:
            continue
        if not fields[1].strip():
            raise ValueError(f"{path}, line {number}: empty word (FORM): {line!r}")
        if not fields[tag_index].strip():
            raise ValueError(f"{path}, line {number}: empty {tag_field}: {line!r}")
        words.append(fields[1])
        tags.append(fields[tag_index])
    if started:
        if not words:
            raise ValueError(f"{path}: the last sentence has no words")
        sentences.append(_sentence(words, tags, text))
    return sentences


def _dataset(sentences: list) -> Dataset:
    return Dataset.from_dict({key: [s[key] for s in sentences] for key in FEATURES}, features=FEATURES)


# ---------------------------------------------------------------------------------------------------------------
# splits


def is_conll2000_validation(index: int) -> bool:
    """Whether the training sentence at 0-based `index` of CoNLL-2000's train.txt belongs to validation."""
    return index % CONLL2000_VALIDATION_EVERY == CONLL2000_VALIDATION_REMAINDER


def _split_validation_from_train(train: Dataset):
    validation = [i for i in range(len(train)) if is_conll2000_validation(i)]
    kept = [i for i in range(len(train)) if not is_conll2000_validation(i)]
    return train.select(kept), train.select(validation)


def _task(task: str) -> TaggingTask:
    if task not in TAGGING_TASKS:
        raise ValueError(f"unknown tagging task {task!r}; choose one of {', '.join(TAGGING_TASKS)}")
    return TAGGING_TASKS[task]


def load_tagging_splits(task: str, data_dir) -> DatasetDict:
    """The train / validation / test splits of a tagging task, read from `data_dir/<task folder>/`.

    Columns: `words` (list[str]), `tags` (list[str], the task's tag strings), `text` (the raw sentence where the
    file has one, i.e. CoNLL-U's `# text`, else the words joined by " "). Sentences keep the files' order.

    CoNLL-2000 has no development set: its validation split is every training sentence whose 0-based index in
    train.txt is 9 mod 10 (sentences 9, 19, 29, ...: 893 of 8,936), and train keeps the other 8,043 only.

    Raises:
        ValueError for an unknown task or a bad line (naming the file and line); FileNotFoundError naming the
        missing folder or file.
    """
    spec = _task(task)
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"--data-dir {root} does not exist or is not a directory")
    folder = root / spec.folder
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} not found: for task {task!r} the data dir must contain '{spec.folder}/' "
                                f"with {', '.join(spec.files.values())} (see docs/tagging.md)")
    splits = {}
    for split, name in spec.files.items():
        if spec.file_format == "conllu":
            sentences = read_conllu(folder / name, tag_field=spec.tag_column)
        else:
            sentences = read_conll_columns(folder / name, num_columns=spec.num_columns, tag_column=spec.tag_column,
                                           separator=spec.separator)
        splits[split] = _dataset(sentences)
    if spec.validation_from_train:
        splits["train"], splits["validation"] = _split_validation_from_train(splits["train"])
    return DatasetDict({split: splits[split] for split in SPLITS})


def _class_names(feature, column: str) -> list:
    inner = getattr(feature, "feature", None)
    if not isinstance(inner, ClassLabel):
        raise ValueError(f"column {column!r} must be a sequence of ClassLabel ids (the Hub's layout), got {feature}")
    return list(inner.names)


def from_hub_dataset(dataset_dict: DatasetDict, tag_column: str, words_column: str = "tokens") -> DatasetDict:
    """A DatasetDict laid out like the Hub's tagging datasets (words in `words_column`, tags as a sequence of
    `ClassLabel` ids in `tag_column`) in the layout of `load_tagging_splits`: train / validation / test with
    `words`, `tags` (the ClassLabel names) and `text` (a string column "text" where there is one, else the words
    joined by " "). A "validation" split is taken as is; without one, validation is taken from train by the
    CoNLL-2000 rule (index 9 mod 10, see `load_tagging_splits`), which is how the Hub's `conll2000` (train and
    test only) gets the same validation sentences as the local files.

    Example (online): `from_hub_dataset(datasets.load_dataset("leondz/wnut_17"), "ner_tags")`.
    """
    missing = [split for split in ("train", "test") if split not in dataset_dict]
    if missing:
        raise ValueError(f"the dataset has no {' / '.join(missing)} split (it has {', '.join(dataset_dict)})")
    converted = {}
    for split, dataset in dataset_dict.items():
        if split not in SPLITS:
            continue
        for column in (words_column, tag_column):
            if column not in dataset.column_names:
                raise ValueError(f"split {split!r} has no column {column!r} (columns: {dataset.column_names})")
        names = _class_names(dataset.features[tag_column], tag_column)
        has_text = "text" in dataset.column_names and dataset.features["text"] == Value("string")
        sentences = []
        for row, example in enumerate(dataset):
            words, ids = list(example[words_column]), list(example[tag_column])
            if len(words) != len(ids):
                raise ValueError(f"split {split!r}, row {row}: {len(words)} words but {len(ids)} tags")
            sentences.append(_sentence(words, [names[i] for i in ids], example["text"] if has_text else None))
        converted[split] = _dataset(sentences)
    if "validation" not in converted:
        converted["train"], converted["validation"] = _split_validation_from_train(converted["train"])
    return DatasetDict({split: converted[split] for split in SPLITS})


def labelled_subset(dataset: Dataset, fraction: float, seed: int):
    """A fixed random `fraction` of `dataset` kept labelled, and the rest (e.g. unlabelled text for semi-supervised
    training), both in the dataset's order.

    The rows are ranked by one permutation drawn from `numpy.random.RandomState(seed)`; the first
    `max(1, round(fraction * len(dataset)))` rows of that ranking are kept. For one seed the subsets are therefore
    nested: the rows kept at a smaller fraction are also kept at every larger one.

    Returns:
        (kept, rest): two `Dataset`s that partition `dataset`.
    """
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"train fraction must be in (0, 1], got {fraction!r}")
    if len(dataset) == 0:
        raise ValueError("cannot take a labelled subset of an empty dataset")
    ranking = np.random.RandomState(seed).permutation(len(dataset))
    size = max(1, int(round(fraction * len(dataset))))
    return dataset.select(sorted(ranking[:size].tolist())), dataset.select(sorted(ranking[size:].tolist()))


# ---------------------------------------------------------------------------------------------------------------
# labels


def label_list(train_split: Dataset) -> list:
    """The sorted tags that occur in `train_split` (its `tags` column): the label set, id = position."""
    return sorted({tag for tags in train_split["tags"] for tag in tags})


def check_tags(dataset: Dataset, label2id: dict, split_name: str) -> None:
    """Check that every row of `dataset` has as many tags as words and that every tag is in `label2id`.

    Raises:
        ValueError naming the split and row (and the unknown tag).
    """
    for row, (words, tags) in enumerate(zip(dataset["words"], dataset["tags"])):
        if len(words) != len(tags):
            raise ValueError(f"split {split_name!r}, row {row}: {len(words)} words but {len(tags)} tags")
        for tag in tags:
            if tag not in label2id:
                raise ValueError(f"split {split_name!r}, row {row}: tag {tag!r} is not in the label set of train "
                                 f"({len(label2id)} labels)")


def uses_chunk_tags(tags) -> bool:
    """Whether a tag set is entity-level (chunks, named entities): any of its tags has a B- or I- prefix. UPOS tags
    have none, and pass through `to_bioes` and `to_bio` unchanged."""
    return any(isinstance(tag, str) and tag.startswith(CHUNK_PREFIXES) for tag in tags)


def to_bioes(tags: list) -> list:
    """One sentence's IOB2 word tags in BIOES, the encoding of the Cross-View Training authors' taggers: the first
    word of a chunk of several words stays B-X, the words inside it I-X, its last word becomes E-X, and a chunk of
    one word is S-X; O and tags without a B-/I- prefix (UPOS) are unchanged.

    Chunks are found as conlleval and seqeval's default mode find them: a chunk starts at B-X, or at an I-X that
    follows O or a tag of another type (IOB1 style; none of the three tasks' files has one), and continues over the
    I-X after it. `to_bio` inverts it exactly on IOB2; an I-X that starts a chunk comes back as B-X, the same chunk.
    A sentence already in BIOES (any E-/S- tag: every chunk there has one) is returned as it is.
    """
    if any(isinstance(tag, str) and tag.startswith(("E-", "S-")) for tag in tags):
        return list(tags)
    bioes = []
    for position, tag in enumerate(tags):
        if not tag.startswith(CHUNK_PREFIXES):
            bioes.append(tag)
            continue
        kind = tag[2:]
        before = tags[position - 1] if position > 0 else "O"
        starts = tag.startswith("B-") or before not in ("B-" + kind, "I-" + kind)
        ends = position + 1 == len(tags) or tags[position + 1] != "I-" + kind
        prefix = ("S-" if ends else "B-") if starts else ("E-" if ends else "I-")
        bioes.append(prefix + kind)
    return bioes


def to_bio(tags: list) -> list:
    """One sentence's BIOES tags (gold or predicted) in IOB2: S-X -> B-X, E-X -> I-X, every other tag (B-X, I-X, O,
    UPOS tags, None for a word without a token) unchanged. Label by label (`bioes_label_to_bio`), so an ill-formed
    predicted sequence (I-X after O, E-X without B-X, ...) maps without error, and seqeval then reads it as it reads
    any IOB2 prediction."""
    return [bioes_label_to_bio(tag) for tag in tags]


def align_labels(word_ids: list, tags: list, label2id: dict) -> list:
    """Per-token label ids of one tokenized sentence, the transformers way: the first token of each word gets the
    word's label id; later tokens of the same word, special tokens and padding (`word_id` None) get -100.

    Args:
        word_ids: `tokenizer(words, is_split_into_words=True).word_ids()` (possibly truncated or padded).
        tags: the sentence's word tags (strings).
        label2id: tag -> id.

    A word without any token simply has no labelled position (see `word_predictions` and `score_tagging` for how
    it is scored).
    """
    labels, previous = [], None
    for word_id in word_ids:
        if word_id is None or word_id == previous:
            labels.append(IGNORE_INDEX)
        else:
            if not 0 <= word_id < len(tags):
                raise ValueError(f"word id {word_id} outside the sentence's {len(tags)} words")
            if tags[word_id] not in label2id:
                raise ValueError(f"tag {tags[word_id]!r} of word {word_id} is not in the label set")
            labels.append(label2id[tags[word_id]])
        previous = word_id
    return labels


def word_predictions(token_label_ids, word_ids: list, num_words: int) -> list:
    """Each word's predicted label id: that of its first token; None for a word without a token (one that the
    tokenizer turned into nothing, or one cut off by truncation).

    Args:
        token_label_ids: the predicted id of each token position (at least `len(word_ids)` of them; the positions
            past `len(word_ids)`, e.g. batch padding, are ignored).
        word_ids: the sentence's `word_ids()` (None for special and padding positions).
        num_words: the number of words of the sentence.
    """
    if len(token_label_ids) < len(word_ids):
        raise ValueError(f"{len(token_label_ids)} token predictions for {len(word_ids)} token positions")
    predictions = [None] * num_words
    for position, word_id in enumerate(word_ids):
        if word_id is None:
            continue
        if not 0 <= word_id < num_words:
            raise ValueError(f"word id {word_id} outside the sentence's {num_words} words")
        if predictions[word_id] is None:
            predictions[word_id] = int(token_label_ids[position])
    return predictions


# ---------------------------------------------------------------------------------------------------------------
# scoring

_METRICS = {}


def load_seqeval_metric():
    """Our `evaluate` module `seqeval_cove` (chunk P/R/F1, token accuracy), loaded offline by path, once."""
    if "seqeval" not in _METRICS:
        import evaluate

        import modeling_cove

        root = Path(modeling_cove.__file__).resolve().parent / "metrics"
        _METRICS["seqeval"] = evaluate.load(str(root / "seqeval_cove"))
    return _METRICS["seqeval"]


def score_tagging(gold: list, predicted: list, kind: str) -> dict:
    """Score word-level predictions against gold tags, one list per sentence.

    A None prediction (a word that got no token, see `word_predictions`) is always an error, never dropped:

    - kind "accuracy": token accuracy = correct words / all gold words; a None is a wrong word. Returns
      `accuracy`, `words`, `words_without_tokens`.
    - kind "f1": chunk (entity) F1 over IOB2 tags by seqeval's default mode, which finds and matches chunks as the
      CoNLL `conlleval` script does (see modeling_cove/metrics/seqeval_cove). A None is replaced by
      `NO_TOKEN_TAG` ("B-<no-token>"): it matches no gold tag, it ends any chunk that runs into it (so that chunk
      is wrong too), and it is itself a predicted chunk, i.e. a false positive. Returns `precision`, `recall`,
      `f1` (fractions in [0, 1]), `accuracy` (token accuracy, Nones wrong), `per_type` (gold and predicted types
      except "<no-token>") and `words_without_tokens`.

    Raises:
        ValueError: an unknown kind, or sentences / words of gold and predicted that do not pair up (naming the
        sentence).
    """
    if kind not in ("f1", "accuracy"):
        raise ValueError(f"kind must be 'f1' or 'accuracy', got {kind!r}")
    if len(gold) != len(predicted):
        raise ValueError(f"{len(gold)} gold sentences but {len(predicted)} predicted sentences")
    if not gold:
        raise ValueError("no sentences to score")
    without_tokens = words = correct = 0
    filled = []
    for row, (gold_tags, predicted_tags) in enumerate(zip(gold, predicted)):
        if len(gold_tags) != len(predicted_tags):
            raise ValueError(f"sentence {row}: {len(gold_tags)} gold tags but {len(predicted_tags)} predictions")
        without_tokens += sum(tag is None for tag in predicted_tags)
        words += len(gold_tags)
        correct += sum(p is not None and p == g for p, g in zip(predicted_tags, gold_tags))
        filled.append([NO_TOKEN_TAG if tag is None else tag for tag in predicted_tags])
    if kind == "accuracy":
        if words == 0:
            raise ValueError("no words to score")
        return {"accuracy": correct / words, "words": words, "words_without_tokens": without_tokens}
    result = load_seqeval_metric().compute(predictions=filled, references=[list(tags) for tags in gold])
    no_token_type = NO_TOKEN_TAG[2:]
    result["per_type"] = {name: row for name, row in result["per_type"].items() if name != no_token_type}
    result["words_without_tokens"] = without_tokens
    return result


def tokenization_mismatch(tokenizer, sentences) -> dict:
    """How much the tokens of the pre-split words differ from the tokens of the raw text, over `sentences` (rows
    with `words` and `text`, e.g. a split of `load_tagging_splits`).

    For each sentence, A = the tokens of `tokenizer(words, is_split_into_words=True)` and B = those of
    `tokenizer(text)` (no special tokens), each token as its surface string (the characters its offsets cover, so
    that unknown words still compare). A and B are aligned by `difflib.SequenceMatcher` (longest matching blocks,
    order kept).

    Returns a dict:
        sentences, mismatched_sentences: sentences where A != B; sentence_mismatch_rate = mismatched / sentences.
        split_tokens, text_tokens: the numbers of tokens of A and of B over all sentences.
        unmatched_split_tokens, unmatched_text_tokens: tokens of A (of B) outside the matching blocks.
        token_mismatch_rate = (unmatched_split_tokens + unmatched_text_tokens) / (split_tokens + text_tokens),
        i.e. 1 - difflib's similarity ratio pooled over the sentences (0 = identical).
    """
    if isinstance(sentences, Dataset):
        words, texts = [list(w) for w in sentences["words"]], list(sentences["text"])
    else:
        words, texts = [list(s["words"]) for s in sentences], [s["text"] for s in sentences]
    if not words:
        raise ValueError("no sentences to compare")
    split = tokenizer(words, is_split_into_words=True, add_special_tokens=False, return_offsets_mapping=True)
    raw = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    counts = dict.fromkeys(("mismatched_sentences", "split_tokens", "text_tokens", "unmatched_split_tokens",
                            "unmatched_text_tokens"), 0)
    for row, (sentence_words, text) in enumerate(zip(words, texts)):
        a = [sentence_words[w][s:e] for w, (s, e) in zip(split.word_ids(row), split["offset_mapping"][row])
             if w is not None]
        b = [text[s:e] for s, e in raw["offset_mapping"][row]]
        matched = sum(block.size for block in difflib.SequenceMatcher(None, a, b, autojunk=False)
                      .get_matching_blocks())
        counts["mismatched_sentences"] += a != b
        counts["split_tokens"] += len(a)
        counts["text_tokens"] += len(b)
        counts["unmatched_split_tokens"] += len(a) - matched
        counts["unmatched_text_tokens"] += len(b) - matched
    total = counts["split_tokens"] + counts["text_tokens"]
    unmatched = counts["unmatched_split_tokens"] + counts["unmatched_text_tokens"]
    return {
        "sentences": len(words),
        **counts,
        "sentence_mismatch_rate": counts["mismatched_sentences"] / len(words),
        "token_mismatch_rate": unmatched / total if total else 0.0,
    }
