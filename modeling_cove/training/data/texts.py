"""The texts a command reads, one family: text and TSV files (`read_texts`), the English side of a named dataset
(`iter_task_texts`, for vocabularies) and a pretraining corpus (`corpus_texts`: a local dataset's training texts, a
text file or a Hub dataset). Compressed files (.gz, .xz) open through `modeling_cove.data.open_text`."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import List, Optional

from .tagging import TAGGING_TASKS, load_tagging_splits

__all__ = ["corpus_texts", "is_text_file", "iter_task_texts", "LOCAL_CORPORA", "local_texts", "read_split_texts",
           "read_text_file", "read_texts", "TEXT_SOURCES"]

TAGGING_SOURCES = tuple(TAGGING_TASKS)  # sentences as words
TEXT_SOURCES = ("multi30k", "iwslt", "wmt17", "sst2", "sst5", "trec6", "trec50", "imdb", "snli", "squad",
                *TAGGING_SOURCES)
TRANSLATION_SOURCES = ("multi30k", "iwslt", "wmt17")


def iter_task_texts(task: str, data_dir=None, splits=None, raw_tagging_text: bool = False):
    """English texts of the splits `splits` (default: every split) of a named source (the source side for
    translation; SQuAD's questions and each distinct context once), read by `modeling_cove.data` from `data_dir` or
    the Hub. A tagging task's sentences are its words joined by spaces, or with `raw_tagging_text` the sentence as
    the file writes it where it has one (CoNLL-U's `# text`). A split the source does not have is a ValueError."""
    from ... import data

    if task not in TEXT_SOURCES:
        raise ValueError(f"unknown text source {task!r}; choose from {', '.join(TEXT_SOURCES)}")
    if task in TRANSLATION_SOURCES:
        dd, columns = data.load_translation(data_dir, task), ["src"]
    elif task == "squad":
        dd, columns = data.load_squad(data_dir), ["question", "context"]
    elif task in TAGGING_SOURCES:
        if data_dir is None:
            raise ValueError(f"the tagging task {task!r} is read from a local data folder: give --data-dir")
        dd, columns = load_tagging_splits(task, data_dir), ["text" if raw_tagging_text else "words"]
    else:
        dd = data.load_classification(task, data_dir)
        columns = [c for c in ("text", "text_pair") if c in dd["train"].column_names]
    missing = [split for split in (splits or ()) if split not in dd]
    if missing:
        raise ValueError(f"{task} has no {', '.join(missing)} split (it has {', '.join(dd)})")
    for split in (dd[name] for name in (splits or dd)):
        for column in columns:
            seen_contexts = set()
            for text in split[column]:
                if column == "words":
                    text = " ".join(text)
                elif column == "context":  # many questions share one context: count it once
                    if text in seen_contexts:
                        continue
                    seen_contexts.add(text)
                yield text


def read_texts(path, column: Optional[str] = None) -> List[str]:
    """Lines of a text file, or one column (by header name) of a TSV file with a header line."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such text file: {path}")
    with open(path, encoding="utf-8", newline="") as f:
        if column is None:
            return [line.rstrip("\r\n") for line in f if line.strip()]
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, None)
        if header is None or column not in header:
            raise ValueError(f"{path}: no column {column!r} in the header {header}")
        position = header.index(column)
        texts = []
        for line_no, row in enumerate(reader, start=2):
            if len(row) != len(header):
                raise ValueError(f"{path}:{line_no}: expected {len(header)} TAB-separated fields, got {len(row)}")
            texts.append(row[position])
        return texts


# name -> (loader, what it reads): the English training texts of the local data (modeling_cove.data's splits)
LOCAL_CORPORA = {
    "imdb": "IMDb train reviews (the 90% the classifiers train on), whole",
    "sst": "SST train sentences (sentence-level trees; SST-2's training phrases come from the same trees)",
    "trec": "TREC train questions (the 90% the classifiers train on)",
    "multi30k": "Multi30k train English captions",
    "snli": "SNLI premises and hypotheses of the 90% of dev the classifier trains on",
    "squad": "SQuAD contexts and questions of the training articles (~80% of dev's articles)",
}


def read_split_texts(folder, column: str) -> List[str]:
    """One column of a folder's train.tsv, validation.tsv and test.tsv (`read_texts`), in that order."""
    return [text for split in ("train", "validation", "test")
            for text in read_texts(Path(folder) / f"{split}.tsv", column)]


def local_texts(name: str, data_dir) -> list:
    """The training texts of local corpus `name` (a key of LOCAL_CORPORA) under `data_dir`."""
    from ...data import load_classification, load_squad, load_translation

    if name == "imdb":
        return list(load_classification("imdb", data_dir, imdb_words=10**9)["train"]["text"])
    if name in ("sst", "trec"):
        return list(load_classification({"sst": "sst5", "trec": "trec6"}[name], data_dir)["train"]["text"])
    if name == "multi30k":
        return list(load_translation(data_dir)["train"]["src"])
    if name == "snli":
        train = load_classification("snli", data_dir)["train"]
        return list(dict.fromkeys(list(train["text"]) + list(train["text_pair"])))  # premises repeat: once each
    if name == "squad":
        train = load_squad(data_dir)["train"]
        return list(dict.fromkeys(list(train["context"]))) + list(train["question"])
    raise ValueError(f"unknown local corpus {name!r}; choose from {sorted(LOCAL_CORPORA)}")


def is_text_file(source: str) -> bool:
    """Whether `corpus_texts` reads `source` as a text file: neither a LOCAL_CORPORA name nor hf:<id> (nor a
    tagger's `train-rest`)."""
    return source not in LOCAL_CORPORA and source != "train-rest" and not source.startswith("hf:")


def corpus_texts(source: str, data_dir=None, text_column: str = "text") -> list:
    """The texts of one corpus `source`: a LOCAL_CORPORA name (read from `data_dir`), a text file (one text per
    non-empty line; .xz, .gz and .bz2 read decompressed) or `hf:<dataset id>[:<config>]` (its "train" split, column `text_column`, empty rows dropped)."""
    if source in LOCAL_CORPORA:
        if data_dir is None:
            raise ValueError(f"corpus {source!r} is read from the local data: give data_dir (a local data folder "
                             "laid out as docs/data.md describes)")
        return local_texts(source, data_dir)
    if source.startswith("hf:"):
        import datasets

        dataset_id, _, config_name = source[3:].partition(":")
        rows = datasets.load_dataset(dataset_id, config_name or None, split="train")
        if text_column not in rows.column_names:
            raise ValueError(f"{source} has no column {text_column!r}; its columns are {rows.column_names}")
        return [t for t in rows[text_column] if t and t.strip()]
    path = Path(source)
    if not path.is_file():
        raise ValueError(f"corpus {source!r} is neither a local corpus ({', '.join(sorted(LOCAL_CORPORA))}), an "
                         "hf:<dataset id> nor a text file")
    return [line.strip() for line in read_text_file(path).splitlines() if line.strip()]


def read_text_file(path: Path) -> str:
    """A UTF-8 text file, decompressed when its name ends in .xz, .gz or .bz2; a file that does not decompress or
    decode is a ValueError naming it."""
    import bz2
    import gzip
    import lzma

    openers = {".xz": lzma.open, ".gz": gzip.open, ".bz2": bz2.open}
    try:
        if path.suffix in openers:
            with openers[path.suffix](path, "rt", encoding="utf-8") as stream:
                return stream.read()
        return path.read_text(encoding="utf-8")
    except (OSError, EOFError, lzma.LZMAError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not a readable UTF-8 text file ({type(err).__name__}: {err})") from None
