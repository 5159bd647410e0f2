"""Dataset adapters: every task as a `datasets.DatasetDict` with standard columns, from local files or Hub ids.

- `load_translation` -> train/validation/test with columns `src`, `tgt` (raw text, English -> German).
- `load_classification(task)` -> train/validation/test with `text`, [`text_pair`], `label` (a `ClassLabel`).
- `load_squad` -> train/validation with `id`, `title`, `context`, `question`, `answers` (SQuAD v1.1 layout).

`data_dir` is a local data folder (see docs/data.md for its layout and sources); with `data_dir=None` the Hub
datasets of `HUB_IDS` (listed in docs/transformers_notes.md) are used. Splits that the local data lacks are
documented where they are made:

- TREC, IMDb: no validation split exists; 10% of train (fixed seed 13) is held out as validation.
- SST-2 (SentEval, phrase-level train, as the paper), SST-5 (sentence-level trees): official train/dev/test.
- SNLI: only dev and test exist locally. We train on 90% of dev, validate on the other 10%, and test on test.
- SQuAD: only dev exists locally. It is split by article (seed 0): ~80% of the articles train, the rest evaluate.

Your own data: a folder with `train.tsv`, `validation.tsv`, `test.tsv` (header line; tab-separated) loads with
`load_translation(folder, "tsv")` (columns `en`, `de`) or `load_classification("tsv", folder)` (columns `text`,
optional `text_pair`, `label` as label names; the label set is taken from all three files, sorted). The embedded
default data in `examples/` uses this layout. A parallel text file (`English<TAB>German` per line, no header,
no splits; docs/data.md) loads with `read_parallel_file`.
"""

import gzip
import json
import lzma
import random
import re
import zlib
from pathlib import Path
from typing import Optional

from datasets import ClassLabel, Dataset, DatasetDict, Features, Sequence, Value

__all__ = ["first_words", "HUB_IDS", "load_classification", "load_squad", "load_translation", "MULTI30K_SPLIT_FILES",
           "open_text", "ptb_tree_leaves", "read_parallel_file", "read_tsv_splits", "squad_article_split", "squad_rows",
           "TASKS"]

VALIDATION_SEED = 13
VALIDATION_FRACTION = 0.1
SQUAD_SPLIT_SEED = 0
SQUAD_TRAIN_FRACTION = 0.8

TASKS = ("sst2", "sst5", "trec6", "trec50", "imdb", "snli", "tsv")
TSV_SPLITS = ("train", "validation", "test")
LABEL_NAMES = {
    "sst2": ["negative", "positive"],
    "sst5": ["very negative", "negative", "neutral", "positive", "very positive"],
    "imdb": ["negative", "positive"],
    "trec6": ["ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM"],
    "snli": ["entailment", "neutral", "contradiction"],
}
HUB_IDS = {
    "sst2": "stanfordnlp/sst2",
    "sst5": "SetFit/sst5",
    "imdb": "stanfordnlp/imdb",
    "trec6": "CogComp/trec",
    "trec50": "CogComp/trec",
    "snli": "stanfordnlp/snli",
    "multi30k": "bentrevett/multi30k",
    "iwslt": "IWSLT/iwslt2017",
    "wmt17": "wmt/wmt17",
    "squad": "rajpurkar/squad",
}
TRANSLATION_FEATURES = Features({"src": Value("string"), "tgt": Value("string")})
COMPRESSED_OPENERS = {".gz": gzip.open, ".xz": lzma.open}  # the suffixes read decompressed, and how
PTB_UNESCAPE = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}",
                "``": '"', "''": '"', "`": "'"}


def _open_by_suffix(path: Path, mode: str, **kwargs):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data file not found: {path}")
    return COMPRESSED_OPENERS.get(path.suffix, open)(path, mode, **kwargs)


def open_text(path: Path, encoding: str = "utf-8", errors: str = "strict"):
    """A text file for reading, decompressed by suffix (.gz, .xz); FileNotFoundError naming it when absent."""
    return _open_by_suffix(path, "rt", encoding=encoding, errors=errors)


def _read_lines(path: Path, encoding: str = "utf-8") -> list:
    with open_text(path, encoding) as f:
        return [line.rstrip("\n").rstrip("\r") for line in f]


def _check_data_dir(data_dir, sub: str) -> Path:
    root = Path(data_dir)
    if not root.is_dir():
        raise FileNotFoundError(f"--data-dir {root} does not exist or is not a directory")
    folder = root / sub
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder} not found: the data dir must contain '{sub}/' (see docs/data.md)")
    return folder


def _split_off_validation(train: Dataset, fraction: float = VALIDATION_FRACTION, seed: int = VALIDATION_SEED):
    """Hold out a fixed random `fraction` of train as validation (deterministic)."""
    parts = train.train_test_split(test_size=fraction, seed=seed, shuffle=True)
    return parts["train"], parts["test"]


def _classification_features(names: list, pair: bool = False) -> Features:
    columns = {"text": Value("string")}
    if pair:
        columns["text_pair"] = Value("string")
    columns["label"] = ClassLabel(names=names)
    return Features(columns)


def first_words(text: str, n: int) -> str:
    """The first `n` whitespace-separated words of `text` (IMDb reviews are cut at 200 words, docs/paper.md §3)."""
    words = text.split()
    return " ".join(words[:n]) if len(words) > n else " ".join(words)


def ptb_tree_leaves(tree: str) -> str:
    """Sentence of a PTB-format SST tree, with PTB escapes undone."""
    leaves = re.findall(r"\(\d+ ([^()]+)\)", tree)
    return " ".join(PTB_UNESCAPE.get(w, w).replace("\\/", "/").replace("\\*", "*") for w in leaves)


def read_tsv_splits(folder, required: tuple) -> dict:
    """{split: list of row dicts} from `folder/{train,validation,test}.tsv` (header line, tab-separated, UTF-8 with
    or without a byte-order mark)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"TSV data folder not found: {folder}")
    splits = {}
    for split in TSV_SPLITS:
        path = folder / f"{split}.tsv"
        # utf-8-sig: a byte-order mark (written by Excel and some Windows editors) is not part of the first column
        lines = [line for line in _read_lines(path, encoding="utf-8-sig") if line.strip()]
        if not lines:
            raise ValueError(f"{path} is empty (expected a header line with columns {', '.join(required)})")
        header = lines[0].split("\t")
        missing = [c for c in required if c not in header]
        if missing:
            raise ValueError(f"{path}: header {header} lacks column(s) {missing}")
        rows = []
        for line_no, line in enumerate(lines[1:], start=2):
            fields = line.split("\t")
            if len(fields) != len(header):
                raise ValueError(f"{path}, line {line_no}: {len(fields)} fields, header has {len(header)}")
            rows.append(dict(zip(header, fields)))
        splits[split] = rows
    return splits


# ---------------------------------------------------------------------------------------------------------------
# translation


def read_parallel_file(path) -> Dataset:
    """The English->German pairs of a parallel text file as a Dataset with columns `src`, `tgt` (raw text), in the
    file's order: one pair per line, `English<TAB>German`, no header, UTF-8 (a byte-order mark is ignored), plain or
    compressed (.gz, .xz); blank lines are skipped. FileNotFoundError naming a missing file; ValueError naming the
    file and the line for a line that is not two tab-separated fields or is no UTF-8 text."""
    path = Path(path)
    src, tgt = [], []
    try:
        with _open_by_suffix(path, "rb") as f:  # bytes, decoded line by line: an error names its line
            for line_no, raw in enumerate(f, start=1):
                try:
                    line = raw.decode("utf-8-sig" if line_no == 1 else "utf-8").rstrip("\n").rstrip("\r")
                except UnicodeDecodeError as err:
                    raise ValueError(f"{path}, line {line_no}: not UTF-8 text ({err.reason})") from None
                if not line.strip():
                    continue
                fields = line.split("\t")
                if len(fields) != 2:
                    what = "no tab" if len(fields) == 1 else f"{len(fields)} tab-separated fields"
                    raise ValueError(f"{path}, line {line_no}: {what}; a parallel file has one pair per line, "
                                     "English<TAB>German")
                src.append(fields[0])
                tgt.append(fields[1])
    except (EOFError, lzma.LZMAError, gzip.BadGzipFile, zlib.error) as err:
        raise ValueError(f"{path}: does not decompress ({type(err).__name__}: {err})") from None
    return Dataset.from_dict({"src": src, "tgt": tgt}, features=TRANSLATION_FEATURES)


# Multi30k's splits as local files (<stem>.en.gz, <stem>.de.gz); the Hub copy's test split is the same 2016 Flickr set
MULTI30K_SPLIT_FILES = {"train": "train", "validation": "val", "test": "test_2016_flickr"}


def load_translation(data_dir: Optional[str] = None, name: str = "multi30k") -> DatasetDict:
    """English->German pairs as DatasetDict(train, validation, test) with columns `src`, `tgt` (raw text).

    Local: `data_dir/multi30k/{train,val,test_2016_flickr}.{en,de}.gz`. Hub: `bentrevett/multi30k`,
    `IWSLT/iwslt2017` (iwslt2017-en-de), `wmt/wmt17` (de-en).
    """
    features = TRANSLATION_FEATURES
    if name == "tsv":
        if data_dir is None:
            raise ValueError("load_translation(name='tsv') needs data_dir: a folder with train/validation/test.tsv")
        rows = read_tsv_splits(data_dir, ("en", "de"))
        return DatasetDict({s: Dataset.from_dict({"src": [r["en"] for r in split_rows],
                                                  "tgt": [r["de"] for r in split_rows]}, features=features)
                            for s, split_rows in rows.items()})
    if data_dir is not None:
        if name != "multi30k":
            raise ValueError(f"local translation data is only available for multi30k, not {name!r}")
        folder = _check_data_dir(data_dir, "multi30k")
        splits = {}
        for split, stem in MULTI30K_SPLIT_FILES.items():
            src = _read_lines(folder / f"{stem}.en.gz")
            tgt = _read_lines(folder / f"{stem}.de.gz")
            if len(src) != len(tgt):
                raise ValueError(f"{folder}/{stem}: {len(src)} English vs {len(tgt)} German lines")
            splits[split] = Dataset.from_dict({"src": src, "tgt": tgt}, features=features)
        return DatasetDict(splits)

    from datasets import load_dataset

    if name == "multi30k":
        raw = load_dataset(HUB_IDS["multi30k"])
        return DatasetDict({s: Dataset.from_dict({"src": raw[s]["en"], "tgt": raw[s]["de"]}, features=features)
                            for s in ("train", "validation", "test")})
    if name in ("iwslt", "wmt17"):
        raw = (load_dataset(HUB_IDS["iwslt"], "iwslt2017-en-de") if name == "iwslt"
               else load_dataset(HUB_IDS["wmt17"], "de-en"))
        out = {}
        for split in ("train", "validation", "test"):
            pairs = raw[split]["translation"]
            out[split] = Dataset.from_dict({"src": [p["en"] for p in pairs], "tgt": [p["de"] for p in pairs]},
                                           features=features)
        return DatasetDict(out)
    raise ValueError(f"unknown translation dataset {name!r}; choose multi30k, iwslt or wmt17")


# ---------------------------------------------------------------------------------------------------------------
# classification


def _local_tsv(task: str, root: Path, imdb_words: int) -> DatasetDict:
    """A folder of train/validation/test TSVs with a header (text, [text_pair,] label)."""
    rows = read_tsv_splits(root, ("text", "label"))
    names = sorted({r["label"] for split_rows in rows.values() for r in split_rows})
    # a pair task when the files have a text_pair column (decided on every split with rows: a header-only
    # train.tsv must not drop the column of the others); files that disagree are an error
    with_pair = {split: "text_pair" in split_rows[0] for split, split_rows in rows.items() if split_rows}
    pair = any(with_pair.values())
    if pair and not all(with_pair.values()):
        raise ValueError(f"{root}: some splits have a text_pair column and some do not: {with_pair}")
    features = _classification_features(names, pair=pair)
    out = {}
    for split, split_rows in rows.items():
        columns = {"text": [r["text"] for r in split_rows]}
        if pair:
            columns["text_pair"] = [r["text_pair"] for r in split_rows]
        columns["label"] = [names.index(r["label"]) for r in split_rows]
        out[split] = Dataset.from_dict(columns, features=features)
    return DatasetDict(out)


def _sst_splits(task: str, path_of_stem, parse_line) -> DatasetDict:
    """SST's train/dev/test files (`path_of_stem(stem)`), one example per non-empty line, `parse_line(line)` ->
    (text, label)."""
    splits = {}
    for split, stem in (("train", "train"), ("validation", "dev"), ("test", "test")):
        rows = [parse_line(line) for line in _read_lines(path_of_stem(stem)) if line.strip()]
        splits[split] = Dataset.from_dict({"text": [text for text, _ in rows], "label": [label for _, label in rows]},
                                          features=_classification_features(LABEL_NAMES[task]))
    return DatasetDict(splits)


def _local_sst2(task: str, root: Path, imdb_words: int) -> DatasetDict:
    """SST-2 from the SentEval binary sentiment files (text, tab, label)."""
    folder = _check_data_dir(root, "sst/senteval")

    def parse(line):
        text, label = line.rsplit("\t", 1)
        return text.strip(), int(label)

    return _sst_splits(task, lambda stem: folder / f"binary.sentiment-{stem}", parse)


def _local_sst5(task: str, root: Path, imdb_words: int) -> DatasetDict:
    """SST-5 from the PTB trees (root label, whole sentences)."""
    folder = _check_data_dir(root, "sst/trees")
    return _sst_splits(task, lambda stem: folder / f"{stem}.txt",
                       lambda line: (ptb_tree_leaves(line), int(line[1])))  # root label: "(3 (2 ..."


def _local_trec(task: str, root: Path, imdb_words: int) -> DatasetDict:
    """TREC-6 (coarse labels) or TREC-50 (fine labels); validation split off the training file."""
    folder = _check_data_dir(root, "trec")
    raw = {}
    for split, name in (("train", "train_5500.label"), ("test", "TREC_10.label")):
        rows = []
        for line in _read_lines(folder / name, encoding="latin-1"):
            if line.strip():
                label, text = line.split(" ", 1)
                rows.append((label, text.strip()))
        raw[split] = rows
    if task == "trec6":
        names = LABEL_NAMES["trec6"]
        key = lambda label: label.split(":")[0]  # noqa: E731
    else:
        names = sorted({label for rows in raw.values() for label, _ in rows})
        key = lambda label: label  # noqa: E731
    features = _classification_features(names)
    full = {s: Dataset.from_dict({"text": [t for _, t in rows], "label": [names.index(key(l)) for l, _ in rows]},
                                 features=features) for s, rows in raw.items()}
    train, validation = _split_off_validation(full["train"])
    return DatasetDict({"train": train, "validation": validation, "test": full["test"]})


def _local_imdb(task: str, root: Path, imdb_words: int) -> DatasetDict:
    """IMDb reviews cut to their first `imdb_words` words; validation split off the training file."""
    folder = _check_data_dir(root, "imdb")
    features = _classification_features(LABEL_NAMES["imdb"])
    full = {}
    for split in ("train", "test"):
        texts, labels = [], []
        with open_text(folder / f"{split}.jsonl.xz") as f:
            for line in f:
                row = json.loads(line)
                texts.append(first_words(row["text"].replace("<br />", " "), imdb_words))
                labels.append(1 if row["label"] == "pos" else 0)
        full[split] = Dataset.from_dict({"text": texts, "label": labels}, features=features)
    train, validation = _split_off_validation(full["train"])
    return DatasetDict({"train": train, "validation": validation, "test": full["test"]})


def _local_snli(task: str, root: Path, imdb_words: int) -> DatasetDict:
    """SNLI dev and test (no train here): training and validation are split off dev."""
    folder = _check_data_dir(root, "snli")
    features = _classification_features(LABEL_NAMES["snli"], pair=True)
    full = {}
    for split in ("dev", "test"):
        s1, s2, labels = (_read_lines(folder / f"{p}.{split}") for p in ("s1", "s2", "labels"))
        n = len(labels) - (labels[-1] == "")
        full[split] = Dataset.from_dict(
            {"text": [s.strip() for s in s1[:n]], "text_pair": [s.strip() for s in s2[:n]],
             "label": [LABEL_NAMES["snli"].index(label) for label in labels[:n]]},
            features=features,
        )
    train, validation = _split_off_validation(full["dev"])  # no SNLI train here: train on 90% of dev
    return DatasetDict({"train": train, "validation": validation, "test": full["test"]})


# the local readers of `load_classification` by task
_LOCAL_READERS = {
    "tsv": _local_tsv,
    "sst2": _local_sst2,
    "sst5": _local_sst5,
    "trec6": _local_trec,
    "trec50": _local_trec,
    "imdb": _local_imdb,
    "snli": _local_snli,
}


def _local_classification(task: str, root: Path, imdb_words: int) -> DatasetDict:
    return _LOCAL_READERS[task](task, root, imdb_words)


def _hub_classification(task: str, imdb_words: int) -> DatasetDict:
    from datasets import load_dataset

    if task == "sst2":  # GLUE SST-2: phrase-level train; the Hub test labels are hidden, so validation = test
        raw = load_dataset(HUB_IDS["sst2"])
        features = _classification_features(LABEL_NAMES["sst2"])
        conv = lambda d: Dataset.from_dict({"text": d["sentence"], "label": d["label"]}, features=features)  # noqa
        train, validation = _split_off_validation(conv(raw["train"]))
        return DatasetDict({"train": train, "validation": validation, "test": conv(raw["validation"])})
    if task == "sst5":
        raw = load_dataset(HUB_IDS["sst5"])
        features = _classification_features(LABEL_NAMES["sst5"])
        return DatasetDict({s: Dataset.from_dict({"text": raw[s]["text"], "label": raw[s]["label"]}, features=features)
                            for s in ("train", "validation", "test")})
    if task == "imdb":
        raw = load_dataset(HUB_IDS["imdb"])
        features = _classification_features(LABEL_NAMES["imdb"])
        conv = lambda d: Dataset.from_dict(  # noqa: E731
            {"text": [first_words(t.replace("<br />", " "), imdb_words) for t in d["text"]], "label": d["label"]},
            features=features)
        train, validation = _split_off_validation(conv(raw["train"]))
        return DatasetDict({"train": train, "validation": validation, "test": conv(raw["test"])})
    if task in ("trec6", "trec50"):
        raw = load_dataset(HUB_IDS[task], revision="refs/convert/parquet")
        column = "coarse_label" if task == "trec6" else "fine_label"
        names = raw["train"].features[column].names
        features = _classification_features(names)
        conv = lambda d: Dataset.from_dict({"text": d["text"], "label": d[column]}, features=features)  # noqa
        train, validation = _split_off_validation(conv(raw["train"]))
        return DatasetDict({"train": train, "validation": validation, "test": conv(raw["test"])})
    if task == "snli":
        raw = load_dataset(HUB_IDS["snli"]).filter(lambda row: row["label"] != -1)  # -1 = no gold label
        features = _classification_features(LABEL_NAMES["snli"], pair=True)
        return DatasetDict({s: Dataset.from_dict({"text": raw[s]["premise"], "text_pair": raw[s]["hypothesis"],
                                                  "label": raw[s]["label"]}, features=features)
                            for s in ("train", "validation", "test")})
    raise AssertionError(task)


def load_classification(task: str, data_dir: Optional[str] = None, imdb_words: int = 200) -> DatasetDict:
    """A classification task as DatasetDict(train, validation, test); columns `text`, [`text_pair`], `label`."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASKS)}")
    if data_dir is not None:
        return _local_classification(task, Path(data_dir), imdb_words)
    if task == "tsv":
        raise ValueError("task 'tsv' needs data_dir: a folder with train/validation/test.tsv")
    return _hub_classification(task, imdb_words)


# ---------------------------------------------------------------------------------------------------------------
# SQuAD


SQUAD_FEATURES = Features({
    "id": Value("string"),
    "title": Value("string"),
    "context": Value("string"),
    "question": Value("string"),
    "answers": {"text": Sequence(Value("string")), "answer_start": Sequence(Value("int32"))},
})


def squad_rows(squad_json: dict, titles: Optional[set] = None) -> dict:
    columns = {name: [] for name in SQUAD_FEATURES}
    for article in squad_json["data"]:
        if titles is not None and article["title"] not in titles:
            continue
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                columns["id"].append(qa["id"])
                columns["title"].append(article["title"])
                columns["context"].append(paragraph["context"])
                columns["question"].append(qa["question"])
                columns["answers"].append({"text": [a["text"] for a in qa["answers"]],
                                           "answer_start": [a["answer_start"] for a in qa["answers"]]})
    return columns


def squad_article_split(titles: list, train_fraction: float = SQUAD_TRAIN_FRACTION, seed: int = SQUAD_SPLIT_SEED):
    """Deterministic split of article titles: (train titles, evaluation titles)."""
    shuffled = sorted(titles)
    random.Random(seed).shuffle(shuffled)
    cut = round(len(shuffled) * train_fraction)
    return set(shuffled[:cut]), set(shuffled[cut:])


def load_squad(data_dir: Optional[str] = None) -> DatasetDict:
    """SQuAD v1.1 as DatasetDict(train, validation).

    Local (`data_dir/squad/dev-v1.1.json.xz`, dev only): split by ARTICLE, ~80% of the 48 articles (seed 0) for
    training and the rest for evaluation, so no context is shared between the two. Hub: `rajpurkar/squad`
    train/validation.
    """
    if data_dir is not None:
        folder = _check_data_dir(data_dir, "squad")
        with open_text(folder / "dev-v1.1.json.xz") as f:
            squad_json = json.load(f)
        train_titles, eval_titles = squad_article_split([a["title"] for a in squad_json["data"]])
        return DatasetDict({
            "train": Dataset.from_dict(squad_rows(squad_json, train_titles), features=SQUAD_FEATURES),
            "validation": Dataset.from_dict(squad_rows(squad_json, eval_titles), features=SQUAD_FEATURES),
        })
    from datasets import load_dataset

    raw = load_dataset(HUB_IDS["squad"])
    return DatasetDict({s: raw[s].cast(SQUAD_FEATURES) for s in ("train", "validation")})
