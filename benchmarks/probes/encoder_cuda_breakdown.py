"""Where does encode's GPU time go? Same bucketed batches: 2-layer nn.LSTM packed vs padded vs encode (ad hoc).

The probe as run on the H200 (2026-11-22) for results/encoder_cuda_breakdown.json (since then only this docstring
and one line wrap added). From the repo root:
    python benchmarks/probes/encoder_cuda_breakdown.py OUT.json cuda      # or cpu
"""
import sys, time, json
sys.path.insert(0, "scripts")
import torch
from torch.nn.utils.rnn import pack_padded_sequence
from benchmark import benchmark_arguments, prepare_encoder_benchmark, synchronize
from modeling_cove.modeling_cove import length_bucketed_batches

args = benchmark_arguments("probe", "probe.json").parse_args(
    ["--data-dir", "../shared/data", "--device", sys.argv[2], "--output", "/tmp/probe.json"])
device, texts, model, tokenizer = prepare_encoder_benchmark(args)
rnn = model.encoder.rnn
def best(fn, n=5):
    ts = []
    for _ in range(n):
        synchronize(); t = time.perf_counter(); fn(); synchronize(); ts.append(time.perf_counter() - t)
    return min(ts)
out = {}
for name, group in texts.items():
    ids = tokenizer(list(group), add_special_tokens=True)["input_ids"]
    lengths = [len(x) for x in ids]
    tokens = sum(lengths)
    for bs in (64, 256):
        batches = length_bucketed_batches(lengths, bs)
        prepared = []
        for b in batches:
            L = [lengths[i] for i in b]
            x = torch.zeros(len(b), L[0], dtype=torch.long)
            for r, i in enumerate(b):
                x[r, :L[r]] = torch.tensor(ids[i])
            prepared.append((model.embeddings(x.to(device)).detach(), torch.tensor(L)))
        def packed():
            with torch.inference_mode():
                for v, L in prepared:
                    rnn(pack_padded_sequence(v, L, batch_first=True, enforce_sorted=False))
        def padded():
            with torch.inference_mode():
                for v, L in prepared:
                    rnn(v)
        def encode():
            model.encode(ids, batch_size=bs)
        mean = tokens / len(ids)
        T = round(mean); B = bs; n = max(1, round(tokens / (B * T)))
        u = torch.randn(B, T, 300, device=device)
        def uniform():
            with torch.inference_mode():
                for _ in range(n):
                    rnn(u)
        r = {k: round(tokens / best(f)) for k, f in (("uniform_roofline", uniform), ("padded_bucketed", padded),
                                                      ("packed_bucketed", packed), ("encode", encode))}
        r["batches"] = len(batches)
        out[f"{name}_b{bs}"] = r
        print(name, bs, r, flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
