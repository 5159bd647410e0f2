"""Word vectors in GloVe text format, and character n-gram vectors (Hashimoto et al. 2016), read by streaming.

GloVe text format (word2vec text format is the same plus a header line)::

    word v1 v2 ... vD        one entry per line, fields separated by single spaces, UTF-8

How a file is read (the real ``glove.840B.300d.txt`` is read unchanged):

- Compression is chosen by suffix: ``.gz``, ``.xz``/``.lzma``, ``.bz2``, ``.zip`` (one member); anything else is
  plain text. A plain-text path whose first bytes are a gzip/xz/bz2/zip signature is an error (wrong suffix).
- Line ends ``\\n`` or ``\\r\\n``; trailing spaces are ignored; blank lines (e.g. a trailing one) are skipped.
  Only ``\\n`` ends a line, so other Unicode whitespace inside words is kept.
- Header: the first (non-blank) line is a word2vec header, and is skipped, when it is exactly two non-negative
  integers ``N D`` (unless ``dim=1`` was requested, where ``"5 3"`` is a word). ``D`` is then the file's dimension;
  ``N`` is not checked. A line of that form anywhere else is an ordinary (and here malformed) entry.
- Dimension: from the header or ``dim`` (they must agree), else the number of values on the first entry, whose
  word then must not contain a space (true of every published file). When the dimension ``D`` is known before the
  first entry, that entry may have a word with spaces (rule below), but a first entry of another dimension is an
  error at its line: fewer than ``D`` values, or more than ``D`` with every field after the first one a number
  (``"a 1 2 3"`` after a header ``"2 2"``).
- Words with spaces (``glove.840B`` has a few, e.g. ``". . ."``): every line must have at least ``D + 1``
  fields; the LAST ``D`` fields are the vector and everything before them (joined by single spaces) is the word.
  A line with fewer fields is an error. (So a stray line with too many values would be read as a word with a
  space in it; whole files of the wrong dimension are caught on their first line.)
- Duplicates: the first occurrence of a word is kept. Files are frequency-sorted, so first = most frequent; with
  ``lowercase=True`` this means ``the`` wins over ``The`` and ``THE``.
- Values must be finite decimal numbers. The word of every line is decoded and its field count checked; the
  values are parsed only for the words that are kept (that is most of the speed of a vocabulary-restricted read),
  so a malformed value on a skipped line is not reported.
- Every error is a ``ValueError`` naming the file and the 1-based physical line number (as ``sed -n Np`` counts);
  a missing file is a ``FileNotFoundError``.

Memory is proportional to what is kept: lines are streamed, never collected, and the result is written into one
float32 buffer, sized to the requested vocabulary (or, for a full read, to the number of lines extrapolated from the
position in the file), then shrunk in place to the rows found. Fixed costs on top: one parse chunk (256 lines of
text) and the decompressor's own state (for ``.xz`` files made with ``xz -9``, liblzma's 64 MiB dictionary).
"""

import bz2
import gzip
import io
import lzma
import os
import re
import zipfile
from pathlib import Path
from typing import Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

__all__ = ["build_char_ngram_matrix", "build_embedding_matrix", "char_ngrams", "embedding_matrix_from_vectors",
           "iter_word_vectors", "read_word_vectors", "vector_file_dim"]

PathLike = Union[str, os.PathLike]

# The tokenizer's special tokens (ids 0..3 of every CoVe vocabulary; they never get a pretrained vector). Their home is
# tokenization_cove.SPECIAL_TOKENS; this module imports nothing from the package because the vectors-loading benchmark
# loads it alone, by path, to measure it without the package. tests/test_vectors.py checks the two are equal.
SPECIAL_TOKENS = ("<pad>", "<unk>", "<s>", "</s>")

# Character n-grams of Hashimoto et al. (2016): key "{n}gram-{symbols}" over #BEGIN# + chars + #END#.
NGRAM_BEGIN = "#BEGIN#"
NGRAM_END = "#END#"
NGRAM_ORDERS = (2, 3, 4)

_PARSE_CHUNK_ROWS = 256  # kept lines parsed together (one numpy call per chunk; ~0.6 MB of text at 300-d)
_PROGRESS_EVERY = 1 << 13  # lines between progress-bar updates
_NUMBER = re.compile(rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")  # a decimal number, as in vector values
_MAGIC = {
    b"\x1f\x8b": ".gz",
    b"\xfd7zXZ\x00": ".xz",
    b"BZh": ".bz2",
    b"PK\x03\x04": ".zip",
}


# ----------------------------------------------------------------------------------------------------------------
# Opening files
# ----------------------------------------------------------------------------------------------------------------


def _open_binary(path: Path):
    """Returns `(stream, raw, total_bytes)`: a binary line stream, the raw file (its `tell()` drives progress)."""
    if not path.exists():
        raise FileNotFoundError(f"word vector file not found: {path}")
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a word vector file")
    suffix = path.suffix.lower()
    raw = open(path, "rb")
    total = os.fstat(raw.fileno()).st_size
    try:
        if suffix == ".gz":
            return gzip.GzipFile(fileobj=raw, mode="rb"), raw, total
        if suffix in (".xz", ".lzma"):
            return lzma.LZMAFile(raw, mode="rb"), raw, total
        if suffix == ".bz2":
            return bz2.BZ2File(raw, mode="rb"), raw, total
        if suffix == ".zip":
            try:
                archive = zipfile.ZipFile(raw)
            except zipfile.BadZipFile as exc:
                raise ValueError(f"{path}: not a valid .zip file ({exc})") from None
            members = [info for info in archive.infolist() if not info.is_dir()]
            if len(members) != 1:
                names = [info.filename for info in members]
                raise ValueError(f"{path}: a .zip must hold exactly one vector file, found {len(names)}: {names[:5]}")
            return archive.open(members[0]), raw, total
        head = raw.read(6)
        raw.seek(0)
        for magic, expected in _MAGIC.items():
            if head.startswith(magic):
                raise ValueError(
                    f"{path}: the content looks {expected[1:]}-compressed but the name does not end in {expected}; "
                    f"rename the file (compression is detected by suffix)"
                )
        return raw, raw, total
    except BaseException:
        raw.close()
        raise


# ----------------------------------------------------------------------------------------------------------------
# Line scanning: header, dimension, word / values split — no float parsing here
# ----------------------------------------------------------------------------------------------------------------


def _is_header(fields: List[bytes]) -> bool:
    return len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit()


class _VectorLines:
    """Iterates `(line_no, word, values_bytes)` over a vector file; `self.dim` is known after the first item.

    Checks the field count of every line and decodes every word, but parses no numbers.
    """

    def __init__(self, path: PathLike, dim: Optional[int] = None, progress: bool = False, desc: Optional[str] = None):
        if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
            raise ValueError(f"dim must be a positive int or None, got {dim!r}")
        self.path = Path(path)
        self.requested_dim = dim
        self.dim = dim
        self.dim_source = f"dim={dim} was requested" if dim is not None else None
        self.header_line = None  # the line number of a word2vec header, once read
        self.progress = progress
        self.desc = desc or self.path.name
        self.lines_read = 0  # physical lines consumed so far
        self._raw = None  # the open raw file while iterating
        self._total_bytes = 0

    def estimated_lines(self, line_no: int) -> int:
        """Lines in the whole file, extrapolated from `line_no` lines read and the raw (compressed) position."""
        position = self._raw.tell() if self._raw is not None and not self._raw.closed else 0
        return int(line_no * self._total_bytes / position) + 1 if position > 0 else line_no

    def error(self, line_no: int, message: str) -> ValueError:
        return ValueError(f"{self.path}, line {line_no}: {message}")

    def _header_dim(self, line_no: int, line: bytes, header_dim: int) -> int:
        """The dimension declared by a word2vec header `N D`, checked against a requested `dim`."""
        if header_dim < 1:
            raise self.error(line_no, f"the header {line.decode()!r} declares dimension {header_dim}")
        if self.requested_dim is not None and header_dim != self.requested_dim:
            raise self.error(
                line_no,
                f"the header {line.decode()!r} declares {header_dim}-dimensional vectors, "
                f"but dim={self.requested_dim} was requested",
            )
        self.dim = header_dim
        self.header_line = line_no
        self.dim_source = f"declared by the header on line {line_no}"
        return header_dim

    def _first_entry_dim(self, line_no: int, fields: List[bytes], dim: Optional[int]) -> int:
        """The file's dimension, set or checked on its first entry (`fields`: the line split on spaces).

        With `dim` unknown it is the number of fields after the first (the first word must not contain a space).
        With `dim` known (requested or from a header), the entry must have at least `dim` values, and more than
        `dim + 1` fields are a word with spaces, unless every field between the first and the last `dim` is a
        number: that is a file of another dimension (e.g. a header declaring the wrong `D`), reported here.
        """
        values = len(fields) - 1
        if dim is None:
            if values < 1:
                raise self.error(line_no, "the first entry has a word but no vector values")
            self.dim = values
            self.dim_source = f"the number of values on line {line_no}"
            return values
        word_tail = fields[1 : values - dim + 1]  # the fields between the first and the last `dim`
        if values < dim or (word_tail and all(_NUMBER.fullmatch(field) for field in word_tail)):
            header = f"declared by the header on line {self.header_line}" if self.header_line else None
            if self.requested_dim is None:
                expected = f"the dimension is {dim}, {header}"
            else:
                expected = f"dim={dim} was requested" + (f" and {header}" if header else "")
            raise self.error(
                line_no,
                f"the first entry has {values} vector values, but {expected} (the file's dimension is {values})",
            )
        return dim

    def __iter__(self) -> Iterator[Tuple[int, str, bytes]]:
        stream, raw, total = _open_binary(self.path)
        self._raw, self._total_bytes = raw, total
        bar = None
        if self.progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc=self.desc)
        path, dim, line_no, reported = self.path, self.dim, 0, 0
        may_be_header = True  # the first non-blank line may be a word2vec header
        first_entry = True  # the next non-blank line is the file's first entry (after any header)
        try:
            for line_no, line in enumerate(stream, start=1):
                if bar is not None and line_no % _PROGRESS_EVERY == 0:
                    position = raw.tell()
                    bar.update(position - reported)
                    reported = position
                line = line.rstrip(b"\r\n ")
                if line_no == 1 and line.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
                    line = line[3:]
                if not line:
                    continue
                if first_entry:
                    fields = line.split(b" ")
                    if may_be_header:
                        may_be_header = False
                        if _is_header(fields) and self.requested_dim != 1:
                            dim = self._header_dim(line_no, line, int(fields[1]))
                            continue
                    first_entry = False
                    dim = self._first_entry_dim(line_no, fields, dim)
                spaces = line.count(b" ")
                if spaces == dim:  # the common case: a word without spaces
                    cut = line.index(b" ")
                    word_bytes, values = line[:cut], line[cut + 1 :]
                elif spaces > dim:  # a word that contains spaces (glove.840B): the last `dim` fields are values
                    word_bytes = line.rsplit(b" ", dim)[0]
                    values = line[len(word_bytes) + 1 :]
                else:
                    raise self.error(
                        line_no,
                        f"expected a word and {dim} vector values, found {spaces + 1} fields in all "
                        f"(wrong dimension; {dim} is {self.dim_source})",
                    )
                try:
                    word = word_bytes.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise self.error(line_no, f"the word is not valid UTF-8 ({exc})") from None
                yield line_no, word, values
        except (EOFError, OSError, lzma.LZMAError, zipfile.BadZipFile) as exc:
            raise ValueError(
                f"{path}, after line {line_no}: the file is corrupted or truncated ({type(exc).__name__}: {exc})"
            ) from exc
        finally:
            self.lines_read = line_no
            if bar is not None:
                bar.update((raw.tell() if not raw.closed else total) - reported)  # stops short on an early stop
                bar.close()
            stream.close()
            raw.close()


def _parse_values(values: bytes, dim: int, lines: _VectorLines, line_no: int, word: str) -> np.ndarray:
    """One line's vector as float32 `(dim,)`, or a ValueError naming the line."""
    try:
        vector = np.array(values.split(b" "), dtype=np.float32)
    except ValueError as exc:
        raise lines.error(line_no, f"could not parse the vector of {word!r}: {exc}") from None
    if vector.shape != (dim,):  # cannot happen after the field count check; kept as a guard
        raise lines.error(line_no, f"the vector of {word!r} has {vector.shape[0]} values, expected {dim}")
    if not np.isfinite(vector).all():
        raise lines.error(line_no, f"the vector of {word!r} has a non-finite value (nan or inf)")
    return vector


def _parse_chunk(chunk: List[Tuple[int, str, bytes]], dim: int, lines: _VectorLines) -> np.ndarray:
    """Vectors of several kept lines as float32 `(len(chunk), dim)`, parsed by one numpy call."""
    try:
        block = np.loadtxt(
            io.BytesIO(b"\n".join(values for _, _, values in chunk)),
            dtype=np.float32,
            delimiter=" ",
            comments=None,
            quotechar=None,
            ndmin=2,
        )
        if block.shape == (len(chunk), dim) and np.isfinite(block).all():
            return block
    except ValueError:
        pass
    # Something is malformed: parse line by line to name the line.
    for line_no, word, values in chunk:
        _parse_values(values, dim, lines, line_no, word)
    raise lines.error(chunk[0][0], f"could not parse the vectors of lines {chunk[0][0]}..{chunk[-1][0]}")


# ----------------------------------------------------------------------------------------------------------------
# Public readers
# ----------------------------------------------------------------------------------------------------------------


def iter_word_vectors(path: PathLike, dim: Optional[int] = None) -> Iterator[Tuple[int, str, np.ndarray]]:
    """Streams every entry of a GloVe/word2vec text file (see the module docstring for the format rules).

    Args:
        path: `.txt` (or any plain-text name), `.gz`, `.xz`, `.bz2` or `.zip` file.
        dim: expected dimension; `None` takes it from the header or the first line.

    Yields:
        `(line_no, word, values)`: the 1-based physical line number, the word, and a float32 numpy array `(dim,)`.
        Duplicate words are all yielded (de-duplication is `read_word_vectors`' job).
    """
    lines = _VectorLines(path, dim=dim)
    for line_no, word, values in lines:
        yield line_no, word, _parse_values(values, lines.dim, lines, line_no, word)


def _wanted_words(vocab: Optional[Iterable[str]], lowercase: bool, path: PathLike) -> Optional[set]:
    """The set of (lower-cased, with `lowercase`) words `read_word_vectors` keeps; None keeps every word."""
    if vocab is None:
        return None
    if isinstance(vocab, str):
        raise TypeError("vocab must be an iterable of words, not a single string")
    wanted = {word.lower() for word in vocab} if lowercase else set(vocab)
    if not wanted:
        raise ValueError(f"the vocabulary is empty: no word to read from {path}")
    return wanted


def _raise_no_words(path: PathLike, dim: Optional[int], wanted: Optional[set]):
    """The error of a read that kept no word: an empty file, or none of the requested words in it."""
    if dim is None:
        raise ValueError(f"{path} contains no word vectors (empty file, or only a header)")
    if wanted is not None:
        raise ValueError(f"none of the {len(wanted)} requested words were found in {path}")
    raise ValueError(f"{path} contains no word vectors")


def read_word_vectors(
    path: PathLike,
    vocab: Optional[Iterable[str]] = None,
    dim: Optional[int] = None,
    lowercase: bool = False,
    progress: bool = False,
    stop_when_complete: bool = True,
) -> Tuple[List[str], torch.Tensor]:
    """Reads the vectors of a GloVe/word2vec text file, optionally only those of a vocabulary.

    Args:
        path: the vector file (`.txt`, `.gz`, `.xz`, `.bz2`, `.zip`).
        vocab: words to keep (any iterable of str); `None` keeps every word. Memory is proportional to the kept
            words, not to the file.
        dim: expected dimension (`None`: from the header or the first line).
        lowercase: compare `word.lower()` of each file entry (and of each vocab entry) and keep the FIRST entry per
            lower-cased word — the most frequent casing, as the files are frequency-sorted. Returned words are
            lower-cased.
        progress: show a tqdm bar over the file's (compressed) bytes.
        stop_when_complete: with `vocab`, stop reading as soon as every vocab word has been found (same result;
            the rest of the file is then not checked for errors).

    Returns:
        `(words, matrix)`: the kept words in file order, and a float32 tensor `(len(words), dim)`.

    Raises:
        FileNotFoundError: no such file.
        ValueError: (with the path and line number) wrong dimension, unparseable or non-finite value, invalid
            UTF-8, corrupted compressed data; or no entry at all / none of the requested words found.
    """
    wanted = _wanted_words(vocab, lowercase, path)
    lines = _VectorLines(path, dim=dim, progress=progress)
    words: List[str] = []
    seen = set()
    buffer: Optional[np.ndarray] = None  # (capacity, dim) float32; rows [0, len(words)) are filled
    chunk: List[Tuple[int, str, bytes]] = []  # kept lines whose values are not parsed yet
    filled = 0

    def flush() -> None:
        nonlocal buffer, filled
        block = _parse_chunk(chunk, lines.dim, lines)
        needed = filled + len(block)
        if buffer is None or needed > buffer.shape[0]:
            if wanted is not None:  # at most one row per requested word
                capacity = len(wanted)
            else:  # full read: size from the position in the file (+5%); np.empty touches no page until written
                estimate = lines.estimated_lines(chunk[-1][0]) * 21 // 20
                capacity = max(needed, estimate, 0 if buffer is None else buffer.shape[0] * 9 // 8)
            if buffer is None:
                buffer = np.empty((capacity, lines.dim), dtype=np.float32)
            else:  # realloc (no copy of the old buffer is kept alive)
                buffer.resize((capacity, lines.dim), refcheck=False)
        buffer[filled:needed] = block
        filled = needed
        chunk.clear()

    for line_no, word, values in lines:
        key = word.lower() if lowercase else word
        if key in seen or (wanted is not None and key not in wanted):
            continue
        seen.add(key)
        words.append(key)
        chunk.append((line_no, key, values))
        if len(chunk) == _PARSE_CHUNK_ROWS:
            flush()
        if stop_when_complete and wanted is not None and len(words) == len(wanted):
            break
    if chunk:
        flush()

    if not words:
        _raise_no_words(path, lines.dim, wanted)
    if buffer.shape[0] != filled:
        buffer.resize((filled, lines.dim), refcheck=False)  # shrink in place
    return words, torch.from_numpy(buffer)


def vector_file_dim(path: PathLike) -> int:
    """The dimension of a vector file (from its header or first entry), reading only its first lines."""
    lines = _VectorLines(path)
    for _ in lines:
        return lines.dim
    raise ValueError(f"{path} contains no word vectors (empty file, or only a header)")


def _check_words(words: Sequence[str], what: str) -> None:
    if isinstance(words, str) or not all(isinstance(word, str) for word in words):
        raise TypeError(f"{what} must be a sequence of str (the vocabulary in id order)")


def build_embedding_matrix(
    path: PathLike,
    words: Sequence[str],
    dim: int = 300,
    lowercase: bool = False,
    progress: bool = False,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    stop_when_complete: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """The embedding matrix of a vocabulary: row `i` is the vector of `words[i]`.

    Args:
        path: GloVe/word2vec text file.
        words: the vocabulary in id order (special tokens included).
        dim: the vectors' dimension; a file of another dimension is an error.
        lowercase: look words up in lower case (`words[i].lower()` against the lower-cased file words, the first
            = most frequent casing wins). Use it for a lower-cased vocabulary and the cased GloVe 840B.
        progress: tqdm bar while reading.
        special_tokens: words that always get a zero row (`<pad>`, `<unk>`, `<s>`, `</s>`).
        stop_when_complete: stop reading once every word is found (same result, faster).

    Returns:
        `(matrix, found)`: float32 `(len(words), dim)` with zero rows for words not in the file and for special
        tokens, and a bool `(len(words),)` mask of the rows that have a vector.
    """
    _check_words(words, "words")
    specials = set(special_tokens)
    keys = [None if word in specials else (word.lower() if lowercase else word) for word in words]
    requested = {key for key in keys if key is not None}
    if not requested:
        raise ValueError(f"no word to look up in {path}: the vocabulary holds only special tokens or is empty")
    file_words, vectors = read_word_vectors(
        path, vocab=requested, dim=dim, lowercase=lowercase, progress=progress, stop_when_complete=stop_when_complete
    )
    return embedding_matrix_from_vectors(words, file_words, vectors, lowercase=lowercase, special_tokens=specials)


def embedding_matrix_from_vectors(
    words: Sequence[str],
    file_words: Sequence[str],
    vectors: torch.Tensor,
    lowercase: bool = False,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """`build_embedding_matrix` from vectors already read (`read_word_vectors(..., lowercase=lowercase)`), so that
    a file read once to choose the vocabulary need not be read again.

    Row `i` is the vector of `words[i]` (`words[i].lower()` with `lowercase=True`); zeros and `found=False` for
    special tokens and for words not in `file_words`.
    """
    _check_words(words, "words")
    if vectors.ndim != 2 or vectors.shape[0] != len(file_words):
        raise ValueError(
            f"vectors must be (len(file_words), dim) = ({len(file_words)}, dim), got {tuple(vectors.shape)}"
        )
    specials = set(special_tokens)
    row_of = {word: row for row, word in enumerate(file_words)}
    targets, sources = [], []
    for i, word in enumerate(words):
        row = None if word in specials else row_of.get(word.lower() if lowercase else word)
        if row is not None:
            targets.append(i)
            sources.append(row)
    matrix = torch.zeros(len(words), vectors.shape[1], dtype=torch.float32)
    found = torch.zeros(len(words), dtype=torch.bool)
    if targets:
        index = torch.tensor(targets, dtype=torch.long)
        matrix[index] = vectors[torch.tensor(sources, dtype=torch.long)].to(torch.float32)
        found[index] = True
    return matrix, found


# ----------------------------------------------------------------------------------------------------------------
# Character n-grams (Hashimoto et al. 2016; CoVe paper §1 / eq. 6 appendix)
# ----------------------------------------------------------------------------------------------------------------


def char_ngrams(word: str, orders: Sequence[int] = NGRAM_ORDERS) -> List[str]:
    """The n-gram keys of a word, in Hashimoto et al.'s format, with repetitions.

    The word is the symbol sequence `["#BEGIN#", c_1, ..., c_L, "#END#"]` (the two markers are single symbols,
    `c_i` the word's Unicode characters, no case change). For each `n` in `orders` (2, 3, 4), every window of `n`
    consecutive symbols, left to right, gives the key `f"{n}gram-" + "".join(window)`. A word of L >= 1 characters
    has L+1 bigrams, L trigrams and L-1 four-grams (3L keys). Example, `"ab"`:
    `2gram-#BEGIN#a 2gram-ab 2gram-b#END# 3gram-#BEGIN#ab 3gram-ab#END# 4gram-#BEGIN#ab#END#`.
    """
    symbols = [NGRAM_BEGIN, *word, NGRAM_END]
    return [f"{n}gram-" + "".join(symbols[i : i + n]) for n in orders for i in range(len(symbols) - n + 1)]


def build_char_ngram_matrix(
    path: PathLike,
    words: Sequence[str],
    dim: int = 100,
    progress: bool = False,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    stop_when_complete: bool = True,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """Character n-gram vectors of a vocabulary: row `i` = mean of the vectors of `words[i]`'s n-grams.

    The mean is over the n-gram occurrences of `char_ngrams(words[i])` whose key is in the file (a repeated
    n-gram counts each time it occurs); a word none of whose n-grams is in the file, and every special token, gets
    zeros. The n-gram file (`charNgram.txt`, GloVe text format, keys like `2gram-#BEGIN#a`) is read once,
    restricted to the n-grams of `words`.

    Returns:
        `(matrix, found)`: float32 `(len(words), dim)` and a bool `(len(words),)` mask of words with >= 1 n-gram.
    """
    _check_words(words, "words")
    specials = set(special_tokens)
    grams_of = [[] if word in specials else char_ngrams(word) for word in words]
    requested = {gram for grams in grams_of for gram in grams}
    if not requested:
        raise ValueError(f"no word to look up in {path}: the vocabulary holds only special tokens or is empty")
    keys, vectors = read_word_vectors(
        path, vocab=requested, dim=dim, progress=progress, stop_when_complete=stop_when_complete
    )
    row_of = {key: row for row, key in enumerate(keys)}
    word_index, gram_rows = [], []  # one entry per n-gram occurrence present in the file
    for i, grams in enumerate(grams_of):
        for gram in grams:
            row = row_of.get(gram)
            if row is not None:
                word_index.append(i)
                gram_rows.append(row)
    word_index = torch.tensor(word_index, dtype=torch.long)
    sums = torch.zeros(len(words), vectors.shape[1], dtype=torch.float32)
    sums.index_add_(0, word_index, vectors[torch.tensor(gram_rows, dtype=torch.long)])
    counts = torch.bincount(word_index, minlength=len(words))
    found = counts > 0
    matrix = sums / counts.clamp(min=1).unsqueeze(1).to(torch.float32)  # mean; rows without n-grams stay 0
    return matrix, found
