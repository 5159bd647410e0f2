"""Training-loop overhead: our MT training (`modeling_cove.training.commands.train_mt`, Accelerate) and BCN training
(`modeling_cove.training.commands.train_classifier`, `transformers.Trainer`) against a plain PyTorch loop of the same model on the same
batches, in one process. Random weights (a checkpoint built from the data's own vocabulary): speed does not depend on
them. Each side runs `repeats` times, interleaved; the best run is kept. Overhead = 1 - ours / plain."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from .common import synchronize
from .encoder import random_cove_model

MT_PRESET = "cove-small"


@dataclass
class TrainingBenchmark:
    """What `bench_mt`, `bench_bcn` and `bench_mt_epoch` run: data folder, device ("cpu" or "cuda"), CPU threads,
    repeats (default 1 with `quick`, else 2), MT steps and pairs (5 on 400 with `quick`, else 30 on 4,000), BCN
    steps (default 5 with `quick`, 200 on a GPU, 40 on CPU), and whether to time the Trainer variants."""

    data_dir: str
    device: str = "cpu"
    threads: int = 2
    quick: bool = False
    repeats: Optional[int] = None
    bcn_steps: Optional[int] = None
    trainer_variants: bool = False

    def __post_init__(self):
        self.repeats = self.repeats or (1 if self.quick else 2)
        self.mt_steps, self.mt_train_pairs = (5, 400) if self.quick else (30, 4000)
        # BCN steps take ~40 ms on a GPU against ~0.7 s on 2 CPU cores: more of them there, for a stable ratio
        self.bcn_steps = self.bcn_steps or (5 if self.quick else 200 if self.device.startswith("cuda") else 40)


def to_device(value, device):
    """A collated batch value on `device`: tensors moved; dicts (a collator's batch, a BatchEncoding), tuples and
    lists moved item by item."""
    if isinstance(value, Mapping):
        return {key: to_device(v, device) for key, v in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value.to(device) if isinstance(value, torch.Tensor) else value


def save_random_checkpoint(words: list, out_dir: Path) -> Path:
    """`random_cove_model`'s CoVe checkpoint over `words` (random vectors and MT-LSTM), saved to `out_dir`."""
    model, tokenizer = random_cove_model(words)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


def source_words(texts) -> list:
    from modeling_cove.tokenization_cove import moses_tokenize

    return sorted({t for text in texts for t in moses_tokenize(text, lowercase=True)})


# ---------------------------------------------------------------------------------------------------------------
# MT
# ---------------------------------------------------------------------------------------------------------------


def mt_arguments(bench: TrainingBenchmark, encoder_dir: Path, out: Path, **overrides):
    """The MT run timed: the cove-small preset, Adam at 1e-3, no BLEU / test / export, loss logged never."""
    from modeling_cove.training.commands.train_mt import MTArguments

    return MTArguments(output_dir=str(out), preset=MT_PRESET, data_dir=bench.data_dir, init_from=str(encoder_dir),
                       overwrite=True, num_threads=bench.threads, optimizer="adam", lr=0.001, limit_eval=32,
                       no_bleu=True, no_test=True, no_export=True, log_every=1_000_000, cpu=bench.device == "cpu",
                       **overrides)


def bench_mt_epoch(bench: TrainingBenchmark, work: Path) -> dict:
    """One whole Multi30k epoch of MT training (every training pair, the real preset; with `quick` the first pairs
    only), timed by the trainer itself."""
    from modeling_cove.data import load_translation
    from modeling_cove.training.commands.train_mt import train_mt

    raw = load_translation(bench.data_dir, "multi30k")["train"]
    if bench.quick:
        raw = raw.select(range(bench.mt_train_pairs))
    encoder_dir = save_random_checkpoint(source_words(raw["src"]), work / "mt-epoch-encoder")
    metrics = train_mt(mt_arguments(bench, encoder_dir, work / "mt-epoch", max_epochs=1, limit_train=len(raw)))
    return {"what": f"one epoch of MT training, {MT_PRESET} preset, {len(raw):,} Multi30k pairs, Adam, batch 64",
            "train_seconds": metrics["train_seconds"], "target_tokens": metrics["data"]["train_target_tokens"],
            "target_tokens_per_s": metrics["train_target_tokens_per_second"]}


def mt_plain_loop(bench: TrainingBenchmark, mt_dir: Path, raw, steps: int):
    """A plain loop (collate -> forward -> backward -> clip -> step) over the first `steps` epoch batches the MT
    trainer takes (same pairs, length filter, `epoch_batches`), as a function to time; it returns its figures."""
    from transformers import AutoTokenizer

    from modeling_cove.modeling_cove_mt import CoveForMachineTranslation, load_target_tokenizer
    from modeling_cove.training.commands.train_mt import load_model_preset, resolve_mt_settings
    from modeling_cove.training.data.translation import TokenStore, collate, encode_split, tokenize_batch
    from modeling_cove.training.loops.accelerate_loop import make_optimizer
    from modeling_cove.training.loops.mt import mt_epoch_batches

    settings = resolve_mt_settings(mt_arguments(bench, mt_dir, mt_dir), load_model_preset(MT_PRESET))
    source_tokenizer, target_tokenizer = AutoTokenizer.from_pretrained(mt_dir), load_target_tokenizer(str(mt_dir))
    config = CoveForMachineTranslation.from_pretrained(mt_dir).config
    encoded = encode_split(raw.map(tokenize_batch, batched=True, fn_kwargs={"lowercase": True}),
                           source_tokenizer.get_vocab(), target_tokenizer.get_vocab(), config.eos_token_id,
                           config.unk_token_id)
    max_len = settings["max_length"]
    store = TokenStore(encoded.filter(lambda r: 0 < len(r["src_tokens"]) <= max_len
                                      and 0 < len(r["tgt_tokens"]) <= max_len))
    batches = mt_epoch_batches(store, settings, 1)[:steps]

    def run() -> dict:
        torch.manual_seed(settings["seed"])
        model = CoveForMachineTranslation.from_pretrained(mt_dir).to(bench.device).train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = make_optimizer("adam", trainable, 1e-3)  # the loop's own: the comparison is the loop's overhead
        tokens = 0
        synchronize()
        start = time.perf_counter()
        for batch in batches:
            out = model(**collate(store.rows(batch), config.pad_token_id, bench.device))
            (out.nll_sum / len(batch)).backward()
            torch.nn.utils.clip_grad_norm_(trainable, settings["grad_clip"])
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tokens += int(out.num_tokens)
        synchronize()
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "target_tokens": tokens, "tokens_per_s": tokens / seconds}

    return run


def bench_mt(bench: TrainingBenchmark, work: Path) -> dict:
    """MT training steps: our Accelerate trainer (target tokens/s as it reports them: the sum of its step times)
    against the plain loop on the same batches."""
    from modeling_cove.data import load_translation
    from modeling_cove.training.commands.train_mt import train_mt

    raw = load_translation(bench.data_dir, "multi30k")["train"].select(range(bench.mt_train_pairs))
    encoder_dir = save_random_checkpoint(source_words(raw["src"]), work / "mt-encoder")
    steps = bench.mt_steps

    def ours(run: int) -> dict:
        out = work / f"mt-ours-{run}"
        metrics = train_mt(mt_arguments(bench, encoder_dir, out, limit_train=bench.mt_train_pairs, max_steps=steps))
        return {"seconds": metrics["train_seconds"], "target_tokens": metrics["data"]["train_target_tokens"],
                "tokens_per_s": metrics["train_target_tokens_per_second"]}

    runs = {"ours": [ours(0)]}
    plain = mt_plain_loop(bench, work / "mt-ours-0" / "mt", raw, steps)  # the first run's MT checkpoint
    runs["plain"] = [plain()]
    for repeat in range(1, bench.repeats):
        runs["ours"].append(ours(repeat))
        runs["plain"].append(plain())
    best = {k: max(r["tokens_per_s"] for r in v) for k, v in runs.items()}
    return {
        "what": f"CoVe-S MT model ({MT_PRESET} preset: 2x600 decoder LSTM, attention), Adam, batch 64 pairs, "
                f"{steps} steps on the first {bench.mt_train_pairs} Multi30k pairs, random weights",
        "steps": steps,
        "target_tokens_per_s": {"ours_train_mt_accelerate": round(best["ours"], 1),
                                "plain_loop": round(best["plain"], 1)},
        "all_runs_tokens_per_s": {k: [round(r["tokens_per_s"], 1) for r in v] for k, v in runs.items()},
        "ratio_ours_to_plain": round(best["ours"] / best["plain"], 3),
        "overhead": round(1 - best["ours"] / best["plain"], 3),
    }


# ---------------------------------------------------------------------------------------------------------------
# BCN
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class BCNSetup:
    """The BCN benchmark's shared inputs: the random encoder, labels, hyperparameters, the tokenized TREC-6 training
    split with its feature-cache columns and the collator that reads the cached CoVe states."""

    encoder_dir: Path
    labels: list
    hp: dict
    train: object
    collator: object
    trainable_parameters: int


def bcn_setup(bench: TrainingBenchmark, work: Path) -> BCNSetup:
    from transformers import AutoTokenizer

    from modeling_cove.data import load_classification
    from modeling_cove.feature_cache import compute_features
    from modeling_cove.training.commands.train_classifier import build_model, load_hyperparameters, tokenize_splits
    from modeling_cove.training.data.collators import BCNCollator

    raw = load_classification("trec6", bench.data_dir)
    encoder_dir = save_random_checkpoint(source_words(t for split in raw.values() for t in split["text"]),
                                         work / "bcn-encoder")
    hp = load_hyperparameters("trec6")
    labels = raw["train"].features["label"].names
    splits, _ = tokenize_splits({"train": raw["train"]}, AutoTokenizer.from_pretrained(encoder_dir))
    train = splits["train"]
    template = build_model(encoder_dir, "vectors+cove", labels, hp, seed=1)
    store = compute_features(template, train, hp["feature_batch_size"])
    train = train.add_column("feature_store", [0] * len(train)).add_column("feature_row", list(range(len(train))))
    collator = BCNCollator(pad_token_id=template.config.pad_token_id, layer_indices=list(template.layer_indices),
                           num_states=template.config.num_hidden_layers + 1,
                           layer_width=template.config.encoder_output_size, stores=[store])
    trainable = sum(p.numel() for p in template.parameters() if p.requires_grad)
    return BCNSetup(encoder_dir, labels, hp, train, collator, trainable)


def bcn_trainer_run(bench: TrainingBenchmark, setup: BCNSetup, work: Path, sampling: str, **overrides) -> dict:
    """The Trainer as BCN training builds it (no evaluation or saving during the timed steps); `overrides`: one
    TrainingArguments field changed (the Trainer variants)."""
    from modeling_cove.training.commands.train_classifier import build_model, build_trainer, make_training_arguments

    model = build_model(setup.encoder_dir, "vectors+cove", setup.labels, setup.hp, seed=1)
    targs = make_training_arguments(work / f"bcn-trainer-{sampling}", setup.hp, seed=1, max_steps=bench.bcn_steps,
                                    sampling=sampling, evaluate_during_training=False, logging_steps=10,
                                    use_cpu=bench.device == "cpu")
    targs.save_strategy = "no"
    targs.disable_tqdm = True
    for name, value in overrides.items():
        setattr(targs, name, value)
    seconds = build_trainer(model, targs, setup.train, None, setup.collator).train().metrics["train_runtime"]
    return {"seconds": seconds, "examples_per_s": bench.bcn_steps * setup.hp["batch_size"] / seconds}


def bcn_plain_run(bench: TrainingBenchmark, setup: BCNSetup) -> dict:
    """A plain loop: DataLoader with the same collator, the same fused AdamW, clipping, as many epochs as the steps
    need (like the Trainer's max_steps)."""
    from modeling_cove.training.commands.train_classifier import build_model

    model = build_model(setup.encoder_dir, "vectors+cove", setup.labels, setup.hp, seed=1).to(bench.device).train()
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=setup.hp["learning_rate"], weight_decay=0.0, fused=True)
    loader = torch.utils.data.DataLoader(setup.train, batch_size=setup.hp["batch_size"], shuffle=True,
                                         collate_fn=setup.collator, generator=torch.Generator().manual_seed(1))
    synchronize()
    start = time.perf_counter()
    step = 0
    while step < bench.bcn_steps:
        for batch in loader:
            loss = model(**{k: to_device(v, bench.device) for k, v in batch.items()}).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, setup.hp["max_grad_norm"])
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            if step == bench.bcn_steps:
                break
    synchronize()
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "examples_per_s": bench.bcn_steps * setup.hp["batch_size"] / seconds}


def bench_bcn(bench: TrainingBenchmark, work: Path) -> dict:
    """BCN training steps on TREC-6: the Trainer (random and length-grouped sampling) against the plain loop; with
    `trainer_variants`, also the Trainer with one of its per-step costs turned the other way (pinned batches; the
    NaN/Inf loss filter, which reads the loss back from the device at every step)."""
    setup = bcn_setup(bench, work)
    variants = {}
    if bench.trainer_variants:  # each of the two switched from what the command's TrainingArguments hold
        from modeling_cove.training.commands.train_classifier import make_training_arguments

        command_args = make_training_arguments(work / "bcn-defaults", setup.hp, seed=1, use_cpu=bench.device == "cpu")
        variants = {f"trainer_{name}_{value}".lower(): {name: value}
                    for name, value in (("dataloader_pin_memory", not command_args.dataloader_pin_memory),
                                        ("logging_nan_inf_filter", not command_args.logging_nan_inf_filter))}
    runs = {"trainer_random": [], "plain_random": [], "trainer_group_by_length": [], **{k: [] for k in variants}}
    for _ in range(bench.repeats):
        runs["trainer_random"].append(bcn_trainer_run(bench, setup, work, "random"))
        runs["plain_random"].append(bcn_plain_run(bench, setup))
        runs["trainer_group_by_length"].append(bcn_trainer_run(bench, setup, work, "group_by_length"))
        for name, overrides in variants.items():
            runs[name].append(bcn_trainer_run(bench, setup, work, "random", **overrides))
    best = {k: max(r["examples_per_s"] for r in v) for k, v in runs.items()}
    return {
        "what": f"BCN on TREC-6 (vectors + CoVe from the feature cache), batch {setup.hp['batch_size']}, "
                f"{bench.bcn_steps} steps, {setup.trainable_parameters:,} trainable parameters",
        "steps": bench.bcn_steps,
        "examples_per_s": {k: round(v, 1) for k, v in best.items()},
        "all_runs_examples_per_s": {k: [round(r["examples_per_s"], 1) for r in v] for k, v in runs.items()},
        "ratio_trainer_to_plain": round(best["trainer_random"] / best["plain_random"], 3),
        "overhead": round(1 - best["trainer_random"] / best["plain_random"], 3),
        "ratio_group_by_length_to_random": round(best["trainer_group_by_length"] / best["trainer_random"], 3),
        **{f"ratio_{name}_to_trainer_random": round(best[name] / best["trainer_random"], 3) for name in variants},
    }
