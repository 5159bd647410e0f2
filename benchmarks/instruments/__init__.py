"""The measurements behind `benchmarks/results/`: the library under the benchmark CLIs beside it in `benchmarks/`.

Not part of the Hub remote code (a checkpoint ships only the model files `modeling_cove/hub.py` lists). Speed
figures are ratios measured side by side in one process; docs/benchmarks.md says how to run each one. Modules:

- `common`: interleaved best-of-N timing, the shared command-line options and the report (command, commit, machine).
- `encoder`: `CoveModel.encode` against the raw `nn.LSTM` roofline and the original Salesforce recipe, and the
  `lstm_implementation` comparison.
- `packing`: when the encoder should pack, an A/B of its execution paths on the same batches.
- `training`: our MT and BCN training steps against a plain PyTorch loop.
- `heads`: the BCN and DCN heads (pipeline, sorted batches, training step) against a plain-PyTorch roofline of
  the same layers, under both `lstm_implementation` keys.
- `vectors_loading`: lines/s and peak memory of reading word vectors.
- `tokenizer_agreement`: the CoVe tokenizer against sacremoses on real sentences.
"""
