"""Speed of the CoVe encoder side by side with what it should be held against: the raw `nn.LSTM` on uniform batches
(the roofline: what the kernels give as users call them), and the original Salesforce encoder's recipe (batches in
arrival order; sort -> pack -> nn.LSTM -> unpack -> unsort). Random weights: speed does not depend on them."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from modeling_cove.lstm_kernels import cpu_worker_count, run_on_cpu_workers
from .common import EncoderBenchmarkArguments, count_cuda_syncs, interleaved_best

# Short lists (the first n inputs, arrival order) timed with and without the CPU workers.
FEW_INPUTS = (50, 100)


def load_texts(data_dir: str, quick: bool) -> dict:
    """The benchmark texts: SST-5 test (the first 500 with `quick`) and IMDb test reviews cut at 200 words by the
    loader, every k-th review so that both labels come (400 of them; 100 with `quick`)."""
    from modeling_cove.data import load_classification

    sst = load_classification("sst5", data_dir)["test"]["text"]
    imdb = load_classification("imdb", data_dir)["test"]["text"]
    imdb = imdb[:: max(1, len(imdb) // (100 if quick else 400))]
    if quick:
        sst = sst[:500]
    return {"sst_test": list(sst), "imdb_test_200w": list(imdb)}


def random_cove_model(words: list, dim: int = 300, hidden: int = 300):
    """A CoVe checkpoint over `words` with random vectors and MT-LSTM (seed 0), in eval mode: (model, tokenizer)."""
    from modeling_cove.build import create_cove_checkpoint
    from modeling_cove.tokenization_cove import SPECIAL_TOKENS

    torch.manual_seed(0)
    vectors = torch.randn(len(SPECIAL_TOKENS) + len(words), dim) * 0.3
    model, tokenizer = create_cove_checkpoint(words, vectors, hidden_size=hidden)
    return model.eval(), tokenizer


def prepare_encoder_benchmark(args: EncoderBenchmarkArguments):
    """The shared start of the encoder benchmarks: `args.repeats` settled (1 with --quick, else 3), the intra-op
    threads set, the benchmark texts (`load_texts`) and a random-weight checkpoint whose vocabulary covers them, on
    `args.device`. Returns (device, texts, model, tokenizer)."""
    from modeling_cove.tokenization_cove import moses_tokenize

    args.repeats = args.repeats or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    texts = load_texts(args.data_dir, args.quick)
    counts = {}
    for group in texts.values():
        for text in group:
            for token in moses_tokenize(text):
                counts[token] = counts.get(token, 0) + 1
    model, tokenizer = random_cove_model(sorted(counts, key=lambda w: -counts[w]))
    return device, texts, model.to(device), tokenizer


def plain_lstm(model) -> nn.LSTM:
    """The model's MT-LSTM as a plain batch-first `nn.LSTM` (its weights copied), in eval mode on its device."""
    rnn = model.encoder.rnn
    lstm = nn.LSTM(rnn.input_size, rnn.hidden_size, num_layers=rnn.num_layers, bidirectional=True, batch_first=True)
    lstm.load_state_dict(rnn.state_dict())
    return lstm.to(model.embeddings.weight.device).eval()


def reference_encode(model, ids: list, batch_size: int):
    """The original encoder as a function to time: batches of `ids` in arrival order; per batch sort -> pack ->
    nn.LSTM -> unpack -> unsort. The function returns each batch's (B, T, 2H) top layer."""
    device = model.embeddings.weight.device
    lstm = plain_lstm(model)

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
                vectors = model.embeddings(padded[order.to(device)])
                out, _ = lstm(pack_padded_sequence(vectors, sorted_lengths, batch_first=True))
                out, _ = pad_packed_sequence(out, batch_first=True)
                outs.append(out[order.argsort().to(device)])
            return outs

    return run


def roofline(model, total_tokens: int, mean_length: float, batch_size: int, dtype=None, workers: int = 1):
    """The model's MT-LSTM as a raw `nn.LSTM` forward on uniform (batch_size, mean_length) batches holding
    `total_tokens` tokens (no embedding lookup, no padding, no packing). `dtype` bfloat16 runs it under autocast
    (the bf16 roofline). `workers` > 1 (CPU): the batches shared among that many host threads with one intra-op
    thread each, as `encode` shares its own. Returns (function to time, tokens it runs)."""
    lstm = plain_lstm(model)
    device = model.embeddings.weight.device
    length = max(1, round(mean_length))
    num_batches = max(1, round(total_tokens / (batch_size * length)))
    x = torch.randn(batch_size, length, lstm.input_size, device=device)

    def run():
        with torch.inference_mode(), torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
            run_on_cpu_workers(lambda _: lstm(x), list(range(num_batches)), workers)

    return run, num_batches * batch_size * length


def max_abs_diff_to_reference(reference_batches: list, outputs: list, ids: list, batch_size: int) -> float:
    """Largest |difference| between `reference_encode`'s padded batches and per-input (T_i, D) outputs."""
    diff = 0.0
    for index, (x, out) in enumerate(zip(ids, outputs)):
        expected = reference_batches[index // batch_size][index % batch_size, : len(x)]
        diff = max(diff, (expected - out).abs().max().item()) if len(x) else diff
    return diff


def encoder_variants(model, tokenizer, texts: list, ids: list, batch_size: int) -> dict:
    """Every function `bench_dataset` times, by name: ours (`encode`, with its workers and with one), the rooflines,
    the original recipe, text -> vectors (encode on strings and three pipelines), bf16 autocast, short lists."""
    from transformers import pipeline

    device = model.embeddings.weight.device
    tokens = sum(len(x) for x in ids)
    extractor = pipeline("feature-extraction", model=model, tokenizer=tokenizer, device=device)
    cove_extractor = pipeline("cove-feature-extraction", model=model, tokenizer=tokenizer, device=device)
    pipe_texts = [t for t in texts if t.strip()]
    by_length = sorted(pipe_texts, key=len, reverse=True)  # what a user can do before calling the pipeline
    roof, roof_tokens = roofline(model, tokens, tokens / len(ids), batch_size)
    roof_bf16, _ = roofline(model, tokens, tokens / len(ids), batch_size, torch.bfloat16)
    roof_workers, _ = roofline(model, tokens, tokens / len(ids), batch_size, workers=cpu_worker_count(device))

    def bf16():
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return model.encode(ids, batch_size=batch_size)

    fns = {"ours": lambda: model.encode(ids, batch_size=batch_size),
           "ours_one_worker": lambda: model.encode(ids, batch_size=batch_size, num_workers=1),
           "roofline": roof, "roofline_workers": roof_workers,
           "reference": reference_encode(model, ids, batch_size),
           "text_encode": lambda: model.encode(texts, tokenizer, batch_size=batch_size),
           "pipeline": lambda: extractor(pipe_texts, batch_size=batch_size, return_tensors=True),
           "pipeline_sorted": lambda: extractor(by_length, batch_size=batch_size, return_tensors=True),
           "pipeline_cove": lambda: cove_extractor(pipe_texts, batch_size=batch_size, return_tensors=True),
           "bf16": bf16, "roofline_bf16": roof_bf16}
    fn_tokens = {key: roof_tokens if key.startswith("roofline") else tokens for key in fns}  # real tokens each runs
    for n in FEW_INPUTS:  # a short list, where few batches make the workers' last ones count
        fns[f"ours_first{n}"] = lambda n=n: model.encode(ids[:n], batch_size=batch_size)
        fns[f"ours_one_worker_first{n}"] = lambda n=n: model.encode(ids[:n], batch_size=batch_size, num_workers=1)
        fn_tokens[f"ours_first{n}"] = fn_tokens[f"ours_one_worker_first{n}"] = sum(len(x) for x in ids[:n])
    return {"fns": fns, "tokens": fn_tokens, "workers": cpu_worker_count(device), "pipe_texts": pipe_texts}


def encoder_ratios(tps: dict) -> dict:
    """The ratios `bench_dataset` reports, from tokens/s by variant name."""
    ratio = lambda a, b: round(tps[a] / tps[b], 3)  # noqa: E731
    return {
        "ratio_ours_to_roofline": ratio("ours", "roofline"),
        "ratio_ours_to_reference": ratio("ours", "reference"),
        "ratio_ours_to_one_worker": ratio("ours", "ours_one_worker"),
        "ratio_one_worker_to_roofline": ratio("ours_one_worker", "roofline"),
        "ratio_one_worker_to_reference": ratio("ours_one_worker", "reference"),
        "ratio_ours_to_roofline_workers": ratio("ours", "roofline_workers"),
        **{f"ratio_ours_to_one_worker_first{n}": ratio(f"ours_first{n}", f"ours_one_worker_first{n}")
           for n in FEW_INPUTS},
        "ratio_text_encode_to_roofline": ratio("text_encode", "roofline"),
        "ratio_pipeline_to_roofline": ratio("pipeline", "roofline"),
        "ratio_pipeline_sorted_to_roofline": ratio("pipeline_sorted", "roofline"),
        "ratio_pipeline_cove_to_roofline": ratio("pipeline_cove", "roofline"),
        "ratio_bf16_to_fp32_ours": ratio("bf16", "ours"),
        "ratio_bf16_to_roofline": ratio("bf16", "roofline"),
        "ratio_bf16_to_bf16_roofline": ratio("bf16", "roofline_bf16"),
    }


def bench_dataset(texts: list, model, tokenizer, batch_size: int, repeats: int) -> dict:
    """Every encoder figure on one set of texts: tokens/s and seconds of each variant (`encoder_variants`, best of
    `repeats` interleaved rounds), their ratios, and the checks of what is timed (ours == the original recipe in
    fp32, the cove pipeline == encode, bf16's relative error; on a GPU, how often `encode` waits for it)."""
    ids = [x for x in tokenizer(texts)["input_ids"] if x]
    variants = encoder_variants(model, tokenizer, texts, ids, batch_size)
    fns = variants["fns"]
    ours_out = fns["ours"]()
    ref_diff = max_abs_diff_to_reference(fns["reference"](), ours_out, ids, batch_size)
    pipe_diff = max((p[0].to(o.device) - o).abs().max().item()
                    for p, o in zip(fns["pipeline_cove"](), model.encode(variants["pipe_texts"], tokenizer)))
    rel_err = max(((b.float() - o).abs().max() / o.abs().max()).item() for b, o in zip(fns["bf16"](), ours_out))
    timings = interleaved_best(fns, repeats)
    tps = {key: variants["tokens"][key] / seconds for key, seconds in timings.items()}
    tokens = sum(len(x) for x in ids)
    result = {
        "sentences": len(ids), "real_tokens": tokens, "mean_length": round(tokens / len(ids), 2),
        "max_length": max(len(x) for x in ids),
        "tokens_per_s": {k: round(v, 1) for k, v in tps.items()},
        "seconds": {k: round(v, 3) for k, v in timings.items()},
        "encode_workers": variants["workers"],
        **encoder_ratios(tps),
        "bf16_max_relative_error": round(rel_err, 5),
        "max_abs_diff_ours_vs_reference": ref_diff,
        "max_abs_diff_pipeline_cove_vs_encode": pipe_diff,
    }
    if model.embeddings.weight.device.type == "cuda":
        result["encode_host_syncs"] = count_cuda_syncs(fns["ours"])
    return result


def bench_implementations(texts: list, model, tokenizer, batch_size: int, repeats: int) -> dict:
    """Does each `lstm_implementation` earn its place? `encode` under "reference" (pack -> biLSTM -> unpack, the
    paper's path), "unpacked" and "auto"; a user's plain `model(**tokenizer(batch, padding=True))` in arrival order
    under "reference" and "auto"; and the original recipe. Best of `repeats` interleaved rounds; the model is left
    on "auto"."""
    ids = tokenizer(texts)["input_ids"]
    tokens = sum(len(x) for x in ids)
    batches = [tokenizer(texts[i:i + batch_size], padding=True, return_tensors="pt").to(model.device)
               for i in range(0, len(texts), batch_size)]

    def encode_with(implementation):
        def run():
            model.set_lstm_implementation(implementation)
            return model.encode(ids, batch_size=batch_size)
        return run

    def forward_with(implementation):
        @torch.inference_mode()
        def run():
            model.set_lstm_implementation(implementation)
            return [model(**batch).last_hidden_state for batch in batches]
        return run

    fns = {"encode_reference": encode_with("reference"), "encode_unpacked": encode_with("unpacked"),
           "encode_auto": encode_with("auto"), "forward_reference": forward_with("reference"),
           "forward_auto": forward_with("auto"), "original_recipe": reference_encode(model, ids, batch_size)}
    try:
        seconds = interleaved_best(fns, repeats)
    finally:
        model.set_lstm_implementation("auto")
    per_s = {key: round(tokens / value, 1) for key, value in seconds.items()}
    ratio = lambda a, b: round(per_s[a] / per_s[b], 3)  # noqa: E731
    return {
        "real_tokens": tokens, "seconds": {k: round(v, 3) for k, v in seconds.items()}, "tokens_per_s": per_s,
        "ratio_encode_unpacked_to_reference": ratio("encode_unpacked", "encode_reference"),
        "ratio_encode_auto_to_reference": ratio("encode_auto", "encode_reference"),
        "ratio_forward_auto_to_reference": ratio("forward_auto", "forward_reference"),
        "ratio_forward_auto_to_original_recipe": ratio("forward_auto", "original_recipe"),
        "ratio_encode_auto_to_original_recipe": ratio("encode_auto", "original_recipe"),
    }
