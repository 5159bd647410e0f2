"""Tests of modeling_cove/vectors.py: GloVe text readers and character n-gram vectors.

Hand-written files (exact values), then the real samples in ../shared/data (skipped where absent).
"""

import bz2
import gzip
import lzma
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from modeling_cove.vectors import (
    build_char_ngram_matrix,
    build_embedding_matrix,
    char_ngrams,
    embedding_matrix_from_vectors,
    iter_word_vectors,
    read_word_vectors,
    vector_file_dim,
)

DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"

# A 3-d file: a word with spaces (". . ."), cased duplicates (`The` before `the`), a special token.
ENTRIES = [
    ("The", "1 2 3"),
    ("the", "0.1 0.2 0.3"),
    (". . .", "4.5 -5 6e-1"),
    ("cat", "-1.5 0 2.25"),
    ("<unk>", "9 9 9"),
    ("THE", "7 7 7"),
    ("naïve", "0.5 0.25 0.125"),
]


def expected(values: str) -> torch.Tensor:
    return torch.tensor(np.array([float(v) for v in values.split(" ")], dtype=np.float32))


def write(path: Path, text: str) -> Path:
    data = text.encode("utf-8")
    opener = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}.get(path.suffix)
    if opener is None:
        path.write_bytes(data)
    else:
        with opener(path, "wb") as f:
            f.write(data)
    return path


def vector_text(header: bool = False, newline: str = "\n", trailing_blank: bool = False) -> str:
    lines = ([f"{len(ENTRIES)} 3"] if header else []) + [f"{w} {v}" for w, v in ENTRIES]
    return newline.join(lines) + newline + (newline if trailing_blank else "")


# ------------------------------------------------------------------------------------------------------------
# Reading the format
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".txt", ".gz", ".xz", ".bz2"])
@pytest.mark.parametrize(
    "header,newline,trailing_blank",
    [(False, "\n", False), (True, "\n", False), (False, "\r\n", True), (True, "\r\n", True)],
)
def test_read_all_exact_values(tmp_path, suffix, header, newline, trailing_blank):
    path = write(tmp_path / f"vec{suffix}", vector_text(header, newline, trailing_blank))
    words, matrix = read_word_vectors(path)
    assert words == [w for w, _ in ENTRIES]
    assert matrix.dtype == torch.float32 and matrix.shape == (len(ENTRIES), 3)
    for row, (_, values) in enumerate(ENTRIES):
        assert torch.equal(matrix[row], expected(values))
    assert vector_file_dim(path) == 3


def test_zip_archive(tmp_path):
    path = tmp_path / "glove.zip"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("glove.txt", vector_text(header=True, newline="\r\n"))
    words, matrix = read_word_vectors(path, vocab={"cat"})
    assert words == ["cat"] and torch.equal(matrix[0], expected("-1.5 0 2.25"))
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("README", "two members")
    with pytest.raises(ValueError, match=r"glove\.zip: a \.zip must hold exactly one vector file, found 2"):
        read_word_vectors(path)


def test_iter_line_numbers_and_spaced_word(tmp_path):
    path = write(tmp_path / "vec.txt", vector_text(header=True, newline="\r\n"))
    items = list(iter_word_vectors(path))
    assert [line_no for line_no, _, _ in items] == list(range(2, len(ENTRIES) + 2))  # header is line 1
    line_no, word, values = items[2]
    assert word == ". . ." and values.dtype == np.float32
    np.testing.assert_array_equal(values, np.array([4.5, -5, 0.6], dtype=np.float32))


def test_trailing_spaces_and_blank_lines_are_ignored(tmp_path):
    path = write(tmp_path / "vec.txt", "\n\na 1 2 \n\n  \nb 3 4\n\n")
    words, matrix = read_word_vectors(path)
    assert words == ["a", "b"]
    assert torch.equal(matrix, torch.tensor([[1.0, 2.0], [3.0, 4.0]]))


def test_vocab_restriction_keeps_file_order(tmp_path):
    path = write(tmp_path / "vec.xz", vector_text(header=True))
    words, matrix = read_word_vectors(path, vocab=["cat", "dog", ". . .", "the"], dim=3)
    assert words == ["the", ". . .", "cat"]
    assert torch.equal(matrix, torch.stack([expected("0.1 0.2 0.3"), expected("4.5 -5 6e-1"), expected("-1.5 0 2.25")]))


def test_lowercase_keeps_first_occurrence(tmp_path):
    path = write(tmp_path / "vec.gz", vector_text())
    words, matrix = read_word_vectors(path, vocab={"the", "CAT"}, lowercase=True)
    assert words == ["the", "cat"]
    assert torch.equal(matrix[0], expected("1 2 3"))  # `The` (line 1) wins over `the` and `THE`
    # without lowercase each casing is its own word
    words, matrix = read_word_vectors(path, vocab={"the", "THE"})
    assert words == ["the", "THE"] and torch.equal(matrix[1], expected("7 7 7"))
    # full read, lowercase: one entry per lower-cased word, the first one
    words, matrix = read_word_vectors(path, lowercase=True)
    assert words == ["the", ". . .", "cat", "<unk>", "naïve"]
    assert torch.equal(matrix[0], expected("1 2 3"))


def test_duplicate_words_first_occurrence(tmp_path):
    path = write(tmp_path / "vec.txt", "a 1 1\nb 2 2\na 3 3\n")
    words, matrix = read_word_vectors(path)
    assert words == ["a", "b"] and torch.equal(matrix, torch.tensor([[1.0, 1.0], [2.0, 2.0]]))
    assert [w for _, w, _ in iter_word_vectors(path)] == ["a", "b", "a"]  # the iterator yields everything


def test_stop_when_complete_stops_reading(tmp_path):
    # a malformed line after the requested words is only seen when reading to the end
    path = write(tmp_path / "vec.txt", "a 1 1\nb 2 2\nc 3\n")
    words, matrix = read_word_vectors(path, vocab={"a", "b"})
    assert words == ["a", "b"]
    with pytest.raises(ValueError, match=r"line 3: expected a word and 2 vector values, found 2 fields"):
        read_word_vectors(path, vocab={"a", "b"}, stop_when_complete=False)


def test_many_lines_chunks_and_growth(tmp_path):
    rng = np.random.default_rng(0)
    values = rng.normal(size=(5000, 4)).astype(np.float32)
    text = "".join(f"w{i} " + " ".join(f"{x:.7g}" for x in row) + "\n" for i, row in enumerate(values))
    path = write(tmp_path / "big.txt", text)
    expect = torch.tensor([[float(f"{x:.7g}") for x in row] for row in values], dtype=torch.float32)
    words, matrix = read_word_vectors(path)
    assert words == [f"w{i}" for i in range(5000)]
    assert torch.equal(matrix, expect)
    keep = [f"w{i}" for i in range(3, 5000, 7)]
    words, matrix = read_word_vectors(path, vocab=keep)
    assert words == keep and torch.equal(matrix, expect[3::7])


def test_full_read_buffer_grows_when_the_size_estimate_is_low(tmp_path):
    # long words first, short ones later: the row count extrapolated from the first chunk is far too low
    lines = [f"{'x' * 300}{i} {i} {-i}" for i in range(300)] + [f"w{i} {i} {i}" for i in range(4000)]
    path = write(tmp_path / "skewed.gz", "\n".join(lines) + "\n")
    words, matrix = read_word_vectors(path)
    assert len(words) == 4300 and matrix.shape == (4300, 2) and matrix.is_contiguous()
    assert torch.equal(matrix[:300, 1], -torch.arange(300, dtype=torch.float32))
    assert torch.equal(matrix[300:, 0], torch.arange(4000, dtype=torch.float32))


# ------------------------------------------------------------------------------------------------------------
# Embedding matrix of a vocabulary
# ------------------------------------------------------------------------------------------------------------


def test_build_embedding_matrix(tmp_path):
    path = write(tmp_path / "vec.txt", vector_text(header=True))
    vocab = ["<pad>", "<unk>", "<s>", "</s>", "cat", "the", "missing", ". . .", "naïve"]
    matrix, found = build_embedding_matrix(path, vocab, dim=3)
    assert matrix.shape == (9, 3) and matrix.dtype == torch.float32 and found.dtype == torch.bool
    assert found.tolist() == [False, False, False, False, True, True, False, True, True]
    assert torch.equal(matrix[:4], torch.zeros(4, 3))  # special tokens are zero even though `<unk>` is in the file
    assert torch.equal(matrix[4], expected("-1.5 0 2.25"))
    assert torch.equal(matrix[5], expected("0.1 0.2 0.3"))
    assert torch.equal(matrix[6], torch.zeros(3))
    assert torch.equal(matrix[7], expected("4.5 -5 6e-1"))
    assert torch.equal(matrix[8], expected("0.5 0.25 0.125"))


def test_build_embedding_matrix_lowercase(tmp_path):
    path = write(tmp_path / "vec.txt", vector_text())
    matrix, found = build_embedding_matrix(path, ["<pad>", "the", "The", "cat"], dim=3, lowercase=True)
    assert found.tolist() == [False, True, True, True]
    assert torch.equal(matrix[1], expected("1 2 3")) and torch.equal(matrix[2], expected("1 2 3"))


def test_embedding_matrix_from_vectors_reuses_one_read(tmp_path):
    path = write(tmp_path / "vec.txt", vector_text())
    vocab = ["<pad>", "<unk>", "the", "THE", "cat", "dog"]
    file_words, vectors = read_word_vectors(path, vocab=vocab[2:], lowercase=True)  # e.g. to choose the vocabulary
    matrix, found = embedding_matrix_from_vectors(vocab, file_words, vectors, lowercase=True)
    expect_matrix, expect_found = build_embedding_matrix(path, vocab, dim=3, lowercase=True)
    assert torch.equal(matrix, expect_matrix) and torch.equal(found, expect_found)
    assert found.tolist() == [False, False, True, True, True, False]
    with pytest.raises(ValueError, match=r"vectors must be \(len\(file_words\), dim\)"):
        embedding_matrix_from_vectors(vocab, file_words[:1], vectors)


def test_build_embedding_matrix_bad_input(tmp_path):
    path = write(tmp_path / "vec.txt", vector_text())
    with pytest.raises(ValueError, match=r"only special tokens"):
        build_embedding_matrix(path, ["<pad>", "<unk>"], dim=3)
    with pytest.raises(TypeError, match=r"sequence of str"):
        build_embedding_matrix(path, "cat", dim=3)
    with pytest.raises(ValueError, match=r"none of the 2 requested words were found in .*vec\.txt"):
        build_embedding_matrix(path, ["<pad>", "dog", "cow"], dim=3)
    with pytest.raises(ValueError, match=r"vec\.txt, line 1: the first entry has 3 vector values, but dim=300"):
        build_embedding_matrix(path, ["cat"], dim=300)


# ------------------------------------------------------------------------------------------------------------
# Errors: file path and line number
# ------------------------------------------------------------------------------------------------------------


def test_wrong_dimension_names_the_line(tmp_path):
    path = write(tmp_path / "vec.gz", "a 1 2 3\nb 1 2 3\nc 1 2\n")
    with pytest.raises(ValueError, match=r"vec\.gz, line 3: expected a word and 3 vector values, found 3 fields"):
        read_word_vectors(path)
    with pytest.raises(ValueError, match=r"line 3: .*3 is the number of values on line 1"):
        list(iter_word_vectors(path))
    header = write(tmp_path / "h.txt", "3 3\na 1 2 3\n\nb 1 2\n")
    with pytest.raises(ValueError, match=r"h\.txt, line 4: .*declared by the header on line 1"):
        read_word_vectors(header)


def test_requested_dim_differs_from_file(tmp_path):
    path = write(tmp_path / "vec.txt", "a 1 2 3\n")
    with pytest.raises(ValueError, match=r"vec\.txt, line 1: the first entry has 3 vector values, but dim=2"):
        read_word_vectors(path, dim=2)
    header = write(tmp_path / "h.txt", "1 3\na 1 2 3\n")
    with pytest.raises(ValueError, match=r"h\.txt, line 1: the header '1 3' declares 3-dimensional .* dim=4"):
        read_word_vectors(header, dim=4)
    with pytest.raises(ValueError, match=r"dim must be a positive int"):
        read_word_vectors(path, dim=0)


def test_header_with_wrong_dimension_is_caught_on_the_first_entry(tmp_path):
    # "2 2" but 3 values per entry: without the check, "a 1" / "b 4" would be read as words with [2, 3] / [5, 6]
    path = write(tmp_path / "h.txt", "2 2\n\na 1 2 3\nb 4 5 6\n")
    with pytest.raises(ValueError, match=r"h\.txt, line 3: the first entry has 3 vector values, but the dimension is "
                                         r"2, declared by the header on line 1 \(the file's dimension is 3\)"):
        read_word_vectors(path)
    with pytest.raises(ValueError, match=r"line 3: .* but dim=2 was requested and declared by the header on line 1"):
        build_embedding_matrix(path, ["<pad>", "a", "b"], dim=2)
    with pytest.raises(ValueError, match=r"line 3: .*declared by the header"):
        vector_file_dim(path)
    fewer = write(tmp_path / "fewer.txt", "1 3\na 1 2\n")
    with pytest.raises(ValueError, match=r"fewer\.txt, line 2: the first entry has 2 vector values, but the dimension"):
        read_word_vectors(fewer)


def test_first_word_with_spaces_when_the_dimension_is_known(tmp_path):
    path = write(tmp_path / "vec.txt", ". . . 1 2 3\n- - 0.5 -1 2e1\na 4 5 6\n")
    words, matrix = read_word_vectors(path, dim=3)
    assert words == [". . .", "- -", "a"]
    assert torch.equal(matrix, torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 20.0], [4.0, 5.0, 6.0]]))
    # the same after a header, without dim
    header = write(tmp_path / "h.txt", "3 3\n. . . 1 2 3\na 4 5 6\n")
    assert read_word_vectors(header)[0] == [". . .", "a"] and vector_file_dim(header) == 3
    # dim=None and no header: the first word must not contain a space (documented), line 2 then disagrees
    with pytest.raises(ValueError, match=r"line 2: .*5 is the number of values on line 1"):
        read_word_vectors(path)
    # a first entry that is a word and only numbers is a file of another dimension, not a word "a 1 2"
    other = write(tmp_path / "5d.txt", "a 1 2 3 4 5\n")
    with pytest.raises(ValueError, match=r"line 1: the first entry has 5 vector values, but dim=3 was requested "
                                         r"\(the file's dimension is 5\)"):
        read_word_vectors(other, dim=3)


def test_unparseable_value_names_the_line(tmp_path):
    lines = [f"w{i} {i} {i}" for i in range(1500)]
    lines[1234] = "bad 0.5 0.5x"  # line 1235, inside the second parse chunk
    path = write(tmp_path / "vec.xz", "\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"vec\.xz, line 1235: could not parse the vector of 'bad'"):
        read_word_vectors(path)
    with pytest.raises(ValueError, match=r"line 1235: could not parse"):
        list(iter_word_vectors(path))
    # values are parsed only for kept words: a restricted read that skips the bad line succeeds
    words, matrix = read_word_vectors(path, vocab={"w1", "w1499"})
    assert words == ["w1", "w1499"] and torch.equal(matrix[1], torch.tensor([1499.0, 1499.0]))


def test_double_space_and_non_finite(tmp_path):
    path = write(tmp_path / "vec.txt", "a 1 2\nb 1  2\n")  # an empty field: "b 1" is read as the word, "" fails
    with pytest.raises(ValueError, match=r"line 2: could not parse the vector of 'b 1'"):
        read_word_vectors(path)
    path = write(tmp_path / "nan.txt", "a 1 2\nb nan 2\n")
    with pytest.raises(ValueError, match=r"nan\.txt, line 2: the vector of 'b' has a non-finite value"):
        read_word_vectors(path)


def test_empty_file_and_no_word_found(tmp_path):
    for name, text in [("empty.txt", ""), ("blank.txt", "\n\n"), ("header.txt", "0 300\n")]:
        path = write(tmp_path / name, text)
        with pytest.raises(ValueError, match=rf"{name} contains no word vectors"):
            read_word_vectors(path)
    path = write(tmp_path / "vec.txt", vector_text())
    with pytest.raises(ValueError, match=r"none of the 3 requested words were found in .*vec\.txt"):
        read_word_vectors(path, vocab=["x", "y", "z"])
    with pytest.raises(ValueError, match=r"the vocabulary is empty"):
        read_word_vectors(path, vocab=[])
    with pytest.raises(ValueError, match=r"line 1: the first entry has a word but no vector values"):
        read_word_vectors(write(tmp_path / "noval.txt", "word\n"))


def test_file_not_found_and_bad_files(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"word vector file not found: .*nope\.txt"):
        read_word_vectors(tmp_path / "nope.txt")
    with pytest.raises(ValueError, match=r"is a directory"):
        read_word_vectors(tmp_path)
    bad_utf8 = tmp_path / "latin1.txt"
    bad_utf8.write_bytes(b"a 1 2\nna\xefve 1 2\n")
    with pytest.raises(ValueError, match=r"latin1\.txt, line 2: the word is not valid UTF-8"):
        read_word_vectors(bad_utf8)
    wrong_suffix = tmp_path / "vectors.txt"
    wrong_suffix.write_bytes(gzip.compress(b"a 1 2\n"))
    with pytest.raises(ValueError, match=r"looks gz-compressed but the name does not end in \.gz"):
        read_word_vectors(wrong_suffix)
    truncated = tmp_path / "cut.gz"
    data = gzip.compress("".join(f"w{i} {i} {i}\n" for i in range(3000)).encode())
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.gz, after line \d+: the file is corrupted or truncated"):
        read_word_vectors(truncated)


# ------------------------------------------------------------------------------------------------------------
# Character n-grams
# ------------------------------------------------------------------------------------------------------------


def test_char_ngrams_definition():
    assert char_ngrams("ab") == [
        "2gram-#BEGIN#a",
        "2gram-ab",
        "2gram-b#END#",
        "3gram-#BEGIN#ab",
        "3gram-ab#END#",
        "4gram-#BEGIN#ab#END#",
    ]
    assert char_ngrams("a") == ["2gram-#BEGIN#a", "2gram-a#END#", "3gram-#BEGIN#a#END#"]
    assert char_ngrams("") == ["2gram-#BEGIN##END#"]
    assert len(char_ngrams("hello")) == 15  # 3 * L
    assert char_ngrams("aaa").count("2gram-aa") == 2


def test_build_char_ngram_matrix_mean_by_hand(tmp_path):
    text = "\n".join(
        [
            "2gram-#BEGIN#a 1 0",
            "2gram-ab 0 2",
            "3gram-ab#END# 4 4",
            "2gram-aa 1 1",
            "1gram-a 100 100",  # unigrams are never used
            "2gram-#BEGIN#z 5 -5",
        ]
    )
    path = write(tmp_path / "charNgram.txt", text + "\n")
    words = ["<pad>", "ab", "aaa", "zz", "q"]
    matrix, found = build_char_ngram_matrix(path, words, dim=2)
    # "ab": 2gram-#BEGIN#a, 2gram-ab, 3gram-ab#END# are in the file -> mean of (1,0), (0,2), (4,4)
    ab = (torch.tensor([1.0, 0.0]) + torch.tensor([0.0, 2.0]) + torch.tensor([4.0, 4.0])) / 3
    # "aaa": 2gram-#BEGIN#a once, 2gram-aa twice -> mean of (1,0), (1,1), (1,1)
    aaa = (torch.tensor([1.0, 0.0]) + 2 * torch.tensor([1.0, 1.0])) / 3
    assert found.tolist() == [False, True, True, True, False]
    assert torch.allclose(matrix[1], ab, atol=0, rtol=1e-7)
    assert torch.allclose(matrix[2], aaa, atol=0, rtol=1e-7)
    assert torch.equal(matrix[3], torch.tensor([5.0, -5.0]))
    assert torch.equal(matrix[0], torch.zeros(2)) and torch.equal(matrix[4], torch.zeros(2))
    with pytest.raises(ValueError, match=r"none of the \d+ requested words were found in .*charNgram\.txt"):
        build_char_ngram_matrix(path, ["xyz"], dim=2)
    with pytest.raises(ValueError, match=r"line 1: the first entry has 2 vector values, but dim=100"):
        build_char_ngram_matrix(path, ["ab"])


# ------------------------------------------------------------------------------------------------------------
# Real files in ../shared/data
# ------------------------------------------------------------------------------------------------------------


def naive_parse(lines):
    """Reference: `word v1 ... vD` split on single spaces, the last D fields are the vector."""
    table = {}
    for line in lines:
        fields = line.rstrip("\r\n").split(" ")
        table.setdefault(fields[0], torch.tensor(np.array(fields[1:], dtype=np.float32)))
    return table


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not available: {path} (needs ../shared/data next to the repository)")
    return path


def test_real_glove_840b_sample_with_header_and_crlf():
    path = need(DATA_DIR / "glove" / "glove.840B.300d.atae_lstm_200words.txt")
    raw_lines = path.read_bytes().decode("utf-8").split("\n")  # keeps the "\r"
    # the quirks this file exercises: a header, CRLF line ends, no line end after the last entry
    assert raw_lines[0] == "200 300\r" and all(line.endswith("\r") for line in raw_lines[:-1])
    assert len(raw_lines) == 201 and not raw_lines[-1].endswith("\r")
    words, matrix = read_word_vectors(path, dim=300)
    assert len(words) == 200 and matrix.shape == (200, 300) and words[:3] == [",", ".", "the"]
    reference = naive_parse(raw_lines[1:])
    assert list(reference) == words
    for row, word in enumerate(words):
        assert torch.equal(matrix[row], reference[word])
    assert matrix[0, 0].item() == np.float32(-0.082752)


def test_real_glove_840b_samples_agree_and_lowercase():
    top100 = need(DATA_DIR / "glove" / "glove.840B.300d.torchtext_test_asset_top100.txt")
    other = need(DATA_DIR / "glove" / "glove.840B.300d.atae_lstm_200words.txt")
    words_a, matrix_a = read_word_vectors(top100)
    words_b, matrix_b = read_word_vectors(other)
    common = sorted(set(words_a) & set(words_b))
    assert len(common) == 87  # per data/glove/README.md
    for word in common:
        assert torch.equal(matrix_a[words_a.index(word)], matrix_b[words_b.index(word)])
    # cased file, lower-case lookup: `i` only exists as `I`; `the` comes before `The`
    matrix, found = build_embedding_matrix(top100, ["<pad>", "i", "the", "zzzz"], dim=300, lowercase=True)
    assert found.tolist() == [False, True, True, False]
    assert torch.equal(matrix[1], matrix_a[words_a.index("I")])
    assert torch.equal(matrix[2], matrix_a[words_a.index("the")])


def test_real_glove_6b_100d_gz():
    path = need(DATA_DIR / "glove" / "glove.6B.100d.allennlp_sample_top100.txt.gz")
    words, matrix = read_word_vectors(path)
    assert len(words) == 100 and matrix.shape == (100, 100) and vector_file_dim(path) == 100
    with gzip.open(path, "rt", encoding="utf-8") as f:
        reference = naive_parse(f)
    for row, word in enumerate(words):
        assert torch.equal(matrix[row], reference[word])


def test_real_stand_in_vectors_restricted_vocab():
    path = need(DATA_DIR / "vectors" / "w2v-lower-300d.txt.xz")
    wanted = ["movie", "good", "the", "terrible"]  # all near the top: reading stops early (stop_when_complete)
    matrix, found = build_embedding_matrix(path, ["<pad>", *wanted], dim=300)
    assert found.tolist() == [False, True, True, True, True]
    reference = {}
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for line in f:
            reference.update((w, v) for w, v in naive_parse([line]).items() if w in wanted)
            if len(reference) == len(wanted):
                break
    for i, word in enumerate(wanted, start=1):
        assert torch.equal(matrix[i], reference[word])
    assert torch.equal(matrix[0], torch.zeros(300))


# ------------------------------------------------------------------------------------------------------------
# From vectors to a checkpoint: vocabulary selection and checkpoint assembly (modeling_cove/build.py)
# ------------------------------------------------------------------------------------------------------------


def test_select_vocabulary_cap():
    from collections import Counter

    from modeling_cove.build import select_vocabulary

    counts = Counter({"a": 9, "c": 8, "b": 8, "d": 1, "e": 2, "<unk>": 50})
    has_vector = {"d"}.__contains__  # "d" is rare but has a vector; "e" is rare without one; "<unk>" is special
    assert select_vocabulary(counts, has_vector, oov_min_count=5) == ["a", "b", "c", "d"]
    assert select_vocabulary(counts, has_vector, oov_min_count=5, max_size=2) == ["a", "b"]
    assert select_vocabulary(counts, has_vector, oov_min_count=5, max_size=np.int64(3)) == ["a", "b", "c"]
    assert select_vocabulary(counts, has_vector, oov_min_count=5, max_size=0) == []  # 0 is a cap, not "no cap"
    assert select_vocabulary(counts, oov_min_count=2, max_size=10) == ["a", "b", "c", "e"]
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match=r"max_size must be None \(no cap\) or an int >= 0, got"):
            select_vocabulary(counts, has_vector, max_size=bad)


def test_create_cove_checkpoint_config_and_overrides():
    from modeling_cove import CoveConfig
    from modeling_cove.build import create_cove_checkpoint

    words, vectors = ["Cat", "dog"], torch.arange(18, dtype=torch.float32).reshape(6, 3)
    # a given config: its lowercase drives the tokenizer; vocab_size and word_vector_dim are set from the inputs
    config = CoveConfig(lowercase=False, hidden_size=2)
    model, tokenizer = create_cove_checkpoint(words, vectors, config=config)
    assert model.config is config and (config.vocab_size, config.word_vector_dim, config.lowercase) == (6, 3, False)
    assert tokenizer("Cat dog cat")["input_ids"] == [4, 5, 1]  # cased: "cat" is unknown
    assert torch.equal(model.embeddings.weight[4], torch.tensor([12.0, 13.0, 14.0]))
    assert torch.equal(model.embeddings.weight[1], torch.zeros(3))  # special rows are zeroed
    model, tokenizer = create_cove_checkpoint(words, vectors, config=CoveConfig(hidden_size=2), lowercase=True)
    assert model.config.lowercase and tokenizer("Cat dog")["input_ids"] == [1, 5]  # "cat" is not in the vocab
    # no config: overrides build it, lowercase defaults to True
    model, _ = create_cove_checkpoint(words, vectors, hidden_size=2, cove_output="both")
    assert (model.config.hidden_size, model.config.cove_output, model.config.lowercase) == (2, "both", True)
    # conflicts are errors, not silently ignored
    with pytest.raises(ValueError, match=r"both a config and config overrides \['cove_output', 'hidden_size'\]"):
        create_cove_checkpoint(words, vectors, config=CoveConfig(hidden_size=2), hidden_size=8, cove_output="both")
    with pytest.raises(ValueError, match=r"lowercase=True disagrees with config\.lowercase=False"):
        create_cove_checkpoint(words, vectors, config=CoveConfig(lowercase=False, hidden_size=2), lowercase=True)
    with pytest.raises(ValueError, match=r"config_overrides may not set \['vocab_size', 'word_vector_dim'\]"):
        create_cove_checkpoint(words, vectors, vocab_size=10, word_vector_dim=3)


def test_special_tokens_mirror_the_tokenizers():
    """vectors.py keeps its own copy (it is loaded alone by the vectors-loading benchmark); it must not drift."""
    from modeling_cove import tokenization_cove, vectors

    assert tuple(vectors.SPECIAL_TOKENS) == tuple(tokenization_cove.SPECIAL_TOKENS)
