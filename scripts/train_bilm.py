#!/usr/bin/env python
"""Pretrain an ELMo-style biLM encoder on monolingual text (docs/bilm.md), then export the encoder.

    python scripts/train_bilm.py --init-from runs/vocab --data-dir ../shared/data --output-dir runs/bilm
    accelerate launch --config_file configuration/accelerate/multi_gpu.yaml scripts/train_bilm.py ...   # N GPUs
    torchrun --nproc_per_node 2 scripts/train_bilm.py ...                    # 2 CPU processes (DDP over gloo)
    python scripts/train_bilm.py ... --resume                                 # continue exactly where it stopped

--init-from is a CoVe encoder checkpoint (e.g. from scripts/build_vocab.py): its tokenizer and frozen word vectors
are the biLM's. --corpus takes local corpus names (the training splits of --data-dir: imdb, sst, trec, multi30k,
snli, squad; all of them by default), text files (one text per line) and `hf:<dataset id>[:<config>]` (e.g.
hf:Salesforce/wikitext:wikitext-103-raw-v1, online). Outputs in --output-dir: lm/ (the pretraining model),
encoder/ (the encoder alone, for AutoModel and the heads' --encoder, with a card), checkpoints/step-N/,
metrics.json (per-epoch training and held-out perplexity of each direction, tokens/s), curves.png.
"""

import argparse
import os

# Passive OpenMP waiting: spinning threads slow every LSTM op on a shared CPU (docs/lstm_kernels.md). Set before
# torch starts OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

from modeling_cove.training.bilm import LOCAL_CORPORA, BiLMSettings, train_bilm  # noqa: E402


def parse_args(argv=None):
    defaults = BiLMSettings(init_from="", output_dir="")
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init-from", required=True, help="CoVe encoder checkpoint: tokenizer and word vectors")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--corpus", nargs="+", default=defaults.corpus,
                        help=f"local names ({', '.join(sorted(LOCAL_CORPORA))}), text files or hf:<id>[:<config>]")
    parser.add_argument("--data-dir", help="the local data folder (for the local corpus names)")
    parser.add_argument("--text-column", default=defaults.text_column, help="column of hf: datasets")
    parser.add_argument("--limit-texts", type=int, help="at most this many texts per corpus (smoke tests)")
    parser.add_argument("--heldout-fraction", type=float, default=defaults.heldout_fraction)
    parser.add_argument("--seq-len", type=int, default=defaults.seq_len, help="tokens per window (+1 overlap)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size, help="windows per step (global)")
    parser.add_argument("--eval-batch-size", type=int, default=defaults.eval_batch_size)
    parser.add_argument("--epochs", type=int, default=defaults.epochs)
    parser.add_argument("--max-steps", type=int, help="stop after this many steps (resume with more to continue)")
    parser.add_argument("--time-budget-minutes", type=float, help="stop (and checkpoint) after this much training time")
    parser.add_argument("--lr", type=float, default=defaults.lr, help="Adam learning rate")
    parser.add_argument("--scheduler", default=defaults.scheduler, help="transformers.get_scheduler name")
    parser.add_argument("--warmup-steps", type=int, default=defaults.warmup_steps)
    parser.add_argument("--grad-clip", type=float, default=defaults.grad_clip)
    parser.add_argument("--dropout", type=float, default=defaults.dropout, help="between layers and before softmax")
    parser.add_argument("--hidden-size", type=int, help="units per direction (default: the word vectors' width)")
    parser.add_argument("--num-layers", type=int, default=defaults.num_layers)
    parser.add_argument("--no-residual", action="store_true", help="no residual connection from layer 1 on")
    parser.add_argument("--untie-softmax", action="store_true", help="one output layer per direction")
    parser.add_argument("--cutoffs", type=int, nargs="+", help="adaptive softmax cutoffs (default: by vocab size)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--save-steps", type=int, default=0, help="also checkpoint every N steps")
    parser.add_argument("--keep-checkpoints", type=int, default=defaults.keep_checkpoints)
    parser.add_argument("--log-every", type=int, default=defaults.log_every)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--num-threads", type=int, help="torch intra-op threads")
    parser.add_argument("--cpu", action="store_true", help="stay on the CPU even with a GPU")
    return parser.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    if args.num_threads:
        torch.set_num_threads(args.num_threads)
    settings = BiLMSettings(
        init_from=args.init_from, output_dir=args.output_dir, corpus=args.corpus, data_dir=args.data_dir,
        text_column=args.text_column, limit_texts=args.limit_texts, heldout_fraction=args.heldout_fraction,
        seq_len=args.seq_len, batch_size=args.batch_size, eval_batch_size=args.eval_batch_size, epochs=args.epochs,
        max_steps=args.max_steps, time_budget_minutes=args.time_budget_minutes, lr=args.lr, scheduler=args.scheduler,
        warmup_steps=args.warmup_steps, grad_clip=args.grad_clip, dropout=args.dropout, hidden_size=args.hidden_size,
        num_layers=args.num_layers, residual=not args.no_residual, tie_softmax=not args.untie_softmax,
        cutoffs=args.cutoffs, seed=args.seed, save_steps=args.save_steps, keep_checkpoints=args.keep_checkpoints,
        log_every=args.log_every, resume=args.resume, overwrite=args.overwrite)
    try:
        train_bilm(settings, argv=None if argv is None else ["scripts/train_bilm.py", *argv], cpu=args.cpu)
    except ValueError as error:  # bad settings or data: one line, no traceback
        raise SystemExit(f"error: {error}")


if __name__ == "__main__":
    main()
