#!/usr/bin/env python
"""Pretrain CoVe: train the attentional English->German MT model (McCann et al. 2017, §2) with Accelerate, then
export its encoder (the MT-LSTM) as a CoVe checkpoint. The library behind it: `modeling_cove.training.mt`.

The same command runs on one CPU, on N GPUs and as real 2-process DDP on CPU (gloo):

    python scripts/train_mt.py --preset cove-small --data-dir ../shared/data \
        --vectors ../shared/data/vectors/w2v-lower-300d.txt.xz --output-dir runs/cove-small
    accelerate launch --config_file configuration/accelerate/multi_gpu.yaml scripts/train_mt.py ...   # N GPUs
    accelerate launch --config_file configuration/accelerate/cpu_ddp.yaml scripts/train_mt.py ...     # 2 CPU processes
    python scripts/train_mt.py ... --output-dir runs/cove-small --resume    # continue exactly where it stopped

Training follows docs/paper.md §2: SGD lr 1.0, halved every epoch once validation perplexity has risen for the first
time, stop when lr < --min-lr (default 0.03 x lr: the paper's 0.03 at lr 1.0), or after --max-epochs, --max-steps or
--time-budget-minutes; every stop is logged with its reason and recorded as `stop_reason` in metrics.json.
Gradient-norm clip 5; batch 64 sentences (global, split over the processes); pairs longer than 75 tokens dropped;
vocabularies <= 50k per side; fixed source word vectors; loss = summed token NLL / batch size. Batches are
length-grouped with the order a function of (seed, epoch) only, so `--resume` replays it exactly.
Options outside the paper, off by default: --start-decay-at N (also halve from epoch N on, OpenNMT-py's
-start_decay_at), --time-budget-minutes, --optimizer adam (e.g. --lr 0.001; --min-lr defaults to 3e-05 then).

CoVe-S on 2 CPU cores (~60 min; the paper's schedule needs more epochs than fit, hence the earlier decay):
    python scripts/train_mt.py --preset cove-small --data-dir ../shared/data \
        --vectors ../shared/data/vectors/w2v-lower-300d.txt.xz --output-dir runs/cove-small --num-threads 2 \
        --max-epochs 10 --start-decay-at 5 --time-budget-minutes 55

Source vocabulary and vectors: `--init-from DIR` takes a CoVe checkpoint (e.g. from scripts/build_vocab.py) and uses
its tokenizer, word vectors and MT-LSTM initialisation; otherwise `--vectors FILE` builds the vocabulary from the
training source side (every word with a vector, plus words without one seen >= --source-min-freq times, at most
--max-vocab entries) with the vectors fixed. Target side: lower-cased sacremoses German tokens.

Outputs in --output-dir:
    mt/                  final MT checkpoint (AutoModelForSeq2SeqLM; source tokenizer; target_tokenizer/)
    encoder/             the trained encoder alone: a CoVe checkpoint for AutoModel/AutoTokenizer + README.md card
    checkpoints/step-N/  accelerate save_state + trainer_state.json (every epoch, and every --save-steps)
    metrics.json         data statistics, per-epoch train/val perplexity and BLEU, test BLEU, speed, stop reason
    curves.png           loss / perplexity / BLEU curves
"""

import argparse
import os
import sys

# On a shared CPU machine OpenMP threads that spin at barriers while a sibling thread is descheduled make every
# LSTM op 10-30x slower; passive waiting avoids it at no measurable cost. Must be set before torch starts OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from transformers import HfArgumentParser  # noqa: E402

from modeling_cove.training.mt import MTArguments, MTSetupError, train_mt  # noqa: E402
from modeling_cove.training.vocab import CheckpointLoadError  # noqa: E402


def build_parser() -> HfArgumentParser:
    """Flags from MTArguments' fields (`--output-dir` and `--output_dir` both work), help from their metadata."""
    return HfArgumentParser(MTArguments, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)


def main(argv=None):
    (args,) = build_parser().parse_args_into_dataclasses(args=argv, look_for_args_file=False)
    try:
        train_mt(args)
    except (MTSetupError, CheckpointLoadError) as err:  # bad settings or --init-from: one line, no traceback
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
