"""The heads' speed benchmark (`instruments.heads`): its roofline is the same layers as the models
(same logits on uniform batches, weights copied), and a tiny run gives every figure."""

import pytest
import torch

from modeling_cove import CoveConfig, CoveForQuestionAnswering, CoveForSequenceClassification, CoveForTokenClassification
from instruments.heads import (KINDS, SIDES, RooflineBCN, RooflineDCN, RooflineTagger, bench_heads,
                                              summary_table)


def tiny_config(**overrides) -> CoveConfig:
    return CoveConfig(vocab_size=30, word_vector_dim=8, hidden_size=4, bcn_hidden_size=6, bcn_feedforward_dim=5,
                      dcn_hidden_size=8, dcn_pool_size=2, **overrides)


def with_batch_statistics(model):
    """Non-trivial running statistics in the maxout network's batch norms, so that copying them is checked too."""
    generator = torch.Generator().manual_seed(1)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm1d):
            module.running_mean.copy_(torch.randn(module.num_features, generator=generator))
            module.running_var.copy_(torch.rand(module.num_features, generator=generator) + 0.5)
    return model


@torch.no_grad()
def test_roofline_bcn_is_the_model_on_single_sentences(single_thread):
    torch.manual_seed(0)
    model = with_batch_statistics(CoveForSequenceClassification(tiny_config(num_labels=3))).eval()
    roofline = RooflineBCN(model).eval()
    ids = torch.randint(4, 30, (3, 7))  # equal-length sentences: no padding
    expected = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    torch.testing.assert_close(roofline(ids), expected, rtol=0, atol=0)


@torch.no_grad()
def test_roofline_bcn_is_the_model_on_pairs(single_thread):
    torch.manual_seed(0)
    model = with_batch_statistics(CoveForSequenceClassification(tiny_config(num_labels=3, bcn_pair_input=True)))
    model.eval()
    roofline = RooflineBCN(model).eval()
    x, y = torch.randint(4, 30, (3, 6)), torch.randint(4, 30, (3, 4))
    ids = torch.cat([x, y], dim=1)
    types = torch.cat([torch.zeros_like(x), torch.ones_like(y)], dim=1)
    expected = model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=types).logits
    torch.testing.assert_close(roofline(x, y), expected, rtol=0, atol=0)


@torch.no_grad()
def test_roofline_dcn_is_the_model(single_thread):
    """Each window alone (the model stops each row at its own iteration; the roofline runs a batch's count)."""
    torch.manual_seed(0)
    model = CoveForQuestionAnswering(tiny_config()).eval()
    roofline = RooflineDCN(model).eval()
    for _ in range(3):
        question, context = torch.randint(4, 30, (1, 4)), torch.randint(4, 30, (1, 9))
        ids = torch.cat([question, context], dim=1)
        types = torch.cat([torch.zeros_like(question), torch.ones_like(context)], dim=1)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=types)
        start, end = roofline(question, context, int(out.num_iterations.max()))
        torch.testing.assert_close(start[-1], out.start_logits[:, 4:], rtol=0, atol=0)
        torch.testing.assert_close(end[-1], out.end_logits[:, 4:], rtol=0, atol=0)


@torch.no_grad()
def test_roofline_tagger_is_the_model(single_thread):
    torch.manual_seed(0)
    model = CoveForTokenClassification(tiny_config(num_labels=5, tagger_input="vectors", tagger_hidden_size=3,
                                                   tagger_module_dim=4)).eval()
    ids = torch.randint(4, 30, (3, 7))
    expected = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    torch.testing.assert_close(RooflineTagger(model).eval()(ids), expected, rtol=0, atol=0)


@pytest.mark.slow
def test_tiny_run_gives_every_figure(data_dir, single_thread):
    settings, results = bench_heads(str(data_dir), quick=True, repeats=1, threads=(1,),
                                    sizes={"sst2": 6, "snli": 6, "squad": 2, "conll2000": 6})
    assert settings["threads"] == [1] and set(results) == {"bcn_single", "bcn_pair", "dcn", "tagger"}
    assert results["tagger"]["threads_1"]["cvt_step_pair"]["tokens_per_s"] > 0
    assert results["tagger"]["threads_1"]["cvt_table_step_pair"]["tokens_per_s"] > 0
    for section in results.values():
        assert section["max_abs_diff_logits_auto_vs_reference"] < 1e-4
        for kind in KINDS:
            figures = section["threads_1"][kind]
            for side in SIDES:
                assert figures[side]["best_s"] > 0 and figures[side]["spread_s"] == 0
                assert figures[side]["rounds_s"] == [figures[side]["best_s"]]
                # tokens/s is the side's tokens over its best time: equal up to the roundings of the record (0.1
                # token/s; best_s to 0.1 ms, a relative 5e-5 / best_s)
                best, quotient = figures[side]["best_s"], figures[side]["tokens"] / figures[side]["best_s"]
                rounding = quotient * 5.01e-5 / (best - 5e-5) + 0.051
                assert figures[side]["tokens_per_s"] == pytest.approx(quotient, abs=rounding)
            roofline = figures["roofline"]["best_s"]
            for side in ("auto", "reference"):  # a ratio is the roofline's time over the side's (rounded to 1e-3)
                quotient = roofline / figures[side]["best_s"]
                times = (roofline - 5e-5, figures[side]["best_s"] - 5e-5)  # each within 5e-5 of its best_s
                rounding = quotient * 5.01e-5 * (1 / times[0] + 1 / times[1]) + 5.01e-4
                assert figures[f"ratio_{side}_to_roofline"] == pytest.approx(quotient, abs=rounding)
    assert results["dcn"]["decoder_iterations"]["train"] == 4
    assert "bcn_pair" in summary_table(results, [1])


def test_each_timed_function_runs_the_tagger_in_its_own_mode(data_dir, tmp_path, single_thread):
    """The tagger section's training part shares the model with its inference parts: inference is timed without
    dropout whatever ran before it, training with it."""
    from instruments.heads import load_inputs, save_encoder, tagger_section

    inputs = load_inputs(str(data_dir), {"sst2": 2, "snli": 2, "squad": 1, "conll2000": 6})
    encoder_dir, tokenizer = save_encoder(inputs, tmp_path / "encoder")
    section = tagger_section(inputs["conll2000"], encoder_dir, tokenizer, torch.device("cpu"), table_vocabulary=100)
    seen = []
    for module in section.models[0].modules():
        if isinstance(module, torch.nn.Dropout):
            module.register_forward_pre_hook(lambda m, args: seen.append(m.training))
    for kind, training in (("train", True), ("sorted", False), ("train", True), ("pipeline", False)):
        seen.clear()
        section.fns[kind]["auto"]()
        assert seen and set(seen) == {training}, kind


def test_the_table_recipe_steps_train_as_the_cvt_table_does(data_dir, tmp_path, single_thread):
    """The CVT table's step pair: the cvt-paper preset (trained word vectors, START/END states, the `full` module,
    the moving average, tags in BIOES) with the ablation's chosen overrides (the optimizer and its rate)."""
    from instruments.heads import chosen_cvt_recipe, load_inputs, tagger_recipe_cvt_steps
    from instruments.tagging_recipe import recipe_runs, resolved_recipes

    from transformers import AutoTokenizer

    inputs = load_inputs(str(data_dir), {"sst2": 2, "snli": 2, "squad": 1, "conll2000": 6})
    steps, tokens = tagger_recipe_cvt_steps(inputs["conll2000"], tmp_path / "encoder", torch.device("cpu"),
                                            vocabulary_size=500)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "encoder")
    training, optimizer = steps.training, steps.optimizer
    assert training.model.get_input_embeddings().weight.shape[0] >= 500  # the table's vocabulary, in small
    table = resolved_recipes(recipe_runs("vocab", "DATA", overrides=chosen_cvt_recipe(), rows=["conll2000"]))
    assert {**steps.hp, "source": None} == {**table["conll2000"], "source": None}  # the CVT table's CoNLL-2000 row
    assert optimizer.param_groups[0]["lr"] == steps.hp["learning_rate"] and steps.average.decay == steps.hp["ema_decay"]
    config = training.model.config
    assert config.tagger_boundary_tokens and training.auxiliary["conll2000"].full is not None
    assert any(label.startswith("S-") for label in config.id2label.values())
    vectors = training.model.get_input_embeddings().weight
    before = vectors.detach().clone()
    steps()
    assert tokens == 2 * sum(len(ids) for ids in tokenizer(list(inputs["conll2000"]["words"]),
                                                           is_split_into_words=True)["input_ids"])
    assert vectors.requires_grad and not torch.equal(vectors.detach(), before)


def test_sections_not_measured_are_kept_with_where_they_come_from(tmp_path):
    """benchmarks/benchmark_heads.py --sections tagger: the other sections stay, each with its own command and commit."""
    import json
    import runpy

    from conftest import REPO

    keep_sections = runpy.run_path(str(REPO / "benchmarks" / "benchmark_heads.py"))["keep_sections"]
    report = tmp_path / "heads.json"
    assert keep_sections(report, ["tagger"]) == {}
    report.write_text(json.dumps({"command": "old", "commit": "abc", "date": "d1", "machine": {"cpu_model": "X"},
                                  "results": {"bcn_single": {"a": 1}, "tagger": {"b": 2}}}))
    kept = keep_sections(report, ["tagger"])
    assert kept == {"bcn_single": ({"command": "old", "commit": "abc", "date": "d1", "cpu_model": "X"}, {"a": 1})}
    report.write_text(json.dumps({"command": "new", "commit": "def", "results": {"bcn_single": {"a": 1}},
                                  "sections_kept": {"bcn_single": {"commit": "abc"}}}))
    assert keep_sections(report, ["tagger"])["bcn_single"][0] == {"commit": "abc"}  # its first provenance
