"""Convert the original Salesforce CoVe MT-LSTM (`wmtlstm-b142a7f2.pth` / `wmtlstm-8f474287.pth`) to a Hugging Face
checkpoint directory: config + tokenizer + GloVe embedding matrix + the converted MT-LSTM, as safetensors. Command line:
`cove-convert-salesforce` (also `python -m modeling_cove.training.commands.convert_salesforce`).

The vocabulary comes from exactly one of: `--vocab-file` (one word per line), text data (`--tasks` with `--data-dir`
or Hub ids, like cove-build-vocab), or `--vocab-from-vectors N` (the first N words of the vectors file).

    cove-convert-salesforce --weights wmtlstm-8f474287.pth \\
        --vectors glove.840B.300d.txt --vectors-lowercase --tasks sst2 trec6 snli squad \\
        --output-dir cove-large --include-word-vectors

The `.pth` is read with `torch.load(weights_only=True)`; wrong keys or shapes stop with an error naming the key and
both shapes. Released CoVe models take lower-cased, Moses-tokenized input (the default here).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from ...build import (
    convert_salesforce_state_dict,
    count_tokens,
    create_cove_checkpoint,
    load_salesforce_state_dict,
    select_vocabulary,
)
from ...configuration_cove import CoveConfig
from ...tokenization_cove import DEFAULT_MODEL_MAX_LENGTH, SPECIAL_TOKENS
from ...vectors import build_embedding_matrix, embedding_matrix_from_vectors, iter_word_vectors, read_word_vectors
from ..common.files import commit_tmp, fresh_tmp
from ..common.cli import A_FILE, A_FOLDER, REQUIRED, fail, option, parse_options
from ..data.texts import TEXT_SOURCES, iter_task_texts

__all__ = ["ConvertArguments", "main"]


@dataclass
class ConvertArguments:
    """The flags of cove-convert-salesforce (one of --vocab-file, --tasks, --vocab-from-vectors)."""

    weights: str = option("original wmtlstm-*.pth state dict", REQUIRED, check=A_FILE)
    vectors: str = option("GloVe text file the MT-LSTM was trained with (840B.300d)", REQUIRED)
    output_dir: str = option("checkpoint directory to write", REQUIRED)
    vocab_file: Optional[str] = option("vocabulary: one word per line")
    tasks: Optional[list[str]] = option(f"vocabulary: the words of these text sources, from {TEXT_SOURCES} (as "
                                        "cove-build-vocab)")
    vocab_from_vectors: Optional[int] = option("vocabulary: the first N words of the vectors file", metavar="N")
    data_dir: Optional[str] = option("local data folder laid out as docs/data.md describes, for --tasks; default: Hub "
                                     "dataset ids", check=A_FOLDER)
    vectors_lowercase: bool = option("look up lower-cased words in a cased file", False)
    cased: bool = option("keep case in the tokenizer (released CoVe: lower-cased)", False)
    oov_min_count: int = option("keep words without vectors seen this often", 1000000000)
    include_word_vectors: bool = option("output [GloVe; CoVe] (eq. 6)", False)
    cove_output: Literal["top", "both"] = option("the MT-LSTM's top layer, or both layers", "top")
    model_max_length: int = option("the tokenizer's model_max_length", DEFAULT_MODEL_MAX_LENGTH)
    overwrite: bool = option("replace an existing output directory", False)

    def __post_init__(self):
        given = [flag for flag, value in (("--vocab-file", self.vocab_file), ("--tasks", self.tasks),
                                          ("--vocab-from-vectors", self.vocab_from_vectors)) if value is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of --vocab-file, --tasks, --vocab-from-vectors (got "
                             f"{', '.join(given) or 'none'})")
        for task in self.tasks or ():
            if task not in TEXT_SOURCES:
                raise ValueError(f"unknown task {task!r} in --tasks; choose from {', '.join(TEXT_SOURCES)}")


def main(argv=None):
    """cove-convert-salesforce: the original MT-LSTM of --weights as a CoVe checkpoint in --output-dir."""
    args = parse_options(ConvertArguments, argv, description=__doc__)
    out = Path(args.output_dir)
    if out.exists() and not args.overwrite:
        fail(f"{out} exists (use --overwrite)")
    lowercase = not args.cased
    # weights first: a bad file fails before the (slow) vectors pass
    state = load_salesforce_state_dict(args.weights)
    probe = CoveConfig()
    converted = convert_salesforce_state_dict(state, probe)

    if args.vocab_file:
        with open(args.vocab_file, encoding="utf-8") as f:
            words = list(dict.fromkeys(w.strip() for w in f if w.strip() and w.strip() not in SPECIAL_TOKENS))
    elif args.vocab_from_vectors:
        kept = {}  # insertion-ordered set
        for _, word, _ in iter_word_vectors(args.vectors, dim=probe.word_vector_dim):
            word = word.lower() if args.vectors_lowercase else word
            if word not in SPECIAL_TOKENS:
                kept.setdefault(word, None)
            if len(kept) >= args.vocab_from_vectors:
                break
        words = list(kept)
    else:
        counts = count_tokens((t for task in args.tasks for t in iter_task_texts(task, args.data_dir)),
                              lowercase=lowercase, progress=True)
        found_words, found_vectors = read_word_vectors(args.vectors, vocab=set(counts), dim=probe.word_vector_dim,
                                                       lowercase=args.vectors_lowercase, progress=True)
        has = set(found_words)
        words = select_vocabulary(counts, has_vector=has.__contains__, oov_min_count=args.oov_min_count)
    if not words:
        fail("empty vocabulary")
    if args.tasks:  # the vectors of every corpus word were read above: no second pass over the file
        matrix, found = embedding_matrix_from_vectors(SPECIAL_TOKENS + words, found_words, found_vectors,
                                                      lowercase=args.vectors_lowercase)
    else:
        matrix, found = build_embedding_matrix(args.vectors, SPECIAL_TOKENS + words, dim=probe.word_vector_dim,
                                               lowercase=args.vectors_lowercase, progress=True)
    model, tokenizer = create_cove_checkpoint(
        words, matrix, lstm_state_dict=converted, lowercase=lowercase, model_max_length=args.model_max_length,
        include_word_vectors=args.include_word_vectors, cove_output=args.cove_output,
    )
    tmp = fresh_tmp(out)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    info = {"source_weights": os.path.basename(args.weights), "vectors": str(args.vectors),
            "vocab_size": len(tokenizer), "words_with_vector": int(found.sum())}
    (tmp / "conversion_info.json").write_text(json.dumps(info, indent=2) + "\n")
    commit_tmp(tmp, out)
    print(json.dumps(info, indent=2))
    print(f"converted {args.weights} -> {out}")


if __name__ == "__main__":
    main()
