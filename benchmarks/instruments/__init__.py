"""How we measure ourselves: the library under the benchmark and table scripts beside it in `benchmarks/`. Not
installed: the scripts run from a checkout with the package installed (`pip install -e .`) and take from the package
only its public names (an `__all__` entry listed in docs/api.md; `tests/test_layout.py` checks it). Speed figures are
ratios measured side by side in one process; docs/benchmarks.md says how to run each one. Modules:

- `common`: interleaved best-of-N timing, the shared command-line options and the report (command, commit, machine).
- `encoder`: `CoveModel.encode` against the raw `nn.LSTM` roofline and the original Salesforce recipe, and the
  `lstm_implementation` comparison.
- `packing`: when the encoder should pack, an A/B of its execution paths on the same batches.
- `training`: our MT and BCN training steps against a plain PyTorch loop.
- `heads`: the BCN, DCN and tagger heads (pipeline, sorted batches, training step) against a plain-PyTorch roofline
  of the same layers, under both `lstm_implementation` keys.
- `vectors_loading`: lines/s and peak memory of reading word vectors.
- `tokenizer_agreement`: the CoVe tokenizer against sacremoses on real sentences.
- `results`: the classification table (classification.json) collected from the runs' folders.
- `tagging`, `tagging_table`: the tagging table (tagging.json) collected from the runs' folders, and the planner
  that runs its missing cells.
"""

# The package first: it sets OMP_WAIT_POLICY (PASSIVE unless the caller set it) before anything loads torch, whose
# OpenMP reads the variable once; every benchmark script imports this package before torch (docs/benchmarks.md).
import modeling_cove  # noqa: E402,F401
