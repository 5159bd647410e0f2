"""Training, evaluation and publishing code of `modeling_cove`: the library behind the console entry points (`cove-*`,
`docs/commands.md`); each CLI's `main()` lives in the module it drives, on the one argument system of `cli`.

Not part of the Hub remote code: a checkpoint ships only the model files `modeling_cove/hub.py` lists, never this
subpackage. Modules:

- `cli`: the one argument system (options dataclasses through `HfArgumentParser`, usage errors exit 2).
- `run_info`: what every run records (git commit, machine, command), the metrics JSON writer and the curve plot.
- `presets`: named YAML/JSON presets under `configuration/` and the shipped example data, found by name.
- `pretraining`: the scaffold MT and biLM pretraining share (resume state, stop reasons, batches, checkpoints, loop).
- `mt` (+ `mt_data`, `mt_schedule`, `mt_eval`, `mt_trainer`): MT pretraining — `MTArguments`, `train_mt`; data,
  the perplexity lr schedule, evaluation, the loop.
- `export`: the encoder of an MT checkpoint or of a pretraining run (MT, biLM) as a CoVe encoder checkpoint, with
  its card.
- `cards` (+ `cards_record`): the evaluation record of a trained model and the model card built from it.
- `publish`: check, stage, verify and upload a checkpoint to the Hub (`cove-push-to-hub`).
- `main_job`: the main job (`cove-main`): its settings, stage runner, stages and report.
- `vocab`: CoVe checkpoints from text + word vectors (`cove-build-vocab`); `ppmi`: PPMI+SVD word vectors
  (`cove-train-ppmi-vectors`).
- `classifier`, `qa`, `collators`: BCN and DCN training on `Trainer` (`cove-train-classifier`,
  `cove-train-qa`), one `pad_batch` and the collators.
- `bilm`: ELMo-style biLM pretraining (corpus, windows, its loop on `pretraining`; `cove-train-bilm`).
- `convert`: the original Salesforce MT-LSTM weights as a CoVe checkpoint (`cove-convert-salesforce`).
"""
