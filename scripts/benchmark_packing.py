#!/usr/bin/env python
"""When should the encoder pack? An A/B of the MT-LSTM's execution paths on the same batches, in one process.
Writes benchmarks/results/packing.json.

    python scripts/benchmark_packing.py --data-dir ../shared/data --threads 2
    python scripts/benchmark_packing.py --data-dir ../shared/data --quick      # smoke run

1. Batches of 64 in arrival order (what `pipeline("feature-extraction")` and a plain DataLoader send): widely mixed
   lengths. Paths: packed (`CoveEncoder.forward(..., final_states=True)`); unpacked as one group (every row runs
   to the longest); unpacked in groups of near-equal length (`length_bucketed_batches` with ratio r inside the
   batch, each group cut to its longest row, results put back in order).
   Also each batch packed or unpacked by a per-batch rule (`PACKING_RULES`): the earlier rule (unpacked only when
   every row is >= 0.75 x the longest) and the fill rule (unpacked when real tokens >= f x the padded batch).
2. Length-sorted batches cut by size (what `CoveModel.encode` sends; most hold near-equal lengths): unpacked (the
   default without final states; on CPU in time segments, `plan_time_segments`) vs packed.
The model's rule (`lstm_kernels.unpacked_by_default`, "auto"): with more than one CPU thread always unpacked (on CPU the
unpacked path sorts the rows inside and runs them in time segments, so "unpacked as one group" is that); on a GPU or
a single CPU thread when real tokens >= UNPACKED_MIN_FILL (0.7) x the padded batch.
Each figure: seconds for the whole set, best of `--repeats` interleaved repeats; random weights (speed only).
`--device cuda` asks the same of cuDNN (writes packing_cuda.json).
"""

import os

import wait_policy  # noqa: F401, I001  (before torch: PASSIVE unless OMP_WAIT_POLICY says otherwise)
import time

import torch
from torch import nn

from benchmark import benchmark_arguments, prepare_encoder_benchmark, synchronize, write_report
from modeling_cove.lstm_kernels import length_bucketed_batches, run_unpacked


def fill(lengths: torch.Tensor, time_: int) -> float:
    """Real tokens / padded tokens of a (B, time_) batch."""
    return float(lengths.sum()) / (len(lengths) * time_)


# Per-batch rules for running a padded batch unpacked (else packed): the earlier rule (every row >= 0.75 x the
# longest) and the fill rule at three thresholds (real tokens >= f x padded tokens; the model uses UNPACKED_MIN_FILL)
PACKING_RULES = {
    "rule_min_ratio_0.75": lambda n, t: bool(n.min() >= 0.75 * t),
    **{f"rule_fill_{f}": (lambda n, t, f=f: fill(n, t) >= f) for f in (0.5, 0.6, 0.7)},
}


def grouped_forward(encoder, vectors, lengths, ratio):
    """Unpacked in groups of near-equal length inside one padded batch (the alternative measured here)."""
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


def timed(variants: dict, repeats: int) -> dict:
    best = {name: float("inf") for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            synchronize()
            start = time.perf_counter()
            with torch.inference_mode():
                fn()
            synchronize()
            best[name] = min(best[name], time.perf_counter() - start)
    return {name: round(seconds, 3) for name, seconds in best.items()}


def bench(texts, model, tokenizer, batch_size, repeats) -> dict:
    encoder = model.encoder
    device = model.embeddings.weight.device
    arrival = []  # (vectors (B, T, 300), lengths (B,)) per batch of the texts in their order
    for start in range(0, len(texts), batch_size):
        batch = tokenizer(texts[start:start + batch_size], padding=True, return_tensors="pt").to(device)
        with torch.inference_mode():
            vectors = model.embeddings(batch["input_ids"]) * batch["attention_mask"].unsqueeze(-1)
        arrival.append((vectors, batch["attention_mask"].sum(1).clamp(min=1)))

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
    sorted_batches = []
    for batch in length_bucketed_batches([len(x) for x in ids], batch_size, min_ratio=0.0):  # as `encode` cuts
        width = len(ids[batch[0]])
        input_ids = torch.tensor([ids[i] + [0] * (width - len(ids[i])) for i in batch])
        mask = (torch.arange(width)[None, :] < torch.tensor([len(ids[i]) for i in batch])[:, None]).long()
        sorted_batches.append((input_ids.to(device), mask.to(device)))

    def run_sorted(final_states):
        return lambda: [model(input_ids=i, attention_mask=m, output_final_states=final_states)
                        for i, m in sorted_batches]

    second = timed({"unpacked": run_sorted(False), "packed": run_sorted(True)}, repeats)
    tokens = sum(len(x) for x in ids)
    return {
        "texts": len(texts), "real_tokens": tokens,
        "arrival_order_batches_seconds": first,
        "arrival_order_best_grouped_vs_packed": round(first["packed"] / min(
            v for k, v in first.items() if k.startswith("unpacked_groups")), 3),
        "arrival_order_fill": [round(fill(n, v.shape[1]), 3) for v, n in arrival],
        "arrival_order_rule_vs_packed": {name: round(first["packed"] / first[name], 3) for name in PACKING_RULES},
        "arrival_order_batches_unpacked_by_rule": {
            name: sum(rule(n, v.shape[1]) for v, n in arrival) for name, rule in PACKING_RULES.items()},
        "sorted_batches_seconds": second,
        "sorted_unpacked_vs_packed": round(second["packed"] / second["unpacked"], 3),
    }


def main(argv=None):
    args = benchmark_arguments(__doc__, "packing.json").parse_args(argv)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    results = {}
    for name, group in texts.items():
        results[name] = bench(list(group), model, tokenizer, args.batch_size, args.repeats)
        print(name, results[name], flush=True)
    write_report(args.output, argv, args.quick,
                 {"threads": args.threads, "batch_size": args.batch_size, "device": str(device)}, results)

if __name__ == "__main__":
    main()
