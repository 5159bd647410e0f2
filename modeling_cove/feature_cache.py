"""The frozen-feature cache: the MT-LSTM features a head reads, computed once per dataset with its frozen encoder.

With the encoder frozen, a head's CoVe features (eq. 5, CoVe(w) = MT-LSTM(GloVe(w))) of a given text never change,
so training runs the MT-LSTM once per example, in length-sorted batches, instead of once per step and epoch.
`cached_features(model, dataset, cache_dir, name)` returns them as `CachedFeatures`: one `(L_i, C)` row per example
of the dataset (`features[i]`), zero nowhere (padding is cut off), on the CPU. With a `cache_dir`, they are saved
there (safetensors) under a hash of what determines them — the encoder's weights and word vectors, the layers read,
the token ids — so later epochs, seeds and runs load them instead (`features.hit`).

What one example's row holds depends on the head (`model`):
- `CoveForSequenceClassification` (BCN): `compute_cove_hidden_states` of the example (a text, or a pair whose texts
  are encoded each on its own), the layers `model.layer_indices` side by side, (L, 2h * len(layers));
- `CoveForQuestionAnswering` (DCN): `run_cove` of the example as one segment (a question or a context window; cut
  a pair into its distinct segments first with `distinct_segments`), (L, cove_size).

Training-side library code: no model class imports this module, and checkpoints do not ship it.
"""

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import torch

from .modeling_cove_bcn import CoveForSequenceClassification
from .modeling_cove_dcn import CONTEXT_SEGMENT, QUESTION_SEGMENT, CoveForQuestionAnswering

__all__ = ["cached_features", "CachedFeatures", "compute_features", "dataset_columns", "distinct_segments",
           "feature_cache_key", "head_features", "pad_rows", "segment_placements"]

# part of every key: a change of what a cached row holds must not hit files written before it
FEATURE_CACHE_VERSIONS = {"bcn": "bcn-cove-features-v1", "dcn": "dcn-cove-features-v1"}


@dataclass
class CachedFeatures:
    """Per-example feature rows of one dataset: `states` (total tokens, C) cut into rows by `offsets` (N + 1,);
    `features[i]` is example i's `(L_i, C)` row. `path`: the cache file (None without a cache dir); `hit`: loaded
    from it rather than computed; `seconds`: the time that took."""

    states: torch.Tensor
    offsets: torch.Tensor
    path: Optional[str] = None
    hit: bool = False
    seconds: float = 0.0

    def __len__(self) -> int:
        return self.offsets.shape[0] - 1

    def __getitem__(self, row: int) -> torch.Tensor:
        return self.states[self.offsets[row] : self.offsets[row + 1]]

    @property
    def width(self) -> int:
        return self.states.shape[-1]

    def num_bytes(self) -> int:
        return self.states.numel() * self.states.element_size()

    def info(self) -> dict:
        return {"path": self.path, "hit": self.hit, "seconds": round(self.seconds, 2)}

    def batch(self, placements: Sequence[Sequence[tuple]], time_steps: int) -> torch.Tensor:
        """A padded float32 batch (B, T, C), zero where nothing is placed: `placements[b]` lists (row, positions)
        pairs, each putting cached row `row` at `positions` (a (L_row,) index tensor, or None: positions 0..L_row-1)
        of batch row b."""
        out = torch.zeros(len(placements), time_steps, self.width)
        for b, pairs in enumerate(placements):
            for row, positions in pairs:
                states = self[row].float()
                if positions is None:
                    out[b, : states.shape[0]] = states
                else:
                    out[b, positions] = states
        return out


def pad_rows(input_ids: Sequence, token_type_ids: Sequence, pad_token_id: int = 0) -> dict:
    """Right-pad token id lists: input_ids, attention_mask, token_type_ids (0 on padding), each (B, T)."""
    width = max(len(row) for row in input_ids)
    batch = {
        "input_ids": torch.full((len(input_ids), width), pad_token_id, dtype=torch.long),
        "attention_mask": torch.zeros(len(input_ids), width, dtype=torch.long),
        "token_type_ids": torch.zeros(len(input_ids), width, dtype=torch.long),
    }
    for b, (row, types) in enumerate(zip(input_ids, token_type_ids)):
        batch["input_ids"][b, : len(row)] = torch.as_tensor(row, dtype=torch.long)
        batch["attention_mask"][b, : len(row)] = 1
        batch["token_type_ids"][b, : len(row)] = torch.as_tensor(types, dtype=torch.long)
    return batch


def head_features(model) -> tuple:
    """(kind, layers read, function (input_ids, attention_mask, token_type_ids) (B, T) -> features (B, T, C)) of a
    head whose encoder is frozen."""
    if isinstance(model, CoveForSequenceClassification):
        layers = list(model.layer_indices)

        def bcn(input_ids, attention_mask, token_type_ids):
            hidden = model.compute_cove_hidden_states(input_ids, attention_mask, token_type_ids)
            return torch.cat([hidden[k] for k in layers], dim=-1)  # (B, T, 2h * len(layers))

        return "bcn", layers, bcn
    if isinstance(model, CoveForQuestionAnswering):
        layers = model.config.feature_layout("dcn").mt_lstm_layers(model.config.num_hidden_layers)
        return "dcn", layers, lambda input_ids, attention_mask, token_type_ids: model.run_cove(input_ids,
                                                                                               attention_mask)
    raise TypeError(f"model must be a CoveForSequenceClassification or a CoveForQuestionAnswering, got "
                    f"{type(model).__name__}")


def dataset_columns(dataset) -> tuple:
    """(input_ids, token_type_ids, lengths) lists of a `datasets.Dataset` or a dict of lists; token_type_ids default
    to zeros, lengths to the id counts."""
    names = dataset.column_names if hasattr(dataset, "column_names") else list(dataset)
    if "input_ids" not in names:
        raise ValueError(f"dataset needs an input_ids column, has {sorted(names)}")
    ids = [list(row) for row in dataset["input_ids"]]
    if "token_type_ids" in names:
        types = [list(row) for row in dataset["token_type_ids"]]
    else:
        types = [[0] * len(row) for row in ids]
    lengths = [len(row) for row in ids]
    empty = [i for i, n in enumerate(lengths) if n == 0]
    if empty:
        raise ValueError(f"dataset rows {empty[:10]} have no tokens: every example needs at least one")
    if any(len(t) != n for t, n in zip(types, lengths)):
        raise ValueError("dataset token_type_ids rows must be as long as their input_ids rows")
    return ids, types, lengths


def feature_cache_key(model, dataset, dtype: torch.dtype = torch.float32) -> str:
    """Hash of what determines the cached rows: the kind of head and the layers it reads, the encoder weights and
    word vectors, the token ids and types, and a storage dtype other than float32."""
    kind, layers, _ = head_features(model)
    ids, types, lengths = dataset_columns(dataset)
    digest = hashlib.sha256(FEATURE_CACHE_VERSIONS[kind].encode())
    digest.update(json.dumps({"layers": layers}).encode())
    for name, tensor in sorted(model.cove.state_dict().items()):
        if name.startswith(("embeddings.", "encoder.")):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    digest.update(np.asarray(lengths, dtype=np.int64).tobytes())
    for column in (ids, types):
        digest.update(np.fromiter((t for row in column for t in row), dtype=np.int64, count=sum(lengths)).tobytes())
    if dtype != torch.float32:
        digest.update(str(dtype).encode())
    return digest.hexdigest()


@torch.no_grad()
def compute_features(model, dataset, batch_size: int = 64, dtype: torch.dtype = torch.float32,
                     progress: bool = False, desc: str = "CoVe features") -> CachedFeatures:
    """Run the frozen encoder of `model` once over `dataset` (input_ids, optional token_type_ids), in batches of
    `batch_size` examples of neighbouring lengths (sorted, shortest first), on the model's device."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    _, _, compute = head_features(model)
    ids, types, lengths = dataset_columns(dataset)
    model.eval()
    device = next(model.parameters()).device
    offsets = torch.zeros(len(lengths) + 1, dtype=torch.long)
    offsets[1:] = torch.cumsum(torch.tensor(lengths, dtype=torch.long), 0)
    states = None
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
    if progress:
        from tqdm.auto import tqdm

        batches = tqdm(batches, desc=desc, unit=" batches")
    for rows in batches:
        batch = pad_rows([ids[i] for i in rows], [types[i] for i in rows], model.config.pad_token_id)
        out = compute(*(batch[k].to(device) for k in ("input_ids", "attention_mask", "token_type_ids"))).cpu()
        if states is None:
            states = torch.zeros(int(offsets[-1]), out.shape[-1], dtype=dtype)
        for b, i in enumerate(rows):
            states[offsets[i] : offsets[i + 1]] = out[b, : lengths[i]].to(dtype)
    if states is None:  # an empty dataset
        states = torch.zeros(0, 0, dtype=dtype)
    return CachedFeatures(states, offsets)


def cached_features(model, dataset, cache_dir=None, name: str = "features", batch_size: int = 64,
                    dtype: torch.dtype = torch.float32, progress: bool = False) -> CachedFeatures:
    """`compute_features` of `dataset`, read from `cache_dir` when that holds them (same key: `feature_cache_key`)
    and written there otherwise (as `<name>-<key>.safetensors`, atomically). Without a `cache_dir`, computed and kept
    in memory only."""
    start = time.time()
    if cache_dir is None:
        features = compute_features(model, dataset, batch_size, dtype, progress, desc=f"CoVe features {name}")
        features.seconds = time.time() - start
        return features
    from safetensors.torch import load_file, save_file

    key = feature_cache_key(model, dataset, dtype)
    path = Path(cache_dir) / f"{name}-{key[:20]}.safetensors"
    if path.exists():
        tensors = load_file(str(path))
        features = CachedFeatures(tensors["states"], tensors["offsets"], str(path), hit=True)
        expected = len(dataset["input_ids"])
        if len(features) != expected:
            raise RuntimeError(f"feature cache {path} has {len(features)} rows, expected {expected}: delete it")
        features.seconds = time.time() - start
        return features
    features = compute_features(model, dataset, batch_size, dtype, progress, desc=f"CoVe features {name}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    kind, layers, _ = head_features(model)
    save_file({"states": features.states.contiguous(), "offsets": features.offsets}, str(tmp),
              metadata={"key": key, "kind": kind, "layers": json.dumps(layers), "name": name})
    os.replace(tmp, path)
    features.path, features.seconds = str(path), time.time() - start
    return features


# ----------------------------------------------------------------------------------------------------------------
# DCN: a (question, context) window is two segments, each encoded alone; windows share their question and contexts
# ----------------------------------------------------------------------------------------------------------------

SEGMENT_KEYS = {QUESTION_SEGMENT: "question_key", CONTEXT_SEGMENT: "context_key"}


def distinct_segments(feature_sets: Sequence[dict]) -> tuple:
    """The distinct question and context segments of SQuAD feature sets (dicts of `input_ids` / `token_type_ids`
    lists, one entry per window). Returns (segments {"input_ids": [...]}, the feature sets with `question_key` /
    `context_key` columns added: the index of each window's segments among them). Shared segments appear once."""
    index, segments, keyed = {}, [], []
    for features in feature_sets:
        columns = {name: [] for name in SEGMENT_KEYS.values()}
        for ids, types in zip(features["input_ids"], features["token_type_ids"]):
            for segment_type, name in SEGMENT_KEYS.items():
                segment = tuple(t for t, s in zip(ids, types) if s == segment_type)
                if segment not in index:
                    index[segment] = len(segments)
                    segments.append(list(segment))
                columns[name].append(index[segment])
        keyed.append({**features, **columns})
    return {"input_ids": segments}, keyed


def segment_placements(rows: Sequence[dict]) -> list:
    """`CachedFeatures.batch` placements of windows keyed by `distinct_segments`: each segment's row at the
    positions of its type."""
    placements = []
    for r in rows:
        types = torch.as_tensor(r["token_type_ids"])
        placements.append([(r[name], (types == segment_type).nonzero().flatten())
                           for segment_type, name in SEGMENT_KEYS.items()])
    return placements
