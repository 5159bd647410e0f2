"""CoVe checkpoint folders as the commands read and write them: loading one named by a flag with a clear error
(`load_cove_checkpoint`) and saving a model with its tokenizer atomically (`save_checkpoint`)."""

from __future__ import annotations

import json
from pathlib import Path

from ..common.files import commit_tmp, fresh_tmp

__all__ = ["CheckpointLoadError", "load_cove_checkpoint", "save_checkpoint"]


class CheckpointLoadError(ValueError):
    """The checkpoint a training run starts from (`--init-from`) does not load, or its tokenizer does not match it."""


def load_cove_checkpoint(path, flag: str = "init_from"):
    """(CoveModel, tokenizer) of the CoVe checkpoint a pretraining starts from (its word vectors and vocabulary: MT or
    biLM). A missing folder, an unreachable Hub id, unreadable weights or a tokenizer that is not the checkpoint's
    raise CheckpointLoadError naming `flag` and `path` (the CLIs print it as one line) instead of the loader's
    traceback."""
    from transformers import AutoTokenizer

    from ...modeling_cove import CoveModel
    from ...tokenization_cove import check_tokenizer_matches

    try:
        model = CoveModel.from_pretrained(path)
        tokenizer = AutoTokenizer.from_pretrained(path)
    except OSError as err:  # transformers reads a path that is not a folder as a Hub id
        raise CheckpointLoadError(f"{flag} {str(path)!r} is not a loadable CoVe checkpoint (a folder with "
                                  f"config.json, weights and tokenizer, or a reachable Hub id): {err}") from None
    try:
        check_tokenizer_matches(model.config, tokenizer)
        if len(tokenizer) != model.config.vocab_size:
            raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but config.vocab_size is "
                             f"{model.config.vocab_size}")
    except ValueError as err:
        raise CheckpointLoadError(f"{flag} {str(path)!r}: tokenizer and checkpoint do not match: {err}") from None
    return model, tokenizer


def save_checkpoint(model, tokenizer, output_dir, extra_files: dict | None = None) -> Path:
    """Save `model` and `tokenizer` (+ `extra_files`: name -> JSON payload) into `output_dir` through
    `<output_dir>.tmp`, renamed at the end: an interrupted run never leaves a checkpoint that looks complete."""
    tmp = fresh_tmp(output_dir)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    for name, payload in (extra_files or {}).items():
        (tmp / name).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return commit_tmp(tmp, output_dir)
