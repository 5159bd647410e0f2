"""The source side of a CoVe model: the word-vector table (eq. 1's GloVe(w)), its resizing with zero rows, and the
up-front checks of what a forward is given (token ids, word-vector rows, attention masks).

The checks of values (`require`) read the device once per forward for all of them: inside `HostRead` each check
waits, and on leaving it one copy to the host brings back every check's verdict with the lengths the forward plans
its LSTMs from; the first failed check then raises its error (naming the rows). On a GPU a forward so makes the host
wait once, not once per check (docs/lstm_kernels.md, "Host reads").

`CoveModel` holds the table and inherits the checks (`CoveInputChecks`); the heads call the same checks through
`self.cove`. Everything here is also importable from `modeling_cove.modeling_cove`, as before.
"""

import contextvars
from typing import Callable, Optional

import torch
from torch import nn
from transformers.utils import logging

from .tokenization_cove import parse_vocabulary_fingerprint

__all__ = ["CoveInputChecks", "CoveWordEmbeddings", "HostRead", "lengths_from_mask", "require", "require_features",
           "require_tensor", "require_token_ids", "resize_rows_with_zeros", "resize_source_vocabulary", "rows_where"]

logger = logging.get_logger(__name__)

_PENDING_CHECKS = contextvars.ContextVar("cove_pending_checks", default=None)  # the `HostRead` the checks wait in


def require(ok: torch.Tensor, summary: str, detail: Optional[Callable[[], str]] = None) -> None:
    """A `ValueError` unless every entry of the bool tensor `ok` is True; its message is `detail()` (built only then,
    e.g. naming rows) or `summary`. Inside a `HostRead` the check waits for its one read; while `torch.export`
    traces, a runtime assertion in the graph with the `summary` instead: no Python branch on tensor values."""
    if torch.compiler.is_exporting():
        torch._assert_async(ok.all(), summary)
        return
    pending = _PENDING_CHECKS.get()
    if pending is not None:
        pending.checks.append((ok.all(), summary, detail))
    elif not bool(ok.all()):
        raise ValueError(detail() if detail is not None else summary)


def require_tensor(value, name: str) -> None:
    """A `TypeError` naming the input unless `value` is a tensor: lists or NumPy arrays (a tokenizer called without
    `return_tensors="pt"`) would otherwise fail deep inside the forward."""
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__} (call the tokenizer with "
                        'return_tensors="pt", or convert with torch.as_tensor)')


def require_token_ids(value, name: str) -> None:
    """`require_tensor`, then a `TypeError` naming the input unless it holds integer ids of a dtype an embedding
    lookup and the loss take (int64 or int32)."""
    require_tensor(value, name)
    if value.dtype not in (torch.long, torch.int):
        raise TypeError(f"{name} must be integer token ids (int64 or int32), got dtype {value.dtype} (convert with "
                        ".long())")


def require_features(value, name: str, dtype: torch.dtype) -> None:
    """`require_tensor`, then a `TypeError` naming the input unless it holds floating-point features a model
    computing in `dtype` can concatenate with its own (their dtype promotes to `dtype`: float64 features into a
    float32 model would reach its layers as float64)."""
    require_tensor(value, name)
    if not value.is_floating_point() or torch.promote_types(value.dtype, dtype) != dtype:
        raise TypeError(f"{name} must be floating-point features in the model's dtype {dtype} (as the model computes "
                        f"them), got dtype {value.dtype}")


def rows_where(condition: torch.Tensor) -> list:
    """The indices of the True entries of a (B,) bool tensor, for error messages."""
    return condition.nonzero().flatten().tolist()


class HostRead:
    """The up-front checks of one forward and the integer tensors it needs on the host (`read`), brought back in
    one copy: within `with HostRead() as host:` every `require` waits; on leaving, the verdicts and the `read`
    tensors come to the host together, the first failed check (in the order they were made) raises its
    `ValueError`, and `host.values[i]` is the i-th `read` tensor on the host (int64, its shape). Checks that need no
    values (shapes, dtypes) still raise at once, before the waiting ones. While `torch.export` traces, the checks
    are assertions in the graph and each value is the tensor's `.cpu()`."""

    def __init__(self):
        self.checks, self.reads, self.values = [], [], None
        self._token = None

    def read(self, values: torch.Tensor) -> int:
        """Ask for `values` on the host; returns its index in `self.values`."""
        self.reads.append(values)
        return len(self.reads) - 1

    def __enter__(self) -> "HostRead":
        self._token = _PENDING_CHECKS.set(self)
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        _PENDING_CHECKS.reset(self._token)
        if kind is None:
            self.resolve()
        return False

    def resolve(self) -> None:
        """The one read (on leaving the `with`): each check's verdict (its `ok.all()`) and the `read` tensors."""
        if torch.compiler.is_exporting():
            self.values = [values.cpu() for values in self.reads]
            return
        parts = [ok.reshape(1) for ok, _, _ in self.checks] + [values.reshape(-1) for values in self.reads]
        if not parts:
            self.values = []
            return
        device = parts[0].device
        host = torch.cat([part.to(device=device, dtype=torch.long) for part in parts]).cpu()  # the one read
        verdicts = host[:len(self.checks)].tolist()  # (a host tensor: no further read)
        for passed, (_, summary, detail) in zip(verdicts, self.checks):
            if not passed:
                raise ValueError(detail() if detail is not None else summary)
        offset = len(self.checks)
        self.values = []
        for values in self.reads:
            self.values.append(host[offset:offset + values.numel()].view(values.shape))
            offset += values.numel()


def lengths_from_mask(attention_mask: torch.Tensor) -> torch.Tensor:
    """Number of tokens per row of a right-padded `(B, T)` mask. Raises on left padding or holes (a `require`: inside
    a `HostRead` at its read; while `torch.export` traces, a runtime assertion in the graph)."""
    mask = attention_mask.bool()
    lengths = mask.sum(dim=1)
    positions = torch.arange(mask.shape[1], device=mask.device)
    right_padded = positions.unsqueeze(0) < lengths.unsqueeze(1)  # (B, T)
    require((right_padded == mask).all(), "attention_mask must be right-padded",
            lambda: "attention_mask must be right-padded (a run of 1s followed by 0s in every row); got left padding "
            "or holes. Use a tokenizer with padding_side='right'.")
    return lengths


@torch.no_grad()
def resize_rows_with_zeros(table: nn.Embedding, num_rows: int):
    """`table` (in place, same module and parameter object kind) with `num_rows` rows: the old ones first, zero rows
    after them; its `requires_grad` is kept."""
    old = table.weight
    weight = old.new_zeros(num_rows, old.shape[1])  # (num_rows, C)
    kept = min(num_rows, old.shape[0])
    weight[:kept] = old[:kept]
    table.weight = nn.Parameter(weight, requires_grad=old.requires_grad)
    table.num_embeddings = num_rows


class CoveWordEmbeddings(nn.Embedding):
    """Fixed word-vector table (GloVe). Rows `pad_token_id` and `unk_token_id` are zero: OOV words get a zero
    vector, as in the paper."""

    def __init__(self, num_embeddings: int, embedding_dim: int, pad_token_id: int, unk_token_id: int):
        super().__init__(num_embeddings, embedding_dim, padding_idx=pad_token_id)
        self.special_rows = [i for i in (pad_token_id, unk_token_id) if i is not None and 0 <= i < num_embeddings]

    @torch.no_grad()
    def zero_special_rows(self):
        for row in self.special_rows:
            self.weight[row].zero_()


def resize_source_vocabulary(model, new_num_tokens, pad_to_multiple_of=None) -> nn.Embedding:
    """`resize_token_embeddings`' hook for `model` (a CoVe model or head): the source vocabulary's tables (word
    vectors, and char n-grams when present) get `new_num_tokens` rows (rounded up to `pad_to_multiple_of`); rows
    past the old size are ZERO, the paper's vector for a word without one (as `<unk>`), whatever `mean_resizing`
    says, and the tables keep their `requires_grad` (frozen under `config.freeze_embeddings`). Removing rows cuts
    them from the end. The MT head's target vocabulary (`lm_head`, `target_vocab_size`) is another vocabulary and is
    left as it is. `resize_token_embeddings` then stores the new size as `config.vocab_size`.
    `config.vocabulary_fingerprint` covers the recorded vocabulary's ids only, so it stays when rows are added (the
    tokenizer check stays in force) and is cleared, with a warning, when rows of that vocabulary are cut."""
    cove = model.cove_encoder_model()
    if new_num_tokens is None and pad_to_multiple_of is None:
        return cove.embeddings
    if new_num_tokens is None:
        new_num_tokens = cove.embeddings.num_embeddings
    if pad_to_multiple_of is not None:
        if (isinstance(pad_to_multiple_of, bool) or not isinstance(pad_to_multiple_of, int)
                or pad_to_multiple_of < 1):
            raise ValueError(f"pad_to_multiple_of must be an int >= 1, got {pad_to_multiple_of!r}")
        new_num_tokens = -(-new_num_tokens // pad_to_multiple_of) * pad_to_multiple_of
    if isinstance(new_num_tokens, bool) or not isinstance(new_num_tokens, int) or new_num_tokens < 1:
        raise ValueError(f"new_num_tokens must be an int >= 1, got {new_num_tokens!r}")
    specials = [i for i in (model.config.pad_token_id, model.config.unk_token_id) if i is not None]
    if specials and new_num_tokens <= max(specials):
        raise ValueError(f"new_num_tokens={new_num_tokens} would remove the pad/unk rows (ids {specials})")
    fingerprint = getattr(model.config, "vocabulary_fingerprint", None)
    if fingerprint and new_num_tokens < parse_vocabulary_fingerprint(fingerprint)[0]:
        # rows of the recorded vocabulary are cut: the fingerprint no longer describes this table (growing keeps
        # it: it covers the first ids only, which tokens added after them leave as they were)
        logger.warning("resize_token_embeddings: the table is cut below the recorded vocabulary, so "
                       "config.vocabulary_fingerprint is cleared; record the new tokenizer's "
                       "(tokenization_cove.vocabulary_fingerprint) to check it")
        model.config.vocabulary_fingerprint = None
    for table in (cove.embeddings, cove.char_ngram_embeddings):
        if table is not None:
            resize_rows_with_zeros(table, new_num_tokens)
    cove.embeddings.special_rows = [i for i in specials if i < new_num_tokens]
    return cove.embeddings


class CoveInputChecks:
    """The up-front checks of `CoveModel` (a mixin: it reads `self.config`, `self.embeddings` and
    `self.char_ngram_embeddings`), with clear errors naming the input instead of one deep in torch."""

    def check_inputs(self, input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """Up-front checks with clear messages; returns the (B, T) attention mask."""
        require_token_ids(input_ids, "input_ids")
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must have shape (batch, time), got {tuple(input_ids.shape)}")
        if input_ids.shape[0] == 0 or input_ids.shape[1] == 0:
            raise ValueError(
                f"input_ids is empty (shape {tuple(input_ids.shape)}): the input text produced no tokens"
            )
        self.check_token_ids(input_ids)
        return self.check_attention_mask(attention_mask, input_ids, "input_ids")

    def check_inputs_embeds(self, inputs_embeds: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> torch.Tensor:
        """Up-front checks of word-vector rows passed instead of ids; returns the (B, T) attention mask."""
        config = self.config
        require_tensor(inputs_embeds, "inputs_embeds")
        if inputs_embeds.dim() != 3 or inputs_embeds.shape[-1] != config.word_vector_dim:
            raise ValueError(f"inputs_embeds must have shape (batch, time, word_vector_dim={config.word_vector_dim}), "
                             f"got {tuple(inputs_embeds.shape)}")
        if not inputs_embeds.is_floating_point():
            raise TypeError(f"inputs_embeds must be floating-point word vectors, got dtype {inputs_embeds.dtype}")
        if inputs_embeds.shape[0] == 0 or inputs_embeds.shape[1] == 0:
            raise ValueError(f"inputs_embeds is empty (shape {tuple(inputs_embeds.shape)}): no tokens")
        if inputs_embeds.device != self.embeddings.weight.device:
            raise ValueError(f"inputs_embeds is on {inputs_embeds.device}, the model on "
                             f"{self.embeddings.weight.device}: move one of them")
        if self.char_ngram_embeddings is not None:
            raise ValueError(
                f"inputs_embeds cannot be used with char n-gram embeddings (config.char_ngram_dim="
                f"{config.char_ngram_dim}): they are looked up by token id, so pass input_ids instead"
            )
        return self.check_attention_mask(attention_mask, inputs_embeds[..., 0], "inputs_embeds")

    @staticmethod
    def check_attention_mask(attention_mask: Optional[torch.Tensor], like: torch.Tensor, name: str) -> torch.Tensor:
        """The `(B, T)` mask for inputs whose first two dimensions are `like`'s (all ones when None)."""
        if attention_mask is None:
            return torch.ones(like.shape, dtype=torch.long, device=like.device)
        require_tensor(attention_mask, "attention_mask")
        if attention_mask.shape != like.shape:
            raise ValueError(
                f"attention_mask shape {tuple(attention_mask.shape)} != {name} shape {tuple(like.shape)} "
                "(batch, time)"
            )
        return attention_mask

    def check_token_ids(self, ids: torch.Tensor):
        """Every id in `ids` must index the vocabulary (a clear error instead of one deep in the embedding). While
        `torch.export` traces the model, the check is a runtime assertion in the graph (no Python branch on values)."""
        vocab_size = self.config.vocab_size
        require(((ids >= 0) & (ids < vocab_size)).all(),
                f"input_ids contain ids outside [0, {vocab_size}): tokenizer and checkpoint do not match",
                lambda: f"input_ids contain ids outside [0, {vocab_size}) (min {int(ids.min())}, "
                f"max {int(ids.max())}): tokenizer and checkpoint do not match")
