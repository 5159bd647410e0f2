"""MT pretraining on several corpora (modeling_cove.training.data.corpora, cove-train-mt --corpora): the parallel
file reader, sentence normalisation, held-out splits carved from a file by English sentence, the test-sentence
exclusion and its counts, the seeded training mixture (a resumed run equals an uninterrupted one), per-corpus <unk>
rates and metrics, the cove-t preset, and bad input ending in one line, exit 2, before anything is written. Tiny
configs on the toy Multi30k folder of test_train_mt plus small parallel TSV files written here."""

import gzip
import json
import lzma
import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import exit_of, require_data
from datasets import Dataset, DatasetDict
from test_train_mt import DE, EN, TINY, arguments, run, weights, write_toy_corpus

from modeling_cove import CoveConfig
from modeling_cove.data import load_translation, read_parallel_file
from modeling_cove.training.commands import train_mt as train_mt_command
from modeling_cove.training.commands.train_mt import (MTSetupError, check_output_dir, load_model_preset,
                                                      resolve_mt_settings)
from modeling_cove.training.data.corpora import (CorpusError, carve_heldout, check_corpora, corpus_names,
                                                 load_corpora, normalize_sentence)
from modeling_cove.training.data.translation import prepare_splits
from modeling_cove.training.loops import mt as mt_loop
from modeling_cove.training.loops.accelerate_loop import checkpoint_dirs, read_state
from modeling_cove.training.publishing.cards import encoder_export_card, mt_corpora_text, mt_results_table

pytestmark = pytest.mark.usefixtures("single_thread")

# pairs of the parallel file whose English side a test below excludes: two TREC test questions, one sentence file
TREC_TEST = ["HUM:ind Who discovered America ?", "NUM:dist How far is it from Denver to Aspen ?"]
EXCLUDED_BY_TREC = ["Who discovered America?\tWer hat Amerika entdeckt?",
                    "WHO  discovered America!\tWer entdeckte Amerika?"]
EXCLUDED_BY_FILE = ["The dog is white.\tDer Hund ist weiß."]
NOT_EXCLUDED = ["Who discovered Americas?\tWer entdeckte die Amerikas?"]


def reference_normal_form(text: str) -> str:
    """The comparison form for ASCII text, written independently of the library: lower-case, drop what is neither a
    word character nor a space, single spaces."""
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())


def toy_pairs(seed: int, n: int) -> list:
    """`n` lines `English<TAB>German` over the toy vocabulary, some English sentences repeated."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n):
        words = [rng.choice(EN) for _ in range(rng.randint(2, 6))]
        lines.append(" ".join(words).capitalize() + "!\t" + " ".join(DE[w] for w in words).capitalize() + "!")
    return lines + lines[:5]  # the first five English sentences twice


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """data/ (toy Multi30k + a tiny TREC), vectors.txt, pairs.tsv (60 pairs + the exclusion cases), exclude.txt."""
    root = tmp_path_factory.mktemp("corpora")
    write_toy_corpus(root / "data")
    trec = root / "data" / "trec"
    trec.mkdir()
    (trec / "train_5500.label").write_text("".join(f"HUM:ind Who is person {i} ?\n" for i in range(20)),
                                           encoding="latin-1")
    (trec / "TREC_10.label").write_text("\n".join(TREC_TEST) + "\n", encoding="latin-1")
    rng = np.random.default_rng(0)
    with open(root / "vectors.txt", "w", encoding="utf-8") as f:
        for word in EN[:-1] + ["."]:
            f.write(word + " " + " ".join(f"{x:.4f}" for x in rng.normal(size=8)) + "\n")
    lines = toy_pairs(5, 55) + EXCLUDED_BY_TREC + EXCLUDED_BY_FILE + NOT_EXCLUDED
    (root / "pairs.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with gzip.open(root / "data" / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as f:
        first_train = f.readline().strip()
    # the first Multi30k training sentence, written otherwise: its training pairs go too
    (root / "exclude.txt").write_text(f"the dog -- is WHITE\n{first_train.upper().replace('.', ' ?')}\n",
                                      encoding="utf-8")
    return root


def mt_args(toy, out, *extra):
    return ["--output-dir", str(out), "--data-dir", str(toy / "data"), "--vectors", str(toy / "vectors.txt"),
            "--config-overrides", json.dumps(TINY), "--batch-size", "16", "--max-length", "12", "--num-threads", "1",
            "--source-min-freq", "1", "--corpora", "multi30k", str(toy / "pairs.tsv"), *extra]


def settings_of(argv: list) -> dict:
    return resolve_mt_settings(arguments(argv), {})


# ---------------------------------------------------------------------------------------------------------------
# reading, names, normalisation


def test_parallel_files_read_plain_and_compressed_and_bad_lines_are_named(tmp_path):
    text = "\ufeffA dog.\tEin Hund.\n\nTwo men\tZwei Männer\r\n"  # a byte-order mark, a blank line, a CRLF end
    (tmp_path / "p.tsv").write_text(text, encoding="utf-8")
    with gzip.open(tmp_path / "p.tsv.gz", "wt", encoding="utf-8") as f:
        f.write(text)
    with lzma.open(tmp_path / "p.tsv.xz", "wt", encoding="utf-8") as f:
        f.write(text)
    for name in ("p.tsv", "p.tsv.gz", "p.tsv.xz"):
        pairs = read_parallel_file(tmp_path / name)
        assert pairs["src"] == ["A dog.", "Two men"] and pairs["tgt"] == ["Ein Hund.", "Zwei Männer"], name
    (tmp_path / "bad.tsv").write_text("a\tb\nc\td\nno tab here\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.tsv, line 3: no tab"):
        read_parallel_file(tmp_path / "bad.tsv")
    (tmp_path / "three.tsv").write_text("a\tb\tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"three.tsv, line 1: 3 tab-separated fields"):
        read_parallel_file(tmp_path / "three.tsv")
    (tmp_path / "latin.tsv").write_bytes("a\tb\nGr\u00fc\u00dfe\tx\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin.tsv, line 2: not UTF-8"):
        read_parallel_file(tmp_path / "latin.tsv")
    (tmp_path / "broken.tsv.xz").write_bytes(lzma.compress(text.encode())[:-8])
    with pytest.raises(ValueError, match=r"broken.tsv.xz: does not decompress"):
        read_parallel_file(tmp_path / "broken.tsv.xz")
    with pytest.raises(FileNotFoundError, match="missing.tsv"):
        read_parallel_file(tmp_path / "missing.tsv")


def test_sentences_compare_lower_cased_without_punctuation():
    assert normalize_sentence("Who discovered America?") == normalize_sentence("who discovered america ?") == (
        "who discovered america")
    assert normalize_sentence("  I  loved it ! ") == "i loved it"
    assert normalize_sentence("„Äh“ – naïve, café…") == "äh naïve café"  # Unicode punctuation goes too
    # clitics split off by tokenized test files meet the written form ("Isn't it great?" is an SST-2 test sentence)
    assert normalize_sentence("is n't it great ?") == normalize_sentence("Isn't it great?") == "isnt it great"
    assert normalize_sentence("it 's Tom 's , I 'm sure") == normalize_sentence("It’s Tom’s, I'm sure.")
    assert normalize_sentence("rock 'n' roll") == "rock n roll"  # a quote, not a clitic: the words stay apart
    assert normalize_sentence("it's 5 $") == "its 5 $"  # apostrophes go; symbols are no punctuation
    assert normalize_sentence("?!") == ""


def test_corpus_names_and_checks(tmp_path):
    (tmp_path / "pairs.tsv.xz").write_bytes(b"")
    assert corpus_names(["multi30k", str(tmp_path / "pairs.tsv.xz"), "tsv"]) == ["multi30k", "pairs", "tsv"]
    assert corpus_names(["a/b.txt.gz", "c/d"]) == ["b", "d"]
    with pytest.raises(CorpusError, match="share the name 'pairs'"):
        corpus_names(["x/pairs.tsv", "y/pairs.tsv.gz"])
    with pytest.raises(CorpusError, match="share the name 'multi30k'"):
        corpus_names(["multi30k", "multi30k"])
    with pytest.raises(CorpusError, match="no translation corpus"):
        corpus_names([])
    check_corpora(["wmt17", str(tmp_path / "pairs.tsv.xz")])
    with pytest.raises(CorpusError, match=r"corpus 'multi31k' is neither a translation dataset \(multi30k, iwslt, "
                                          r"wmt17, tsv\) nor a file"):
        check_corpora(["multi30k", "multi31k"])


# ---------------------------------------------------------------------------------------------------------------
# held-out carving, exclusion, mixture


def test_carving_keeps_each_sentence_on_one_side_and_follows_the_seed_not_the_file_order():
    # 13 English sentences, each 4-5 times in case / punctuation variants, in the file's (grouped) order; German
    # sentences shared across English ones link their pairs: number i and i + 13 (< 26) share one translation
    english = [f"Sentence number {i % 13}" + ("!" if i % 2 else ".") for i in range(60)]
    english = [text.upper() if i % 3 == 0 else text for i, text in enumerate(english)]
    german = [f"Satz {i % 13 % 5}." for i in range(60)]  # 13 English groups, linked into 5 by their German
    parts = carve_heldout(english, german, 6, seed=1)
    assert sorted(i for split in parts.values() for i in split) == list(range(60))  # each pair once
    for side in (english, german):
        sides = {split: {reference_normal_form(side[i]) for i in indices} for split, indices in parts.items()}
        assert not (sides["train"] & sides["validation"] or sides["train"] & sides["test"]
                    or sides["validation"] & sides["test"])
    groups = {g: [i for i in range(60) if i % 13 % 5 == g] for g in range(5)}  # the linked groups, by hand
    for split in ("validation", "test"):  # whole groups until the split holds 6 pairs
        assert any(set(parts[split]) == set(members) for members in groups.values()), split
    assert parts == carve_heldout(english, german, 6, seed=1)
    assert parts != carve_heldout(english, german, 6, seed=2)
    # the same pairs in another order: the same pairs in each split, the held-out ones in the same order
    order = list(reversed(range(60)))
    shuffled = carve_heldout([english[i] for i in order], [german[i] for i in order], 6, seed=1)
    for split in ("validation", "test"):
        assert [(english[order[i]], german[order[i]]) for i in shuffled[split]] == [
            (english[i], german[i]) for i in parts[split]]
    assert sorted(order[i] for i in shuffled["train"]) == parts["train"]


def test_file_splits_are_disjoint_by_english_sentence_and_deterministic(toy):
    settings = settings_of(mt_args(toy, "x", "--heldout-pairs", "8"))
    corpora = load_corpora(settings)
    assert corpora.names == ["multi30k", "pairs"]
    pairs = corpora.evaluation["pairs"]
    train = [s for s, c in zip(corpora.train["src"], corpora.train["corpus"]) if c == 1]
    sides = {"train": train, **{split: pairs[split]["src"] for split in ("validation", "test")}}
    normal = {split: {reference_normal_form(s) for s in texts} for split, texts in sides.items()}
    assert not (normal["train"] & normal["validation"] or normal["train"] & normal["test"]
                or normal["validation"] & normal["test"])
    assert all(len(sides[split]) >= 8 for split in ("validation", "test"))
    stats = corpora.stats["corpora"]["pairs"]
    # 60 + 4 lines, none excluded here; the training pairs that share a sentence with Multi30k's validation or test
    # split left the mixture (the toy corpora draw on one small vocabulary)
    assert sum(len(texts) for texts in sides.values()) == 60 + 4 - stats["heldout_overlap_pairs"].get("multi30k", 0)
    assert stats["pairs_in_file"] == 64 and stats["heldout_pairs_per_split"] == 8
    again = load_corpora(settings)
    assert again.evaluation["pairs"]["validation"]["src"] == pairs["validation"]["src"]
    other = load_corpora(settings_of(mt_args(toy, "x", "--heldout-pairs", "8", "--seed", "99")))
    assert other.evaluation["pairs"]["validation"]["src"] != pairs["validation"]["src"]
    # Multi30k keeps its own splits
    multi30k = load_translation(str(toy / "data"), "multi30k")
    for split in ("validation", "test"):
        assert corpora.evaluation["multi30k"][split]["src"] == multi30k[split]["src"]
    with pytest.raises(CorpusError, match=r"pairs.tsv: 64 pairs are too few to carve 40 validation and 40 test"):
        load_corpora(settings_of(mt_args(toy, "x", "--heldout-pairs", "40")))


def test_the_mixture_is_every_training_pair_shuffled_by_the_seed(toy):
    settings = settings_of(mt_args(toy, "x", "--heldout-pairs", "8"))
    mixture = load_corpora(settings).train
    corpora = load_corpora(settings)
    assert corpora.train["src"] == mixture["src"] and corpora.train["corpus"] == mixture["corpus"]
    multi30k = load_translation(str(toy / "data"), "multi30k")["train"]
    pairs = read_parallel_file(toy / "pairs.tsv")
    carved = [pairs[i] for i in range(len(pairs)) if pairs["src"][i] not in
              set(corpora.evaluation["pairs"]["validation"]["src"]) | set(corpora.evaluation["pairs"]["test"]["src"])]

    def heldout(name):  # a corpus's validation and test sentences, both languages, compared normalised
        return {normalize_sentence(text) for split in ("validation", "test") for side in ("src", "tgt")
                for text in corpora.evaluation[name][split][side]}

    def apart(rows, other):  # training pairs that share no sentence with the other corpus's held-out ones
        return [r for r in rows if not {normalize_sentence(r["src"]), normalize_sentence(r["tgt"])} & heldout(other)]

    expected = sorted([(r["src"], r["tgt"], 0) for r in apart(multi30k, "pairs")]
                      + [(r["src"], r["tgt"], 1) for r in apart(carved, "multi30k")])
    assert sorted(zip(mixture["src"], mixture["tgt"], mixture["corpus"])) == expected
    assert mixture["corpus"][:20] != sorted(mixture["corpus"][:20])  # mixed, not one corpus after the other
    other = load_corpora(settings_of(mt_args(toy, "x", "--heldout-pairs", "8", "--seed", "5"))).train
    assert other["src"] != mixture["src"]
    limited = load_corpora(settings_of(mt_args(toy, "x", "--heldout-pairs", "8", "--limit-train", "30"))).train
    assert limited["src"] == mixture["src"][:30]
    # one corpus: its training split in its own order (as a run on it alone always read it)
    single = load_corpora(settings_of(mt_args(toy, "x")[:-3] + ["--dataset", "multi30k"])).train
    assert single["src"] == multi30k["src"] and set(single["corpus"]) == {0}


def test_no_corpus_trains_on_another_corpus_held_out_sentences(toy, tmp_path):
    """Two files that share sentences: each carves its own splits apart, and the mixture keeps none of the other's
    validation or test sentences (either language, compared normalised), counted per corpus."""
    lines = toy_pairs(7, 40)
    (tmp_path / "a.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shared = [line.upper() for line in lines[:30]]  # written otherwise: the same sentences once normalised
    (tmp_path / "b.tsv").write_text("\n".join(toy_pairs(8, 30) + shared) + "\n", encoding="utf-8")
    argv = mt_args(toy, "x", "--heldout-pairs", "6")
    corpora = load_corpora(settings_of(argv[:argv.index("--corpora")] + [
        "--corpora", str(tmp_path / "a.tsv"), str(tmp_path / "b.tsv"), "--heldout-pairs", "6"]))
    heldout = {name: {normalize_sentence(text) for split in ("validation", "test")
                      for side in ("src", "tgt") for text in corpora.evaluation[name][split][side]}
               for name in ("a", "b")}
    dropped = 0
    for index, name, other in ((0, "a", "b"), (1, "b", "a")):
        rows = [i for i, corpus in enumerate(corpora.train["corpus"]) if corpus == index]
        trained = {normalize_sentence(corpora.train[side][i]) for i in rows for side in ("src", "tgt")}
        assert not trained & heldout[other], name
        assert len(rows) == corpora.stats["corpora"][name]["pairs"]["train"]
        dropped += corpora.stats["corpora"][name]["heldout_overlap_pairs"].get(other, 0)
    assert dropped > 0  # the shared sentences put some of one's held-out sentences in the other's train


def test_exclusion_drops_exactly_the_matching_pairs_and_counts_them(toy):
    settings = settings_of(mt_args(toy, "x", "--heldout-pairs", "8", "--exclude-test-sentences", "trec6",
                                   "--exclude-sentences", str(toy / "exclude.txt")))
    corpora = load_corpora(settings)
    stats = corpora.stats
    assert stats["excluded_sentences"] == {"trec6": 2, str(toy / "exclude.txt"): 2}
    pairs = stats["corpora"]["pairs"]
    assert sum(pairs["excluded_pairs"].values()) == 3
    assert pairs["excluded_pairs_by_source"] == {"trec6": 2, str(toy / "exclude.txt"): 1}
    kept_file = [s for s, c in zip(corpora.train["src"], corpora.train["corpus"]) if c == 1] + [
        s for split in ("validation", "test") for s in corpora.evaluation["pairs"][split]["src"]]
    overlap = pairs["heldout_overlap_pairs"].get("multi30k", 0)  # (test_no_corpus_trains_on_another_corpus_...)
    assert len(kept_file) == 64 - 3 - overlap and "Who discovered Americas?" in kept_file
    assert not {"Who discovered America?", "WHO  discovered America!", "The dog is white."} & set(kept_file)
    # Multi30k: the training pairs whose English is the sentence file's second line (counted independently here);
    # its own validation and test splits stay whole
    with gzip.open(toy / "data" / "multi30k" / "train.en.gz", "rt", encoding="utf-8") as f:
        train_en = [line.rstrip("\n") for line in f]
    target = reference_normal_form(train_en[0])
    expected = sum(reference_normal_form(s) == target for s in train_en)
    assert expected >= 1
    multi30k = stats["corpora"]["multi30k"]
    assert multi30k["excluded_pairs"] == {"train": expected}
    overlap = multi30k["heldout_overlap_pairs"].get("pairs", 0)
    assert multi30k["pairs"] == {"train": len(train_en) - expected - overlap, "validation": 16, "test": 16}
    kept_multi30k = [s for s, c in zip(corpora.train["src"], corpora.train["corpus"]) if c == 0]
    assert len(kept_multi30k) == len(train_en) - expected - overlap
    assert all(reference_normal_form(s) != target for s in kept_multi30k)


def test_unk_rates_of_the_mixture_and_of_each_corpus():
    """Rates in percent of the tokens (</s> not counted), per corpus and over the mixture, against a hand count."""
    from modeling_cove.tokenization_cove import build_cove_tokenizer

    source = build_cove_tokenizer(["a", "dog", "runs"])
    target = build_cove_tokenizer(["ein", "hund"], add_eos=True)
    config = CoveConfig(vocab_size=len(source), target_vocab_size=len(target))
    train = Dataset.from_dict({
        "src_tokens": [["a", "dog"], ["zebra", "a"], ["cat"]],  # corpus 0: 1 unknown of 4; corpus 1: 1 of 1
        "tgt_tokens": [["ein", "hund"], ["zebra"], ["katze", "ein", "x"]],  # corpus 0: 1 of 3; corpus 1: 2 of 3
        "corpus": [0, 0, 1],
    })

    def split(src, tgt):
        return Dataset.from_dict({"src_tokens": src, "tgt_tokens": tgt})

    evaluation = {
        "first": DatasetDict({"validation": split([["a", "bird"]], [["ein"]]), "test": split([["a"]], [["ein"]])}),
        "second": DatasetDict({"validation": split([["x", "y", "z", "a"]], [["hund", "q"]]),
                               "test": split([["runs"]], [["hund"]])}),
    }
    stats = {"corpora": {"first": {}, "second": {}}}
    store, eval_stores, references = prepare_splits(train, evaluation, source, target, config, 12, stats)
    assert len(store) == 3 and references["second"]["validation"] == [["hund", "q"]]
    assert (stats["train_source_unk_rate"], stats["train_target_unk_rate"]) == (40.0, 50.0)  # 2/5, 3/6
    assert (stats["corpora"]["first"]["train_source_unk_rate"], stats["corpora"]["first"]["train_target_unk_rate"]) \
        == (25.0, round(100 / 3, 3))
    assert stats["corpora"]["second"]["train_source_unk_rate"] == 100.0
    assert stats["corpora"]["second"]["train_target_unk_rate"] == round(200 / 3, 3)
    assert (stats["corpora"]["first"]["validation_source_unk_rate"],
            stats["corpora"]["first"]["validation_target_unk_rate"]) == (50.0, 0.0)
    assert (stats["corpora"]["second"]["validation_source_unk_rate"],
            stats["corpora"]["second"]["validation_target_unk_rate"]) == (75.0, 50.0)
    assert stats["validation_pairs"] == 1 and stats["validation_target_unk"] == 0  # the first corpus's, as before
    assert eval_stores["second"]["validation"].src_lengths.tolist() == [4]


# ---------------------------------------------------------------------------------------------------------------
# runs


class Killed(Exception):
    """A kill at a given step: the run ends there without saving anything more."""


@pytest.mark.slow
def test_two_corpora_run_records_per_corpus_metrics_and_resumes_exactly(toy, tmp_path, monkeypatch):
    """Multi30k + a parallel file: the mixture trains, every epoch records each corpus's validation figures (the
    first corpus's also at the old keys) and draws them named by corpus, in one color per corpus in every panel, the
    end each corpus's test BLEU; a run killed at step 5 and resumed gives the uninterrupted run's losses and weights
    bit for bit."""
    drawn = []
    monkeypatch.setattr(mt_loop, "plot_curves", lambda panels, path, **kwargs: drawn.append(panels))
    argv = ["--heldout-pairs", "8", "--max-epochs", "2", "--save-steps", "2", "--log-every", "1", "--seed", "3",
            "--test-num-beams", "1", "--no-export", "--exclude-sentences", str(toy / "exclude.txt")]
    reference, losses = tmp_path / "reference", {}
    metrics = run(mt_args(toy, reference, *argv),
                  on_step=lambda state, loss: losses.setdefault(state.global_step, loss))
    steps = metrics["global_step"]
    assert steps > 10 and sorted(losses) == list(range(1, steps + 1))
    assert metrics["corpora"] == ["multi30k", "pairs"] and metrics["settings"]["dataset"] == "multi30k+pairs"
    for epoch in metrics["epochs"]:
        assert set(epoch["val_by_corpus"]) == {"multi30k", "pairs"}
        first = epoch["val_by_corpus"]["multi30k"]
        assert (epoch["val_perplexity"], epoch["val_bleu"]) == (first["val_perplexity"], first["val_bleu"])
        assert epoch["val_by_corpus"]["pairs"]["val_perplexity"] != first["val_perplexity"]
        assert 0 <= epoch["val_by_corpus"]["pairs"]["val_bleu"] <= 100
    assert set(metrics["test_by_corpus"]) == {"multi30k", "pairs"}
    assert metrics["test"] == metrics["test_by_corpus"]["multi30k"]
    _, perplexity, bleu = drawn[-1]
    assert list(perplexity["series"]) == ["train", "validation multi30k", "validation pairs"]
    assert perplexity["series"]["validation pairs"] == ([1, 2], [e["val_by_corpus"]["pairs"]["val_perplexity"]
                                                                for e in metrics["epochs"]])
    assert list(bleu["series"]) == ["validation multi30k", "validation pairs"] and bleu["series"][
        "validation multi30k"][1] == [e["val_bleu"] for e in metrics["epochs"]]
    assert perplexity["colors"] == {"train": "C0", **bleu["colors"]} and len(set(perplexity["colors"].values())) == 3
    stats = json.loads((reference / "data_stats.json").read_text())
    assert stats == metrics["data"]
    pairs_stats = stats["corpora"]["pairs"]
    assert pairs_stats["excluded_pairs_by_source"] == {str(toy / "exclude.txt"): 1}
    test_pairs = pairs_stats["pairs"]["test"]
    assert len((reference / "test_hypotheses.pairs.txt").read_text().splitlines()) == test_pairs
    assert len((reference / "test_hypotheses.txt").read_text().splitlines()) == 16  # Multi30k's test split
    for key in ("train_source_unk_rate", "train_target_unk_rate"):
        assert 0 <= stats[key] <= 100 and key in stats["corpora"]["multi30k"]
    assert "validation_source_unk_rate" in pairs_stats and "validation_target_unk_rate" in pairs_stats
    table = mt_results_table(metrics)  # the exported encoder's card: each corpus's test figures, named
    assert "Validation: multi30k's (the first corpus" in table
    held_out = f"{test_pairs:,} pairs held out of `{pairs_stats['read_from']}`"
    for corpus, split in (("multi30k", "its test split `test_2016_flickr`, 16 pairs"), ("pairs", held_out)):
        figures = metrics["test_by_corpus"][corpus]  # each named with the pairs it is on
        assert f"Test on {corpus} ({split}): BLEU {figures['bleu']:.2f} " in table
    data = mt_corpora_text(metrics["settings"], stats)  # and each corpus's pairs and exclusions
    kept, in_file = pairs_stats["train_pairs_kept"], pairs_stats["pairs_in_file"]
    assert f"`pairs`: {kept:,} training pairs of {in_file:,} in the file" in data
    for name, corpus in stats["corpora"].items():
        dropped = sum(corpus["excluded_pairs"].values())
        assert dropped >= 1 and f"{dropped:,} pair{'s' if dropped != 1 else ''} dropped" in data, name
        assert (f"`<unk>`: {corpus['train_source_unk_rate']:g}% of its English and "
                f"{corpus['train_target_unk_rate']:g}% of its German training tokens") in data, name
    assert "Licence" not in data  # no preset gave one

    def kill_at_5(state, loss):
        if state.global_step == 5:
            raise Killed

    killed, resumed_losses = tmp_path / "killed", []
    with pytest.raises(Killed):
        run(mt_args(toy, killed, *argv), on_step=kill_at_5)
    assert read_state(checkpoint_dirs(killed)[-1]).global_step == 4
    resumed = run(mt_args(toy, killed, *argv, "--resume"), on_step=lambda state, loss: resumed_losses.append(loss))
    assert resumed_losses == [losses[step] for step in range(5, steps + 1)]
    for name, tensor in weights(reference).items():
        assert torch.equal(weights(killed)[name], tensor), name
    assert [e["val_by_corpus"] for e in resumed["epochs"]] == [e["val_by_corpus"] for e in metrics["epochs"]]
    assert resumed["test_by_corpus"] == metrics["test_by_corpus"]


def test_resume_refuses_other_corpora_and_held_out_sizes_and_reads_older_runs(toy, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    argv = mt_args(toy, out, "--heldout-pairs", "8")
    first = settings_of(argv)
    (out / "run_settings.json").write_text(json.dumps(first))
    check_output_dir(arguments([*argv, "--resume"]), first)
    for extra, changed in ((["--heldout-pairs", "9"], "heldout_pairs"),
                           (["--exclude-test-sentences", "trec6"], "exclude_test_sentences")):
        with pytest.raises(MTSetupError, match=f"different data/batching/model settings.*'{changed}'"):
            check_output_dir(arguments([*argv, "--resume", *extra]), settings_of([*argv, *extra]))
    reordered = [*argv[:-4], str(toy / "pairs.tsv"), "multi30k", "--heldout-pairs", "8"]
    with pytest.raises(MTSetupError, match="'corpora'"):
        check_output_dir(arguments([*reordered, "--resume"]), settings_of(reordered))
    # a run folder from before --corpora: its settings lack the new keys, which count at the values it ran with
    single = mt_args(toy, out)[:-3] + ["--dataset", "multi30k"]
    older = {k: v for k, v in settings_of(single).items()
             if k not in ("corpora", "heldout_pairs", "exclude_test_sentences", "exclude_sentences")}
    (out / "run_settings.json").write_text(json.dumps(older))
    check_output_dir(arguments([*single, "--resume"]), settings_of(single))


def test_cove_t_preset_names_its_corpora_and_the_flags_win(toy):
    preset, small = load_model_preset("cove-t"), load_model_preset("cove-small")
    assert preset["config"] == small["config"]
    # CoVe-S's table run took Adam by flags (benchmarks/results/mt_multi30k.json); CoVe-T's preset holds them
    differs = {k for k in preset["training"].keys() | small["training"].keys()
               if preset["training"].get(k) != small["training"].get(k)}
    assert differs == {"optimizer", "lr", "min_lr", "max_epochs", "heldout_pairs", "early_stopping_patience"}
    training = preset["training"]
    assert (training["optimizer"], training["lr"], training["min_lr"]) == ("adam", 1e-3, 3e-5)
    assert (training["max_epochs"], training["early_stopping_patience"]) == (8, 2)  # its best validation-BLEU epoch
    data = str(toy / "data")
    settings = resolve_mt_settings(arguments(["--output-dir", "x", "--data-dir", data]), preset)
    file_corpus = preset["data"]["corpora"][1]
    assert settings["corpora"] == ["multi30k", str(toy / "data" / file_corpus)]
    assert settings["dataset"] == "multi30k+" + corpus_names(settings["corpora"])[1]
    assert settings["exclude_test_sentences"] == preset["data"]["exclude_test_sentences"]
    assert {"trec6", "snli", "sst2"} <= set(settings["exclude_test_sentences"])
    assert settings["heldout_pairs"] == 2000
    # the file's licence and attribution reach the card by corpus name; only for the corpora the run reads
    licence = preset["data"]["licences"][file_corpus]
    assert "CC BY 2.0" in licence and "tatoeba.org" in licence
    assert settings["corpus_licences"] == {corpus_names(settings["corpora"])[1]: licence}
    typo = {**preset, "data": {**preset["data"], "licences": {"tatoeba/deu-eng.tsv": licence}}}
    with pytest.raises(MTSetupError, match=r"data.licences names \['tatoeba/deu-eng.tsv'\]"):
        resolve_mt_settings(arguments(["--output-dir", "x", "--data-dir", data]), typo)
    with pytest.raises(MTSetupError, match=f"{file_corpus!r} is a file in the data folder: give --data-dir"):
        resolve_mt_settings(arguments(["--output-dir", "x"]), preset)
    flags = resolve_mt_settings(arguments(["--output-dir", "x", "--dataset", "multi30k",
                                           "--exclude-test-sentences"]), preset)
    assert (flags["corpora"], flags["dataset"], flags["exclude_test_sentences"]) == (["multi30k"], "multi30k", [])
    assert flags["corpus_licences"] == {}
    # a file of the same name given by flags is not the preset's corpus: it gets no licence
    same_stem = resolve_mt_settings(arguments(["--output-dir", "x", "--data-dir", data, "--corpora", "multi30k",
                                               str(toy / Path(file_corpus).name)]), preset)
    assert same_stem["corpus_licences"] == {}
    given = resolve_mt_settings(arguments(["--output-dir", "x", "--data-dir", data, "--corpora", "multi30k",
                                           str(toy / "data" / file_corpus)]), preset)
    assert given["corpus_licences"] == {corpus_names(given["corpora"])[1]: licence}
    own = resolve_mt_settings(arguments(["--output-dir", "x", "--corpora", "p.tsv", "multi30k"]), preset)
    assert (own["corpora"], own["dataset"]) == (["p.tsv", "multi30k"], "p+multi30k")
    # the presets without corpora: one dataset, as before
    assert resolve_mt_settings(arguments(["--output-dir", "x"]), small)["corpora"] == ["multi30k"]


@pytest.mark.parametrize("case", ["missing file", "unknown name", "line without a tab", "both flags",
                                  "unknown task", "missing sentence file", "task without its data"])
def test_bad_corpora_end_in_one_line_before_anything_is_written(toy, tmp_path, capsys, case):
    (tmp_path / "bad.tsv").write_text("A dog.\tEin Hund.\nTwo men.\tZwei Männer.\nA man runs\n", encoding="utf-8")
    out = tmp_path / "run"
    base = ["--output-dir", str(out), "--data-dir", str(toy / "data"), "--vectors", str(toy / "vectors.txt"),
            "--max-steps", "1", "--num-threads", "1"]
    argv, message = {
        "missing file": (["--corpora", "multi30k", str(tmp_path / "nothere.tsv")],
                         f"error: corpus '{tmp_path / 'nothere.tsv'}' is neither a translation dataset (multi30k, "
                         "iwslt, wmt17, tsv) nor a file"),
        "unknown name": (["--corpora", "multi31k"], "error: corpus 'multi31k' is neither a translation dataset"),
        "line without a tab": (["--corpora", "multi30k", str(tmp_path / "bad.tsv")],
                               f"error: {tmp_path / 'bad.tsv'}, line 3: no tab; a parallel file has one pair per "
                               "line, English<TAB>German"),
        "both flags": (["--corpora", "multi30k", "--dataset", "multi30k"], "error: give --dataset or --corpora"),
        "unknown task": (["--exclude-test-sentences", "trec7"],
                         "error: --exclude-test-sentences: unknown task(s) trec7; choose from multi30k"),
        "missing sentence file": (["--exclude-sentences", str(tmp_path / "none.txt")],
                                  f"error: --exclude-sentences {tmp_path / 'none.txt'} is not a file"),
        "task without its data": (["--exclude-test-sentences", "snli"],
                                  f"error: --exclude-test-sentences snli: {toy / 'data' / 'snli'} not found"),
    }[case]
    status, err = exit_of(train_mt_command.main, [*base, *argv], capsys)
    assert status == 2
    assert err.startswith(message) and len(err.strip().splitlines()) == 1, err
    assert not out.exists()


def test_the_card_lists_corpora_with_their_licence_and_only_real_exclusions():
    licence = "CC BY 2.0; the makers of the pairs"
    stats = {"pairs": {"train": 10, "validation": 2, "test": 3}, "train_pairs_kept": 9, "pairs_in_file": 1500,
             "excluded_pairs": {"train": 0, "validation": 0, "test": 0}, "excluded_pairs_by_source": {"trec6": 0}}
    named = {"pairs": {"validation": 1014}, "train_pairs_kept": 2000, "excluded_pairs": {"train": 2},
             "excluded_pairs_by_source": {"snli": 2, "trec6": 0}}
    text = mt_corpora_text({"seed": 7, "corpus_licences": {"pairs": licence}},
                           {"corpora": {"multi30k": named, "pairs": stats}})
    assert text.splitlines() == [
        "- Corpora, shuffled into one mixture (seed 7):",
        "  - `multi30k`: 2,000 training pairs; its own validation and test splits (1,014 and ? pairs); 2 pairs "
        "dropped whose English side is a test sentence of an evaluation task (train 2; matches by task, a pair may "
        "match several: snli 2).",
        "  - `pairs`: 9 training pairs of 1,500 in the file; validation and test carved from it (2 and 3 pairs; no "
        f"English or German sentence on two sides). Licence: {licence}."]
    # one corpus: its dropped pairs and its licence, each when it has one
    assert mt_corpora_text({"corpus_licences": {"pairs": licence}}, {"corpora": {"pairs": stats}}) == \
        f"- Licence of the `pairs` data: {licence}."
    assert mt_corpora_text({}, {"corpora": {"pairs": stats}}) == "" == mt_corpora_text({}, {})
    assert mt_corpora_text({}, {"corpora": {"multi30k": named}}) == (
        "- Of the `multi30k` training pairs, 2 pairs dropped whose English side is a test sentence of an evaluation "
        "task (train 2; matches by task, a pair may match several: snli 2).")


def test_the_card_says_why_training_pairs_were_dropped():
    """The MT data line counts the pairs dropped as too long and as empty (a record without those counts, from
    before they were kept, reads as it did); a one-corpus run that dropped test sentences says so below it."""
    data = {"train_pairs_kept": 28425, "train_pairs_dropped_too_long": 3, "train_pairs_dropped_empty": 0,
            "corpora": {"multi30k": {"excluded_pairs": {"train": 575}, "excluded_pairs_by_source": {"snli": 575}}}}
    card = encoder_export_card("mt", CoveConfig(vocab_size=10, word_vector_dim=4, hidden_size=2),
                               {"settings": {"dataset": "multi30k", "max_length": 75}, "data": data}, path="x")
    assert ("- MT data: multi30k (English→German), 28,425 training pairs (3 dropped as longer than 75 tokens, 0 as "
            "empty).\n- Of the `multi30k` training pairs, 575 pairs dropped whose English side is a test sentence of "
            "an evaluation task (train 575; matches by task, a pair may match several: snli 575).") in card.text
    old = encoder_export_card("mt", CoveConfig(vocab_size=10, word_vector_dim=4, hidden_size=2),
                              {"settings": {"dataset": "multi30k", "max_length": 75},
                               "data": {"train_pairs_kept": 29000}}, path="x")
    assert "29000 training pairs after dropping pairs longer than 75 tokens." in old.text


def test_the_cove_t_mixture_drops_the_test_sentences_docs_data_md_counts():
    """The real data under the cove-t preset: the figures docs/data.md states (59 Tatoeba pairs whose English side
    is a test sentence of an evaluation task; 575 Multi30k captions that are SNLI test premises; 1,999 and 2,000
    held-out Tatoeba pairs) come out of load_corpora as the run counts them."""
    data = require_data("tatoeba_de_en", "deu-eng.tsv.xz").parents[1]
    settings = resolve_mt_settings(arguments(["--output-dir", "unused", "--preset", "cove-t", "--data-dir",
                                              str(data)]), load_model_preset("cove-t"))
    stats = load_corpora(settings).stats["corpora"]
    tatoeba, multi30k = stats["deu-eng"], stats["multi30k"]
    assert tatoeba["pairs_in_file"] == 169813 and sum(tatoeba["excluded_pairs"].values()) == 59
    assert {task: n for task, n in tatoeba["excluded_pairs_by_source"].items() if n} == {
        "trec6": 3, "trec50": 3, "sst2": 2, "sst5": 3, "snli": 12, "ewt_upos": 41, "wnut17": 2}
    assert (tatoeba["pairs"]["validation"], tatoeba["pairs"]["test"]) == (1999, 2000)
    assert tatoeba["pairs"]["train"] == 169813 - 4000 - 58
    assert multi30k["excluded_pairs"] == {"train": 575} and multi30k["pairs"]["train"] == 29000 - 575
