"""The main job in one command, `cove-main`: text data -> word vectors -> vocabulary -> pretrained CoVe (MT-LSTM) ->
BCN classifier -> learning curves -> evaluation, model card and Hub-ready folder -> loaded back and used for
predictions.

    cove-main                                       # embedded default (shipped examples), minutes on 2 CPUs
    cove-main --quick                               # the same, reduced (the test suite uses it)
    cove-main --full-curves --run-dir runs/main-full
                                                    # the learning curves with 10 seeds and 3 amounts of translation
                                                    # data (about 4 hours on 2 CPU cores)
    cove-main --preset cove-small --data-dir DATA --run-dir runs/main-cove-small
    cove-main --preset cove-small --data-dir DATA --vectors glove.840B.300d.txt --vectors-lowercase
                                                    # real GloVe 840B (cased file, looked up lower-cased)
    cove-main --tasks trec6 sst2 --data-dir DATA    # embedded CoVe, BCN on real tasks
    cove-main --preset cove-small --accelerate-config single_gpu
                                                    # pretraining via `accelerate launch` (GPU / multi-GPU)

DATA is a local data folder laid out as docs/data.md describes; without --data-dir the datasets come from the Hub.
Presets are the shipped main presets (`embedded`, `cove-small`) or a .yaml file of your own; paths you give (and
paths in a preset of your own) are relative to the current directory.

Stages, each in its own folder under --run-dir (default runs/main, in the current directory):
    1 vectors/     PPMI+SVD word vectors from the shipped training text, or a check of --vectors FILE
    2 vocab/       vocabulary + fixed word-vector matrix + a fresh MT-LSTM of the preset's size (CoVe checkpoint)
    3 pretrain/    MT pretraining from vocab/checkpoint (python -m modeling_cove.training.commands.train_mt), BLEU, encoder export
    4 classifier/  the BCN per task on the pretrained encoder (+ baseline columns; modeling_cove.training.commands.train_classifier)
    5 curves/      the same BCN on the word vectors alone and with CoVe, trained on 50, 100, 200, 600 labelled
                   sentences (paired seeds): what pretraining is for (the preset's `curves`; docs/demo.md)
    6 publish/     evaluation JSON, model card and Hub-ready folder (modeling_cove.training.commands.push_to_hub --dry-run) of
                   the column with the best validation accuracy
    7 predict/     the Hub-ready folder loaded with AutoModel and pipeline("text-classification"); predictions
Then <run-dir>/report.json (every stage's metrics), <run-dir>/curves/*.png and <run-dir>/REPORT.md (ours beside
the paper's numbers).

Restartable: a finished stage writes `<stage>/.done.json` LAST; a rerun of the same command skips it, redoes an
unfinished stage cleanly and resumes pretraining from its latest complete checkpoint. Rerunning the same --run-dir
with other settings is refused (use --overwrite).

Bad input (unknown preset or task, missing data folder, a vectors file that does not exist or does not have the
expected dimension) stops before any work with a clear message and exit code 2. A failed stage exits 1.
--threads N sets torch/OpenMP threads in every stage (each stage, importing the package, waits passively unless
OMP_WAIT_POLICY says otherwise: docs/commands.md).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

from ...common.cli import parse_options
from ...common.run_info import command_line, git_commit, machine_info
from ...common.files import write_json
from .report import collect_curves, paper_numbers, write_markdown
from .runner import StageError, StageRunner
from .settings import InputError, JobOptions, resolve
from .curves import stage_curves
from .stages import (stage_classifier, stage_predict, stage_publish, stage_pretrain, stage_vectors,
                     stage_vocab)


def settings_fingerprint(cfg: dict) -> str:
    return hashlib.sha256(json.dumps(cfg, sort_keys=True, default=str).encode()).hexdigest()[:16]


def prepare_run_dir(options: JobOptions, cfg: dict, command: str) -> Path:
    """The run folder, created; refuses (InputError) one that holds a run with other settings."""
    run_dir = Path(options.run_dir).resolve()
    if options.overwrite and run_dir.exists():
        shutil.rmtree(run_dir)
    run_file = run_dir / "run.json"
    fingerprint = settings_fingerprint(cfg)
    if run_file.exists():
        previous = json.loads(run_file.read_text())
        if previous.get("fingerprint") != fingerprint:
            raise InputError(f"{run_dir} holds a run with other settings ({previous.get('command')}); use another "
                             "--run-dir or --overwrite")
    else:
        write_json(run_file, {"fingerprint": fingerprint, "settings": cfg, "command": command})
    return run_dir


def run_main_job(options: JobOptions, command: str | None = None) -> dict:
    """Run (or continue) the main job; returns the report (also `<run-dir>/report.json` and `REPORT.md`). `command`
    is the command line the report records (default: this process's). Raises InputError on bad input (before any
    work) and StageError when a stage fails."""
    cfg = resolve(options)
    command = command or command_line()
    run_dir = prepare_run_dir(options, cfg, command)
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    if options.threads:
        import torch

        torch.set_num_threads(options.threads)
    report_path = run_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    report.update({"preset": cfg["preset"], "quick": cfg["quick"], "run_dir": str(run_dir), "command": command,
                   "git": git_commit(), "machine": machine_info(), "settings": cfg, "paper": paper_numbers(cfg),
                   "options": asdict(options)})
    report.setdefault("stages", {})
    job_start = time.time()
    run_stages(cfg, StageRunner(run_dir, report), options.threads)
    report["curves"] = collect_curves(run_dir, report)
    report["wall_seconds_this_invocation"] = round(time.time() - job_start, 1)
    write_json(report_path, report)
    write_markdown(run_dir, report, cfg)
    print(f"\nreport: {report_path}\nsummary: {run_dir / 'REPORT.md'}", flush=True)
    return report


def run_stages(cfg: dict, do: StageRunner, threads):
    results = do.results
    do("vectors", f"check {cfg['vectors_file']}" if cfg["vectors_file"] else
       f"PPMI {cfg['dim']}-d vectors from the shipped text (modeling_cove.training.commands.train_ppmi_vectors)",
       lambda f: stage_vectors(cfg, f))
    do("vocab", "vocabulary, word-vector matrix, fresh MT-LSTM", lambda f: stage_vocab(cfg, f, results["vectors"]))
    do("pretrain", "MT pretraining of the CoVe encoder (modeling_cove.training.commands.train_mt)",
       lambda f: stage_pretrain(cfg, f, threads))
    do("classifier", "BCN on " + ", ".join(t["name"] for t in cfg["tasks"]) + " (modeling_cove.training.commands.train_classifier)",
       lambda f: stage_classifier(cfg, f, threads))
    do("curves", "learning curves: vectors vs vectors + CoVe by labelled sentences"
       + (" and translation pairs (--full-curves)" if cfg["full_curves"] else ""),
       lambda f: stage_curves(cfg, f, threads, results, cfg["full_curves"]))
    do("publish", f"evaluation JSON, model card, Hub-ready folder for {cfg['repo_id']} (dry run)",
       lambda f: stage_publish(cfg, f, threads, results["classifier"]))
    do("predict", "load the Hub-ready folder with AutoModel / pipeline and predict",
       lambda f: stage_predict(cfg, f, results["publish"], threads))


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    """`cove-main` (also `python -m modeling_cove.training.commands.main_job`, `scripts/main.py`): exit 2 on bad input, 1 when a
    stage failed; SIGTERM stops the running stage subprocesses too."""
    argv = sys.argv[1:] if argv is None else list(argv)
    options = parse_options(JobOptions, argv, description=__doc__)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        run_main_job(options, command=command_line([sys.argv[0], *argv]))
    except InputError as e:
        print(f"{Path(sys.argv[0]).name}: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    except StageError as e:
        print(f"{Path(sys.argv[0]).name}: stage failed: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
