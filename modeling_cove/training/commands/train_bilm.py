"""biLM pretraining (docs/bilm.md): an ELMo-style `CoveForBidirectionalLM` trained on monolingual text
with Accelerate (one CPU, N GPUs, DDP), resumable exactly, then exported as a plain encoder checkpoint. Command line:
`cove-train-bilm` (also `python -m modeling_cove.training.commands.train_bilm`); from Python
`train_bilm(BiLMSettings(...))`.

    cove-train-bilm --init-from runs/vocab --data-dir DATA --output-dir runs/bilm
    accelerate launch --config_file configuration/accelerate/multi_gpu.yaml -m modeling_cove.training.commands.train_bilm ...  # GPUs
    torchrun --nproc_per_node 2 -m modeling_cove.training.commands.train_bilm ...          # 2 CPU processes (DDP over gloo)
    cove-train-bilm ... --resume                                             # continue exactly where it stopped

--init-from is a CoVe encoder checkpoint (e.g. from cove-build-vocab): its tokenizer and frozen word vectors are the
biLM's. --corpus takes local corpus names (the training splits of --data-dir DATA, a local data folder laid out as
docs/data.md describes: imdb, sst, trec, multi30k, snli, squad; all of them by default), text files (one text per
line) and `hf:<dataset id>[:<config>]` (e.g. hf:Salesforce/wikitext:wikitext-103-raw-v1, online). Outputs in
--output-dir: lm/ (the pretraining model), encoder/ (the encoder alone, for AutoModel and the heads' --encoder, with
a card), checkpoints/step-N/, metrics.json (per-epoch training and held-out perplexity of each direction, tokens/s),
curves.png.

Corpus: texts from local text files (one text per line), `datasets` ids (`hf:<id>[:<config>]`, their "train"
split) and the *training* splits of the local data (`LOCAL_CORPORA`: never a split that a results table evaluates
on). A fixed share of the texts (`heldout_fraction`, seeded) is held out for the perplexity reported every epoch.
Each text is tokenised with the encoder checkpoint's tokenizer and closed by `</s>`; the texts, concatenated, make one
token stream, cut into windows of `seq_len + 1` tokens that overlap by one (so every token but the stream's first is
a forward target once, and every token but its last a backward target once). A step reads `batch_size` windows; the
window order is a function of (seed, epoch) only, so a resumed run replays it exactly. States are not carried
between windows: downstream the encoder reads each text from a zero state, and so does it here.
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..common.cli import A_FOLDER, A_RATE, AT_LEAST_ONE, POSITIVE, REQUIRED, option, run_training_command
from ..data.texts import LOCAL_CORPORA, corpus_texts
from ..publishing.export import export_encoder
from ..loops.accelerate_loop import (
    AccelerateLoop, LoopState, StopLimits, check_run_folder, end_run, epoch_batches, make_accelerator, make_optimizer,
    rank_share, same_if_recorded, start_run_folder)
from ..common.run_info import command_line, git_commit, machine_info, plot_curves
from ..common.files import write_json

__all__ = ["BiLMPretraining", "BiLMSettings", "build_model", "direction_sums", "evaluate", "load_streams", "main",
           "perplexities", "prepare_output_dir", "split_heldout", "token_stream", "tokenize_corpora", "train_bilm",
           "WindowStore", "write_run_record"]

def split_heldout(texts: list, fraction: float, seed: int) -> tuple:
    """(training texts, held-out texts): a seeded random `fraction` of the texts (at least one) held out."""
    if not 0 < fraction < 1:
        raise ValueError(f"heldout_fraction must be in (0, 1), got {fraction!r}")
    if len(texts) < 2:
        raise ValueError(f"the corpus has {len(texts)} text(s): at least 2 are needed (training and held out)")
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    cut = max(1, round(fraction * len(texts)))
    return [texts[i] for i in sorted(order[cut:])], [texts[i] for i in sorted(order[:cut])]


def token_stream(texts: list, tokenizer, chunk: int = 2000, progress: bool = False) -> torch.Tensor:
    """All `texts` tokenised (no special tokens) and each closed by the tokenizer's `</s>`: one int64 stream."""
    from tqdm.auto import tqdm

    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no eos_token (</s>) to close each text with")
    pieces = []
    for start in tqdm(range(0, len(texts), chunk), desc="tokenizing", disable=not progress, leave=False):
        for ids in tokenizer(texts[start:start + chunk], add_special_tokens=False)["input_ids"]:
            pieces.append(torch.tensor(ids + [eos], dtype=torch.long))
    return torch.cat(pieces) if pieces else torch.zeros(0, dtype=torch.long)


class WindowStore:
    """A token stream seen as windows of `seq_len + 1` tokens at stride `seq_len` (the last partial one dropped)."""

    def __init__(self, stream: torch.Tensor, seq_len: int):
        if seq_len < 1:
            raise ValueError(f"seq_len must be >= 1, got {seq_len}")
        self.stream, self.seq_len = stream, seq_len
        self.num_windows = max(0, (len(stream) - 1) // seq_len)

    def __len__(self) -> int:
        return self.num_windows

    def batch(self, indices) -> torch.Tensor:
        """(len(indices), seq_len + 1) token ids of those windows."""
        starts = torch.as_tensor(list(indices), dtype=torch.long).unsqueeze(1) * self.seq_len
        return self.stream[starts + torch.arange(self.seq_len + 1)]


@dataclass
class BiLMSettings:
    """Every setting of a pretraining run (the flags of cove-train-bilm). `RESUME_KEYS` must not change on
    `resume`."""

    init_from: str = option("CoVe encoder checkpoint: its tokenizer and (frozen) word vectors", REQUIRED)
    output_dir: str = option("run folder: lm/, encoder/, checkpoints/, metrics.json, curves.png", REQUIRED)
    corpus: list[str] = option(f"local names ({', '.join(sorted(LOCAL_CORPORA))}), text files or "
                               "hf:<id>[:<config>]", sorted(LOCAL_CORPORA))
    data_dir: Optional[str] = option("the local data folder (for the local corpus names)", check=A_FOLDER)
    text_column: str = option("column of hf: datasets", "text")
    limit_texts: Optional[int] = option("at most this many texts per corpus (smoke tests)", check=AT_LEAST_ONE)
    heldout_fraction: float = option("share of the texts held out for the per-epoch perplexity", 0.02)
    seq_len: int = option("tokens per window (+1 overlap)", 35, check=AT_LEAST_ONE)
    batch_size: int = option("windows per step (global, over all processes)", 64, check=AT_LEAST_ONE)
    eval_batch_size: int = option("windows per held-out evaluation batch", 128, check=AT_LEAST_ONE)
    epochs: int = option("passes over the training windows", 1, check=AT_LEAST_ONE)
    max_steps: Optional[int] = option("stop after this many steps (resume with more to continue)")
    time_budget_minutes: Optional[float] = option("stop (and checkpoint) after this much training time", check=POSITIVE)
    lr: float = option("Adam learning rate", 1e-3, check=POSITIVE)
    scheduler: str = option("transformers.get_scheduler name", "linear")
    warmup_steps: int = option("learning-rate warmup steps", 0)
    grad_clip: float = option("gradient-norm clip", 5.0)
    dropout: float = option("between layers and before softmax", 0.1, check=A_RATE)
    hidden_size: Optional[int] = option("units per direction (default: the word vectors' width, what the BCN's "
                                        "scalar mix needs)")
    num_layers: int = option("LSTM layers per direction", 2, check=AT_LEAST_ONE)
    residual: bool = option("residual connection from layer 1 on (--no-residual: none)", True)
    tie_softmax: bool = option("one output layer shared by both directions (--untie-softmax: one per direction)",
                               True, negation="--untie-softmax")
    cutoffs: Optional[list[int]] = option("adaptive softmax cutoffs (default: by vocab size)")
    seed: int = option("seed of the window order, initialisation and dropout", 1234)
    save_steps: int = option("also checkpoint every N steps", 0)
    keep_checkpoints: int = option("newest checkpoints kept", 2)
    log_every: int = option("record the mean training loss every N steps", 20)
    resume: bool = option("continue from the latest checkpoint in output_dir", False)
    overwrite: bool = option("delete an existing output_dir first", False)


STREAMS_FILE, STATS_FILE = "token_streams.safetensors", "data_stats.json"
RESUME_KEYS = ("init_from", "corpus", "data_dir", "text_column", "limit_texts", "heldout_fraction", "seq_len",
               "batch_size", "epochs", "lr", "scheduler", "warmup_steps", "dropout", "hidden_size", "num_layers",
               "residual", "tie_softmax", "cutoffs", "seed")


def build_model(settings: BiLMSettings):
    """(CoveForBidirectionalLM, tokenizer): a fresh biLM over the word vectors (and char n-gram table) of
    `settings.init_from`, tokenised by its tokenizer."""
    from ...configuration_cove import CoveConfig
    from ...modeling_cove_bilm import CoveForBidirectionalLM
    from ..data.checkpoints import load_cove_checkpoint

    source, tokenizer = load_cove_checkpoint(settings.init_from)
    values = {k: v for k, v in source.config.to_dict().items() if k not in ("auto_map", "architectures")}
    values.update(encoder_type="bilm", hidden_size=settings.hidden_size or source.config.word_vector_dim,
                  num_hidden_layers=settings.num_layers, encoder_dropout=settings.dropout,
                  bilm_residual=settings.residual, bilm_tie_softmax=settings.tie_softmax,
                  bilm_softmax_cutoffs=settings.cutoffs, freeze_encoder=False, include_word_vectors=False,
                  cove_output="top", architectures=["CoveForBidirectionalLM"])
    model = CoveForBidirectionalLM(CoveConfig.from_dict(values))
    tables = {k: v for k, v in source.state_dict().items() if k.startswith(("embeddings.", "char_ngram_embeddings."))}
    model.cove.load_state_dict(tables, strict=False)
    return model, tokenizer


def load_streams(settings: BiLMSettings, tokenizer, main_process: bool) -> tuple:
    """(training WindowStore, held-out WindowStore, data statistics) of the settings' corpora, tokenised once per
    run: the streams are kept in the output folder (`STREAMS_FILE`) and read back on resume."""
    from safetensors.torch import load_file, save_file

    cache = Path(settings.output_dir) / STREAMS_FILE
    if settings.resume and cache.is_file():
        streams = load_file(cache)
        stats = json.loads((cache.parent / STATS_FILE).read_text())
        train, heldout = (WindowStore(streams[k], settings.seq_len) for k in ("train", "heldout"))
        return train, heldout, stats
    train, heldout, stats = tokenize_corpora(settings, tokenizer, progress=main_process)
    if main_process:
        save_file({"train": train.stream, "heldout": heldout.stream}, cache)
        write_json(cache.parent / STATS_FILE, stats)
    return train, heldout, stats


def tokenize_corpora(settings: BiLMSettings, tokenizer, progress: bool) -> tuple:
    """`load_streams` from the texts: read, split, tokenised."""
    texts, per_corpus = [], {}
    for source in settings.corpus:
        found = corpus_texts(source, settings.data_dir, settings.text_column)
        found = found[:settings.limit_texts] if settings.limit_texts else found
        per_corpus[source] = len(found)
        texts += found
    train_texts, heldout_texts = split_heldout(texts, settings.heldout_fraction, settings.seed)
    train = WindowStore(token_stream(train_texts, tokenizer, progress=progress), settings.seq_len)
    heldout = WindowStore(token_stream(heldout_texts, tokenizer, progress=progress), settings.seq_len)
    unk = tokenizer.unk_token_id
    stats = {"texts_per_corpus": per_corpus, "train_texts": len(train_texts), "heldout_texts": len(heldout_texts),
             "train_tokens": len(train.stream), "heldout_tokens": len(heldout.stream),
             "train_unk_rate": float((train.stream == unk).float().mean()) if len(train.stream) else None,
             "train_windows": len(train), "heldout_windows": len(heldout)}
    if len(train) < settings.batch_size or len(heldout) == 0:
        raise ValueError(f"the corpus is too small: {len(train)} training windows of {settings.seq_len + 1} tokens "
                         f"for batches of {settings.batch_size}, {len(heldout)} held-out windows")
    return train, heldout, stats


def direction_sums(out) -> torch.Tensor:
    """[forward NLL sum, backward NLL sum, forward tokens, backward tokens] of a `CoveBiLMOutput`, float64."""
    return torch.stack([out.forward_nll_sum.detach(), out.backward_nll_sum.detach(),
                        out.forward_num_tokens, out.backward_num_tokens]).double()


def perplexities(sums) -> dict:
    """Per-token NLL and perplexity of each direction from `direction_sums` pooled over batches."""
    sums = [float(x) for x in sums]
    result = {}
    for i, direction in enumerate(("forward", "backward")):
        nll = sums[i] / max(sums[i + 2], 1)
        result[f"{direction}_nll_per_token"] = nll
        result[f"{direction}_perplexity"] = math.exp(min(nll, 50.0))
    return result


@torch.no_grad()
def evaluate(model, store: WindowStore, batch_size: int, accelerator) -> dict:
    """Held-out perplexity of each direction over every window of `store`, pooled over the processes."""
    from tqdm.auto import tqdm

    model.eval()
    sums = torch.zeros(4, dtype=torch.float64, device=accelerator.device)
    batches = [list(range(i, min(i + batch_size, len(store)))) for i in range(0, len(store), batch_size)]
    for batch in tqdm(rank_share(batches, accelerator.process_index, accelerator.num_processes), desc="held-out",
                      unit="batch", leave=False, disable=not accelerator.is_local_main_process):
        ids = store.batch(batch).to(accelerator.device)
        sums += direction_sums(model(input_ids=ids, labels=ids))
    return perplexities(accelerator.reduce(sums, "sum"))


def prepare_output_dir(settings: BiLMSettings, accelerator) -> None:
    """Refuse a non-empty folder without resume/overwrite and a resume with other RESUME_KEYS; clear it with
    overwrite; record the settings (what resume compares against)."""
    # and the number of processes: each holds its own random states, and the global batch is split over them
    current = {**{k: getattr(settings, k) for k in RESUME_KEYS}, "processes": accelerator.num_processes}
    check_run_folder(settings.output_dir, current, RESUME_KEYS + ("processes",), settings.resume, settings.overwrite,
                     defaults={"processes": None}, same={"processes": same_if_recorded})
    start_run_folder(accelerator, settings.output_dir, current, settings.resume)


SEED_STRIDE = 1000003  # epoch batches: the generator seed is seed x SEED_STRIDE + epoch


class BiLMPretraining(AccelerateLoop):
    """One run on the shared loop (`accelerate_loop.AccelerateLoop`): Adam and a transformers schedule stepped every
    step, windows in an order seeded by (seed, epoch), held-out perplexity per direction after every epoch, stops at
    `epochs` / `max_steps` / the time budget (judged at every step), `finish()` exports the encoder."""

    def __init__(self, settings: BiLMSettings, accelerator, model, tokenizer, train: WindowStore,
                 heldout: WindowStore, data_stats: dict, argv, commit: str, run_started: float):
        from transformers import get_scheduler

        super().__init__(accelerator, settings.output_dir, StopLimits(settings.epochs, settings.max_steps,
                                                                      settings.time_budget_minutes),
                         settings.seed, settings.save_steps, settings.keep_checkpoints)
        self.settings, self.tokenizer = settings, tokenizer
        self.train_windows, self.heldout, self.data_stats = train, heldout, data_stats
        self.argv, self.commit, self.run_started = argv, commit, run_started
        optimizer = make_optimizer("adam", [p for p in model.parameters() if p.requires_grad], settings.lr)
        scheduler = get_scheduler(settings.scheduler, optimizer, num_warmup_steps=settings.warmup_steps,
                                  num_training_steps=settings.epochs * (len(train) // settings.batch_size))
        self.model, self.optimizer, self.scheduler = accelerator.prepare(model, optimizer, scheduler)
        self.unwrapped = accelerator.unwrap_model(self.model)
        self.start(settings.resume, LoopState(epoch_sums=self.fresh_epoch_sums()))

    def fresh_epoch_sums(self) -> list:
        return [0.0, 0.0, 0, 0]  # `direction_sums` of the epoch so far

    def epoch_batches(self, epoch: int) -> list:
        return epoch_batches(len(self.train_windows), self.settings.batch_size, self.settings.seed, epoch,
                             SEED_STRIDE)

    def train_step(self, batch: list) -> dict:
        state, settings, accelerator = self.state, self.settings, self.accelerator
        ids = self.train_windows.batch(rank_share(batch, accelerator.process_index, accelerator.num_processes))
        ids = ids.to(accelerator.device)
        out = self.model(input_ids=ids, labels=ids)
        accelerator.backward(out.loss)  # every process has as many tokens: DDP's mean is the global token mean
        accelerator.clip_grad_norm_([p for p in self.model.parameters() if p.requires_grad], settings.grad_clip)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        sums = accelerator.reduce(direction_sums(out), "sum")
        state.global_step += 1
        state.step_in_epoch += 1
        state.train_tokens += int(sums[2])
        state.epoch_sums = [a + float(b) for a, b in zip(state.epoch_sums, sums)]
        ppl = perplexities(sums)
        if state.global_step % settings.log_every == 0:
            state.loss_log.append([state.global_step, (ppl["forward_nll_per_token"] + ppl["backward_nll_per_token"])
                                   / 2, ppl["forward_perplexity"], ppl["backward_perplexity"]])
        return {"fwd_ppl": f"{ppl['forward_perplexity']:.1f}", "bwd_ppl": f"{ppl['backward_perplexity']:.1f}"}

    def evaluate(self, epoch: int, stopped: str | None, epoch_start: float) -> dict:
        """The epoch's record: training and held-out perplexity per direction."""
        state = self.state
        record = {"epoch": epoch, "global_step": state.global_step, "steps": state.step_in_epoch,
                  "complete": stopped is None, "seconds": round(time.time() - epoch_start, 1)}
        record.update({f"train_{k}": v for k, v in perplexities(state.epoch_sums).items()})
        record.update({f"heldout_{k}": v for k, v in evaluate(self.unwrapped, self.heldout,
                                                                 self.settings.eval_batch_size,
                                                                 self.accelerator).items()})
        self.accelerator.print(record)
        return record

    def write_record(self) -> dict:
        if not self.accelerator.is_main_process:
            return {}
        return write_run_record(self.state, self.settings, self.data_stats, self.run_started, self.argv,
                                self.accelerator.num_processes, self.commit)

    def finish(self) -> dict:
        """The record, the biLM (`lm/`) and its encoder exported (`encoder/`); returns the metrics (main process)."""
        accelerator, output_dir = self.accelerator, self.output_dir
        metrics = self.write_record()
        if accelerator.is_main_process:
            self.unwrapped.save_pretrained(output_dir / "lm")
            self.tokenizer.save_pretrained(output_dir / "lm")
            export_encoder(self.unwrapped, output_dir / "encoder", metrics, tokenizer=self.tokenizer)
        end_run(accelerator)
        return metrics


def write_run_record(state: LoopState, settings: BiLMSettings, data_stats: dict, started: float, argv,
                     world: int, commit: str) -> dict:
    """metrics.json and curves.png of the run so far."""
    output_dir = Path(settings.output_dir)
    payload = {
        "command": command_line(argv), "commit": commit, "settings": settings.__dict__,
        "machine": {**machine_info(), "processes": world}, "data": data_stats, "epochs": state.history,
        "global_step": state.global_step, "stop_reason": state.stop_reason,
        "train_seconds": round(state.train_seconds, 1),
        "train_tokens": state.train_tokens,
        "train_tokens_per_second": round(state.train_tokens / max(state.train_seconds, 1e-9), 1),
        "wall_seconds": round(time.time() - started, 1), "loss_log": state.loss_log,
    }
    write_json(output_dir / "metrics.json", payload)
    epochs = [h["epoch"] for h in state.history]
    panels = [
        {"title": "training loss (mean of the directions' NLL per token)", "xlabel": "step",
         "series": {"train": ([r[0] for r in state.loss_log], [r[1] for r in state.loss_log])}},
        {"title": "perplexity per direction", "xlabel": "epoch", "log_y": True,
         "series": {f"{split} {d}": (epochs, [h[f"{split}_{d}_perplexity"] for h in state.history])
                    for split in ("train", "heldout") for d in ("forward", "backward")}},
    ]
    plot_curves(panels, output_dir / "curves.png", title="biLM pretraining")
    return payload


def train_bilm(settings: BiLMSettings, argv=None, cpu: bool = False) -> dict:
    """Pretrain a biLM as `settings` say (module docstring); writes lm/, encoder/, checkpoints/, metrics.json and
    curves.png under `settings.output_dir` and returns the metrics. `cpu=True` stays off the GPU."""
    from accelerate.utils import set_seed

    run_started = time.time()
    commit = git_commit()  # the code that runs, read now: a run of an hour may outlive the checkout's HEAD
    # a batch need not reach every tail cluster of the adaptive softmax: DDP must allow unused parameters
    accelerator = make_accelerator(cpu, find_unused_parameters=True, batch_size=settings.batch_size)
    set_seed(settings.seed)
    model, tokenizer = build_model(settings)  # the same initial weights in every process
    prepare_output_dir(settings, accelerator)
    train, heldout, data_stats = load_streams(settings, tokenizer, accelerator.is_main_process)
    loop = BiLMPretraining(settings, accelerator, model, tokenizer, train, heldout, data_stats, argv, commit,
                           run_started)
    loop.train()  # the time budget counts training (and its evaluations), not the data preparation
    return loop.finish()


def main(argv=None):
    """cove-train-bilm: BiLMSettings and `cli.RunArguments` (--threads, --cpu) from the command line, then
    `train_bilm`; bad settings or data end in one line, exit status 2."""
    run_training_command(BiLMSettings, train_bilm, argv, description=__doc__)


if __name__ == "__main__":
    main()
