"""Small word vectors from a text corpus: positive PMI of window co-occurrences, then a truncated SVD (numpy).

This lets the main job build a word-vectors matrix on a fresh machine from the shipped text alone (no GloVe
download). The output is GloVe text format (no header; `word v1 ... vD`, values as `%.5f`), readable by
`modeling_cove.vectors.read_word_vectors`. Command line: `cove-train-ppmi-vectors` (also
`python -m modeling_cove.training.commands.train_ppmi_vectors`):

    cove-train-ppmi-vectors --text-file examples/en_de/train.tsv --tsv-column en \\
        --text-file examples/sentiment/train.tsv --tsv-column text --dim 50 --output vectors.txt

From Python:

    from modeling_cove.training.commands.train_ppmi_vectors import train_ppmi_vectors, write_vectors
    from modeling_cove.training.data.texts import read_texts
    words, vectors = train_ppmi_vectors(read_texts("examples/sentiment/train.tsv", "text"), dim=50)

Method (Levy, Goldberg & Dagan 2015, "Improving Distributional Similarity with Lessons Learned from Word
Embeddings"):
  1. tokens: `modeling_cove.tokenization_cove.moses_tokenize(text, lowercase=True)` for each line;
  2. vocabulary: words with count >= min_count, sorted by count (descending), ties alphabetically; rarer words are
     removed from the token sequence before counting (as in GloVe/word2vec);
  3. counts C[w, c]: every pair of tokens at distance 1..window within one line, both directions, weight 1;
  4. PPMI[w, c] = max(0, PMI[w, c]), PMI[w, c] = log(P(w, c) / (P(w) P_a(c))) with N = C.sum(),
     P(w, c) = C[w, c] / N, P(w) = C[w, :].sum() / N and the smoothed context distribution
     P_a(c) = C[:, c].sum()^a / sum_c' C[:, c'].sum()^a, a = `cds_alpha` (0.75; a = 1 is plain PMI);
     PPMI is 0 where C[w, c] = 0;
  5. SVD PPMI = U S V^T; vectors = U[:, :dim] * S[:dim]^`eig_power` (0.5), each component's sign fixed so that
     its largest-magnitude entry is positive (deterministic output); with `normalize`, rows are scaled to unit L2
     norm (default: on, so cosine similarity is a dot product and the scale does not depend on corpus size).
     With fewer than `dim` non-trivial components (a vocabulary smaller than `dim`), the missing columns are zero
     (a warning says so).
"""


import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ...tokenization_cove import moses_tokenize
from ..common.files import atomic_text_file
from ..data.texts import read_texts
from ..common.cli import A_FILE, AT_LEAST_ONE, REQUIRED, fail, option, parse_options

__all__ = ["build_vocabulary", "cooccurrence_counts", "default_tokenize", "main", "nearest_neighbours", "ppmi_matrix",
           "PPMIArguments", "svd_vectors", "train_ppmi_vectors", "write_vectors"]

DENSE_MAX_VOCAB = 6000  # above this the co-occurrence matrix is kept sparse and scipy's svds is used


def default_tokenize(text: str) -> List[str]:
    """Lower-cased Moses-like tokens (the same tokens the CoVe tokenizer looks up)."""
    return moses_tokenize(text, lowercase=True)


def build_vocabulary(token_lists: Sequence[Sequence[str]], min_count: int = 1) -> List[str]:
    """Words with count >= min_count, most frequent first, ties alphabetically."""
    if min_count < 1:
        raise ValueError(f"min_count must be >= 1, got {min_count}")
    counts = Counter(token for tokens in token_lists for token in tokens)
    words = [w for w, c in counts.items() if c >= min_count]
    return sorted(words, key=lambda w: (-counts[w], w))


def cooccurrence_counts(token_lists: Sequence[Sequence[str]], words: Sequence[str], window: int = 4):
    """C (V, V): C[i, j] = number of times word j occurs within `window` tokens of word i in the same line.

    Out-of-vocabulary tokens are removed before the windows are taken. Returns a dense float64 array for
    vocabularies up to DENSE_MAX_VOCAB words, else a scipy.sparse CSR matrix.
    """
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    index = {w: i for i, w in enumerate(words)}
    ids, line_of = [], []
    for line_no, tokens in enumerate(token_lists):
        kept = [index[t] for t in tokens if t in index]
        ids.extend(kept)
        line_of.extend([line_no] * len(kept))
    ids = np.asarray(ids, dtype=np.int64)
    line_of = np.asarray(line_of, dtype=np.int64)
    rows, cols = [], []
    for k in range(1, window + 1):
        same_line = line_of[:-k] == line_of[k:]  # pairs (t, t+k) inside one line
        left, right = ids[:-k][same_line], ids[k:][same_line]
        rows += [left, right]  # both directions: symmetric counts
        cols += [right, left]
    rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    size = len(words)
    if size <= DENSE_MAX_VOCAB:
        return np.bincount(rows * size + cols, minlength=size * size).astype(np.float64).reshape(size, size)
    from scipy import sparse

    return sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(size, size)).tocsr()


def ppmi_matrix(counts, cds_alpha: float = 0.75):
    """Positive PMI of a co-occurrence count matrix (dense array or scipy.sparse); same kind as the input.

    PPMI[w, c] = max(0, log(P(w, c) / (P(w) P_a(c)))) -- see the module docstring, step 4.
    """
    if not 0.0 < cds_alpha <= 1.0:
        raise ValueError(f"cds_alpha must be in (0, 1], got {cds_alpha}")
    dense = isinstance(counts, np.ndarray)
    row_sums = np.asarray(counts.sum(axis=1)).ravel()  # (V,) count of w as a centre word
    col_sums = np.asarray(counts.sum(axis=0)).ravel() ** cds_alpha  # (V,) smoothed count of c as a context
    if row_sums.sum() == 0:
        raise ValueError("no co-occurrences at all: every line has fewer than two in-vocabulary tokens")
    p_context = col_sums / col_sums.sum()  # (V,) P_a(c)
    if dense:
        with np.errstate(divide="ignore", invalid="ignore"):
            # PMI = log( (C[w,c] / N) / ((C[w,:] / N) * P_a(c)) ) = log(C[w,c] / (C[w,:] * P_a(c)))
            pmi = np.log(counts / (row_sums[:, None] * p_context[None, :]))
        pmi[~(counts > 0)] = 0.0
        return np.maximum(pmi, 0.0)
    coo = counts.tocoo()
    values = np.log(coo.data / (row_sums[coo.row] * p_context[coo.col]))
    keep = values > 0
    from scipy import sparse

    return sparse.csr_matrix((values[keep], (coo.row[keep], coo.col[keep])), shape=counts.shape)


def svd_vectors(matrix, dim: int, eig_power: float = 0.5, normalize: bool = True) -> np.ndarray:
    """(V, dim) float32 word vectors U_d * S_d^eig_power from a (V, V) PPMI matrix (module docstring, step 5)."""
    if dim < 1:
        raise ValueError(f"dim must be >= 1, got {dim}")
    size = matrix.shape[0]
    k = min(dim, size)
    if isinstance(matrix, np.ndarray):
        u, s, _ = np.linalg.svd(matrix, full_matrices=False)
        u, s = u[:, :k], s[:k]
    else:
        from scipy.sparse.linalg import svds

        k = min(k, size - 1)
        u, s, _ = svds(matrix, k=k, random_state=0)
        order = np.argsort(-s)
        u, s = u[:, order], s[order]
    nontrivial = int((s > 1e-10 * max(float(s[0]) if len(s) else 0.0, 1e-300)).sum())
    if nontrivial < dim:
        warnings.warn(
            f"only {nontrivial} non-zero singular values for dim={dim} (vocabulary of {size} words); "
            f"the remaining {dim - nontrivial} columns are zero"
        )
    u, s = u[:, :nontrivial], s[:nontrivial]
    signs = np.sign(u[np.argmax(np.abs(u), axis=0), np.arange(u.shape[1])])  # largest entry of each column > 0
    vectors = np.zeros((size, dim), dtype=np.float64)
    vectors[:, :nontrivial] = u * signs[None, :] * s[None, :] ** eig_power
    if normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return vectors.astype(np.float32)


def train_ppmi_vectors(
    texts: Iterable[str],
    dim: int = 50,
    window: int = 4,
    min_count: int = 1,
    cds_alpha: float = 0.75,
    eig_power: float = 0.5,
    normalize: bool = True,
    tokenize: Optional[Callable[[str], List[str]]] = None,
) -> Tuple[List[str], np.ndarray]:
    """Word vectors from raw texts (one sentence/document per item).

    Returns:
        `(words, vectors)`: the vocabulary (most frequent first) and a float32 array `(len(words), dim)`.
    Raises:
        ValueError: no texts, no word reaching `min_count`, no co-occurring pair, or a bad parameter.
    """
    if isinstance(texts, str):
        raise TypeError("texts must be an iterable of strings, not a single string")
    tokenize = tokenize or default_tokenize
    token_lists = [tokenize(text) for text in texts]
    if not token_lists:
        raise ValueError("no texts given")
    words = build_vocabulary(token_lists, min_count)
    if not words:
        raise ValueError(f"no word occurs at least min_count={min_count} times")
    counts = cooccurrence_counts(token_lists, words, window)
    vectors = svd_vectors(ppmi_matrix(counts, cds_alpha), dim, eig_power, normalize)
    return words, vectors


def nearest_neighbours(words: Sequence[str], vectors: np.ndarray, query: str, k: int = 5) -> List[Tuple[str, float]]:
    """The k words with the highest cosine similarity to `query` (itself excluded)."""
    index = {w: i for i, w in enumerate(words)}
    if query not in index:
        raise KeyError(f"{query!r} is not in the vocabulary")
    norms = np.linalg.norm(vectors, axis=1)
    sims = vectors @ vectors[index[query]] / np.maximum(norms * norms[index[query]], 1e-12)
    sims[index[query]] = -np.inf
    order = np.argsort(-sims, kind="stable")[:k]
    return [(words[i], float(sims[i])) for i in order]


def write_vectors(path, words: Sequence[str], vectors: np.ndarray) -> None:
    """GloVe text format: no header, `word v1 ... vD`, values `%.5f`, one line per word."""
    if len(words) != len(vectors):
        raise ValueError(f"{len(words)} words but {len(vectors)} vectors")
    for word in words:
        if not word or any(ch.isspace() for ch in word):
            raise ValueError(f"a word for the vector file must be non-empty without whitespace, got {word!r}")
    path = Path(path)
    with atomic_text_file(path) as f:
        for word, row in zip(words, vectors):
            f.write(word + " " + " ".join("%.5f" % v for v in row) + "\n")


@dataclass
class PPMIArguments:
    """The flags of cove-train-ppmi-vectors."""

    text_file: List[str] = option("a text file (one sentence per line) or TSV file (with --tsv-column); repeatable",
                                  REQUIRED, action="extend", check=A_FILE)
    output: str = option("vector file to write (GloVe text format)", REQUIRED)
    tsv_column: Optional[List[str]] = option("header name of the text column, once per --text-file (use '-' for a "
                                             "plain text file); repeatable", action="extend")
    dim: int = option("vector dimension", 50, check=AT_LEAST_ONE)
    window: int = option("co-occurrence window: tokens at distance 1..window", 4, check=AT_LEAST_ONE)
    min_count: int = option("keep words seen at least this often", 1, check=AT_LEAST_ONE)
    cds_alpha: float = option("context distribution smoothing (1 = plain PMI)", 0.75)
    eig_power: float = option("vectors = U * S^p", 0.5)
    no_normalize: bool = option("keep U * S^p rows as they are (no unit norm)", False)
    show: List[str] = option("print the 5 nearest neighbours of these words", [], nargs="*")

    def __post_init__(self):
        if self.tsv_column is None:
            self.tsv_column = ["-"] * len(self.text_file)
        if len(self.tsv_column) != len(self.text_file):
            raise ValueError(f"{len(self.text_file)} --text-file but {len(self.tsv_column)} --tsv-column (give one "
                             "per file, '-' = none)")


def main(argv=None) -> int:
    """cove-train-ppmi-vectors: vectors from the --text-file texts, written to --output."""
    args = parse_options(PPMIArguments, argv, description=__doc__)
    texts = []
    try:
        for path, column in zip(args.text_file, args.tsv_column):
            texts += read_texts(path, None if column == "-" else column)
        words, vectors = train_ppmi_vectors(texts, args.dim, args.window, args.min_count, args.cds_alpha,
                                            args.eig_power, not args.no_normalize)
    except ValueError as err:  # no such TSV column, no texts, no co-occurrences: named, nothing written
        fail(err)
    write_vectors(args.output, words, vectors)
    print(f"{len(texts)} texts -> {len(words)} words x {args.dim} dims -> {args.output}")
    for query in args.show:
        try:
            neighbours = nearest_neighbours(words, vectors, query.lower())
        except KeyError as err:
            print(f"  {err.args[0]}")
            continue
        print(f"  {query}: " + ", ".join(f"{w} ({s:.2f})" for w, s in neighbours))
    return 0


if __name__ == "__main__":
    sys.exit(main())
