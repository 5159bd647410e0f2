"""Probe: does cuDNN accept our per-layer weight lists without the 'not contiguous' copy, and what does it cost?

The probe as run on the H200 (2026-11-22; figures in benchmarks/RESULTS.md, GPU section; only this docstring added):
    python benchmarks/probes/cudnn_per_layer_calls.py
"""
import time, warnings, torch
from torch import nn
torch.manual_seed(0)
dev = "cuda"
rnn = nn.LSTM(300, 300, num_layers=2, bidirectional=True, batch_first=True).to(dev)
x = torch.randn(64, 40, 300, device=dev)
def names(layer, dirs=("", "_reverse")):
    out = []
    for s in dirs:
        out += [f"weight_ih_l{layer}{s}", f"weight_hh_l{layer}{s}", f"bias_ih_l{layer}{s}", f"bias_hh_l{layer}{s}"]
    return out
def run(ws_by_layer, label, n=200):
    with torch.inference_mode():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            inp = x
            for l in range(2):
                z = inp.new_zeros(2, 64, 300)
                inp, _, _ = torch.lstm(inp, (z, z), ws_by_layer[l], True, 1, 0.0, False, True, True)
        warned = any("contiguous" in str(m.message) for m in w)
        warnings.simplefilter("ignore")
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(n):
            inp = x
            for l in range(2):
                z = inp.new_zeros(2, 64, 300)
                inp, _, _ = torch.lstm(inp, (z, z), ws_by_layer[l], True, 1, 0.0, False, True, True)
        torch.cuda.synchronize()
    print(f"{label}: warned={warned} ms/call={(time.perf_counter()-t)/n*1e3:.3f}")
    return inp
rnn.flatten_parameters()
a = run([[getattr(rnn, n) for n in names(l)] for l in range(2)], "params after flatten_parameters")
cat = []
for l in range(2):
    ts = [getattr(rnn, n).detach() for n in names(l)]
    buf = torch.cat([t.reshape(-1) for t in ts])
    views, o = [], 0
    for t in ts:
        views.append(buf[o:o + t.numel()].view_as(t)); o += t.numel()
    cat.append(views)
b = run(cat, "per-layer torch.cat buffer")
sep = [[getattr(rnn, n).detach().clone() for n in names(l)] for l in range(2)]
c = run(sep, "separate clones")
with torch.inference_mode():
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(200): rnn(x)
    torch.cuda.synchronize(); print(f"nn.LSTM 2 layers: ms/call={(time.perf_counter()-t)/200*1e3:.3f}")
print("max diff cat vs params", (a - b).abs().max().item(), (a - c).abs().max().item())
