#!/usr/bin/env python
"""Train the DCN question-answering head (CoveForQuestionAnswering) on SQuAD v1.1 with the HF Trainer, evaluate
EM/F1 on held-out questions beside a sliding-window word-overlap baseline, and save a pipeline-ready checkpoint
(the library: `modeling_cove.training.qa`).

    # stand-in vectors only (the MT-LSTM is not run); CPU-sized DCN (l = 100, pool 8), 50 minutes of training
    python scripts/train_qa.py --checkpoint runs/cove-s-squad --data-dir ../shared/data --dcn-input vectors \
        --model-override dcn_hidden_size=100 dcn_pool_size=8 --output-dir runs/dcn-squad-vectors
    # vectors + CoVe-S (same checkpoint, so the same vocabulary and vectors)
    python scripts/train_qa.py --checkpoint runs/cove-s-squad --data-dir ../shared/data --dcn-input vectors+cove \
        --model-override dcn_hidden_size=100 dcn_pool_size=8 --output-dir runs/dcn-squad-cove-s
    # smoke run
    python scripts/train_qa.py --checkpoint runs/vocab-squad --data-dir ../shared/data --output-dir /tmp/qa \
        --limit-train 64 --limit-eval 32 --max-steps 3 --model-override dcn_hidden_size=20 dcn_pool_size=4
    # several processes (DDP through the Trainer; --batch-size stays the global batch)
    accelerate launch --config_file configuration/accelerate/cpu_ddp.yaml --num_processes 2 scripts/train_qa.py ...

`--checkpoint` is a CoVe checkpoint (tokenizer + word vectors + MT-LSTM), e.g. from scripts/build_vocab.py
(`--tasks squad`) or scripts/export_encoder.py (`--vocab-from`, a trained MT-LSTM with a SQuAD vocabulary).
Hyperparameters come from `--task-config` (configuration/tasks/squad.yaml) and the DCN sizes from `--model-preset`
(configuration/models/dcn-squad.json); command-line flags override both.

Data: `modeling_cove.data.load_squad(--data-dir)`. Locally only SQuAD dev exists: it is split by article (~80/20,
fixed seed, in data.py), train on the first part, evaluate on the held-out articles. Without --data-dir the Hub
`rajpurkar/squad` train/validation splits are used.

The encoder is frozen: with CoVe inputs the MT-LSTM features of every distinct question and context window are
computed once (modeling_cove/feature_cache.py; kept on disk too with --cache-dir) and reused by every epoch
(`--no-cache` runs the MT-LSTM in every step instead).
Training stops after `epochs`, `--max-steps` or `--time-budget-minutes`, whichever comes first; metrics.json says
which (`stop_reason`).

Outputs in --output-dir: `model/` (checkpoint + tokenizer; loads with
`pipeline("question-answering", model=..., trust_remote_code=True)`), `eval_results.json` (the model card's input),
`predictions.json`, `metrics.json` (command, commit, data and preprocessing counts, per-epoch history, final EM/F1,
baseline EM/F1, timings, stop reason), `curves.png` (loss and F1).
"""

import argparse
import os
import sys

# Must precede the first `import torch`: OpenMP threads that spin at barriers slow every op on shared cores.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from modeling_cove.training.presets import PresetError  # noqa: E402
from modeling_cove.training.qa import (  # noqa: E402
    DCN_INPUTS,
    DEFAULT_MODEL_PRESET,
    DEFAULT_TASK_CONFIG,
    QAConfigError,
    QAOptions,
    train_qa,
)
from modeling_cove.training.run_info import command_line  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--checkpoint", required=True, help="CoVe checkpoint directory (tokenizer + vectors + MT-LSTM)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--data-dir", default=None, help="local data folder like ../shared/data (default: Hub ids)")
    p.add_argument("--task-config", default=DEFAULT_TASK_CONFIG, help="YAML with training hyperparameters")
    p.add_argument("--model-preset", default=DEFAULT_MODEL_PRESET, help="JSON with CoveConfig DCN fields")
    p.add_argument("--dcn-input", choices=DCN_INPUTS, default=None,
                   help="what the DCN reads per token (overrides the preset)")
    p.add_argument("--model-override", nargs="*", default=[], metavar="KEY=VALUE",
                   help="further CoveConfig overrides, e.g. dcn_hidden_size=100 (values parsed as JSON)")
    p.add_argument("--epochs", type=float, default=None)
    p.add_argument("--batch-size", type=int, default=None,
                   help="the global batch (a multiple of the number of processes)")
    p.add_argument("--learning-rate", type=float, default=None)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many optimizer steps")
    p.add_argument("--time-budget-minutes", type=float, default=None, help="stop training after this long")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--limit-train", type=int, default=None, help="use only the first N training questions")
    p.add_argument("--limit-eval", type=int, default=None, help="use only the first N held-out questions")
    p.add_argument("--no-cache", action="store_true", help="run the frozen MT-LSTM in every step (slow)")
    p.add_argument("--cache-dir", default=None,
                   help="also keep the CoVe features on disk here (safetensors, keyed by the encoder weights, the "
                        "layers and the token ids) for later runs; default: in memory only")
    p.add_argument("--cache-dtype", choices=["float32", "float16"], default="float32",
                   help="storage type of the cached CoVe features (float16 halves the memory)")
    p.add_argument("--no-baseline", action="store_true", help="skip the sliding-window baseline")
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument("--overwrite", action="store_true")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    argv = sys.argv[1:] if argv is None else list(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return train_qa(QAOptions.from_namespace(args), command=command_line([__file__, *argv]))
    except (FileExistsError, QAConfigError, PresetError) as err:  # a bad input, named; nothing was trained
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
