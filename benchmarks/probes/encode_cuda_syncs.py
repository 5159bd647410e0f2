"""Ad-hoc probe (issue 7, GPU): how often `CoveModel.encode` and a plain `CoveModel.forward` loop make the host wait
for the GPU. Counts the synchronising CUDA calls with `torch.cuda.set_sync_debug_mode("warn")` (each one warns)
while encoding the benchmark's SST test sentences, batch 64, random weights (as scripts/benchmark.py builds them).

    python benchmarks/probes/encode_cuda_syncs.py <out.json>      # on a machine with a GPU

Prints and writes {"encode": syncs, "forward_loop": syncs, "batches": n}.
"""

import json
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from benchmark import prepare_cuda_probe  # noqa: E402
from modeling_cove.modeling_cove import length_bucketed_batches  # noqa: E402


def count_syncs(fn) -> int:
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("synchroniz" in str(w.message).lower() for w in caught)


def main():
    out, device, texts, model, tokenizer = prepare_cuda_probe(__doc__)
    ids = [x for x in tokenizer(texts["sst_test"])["input_ids"] if x]
    batches = length_bucketed_batches([len(x) for x in ids], 64)
    padded = []
    for batch in batches:
        width = len(ids[batch[0]])
        input_ids = torch.tensor([ids[i] + [0] * (width - len(ids[i])) for i in batch])
        mask = (torch.arange(width)[None, :] < torch.tensor([len(ids[i]) for i in batch])[:, None]).long()
        padded.append((input_ids.to(device), mask.to(device)))

    def forward_loop():
        with torch.inference_mode():
            for input_ids, mask in padded:
                model(input_ids=input_ids, attention_mask=mask)

    model.encode(ids)  # warm up
    forward_loop()
    result = {"encode": count_syncs(lambda: model.encode(ids)), "forward_loop": count_syncs(forward_loop),
              "batches": len(batches), "encode_batches": len(length_bucketed_batches([len(x) for x in ids], 64, 0.0))}
    print(json.dumps(result))
    Path(out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
