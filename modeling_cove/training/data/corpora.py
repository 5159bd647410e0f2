"""The corpora of MT pretraining (`cove-train-mt --corpora`): which corpora a run reads, the held-out splits carved
from a parallel file, the deduplication against evaluation test sentences, and the training mixture.

A corpus is a named translation dataset (`NAMED_CORPORA`: read by `modeling_cove.data.load_translation` from
`--data-dir` or the Hub, with its own train / validation / test splits) or a parallel text file
(`English<TAB>German` per line, no header, plain or .gz/.xz: `modeling_cove.data.read_parallel_file`). Its name, the
key of its figures in metrics.json and data_stats.json, is the dataset's name or the file's stem (`corpus_name`).

- A file has no splits (`carve_heldout`): its pairs are grouped so that no English and no German sentence (after
  `normalize_sentence`) is on two sides of a split — pairs that share either side are one group (a German sentence
  often translates several English paraphrases) —, the groups shuffled with the run's seed, and whole groups go to
  validation until it holds `heldout_pairs` pairs, then to test likewise (the last group may take a split a few pairs
  past that); every other group trains. The groups are ordered by their content before the shuffle, so the file's
  order (often sorted by length) plays no part, and the held-out splits keep the order they were drawn in
  (`--limit-eval` then takes a random sample, not the shortest pairs).
- Deduplication (`ExcludedSentences`): every training pair of every corpus, and every held-out pair carved from a
  file, whose English side normalises to an excluded sentence (one of a named task's test split, or a line of a
  sentence file) is dropped; data_stats.json counts them per corpus and split, and per source over the splits. A
  named dataset keeps its own validation and test splits whole, so that its figures stay those of the published
  splits (Multi30k's captions, for one, share sentences with SNLI's test premises).
- Held-out splits across corpora (`load_corpora`): with two corpora or more, a training pair of one that shares a
  sentence of either language with another's validation or test split is dropped (data_stats.json:
  `heldout_overlap_pairs`, keyed by the other corpus), so no corpus's figures are measured on sentences the mixture
  trains on.
- The mixture (`load_corpora`): every corpus's training pairs, concatenated in the order of the corpora and shuffled
  with the run's seed (a single named dataset keeps its order, as a run on it alone always did); `limit_train` then
  keeps its first pairs. Its column `corpus` holds each pair's corpus index.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from .texts import TEXT_SOURCES, iter_task_texts, read_text_file

__all__ = ["carve_heldout", "check_corpora", "column_lists", "corpus_name", "corpus_names", "CorpusError",
           "DEFAULT_HELDOUT_PAIRS", "EXCLUDABLE_TASKS", "ExcludedSentences", "load_corpora", "MTCorpora",
           "NAMED_CORPORA", "normalize_sentence"]

NAMED_CORPORA = ("multi30k", "iwslt", "wmt17", "tsv")
EXCLUDABLE_TASKS = tuple(task for task in TEXT_SOURCES if task != "squad")  # the named sources with a test split
DEFAULT_HELDOUT_PAIRS = 2000
EVAL_SPLITS = ("validation", "test")
SPLITS = ("train", *EVAL_SPLITS)
# streams of numpy's generator under the run's seed: the held-out carving of a file, the mixture's order
CARVE_STREAM, MIX_STREAM = 1, 2


class CorpusError(ValueError):
    """A corpus, a parallel file or an exclusion source a run cannot read; the message names it."""


def corpus_name(spec: str) -> str:
    """The name of a corpus: a named dataset's name, else the file's stem (`pairs.tsv.xz` -> `pairs`)."""
    from modeling_cove.data import COMPRESSED_OPENERS

    if spec in NAMED_CORPORA:
        return spec
    name = Path(spec).name
    for suffix in COMPRESSED_OPENERS:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return Path(name).stem or name


def corpus_names(specs) -> list:
    """The names of the corpora `specs`; a CorpusError when there are none or two share a name."""
    if not specs:
        raise CorpusError("no translation corpus given (--corpora NAME_OR_FILE ...)")
    names = {}
    for spec in specs:
        other = names.setdefault(corpus_name(spec), spec)
        if other != spec or list(specs).count(spec) > 1:
            raise CorpusError(f"corpora {other!r} and {spec!r} share the name {corpus_name(spec)!r}, which keys "
                              "their figures in metrics.json: give each corpus once, files under different names")
    return list(names)


def check_corpora(specs) -> None:
    """Each of `specs` is a named dataset or an existing file; else a CorpusError naming it."""
    for spec in specs:
        if spec not in NAMED_CORPORA and not Path(spec).is_file():
            raise CorpusError(f"corpus {spec!r} is neither a translation dataset ({', '.join(NAMED_CORPORA)}) nor a "
                              "file")


@lru_cache(maxsize=None)
def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


# an English clitic that Penn-Treebank-style tokenized text splits off the word before it ("is n't", "it 's")
CLITIC_SPLIT = re.compile(r"\s+(n['’]t|['’](?:s|re|ve|ll|d|m))(?=\s|$)")


def normalize_sentence(text: str) -> str:
    """The form sentences are compared in: lower-cased, split-off clitics joined back ("is n't" -> "isn't"), every
    punctuation character (Unicode category P*) removed, runs of whitespace made one space, no space at either end.
    "Who discovered America?" and the tokenized "who discovered america ?" both become "who discovered america";
    "Isn't it great?" and "is n't it great ?" both "isnt it great"."""
    joined = CLITIC_SPLIT.sub(r"\1", text.lower())
    kept = "".join(char for char in joined if not _is_punctuation(char))
    return " ".join(kept.split())


def column_lists(dataset, *names: str) -> tuple:
    """The columns `names` of a `datasets.Dataset` as Python lists, read in one batch: iterating a column (or indexing
    it row by row) formats one row at a time through Arrow, ~30 times slower on the 200k pairs of a mixture."""
    batch = dataset.select_columns(list(names))[:]
    return tuple(batch[name] for name in names)


def carve_heldout(english: list, german: list, pairs_per_split: int, seed: int) -> dict:
    """{"train", "validation", "test": row indices} of a parallel file's pairs (`english`, `german`: their sides),
    carved as the module docstring says: the same for the same seed and the same pairs, whatever their order in the
    file. The held-out splits are in the order they were drawn in, the training split in the file's order."""
    keys = {"en": [normalize_sentence(text) for text in english], "de": [normalize_sentence(text) for text in german]}
    parent = list(range(len(english)))  # union-find over the pairs: one set per group of linked pairs

    def root(index: int) -> int:
        while parent[index] != index:
            parent[index] = parent[parent[index]]
            index = parent[index]
        return index

    for side in ("en", "de"):
        first = {}
        for index, key in enumerate(keys[side]):
            a, b = root(index), root(first.setdefault(key, index))
            parent[max(a, b)] = min(a, b)
    groups = {}
    for index in range(len(english)):
        groups.setdefault(root(index), []).append(index)
    # a group is named by its smallest normalised English sentence (no two groups share one): sorted by name, the
    # groups' order, and so the draw, depends on the pairs and the seed, not on the file's line order
    ordered = sorted(groups.values(), key=lambda members: min(keys["en"][i] for i in members))
    parts = {split: [] for split in SPLITS}
    for position in np.random.default_rng([seed, CARVE_STREAM]).permutation(len(ordered)):
        split = next((s for s in EVAL_SPLITS if len(parts[s]) < pairs_per_split), "train")
        parts[split].extend(sorted(ordered[position], key=lambda i: (english[i], german[i])))
    parts["train"].sort()
    return parts


@dataclass
class ExcludedSentences:
    """Normalised sentences whose pairs a run drops, by source (a task's name, or a sentence file's path)."""

    sources: dict = field(default_factory=dict)

    @classmethod
    def read(cls, tasks=(), files=(), data_dir=None) -> "ExcludedSentences":
        """The test sentences of `tasks` (read by `modeling_cove.data` from `data_dir`, or the Hub) and the lines of
        `files` (plain text, one sentence per line, .gz/.xz read decompressed); a CorpusError names what failed."""
        sources = {}
        for task in tasks or ():
            try:
                texts = list(iter_task_texts(task, data_dir, splits=("test",), raw_tagging_text=True))
            except (OSError, ValueError) as err:
                raise CorpusError(f"--exclude-test-sentences {task}: {err}") from None
            sources[task] = texts
        for path in files or ():
            try:
                sources[str(path)] = read_text_file(Path(path)).splitlines()
            except (OSError, ValueError) as err:
                raise CorpusError(f"--exclude-sentences {path}: {err}") from None
        normalised = {source: {normalize_sentence(t) for t in texts} - {""} for source, texts in sources.items()}
        return cls(normalised)

    def counts(self) -> dict:
        """{source: number of distinct normalised sentences}."""
        return {source: len(sentences) for source, sentences in self.sources.items()}

    def matches(self, english: list) -> tuple:
        """(indices of the sentences of `english` to keep, {source: how many of `english` it matches}); a sentence
        matched by several sources counts for each."""
        if not self.sources:
            return list(range(len(english))), {}
        keep, by_source = [], {source: 0 for source in self.sources}
        for index, text in enumerate(english):
            key = normalize_sentence(text)
            hits = [source for source, sentences in self.sources.items() if key in sentences]
            for source in hits:
                by_source[source] += 1
            if not hits:
                keep.append(index)
        return keep, by_source


@dataclass
class MTCorpora:
    """What a run trains and evaluates on, before tokenization.

    Attributes:
        names: the corpora's names, in the order given (the first one's validation split drives the lr schedule).
        train: the training mixture (columns `src`, `tgt`, `corpus`: the pair's index into `names`).
        evaluation: {name: DatasetDict(validation, test)} (columns `src`, `tgt`).
        stats: for data_stats.json: {"corpora": {name: its reading, pairs and excluded pairs},
            "excluded_sentences": {source: distinct normalised sentences}}.
    """

    names: list
    train: object
    evaluation: dict
    stats: dict


def _file_splits(spec: str, settings: dict) -> tuple:
    """A parallel file read and carved into splits, and what to record of it."""
    from datasets import DatasetDict

    from modeling_cove.data import read_parallel_file

    try:
        pairs = read_parallel_file(spec)
    except (OSError, ValueError) as err:
        raise CorpusError(str(err)) from None
    size = settings["heldout_pairs"]
    parts = carve_heldout(*column_lists(pairs, "src", "tgt"), size, settings["seed"])
    if not parts["train"] or len(parts["test"]) < size:
        raise CorpusError(f"{spec}: {len(pairs)} pairs are too few to carve {size} validation and {size} test pairs "
                          "by English sentence and keep some to train on; lower --heldout-pairs")
    splits = DatasetDict({split: pairs.select(indices) for split, indices in parts.items()})
    return splits, {"read_from": spec, "pairs_in_file": len(pairs), "heldout_pairs_per_split": size}


def _corpus_splits(spec: str, settings: dict) -> tuple:
    from modeling_cove.data import load_translation

    if spec not in NAMED_CORPORA:
        return _file_splits(spec, settings)
    splits = load_translation(settings["data_dir"], spec)
    return splits, {"read_from": f"{spec} ({settings['data_dir'] or 'Hub'})"}


def _drop_excluded(splits, excluded: ExcludedSentences, checked) -> dict:
    """Drop the excluded pairs from the splits `checked` (in place in `splits`); returns what went, for the
    record."""
    dropped, by_source = {}, {}
    for split in checked:
        keep, hits = excluded.matches(*column_lists(splits[split], "src"))
        dropped[split] = len(splits[split]) - len(keep)
        if dropped[split]:
            splits[split] = splits[split].select(keep)
        for source, count in hits.items():
            by_source[source] = by_source.get(source, 0) + count
    return {"excluded_pairs": dropped, "excluded_pairs_by_source": by_source}


def _drop_other_corpora_heldout(names: list, read: list) -> None:
    """Each corpus's training pairs that share a sentence of either language (`normalize_sentence`) with another
    corpus's validation or test split are dropped, and counted in its statistics (`heldout_overlap_pairs`, by the
    other corpus): the carving keeps a file's own splits apart, this keeps every corpus's apart from the mixture."""
    heldout = [{side: {normalize_sentence(text) for split in EVAL_SPLITS
                       for text in column_lists(splits[split], side)[0]} for side in ("src", "tgt")}
               for splits, _ in read]
    for index, (splits, info) in enumerate(read):
        english, german = column_lists(splits["train"], "src", "tgt")
        keys = [(normalize_sentence(en), normalize_sentence(de)) for en, de in zip(english, german)]
        counts, dropped = {}, set()
        for other, (name, sentences) in enumerate(zip(names, heldout)):
            if other == index:
                continue
            hits = {row for row, (en, de) in enumerate(keys) if en in sentences["src"] or de in sentences["tgt"]}
            new = hits - dropped  # a pair counts for the first corpus it meets
            if new:
                counts[name] = len(new)
            dropped |= new
        if dropped:
            splits["train"] = splits["train"].select([row for row in range(len(keys)) if row not in dropped])
        info["heldout_overlap_pairs"] = counts


def load_corpora(settings: dict) -> MTCorpora:
    """The corpora of `settings["corpora"]` read, carved, deduplicated (`exclude_test_sentences`,
    `exclude_sentences`), cut to `limit_eval` per evaluation split, and mixed (`limit_train`); see the module
    docstring. Errors of a named dataset's files are raised as `load_translation` raises them; a parallel file, an
    exclusion source or an empty evaluation split is a CorpusError."""
    from datasets import DatasetDict, concatenate_datasets

    names = corpus_names(settings["corpora"])
    excluded = ExcludedSentences.read(settings["exclude_test_sentences"], settings["exclude_sentences"],
                                      settings["data_dir"])
    read = []
    for spec, name in zip(settings["corpora"], names):
        splits, info = _corpus_splits(spec, settings)
        info.update(_drop_excluded(splits, excluded, ("train",) if spec in NAMED_CORPORA else SPLITS))
        read.append((splits, info))
    if len(read) > 1:
        _drop_other_corpora_heldout(names, read)
    trains, evaluation, stats = [], {}, {}
    for index, (name, (splits, info)) in enumerate(zip(names, read)):
        for split in EVAL_SPLITS:
            if settings["limit_eval"]:
                splits[split] = splits[split].select(range(min(settings["limit_eval"], len(splits[split]))))
            if not len(splits[split]):
                raise CorpusError(f"corpus {name!r}: its {split} split is empty")
        info["pairs"] = {split: len(splits[split]) for split in SPLITS}
        trains.append(splits["train"].add_column("corpus", [index] * len(splits["train"])))
        evaluation[name] = DatasetDict({split: splits[split] for split in EVAL_SPLITS})
        stats[name] = info
    train = concatenate_datasets(trains)
    if len(trains) > 1 or any(spec not in NAMED_CORPORA for spec in settings["corpora"]):  # a file: often sorted
        train = train.select(np.random.default_rng([settings["seed"], MIX_STREAM]).permutation(len(train)))
    if settings["limit_train"]:
        train = train.select(range(min(settings["limit_train"], len(train))))
    return MTCorpora(names, train, evaluation, {"corpora": stats, "excluded_sentences": excluded.counts()})
