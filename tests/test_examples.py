"""The embedded default data (examples/) and the PPMI word vectors (scripts/train_ppmi_vectors.py)."""

import math
import re
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import make_examples as mk  # scripts/ is on sys.path (conftest.py)
import train_ppmi_vectors as ppmi

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def rows(name, split):
    return mk.read_tsv(EXAMPLES / name / f"{split}.tsv")


# ---------------------------------------------------------------------------------------------------------------
# files
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, counts",
    [("en_de", {"train": 600, "validation": 100, "test": 100}),
     ("sentiment", {"train": 600, "validation": 100, "test": 200})],
)
def test_files_parse_with_documented_counts(name, counts):
    header = {"en_de": "en\tde", "sentiment": "text\tlabel"}[name]
    for split, n in counts.items():
        path = EXAMPLES / name / f"{split}.tsv"
        text = path.read_text(encoding="utf-8")
        assert text.startswith(header + "\n") and text.endswith("\n") and not text.endswith("\n\n")
        assert "\r" not in text and '"' not in text
        data = rows(name, split)
        assert len(data) == n, (path, len(data))
        for fields in data:
            assert all(f == f.strip() and f for f in fields)
            assert fields[0][0].isupper() and fields[0].endswith(".")


def test_readme_states_counts_and_command():
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    assert "python scripts/make_examples.py" in readme and str(mk.SEED) in readme
    assert "synthetic" in readme
    for n in ("600", "100", "200"):
        assert n in readme


def test_regenerating_gives_byte_identical_files():
    files = mk.render_all(mk.SEED)
    assert sorted(files) == sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.glob("*/*.tsv"))
    for rel, content in files.items():
        assert (EXAMPLES / rel).read_bytes() == content.encode("utf-8"), rel
    assert mk.main(["--check", "--output-dir", str(EXAMPLES)]) == 0


def test_another_seed_gives_other_data():
    other = mk.generate_en_de(seed=mk.SEED + 1, counts={"train": 20, "validation": 0, "test": 0})
    assert other["train"] != rows("en_de", "train")[:20]


def test_check_reports_a_changed_file(tmp_path, capsys):
    mk.main(["--output-dir", str(tmp_path)])
    path = tmp_path / "en_de" / "test.tsv"
    path.write_text(path.read_text(encoding="utf-8").replace("Der ", "Die ", 1), encoding="utf-8")
    assert mk.main(["--check", "--output-dir", str(tmp_path)]) == 1
    assert "DIFFERS" in capsys.readouterr().out


@pytest.mark.parametrize("name, columns", [("en_de", (0, 1)), ("sentiment", (0,))])
def test_no_duplicates_within_or_across_splits(name, columns):
    for column in columns:
        seen = Counter(r[column] for split in mk.SPLITS for r in rows(name, split))
        assert max(seen.values()) == 1, [t for t, c in seen.items() if c > 1][:3]


def test_sentiment_labels_balanced():
    for split in mk.SPLITS:
        labels = Counter(label for _, label in rows("sentiment", split))
        assert set(labels) == {"negative", "positive"}
        assert labels["negative"] == labels["positive"], (split, labels)


def test_vocabulary_sizes_are_small_and_shared():
    tok = ppmi.default_tokenize
    en = {w for s in mk.SPLITS for r in rows("en_de", s) for w in tok(r[0])}
    de = {w for s in mk.SPLITS for r in rows("en_de", s) for w in tok(r[1])}
    assert 150 <= len(en) <= 250 and 150 <= len(de) <= 300, (len(en), len(de))
    sentiment = Counter(w for s in mk.SPLITS for r in rows("sentiment", s) for w in tok(r[0]))
    shared = sum(c for w, c in sentiment.items() if w in en) / sum(sentiment.values())
    assert shared > 0.6, shared  # most sentiment tokens are en_de English words (the encoder has seen them)


# ---------------------------------------------------------------------------------------------------------------
# German inflection: hand-written expectations
# ---------------------------------------------------------------------------------------------------------------

ADJ = {a.en: a for a in mk.ADJECTIVES}
LOC = {(l.en, l.water): l for l in mk.LOCATIONS}


@pytest.mark.parametrize(
    "noun, det, case, adj, very, expected",
    [
        ("man", "def", "nom", "old", False, "der alte Mann"),
        ("man", "indef", "nom", "old", False, "ein alter Mann"),
        ("man", "indef", "acc", "old", False, "einen alten Mann"),
        ("man", "def", "dat", "old", False, "dem alten Mann"),
        ("man", "defpl", "dat", "old", False, "den alten Männern"),
        ("woman", "indef", "dat", "tired", True, "einer sehr müden Frau"),
        ("woman", "indef", "nom", "tired", False, "eine müde Frau"),
        ("car", "indef", "acc", "red", False, "ein rotes Auto"),
        ("car", "two", "dat", "red", False, "zwei roten Autos"),
        ("dog", "two", "nom", "small", False, "zwei kleine Hunde"),
        ("dog", "two", "dat", "small", False, "zwei kleinen Hunden"),
        ("dog", "many", "dat", None, False, "vielen Hunden"),
        ("dog", "many", "acc", "black", False, "viele schwarze Hunde"),
        ("child", "defpl", "nom", None, False, "die Kinder"),
        ("child", "defpl", "dat", None, False, "den Kindern"),
        ("girl", "this", "acc", "happy", False, "dieses glückliche Mädchen"),
        ("boy", "this", "dat", None, False, "diesem Jungen"),
        ("boy", "def", "nom", None, False, "der Junge"),
        ("boy", "indef", "acc", "tired", False, "einen müden Jungen"),
        ("student", "these", "dat", None, False, "diesen Studenten"),
        ("book", "indef", "nom", "interesting", False, "ein interessantes Buch"),
        ("soup", "def", "acc", "cold", False, "die kalte Suppe"),
        ("apple", "indef", "acc", "green", False, "einen grünen Apfel"),
        ("mouse", "defpl", "acc", "white", False, "die weißen Mäuse"),
    ],
)
def test_german_noun_phrases(noun, det, case, adj, very, expected):
    assert mk.german_np(mk.NOUN[noun], det, case, ADJ.get(adj), very) == expected


@pytest.mark.parametrize(
    "noun, det, adj, very, expected",
    [("apple", "indef", None, False, "an apple"), ("man", "indef", "old", False, "an old man"),
     ("man", "indef", "old", True, "a very old man"), ("mouse", "two", None, False, "two mice"),
     ("child", "these", "happy", False, "these happy children"), ("egg", "indef", None, False, "an egg")],
)
def test_english_noun_phrases(noun, det, adj, very, expected):
    assert mk.english_np(mk.NOUN[noun], det, ADJ.get(adj), very) == expected


@pytest.mark.parametrize(
    "prep, loc, det, adj, expected",
    [("in", "park", "def", None, "im Park"), ("in", "park", "def", "big", "im großen Park"),
     ("in", "park", "indef", None, "in einem Park"), ("an", "river", "def", None, "am Fluss"),
     ("in", "kitchen", "def", None, "in der Küche"), ("auf", "street", "def", None, "auf der Straße"),
     ("unter", "tree", "def", None, "unter dem Baum"), ("in", "house", "def", None, "im Haus"),
     ("vor", "house", "def", "old", "vor dem alten Haus"), ("auf", "bridge", "indef", None, "auf einer Brücke")],
)
def test_german_place_phrases(prep, loc, det, adj, expected):
    assert mk.german_pp(prep, LOC[(loc, False)], det, ADJ.get(adj)) == expected


def test_verbs_agree_and_stative_verbs_are_simple_present():
    read = next(v for v in mk.TRANSITIVE_VERBS if v.en_base == "read")
    like = next(v for v in mk.TRANSITIVE_VERBS if v.en_base == "like")
    assert (read.english(False), read.english(True), read.german(False), read.german(True)) == (
        "is reading", "are reading", "liest", "lesen")
    assert (like.english(False), like.english(True), like.german(False), like.german(True)) == (
        "likes", "like", "mag", "mögen")


# An independent agreement checker over the whole corpus: every determiner + [sehr] + [adjective] + noun sequence
# must agree in gender, number and case; the tables below are written here, not taken from the script.
ARTICLES = {  # word -> set of (gender-or-pl, case)
    "der": {("m", "nom"), ("f", "dat")}, "die": {("f", "nom"), ("f", "acc"), ("pl", "nom"), ("pl", "acc")},
    "das": {("n", "nom"), ("n", "acc")}, "den": {("m", "acc"), ("pl", "dat")}, "dem": {("m", "dat"), ("n", "dat")},
    "dieser": {("m", "nom"), ("f", "dat")}, "diese": {("f", "nom"), ("f", "acc"), ("pl", "nom"), ("pl", "acc")},
    "dieses": {("n", "nom"), ("n", "acc")}, "diesen": {("m", "acc"), ("pl", "dat")},
    "diesem": {("m", "dat"), ("n", "dat")},
    "ein": {("m", "nom"), ("n", "nom"), ("n", "acc")}, "eine": {("f", "nom"), ("f", "acc")},
    "einen": {("m", "acc")}, "einem": {("m", "dat"), ("n", "dat")}, "einer": {("f", "dat")},
    "viele": {("pl", "nom"), ("pl", "acc")}, "vielen": {("pl", "dat")},
    "zwei": {("pl", c) for c in ("nom", "acc", "dat")}, "drei": {("pl", c) for c in ("nom", "acc", "dat")},
    "vier": {("pl", c) for c in ("nom", "acc", "dat")}, "fünf": {("pl", c) for c in ("nom", "acc", "dat")},
    "im": {("m", "dat"), ("n", "dat")}, "am": {("m", "dat"), ("n", "dat")},
}
ENDINGS = {  # article kind -> (gender-or-pl, case) -> adjective ending
    "weak": {("m", "nom"): "e", ("f", "nom"): "e", ("n", "nom"): "e", ("m", "acc"): "en", ("f", "acc"): "e",
             ("n", "acc"): "e", ("m", "dat"): "en", ("f", "dat"): "en", ("n", "dat"): "en", ("pl", "nom"): "en",
             ("pl", "acc"): "en", ("pl", "dat"): "en"},
    "mixed": {("m", "nom"): "er", ("f", "nom"): "e", ("n", "nom"): "es", ("m", "acc"): "en", ("f", "acc"): "e",
              ("n", "acc"): "es", ("m", "dat"): "en", ("f", "dat"): "en", ("n", "dat"): "en"},
    "strong": {("pl", "nom"): "e", ("pl", "acc"): "e", ("pl", "dat"): "en"},
}


def article_kind(word):
    if word.startswith("ein"):
        return "mixed"
    if word in ("viele", "vielen", "zwei", "drei", "vier", "fünf"):
        return "strong"
    return "weak"


def noun_features():
    features = {}  # German noun form -> set of (gender-or-pl, case)
    for noun in list(mk.NOUNS) + [mk.Noun(l.en, None, l.gender, l.de, None, frozenset(), "") for l in mk.LOCATIONS]:
        for case in ("nom", "acc", "dat"):
            features.setdefault(noun.german(case, False), set()).add((noun.gender, case))
            if noun.de_pl:
                features.setdefault(noun.german(case, True), set()).add(("pl", case))
    return features


def test_every_german_noun_phrase_agrees():
    nouns = noun_features()
    stems = {a.de for a in mk.ADJECTIVES}
    checked = 0
    for split in mk.SPLITS:
        for en, de in rows("en_de", split):
            tokens = de.rstrip(".").replace(",", "").split()
            tokens[0] = tokens[0][0].lower() + tokens[0][1:]  # sentence-initial capital
            for i, token in enumerate(tokens):
                if token not in ARTICLES:
                    continue
                j = i + 1
                if tokens[j] == "sehr":
                    j += 1
                ending = None
                if not tokens[j][0].isupper():  # an adjective
                    stem = next((s for s in stems if tokens[j] == s + "e" * (not s.endswith("e"))
                                 or re.fullmatch(re.escape(s.rstrip("e")) + "e(n|r|s)?", tokens[j])), None)
                    assert stem is not None, (de, tokens[j])
                    ending = tokens[j][len(stem.rstrip("e")):]
                    j += 1
                noun = tokens[j]
                assert noun in nouns, (de, noun)
                options = ARTICLES[token] & nouns[noun]
                if ending is not None:
                    options = {o for o in options if ENDINGS[article_kind(token)].get(o) == ending}
                assert options, f"no agreement in {de!r} at {' '.join(tokens[i:j + 1])!r}"
                checked += 1
    assert checked > 1500


def test_every_german_sentence_has_capitalised_nouns_and_a_finite_verb():
    nouns = noun_features()
    adjective_forms = {a.german(e) for a in mk.ADJECTIVES for e in ("e", "en", "er", "es")}
    finite = {v.de_3sg for v in mk.INTRANSITIVE_VERBS + mk.TRANSITIVE_VERBS} | {
        v.de_3pl for v in mk.INTRANSITIVE_VERBS + mk.TRANSITIVE_VERBS}
    for split in mk.SPLITS:
        for en, de in rows("en_de", split):
            words = de.rstrip(".").replace(",", "").split()
            assert words[0][0].isupper() and de.endswith(".")
            assert any(w in finite for w in words), de
            for w in words[1:]:
                if w[0].isupper():
                    assert w in nouns, (de, w)
                else:  # a lower-cased noun would be an error, unless it is also an adjective ("jungen")
                    assert w.capitalize() not in nouns or w in adjective_forms, (de, w)
            clauses = re.split(r" und |, aber ", de.rstrip("."))
            for clause in clauses:  # V2: the finite verb is the 2nd constituent, so it is never the first word
                assert clause.split()[0] not in finite, de


# ---------------------------------------------------------------------------------------------------------------
# sentiment rules: an independent labeller for the documented rules
# ---------------------------------------------------------------------------------------------------------------

POS = {w for ws in mk.POSITIVE.values() for w in ws}
NEG = {w for ws in mk.NEGATIVE.values() for w in ws}
NEUTRAL = {w for ws in mk.NEUTRAL.values() for w in ws}


def test_polarity_lexicons_are_disjoint():
    assert not (POS & NEG) and not (POS & NEUTRAL) and not (NEG & NEUTRAL)


def clause_polarity(clause):
    words = clause.split()
    for phrase, sign in (("did not like", -1), ("did not enjoy", -1), ("would not recommend", -1),
                         ("hated", -1), ("liked", 1), ("loved", 1), ("enjoyed", 1), ("would recommend", 1)):
        if f" {phrase} " in f" {clause} ":
            return sign
    be = max(i for i, w in enumerate(words) if w in ("is", "was", "are", "were"))
    modifiers, adjective = words[be + 1 : -1], words[-1]
    if adjective in NEUTRAL:
        assert modifiers == ["too"], clause
        return -1
    sign = 1 if adjective in POS else -1 if adjective in NEG else None
    assert sign is not None and "too" not in modifiers, clause
    if modifiers[:1] in (["not"], ["never"]):
        if modifiers[1:]:  # "not very X" / "not really X": only positive X
            assert sign == 1, clause
        return -sign
    return sign


def rule_label(text):
    text = text[0].lower() + text[1:-1]
    if text.startswith("although "):
        first, second = text[len("although "):].split(", ", 1)
        assert clause_polarity(first) == -clause_polarity(second), text
        return clause_polarity(second)
    if ", but " in text:
        first, second = text.split(", but ")
        assert clause_polarity(first) == -clause_polarity(second), text
        return clause_polarity(second)
    if ", and it was " in text or ", and they were " in text:
        return clause_polarity("it was " + text.split(" was " if " was " in text else " were ")[-1])
    parts = text.split(" and ")
    assert len(parts) <= 2 and len({clause_polarity(p) for p in parts}) == 1, text
    return clause_polarity(parts[0])


def test_every_sentiment_label_follows_the_documented_rules():
    kinds = Counter()
    for split in mk.SPLITS:
        for text, label in rows("sentiment", split):
            assert label == {1: "positive", -1: "negative"}[rule_label(text)], text
            kinds["but" if ", but " in text else "although" if text.startswith("Although") else
                  "event" if ", and " in text else "and" if " and " in text else "single"] += 1
    assert min(kinds.values()) > 50, kinds  # every construction is well represented


def test_sentiment_words_occur_in_both_labels():
    # not trivial: the frequent evaluative words occur in sentences of both labels (negation, contrast)
    by_label = {"positive": Counter(), "negative": Counter()}
    for text, label in rows("sentiment", "train"):
        by_label[label].update(text.lower().rstrip(".").replace(",", "").split())
    for word in ("good", "bad", "boring", "delicious", "not", "liked"):
        assert by_label["positive"][word] > 0 and by_label["negative"][word] > 0, word


# ---------------------------------------------------------------------------------------------------------------
# PPMI vectors
# ---------------------------------------------------------------------------------------------------------------

TOY = ["a b", "b c"]  # window 1: pairs (a,b), (b,a), (b,c), (c,b); order by count: b (2), a (1), c (1)


def test_vocabulary_order_and_min_count():
    tokens = [t.split() for t in ["x y y z", "z y"]]
    assert ppmi.build_vocabulary(tokens) == ["y", "z", "x"]
    assert ppmi.build_vocabulary(tokens, min_count=2) == ["y", "z"]
    with pytest.raises(ValueError, match="min_count"):
        ppmi.build_vocabulary(tokens, min_count=0)


def test_cooccurrence_counts_by_hand():
    tokens = [["a", "b", "c"], ["c", "a"]]
    words = ["a", "b", "c"]
    w1 = ppmi.cooccurrence_counts(tokens, words, window=1)
    # line 1, distance 1: a-b, b-c; line 2: c-a (never across lines); both directions
    np.testing.assert_array_equal(w1, [[0, 1, 1], [1, 0, 1], [1, 1, 0]])
    w2 = ppmi.cooccurrence_counts(tokens, words, window=2)  # + a-c at distance 2 in line 1
    np.testing.assert_array_equal(w2, [[0, 1, 2], [1, 0, 1], [2, 1, 0]])
    w_oov = ppmi.cooccurrence_counts(tokens, ["a", "c"], window=1)  # b removed first: line 1 becomes "a c"
    np.testing.assert_array_equal(w_oov, [[0, 2], [2, 0]])


def test_ppmi_by_hand_plain_and_smoothed():
    counts = ppmi.cooccurrence_counts([t.split() for t in TOY], ["b", "a", "c"], window=1)
    np.testing.assert_array_equal(counts, [[0, 1, 1], [1, 0, 0], [1, 0, 0]])
    # alpha = 1: N = 4, P(b) = 2/4, P(a) = P(c) = 1/4, P(b, a) = 1/4 -> PMI = log((1/4) / (2/4 * 1/4)) = log 2
    l2 = math.log(2)
    np.testing.assert_allclose(ppmi.ppmi_matrix(counts, 1.0), [[0, l2, l2], [l2, 0, 0], [l2, 0, 0]], atol=1e-12)
    # alpha = 0.75: P_a(b) = 2^.75 / (2^.75 + 2), P_a(a) = P_a(c) = 1 / (2^.75 + 2)
    z = 2 ** 0.75 + 2
    ba = math.log((1 / 4) / ((2 / 4) * (1 / z)))  # = log(z / 2)
    ab = math.log((1 / 4) / ((1 / 4) * (2 ** 0.75 / z)))  # = log(z / 2^.75)
    np.testing.assert_allclose(ppmi.ppmi_matrix(counts, 0.75), [[0, ba, ba], [ab, 0, 0], [ab, 0, 0]], atol=1e-12)
    # negative PMI is clipped: "a a b" window 1 has a-a (1 x2 directions), a-b, b-a
    neg = ppmi.ppmi_matrix(np.array([[2.0, 1.0], [1.0, 0.0]]), 1.0)
    # N = 4, P(a) = 3/4, P(b) = 1/4: PMI(a,a) = log((2/4) / (3/4 * 3/4)) < 0 -> 0; PMI(a,b) = log((1/4)/(3/4*1/4)) > 0
    np.testing.assert_allclose(neg, [[0, math.log(4 / 3)], [math.log(4 / 3), 0]], atol=1e-12)


def test_svd_vectors_by_hand():
    # PPMI (order b, a, c) = l * [[0,1,1],[1,0,0],[1,0,0]]: singular values l*sqrt(2) (twice) and 0; the rank-2
    # part gives W W^T = U S U^T = l*sqrt(2) * [[1,0,0],[0,.5,.5],[0,.5,.5]] (eig_power 0.5, no normalisation)
    l = math.log(2)
    words, vectors = ppmi.train_ppmi_vectors(TOY, dim=2, window=1, cds_alpha=1.0, normalize=False, tokenize=str.split)
    assert words == ["b", "a", "c"] and vectors.shape == (3, 2) and vectors.dtype == np.float32
    expected_gram = l * math.sqrt(2) * np.array([[1, 0, 0], [0, 0.5, 0.5], [0, 0.5, 0.5]])
    np.testing.assert_allclose(vectors @ vectors.T, expected_gram, atol=1e-6)
    np.testing.assert_allclose(np.sort(np.linalg.norm(vectors, axis=0) ** 2), [l * math.sqrt(2)] * 2, atol=1e-6)
    _, unit = ppmi.train_ppmi_vectors(TOY, dim=2, window=1, cds_alpha=1.0, tokenize=str.split)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(unit @ unit.T, [[1, 0, 0], [0, 1, 1], [0, 1, 1]], atol=1e-6)  # a and c: same contexts


def test_dim_larger_than_rank_pads_with_zeros_and_warns():
    with pytest.warns(UserWarning, match="columns are zero"):
        _, vectors = ppmi.train_ppmi_vectors(TOY, dim=5, window=1, tokenize=str.split)
    assert vectors.shape == (3, 5)
    np.testing.assert_array_equal(vectors[:, 2:], 0.0)


def test_output_is_deterministic_and_sign_fixed():
    texts = [t for t, _ in rows("sentiment", "train")[:200]]
    _, v1 = ppmi.train_ppmi_vectors(texts, dim=10)
    _, v2 = ppmi.train_ppmi_vectors(list(texts), dim=10)
    np.testing.assert_array_equal(v1, v2)


def test_dense_and_sparse_paths_agree(monkeypatch):
    texts = [t for t, _ in rows("sentiment", "train")[:300]]
    words, dense = ppmi.train_ppmi_vectors(texts, dim=8, normalize=False)
    monkeypatch.setattr(ppmi, "DENSE_MAX_VOCAB", 10)
    words2, sparse = ppmi.train_ppmi_vectors(texts, dim=8, normalize=False)
    assert words == words2
    np.testing.assert_allclose(dense @ dense.T, sparse @ sparse.T, atol=1e-4)  # same subspace up to rotation


@pytest.mark.parametrize(
    "texts, kwargs, message",
    [([], {}, "no texts"), (["a b"], {"min_count": 2}, "min_count=2"), (["a", "b"], {}, "no co-occurrences"),
     (["a b"], {"dim": 0}, "dim"), (["a b"], {"window": 0}, "window"), (["a b"], {"cds_alpha": 0}, "cds_alpha")],
)
def test_bad_input_gives_clear_errors(texts, kwargs, message):
    with pytest.raises(ValueError, match=message):
        ppmi.train_ppmi_vectors(texts, tokenize=str.split, **{"dim": 2, **kwargs})
    with pytest.raises(TypeError):
        ppmi.train_ppmi_vectors("a b c", dim=2)


def test_vectors_of_the_shipped_text_are_meaningful():
    texts = [r[0] for r in rows("en_de", "train")] + [r[0] for r in rows("sentiment", "train")]
    words, vectors = ppmi.train_ppmi_vectors(texts, dim=50, window=4)
    groups = {
        "dog": {"cat", "horse", "bird", "cow", "duck", "mouse", "dogs", "cats", "horses", "ducks", "mice", "birds"},
        "soup": {"cake", "bread", "pizza", "apple", "food", "banana", "egg"},
        "park": {"garden", "house", "restaurant", "school", "station", "church", "kitchen", "market"},
        "reading": {"writing", "working", "dancing", "singing", "visiting", "laughing", "watching", "playing"},
        "man": {"woman", "boy", "girl", "child", "friend", "teacher", "doctor", "cook", "student", "waiter"},
        "two": {"three", "four", "five", "many"},
        "film": {"book", "story", "song", "picture"},
    }
    for query, related in groups.items():
        top = [w for w, _ in ppmi.nearest_neighbours(words, vectors, query, k=5)]
        assert len(related.intersection(top)) >= 2, (query, top)


def test_written_file_is_glove_format_and_readable(tmp_path):
    words, vectors = ppmi.train_ppmi_vectors(["the dog runs", "the cat runs", "a dog sleeps"], dim=3, window=2)
    path = tmp_path / "vectors.txt"
    ppmi.write_vectors(path, words, vectors)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(words) and not (tmp_path / "vectors.txt.tmp").exists()
    first = lines[0].split(" ")
    assert first[0] == words[0] and len(first) == 4 and all(re.fullmatch(r"-?\d+\.\d{5}", v) for v in first[1:])
    vectors_module = pytest.importorskip("modeling_cove.vectors", reason="modeling_cove.vectors not written yet")
    read_words, matrix = vectors_module.read_word_vectors(path)
    assert read_words == words
    np.testing.assert_allclose(matrix.numpy(), vectors, atol=5e-6)
    with pytest.raises(ValueError, match="whitespace"):
        ppmi.write_vectors(path, ["a b"], vectors[:1])


def test_cli_on_tsv_files(tmp_path, capsys):
    out = tmp_path / "v.txt"
    code = ppmi.main(["--text-file", str(EXAMPLES / "en_de" / "validation.tsv"), "--tsv-column", "en",
                      "--text-file", str(EXAMPLES / "sentiment" / "validation.tsv"), "--tsv-column", "text",
                      "--dim", "8", "--output", str(out), "--show", "dog", "nonexistentword"])
    assert code == 0
    text = capsys.readouterr().out
    assert "200 texts" in text and "dog:" in text and "not in the vocabulary" in text
    assert len(out.read_text(encoding="utf-8").splitlines()[0].split(" ")) == 9
    with pytest.raises(ValueError, match="no column 'de'"):
        ppmi.read_texts(EXAMPLES / "sentiment" / "test.tsv", "de")
    with pytest.raises(FileNotFoundError):
        ppmi.read_texts(tmp_path / "missing.txt")
