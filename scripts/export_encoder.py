#!/usr/bin/env python
"""Export the encoder of a trained CoVe MT checkpoint as a CoVe checkpoint (the "CoVe" of the paper).

    python scripts/export_encoder.py --mt-checkpoint runs/cove-small/mt --output-dir runs/cove-small/encoder
    python scripts/export_encoder.py --mt-checkpoint runs/cove-small/mt --output-dir runs/cove-small-tasks \
        --vocab-from runs/vocab          # same MT-LSTM, the (larger) vocabulary of a build_vocab.py checkpoint

The result holds the source tokenizer, a config with `freeze_encoder=true` (and no decoder), the fixed word
vectors + MT-LSTM weights as safetensors, the flat code files for `trust_remote_code=True`, and a draft model card
README.md. It loads with `AutoModel.from_pretrained(dir)` / `AutoTokenizer.from_pretrained(dir)`; the export is
checked by reloading it and comparing its outputs with the MT model's encoder.

The MT-LSTM weights do not depend on the vocabulary, so `--vocab-from` may swap in another vocabulary and vector
matrix, provided it was built from the SAME vectors file (checked on the shared words): the encoder was trained on
those vectors. The library behind it: `modeling_cove.training.export`.
"""

import argparse
import json
import sys
from pathlib import Path

from modeling_cove.training.export import export_encoder


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mt-checkpoint", required=True, help="a CoveForMachineTranslation checkpoint (train_mt's mt/)")
    p.add_argument("--output-dir", required=True)
    p.add_argument("--vocab-from", default=None, help="CoVe checkpoint whose tokenizer + vectors to use instead")
    p.add_argument("--metrics", default=None, help="metrics.json of the MT run (for the model card)")
    p.add_argument("--name", default=None, help="model name for the card (default: the output folder's name)")
    args = p.parse_args(argv)
    if not Path(args.mt_checkpoint, "config.json").exists():
        sys.exit(f"error: {args.mt_checkpoint} is not a checkpoint folder (no config.json)")
    metrics_path = Path(args.metrics) if args.metrics else Path(args.mt_checkpoint).parent / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else None
    out = export_encoder(args.mt_checkpoint, args.output_dir, metrics=metrics, vocab_from=args.vocab_from,
                         name=args.name)
    print(f"exported encoder -> {out}")


if __name__ == "__main__":
    main()
