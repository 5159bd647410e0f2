"""Batching for the BCN and the DCN under `transformers.Trainer`: one padding function and the two heads' collators,
which add the frozen encoder's cached features (`modeling_cove.feature_cache`) when a run has them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from ...feature_cache import CachedFeatures, pad_rows, segment_placements

__all__ = ["BCNCollator", "pad_batch", "QACollator"]


def pad_batch(rows: list, pad_token_id: int = 0) -> dict:
    """Right-pad rows (dicts with `input_ids` and optionally `token_type_ids`) into (B, T) tensors: `input_ids`,
    `attention_mask` and `token_type_ids` (0 on padding, and everywhere for rows without types)."""
    if not rows:
        raise ValueError("pad_batch needs at least one row")
    missing = [i for i, row in enumerate(rows) if "input_ids" not in row]
    if missing:
        raise ValueError(f"rows {missing[:10]} have no input_ids")
    ids = [row["input_ids"] for row in rows]
    types = [row["token_type_ids"] if row.get("token_type_ids") is not None else [0] * len(row["input_ids"])
             for row in rows]
    return pad_rows(ids, types, pad_token_id)


@dataclass
class BCNCollator:
    """Pads a batch of classification rows (`input_ids`, `token_type_ids`, `labels`) and, when cached features are
    given (`stores`: one `CachedFeatures` per split; rows carry `feature_store`, the split's index, and
    `feature_row`), adds the cached MT-LSTM states of `layer_indices` as `cove_hidden_states`."""

    pad_token_id: int
    layer_indices: list = field(default_factory=list)
    num_states: int = 3
    layer_width: int = 600
    stores: list = field(default_factory=list)

    def __call__(self, rows: list) -> dict:
        batch = pad_batch(rows, self.pad_token_id)
        batch["labels"] = torch.tensor([r["labels"] for r in rows], dtype=torch.long)
        if self.stores and self.layer_indices:
            time_steps = batch["input_ids"].shape[1]
            states = torch.zeros(len(rows), time_steps, self.layer_width * len(self.layer_indices))
            for b, r in enumerate(rows):
                row_states = self.stores[r["feature_store"]][r["feature_row"]]  # (L, width * layers)
                states[b, : row_states.shape[0]] = row_states
            hidden = [None] * self.num_states
            for j, k in enumerate(self.layer_indices):
                hidden[k] = states[..., j * self.layer_width : (j + 1) * self.layer_width]
            batch["cove_hidden_states"] = tuple(hidden)
        return batch


@dataclass
class QACollator:
    """Pads SQuAD windows (`input_ids`, `token_type_ids`), adds `start_positions` / `end_positions` when the rows
    have them and, with a cache of the windows' distinct segments (`feature_cache.distinct_segments`; rows carry
    `question_key` / `context_key`), their CoVe features as `cove_features`."""

    cache: Optional[CachedFeatures] = None
    pad_token_id: int = 0

    def __call__(self, rows: list) -> dict:
        batch = pad_batch(rows, self.pad_token_id)
        if self.cache is not None:
            batch["cove_features"] = self.cache.batch(segment_placements(rows), batch["input_ids"].shape[1])
        if "start_positions" in rows[0]:
            batch["start_positions"] = torch.tensor([r["start_positions"] for r in rows], dtype=torch.long)
            batch["end_positions"] = torch.tensor([r["end_positions"] for r in rows], dtype=torch.long)
        return batch
