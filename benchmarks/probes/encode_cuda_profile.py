"""Ad-hoc probe (issue 7, GPU): where `CoveModel.encode` spends its time on a GPU. Encodes the benchmark's SST test
sentences (batch 64, random weights, as scripts/benchmark.py builds them) under `torch.profiler` and reports the
wall time, the GPU's busy time (sum of kernel and copy times), the host time per batch spent in each stage, and the
top operators by host time.

    python benchmarks/probes/encode_cuda_profile.py <out.json>      # on a machine with a GPU
"""

import json
import sys
import time
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile, record_function

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmark import prepare_cuda_probe  # noqa: E402


def main():
    out, device, texts, model, tokenizer = prepare_cuda_probe(__doc__)
    ids = [x for x in tokenizer(texts["sst_test"])["input_ids"] if x]
    for _ in range(3):
        model.encode(ids)
    torch.cuda.synchronize()
    start = time.perf_counter()
    model.encode(ids)
    host_return = time.perf_counter() - start  # encode returns when everything is queued
    torch.cuda.synchronize()
    wall = time.perf_counter() - start
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with record_function("encode"):
            model.encode(ids)
        torch.cuda.synchronize()
    events = prof.key_averages()
    gpu_busy_us = sum(e.self_device_time_total for e in events if e.device_type.name == "CUDA")
    rows = sorted(events, key=lambda e: -e.self_cpu_time_total)[:25]
    result = {
        "tokens": sum(len(x) for x in ids),
        "wall_ms": round(wall * 1e3, 2),
        "host_ms_until_encode_returns": round(host_return * 1e3, 2),
        "gpu_busy_ms_under_profiler": round(gpu_busy_us / 1e3, 2),
        "top_ops_by_self_host_time": [
            {"op": e.key, "calls": e.count, "self_host_ms": round(e.self_cpu_time_total / 1e3, 2),
             "device_ms": round(e.device_time_total / 1e3, 2)} for e in rows],
    }
    print(json.dumps(result, indent=1))
    Path(out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
