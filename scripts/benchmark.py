#!/usr/bin/env python
"""Speed figures of the CoVe encoder, measured side by side in one process (ratios are what count; absolute
numbers move with the machine and its load). Writes benchmarks/results/encoder.json.

    python scripts/benchmark.py --data-dir ../shared/data            # full run (~5-10 min on 2 cores)
    python scripts/benchmark.py --data-dir ../shared/data --quick    # smoke run (~1 min)

Figures (real tokens/s = tokens of the real sentences, padding not counted):
- ours: `CoveModel.encode` on token ids (length-sorted near-equal batches run unpacked on the fused LSTM kernel,
  inference_mode; on CPU shared among single-threaded workers, one per intra-op thread), and the same with
  `num_workers=1` (every batch on all intra-op threads); both also on the first 50 and 100 inputs alone (few
  batches: where the workers' last batches count);
- roofline: the model's LSTM as a raw `nn.LSTM(300, 300, 2, bidirectional)` forward on uniform-length batches
  holding the same number of tokens (no embedding lookup, no padding, no packing), one batch at a time on all
  threads; roofline_workers: the same batches shared among `encode`'s workers (CPU);
- reference: the original Salesforce encoder's way: batches in arrival order, sort -> pack -> nn.LSTM -> unpack ->
  unsort per batch;
- end-to-end text -> vectors: `encode` on raw strings (tokenization included), `pipeline("feature-extraction")`
  on the texts in their order and sorted by character length, and our `pipeline("cove-feature-extraction")`;
- bf16 autocast vs fp32: speed and max relative error.
Each measurement is repeated (`--repeats`) in interleaved order and the best time is kept.

`--device cuda` runs every figure on the GPU (cuDNN's LSTMs, fp32 and bf16 autocast; the roofline on the same GPU),
adds how often `encode` makes the host wait for the GPU, and writes benchmarks/results/encoder_cuda.json.

`--implementations` measures instead whether each `lstm_implementation` earns its place: `encode` under
"reference", "unpacked" and "auto", a user's plain `model(**tokenizer(batch, padding=True))` in arrival order under
"reference" and "auto", and the original recipe; writes benchmarks/results/lstm_implementations.json.

    python scripts/benchmark.py --data-dir ../shared/data --implementations --repeats 5
"""

import os

# OpenMP reads OMP_WAIT_POLICY once, when torch loads it: PASSIVE (idle threads sleep at once) unless the caller
# sets it, for steady timings on a shared machine; "default" leaves OpenMP's own policy (docs/benchmarks.md)
if os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE").lower() == "default":
    del os.environ["OMP_WAIT_POLICY"]

import json  # noqa: E402

from modeling_cove.benchmarking.common import benchmark_arguments, parse_benchmark_args, write_report  # noqa: E402
from modeling_cove.benchmarking.encoder import (  # noqa: E402
    bench_dataset,
    bench_implementations,
    prepare_encoder_benchmark,
)


def main(argv=None):
    parser = benchmark_arguments(__doc__, "encoder.json")
    parser.add_argument("--implementations", action="store_true",
                        help="compare the lstm_implementation values instead (lstm_implementations.json)")
    args = parse_benchmark_args(parser, argv, lambda a: "lstm_implementations.json" if a.implementations
                                else "encoder.json")
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    bench = bench_implementations if args.implementations else bench_dataset
    results = {}
    for name, group in texts.items():
        results[name] = bench(group, model, tokenizer, args.batch_size, args.repeats)
        print(name, json.dumps(results[name], indent=1), flush=True)
    write_report(args.output, argv, args.quick, {"batch_size": args.batch_size, "device": str(device)}, results)


if __name__ == "__main__":
    main()
