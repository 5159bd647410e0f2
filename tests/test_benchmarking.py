"""The benchmark library's pure parts: what the benchmarks time computes what CoveModel computes (the original recipe,
the plain LSTM behind the roofline, the grouped packing path), the reports carry command/commit/machine, and the
vectors loader the benchmark compares against reads what ours reads. No timing is asserted: benchmarks are never
timed tests."""

import json
import lzma
import subprocess
import sys

import pytest
import torch

from instruments import common, encoder, packing, tokenizer_agreement, training, vectors_loading
from modeling_cove.training.common.cli import option, parse_options
from modeling_cove.training.common.run_info import git_commit

from conftest import REPO

WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away"]


@pytest.fixture
def tiny_model(single_thread):
    model, tokenizer = encoder.random_cove_model(WORDS, dim=8, hidden=6)
    return model, tokenizer


def ragged_ids(tokenizer):
    texts = ["the cat sat on a mat", "a dog", "the dog ran far away", "cat", "a mat on the cat", "dog ran"]
    return [x for x in tokenizer(texts)["input_ids"] if x]


def test_reference_recipe_computes_what_encode_computes(tiny_model):
    model, tokenizer = tiny_model
    ids = ragged_ids(tokenizer)
    batches = encoder.reference_encode(model, ids, batch_size=4)()
    assert [b.shape[0] for b in batches] == [4, 2]
    encoded = model.encode(ids, batch_size=4)
    assert encoded[0].shape == (len(ids[0]), 12)
    assert encoder.max_abs_diff_to_reference(batches, encoded, ids, batch_size=4) < 1e-5


def test_plain_lstm_of_the_roofline_equals_the_model_on_equal_lengths(tiny_model):
    model, tokenizer = tiny_model
    input_ids = torch.tensor(tokenizer(["the cat sat", "a dog ran", "on a mat"])["input_ids"])
    with torch.inference_mode():
        expected = model(input_ids=input_ids).last_hidden_state
        plain, _ = encoder.plain_lstm(model)(model.embeddings(input_ids))
    torch.testing.assert_close(plain, expected, rtol=0, atol=0)


def test_roofline_counts_the_tokens_it_runs(tiny_model):
    model, _ = tiny_model
    run, tokens = encoder.roofline(model, total_tokens=100, mean_length=4.6, batch_size=4)
    assert tokens == 4 * 5 * round(100 / 20)  # uniform (4, 5) batches holding about 100 tokens
    run()  # runs (the timing itself is what the benchmark reports)


def test_grouped_forward_equals_the_packed_forward(tiny_model):
    model, tokenizer = tiny_model
    batch = tokenizer(["the cat sat on a mat", "a dog", "the dog ran far away", "cat"], padding=True,
                      return_tensors="pt")
    lengths = batch["attention_mask"].sum(1)
    with torch.inference_mode():
        vectors = model.embeddings(batch["input_ids"]) * batch["attention_mask"].unsqueeze(-1)
        packed = model.encoder(vectors, lengths, final_states=True)[0]
        grouped = packing.grouped_forward(model.encoder, vectors, lengths, 0.75)
    valid = batch["attention_mask"].bool()
    for layer_packed, layer_grouped in zip(packed, grouped, strict=True):
        torch.testing.assert_close(layer_grouped[valid], layer_packed[valid], rtol=0, atol=1e-7)


def test_fill_and_packing_rules():
    lengths = torch.tensor([4, 2])
    assert packing.fill(lengths, 4) == 0.75
    assert packing.PACKING_RULES["rule_fill_0.7"](lengths, 4)
    assert not packing.PACKING_RULES["rule_min_ratio_0.75"](lengths, 4)


def test_training_packing_rows_scale_the_lengths_and_record_what_auto_ran(single_thread):
    """`bench_training_packing` on a few tiny batches: lengths scaled to each mean, both paths timed, and the
    strategies "auto" picked for each model's biLSTM calls in a training step: packed ("reference") below
    UNPACKED_TRAINING_MIN_MEAN_LENGTH on one thread, "unpacked" from it."""
    from modeling_cove.lstm_kernels import UNPACKED_TRAINING_MIN_MEAN_LENGTH

    rows = packing.bench_training_packing([10, 20, 30, 40], batch_size=4, repeats=1, batches_per_mean=1,
                                          means=(5, 25), vocab_size=50)  # every batch the whole corpus, scaled
    assert [(r["model"], r["mean_length"], r["padded_length"]) for r in rows] == [
        ("tagger", 5, 8), ("tagger", 25, 40), ("bcn", 5, 8), ("bcn", 25, 40)]
    assert UNPACKED_TRAINING_MIN_MEAN_LENGTH[0] > 5
    for row in rows:
        assert row["auto"] == (["unpacked"] if row["mean_length"] >= UNPACKED_TRAINING_MIN_MEAN_LENGTH[0]
                               else ["reference"])
        assert row["packed_s"] > 0 and row["unpacked_s"] > 0
        # the ratio is the two timings' quotient, up to the record's roundings (seconds to 1e-4, the ratio to 1e-3)
        quotient = row["packed_s"] / row["unpacked_s"]
        rounding = quotient * 5.01e-5 * (1 / (row["packed_s"] - 5e-5) + 1 / (row["unpacked_s"] - 5e-5)) + 5.01e-4
        assert row["packed_over_unpacked"] == pytest.approx(quotient, abs=rounding)


def test_modelled_seconds_reads_the_cost_table_linearly_between_row_counts():
    costs = {1: {"step_s": 1.0, "call_s": 10.0}, 5: {"step_s": 3.0, "call_s": 20.0}}
    assert packing.modelled_seconds(costs, 1, 4) == 4.0
    assert packing.modelled_seconds(costs, 3, 2, calls=1) == 2 * 2.0 + 15.0
    assert packing.modelled_seconds(costs, 9, 1, calls=2) == 3.0 + 40.0  # held beyond the table


def test_ragged_bench_times_every_path_and_accounts_for_them(tiny_model):
    """`bench_ragged` on a few tiny batches: every path timed on the same batches, the planner's call cost restored
    afterwards, and the cost tables (oneDNN, oneDNN on reordered weights, ATen, oneDNN in training) holding a step and
    a call per row count."""
    from modeling_cove import lstm_kernels

    model, tokenizer = tiny_model
    plan, call_rows_seen = lstm_kernels.plan_time_segments, set()

    def recording_plan(*args, **kwargs):
        call_rows_seen.add(kwargs.get("call_rows"))
        return plan(*args, **kwargs)

    texts = ["the cat sat on a mat", "a dog", "the dog ran far away", "cat", "a mat on the cat", "dog ran"]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(lstm_kernels, "plan_time_segments", recording_plan)
        result = packing.bench_ragged(texts, model, tokenizer, batch_size=4, repeats=1)
        assert lstm_kernels.plan_time_segments is recording_plan  # the benchmark's own patches were undone
    assert set(packing.RAGGED_CALL_ROWS) <= call_rows_seen  # each variant ran the planner with its call cost
    assert set(result["seconds"]) == {"roofline", "reference", *(f"unpacked_call_rows_{c}"
                                                                  for c in packing.RAGGED_CALL_ROWS)}
    lengths = [len(x) for x in tokenizer(texts)["input_ids"]]  # batches [6, 2, 5, 1] and [5, 2]
    groups = [lengths[:4], lengths[4:]]
    assert result["fill"] == pytest.approx(sum(lengths) / sum(len(g) * max(g) for g in groups), abs=1e-3)
    for table in (result["cost_table_ms"], result["cost_table_ms_prepacked"], result["cost_table_ms_without_onednn"],
                  result["cost_table_ms_training"]):
        assert sorted(table) == list(packing.RAGGED_ROWS)
        assert all(row["step_s"] >= 0 and row["call_s"] >= 0 for row in table.values())
    assert all(v > 0 for v in result["modelled_roofline_over"].values())


def test_sorted_batches_cut_longest_first_with_a_mask(tiny_model):
    _, tokenizer = tiny_model
    ids = ragged_ids(tokenizer)
    batches = packing.sorted_batches(ids, 4, torch.device("cpu"))
    assert sum(len(input_ids) for input_ids, _ in batches) == len(ids)
    first_ids, first_mask = batches[0]
    assert first_mask.sum(1).tolist() == sorted(first_mask.sum(1).tolist(), reverse=True)
    assert int(first_mask.sum(1).max()) == max(len(x) for x in ids) == first_ids.shape[1]


def test_report_carries_command_commit_machine(tmp_path):
    out = common.write_report(tmp_path / "r.json", ["--quick"], True, {"batch_size": 2}, {"set": {"x": 1}})
    report = json.loads(out.read_text())
    assert report["command"].endswith("--quick") and report["command"].startswith("python ")
    assert report["commit"] == git_commit()  # the checkout's commit, or the installed package's version
    assert report["machine"]["cpu"] and report["machine"]["torch"]
    assert report["quick"] is True and report["batch_size"] == 2 and report["results"] == {"set": {"x": 1}}


def test_benchmark_arguments_settle_the_output_and_name_a_bad_device(capsys):
    """The report's path from the benchmark's own output name (lstm_implementations.json under --implementations);
    a device torch cannot use is a usage error naming --device."""
    from dataclasses import dataclass

    @dataclass
    class Implementations(common.EncoderBenchmarkArguments):
        implementations: bool = option("compare implementations", False)

        def output_name(self) -> str:
            return "lstm_implementations.json" if self.implementations else "encoder.json"

    args = parse_options(Implementations, ["--data-dir", "data", "--implementations", "--batch-size", "8"])
    assert (args.output, args.batch_size) == (str(common.RESULTS_DIR / "lstm_implementations.json"), 8)
    assert parse_options(Implementations, ["--data-dir", "data"]).output == str(common.RESULTS_DIR / "encoder.json")
    assert parse_options(Implementations, ["--data-dir", "data", "--output", "x.json"]).output == "x.json"
    with pytest.raises(SystemExit) as exit_info:
        parse_options(Implementations, ["--data-dir", "data", "--device", "tpu"])
    assert exit_info.value.code == 2 and "--device 'tpu'" in capsys.readouterr().err


def test_the_data_folder_is_given_or_named_by_the_environment(monkeypatch, capsys):
    """No default points at a folder the user may not have: --data-dir, else $COVE_DATA_DIR, else a usage error."""
    monkeypatch.setattr(common, "DEFAULT_DATA_DIR", None)
    with pytest.raises(SystemExit) as exit_info:
        parse_options(common.BenchmarkArguments, [])
    assert exit_info.value.code == 2 and "--data-dir is required (or set $COVE_DATA_DIR)" in capsys.readouterr().err
    monkeypatch.setattr(common, "DEFAULT_DATA_DIR", "from-env")
    assert parse_options(common.BenchmarkArguments, []).data_dir == "from-env"
    assert parse_options(common.BenchmarkArguments, ["--data-dir", "given"]).data_dir == "given"


def test_interleaved_best_keeps_each_functions_best():
    calls = []
    timings = common.interleaved_best({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 2)
    assert calls == ["a", "b", "a", "b"] and set(timings) == {"a", "b"} and min(timings.values()) >= 0


def test_training_benchmark_settles_steps_and_repeats():
    quick = training.TrainingBenchmark("data", quick=True)
    assert (quick.repeats, quick.mt_steps, quick.mt_train_pairs, quick.bcn_steps) == (1, 5, 400, 5)
    full = training.TrainingBenchmark("data", device="cuda")
    assert (full.repeats, full.mt_steps, full.bcn_steps) == (2, 30, 200)
    assert training.TrainingBenchmark("data", bcn_steps=7, repeats=3).bcn_steps == 7


def test_to_device_moves_nested_batch_values():
    """Every tensor of a collated batch reaches the device: a collator's dict, a BatchEncoding, tuples inside them
    (a dict left on the CPU broke the heads benchmark's training sides under --device cuda); the meta device stands
    in for a GPU."""
    from transformers import BatchEncoding

    batch = {"input_ids": torch.ones(2, 3, dtype=torch.long), "pair": (torch.zeros(2), None), "name": "x"}
    for value in (batch, BatchEncoding(batch)):
        moved = training.to_device(value, "meta")
        assert moved["input_ids"].device.type == "meta" and moved["input_ids"].dtype == torch.long
        assert moved["pair"][0].device.type == "meta" and moved["pair"][1] is None and moved["name"] == "x"
    moved = training.to_device((torch.ones(1), [torch.ones(1)]), "meta")
    assert isinstance(moved, tuple) and moved[0].device.type == "meta" and moved[1][0].device.type == "meta"


def test_naive_loader_reads_what_ours_reads(tmp_path):
    from modeling_cove.vectors import read_word_vectors

    rows = [("the", [0.5, -1.0, 2.0]), ("cat", [1.5, 0.25, -0.75]), ("sat", [0.0, 3.0, 1.0])]
    path = tmp_path / "v.txt.xz"
    with lzma.open(path, "wt", encoding="utf-8") as f:
        f.writelines(f"{w} {' '.join(map(str, v))}\n" for w, v in rows)
    words, matrix = vectors_loading.naive_loader(str(path), {"the", "sat"})
    ours_words, ours_matrix = read_word_vectors(str(path), vocab={"the", "sat"}, stop_when_complete=False)
    assert words == list(ours_words) == ["the", "sat"]
    torch.testing.assert_close(matrix, ours_matrix, rtol=0, atol=0)


def test_vectors_worker_measures_in_a_fresh_process(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("the 0.5 1.0\ncat 1.5 2.0\n", encoding="utf-8")
    result = vectors_loading.measure({"loader": "ours", "path": str(path), "vocab_file": None, "repeats": 1,
                                      "tracemalloc": True, "threads": 1})
    assert result["rows"] == 2 and result["dim"] == 2 and result["tracemalloc_peak_bytes"] > 0


def test_disagreements_name_the_differing_spans():
    assert tokenizer_agreement.disagreements(["it", "'s", "a", "cat"], ["it's", "a", "cat"]) == [("it 's", "it's")]
    assert tokenizer_agreement.disagreements(["a"], ["a"]) == []


def test_tokenizer_agreement_cli_smoke(data_dir, tmp_path):
    import sacremoses  # noqa: F401  (a dependency: a missing one fails here)
    out = tmp_path / "agreement.json"
    command = [sys.executable, str(REPO / "benchmarks" / "tokenizer_agreement.py"), "--data-dir", str(data_dir),
               "--limit", "10", "--no-extra", "--stress", "0", "--output", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    saved = json.loads(out.read_text())
    assert saved["overall"]["texts"] == 50
    assert set(saved["datasets"]) == {"sst_senteval_test", "sst_trees_test", "trec_test", "multi30k_test2016",
                                      "imdb_test"}
    assert saved["command"].startswith("python benchmarks/tokenizer_agreement.py") and saved["commit"]
    assert saved["machine"]["cpu"] and saved["overall"]["percent_identical"] >= 97.0


def test_old_new_comparison_reads_each_report_and_takes_medians():
    """compare_heads_old_new: each side's figures come from its report's own threads, and the summary holds the
    medians over rounds and new / old as the quotient of the two medians."""
    import compare_heads_old_new as compare

    def report(speed, ratio):
        timed = {"auto": {"tokens_per_s": speed}, "ratio_auto_to_roofline": ratio}
        return {"results": {"tagger": {"threads_1": {"sorted": timed}, "threads_2": {"sorted": {
            "auto": {"tokens_per_s": -1.0}, "ratio_auto_to_roofline": -1.0}}}}}

    assert compare.side_figures(report(100.0, 0.9), threads=1) == {"tagger": {"sorted": (100.0, 0.9)}}
    rounds = {side: [{"figures": compare.side_figures(report(speed, ratio), 1)} for speed, ratio in values]
              for side, values in (("old", [(100.0, 0.90), (120.0, 0.80), (90.0, 0.85)]),
                                   ("new", [(110.0, 0.95), (130.0, 0.93), (125.0, 0.97)]))}
    row = compare.summarize(rounds)["tagger"]["sorted"]
    assert row == {"old_tokens_per_s_median": 100.0, "old_ratio_to_roofline_median": 0.85,
                   "new_tokens_per_s_median": 125.0, "new_ratio_to_roofline_median": 0.95,
                   "new_over_old": 1.25}
    # what the section times on our side alone: tokens/s, no ratio
    alone = report(100.0, 0.9)
    alone["results"]["tagger"]["threads_1"]["cvt_step_pair"] = {"tokens_per_s": 50.0, "best_s": 2.0}
    assert compare.side_figures(alone, 1)["tagger"]["cvt_step_pair"] == (50.0, None)
    rounds = {side: [{"figures": {"tagger": {"cvt_step_pair": (speed, None)}}} for speed in values]
              for side, values in (("old", [40.0, 50.0, 45.0]), ("new", [60.0, 55.0, 58.0]))}
    assert compare.summarize(rounds)["tagger"]["cvt_step_pair"] == {
        "old_tokens_per_s_median": 45.0, "new_tokens_per_s_median": 58.0, "new_over_old": 1.289}
