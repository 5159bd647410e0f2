#!/usr/bin/env python
"""Training-loop overhead: our training scripts vs a plain PyTorch loop of the same model on the same batches, in
one process (ratios are what count). Writes benchmarks/results/training.json.

    python scripts/benchmark_training.py --data-dir ../shared/data            # ~6 min on 2 idle cores
    python scripts/benchmark_training.py --data-dir ../shared/data --quick    # smoke run (~1 min)

- MT (issue 7 item 4): `scripts/train_mt.py` (Accelerate; the cove-small preset, Adam) for N steps on Multi30k,
  target tokens/s as the script reports it (the sum of its step times: collate, forward, backward, clipping,
  optimizer, the cross-process loss reduction and bookkeeping), vs a plain loop (collate -> forward -> backward ->
  clip -> step) over the same epoch batches (`train_mt.epoch_batches`, length-grouped), timed as a whole.
- BCN: `transformers.Trainer` as `scripts/train_classifier.py` builds it (TREC-6, vectors + CoVe from the feature
  cache, no evaluation or saving during the timed steps) vs a plain loop (DataLoader with the same collator, the
  same fused AdamW, clipping) — examples/s; and the Trainer with length-grouped sampling (`group_by_length`).
- `--trainer-variants`: also the Trainer with one setting of `train_classifier.make_training_arguments` switched
  (pinned DataLoader batches; the NaN/Inf loss filter, which reads the loss back at every step).
- `--mt-epoch`: also one whole Multi30k training epoch of `train_mt.py` (cove-small preset, all 29k pairs),
  its wall time and target tokens/s.
The models hold random weights (a checkpoint built from the data's own vocabulary): speed does not depend on them.
Each side runs `--repeats` times, interleaved; the best time is kept. Overhead = 1 - ours / plain.

`--device cuda` runs both sides on the GPU (1-GPU Accelerate / Trainer overhead) and writes training_cuda.json:

    python scripts/benchmark_training.py --data-dir ../shared/data --device cuda --mt-epoch
"""

import json
import os

import wait_policy  # noqa: F401, I001  (before torch: PASSIVE unless OMP_WAIT_POLICY says otherwise)
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "scripts"))

from benchmark import benchmark_arguments, make_model, resolve_device, synchronize, write_report  # noqa: E402


def to_device(value, device):
    """A collated batch value on `device`: tensors moved, tuples / lists of tensors moved item by item."""
    if isinstance(value, (tuple, list)):
        return type(value)(to_device(v, device) for v in value)
    return value.to(device) if isinstance(value, torch.Tensor) else value


def random_checkpoint(words: list, out_dir: Path) -> Path:
    """benchmark.make_model's CoVe checkpoint over `words` (random vectors and MT-LSTM), saved to `out_dir`."""
    model, tokenizer = make_model(words)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir


# ---------------------------------------------------------------------------------------------------------------
# MT
# ---------------------------------------------------------------------------------------------------------------


def mt_arguments(args, encoder_dir: Path, out: Path) -> list:
    """train_mt.py's command line for the timed runs (cove-small preset, Adam, no BLEU / test / export)."""
    return ["--preset", str(REPO / "configuration/models/cove-small.json"), "--data-dir", args.data_dir,
            "--init-from", str(encoder_dir), "--output-dir", str(out), "--overwrite",
            "--num-threads", str(args.threads), "--optimizer", "adam", "--lr", "0.001", "--limit-eval", "32",
            "--no-bleu", "--no-test", "--no-export", "--log-every", "1000000"
            ] + (["--cpu"] if args.device == "cpu" else [])


def bench_mt_epoch(args, work: Path) -> dict:
    """One whole Multi30k epoch of train_mt.py (every training pair, the real preset), timed by the script."""
    import train_mt
    from modeling_cove.data import load_translation
    from modeling_cove.tokenization_cove import moses_tokenize

    raw = load_translation(args.data_dir, "multi30k")["train"]
    if args.quick:  # smoke run: an epoch of the first pairs only
        raw = raw.select(range(args.mt_train_pairs))
    words = sorted({t for text in raw["src"] for t in moses_tokenize(text, lowercase=True)})
    out = work / "mt-epoch"
    train_mt.main(mt_arguments(args, random_checkpoint(words, work / "mt-epoch-encoder"), out)
                  + ["--max-epochs", "1", "--limit-train", str(len(raw))])
    metrics = json.loads((out / "metrics.json").read_text())
    return {"what": f"one epoch of train_mt.py, cove-small preset, {len(raw):,} Multi30k pairs, Adam, batch 64",
            "train_seconds": metrics["train_seconds"], "target_tokens": metrics["data"]["train_target_tokens"],
            "target_tokens_per_s": metrics["train_target_tokens_per_second"]}


def bench_mt(args, work: Path) -> dict:
    import train_mt
    from modeling_cove.data import load_translation
    from modeling_cove.modeling_cove_mt import CoveForMachineTranslation, load_target_tokenizer
    from modeling_cove.tokenization_cove import moses_tokenize
    from transformers import AutoTokenizer

    raw = load_translation(args.data_dir, "multi30k")["train"].select(range(args.mt_train_pairs))
    words = sorted({t for text in raw["src"] for t in moses_tokenize(text, lowercase=True)})
    encoder_dir = random_checkpoint(words, work / "mt-encoder")
    steps = args.mt_steps

    def ours(run: int) -> dict:
        out = work / f"mt-ours-{run}"
        argv = mt_arguments(args, encoder_dir, out) + ["--limit-train", str(args.mt_train_pairs),
                                                       "--max-steps", str(steps)]
        train_mt.main(argv)
        metrics = json.loads((out / "metrics.json").read_text())
        return {"seconds": metrics["train_seconds"], "target_tokens": metrics["data"]["train_target_tokens"],
                "tokens_per_s": metrics["train_target_tokens_per_second"], "mt_dir": out / "mt", "argv": argv}

    first = ours(0)
    settings = train_mt.resolve_settings(train_mt.parse_args(first["argv"]),
                                         train_mt.load_preset(REPO / "configuration/models/cove-small.json"))
    # the same training pairs and epoch batches as the script
    source_tokenizer = AutoTokenizer.from_pretrained(first["mt_dir"])
    target_tokenizer = load_target_tokenizer(str(first["mt_dir"]))
    template = CoveForMachineTranslation.from_pretrained(first["mt_dir"])
    tokenized = raw.map(train_mt.tokenize_batch, batched=True, fn_kwargs={"lowercase": True})
    encoded = train_mt.encode_split(tokenized, source_tokenizer.get_vocab(), target_tokenizer.get_vocab(),
                                    template.config.eos_token_id, template.config.unk_token_id)
    max_len = settings["max_length"]
    encoded = encoded.filter(lambda r: 0 < len(r["src_tokens"]) <= max_len and 0 < len(r["tgt_tokens"]) <= max_len)
    store = train_mt.TokenStore(encoded)
    batches = train_mt.epoch_batches(store.src_lengths, store.tgt_lengths, settings["batch_size"],
                                     settings["chunk_batches"], settings["seed"], 1)[:steps]
    pad_id = template.config.pad_token_id

    def plain() -> dict:
        torch.manual_seed(settings["seed"])
        model = CoveForMachineTranslation.from_pretrained(first["mt_dir"]).to(args.device)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam(trainable, lr=1e-3)
        tokens = 0
        synchronize()
        start = time.perf_counter()
        for batch in batches:
            inputs = train_mt.collate(store.rows(batch), pad_id, args.device)
            out = model(**inputs)
            loss = out.nll_sum / len(batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(trainable, settings["grad_clip"])
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            tokens += int(out.num_tokens)
        synchronize()
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "target_tokens": tokens, "tokens_per_s": tokens / seconds}

    runs = {"ours": [first], "plain": [plain()]}
    for repeat in range(1, args.repeats):
        runs["ours"].append(ours(repeat))
        runs["plain"].append(plain())
    best = {k: max(v, key=lambda r: r["tokens_per_s"]) for k, v in runs.items()}
    ours_tps, plain_tps = best["ours"]["tokens_per_s"], best["plain"]["tokens_per_s"]
    return {
        "what": "CoVe-S MT model (cove-small preset: 2x600 decoder LSTM, attention), Adam, batch 64 pairs, "
                f"{steps} steps on the first {args.mt_train_pairs} Multi30k pairs, random weights",
        "steps": steps,
        "target_tokens_per_s": {"ours_train_mt_accelerate": round(ours_tps, 1), "plain_loop": round(plain_tps, 1)},
        "all_runs_tokens_per_s": {k: [round(r["tokens_per_s"], 1) for r in v] for k, v in runs.items()},
        "ratio_ours_to_plain": round(ours_tps / plain_tps, 3),
        "overhead": round(1 - ours_tps / plain_tps, 3),
    }


# ---------------------------------------------------------------------------------------------------------------
# BCN
# ---------------------------------------------------------------------------------------------------------------


def bench_bcn(args, work: Path) -> dict:
    import train_classifier as tc
    from modeling_cove.data import load_classification
    from modeling_cove.tokenization_cove import moses_tokenize
    from transformers import AutoTokenizer

    raw = load_classification("trec6", args.data_dir)
    words = sorted({t for split in raw.values() for text in split["text"]
                    for t in moses_tokenize(text, lowercase=True)})
    encoder_dir = random_checkpoint(words, work / "bcn-encoder")
    hp = tc.load_hyperparameters("trec6")
    labels = raw["train"].features["label"].names
    tokenizer = AutoTokenizer.from_pretrained(encoder_dir)
    splits, _ = tc.tokenize_splits({"train": raw["train"]}, tokenizer)
    train = splits["train"]
    template = tc.build_model(encoder_dir, "vectors+cove", labels, hp, seed=1)
    from modeling_cove.feature_cache import compute_features

    store = compute_features(template, train, hp["feature_batch_size"])
    train = train.add_column("feature_store", [0] * len(train)).add_column("feature_row", list(range(len(train))))
    collator = tc.BCNCollator(pad_token_id=template.config.pad_token_id, layer_indices=list(template.layer_indices),
                              num_states=template.config.num_hidden_layers + 1,
                              layer_width=template.config.encoder_output_size, stores=[store])
    steps, batch_size = args.bcn_steps, hp["batch_size"]

    def trainer(sampling: str, **overrides) -> dict:
        model = tc.build_model(encoder_dir, "vectors+cove", labels, hp, seed=1)
        targs = tc.make_training_arguments(work / f"bcn-trainer-{sampling}", hp, seed=1, max_steps=steps,
                                           sampling=sampling, evaluate_during_training=False, logging_steps=10,
                                           use_cpu=args.device == "cpu")
        targs.save_strategy = "no"
        targs.disable_tqdm = True
        for name, value in overrides.items():  # --trainer-variants: one TrainingArguments field changed
            setattr(targs, name, value)
        result = tc.build_trainer(model, targs, train, None, collator).train()
        seconds = result.metrics["train_runtime"]
        return {"seconds": seconds, "examples_per_s": steps * batch_size / seconds}

    def plain() -> dict:
        model = tc.build_model(encoder_dir, "vectors+cove", labels, hp, seed=1).to(args.device)
        model.train()
        trainable = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(trainable, lr=hp["learning_rate"], weight_decay=0.0, fused=True)
        synchronize()
        loader = torch.utils.data.DataLoader(train, batch_size=batch_size, shuffle=True, collate_fn=collator,
                                             generator=torch.Generator().manual_seed(1))
        start = time.perf_counter()
        step = 0
        while step < steps:  # as many epochs as the steps need, like the Trainer's max_steps
            for batch in loader:
                loss = model(**{k: to_device(v, args.device) for k, v in batch.items()}).loss
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, hp["max_grad_norm"])
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                if step == steps:
                    break
        synchronize()
        seconds = time.perf_counter() - start
        return {"seconds": seconds, "examples_per_s": steps * batch_size / seconds}

    # --trainer-variants: the Trainer with one of its per-step costs turned the other way (what train_classifier
    # sets is the baseline, "trainer_random"): pinned DataLoader batches, and the NaN/Inf loss filter, whose
    # `isnan(loss) or isinf(loss)` reads the loss back from the device at every step
    variants = {f"trainer_{name}_{value}".lower(): {name: value}
                for name, value in (("dataloader_pin_memory", not tc.PIN_MEMORY),
                                    ("logging_nan_inf_filter", not tc.NAN_INF_FILTER))} if args.trainer_variants else {}
    runs = {"trainer_random": [], "plain_random": [], "trainer_group_by_length": [], **{k: [] for k in variants}}
    for _ in range(args.repeats):
        runs["trainer_random"].append(trainer("random"))
        runs["plain_random"].append(plain())
        runs["trainer_group_by_length"].append(trainer("group_by_length"))
        for name, overrides in variants.items():
            runs[name].append(trainer("random", **overrides))
    best = {k: max(r["examples_per_s"] for r in v) for k, v in runs.items()}
    return {
        "what": f"BCN on TREC-6 (vectors + CoVe from the feature cache), batch {batch_size}, {steps} steps, "
                f"{sum(p.numel() for p in template.parameters() if p.requires_grad):,} trainable parameters",
        "steps": steps,
        "examples_per_s": {k: round(v, 1) for k, v in best.items()},
        "all_runs_examples_per_s": {k: [round(r["examples_per_s"], 1) for r in v] for k, v in runs.items()},
        "ratio_trainer_to_plain": round(best["trainer_random"] / best["plain_random"], 3),
        "overhead": round(1 - best["trainer_random"] / best["plain_random"], 3),
        "ratio_group_by_length_to_random": round(best["trainer_group_by_length"] / best["trainer_random"], 3),
        **{f"ratio_{name}_to_trainer_random": round(best[name] / best["trainer_random"], 3) for name in variants},
    }


def main(argv=None):
    p = benchmark_arguments(__doc__, "training.json", batch_size=False)
    p.add_argument("--only", choices=["mt", "bcn"], default=None)
    p.add_argument("--mt-epoch", action="store_true", help="also time one whole Multi30k epoch of train_mt.py")
    p.add_argument("--bcn-steps", type=int, default=None, help="BCN steps per run (default 40 on CPU, 200 on a GPU)")
    p.add_argument("--trainer-variants", action="store_true",
                   help="also time the BCN Trainer with pinned batches and the NaN/Inf loss filter switched")
    args = p.parse_args(argv)
    args.device = str(resolve_device(args))
    if not Path(args.data_dir).is_dir():
        sys.exit(f"error: --data-dir {args.data_dir} is not a directory")
    args.repeats = args.repeats or (1 if args.quick else 2)
    args.mt_steps, args.mt_train_pairs = (5, 400) if args.quick else (30, 4000)
    # BCN steps take ~40 ms on a GPU against ~0.7 s on 2 CPU cores: more of them there, for a stable ratio
    args.bcn_steps = args.bcn_steps or (5 if args.quick else 200 if args.device.startswith("cuda") else 40)
    torch.set_num_threads(args.threads)
    np.random.seed(0)
    import transformers

    transformers.logging.set_verbosity_error()  # the heads' "newly initialised" load reports, once per model
    results = {}
    with tempfile.TemporaryDirectory(prefix="cove-bench-training-") as tmp:
        if args.only in (None, "mt"):
            results["mt"] = bench_mt(args, Path(tmp))
            print("mt", json.dumps(results["mt"], indent=1), flush=True)
        if args.only in (None, "bcn"):
            results["bcn"] = bench_bcn(args, Path(tmp))
            print("bcn", json.dumps(results["bcn"], indent=1), flush=True)
        if args.mt_epoch:
            results["mt_epoch"] = bench_mt_epoch(args, Path(tmp))
            print("mt_epoch", json.dumps(results["mt_epoch"], indent=1), flush=True)
    write_report(args.output, argv, args.quick,
                 {"target": "overhead of our Accelerate / Trainer loops vs a plain PyTorch loop <= 10%",
                  "device": args.device}, results)

if __name__ == "__main__":
    main()
