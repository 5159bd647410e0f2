"""Export the encoder of a trained CoVe MT checkpoint as a CoVe checkpoint (the "CoVe" of the paper). Command line:
`cove-export-encoder` (also `python -m modeling_cove.training.commands.export_encoder`):

    cove-export-encoder --mt-checkpoint runs/cove-small/mt --output-dir runs/cove-small/encoder
    cove-export-encoder --mt-checkpoint runs/cove-small/mt --output-dir runs/cove-small-tasks \\
        --vocab-from runs/vocab          # same MT-LSTM, the (larger) vocabulary of a cove-build-vocab checkpoint
    cove-export-encoder --mt-checkpoint runs/cove-t/mt --output-dir runs/cove-t/encoder-card --name cove-t \\
        --downstream runs/cove-t/downstream.json   # + the card's "Downstream results" (model_cards/README.md)

The result holds the source tokenizer, a config with `freeze_encoder=true` (and no decoder), the fixed word vectors +
MT-LSTM weights as safetensors, the code files for `trust_remote_code=True`, and a draft model card README.md that
states what the run did (optimizer, schedule, epochs and steps run, why it stopped). It loads with
`AutoModel.from_pretrained(dir)` / `AutoTokenizer.from_pretrained(dir)`; the export is checked by reloading it and
comparing its outputs with the MT model's encoder.

The MT-LSTM weights do not depend on the vocabulary, so `vocab_from` may swap in another vocabulary and vector
matrix, provided it was built from the SAME vectors file (checked on the shared words): the encoder was trained on
those vectors.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..common.cli import REQUIRED, fail, option, parse_options
from ..publishing.downstream import DownstreamError, load_downstream
from ..publishing.export import export_encoder

__all__ = ["ExportArguments", "main"]


@dataclass
class ExportArguments:
    """The flags of cove-export-encoder."""

    mt_checkpoint: str = option("a CoveForMachineTranslation checkpoint (cove-train-mt's mt/)", REQUIRED)
    output_dir: str = option("the encoder checkpoint folder to write", REQUIRED)
    vocab_from: Optional[str] = option("CoVe checkpoint whose tokenizer + vectors to use instead")
    metrics: Optional[str] = option("metrics.json of the MT run (for the model card; default: the one beside "
                                    "--mt-checkpoint, if any)")
    name: Optional[str] = option("model name for the card (default: the output folder's name)")
    downstream: Optional[str] = option("downstream results JSON (model_cards/README.md, \"Downstream results\"): "
                                       "the card gets their table, paired by seed with 95%% intervals")


def main(argv=None):
    """cove-export-encoder: the encoder of --mt-checkpoint as a CoVe checkpoint in --output-dir."""
    args = parse_options(ExportArguments, argv, description=__doc__)
    metrics_path = Path(args.metrics) if args.metrics else Path(args.mt_checkpoint).parent / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else None
    try:
        downstream = load_downstream(args.downstream) if args.downstream else None
    except DownstreamError as err:
        fail(err)
    try:
        out = export_encoder(args.mt_checkpoint, args.output_dir, metrics=metrics, vocab_from=args.vocab_from,
                             name=args.name, downstream=downstream)
    except (FileNotFoundError, ValueError, RuntimeError) as err:  # no checkpoint, not a translation model's,
        fail(err)  # vocabularies differ, or the export's own check failed
    print(f"exported encoder -> {out}")


if __name__ == "__main__":
    main()
