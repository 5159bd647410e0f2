"""Training, evaluation and publishing code of `modeling_cove`: the library behind the thin CLIs in `scripts/`.

Not part of the Hub remote code: a checkpoint ships only the model files `modeling_cove/hub.py` lists, never this
subpackage. Modules:

- `run_info`: what every run records (git commit, machine, command), the metrics JSON writer and the curve plot.
- `presets`: named YAML/JSON presets under `configuration/`.
- `results`: the result tables of `benchmarks/results/` collected from `runs/` (`scripts/collect_results.py`).
"""
