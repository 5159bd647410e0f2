"""Training, evaluation and publishing code of `modeling_cove`: the library behind the thin CLIs in `scripts/`.

Not part of the Hub remote code: a checkpoint ships only the model files `modeling_cove/hub.py` lists, never this
subpackage. Modules:

- `run_info`: what every run records (git commit, machine, command), the metrics JSON writer and the curve plot.
- `presets`: named YAML/JSON presets under `configuration/` and the shipped example data, found by name.
- `pretraining`: the scaffold MT and biLM pretraining share (resume state, stop reasons, batches, checkpoints, loop).
- `mt` (+ `mt_data`, `mt_schedule`, `mt_eval`, `mt_trainer`): MT pretraining — `MTArguments`, `train_mt`; data,
  the perplexity lr schedule, evaluation, the loop.
- `export`: the encoder of an MT checkpoint or of a pretraining run (MT, biLM) as a CoVe encoder checkpoint, with
  its card.
- `cards` (+ `cards_record`): the evaluation record of a trained model and the model card built from it.
- `publish`: check, stage, verify and upload a checkpoint to the Hub (`scripts/push_to_hub.py`).
- `main_job`: the main job (`cove-main`): its settings, stage runner, stages and report.
- `vocab`: CoVe checkpoints from text + word vectors (`scripts/build_vocab.py`); `ppmi`: PPMI+SVD word vectors
  (`scripts/train_ppmi_vectors.py`).
- `classifier`, `qa`, `collators`: BCN and DCN training on `Trainer` (`scripts/train_classifier.py`,
  `scripts/train_qa.py`), one `pad_batch` and the collators.
- `bilm`: ELMo-style biLM pretraining (corpus, windows, its loop on `pretraining`).
- `results`: the result tables of `benchmarks/results/` collected from `runs/` (`scripts/collect_results.py`).
"""
