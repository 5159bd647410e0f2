"""The encoder of a trained CoVe MT checkpoint, or of a pretraining run (MT, biLM), as a CoVe encoder checkpoint
(the "CoVe" of the paper), with its draft card: `export_encoder`, used by both pretraining loops and by the
`cove-export-encoder` command (`training/commands/export_encoder.py`, whose help shows its use).

The result holds the source tokenizer, a config with `freeze_encoder=true` (and no decoder), the fixed word vectors +
MT-LSTM weights as safetensors and the code files for `trust_remote_code=True`, and a draft model card README.md; the
export is checked by reloading it and comparing its outputs with the MT model's encoder. The MT-LSTM weights do not
depend on the vocabulary, so `vocab_from` may swap in another vocabulary and vector matrix, provided it was built from
the SAME vectors file (checked on the shared words): the encoder was trained on those vectors.
"""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import torch

from ...tokenization_cove import check_tokenizer_matches

from .cards import encoder_export_card
from .cards_record import read_config
from .downstream import load_downstream, validate_downstream
from ..common.files import commit_tmp, fresh_tmp, write_json

__all__ = ["check_export", "encoder_config", "export_encoder", "load_mt_checkpoint", "swap_vocabulary"]


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
    # the vocabulary's own: its size, n-gram table, fingerprint and casing (what a tokenizer is checked against)
    for field in ("vocab_size", "char_ngram_dim", "vocabulary_fingerprint", "lowercase"):
        setattr(config, field, getattr(other.config, field))
    return state, new_tokenizer


def check_export(folder: Path, model, same_vocabulary: bool):
    """The export reloads through the Auto classes, is frozen, and (same vocabulary) reproduces `model`'s encoder."""
    from transformers import AutoModel, AutoTokenizer

    reloaded = AutoModel.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    check_tokenizer_matches(reloaded.config, tokenizer)  # the export's tokenizer is the one its checks accept
    sample = tokenizer(["a man in a blue shirt is playing a guitar ."], return_tensors="pt")
    with torch.no_grad():
        got = reloaded(input_ids=sample["input_ids"], attention_mask=sample["attention_mask"]).last_hidden_state
        if same_vocabulary:  # compared on the CPU, as the export reloads (a GPU's kernels round differently)
            cove = model.cove if model.device.type == "cpu" else copy.deepcopy(model.cove).cpu()
            want = cove(input_ids=sample["input_ids"], attention_mask=sample["attention_mask"]).last_hidden_state
            if not torch.allclose(got, want, atol=1e-6):
                raise RuntimeError("exported encoder does not reproduce the trained model's encoder outputs")
    if not (reloaded.config.freeze_encoder and reloaded.config.freeze_embeddings) or any(
            p.requires_grad for p in reloaded.parameters()):
        raise RuntimeError("exported encoder is not frozen (freeze_encoder / freeze_embeddings)")


EXPORT_METRICS_FILES = {"mt": "mt_metrics.json", "bilm": "bilm_metrics.json"}  # the run's record, beside the export


def load_mt_checkpoint(mt_checkpoint) -> tuple:
    """(CoveForMachineTranslation, source tokenizer) of an MT checkpoint folder, their vocabularies checked."""
    from transformers import AutoTokenizer

    from modeling_cove.modeling_cove_mt import CoveForMachineTranslation

    mt_checkpoint = Path(mt_checkpoint)
    if not (mt_checkpoint / "config.json").is_file():
        raise FileNotFoundError(f"{mt_checkpoint} is not a checkpoint folder (no config.json)")
    architectures = read_config(mt_checkpoint).get("architectures") or []
    if "CoveForMachineTranslation" not in architectures:
        raise ValueError(f"{mt_checkpoint} is not a translation checkpoint (its architectures: {architectures}): give "
                         "the folder cove-train-mt saved, whose encoder is exported")
    mt = CoveForMachineTranslation.from_pretrained(mt_checkpoint).eval()
    tokenizer = AutoTokenizer.from_pretrained(mt_checkpoint)
    mt.check_tokenizers(source_tokenizer=tokenizer)
    return mt, tokenizer


def encoder_config(model):
    """The config of the frozen `CoveModel` that holds `model.cove` (an MT model's or a biLM's)."""
    if model.config.encoder_type == "bilm":
        values = {k: v for k, v in model.config.to_dict().items() if k not in ("auto_map", "architectures")}
        config = model.config.__class__.from_dict(values)
    else:
        config = model.config.__class__.from_dict(model.config.to_dict())
        config.output_final_states = False  # the MT model's True: only its decoder needs them (faster path without)
        config.is_encoder_decoder = False
    config.freeze_encoder = config.freeze_embeddings = True  # CoVe as the heads read it: fixed (a run may train both)
    config.architectures = ["CoveModel"]
    return config


def export_encoder(source, output_dir, metrics: dict = None, vocab_from=None, name: str = None,
                   tokenizer=None, downstream=None) -> Path:
    """Write the encoder of a pretraining run as a frozen CoVe checkpoint (`AutoModel`, the heads' `--encoder`) to
    `output_dir`, atomically; returns the path. `source` is an MT checkpoint folder, or a trained model holding the
    encoder as `.cove` (`CoveForMachineTranslation`, `CoveForBidirectionalLM`) with its `tokenizer`. Beside the
    weights: the tokenizer, the draft card (README.md) and the run's `metrics` (`EXPORT_METRICS_FILES`, which say
    what the encoder is to the heads' evaluation records). `downstream`, downstream results (a dict or the path of
    their JSON, `publishing.downstream`), adds the card's "Downstream results"; they are checked before anything is
    written (DownstreamError). The export is reloaded and checked against `source`."""
    from modeling_cove.modeling_cove import CoveModel

    if isinstance(downstream, (str, Path)):
        downstream = load_downstream(downstream)
    elif downstream is not None:
        validate_downstream(downstream)
    if isinstance(source, (str, Path)):
        model, tokenizer = load_mt_checkpoint(source)
    elif tokenizer is None:
        raise ValueError("export_encoder: a model given as `source` needs its `tokenizer`")
    else:
        model = source.eval()  # its encoder's outputs are compared with the export's
    objective = "bilm" if model.config.encoder_type == "bilm" else "mt"
    output_dir = Path(output_dir)
    state = model.cove.state_dict()
    config = encoder_config(model)
    if vocab_from is not None:
        state, tokenizer = swap_vocabulary(state, config, tokenizer, vocab_from)
    encoder = CoveModel(config)
    encoder.load_state_dict(state, strict=True)
    encoder.eval()

    tmp = fresh_tmp(output_dir)
    encoder.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    encoder_export_card(objective, config, metrics, path=output_dir, name=name,
                        downstream=downstream).save(tmp / "README.md")
    if metrics:
        write_json(tmp / EXPORT_METRICS_FILES[objective], metrics)
    try:
        check_export(tmp, model, same_vocabulary=vocab_from is None)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)  # nothing half-checked is left beside the output
        raise
    return commit_tmp(tmp, output_dir)
