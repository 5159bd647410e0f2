"""A CoVe checkpoint from text and word vectors: the vocabulary of the texts a run reads, the fixed word-vector matrix
and a freshly initialised MT-LSTM (the starting point of MT pretraining), saved as a Hugging Face checkpoint folder.
Command line: `cove-build-vocab` (also `python -m modeling_cove.training.commands.build_vocab`).

The result (tokenizer + config + embedding matrix + freshly initialised MT-LSTM) loads with
`AutoModel.from_pretrained(out)` / `AutoTokenizer.from_pretrained(out)` and is the starting point for MT pretraining
(cove-train-mt) or, with a pretrained MT-LSTM, for the task heads.

    cove-build-vocab --data-dir DATA --tasks multi30k trec6 sst2 \\
        --vectors DATA/vectors/w2v-lower-300d.txt.xz --output-dir runs/vocab
    cove-build-vocab --tasks multi30k sst2 --vectors glove.840B.300d.txt --vectors-lowercase \\
        --output-dir runs/vocab-glove            # Hub dataset ids, real GloVe

DATA is a local data folder laid out as docs/data.md describes; without --data-dir the datasets come from the Hub.
From Python:

    from modeling_cove.training.commands.build_vocab import build_vocab_checkpoint
    from modeling_cove.training.data.checkpoints import save_checkpoint
    from modeling_cove.training.data.texts import iter_task_texts
    model, tokenizer, info = build_vocab_checkpoint(iter_task_texts("trec6", data_dir), "glove.txt", dim=300)
    save_checkpoint(model, tokenizer, "runs/vocab", {"build_info.json": info})

Also used by the Salesforce conversion (text sources) and the main job's vocab stage.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Literal, Optional

from ...build import count_tokens, create_cove_checkpoint, select_vocabulary
from ...tokenization_cove import DEFAULT_MODEL_MAX_LENGTH, SPECIAL_TOKENS
from ...vectors import embedding_matrix_from_vectors, read_word_vectors
from ..data.checkpoints import save_checkpoint
from ..data.texts import TEXT_SOURCES, iter_task_texts
from ..common.cli import A_FILE, A_FOLDER, REQUIRED, fail, option, parse_options

__all__ = ["argument_texts", "build_vocab_checkpoint", "BuildVocabArguments", "main"]

def build_vocab_checkpoint(texts: Iterable[str], vectors, dim: int = 300, lowercase: bool = True,
                           vectors_lowercase: bool = False, oov_min_count: int = 5, max_size=None,
                           model_max_length: int = DEFAULT_MODEL_MAX_LENGTH, seed: int = 0, **config_overrides):
    """`(CoveModel, tokenizer, info)` for `texts` and the word-vectors file `vectors` (GloVe/word2vec text).

    The vocabulary: every word with a vector, plus words without one seen `oov_min_count` times or more (zero rows),
    most frequent first, at most `max_size` (the 4 special tokens on top). `config_overrides` are `CoveConfig` fields
    (e.g. `hidden_size=128`). `info` holds the coverage figures. Raises ValueError when the texts have no token or no
    word of them has a vector (`read_word_vectors`: a wrong vectors file)."""
    counts = count_tokens(texts, lowercase=lowercase, progress=True)
    if not counts:
        raise ValueError("the text sources produced no tokens")
    # one pass over the vectors file restricted to the corpus words tells which have a vector
    found_words, found_vectors = read_word_vectors(vectors, vocab=set(counts), dim=dim, lowercase=vectors_lowercase,
                                                   progress=True)
    with_vector = set(found_words)
    words = select_vocabulary(counts, has_vector=with_vector.__contains__, oov_min_count=oov_min_count,
                              max_size=max_size)
    matrix, found = embedding_matrix_from_vectors(SPECIAL_TOKENS + words, found_words, found_vectors,
                                                  lowercase=vectors_lowercase)
    model, tokenizer = create_cove_checkpoint(words, matrix, lowercase=lowercase, model_max_length=model_max_length,
                                              seed=seed, **config_overrides)
    total = sum(counts.values())
    info = {
        "vectors": str(vectors),
        "lowercase": lowercase,
        "corpus_tokens": total,
        "corpus_types": len(counts),
        "vocab_size": len(tokenizer),
        "words_with_vector": int(found.sum()),
        "token_coverage_vectors": round(100.0 * sum(c for w, c in counts.items() if w in with_vector) / total, 3),
        "type_coverage_vectors": round(100.0 * len(with_vector) / len(counts), 3),
        "token_coverage_vocab": round(100.0 * sum(counts[w] for w in words) / total, 3),
        "hidden_size": model.config.hidden_size,
        "num_hidden_layers": model.config.num_hidden_layers,
        "word_vector_dim": model.config.word_vector_dim,
    }
    return model, tokenizer, info


@dataclass
class BuildVocabArguments:
    """The flags of cove-build-vocab."""

    output_dir: str = option("checkpoint directory to write", REQUIRED)
    vectors: str = option("GloVe/word2vec text file (.txt/.gz/.xz)", REQUIRED)
    data_dir: Optional[str] = option("local data folder laid out as docs/data.md describes; default: Hub dataset ids",
                                     check=A_FOLDER)
    tasks: list[str] = option(f"text sources, from {TEXT_SOURCES} (`--tasks` alone: none, only the --text-file "
                              "texts)", ["multi30k"], nargs="*")
    text_file: list[str] = option("extra plain-text file(s), one text per line; repeatable", [], action="extend",
                                  check=A_FILE)
    dim: int = option("word-vector dimension (checked against the file)", 300)
    cased: bool = option("do not lowercase text (default: lowercase, as CoVe)", False)
    vectors_lowercase: bool = option("look words up lower-cased in a cased vectors file (e.g. GloVe 840B), first "
                                     "occurrence wins", False)
    oov_min_count: int = option("also keep words WITHOUT a vector that occur at least this often (zero rows)", 5)
    max_size: Optional[int] = option(
        "at most this many corpus words, most frequent first; the 4 special tokens (<pad> <unk> <s> </s>) come on top, "
        "so the tokenizer holds up to MAX_SIZE + 4 entries (cove-train-mt's --max-vocab counts them: --max-vocab N = "
        "--max-size N-4). Default: no cap")
    char_ngrams: Optional[str] = option("Hashimoto char n-gram file (adds char_ngram_dim=100)")
    model_max_length: int = option("the tokenizer's model_max_length", DEFAULT_MODEL_MAX_LENGTH)
    include_word_vectors: bool = option("config: output [GloVe; CoVe] (eq. 6)", False)
    cove_output: Literal["top", "both"] = option("config: the MT-LSTM's top layer, or both layers", "top")
    seed: int = option("seed of the fresh MT-LSTM initialisation", 0)
    overwrite: bool = option("replace an existing output directory", False)

    def __post_init__(self):
        for task in self.tasks:
            if task not in TEXT_SOURCES:
                raise ValueError(f"unknown task {task!r} in --tasks; choose from {', '.join(TEXT_SOURCES)}")


def argument_texts(args: BuildVocabArguments):
    """The texts of `args.tasks`, then the lines of each `args.text_file`."""
    for task in args.tasks:
        yield from iter_task_texts(task, args.data_dir)
    for path in args.text_file:
        with open(path, encoding="utf-8") as f:
            yield from (line.rstrip("\n") for line in f)


def main(argv=None):
    """cove-build-vocab: a CoVe checkpoint folder from --tasks / --text-file texts and --vectors."""
    from ..common.run_info import command_line

    args = parse_options(BuildVocabArguments, argv, description=__doc__)
    out = Path(args.output_dir)
    if out.exists() and not args.overwrite:
        fail(f"{out} exists (use --overwrite)")
    if not Path(args.vectors).exists():
        fail(f"vectors file not found: {args.vectors}")
    start = time.time()
    overrides = dict(include_word_vectors=args.include_word_vectors, cove_output=args.cove_output)
    if args.char_ngrams:
        overrides["char_ngram_dim"] = 100
    try:
        model, tokenizer, info = build_vocab_checkpoint(
            argument_texts(args), args.vectors, dim=args.dim, lowercase=not args.cased,
            vectors_lowercase=args.vectors_lowercase, oov_min_count=args.oov_min_count, max_size=args.max_size,
            model_max_length=args.model_max_length, seed=args.seed, **overrides)
    except ValueError as err:
        fail(err)
    if args.char_ngrams:
        import torch

        from ...vectors import build_char_ngram_matrix

        matrix, _ = build_char_ngram_matrix(args.char_ngrams, tokenizer.convert_ids_to_tokens(range(len(tokenizer))),
                                            progress=True)
        with torch.no_grad():
            model.char_ngram_embeddings.weight.copy_(matrix)
    argv = sys.argv[1:] if argv is None else list(argv)
    info = {"command": command_line([sys.argv[0], *argv]), "tasks": args.tasks, "data_dir": args.data_dir, **info,
            "seconds": round(time.time() - start, 1)}
    save_checkpoint(model, tokenizer, out, {"build_info.json": info})
    print(json.dumps(info, indent=2))
    print(f"coverage: {info['token_coverage_vectors']}% of {info['corpus_tokens']} tokens have a vector; "
          f"vocabulary {info['vocab_size']} entries -> {out}")


if __name__ == "__main__":
    main()
