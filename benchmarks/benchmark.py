#!/usr/bin/env python
"""Speed figures of the CoVe encoder, measured side by side in one process (ratios are what count; absolute
numbers move with the machine and its load). Writes benchmarks/results/encoder.json.

    python benchmarks/benchmark.py --data-dir DATA            # full run (~5-10 min on 2 cores)
    python benchmarks/benchmark.py --data-dir DATA --quick    # smoke run (~1 min)

DATA: a local data folder laid out as docs/data.md describes (default: $COVE_DATA_DIR). OpenMP threads wait
passively unless OMP_WAIT_POLICY says otherwise (`OMP_WAIT_POLICY=default`: OpenMP's own policy; docs/commands.md).

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

    python benchmarks/benchmark.py --data-dir DATA --implementations --repeats 5
"""

import json
from dataclasses import dataclass

from instruments.common import EncoderBenchmarkArguments, write_report
from instruments.encoder import bench_dataset, bench_implementations, prepare_encoder_benchmark
from modeling_cove.training.common.cli import option, parse_options


@dataclass
class EncoderArguments(EncoderBenchmarkArguments):
    """The flags of benchmark.py."""

    implementations: bool = option("compare the lstm_implementation values instead (lstm_implementations.json)",
                                   False)

    def output_name(self) -> str:
        return "lstm_implementations.json" if self.implementations else "encoder.json"


def main(argv=None):
    args = parse_options(EncoderArguments, argv, description=__doc__)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    bench = bench_implementations if args.implementations else bench_dataset
    results = {}
    for name, group in texts.items():
        results[name] = bench(group, model, tokenizer, args.batch_size, args.repeats)
        print(name, json.dumps(results[name], indent=1), flush=True)
    write_report(args.output, argv, args.quick, {"batch_size": args.batch_size, "device": str(device)}, results)


if __name__ == "__main__":
    main()
