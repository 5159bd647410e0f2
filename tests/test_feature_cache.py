"""modeling_cove/feature_cache.py: the one frozen-feature cache of BCN and DCN training. Cached rows equal the live
encoder (BCN texts and pairs, DCN question/context segments put back in their windows), the key changes with the
encoder weights, the layers read and the token ids (and only then), and every path returns `CachedFeatures`."""

import pytest
import torch
from datasets import Dataset

from conftest import require_data
from modeling_cove import CoveConfig, CoveForQuestionAnswering, CoveForSequenceClassification, CoveModel
from modeling_cove.feature_cache import (
    CachedFeatures,
    cached_features,
    distinct_segments,
    feature_cache_key,
    pad_rows,
    segment_placements,
)

pytestmark = pytest.mark.usefixtures("single_thread")


def tiny_bcn(seed=0, **overrides):
    values = dict(vocab_size=40, word_vector_dim=6, hidden_size=6, bcn_feedforward_dim=5, bcn_hidden_size=4,
                  bcn_maxout_reductions=[2, 2], bcn_maxout_pool=2, bcn_dropout=0.0, bcn_batch_norm=False,
                  num_labels=3)
    values.update(overrides)
    torch.manual_seed(seed)
    return CoveForSequenceClassification(CoveConfig(**values)).eval()


def tiny_dcn(seed=0, vocab_size=40, **overrides):
    values = dict(vocab_size=vocab_size, word_vector_dim=8, hidden_size=4, dcn_hidden_size=6, dcn_pool_size=2,
                  dcn_dropout=0.0)
    values.update(overrides)
    torch.manual_seed(seed)
    return CoveForQuestionAnswering(CoveConfig(**values)).eval()


def texts(n=10, seed=0, pairs=False) -> Dataset:
    generator = torch.Generator().manual_seed(seed)
    rows = {"input_ids": [], "token_type_ids": []}
    for _ in range(n):
        first = int(torch.randint(1, 8, (1,), generator=generator))
        second = int(torch.randint(1, 5, (1,), generator=generator)) if pairs else 0
        rows["input_ids"].append(torch.randint(4, 40, (first + second,), generator=generator).tolist())
        rows["token_type_ids"].append([0] * first + [1] * second)
    return Dataset.from_dict(rows)


def windows(seed=0) -> dict:
    """SQuAD-like windows [question; context] (types 0 / 1): 3 questions, each over 2 or 3 windows of one context,
    so questions and contexts recur across windows."""
    generator = torch.Generator().manual_seed(seed)
    features = {"input_ids": [], "token_type_ids": []}
    contexts = [torch.randint(4, 40, (n,), generator=generator).tolist() for n in (9, 5)]
    for q_len, context in ((3, contexts[0]), (5, contexts[0]), (2, contexts[1])):
        question = torch.randint(4, 40, (q_len,), generator=generator).tolist()
        for start in range(0, len(context) - 3, 3):
            part = context[start : start + 4]
            features["input_ids"].append(question + part)
            features["token_type_ids"].append([0] * q_len + [1] * len(part))
        features["input_ids"].append(question + context[:2])  # the first window again (shared twice)
        features["token_type_ids"].append([0] * q_len + [1] * 2)
    return features


@pytest.mark.parametrize("pairs", [False, True])
@pytest.mark.parametrize("bcn_input", ["vectors+cove", "scalar_mix"])
def test_bcn_rows_equal_each_example_through_the_live_encoder(pairs, bcn_input):
    model = tiny_bcn(seed=1, bcn_input=bcn_input, bcn_pair_input=pairs)
    ds = texts(n=9, seed=1, pairs=pairs)
    features = cached_features(model, ds, batch_size=4)
    assert len(features) == len(ds) and features.width == 12 * len(model.layer_indices)
    for i in range(len(ds)):
        ids, types = torch.tensor([ds[i]["input_ids"]]), torch.tensor([ds[i]["token_type_ids"]])
        with torch.no_grad():
            hidden = model.compute_cove_hidden_states(ids, torch.ones_like(ids), types)
        alone = torch.cat([hidden[k][0] for k in model.layer_indices], dim=-1)  # (L, 12 * layers)
        assert torch.allclose(features[i], alone, rtol=0, atol=2e-7), i
    # a batch of them is the live batch, zero at padding
    batch = pad_rows(ds["input_ids"], ds["token_type_ids"])
    with torch.no_grad():
        hidden = model.compute_cove_hidden_states(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    live = torch.cat([hidden[k] for k in model.layer_indices], dim=-1)
    placed = features.batch([[(i, None)] for i in range(len(ds))], batch["input_ids"].shape[1])
    assert torch.allclose(placed, live, rtol=0, atol=1e-7)
    assert placed[batch["attention_mask"] == 0].abs().max() == 0


@pytest.mark.parametrize("cove_output", ["top", "both"])
def test_dcn_segments_put_back_equal_the_live_compute_cove_features(cove_output):
    model = tiny_dcn(seed=2, cove_output=cove_output)
    train = windows(seed=2)
    heldout = {k: v[:3] for k, v in windows(seed=3).items()}
    segments, (train, heldout) = distinct_segments([train, heldout])
    # 3 + 3 questions, 2 + 2 contexts' distinct windows: every shared segment once
    distinct = {tuple(t for t, s in zip(ids, types) if s == side)
                for f in (train, heldout) for ids, types in zip(f["input_ids"], f["token_type_ids"]) for side in (0, 1)}
    assert len(segments["input_ids"]) == len(distinct) < 2 * (len(train["input_ids"]) + len(heldout["input_ids"]))
    features = cached_features(model, segments, batch_size=3)
    assert features.width == model.cove_size
    for f in (train, heldout):
        keys = ("input_ids", "token_type_ids", "question_key", "context_key")
        rows = [dict(zip(keys, values)) for values in zip(*(f[k] for k in keys))]
        batch = pad_rows([r["input_ids"] for r in rows], [r["token_type_ids"] for r in rows])
        with torch.no_grad():
            live = model.compute_cove_features(**batch)
        cached = features.batch(segment_placements(rows), batch["input_ids"].shape[1])
        assert torch.equal(cached, live)
        with torch.no_grad():
            a = model(**batch, cove_features=cached)
            b = model(**batch)
        assert torch.equal(a.start_logits, b.start_logits)
        assert torch.equal(a.end_logits, b.end_logits)
    # float16 storage: the same values rounded, under another key
    half = cached_features(model, segments, batch_size=3, dtype=torch.float16)
    assert half.states.dtype == torch.float16 and torch.equal(half.states, features.states.half())
    assert feature_cache_key(model, segments, torch.float16) != feature_cache_key(model, segments)


def test_cache_hits_and_misses_on_weights_layers_and_ids(tmp_path):
    model = tiny_bcn(seed=3)
    ds = texts(n=12, seed=3, pairs=False)
    first = cached_features(model, ds, tmp_path, "toy", batch_size=5)
    second = cached_features(model, ds, tmp_path, "toy", batch_size=5)
    assert not first.hit and second.hit and first.path == second.path
    assert torch.equal(first.states, second.states) and torch.equal(first.offsets, second.offsets)
    assert cached_features(model, ds, tmp_path, "toy", batch_size=3).hit  # the batch size is not part of the key
    paths = {first.path}

    def miss(m, d):
        result = cached_features(m, d, tmp_path, "toy", batch_size=5)
        assert not result.hit and result.path not in paths
        paths.add(result.path)
        return result

    with torch.no_grad():
        model.cove.embeddings.weight[5].add_(0.01)  # other word vectors
    miss(model, ds)
    with torch.no_grad():
        model.cove.encoder.rnn.weight_hh_l1.add_(0.01)  # another MT-LSTM
    changed = miss(model, ds)
    assert not torch.equal(changed.states, first.states)
    other_layers = tiny_bcn(seed=3, bcn_input="scalar_mix")  # layers 1 and 2 instead of 2
    other_layers.cove.load_state_dict(model.cove.state_dict())  # same encoder
    assert other_layers.layer_indices != model.layer_indices
    miss(other_layers, ds)
    ids = [list(row) for row in ds["input_ids"]]
    ids[4][0] = 5 if ids[4][0] != 5 else 6  # one token id, same lengths
    miss(model, Dataset.from_dict({"input_ids": ids, "token_type_ids": ds["token_type_ids"]}))
    miss(model, ds.select(range(11)))  # one example fewer
    # the DCN over the same ids and weights reads other features: another key
    dcn = tiny_dcn(seed=3, vocab_size=40, word_vector_dim=6, hidden_size=6)
    dcn.cove.load_state_dict(model.cove.state_dict())
    miss(dcn, ds)


def test_every_path_returns_cached_features(tmp_path):
    bcn, dcn = tiny_bcn(seed=4), tiny_dcn(seed=4)
    ds = texts(n=6, seed=4)
    results = [cached_features(bcn, ds), cached_features(bcn, ds, tmp_path, "bcn"),
               cached_features(bcn, ds, tmp_path, "bcn"), cached_features(dcn, ds), cached_features(dcn, ds, tmp_path),
               cached_features(dcn, {"input_ids": list(ds["input_ids"])}, tmp_path)]
    assert [type(r) for r in results] == [CachedFeatures] * len(results)
    assert [r.hit for r in results] == [False, False, True, False, False, True]
    assert torch.equal(results[0].states, results[2].states) and torch.equal(results[3].states, results[5].states)
    assert results[0].info() == {"path": None, "hit": False, "seconds": round(results[0].seconds, 2)}


def test_bad_inputs_are_named():
    model = tiny_bcn()
    with pytest.raises(TypeError, match="CoveForSequenceClassification or a CoveForQuestionAnswering, got CoveModel"):
        cached_features(CoveModel(model.config), texts(n=2))
    with pytest.raises(ValueError, match=r"rows \[1\] have no tokens"):
        cached_features(model, {"input_ids": [[5, 6], []]})
    with pytest.raises(ValueError, match="input_ids column"):
        cached_features(model, {"ids": [[5]]})
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        cached_features(model, texts(n=2), batch_size=0)


def test_squad_windows_through_the_cache_equal_the_live_model():
    """Real SQuAD windows (moved from test_qa_pipeline.py, where it used squad_preprocessing.CoveFeatureCache)."""
    from modeling_cove.data import load_squad
    from modeling_cove.squad_preprocessing import prepare_train_features
    from modeling_cove.training.data.collators import pad_batch
    from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize

    train = load_squad(require_data())["train"].select(range(12))
    words = list(dict.fromkeys(w for text in list(train["context"]) + list(train["question"])
                               for w in moses_tokenize(text)))
    tokenizer = build_cove_tokenizer(words)
    model = tiny_dcn(seed=0, vocab_size=len(tokenizer))
    features, _ = prepare_train_features(train, tokenizer, max_length=120, doc_stride=32)
    segments, (features,) = distinct_segments([features])
    cache = cached_features(model, segments, batch_size=5)
    assert len(cache) < 2 * len(features["input_ids"])  # shared contexts are encoded once
    rows = [dict(zip(features, values)) for values in zip(*features.values())][:6]
    live = pad_batch(rows)
    cove_features = cache.batch(segment_placements(rows), live["input_ids"].shape[1])
    with torch.no_grad():
        a = model(**live, cove_features=cove_features)
        b = model(**live)
    assert torch.equal(a.start_logits, b.start_logits)
    assert torch.equal(a.end_logits, b.end_logits)


def test_checkpoints_neither_ship_nor_import_the_cache():
    """Library code of training: no Hub manifest entry lists it and no file a checkpoint ships imports it (a
    checkpoint loaded with trust_remote_code would miss it)."""
    import ast
    from pathlib import Path

    import modeling_cove
    from modeling_cove.hub import MANIFEST, PIPELINES

    package = Path(modeling_cove.__file__).resolve().parent
    shipped = set().union(*(entry.files for entry in MANIFEST.values()), *(p.files for p in PIPELINES.values()))
    assert "feature_cache.py" not in shipped and "squad_preprocessing.py" in shipped
    for name in sorted(shipped):
        tree = ast.parse((package / name).read_text())
        imported = {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not any("feature_cache" in module for module in imported), name
