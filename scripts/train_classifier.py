#!/usr/bin/env python
"""Train the BCN (`CoveForSequenceClassification`, docs/paper.md §3) on a classification task with
`transformers.Trainer` (the library: `modeling_cove.training.classifier`).

Tasks: sst2 (phrase-level train), sst5, trec6, trec50, imdb (first 200 words), snli (pairs; only dev/test exist
locally: train on 90% of dev, validate on the other 10%, test on test — see modeling_cove/data.py), tsv (your own
{train,validation,test}.tsv in --data-dir). Hyperparameters come from configuration/tasks/<task>.yaml; the encoder
(word vectors + MT-LSTM) is frozen.

Columns of the CoVe paper's Table 2 (`--bcn-input`):
    random        randomly initialised word vectors, trained with the BCN (N(0, s), s = std of the real vectors;
                  `--freeze-random-embeddings` keeps them fixed); no MT-LSTM
    vectors       the checkpoint's word vectors (GloVe or the stand-in vectors), frozen; no MT-LSTM
    vectors+cove  eq. 6: [vectors; CoVe] — the CoVe column for the encoder given with --encoder
    cove, scalar_mix   CoVe only / ELMo-style scalar mix over {[g; g], layer 1, layer 2} (docs/paper.md §6)
    vectors+scalar_mix   ELMo's [x; ELMo_task]: the vectors, then that mix (for a biLM encoder: docs/bilm.md)

Because the encoder is frozen, the MT-LSTM states of every split are computed ONCE and cached on disk under
--cache-dir (modeling_cove/feature_cache.py), keyed by the encoder weights, the layers used and the token ids. The
best checkpoint by validation accuracy is evaluated on test (accuracy, macro-F1) and saved with the tokenizer to
<output-dir>/best (loads with `pipeline("text-classification", model=<output-dir>/best)`), beside
<output-dir>/eval_results.json (the model card's input). <output-dir>/metrics.json holds the command, commit,
hyperparameters, why training stopped, per-epoch wall time and validation curve, test figures; curve.png the curves.

Several processes (DDP through the Trainer; --batch-size stays the global batch):
    accelerate launch --config_file configuration/accelerate/cpu_ddp.yaml --num_processes 2 \\
        scripts/train_classifier.py --task trec6 --encoder runs/cove-s ...

Examples:
    python scripts/train_classifier.py --task trec6 --encoder runs/cove-s --bcn-input vectors+cove --seed 1 \\
        --data-dir ../shared/data --output-dir runs/bcn/trec6/vectors+cove-seed1
    python scripts/train_classifier.py --task trec6 --encoder runs/vocab --bcn-input vectors+cove \\
        --data-dir ../shared/data --limit 200 --max-steps 5 --output-dir /tmp/bcn-smoke     # smoke run
"""

import argparse
import os
import sys

# Must precede the first `import torch` (OpenMP reads it once). On a CPU shared with other processes, OpenMP threads
# that spin-wait at every barrier made each parallel op wait for a scheduler slice: measured here with 2 threads on 2
# busy cores, one BCN forward of a 230-token text took 18.8 s with active waiting and 0.15 s with passive waiting.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from modeling_cove.training.classifier import COLUMNS, TASKS, ClassifierOptions, train_classifier  # noqa: E402
from modeling_cove.training.presets import PresetError  # noqa: E402
from modeling_cove.training.run_info import REPO, command_line  # noqa: E402


def count(text: str) -> int:
    """argparse type of the --max-*-examples counts: a usage error (exit 2) before any work for 0 or less."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def fraction(text: str) -> float:
    """argparse type of --train-fraction: a usage error (exit 2) before any work outside (0, 1]."""
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in (0, 1], got {value}")
    return value


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", required=True, choices=TASKS,
                   help="tsv: --data-dir is a folder with {train,validation,test}.tsv (columns text, label)")
    p.add_argument("--encoder", required=True, help="CoVe checkpoint dir (tokenizer + word vectors + MT-LSTM)")
    p.add_argument("--bcn-input", default="vectors+cove", choices=COLUMNS, help="Table 2 column (see above)")
    p.add_argument("--data-dir", default=os.environ.get("COVE_DATA_DIR"),
                   help="local data folder laid out like shared/data (default: $COVE_DATA_DIR, else Hub ids)")
    p.add_argument("--output-dir", default=None, help="default: runs/bcn/<task>/<bcn-input>-seed<seed>")
    p.add_argument("--config", default=None, help="task yaml (default: configuration/tasks/<task>.yaml)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--epochs", type=float, default=None, help="override the yaml")
    p.add_argument("--batch-size", type=int, default=None,
                   help="override the yaml; the global batch (a multiple of the number of processes)")
    p.add_argument("--learning-rate", type=float, default=None, help="override the yaml")
    p.add_argument("--dropout", type=float, default=None, help="override the yaml")
    p.add_argument("--sampling", choices=["group_by_length", "random"], default=None, help="override the yaml")
    p.add_argument("--max-steps", type=int, default=-1, help="stop after N optimizer steps (smoke runs)")
    p.add_argument("--limit", type=int, default=None, help="use only the first N examples of each split (smoke)")
    p.add_argument("--max-train-examples", type=count, default=None,
                   help="train on a random N of the training split (a CPU-budget run: IMDb); the same examples for "
                        "every column and seed (a fixed seed), recorded in metrics.json and the eval JSON")
    p.add_argument("--train-fraction", type=fraction, default=None,
                   help="train on this fraction (0-1] of the training split, a random subset as --max-train-examples "
                        "(a smaller fraction's examples are part of a larger one's): the sample-efficiency curve")
    p.add_argument("--max-eval-examples", type=count, default=None,
                   help="validate and test on a random N of each of those splits (as --max-train-examples)")
    p.add_argument("--cache-dir", default=str(REPO / "runs" / "cove-features"), help="CoVe feature cache")
    p.add_argument("--no-feature-cache", action="store_true", help="run the MT-LSTM every step instead")
    p.add_argument("--max-cache-gb", type=float, default=4.0,
                   help="skip the feature cache when all splits' states would exceed this size (IMDb: ~30 GB); "
                        "the MT-LSTM then runs inside every step (on CPU it is <10%% of a BCN training step)")
    p.add_argument("--freeze-random-embeddings", action="store_true", help="random column: keep vectors fixed")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--keep-checkpoints", action="store_true", help="keep the Trainer's checkpoint folders")
    p.add_argument("--no-save-model", action="store_true", help="do not write <output-dir>/best")
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.train_fraction is not None and args.max_train_examples is not None:
        sys.exit("error: give --train-fraction or --max-train-examples, not both")
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return train_classifier(ClassifierOptions.from_namespace(args), command=command_line([__file__, *argv]))
    except (FileExistsError, FileNotFoundError, PresetError) as err:  # a bad input, named; nothing was trained
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
