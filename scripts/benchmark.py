#!/usr/bin/env python
"""Speed figures of the CoVe encoder, measured side by side in one process (ratios are what count; absolute
numbers move with the machine and its load). Writes benchmarks/results/encoder.json.

    python scripts/benchmark.py --data-dir ../shared/data            # full run (~5-10 min on 2 cores)
    python scripts/benchmark.py --data-dir ../shared/data --quick    # smoke run (~1 min)

Figures (real tokens/s = tokens of the real sentences, padding not counted):
- ours: `CoveModel.encode` on token ids (length-sorted near-equal batches run unpacked on the fused LSTM kernel,
  inference_mode; on CPU shared among single-threaded workers, one per intra-op thread), and the same with
  `num_workers=1` (every batch on all intra-op threads, as before the workers); both also on the first 50 and 100
  inputs alone (few batches: where the workers' last batches count);
- roofline: raw `nn.LSTM(300, 300, 2, bidirectional)` forward on uniform-length batches holding the same number
  of tokens (no embedding lookup, no padding, no packing), one batch at a time on all threads — what the kernels
  give as users call them; roofline_workers: the same batches shared among `encode`'s workers (CPU);
- reference: the original Salesforce encoder's way — batches in arrival order, sort -> pack -> nn.LSTM -> unpack ->
  unsort per batch;
- end-to-end text -> vectors: `encode` on raw strings (tokenization included), `pipeline("feature-extraction")`
  on the texts in their order and sorted by character length (what a user can do before calling it), and our
  `pipeline("cove-feature-extraction")` (tokenizes the list at once and runs it sorted by token count);
- bf16 autocast vs fp32: speed and max relative error.
Each measurement is repeated (`--repeats`) in interleaved order and the best time is kept.

`--device cuda` runs every figure on the GPU instead (the LSTMs are then cuDNN's, fp32 and bf16 autocast; the
roofline is the raw `nn.LSTM` on the same GPU) and writes benchmarks/results/encoder_cuda.json:

    python scripts/benchmark.py --data-dir ../shared/data --device cuda
"""

import argparse
import json
import os

import wait_policy  # noqa: F401, I001  (before torch: PASSIVE unless OMP_WAIT_POLICY says otherwise)
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

REPO = Path(__file__).resolve().parents[1]


def machine_info() -> dict:
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    fields = {}  # the first CPU's "key: value" lines
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    # family/model/stepping as well as the name: VMs report one model name for different CPU generations
    cpu_model = "/".join(fields.get(k, "?") for k in ("cpu family", "model", "stepping")) if cpuinfo else "unknown"
    info = {"cpu": fields.get("model name", platform.processor()), "logical_cores": os.cpu_count(),
            "torch_threads": torch.get_num_threads(), "load_average_at_start": os.getloadavg(),
            "avx512_bf16": "avx512_bf16" in cpuinfo, "amx_bf16": "amx_bf16" in cpuinfo, "cpu_model": cpu_model,
            "torch": torch.__version__, "python": platform.python_version(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "default (unset)")}  # see scripts/wait_policy.py
    if torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(0), gpu_count=torch.cuda.device_count(),
                    cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version())
    return info


def git_commit() -> str:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=REPO).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def load_texts(data_dir: str, quick: bool) -> dict:
    from modeling_cove.data import load_classification

    sst = load_classification("sst5", data_dir)["test"]["text"]
    imdb = load_classification("imdb", data_dir)["test"]["text"]  # cut at 200 words by the loader
    imdb = imdb[:: max(1, len(imdb) // (100 if quick else 400))]  # spread over pos/neg
    if quick:
        sst = sst[:500]
    return {"sst_test": list(sst), "imdb_test_200w": list(imdb)}


def synchronize():
    """Wait for queued GPU work, so that a timing covers it (no-op on CPU)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        fn()
        synchronize()
        times.append(time.perf_counter() - start)
    return min(times)


def interleaved_best(fns: dict, repeats: int) -> dict:
    """Best time of each function over `repeats` rounds, each round running every function once in turn (so that
    a slow spell of the machine hits them all alike)."""
    timings = {key: float("inf") for key in fns}
    for _ in range(repeats):
        for key, fn in fns.items():
            timings[key] = min(timings[key], best_time(fn, 1))
    return timings


def make_model(tokenizer_words, dim=300, hidden=300):
    from modeling_cove.build import create_cove_checkpoint
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS

    torch.manual_seed(0)
    vectors = torch.randn(len(SPECIAL_TOKENS) + len(tokenizer_words), dim) * 0.3
    model, tokenizer = create_cove_checkpoint(tokenizer_words, vectors, hidden_size=hidden)
    return model.eval(), tokenizer


def reference_encode(model, ids, batch_size):
    """The original encoder: batches in arrival order; sort -> pack -> LSTM -> unpack -> unsort."""
    device = model.embeddings.weight.device
    lstm = nn.LSTM(300, 300, num_layers=2, bidirectional=True, batch_first=True)
    lstm.load_state_dict(model.encoder.rnn.state_dict())
    lstm.to(device).eval()
    embedding = model.embeddings

    def run():
        with torch.inference_mode():
            outs = []
            for start in range(0, len(ids), batch_size):
                batch = ids[start:start + batch_size]
                lengths = torch.tensor([len(x) for x in batch])
                padded = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)
                for row, x in enumerate(batch):
                    padded[row, : len(x)] = torch.tensor(x)
                sorted_lengths, order = lengths.sort(descending=True)
                padded = padded.to(device, non_blocking=True)
                packed = pack_padded_sequence(embedding(padded[order.to(device)]), sorted_lengths, batch_first=True)
                out, _ = lstm(packed)
                out, _ = pad_packed_sequence(out, batch_first=True)
                outs.append(out[order.argsort().to(device)])
            return outs

    return run


def roofline(total_tokens, mean_length, batch_size, device="cpu", dtype=None, workers=1):
    """Raw nn.LSTM forward on uniform (batch_size, mean_length) batches holding `total_tokens` tokens; `dtype`
    bfloat16 runs it under autocast (the bf16 roofline). `workers` > 1 (CPU): the batches shared among that many
    host threads with one intra-op thread each, as `encode` shares its own (`run_on_cpu_workers`)."""
    from modeling_cove.modeling_cove import run_on_cpu_workers

    lstm = nn.LSTM(300, 300, num_layers=2, bidirectional=True, batch_first=True).to(device).eval()
    length = max(1, round(mean_length))
    num_batches = max(1, round(total_tokens / (batch_size * length)))
    x = torch.randn(batch_size, length, 300, device=device)

    def run():
        with torch.inference_mode(), torch.autocast(torch.device(device).type, dtype=dtype, enabled=dtype is not None):
            run_on_cpu_workers(lambda _: lstm(x), list(range(num_batches)), workers)

    return run, num_batches * batch_size * length


# Short lists (the first n inputs, arrival order) timed with and without the CPU workers.
FEW_INPUTS = (50, 100)


def bench_dataset(name, texts, model, tokenizer, args) -> dict:
    from transformers import pipeline

    from modeling_cove.modeling_cove import cpu_worker_count

    ids = tokenizer(texts)["input_ids"]
    ids = [x for x in ids if x]
    tokens = sum(len(x) for x in ids)
    mean_length = tokens / len(ids)
    ours = lambda: model.encode(ids, batch_size=args.batch_size)  # noqa: E731
    ours_one_worker = lambda: model.encode(ids, batch_size=args.batch_size, num_workers=1)  # noqa: E731
    text_end_to_end = lambda: model.encode(texts, tokenizer, batch_size=args.batch_size)  # noqa: E731
    device = model.embeddings.weight.device
    extractor = pipeline("feature-extraction", model=model, tokenizer=tokenizer, device=device)
    pipe_texts = [t for t in texts if t.strip()]
    pipe = lambda: extractor(pipe_texts, batch_size=args.batch_size, return_tensors=True)  # noqa: E731
    by_length = sorted(pipe_texts, key=len, reverse=True)
    pipe_sorted = lambda: extractor(by_length, batch_size=args.batch_size, return_tensors=True)  # noqa: E731
    cove_extractor = pipeline("cove-feature-extraction", model=model, tokenizer=tokenizer, device=device)
    pipe_cove = lambda: cove_extractor(pipe_texts, batch_size=args.batch_size, return_tensors=True)  # noqa: E731
    reference = reference_encode(model, ids, args.batch_size)
    roof, roof_tokens = roofline(tokens, mean_length, args.batch_size, device)
    roof_bf16, _ = roofline(tokens, mean_length, args.batch_size, device, torch.bfloat16)
    workers = cpu_worker_count(device)  # what encode uses for many batches (1 off the CPU)
    roof_workers, _ = roofline(tokens, mean_length, args.batch_size, device, workers=workers)

    def bf16():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return model.encode(ids, batch_size=args.batch_size)

    # check correctness of what is timed: ours == reference (fp32) and bf16 error
    ref_out = reference()
    ours_out = ours()
    max_diff = 0.0
    for start in range(0, len(ids), args.batch_size):
        batch_out = ref_out[start // args.batch_size]
        for row, i in enumerate(range(start, min(start + args.batch_size, len(ids)))):
            n = len(ids[i])
            max_diff = max(max_diff, (batch_out[row, :n] - ours_out[i]).abs().max().item())
    # the cove pipeline's (1, T_i, D) per text vs encode on the same texts
    pipe_diff = max((p[0].to(o.device) - o).abs().max().item()
                    for p, o in zip(pipe_cove(), model.encode(pipe_texts, tokenizer)))
    bf16_out = bf16()
    rel_err = max(((b.float() - o).abs().max() / o.abs().max()).item() for b, o in zip(bf16_out, ours_out))

    fns = {"ours": ours, "ours_one_worker": ours_one_worker, "roofline": roof, "roofline_workers": roof_workers,
           "reference": reference, "text_encode": text_end_to_end,
           "pipeline": pipe, "pipeline_sorted": pipe_sorted, "pipeline_cove": pipe_cove, "bf16": bf16,
           "roofline_bf16": roof_bf16}
    fn_tokens = {key: roof_tokens if key.startswith("roofline") else tokens for key in fns}  # real tokens each runs
    for n in FEW_INPUTS:  # a short list, where few batches make the workers' last ones count (guided cuts)
        fns[f"ours_first{n}"] = lambda n=n: model.encode(ids[:n], batch_size=args.batch_size)
        fns[f"ours_one_worker_first{n}"] = lambda n=n: model.encode(ids[:n], batch_size=args.batch_size, num_workers=1)
        fn_tokens[f"ours_first{n}"] = fn_tokens[f"ours_one_worker_first{n}"] = sum(len(x) for x in ids[:n])
    timings = interleaved_best(fns, args.repeats)
    tps = {key: fn_tokens[key] / seconds for key, seconds in timings.items()}
    result = {
        "sentences": len(ids),
        "real_tokens": tokens,
        "mean_length": round(mean_length, 2),
        "max_length": max(len(x) for x in ids),
        "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
        "seconds": {k: round(v, 3) for k, v in timings.items()},
        "ratio_ours_to_roofline": round(tps["ours"] / tps["roofline"], 3),
        "ratio_ours_to_reference": round(tps["ours"] / tps["reference"], 3),
        "encode_workers": workers,
        "ratio_ours_to_one_worker": round(tps["ours"] / tps["ours_one_worker"], 3),
        "ratio_one_worker_to_roofline": round(tps["ours_one_worker"] / tps["roofline"], 3),
        "ratio_one_worker_to_reference": round(tps["ours_one_worker"] / tps["reference"], 3),
        "ratio_ours_to_roofline_workers": round(tps["ours"] / tps["roofline_workers"], 3),
        **{f"ratio_ours_to_one_worker_first{n}": round(tps[f"ours_first{n}"] / tps[f"ours_one_worker_first{n}"], 3)
           for n in FEW_INPUTS},
        "ratio_text_encode_to_roofline": round(tps["text_encode"] / tps["roofline"], 3),
        "ratio_pipeline_to_roofline": round(tps["pipeline"] / tps["roofline"], 3),
        "ratio_pipeline_sorted_to_roofline": round(tps["pipeline_sorted"] / tps["roofline"], 3),
        "ratio_pipeline_cove_to_roofline": round(tps["pipeline_cove"] / tps["roofline"], 3),
        "ratio_bf16_to_fp32_ours": round(tps["bf16"] / tps["ours"], 3),
        "ratio_bf16_to_roofline": round(tps["bf16"] / tps["roofline"], 3),
        "ratio_bf16_to_bf16_roofline": round(tps["bf16"] / tps["roofline_bf16"], 3),
        "bf16_max_relative_error": round(rel_err, 5),
        "max_abs_diff_ours_vs_reference": max_diff,
        "max_abs_diff_pipeline_cove_vs_encode": pipe_diff,
    }
    print(name, json.dumps(result, indent=1))
    return result


def benchmark_arguments(description: str, output_name: str, batch_size: bool = True) -> argparse.ArgumentParser:
    """The options every benchmark script shares (`--batch-size` for the encoder ones); results go to
    benchmarks/results/<output_name> unless --output says otherwise."""
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", type=int, default=2)
    if batch_size:
        p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--device", default="cpu", help="cpu, or cuda (a GPU; results go to <name>_cuda.json)")
    p.add_argument("--output", default=None, help=f"default benchmarks/results/{output_name}")
    p.set_defaults(default_output=output_name)
    return p


def resolve_device(args) -> torch.device:
    """Check --device (a clear error when CUDA is asked for and absent) and settle the output path."""
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("error: --device cuda but torch sees no GPU (torch.cuda.is_available() is False)")
    if device.type not in ("cpu", "cuda"):
        sys.exit(f"error: --device {args.device}: only cpu and cuda are supported")
    if args.output is None:
        name = args.default_output
        if device.type == "cuda":
            name = name.replace(".json", "_cuda.json")
        args.output = str(REPO / "benchmarks" / "results" / name)
    return device


def prepare_encoder_benchmark(args):
    """The shared start of the encoder benchmarks: `--repeats` settled, threads set, `--device` checked (and the
    output path), then the benchmark texts (`load_texts`) and a random-weight checkpoint whose vocabulary covers
    them, on the device. Returns (device, texts, model, tokenizer)."""
    from modeling_cove.tokenization_cove import moses_tokenize

    args.repeats = args.repeats or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)
    device = resolve_device(args)

    texts = load_texts(args.data_dir, args.quick)
    vocab = {}
    for group in texts.values():
        for text in group:
            for token in moses_tokenize(text):
                vocab[token] = vocab.get(token, 0) + 1
    model, tokenizer = make_model(sorted(vocab, key=lambda w: -vocab[w]))
    return device, texts, model.to(device), tokenizer


def prepare_cuda_probe(description: str):
    """The shared start of the GPU probes in benchmarks/probes (`python <probe>.py <out.json>`): the output path from
    the command line, then `prepare_encoder_benchmark` on CUDA. Returns (out, device, texts, model, tokenizer)."""
    out = sys.argv[1]
    args = benchmark_arguments(description, "unused.json").parse_args(["--device", "cuda", "--output", out])
    return (out, *prepare_encoder_benchmark(args))


def main(argv=None):
    args = benchmark_arguments(__doc__, "encoder.json").parse_args(argv)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    results = {name: bench_dataset(name, group, model, tokenizer, args) for name, group in texts.items()}
    write_report(args.output, argv, args.quick, {"batch_size": args.batch_size, "device": str(device)}, results)


def write_report(output, argv, quick: bool, settings: dict, results: dict):
    """Write a benchmark's JSON: command, commit, machine, date, `settings`, then the figures."""
    report = {
        "command": " ".join(["python", os.path.relpath(sys.argv[0], REPO)] + (sys.argv[1:] if argv is None else argv)),
        "commit": git_commit(),
        "machine": machine_info(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "quick": quick,
        **settings,
        "results": results,
    }
    out = Path(output)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
