"""Export the encoder of a trained CoVe MT checkpoint as a CoVe checkpoint (the "CoVe" of the paper). Command line:
`cove-export-encoder` (also `python -m modeling_cove.training.export`, `scripts/export_encoder.py`):

    cove-export-encoder --mt-checkpoint runs/cove-small/mt --output-dir runs/cove-small/encoder
    cove-export-encoder --mt-checkpoint runs/cove-small/mt --output-dir runs/cove-small-tasks \\
        --vocab-from runs/vocab          # same MT-LSTM, the (larger) vocabulary of a cove-build-vocab checkpoint


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
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from .cli import REQUIRED, fail, option, parse_options
from .run_info import write_json

CARD = """---
library_name: transformers
pipeline_tag: feature-extraction
language: en
tags:
- cove
- mt-lstm
- contextualized-word-vectors
---

# {name}: CoVe MT-LSTM encoder (draft model card)

Context vectors (CoVe, McCann et al. 2017, *Learned in Translation: Contextualized Word Vectors*): the 2-layer
bidirectional LSTM encoder (hidden {hidden} per direction, {out}-d output) of an attentional English→German
translation model, over fixed {dim}-d word vectors. Weights are frozen (`freeze_encoder=true`); downstream models
read `last_hidden_state` (CoVe(w), eq. 5) or load with `include_word_vectors=True` for `[GloVe(w); CoVe(w)]` (eq. 6).

```python
import modeling_cove  # or trust_remote_code=True without the package
from transformers import AutoModel, AutoTokenizer
enc = AutoModel.from_pretrained("{path}")
tok = AutoTokenizer.from_pretrained("{path}")
out = enc(**tok(["A man is playing a guitar ."], return_tensors="pt"))
out.last_hidden_state  # (1, T, {out})
```

## Training
- MT data: {dataset} (English→German), {pairs} training pairs after dropping pairs longer than {max_length} tokens.
- Word vectors (fixed): `{vectors}`. {vector_note}
- Tokenization: lower-cased Moses-style (source: the saved CoVe tokenizer; target: sacremoses `de`).
- Vocabulary: {vocab_size} source entries (special tokens included); the target side had {target_vocab_size}.
- Optimisation: {optimisation}; gradient-norm clip {grad_clip}; global batch {batch_size} sentences;
  dropout {dropout}; {progress}.

## Results of the MT model
{results}

## Limitations
{limitations}

## Citation
McCann, Bradbury, Xiong, Socher (2017). Learned in Translation: Contextualized Word Vectors. NeurIPS.
"""


def results_table(metrics: dict) -> str:
    if not metrics:
        return "(no metrics recorded)"
    lines = ["| epoch | lr | train ppl | val ppl | val BLEU |", "|---|---|---|---|---|"]
    for h in metrics.get("epochs", []):
        bleu = f"{h['val_bleu']:.2f}" if h.get("val_bleu") is not None else "-"
        train = f"{h['train_perplexity']:.2f}" if h.get("train_perplexity") is not None else "-"
        lines.append(f"| {h['epoch']} | {h['lr']:g} | {train} | {h['val_perplexity']:.2f} | {bleu} |")
    test = metrics.get("test")
    if test:
        lines.append("")
        lines.append(f"Test: BLEU {test['bleu']:.2f} (uncased, tokenized, as the paper reports; beam "
                     f"{test['num_beams']}), detokenized sacreBLEU {test['sacrebleu']:.2f} "
                     f"(`{test['sacrebleu_signature']}`), perplexity {test['perplexity']:.2f}.")
    return "\n".join(lines)


def optimisation_text(settings: dict) -> str:
    """The optimizer and lr schedule the run used (its resolved settings), and whether it is the paper's."""
    if not settings.get("optimizer"):
        return "not recorded"
    optimizer = {"sgd": "SGD", "adam": "Adam"}.get(settings["optimizer"], settings["optimizer"])
    decay, start = settings.get("lr_decay", "?"), settings.get("start_decay_at")
    factor = "halved" if decay == 0.5 else f"multiplied by {decay}"
    when = "after validation perplexity first rose" + (f" or from epoch {start} on" if start is not None else "")
    paper = (settings["optimizer"], settings.get("lr"), decay, start) == ("sgd", 1.0, 0.5, None)
    source = "the schedule of docs/paper.md §2" if paper else "differs from docs/paper.md §2 (SGD lr 1, halved)"
    return (f"{optimizer} lr {settings.get('lr', '?')}, {factor} each epoch {when}, stop below "
            f"{settings.get('min_lr', '?')} ({source})")


def progress_text(metrics: dict) -> str:
    """What was run: complete epochs, optimizer steps and the logged stop reason."""
    epochs = (metrics or {}).get("epochs", [])
    complete = sum(1 for e in epochs if e.get("complete", True))
    text = f"{complete} complete epoch{'s' if complete != 1 else ''}"
    if epochs:
        text += f", {epochs[-1].get('global_step', '?')} optimizer steps"
    if (metrics or {}).get("stop_reason"):
        text += f" (stopped: {metrics['stop_reason']})"
    return text


def model_card(out_dir: Path, config, metrics: dict, name: str = None) -> str:
    settings = (metrics or {}).get("settings", {})
    data = (metrics or {}).get("data", {})
    vectors = settings.get("vectors") or settings.get("init_from") or "unknown"
    stand_in = "w2v-lower" in str(vectors)
    limitations = [
        "- The encoder saw only the MT training text: quality depends on its size "
        "(Multi30k = CoVe-S, IWSLT = CoVe-M, WMT = CoVe-L in the paper).",
        "- Words without a word vector map to a zero vector, as in the paper.",
    ]
    if stand_in:
        limitations.insert(0, "- Trained with STAND-IN word2vec vectors (not GloVe 840B): not comparable to the "
                              "published CoVe; use it with the same vectors.")
    return CARD.format(
        name=name or out_dir.name, hidden=config.hidden_size, out=config.encoder_output_size, dim=config.word_vector_dim,
        path=str(out_dir), dataset=settings.get("dataset", "unknown"), pairs=data.get("train_pairs_kept", "?"),
        max_length=settings.get("max_length", "?"), vectors=vectors,
        vector_note="Stand-in word2vec vectors, NOT GloVe 840B." if stand_in else "",
        vocab_size=config.vocab_size, target_vocab_size=data.get("target_vocab_size", "?"),
        optimisation=optimisation_text(settings), grad_clip=settings.get("grad_clip", "?"),
        batch_size=settings.get("batch_size", "?"), dropout=config.decoder_dropout, progress=progress_text(metrics),
        results=results_table(metrics), limitations="\n".join(limitations),
    )


def swap_vocabulary(state: dict, config, tokenizer, vocab_from):
    """The encoder `state` over the vocabulary and vectors of the CoVe checkpoint `vocab_from` (its tokenizer and
    embedding rows, our MT-LSTM); refused when its vectors differ from the training run's on the shared words."""
    from transformers import AutoTokenizer

    from modeling_cove.modeling_cove import CoveModel

    new_tokenizer = AutoTokenizer.from_pretrained(vocab_from)
    other = CoveModel.from_pretrained(vocab_from)
    if other.config.word_vector_dim != config.word_vector_dim:
        raise ValueError(f"{vocab_from} has {other.config.word_vector_dim}-d vectors, the encoder was trained on "
                         f"{config.word_vector_dim}-d vectors")
    old_vocab, new_vocab = tokenizer.get_vocab(), new_tokenizer.get_vocab()
    shared = [w for w in old_vocab if w in new_vocab and w not in tokenizer.all_special_tokens]
    if shared:
        old_rows = state["embeddings.weight"][[old_vocab[w] for w in shared]]
        new_rows = other.embeddings.weight.detach()[[new_vocab[w] for w in shared]]
        both = (old_rows.abs().sum(1) > 0) & (new_rows.abs().sum(1) > 0)
        if both.any() and (old_rows[both] - new_rows[both]).abs().max() > 1e-4:
            raise ValueError(f"{vocab_from} was built from different word vectors than the MT training run: "
                             "the encoder only makes sense with the vectors it was trained on")
    state = {**other.state_dict(), **{k: v for k, v in state.items() if k.startswith("encoder.")}}
    config.vocab_size = other.config.vocab_size
    config.char_ngram_dim = other.config.char_ngram_dim
    return state, new_tokenizer


def check_export(folder: Path, mt, same_vocabulary: bool):
    """The export reloads through the Auto classes, is frozen, and (same vocabulary) reproduces the MT encoder."""
    from transformers import AutoModel, AutoTokenizer

    reloaded = AutoModel.from_pretrained(folder).eval()
    sample = AutoTokenizer.from_pretrained(folder)(["a man in a blue shirt is playing a guitar ."], return_tensors="pt")
    with torch.no_grad():
        got = reloaded(input_ids=sample["input_ids"], attention_mask=sample["attention_mask"]).last_hidden_state
        if same_vocabulary:
            want = mt.cove(input_ids=sample["input_ids"], attention_mask=sample["attention_mask"]).last_hidden_state
            if not torch.allclose(got, want, atol=1e-6):
                raise RuntimeError("exported encoder does not reproduce the MT model's encoder outputs")
    if not (reloaded.config.freeze_encoder and reloaded.config.freeze_embeddings) or any(
            p.requires_grad for p in reloaded.parameters()):
        raise RuntimeError("exported encoder is not frozen (freeze_encoder / freeze_embeddings)")


def export_encoder(mt_checkpoint, output_dir, metrics: dict = None, vocab_from=None, name: str = None) -> Path:
    """Write the encoder of `mt_checkpoint` as a CoVe checkpoint to `output_dir` (atomically); returns the path."""
    from transformers import AutoTokenizer

    from modeling_cove.modeling_cove import CoveModel
    from modeling_cove.modeling_cove_mt import CoveForMachineTranslation

    mt_checkpoint, output_dir = Path(mt_checkpoint), Path(output_dir)
    if not (mt_checkpoint / "config.json").is_file():
        raise FileNotFoundError(f"{mt_checkpoint} is not a checkpoint folder (no config.json)")
    mt = CoveForMachineTranslation.from_pretrained(mt_checkpoint).eval()
    tokenizer = AutoTokenizer.from_pretrained(mt_checkpoint)
    mt.check_tokenizers(source_tokenizer=tokenizer)
    state = mt.cove.state_dict()
    config = mt.config.__class__.from_dict(mt.config.to_dict())
    if vocab_from is not None:
        state, tokenizer = swap_vocabulary(state, config, tokenizer, vocab_from)
    config.freeze_encoder = True
    config.output_final_states = False  # the MT model's True: only its decoder needs them (faster path without)
    config.is_encoder_decoder = False
    config.architectures = ["CoveModel"]
    encoder = CoveModel(config)
    encoder.load_state_dict(state, strict=True)
    encoder.eval()

    tmp = output_dir.with_name(output_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    encoder.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "README.md").write_text(model_card(output_dir, config, metrics, name=name))
    if metrics:
        write_json(tmp / "mt_metrics.json", metrics)
    check_export(tmp, mt, same_vocabulary=vocab_from is None)
    if output_dir.exists():
        shutil.rmtree(output_dir)
    os.replace(tmp, output_dir)
    return output_dir


@dataclass
class ExportArguments:
    """The flags of cove-export-encoder."""

    mt_checkpoint: str = option("a CoveForMachineTranslation checkpoint (cove-train-mt's mt/)", REQUIRED)
    output_dir: str = option("the encoder checkpoint folder to write", REQUIRED)
    vocab_from: Optional[str] = option("CoVe checkpoint whose tokenizer + vectors to use instead")
    metrics: Optional[str] = option("metrics.json of the MT run (for the model card; default: the one beside "
                                    "--mt-checkpoint, if any)")
    name: Optional[str] = option("model name for the card (default: the output folder's name)")


def main(argv=None):
    """cove-export-encoder: the encoder of --mt-checkpoint as a CoVe checkpoint in --output-dir."""
    args = parse_options(ExportArguments, argv, description=__doc__)
    if not Path(args.mt_checkpoint, "config.json").exists():
        fail(f"{args.mt_checkpoint} is not a checkpoint folder (no config.json)")
    metrics_path = Path(args.metrics) if args.metrics else Path(args.mt_checkpoint).parent / "metrics.json"
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else None
    out = export_encoder(args.mt_checkpoint, args.output_dir, metrics=metrics, vocab_from=args.vocab_from,
                         name=args.name)
    print(f"exported encoder -> {out}")


if __name__ == "__main__":
    main()
