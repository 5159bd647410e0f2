#!/usr/bin/env python
"""The main job in one command: text data -> word vectors -> vocabulary -> pretrained CoVe (MT-LSTM) -> BCN
classifier -> evaluation, model card and Hub-ready folder -> loaded back and used for predictions.

    python scripts/main.py                                   # embedded default (examples/), a few minutes on 2 CPUs
    python scripts/main.py --quick                           # the same, reduced (the test suite uses it)
    python scripts/main.py --preset cove-small --data-dir ../shared/data --run-dir runs/main-cove-small
    python scripts/main.py --preset cove-small --data-dir ../shared/data --vectors glove.840B.300d.txt \\
        --vectors-lowercase                                  # real GloVe 840B (cased file, looked up lower-cased)
    python scripts/main.py --tasks trec6 sst2 --data-dir ../shared/data   # embedded CoVe, BCN on real tasks
    python scripts/main.py --preset cove-small --accelerate-config configuration/accelerate/single_gpu.yaml
                                                             # pretraining via `accelerate launch` (GPU / multi-GPU)

Presets are configuration/main/<name>.yaml (`embedded`, `cove-small`) or a path to such a file.

Stages, each in its own folder under --run-dir (default runs/main); the library behind them is
modeling_cove.training.pipeline:
    1 vectors/     PPMI+SVD word vectors from the shipped training text, or a check of --vectors FILE
    2 vocab/       vocabulary + fixed word-vector matrix + a fresh MT-LSTM of the preset's size (CoVe checkpoint)
    3 pretrain/    scripts/train_mt.py --init-from vocab/checkpoint: MT pretraining, BLEU, encoder export
    4 classifier/  scripts/train_classifier.py per task: BCN on the pretrained encoder (+ baseline columns)
    5 publish/     evaluation JSON, model card and Hub-ready folder (scripts/push_to_hub.py --dry-run) of the
                   column with the best validation accuracy
    6 predict/     the Hub-ready folder loaded with AutoModel and pipeline("text-classification"); predictions
Then <run-dir>/report.json (every stage's metrics), <run-dir>/curves/*.png and <run-dir>/REPORT.md (ours beside
the paper's numbers).

Restartable: a finished stage writes `<stage>/.done.json` LAST; a rerun of the same command skips it, redoes an
unfinished stage cleanly and resumes pretraining from its latest complete checkpoint. Rerunning the same --run-dir
with other settings is refused (use --overwrite).

Bad input (unknown preset or task, missing data folder, a vectors file that does not exist or does not have the
expected dimension) stops before any work with a clear message and exit code 2. A failed stage exits 1.
--threads N sets torch/OpenMP threads in every stage (OMP_WAIT_POLICY=PASSIVE is set for shared machines).
"""

import argparse
import signal
import sys

from modeling_cove.training.pipeline import CLASSIFICATION_TASKS, InputError, JobOptions, StageError, run_main_job


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--preset", default="embedded",
                   help="configuration/main/<name>.yaml (embedded, cove-small) or a yaml path (default: embedded)")
    p.add_argument("--run-dir", default="runs/main", help="where every stage writes (default: runs/main)")
    p.add_argument("--data-dir", default=None,
                   help="local data folder laid out like ../shared/data (real tasks); default: Hub dataset ids")
    p.add_argument("--vectors", default=None, help="word vectors file (GloVe/word2vec text, .txt/.gz/.xz) "
                   "instead of the preset's (e.g. glove.840B.300d.txt)")
    p.add_argument("--vectors-lowercase", action="store_true",
                   help="look words up lower-cased in a cased vectors file (GloVe 840B)")
    p.add_argument("--tasks", nargs="+", default=None,
                   help=f"classification tasks instead of the preset's: {', '.join(CLASSIFICATION_TASKS)} "
                        "(need --data-dir or the Hub) or a folder with train/validation/test.tsv (text, label)")
    p.add_argument("--repo-id", default=None, help="Hub repo id for the card / dry-run folder (default: preset's)")
    p.add_argument("--quick", action="store_true", help="reduced sizes (preset's quick_args): a smoke run")
    p.add_argument("--threads", type=int, default=None, help="torch/OpenMP threads per stage")
    p.add_argument("--accelerate-config", default=None,
                   help="run pretraining with `accelerate launch --config_file FILE` (GPU, multi-GPU, DDP)")
    p.add_argument("--overwrite", action="store_true", help="delete --run-dir first")
    return p.parse_args(argv)


def _terminate(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    options = JobOptions(**vars(parse_args(argv)), argv=argv)
    signal.signal(signal.SIGTERM, _terminate)  # `kill JOB` also stops the running stage subprocesses
    try:
        run_main_job(options)
    except InputError as e:
        print(f"main.py: error: {e}", file=sys.stderr, flush=True)
        sys.exit(2)
    except StageError as e:
        print(f"main.py: stage failed: {e}", file=sys.stderr, flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
