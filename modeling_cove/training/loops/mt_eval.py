"""Evaluation of the MT model during pretraining: teacher-forced perplexity, translation (greedy or beam) and BLEU,
each sharded over the Accelerate processes."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import torch

from ..data.translation import TokenStore, collate
from .accelerate_loop import rank_share

__all__ = ["compute_bleu", "decode_split", "evaluate_perplexity", "parameters_sha256"]

BLEU_METRIC_PATH = Path(__file__).resolve().parents[2] / "metrics" / "sacrebleu_cove"


def _length_sorted_batches(store: TokenStore, size: int) -> list:
    """Batches of the split's non-empty sources, shortest first (less padding)."""
    order = [int(i) for i in np.argsort(store.src_lengths, kind="stable") if store.src_lengths[i] > 0]
    return [order[i : i + size] for i in range(0, len(order), size)]


@torch.no_grad()
def evaluate_perplexity(model, store: TokenStore, batch_size: int, accelerator, pad_id: int) -> dict:
    """Teacher-forced per-token NLL and perplexity of a split (sharded over the processes, summed)."""
    model.eval()
    nll = torch.zeros((), dtype=torch.float64, device=accelerator.device)
    tokens = torch.zeros((), dtype=torch.float64, device=accelerator.device)
    for batch in rank_share(_length_sorted_batches(store, batch_size), accelerator.process_index,
                            accelerator.num_processes):
        out = model(**collate(store.rows(batch), pad_id, accelerator.device))
        nll += out.nll_sum.double()
        tokens += out.num_tokens.double()
    nll, tokens = accelerator.reduce(nll, "sum"), accelerator.reduce(tokens, "sum")
    per_token = float(nll / tokens.clamp(min=1))
    return {"nll_per_token": per_token, "perplexity": math.exp(min(per_token, 50.0)), "tokens": int(tokens)}


def _words(ids: list, config, target_tokens: list) -> list:
    """Generated ids (after <s>) up to </s> as target tokens."""
    words = []
    for token_id in ids[1:]:  # ids[0] is <s>
        if token_id == config.eos_token_id:
            break
        if token_id not in (config.pad_token_id, config.bos_token_id):
            words.append(target_tokens[token_id])
    return words


@torch.no_grad()
def decode_split(model, store: TokenStore, batch_size: int, accelerator, target_tokens: list, num_beams: int,
                 desc: str) -> list:
    """Translate every source of a split (greedy or beam); returns target token lists in the split's order.
    Empty sources translate to an empty hypothesis."""
    from accelerate.utils import gather_object
    from tqdm.auto import tqdm

    model.eval()
    config = model.config
    batches = _length_sorted_batches(store, max(1, batch_size // max(num_beams, 1)))
    mine = rank_share(batches, accelerator.process_index, accelerator.num_processes)
    results = []
    for batch in tqdm(mine, desc=desc, disable=not accelerator.is_local_main_process, leave=False):
        enc = collate(store.rows(batch), config.pad_token_id, accelerator.device)
        max_src = int(enc["attention_mask"].sum(1).max())
        out = model.generate(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], num_beams=num_beams,
            max_new_tokens=min(config.max_source_length + 1, 2 * max_src + 10), do_sample=False,
        )
        results += [(index, _words(ids, config, target_tokens)) for index, ids in zip(batch, out.tolist())]
    gathered = gather_object(results) if accelerator.num_processes > 1 else results
    hyps = [[] for _ in range(len(store))]
    for index, words in gathered:
        hyps[index] = words
    return hyps


def compute_bleu(hyps: list, refs: list) -> dict:
    """Uncased tokenized BLEU (the paper's) and detokenized sacreBLEU, from the package's own `evaluate` module."""
    import evaluate  # imported here: it takes seconds

    metric = evaluate.load(str(BLEU_METRIC_PATH))
    return metric.compute(predictions=[" ".join(h) for h in hyps], references=[" ".join(r) for r in refs])


def parameters_sha256(model) -> str:
    """Fingerprint of all weights (to check that DDP replicas are identical)."""
    digest = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()
