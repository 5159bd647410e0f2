"""The main job (`cove-main`): text data -> word vectors -> vocabulary -> pretrained CoVe (MT-LSTM) -> BCN classifier
-> learning curves (vectors vs vectors + CoVe by labelled sentences) -> evaluation, model card and Hub-ready folder ->
loaded back and used for predictions.

    from modeling_cove.training.commands.main_job import JobOptions, run_main_job
    report = run_main_job(JobOptions(preset="embedded", run_dir="runs/main"))

Its modules, along the job's seams:
- `settings`: the user's options (`JobOptions`, the flags of `cove-main`) and the preset, checked before any work;
- `runner`: the stage folders (skip what finished, redo what did not) and the stage subprocesses;
- `stages`: the stages — vectors, vocab (in-process), pretrain, classifier, publish (the package's own command
  lines, each `python -m modeling_cove.training.commands.<command>` in its own interpreter: thread settings, no state leaking
  between stages, killable alone, printed before it runs as the command a user would type), predict;
- `curves`: the learning-curve stage (its BCN runs in worker processes, `curve_worker`), what pretraining is for;
- `report`: `report.json`'s curves and paper numbers, and `REPORT.md`;
- `job`: the run folder, the stages in order (`run_stages`), `run_main_job` and the command line `main`.

Restartable: a finished stage writes `<stage>/.done.json` LAST; a rerun skips it. A stage that did not finish is
redone cleanly (outputs go to `<name>.tmp`, renamed on success); pretraining resumes from its latest complete
checkpoint (`--resume`). The settings of a run are kept in `run.json`; rerunning the same run folder with other
settings is refused (InputError) unless `overwrite`.
"""

from .job import main, run_main_job
from .runner import STAGES, Command, StageError
from .settings import CLASSIFICATION_TASKS, InputError, JobOptions

__all__ = ["CLASSIFICATION_TASKS", "STAGES", "Command", "InputError", "JobOptions", "StageError", "main",
           "run_main_job"]
