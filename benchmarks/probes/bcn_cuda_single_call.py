"""Ad-hoc probe (issue 7, GPU): the BCN head's live encoder on a GPU, top layer read through the single cuDNN call
(`CoveForSequenceClassification.cove_layers`, since the commit that added it) vs per layer and direction (the
path before; forced here by emptying `SINGLE_CALL_DEVICE_TYPES`). Batches of 64 SST test sentences in arrival order
(as `pipeline("text-classification")` sends them), inference mode, random weights (as scripts/benchmark.py builds
the encoder; a fresh BCN on top), best of 5 interleaved repeats, synchronised.

    python benchmarks/probes/bcn_cuda_single_call.py <out.json>      # on a machine with a GPU
"""

import copy
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import modeling_cove.lstm_kernels as modeling  # noqa: E402  (SINGLE_CALL_DEVICE_TYPES)
from benchmark import prepare_cuda_probe  # noqa: E402
from modeling_cove import CoveForSequenceClassification  # noqa: E402


def main():
    out, device, texts, encoder, tokenizer = prepare_cuda_probe(__doc__)
    config = copy.deepcopy(encoder.config)
    config.bcn_input, config.num_labels = "vectors+cove", 5
    torch.manual_seed(0)
    model = CoveForSequenceClassification(config)
    model.cove.load_state_dict(encoder.state_dict())
    model = model.to(device).eval()
    sentences = [t for t in texts["sst_test"] if t.strip()]
    batches = [tokenizer(sentences[i:i + 64], padding=True, return_tensors="pt").to(device)
               for i in range(0, len(sentences), 64)]
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)

    def run():
        with torch.inference_mode():
            return [model(**b).logits for b in batches]

    paths = {"single_call": ("cuda",), "per_layer": ()}
    logits, best = {}, {name: float("inf") for name in paths}
    for repeat in range(6):
        for name, types in paths.items():
            modeling.SINGLE_CALL_DEVICE_TYPES = types
            torch.cuda.synchronize()
            start = time.perf_counter()
            logits[name] = run()
            torch.cuda.synchronize()
            if repeat:  # the first round warms up
                best[name] = min(best[name], time.perf_counter() - start)
    diff = max((a - b).abs().max().item() for a, b in zip(logits["single_call"], logits["per_layer"]))
    result = {"sentences": len(sentences), "real_tokens": tokens, "batches": len(batches),
              "seconds": {k: round(v, 4) for k, v in best.items()},
              "tokens_per_s": {k: round(tokens / v) for k, v in best.items()},
              "speedup_single_call": round(best["per_layer"] / best["single_call"], 3),
              "max_abs_logit_diff": diff}
    print(json.dumps(result, indent=1))
    Path(out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
