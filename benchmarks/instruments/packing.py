"""When should the encoder pack? An A/B of the MT-LSTM's execution paths on the same batches (random weights: speed
only). 1. batches in arrival order (widely mixed lengths: what `pipeline("feature-extraction")` and a plain
DataLoader send): packed, unpacked as one group, unpacked in groups of near-equal length, and a per-batch rule
(`PACKING_RULES`) choosing between packed and unpacked; 2. length-sorted batches cut as `CoveModel.encode` cuts them:
unpacked vs packed."""

from __future__ import annotations

import warnings
from typing import Callable, Optional

import torch
from torch import nn

from modeling_cove.lstm_kernels import PREPACKED_SEGMENT_CALL_ROWS, SEGMENT_CALL_ROWS, length_bucketed_batches, run_unpacked
from .common import interleaved_best


def fill(lengths: torch.Tensor, time_: int) -> float:
    """Real tokens / padded tokens of a (B, time_) batch."""
    return float(lengths.sum()) / (len(lengths) * time_)


# Per-batch rules for running a padded batch unpacked (else packed): the earlier rule (every row >= 0.75 x the
# longest) and the fill rule at three thresholds (real tokens >= f x padded tokens; the model uses UNPACKED_MIN_FILL)
PACKING_RULES = {
    "rule_min_ratio_0.75": lambda n, t: bool(n.min() >= 0.75 * t),
    **{f"rule_fill_{f}": (lambda n, t, f=f: fill(n, t) >= f) for f in (0.5, 0.6, 0.7)},
}


def grouped_forward(encoder, vectors: torch.Tensor, lengths: torch.Tensor, ratio: float) -> list:
    """Unpacked in groups of near-equal length (`length_bucketed_batches` with `ratio`) inside one padded batch, each
    group cut to its longest row, the results put back in order: each layer's (B, T, 2H) output."""
    batch, time_, _ = vectors.shape
    groups = length_bucketed_batches(lengths.tolist(), batch, ratio)
    pieces = [[] for _ in range(encoder.num_layers)]
    for group in groups:
        index = torch.tensor(group, device=vectors.device)
        group_time = int(lengths[group[0]])
        outputs = run_unpacked(encoder, vectors[index, :group_time], lengths[index], False, False, None)[0]
        for layer, output in enumerate(outputs):
            pieces[layer].append(nn.functional.pad(output, (0, 0, 0, time_ - group_time)))
    restore = torch.tensor([row for group in groups for row in group], device=vectors.device).argsort()
    return [torch.cat(piece).index_select(0, restore) for piece in pieces]


def best_seconds(variants: dict, repeats: int) -> dict:
    """Seconds of each variant in inference mode, best of `repeats` interleaved rounds."""
    return interleaved_best({name: torch.inference_mode()(fn) for name, fn in variants.items()}, repeats)


def timed(variants: dict, repeats: int) -> dict:
    """`best_seconds`, rounded to ms."""
    return {name: round(seconds, 3) for name, seconds in best_seconds(variants, repeats).items()}


def arrival_order_batches(texts: list, model, tokenizer, batch_size: int) -> list:
    """(word vectors (B, T, D) zero at padding, lengths (B,)) of each batch of `texts` in their order."""
    device = model.embeddings.weight.device
    batches = []
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, return_tensors="pt").to(device)
        with torch.inference_mode():
            vectors = model.embeddings(batch["input_ids"]) * batch["attention_mask"].unsqueeze(-1)
        batches.append((vectors, batch["attention_mask"].sum(1).clamp(min=1)))
    return batches


def sorted_batches(ids: list, batch_size: int, device) -> list:
    """(input_ids, attention_mask) of `ids` sorted by length and cut by size, as `CoveModel.encode` cuts them."""
    batches = []
    for batch in length_bucketed_batches([len(x) for x in ids], batch_size, min_ratio=0.0):
        width = len(ids[batch[0]])
        input_ids = torch.tensor([ids[i] + [0] * (width - len(ids[i])) for i in batch])
        mask = (torch.arange(width)[None, :] < torch.tensor([len(ids[i]) for i in batch])[:, None]).long()
        batches.append((input_ids.to(device), mask.to(device)))
    return batches


def bench_packing(texts: list, model, tokenizer, batch_size: int, repeats: int) -> dict:
    """The packing figures of one set of texts: seconds of each path on the arrival-order batches and on the sorted
    batches, and each rule's gain over packing every batch."""
    encoder = model.encoder
    arrival = arrival_order_batches(texts, model, tokenizer, batch_size)

    def run_arrival(fn):
        return lambda: [fn(vectors, lengths) for vectors, lengths in arrival]

    first = timed({
        "packed": run_arrival(lambda v, n: encoder(v, n, final_states=True)),
        "unpacked_one_group": run_arrival(lambda v, n: run_unpacked(encoder, v, n, False, False, None)[0]),
        **{f"unpacked_groups_{r}": run_arrival(lambda v, n, r=r: grouped_forward(encoder, v, n, r))
           for r in (0.5, 0.6, 0.75)},
        **{name: run_arrival(lambda v, n, rule=rule: encoder(v, n, final_states=False, unpacked=rule(n, v.shape[1])))
           for name, rule in PACKING_RULES.items()},
    }, repeats)
    ids = [x for x in tokenizer(texts)["input_ids"] if x]
    by_length = sorted_batches(ids, batch_size, model.embeddings.weight.device)

    def run_sorted(final_states):
        return lambda: [model(input_ids=i, attention_mask=m, output_final_states=final_states) for i, m in by_length]

    second = timed({"unpacked": run_sorted(False), "packed": run_sorted(True)}, repeats)
    grouped = min(v for k, v in first.items() if k.startswith("unpacked_groups"))
    return {
        "texts": len(texts), "real_tokens": sum(len(x) for x in ids),
        "arrival_order_batches_seconds": first,
        "arrival_order_best_grouped_vs_packed": round(first["packed"] / grouped, 3),
        "arrival_order_fill": [round(fill(n, v.shape[1]), 3) for v, n in arrival],
        "arrival_order_rule_vs_packed": {name: round(first["packed"] / first[name], 3) for name in PACKING_RULES},
        "arrival_order_batches_unpacked_by_rule": {
            name: sum(rule(n, v.shape[1]) for v, n in arrival) for name, rule in PACKING_RULES.items()},
        "sorted_batches_seconds": second,
        "sorted_unpacked_vs_packed": round(second["packed"] / second["unpacked"], 3),
    }


# ----------------------------------------------------------------------------------------------------------------
# training: when should the heads' biLSTMs pack where autograd records them?
# ----------------------------------------------------------------------------------------------------------------

TRAINING_MEANS = (5, 7, 11, 15, 24)  # mean real lengths of the measured batches, tokens per row


def training_models(vocab_size: int, num_labels: int = 5) -> dict:
    """The two heads whose training the rule serves, at real sizes (300-d vectors, 300 units), random weights: the
    tagger (one 2-layer biLSTM stack) and the BCN (three 1-layer biLSTMs), each reading the word vectors alone."""
    from modeling_cove.configuration_cove import CoveConfig
    from modeling_cove.modeling_cove_bcn import CoveForSequenceClassification
    from modeling_cove.modeling_cove_tagger import CoveForTokenClassification

    sizes = dict(vocab_size=vocab_size, word_vector_dim=300, hidden_size=300, num_labels=num_labels)
    return {"tagger": CoveForTokenClassification(CoveConfig(tagger_input="vectors", tagger_hidden_size=300,
                                                            tagger_module_dim=300, **sizes)).train(),
            "bcn": CoveForSequenceClassification(CoveConfig(bcn_input="vectors", **sizes)).train()}


def training_batch(kind: str, lengths: list, vocab_size: int, num_labels: int, generator: torch.Generator) -> dict:
    """A right-padded training batch of rows of `lengths`: random ids, labels per row (BCN) or per token (tagger,
    -100 at padding)."""
    mask = (torch.arange(max(lengths))[None, :] < torch.tensor(lengths)[:, None]).long()  # (B, T)
    ids = torch.randint(5, vocab_size, mask.shape, generator=generator) * mask
    if kind == "bcn":
        labels = torch.randint(0, num_labels, (len(lengths),), generator=generator)
    else:
        labels = torch.randint(0, num_labels, mask.shape, generator=generator).masked_fill(mask == 0, -100)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def chosen_strategies(model, batch: dict) -> list:
    """The strategies "auto" picks for the biLSTM calls of one training step of `model` on `batch` (recorded from
    `layers.run_bilstm`'s choice, then the step is undone: gradients cleared, no optimizer step)."""
    from modeling_cove import layers

    chosen, choose = [], layers.choose_lstm_implementation

    def spy(*args, **kwargs):
        chosen.append(choose(*args, **kwargs))
        return chosen[-1]

    model.set_lstm_implementation("auto")
    layers.choose_lstm_implementation = spy
    try:
        model(**batch).loss.backward()
    finally:
        layers.choose_lstm_implementation = choose
        model.zero_grad()
    return chosen


def bench_training_packing(corpus_lengths: list, batch_size: int, repeats: int, batches_per_mean: int = 3,
                           means=TRAINING_MEANS, vocab_size: int = 20000, seed: int = 0) -> list:
    """Per batch: one training step (forward, backward, Adam) with every biLSTM packed ("reference") and unpacked,
    interleaved, best of `repeats`; batches of `batch_size` rows drawn from `corpus_lengths` (real sentence lengths)
    scaled to each mean in `means`. Rows: model, padded length, mean length, the two times and packed / unpacked, and
    the strategies "auto" picked for the step's biLSTM calls (`chosen_strategies`)."""
    import random

    rng, generator = random.Random(seed), torch.Generator().manual_seed(seed)
    corpus_mean = sum(corpus_lengths) / len(corpus_lengths)
    rows = []
    for kind, model in training_models(vocab_size).items():
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-3)
        for mean in means:
            for _ in range(batches_per_mean):
                lengths = [max(1, round(n * mean / corpus_mean)) for n in rng.sample(corpus_lengths, batch_size)]
                batch = training_batch(kind, lengths, vocab_size, model.config.num_labels, generator)

                def step(implementation, model=model, optimizer=optimizer, batch=batch):
                    def run():
                        model.set_lstm_implementation(implementation)
                        model(**batch).loss.backward()
                        optimizer.step()
                        optimizer.zero_grad()
                    return run

                best = interleaved_best({"packed": step("reference"), "unpacked": step("unpacked")}, repeats)
                rows.append({"model": kind, "padded_length": max(lengths), "mean_length": round(
                    sum(lengths) / len(lengths), 1), "packed_s": round(best["packed"], 4),
                    "unpacked_s": round(best["unpacked"], 4),
                    "packed_over_unpacked": round(best["packed"] / best["unpacked"], 3),
                    "auto": sorted(set(chosen_strategies(model, batch)))})
                print(rows[-1], flush=True)
    return rows


# ----------------------------------------------------------------------------------------------------------------
# ragged batches: where does a ragged batch lose against the roofline's uniform one?
# ----------------------------------------------------------------------------------------------------------------

RAGGED_ROWS = (1, 2, 4, 8, 16, 32, 64)  # rows of the step / call cost table
RAGGED_STEPS = 32  # steps of the long call that, against a 1-step call, separates a step's cost from a call's
RAGGED_CALL_ROWS = (0, 10, 20, 40, 130, 10 ** 9)  # the planner's call cost: a segment at every row end .. none


def step_and_call_costs(lstm: nn.LSTM, rows=RAGGED_ROWS, steps: int = RAGGED_STEPS, repeats: int = 5,
                        calls: int = 10, call: Optional[Callable] = None) -> dict:
    """Seconds of one step and of the fixed part of one call of the fused kernel (`lstm`, a one-layer biLSTM on
    uniform rows; or `call(x)` on its `(B, T, C)` rows), by row count: a call of `steps` steps costs call + steps x
    step, a 1-step call call + step (each timed over `calls` calls, best of `repeats` interleaved rounds)."""
    call = call or lstm
    costs = {}
    for batch in rows:
        long, short = torch.randn(batch, steps, lstm.input_size), torch.randn(batch, 1, lstm.input_size)
        best = interleaved_best({"long": lambda: [call(long) for _ in range(calls)],
                                 "short": lambda: [call(short) for _ in range(calls)]}, repeats)
        step = max(best["long"] - best["short"], 0.0) / (steps - 1) / calls
        costs[batch] = {"step_s": step, "call_s": max(best["short"] / calls - step, 0.0)}
    return costs


def prepacked_call(lstm: nn.LSTM) -> Callable:
    """One bidirectional call of `lstm` as "unpacked" makes a time segment's outside autograd in float32 on CPU: each
    direction by oneDNN on weights reordered once beforehand (`lstm_kernels.prepack_direction`)."""
    from modeling_cove import lstm_kernels

    weights = [w.detach() for w in lstm._flat_weights]
    directions = [lstm_kernels.prepack_direction(weights[:4]), lstm_kernels.prepack_direction(weights[4:])]

    def call(x):  # (B, T, C)
        zeros = x.new_zeros(1, x.shape[0], lstm.hidden_size)
        return [lstm_kernels.onednn_direction(x.transpose(0, 1), (zeros, zeros), d) for d in directions]
    return call


def training_call(lstm: nn.LSTM) -> Callable:
    """One bidirectional call of `lstm` as a training step makes it: forward in train mode on inputs that require a
    gradient, then the backward of its outputs' sum (oneDNN's backward, where autograd records the segments)."""
    def call(x):  # (B, T, C)
        x = x.detach().requires_grad_()
        lstm(x)[0].sum().backward()
    return call


def modelled_seconds(costs: dict, batch: int, steps: int, calls: int = 0) -> float:
    """`steps` steps of `batch` rows and `calls` calls by the cost table (linear between its row counts)."""
    import numpy as np

    rows = sorted(costs)
    step = float(np.interp(batch, rows, [costs[r]["step_s"] for r in rows]))
    call = float(np.interp(batch, rows, [costs[r]["call_s"] for r in rows]))
    return steps * step + calls * call


def bench_ragged(texts: list, model, tokenizer, batch_size: int, repeats: int) -> dict:
    """One biLSTM layer at the heads' size (`model`'s word-vector width in, as many units) on `texts` in arrival-order
    batches: the roofline (the same layer on uniform rows of each batch's mean length), "reference" (packed) and
    "unpacked" under the planner's call cost `RAGGED_CALL_ROWS` (0: a time segment at every row end), measured; and the
    cost table's account of them: the ragged batches with a segment at every row end and calls free (the bound of
    ragged rows against uniform ones), and the planner's segments with their calls. Also the cost table with oneDNN
    off (`torch.backends.mkldnn.flags(enabled=False)`: ATen's own loop, whose calls cost little and steps more), and
    with the weights reordered once (`prepacked_call`, as the segments run; the planner's account uses this one), and
    in training (`training_call`: forward and backward, where autograd records the segments on `torch.lstm`).
    The table times one bidirectional call at the process's thread count, so its account describes one thread; with
    more, "unpacked" runs the two directions on two host threads, one intra-op thread each. CPU only."""
    from unittest import mock

    from modeling_cove import lstm_kernels
    from modeling_cove.layers import run_bilstm

    width = model.embeddings.weight.shape[1]
    lstm = nn.LSTM(width, width, batch_first=True, bidirectional=True).eval()
    batches = arrival_order_batches(texts, model, tokenizer, batch_size)
    uniform = [torch.randn(len(n), max(1, round(float(n.sum()) / len(n))), width) for _, n in batches]
    plan = lstm_kernels.plan_time_segments

    def unpacked(call_rows):
        def run():
            with mock.patch.object(lstm_kernels, "plan_time_segments",
                                   lambda lengths, time, **_: plan(lengths, time, call_rows=call_rows)):
                for vectors, lengths in batches:
                    run_bilstm(lstm, vectors, lengths, "unpacked")
        return run

    variants = {"roofline": lambda: [lstm(x) for x in uniform],
                "reference": lambda: [run_bilstm(lstm, v, n, "reference") for v, n in batches],
                **{f"unpacked_call_rows_{c}": unpacked(c) for c in RAGGED_CALL_ROWS}}
    best = best_seconds(variants, repeats)  # unrounded: the ratios below divide by them
    with torch.inference_mode():
        costs = step_and_call_costs(lstm, repeats=repeats)
        prepacked_costs = (step_and_call_costs(lstm, repeats=repeats, call=prepacked_call(lstm))
                           if lstm_kernels.prepacking_works() else None)  # None: oneDNN does not run them here
        with warnings.catch_warnings():  # the flags also set oneDNN's TF32 switch, which warns off Intel GPUs
            warnings.simplefilter("ignore", UserWarning)
            with torch.backends.mkldnn.flags(enabled=False):  # ATen's own CPU loop: cheap calls, dearer steps
                native_costs = step_and_call_costs(lstm, repeats=repeats)
    training_costs = step_and_call_costs(lstm.train(), repeats=repeats, call=training_call(lstm))  # dropout 0
    lstm.eval().zero_grad(set_to_none=True)
    # the planner's account at the call cost "unpacked" plans with here (segments on reordered weights where they run)
    call_rows = SEGMENT_CALL_ROWS if prepacked_costs is None else PREPACKED_SEGMENT_CALL_ROWS
    roofline_model = sum(modelled_seconds(costs, len(x), x.shape[1], 1) for x in uniform)
    every_end, planned = 0.0, 0.0
    for _, lengths in batches:
        ordered = sorted(lengths.tolist(), reverse=True)
        every_end += sum(modelled_seconds(costs, sum(1 for n in ordered if n > t), 1) for t in range(ordered[0]))
        planned += sum(modelled_seconds(prepacked_costs or costs, rows, end - start, 1)
                       for start, end, rows in plan(ordered, ordered[0], call_rows=call_rows))
    return {
        "texts": len(texts), "layer": f"nn.LSTM({width}, {width}, bidirectional)",
        "fill": round(sum(float(n.sum()) for _, n in batches) / sum(v.shape[0] * v.shape[1] for v, _ in batches), 3),
        "seconds": {name: round(value, 3) for name, value in best.items()},
        "roofline_over": {k: round(best["roofline"] / v, 3) for k, v in best.items() if k != "roofline"},
        "cost_table_ms": in_ms(costs),
        "cost_table_ms_prepacked": None if prepacked_costs is None else in_ms(prepacked_costs),
        "cost_table_ms_without_onednn": in_ms(native_costs),
        "cost_table_ms_training": in_ms(training_costs),  # forward and backward, as under autograd
        "modelled_roofline_over": {
            "segment_at_every_row_end_calls_free": round(roofline_model / every_end, 3),
            f"planned_segments_call_rows_{call_rows}": round(roofline_model / planned, 3)},
    }


def in_ms(costs: dict) -> dict:
    """A cost table (`step_and_call_costs`) in milliseconds, for the report."""
    return {rows: {name: round(seconds * 1e3, 4) for name, seconds in cost.items()} for rows, cost in costs.items()}
