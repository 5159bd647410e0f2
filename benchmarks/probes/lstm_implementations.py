"""Probe (issue 32 item 1, CPU): does each execution strategy of the MT-LSTM earn its place? The same random-weight
checkpoint and texts as scripts/benchmark.py, in one process, interleaved repeats, best of each:

- `encode` (length-sorted batches) with `lstm_implementation` "reference" (pack -> biLSTM -> unpack, the paper's
  path), "unpacked" and "auto" (what users get);
- a user's plain forward, `model(**tokenizer(batch, padding=True))` in arrival order (batches of `--batch-size`), with
  "reference" and "auto";
- the original Salesforce recipe (`benchmark.reference_encode`: arrival order, sort -> pack -> nn.LSTM -> unpack).

    python benchmarks/probes/lstm_implementations.py --data-dir ../shared/data --repeats 3
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import wait_policy  # noqa: E402, F401, I001  (before torch)
import torch  # noqa: E402

from benchmark import benchmark_arguments, interleaved_best, prepare_encoder_benchmark, reference_encode  # noqa: E402
from benchmark import write_report  # noqa: E402


def main(argv=None):
    args = benchmark_arguments(__doc__, "lstm_implementations.json").parse_args(argv)
    device, texts, model, tokenizer = prepare_encoder_benchmark(args)
    results = {}
    for name, group in texts.items():
        ids = tokenizer(list(group))["input_ids"]
        tokens = sum(len(x) for x in ids)
        batches = [tokenizer(list(group[i:i + args.batch_size]), padding=True, return_tensors="pt")
                   for i in range(0, len(group), args.batch_size)]

        def encode_with(implementation):
            def run():
                model.set_lstm_implementation(implementation)
                return model.encode(ids, batch_size=args.batch_size)
            return run

        def forward_with(implementation):
            @torch.inference_mode()
            def run():
                model.set_lstm_implementation(implementation)
                return [model(**batch).last_hidden_state for batch in batches]
            return run

        fns = {"encode_reference": encode_with("reference"), "encode_unpacked": encode_with("unpacked"),
               "encode_auto": encode_with("auto"), "forward_reference": forward_with("reference"),
               "forward_auto": forward_with("auto"),
               "original_recipe": reference_encode(model, ids, args.batch_size)}
        seconds = interleaved_best(fns, args.repeats)
        model.set_lstm_implementation("auto")
        per_s = {key: round(tokens / value, 1) for key, value in seconds.items()}
        results[name] = {
            "real_tokens": tokens, "seconds": {k: round(v, 3) for k, v in seconds.items()}, "tokens_per_s": per_s,
            "ratio_encode_unpacked_to_reference": round(per_s["encode_unpacked"] / per_s["encode_reference"], 3),
            "ratio_encode_auto_to_reference": round(per_s["encode_auto"] / per_s["encode_reference"], 3),
            "ratio_forward_auto_to_reference": round(per_s["forward_auto"] / per_s["forward_reference"], 3),
            "ratio_forward_auto_to_original_recipe": round(per_s["forward_auto"] / per_s["original_recipe"], 3),
            "ratio_encode_auto_to_original_recipe": round(per_s["encode_auto"] / per_s["original_recipe"], 3),
        }
        print(name, results[name], flush=True)
    write_report(args.output, argv, args.quick, {"batch_size": args.batch_size, "device": str(device)}, results)


if __name__ == "__main__":
    main()
