"""The CVT authors' recipe as options of the tagger (docs/tagging.md, "The CVT authors' recipe"): the `full` module,
the student's own dropout, label smoothing, sentence boundary states, the moving average of the weights, the
learning-rate schedule, the step budget's batches and the `cvt-paper` preset end to end (with exact resume)."""

import json
import lzma
import math

import pytest
import torch
from safetensors.torch import load_file

from modeling_cove import CoveConfig, CoveForTokenClassification
from modeling_cove.training.commands import train_tagger as tg
from modeling_cove.training.loops import stopping
from modeling_cove.training.loops.cvt import CrossViewOptions, TaggerTraining, restricted_views, smooth
from modeling_cove.training.loops.tagger_schedule import StepBudgetBatches, UnlabelledStream, WeightAverage, lr_factor
from test_cvt import batch, settings, tiny_setup, tiny_tagger  # noqa: F401  (tiny_setup: a fixture)

pytestmark = pytest.mark.usefixtures("single_thread")
CHUNK = {"chunk": ["B-NP", "I-NP", "O"]}


def test_the_full_module_trains_layer_2_from_unlabelled_text_and_no_primary_module():
    model = tiny_tagger(dropout=0.5)
    training = TaggerTraining(model, {**CHUNK, "pos": ["N", "V"]}, cvt=True,
                              options=CrossViewOptions(full_module=True)).train()
    training("unlabelled", *batch()).backward()
    primaries = list(model.classifier.parameters()) + list(training.primary.parameters())
    assert all(p.grad is None or not p.grad.any() for p in primaries)
    assert all(p.grad is not None and p.grad.any() for p in model.encoder[1].parameters())  # layer 2 learns
    assert all(p.grad is not None and p.grad.any() for p in training.auxiliary["chunk"].full.parameters())


def test_the_full_module_loss_is_a_kl_against_the_teacher_without_relu():
    """Without dropout: the full module's term is mean_i KL(p_i || softmax(W (W' [h1; h2]_i) + b))."""
    model = tiny_tagger(dropout=0.0)
    plain = TaggerTraining(model, CHUNK, cvt=True).train()
    full = TaggerTraining(model, CHUNK, cvt=True, options=CrossViewOptions(full_module=True)).train()
    full.auxiliary["chunk"].views.load_state_dict(plain.auxiliary["chunk"].views.state_dict())
    ids, mask = batch()
    extra = full("unlabelled", ids, mask) - plain("unlabelled", ids, mask)
    with torch.no_grad():
        layers = model.encode(model.tagger_inputs(ids, mask), mask.sum(1)).layers
        states = torch.cat(layers, dim=-1)[mask.bool()]
        p = torch.softmax(model.classifier(states), dim=-1)
        module = full.auxiliary["chunk"].full
        q = torch.softmax(module.output(module.hidden(states)), dim=-1)
        expected = float((p * (p.log() - q.log())).sum(-1).mean())
    assert float(extra) == pytest.approx(expected, abs=2e-7, rel=0)


def test_the_student_dropout_is_its_own_and_the_models_comes_back():
    model = tiny_tagger(dropout=0.5)
    training = TaggerTraining(model, CHUNK, cvt=True, options=CrossViewOptions(unlabeled_dropout=0.0)).train()
    ids, mask = batch()
    seen = []
    handle = model.dropout.register_forward_hook(lambda module, args, out: seen.append((module.training, module.p)))
    training("unlabelled", ids, mask)
    handle.remove()
    assert {p for active, p in seen if active} == {0.0}  # the student at the unlabelled rate
    assert any(not active for active, _ in seen)  # the teacher: eval mode, no dropout at all
    assert model.dropout.p == 0.5
    # at rate 0 the student equals the teacher, so the views' loss is what a dropout-free model gives
    reference = TaggerTraining(tiny_tagger(dropout=0.0), CHUNK, cvt=True).train()
    reference.auxiliary.load_state_dict(training.auxiliary.state_dict())
    assert float(training("unlabelled", ids, mask)) == pytest.approx(float(reference("unlabelled", ids, mask)),
                                                                     abs=1e-7, rel=0)


def test_label_smoothing_of_labelled_and_soft_targets():
    model = tiny_tagger(dropout=0.0)
    training = TaggerTraining(model, CHUNK, cvt=True, options=CrossViewOptions(label_smoothing=0.1)).train()
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))
    loss = training("labelled", ids, mask, task="chunk", labels=labels)
    with torch.no_grad():
        log_q = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits, dim=-1)[mask.bool()]
        target = smooth(torch.nn.functional.one_hot(labels[mask.bool()], 3).float(), 0.1)
        first = int(labels[mask.bool()][0])
        assert target[0].tolist() == pytest.approx([0.1 / 3 + 0.9 * (k == first) for k in range(3)], abs=3e-8, rel=0)
        expected = float(-(target * log_q).sum(-1).mean())
    assert float(loss) == pytest.approx(expected, abs=1e-6, rel=0)
    soft = training.soft_targets(ids, mask)["chunk"]
    model.eval()
    plain = torch.softmax(model(input_ids=ids, attention_mask=mask).logits, dim=-1)
    assert torch.allclose(soft, plain * 0.9 + 0.1 / 3, rtol=0, atol=2e-7)


def test_boundary_states_change_no_label_alignment_and_no_row_depends_on_padding():
    model = tiny_tagger(dropout=0.0, tagger_boundary_tokens=True).eval()
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))
    out = model(input_ids=ids, attention_mask=mask, labels=labels, output_hidden_states=True)
    assert out.logits.shape == (3, 6, 3) and all(h.shape[1] == 6 for h in out.hidden_states)
    for b in range(3):  # each row alone, unpadded: the same logits at its tokens, the same loss terms
        n = int(mask[b].sum())
        alone = model(input_ids=ids[b:b + 1, :n], attention_mask=mask[b:b + 1, :n])
        assert torch.allclose(alone.logits[0], out.logits[b, :n], rtol=0, atol=2e-7)
        assert not out.hidden_states[1][b, n:].any()  # zero at padding (the END state is not a token)
    expected = torch.nn.functional.cross_entropy(out.logits[mask.bool()], labels[mask.bool()])
    assert float(out.loss) == pytest.approx(float(expected), abs=1e-7)


def test_with_boundary_states_every_token_has_all_four_views():
    model = tiny_tagger(dropout=0.0, tagger_boundary_tokens=True)
    ids, mask = batch()
    states = model.encode(model.tagger_inputs(ids, mask), mask.sum(1))
    assert states.framed and states.mask.shape == (3, 8)
    present = torch.arange(8)[None, :] < (mask.sum(1) + 2)[:, None]
    views = restricted_views(states.layers[0], states.mask, present)
    for view, (_, valid) in views.items():
        assert torch.equal(valid, states.mask), view  # the first token's future view is START, the last's past END
    hidden = states.layers[0].shape[-1] // 2
    assert torch.equal(views["future"][0][:, 1], states.layers[0][:, 0, :hidden])  # h→ of START


def test_the_moving_average_equals_a_hand_computation_and_survives_a_checkpoint(tmp_path):
    weight = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    average = WeightAverage([("w", weight)], decay=0.9)
    expected, history = None, [[1.0, -2.0], [3.0, 0.0], [2.0, 5.0]]
    for values in history:
        with torch.no_grad():
            weight.copy_(torch.tensor(values))
        average.update()
        expected = torch.tensor(values) if expected is None else 0.9 * expected + 0.1 * torch.tensor(values)
    assert torch.allclose(average.average[0], expected, atol=0, rtol=1e-7)
    with average.swapped_in():
        assert torch.equal(weight.detach(), average.average[0])
    assert weight.tolist() == [2.0, 5.0]  # the trained weights back
    average.save(tmp_path)
    restored = WeightAverage([("w", weight)], decay=0.9)
    restored.load(tmp_path)
    assert torch.equal(restored.average[0], average.average[0])


def test_the_learning_rate_schedule():
    assert lr_factor(1, 0, 0.0) == 1.0
    assert lr_factor(50, 100, 0.0) == 0.5
    assert lr_factor(400, 100, 0.005) == 1 / (1 + 0.005 * 20)
    assert lr_factor(0, 100, 0.0) == 0.01  # counted from 1: the first step is not wasted at rate 0


def test_step_budget_batches_are_a_pure_function_of_the_period():
    passes = {0: [[0, 1], [2, 3], [4]], 1: [[0, 1, 2], [3, 4, 5]]}  # two tasks' batches per data epoch
    streams = [lambda e, t=t: [[(t, e, i)] for i in range(len(passes[t]))] for t in passes]
    lengths = [5, 1, 4, 2, 7, 3, 6]  # 7 unlabelled sentences: batches of 3, 3 and 1 a pass

    def stream():
        return UnlabelledStream(lengths, batch_size=3, seed=3, seed_stride=7919, chunk_batches=50)

    budget = StepBudgetBatches(streams, [5, 20], labelled_steps=25, steps_per_period=10, sampling="sqrt", seed=3,
                               seed_stride=7919, unlabelled=stream(), unlabeled_ratio=2)
    assert budget.periods == 3 and [budget.slots(p) for p in (1, 2, 3)] == [10, 10, 5]
    periods = [budget(p) for p in (1, 2, 3)]
    again = StepBudgetBatches(streams, [5, 20], 25, 10, "sqrt", 3, 7919, stream(), 2)
    assert again(3) == periods[2] and again(1) == periods[0]  # period 3 alone, then 1: the same batches
    labelled = [b for period in periods for b in period if b[0] == "labelled"]
    assert len(labelled) == 25
    for task in (0, 1):  # each task's stream read in order, data epoch after data epoch
        rows = [b[2][0] for b in labelled if b[1] == task]
        per_epoch = len(passes[task])
        assert rows == [(task, i // per_epoch + 1, i % per_epoch) for i in range(len(rows))]
    unlabelled = [b[2] for period in periods for b in period if b[0] == "unlabelled"]
    assert len(unlabelled) == 25 * 2 and unlabelled == stream().batches(0, 50)
    for start in range(0, 48, 3):  # each pass (3 batches) reads every sentence once
        assert sorted(row for rows in unlabelled[start:start + 3] for row in rows) == list(range(7))


def test_unlabelled_batches_hold_sentences_of_similar_lengths():
    """A pass: a seeded permutation, sorted by length within chunks of `chunk_batches` batches, cut into batches,
    the batches shuffled; every sentence once; the same batches from a fresh stream (exact resume)."""
    lengths = torch.randint(1, 51, (1000,), generator=torch.Generator().manual_seed(0)).tolist()
    stream = UnlabelledStream(lengths, batch_size=64, seed=1, seed_stride=7919, chunk_batches=5)
    assert stream.per_pass == 3 * 5 + 1  # chunks of 320 sentences: 3 full ones, then 40 sentences in one batch
    passes = [stream.batches(k * 16, 16) for k in range(3)]  # from batch 0, 16 at a time: across passes
    batches = [b for part in passes for b in part]
    for k in range(2):
        one_pass = batches[k * stream.per_pass:(k + 1) * stream.per_pass]
        assert sorted(r for rows in one_pass for r in rows) == list(range(1000))
        assert sorted(len(rows) for rows in one_pass) == [40] + [64] * 15
    assert batches[:stream.per_pass] != batches[stream.per_pass:2 * stream.per_pass]  # a new order each pass
    fresh = UnlabelledStream(lengths, 64, 1, 7919, 5)
    assert fresh.batches(30, 10) == batches[30:40]
    # a batch's spread of lengths (max - min) is a fraction of a random batch's, ~48 (the range is 1-50): a chunk of
    # 320 sorted sentences cut in 5 spans ~10 each (measured: at most 13, 9.7 on average)
    spread = [max(lengths[r] for r in rows) - min(lengths[r] for r in rows) for rows in batches if len(rows) == 64]
    assert max(spread) <= 15


def test_the_epoch_schedule_reads_the_unlabelled_stream_on_from_epoch_to_epoch(tiny_setup, tmp_path):
    """Without a step budget each labelled batch is followed by `unlabeled_ratio` unlabelled ones, and epoch 2 goes
    on where epoch 1 left the run's UnlabelledStream: epochs 1 and 2 together read its first batches in order."""
    from modeling_cove.training.loops.accelerate_loop import make_accelerator

    run = settings(tiny_setup, tmp_path / "run", unlabeled_ratio=2)
    hp = tg.load_hyperparameters(run)
    assert hp["labelled_steps"] is None
    tokenizer = tg.load_tokenizer(run.encoder)
    tasks, unlabeled = tg.prepare_tasks(run, tokenizer, hp)
    loop = tg.TaggerLoop(run, make_accelerator(True, True, hp["batch_size"]), tg.build_training(run, hp, tasks,
                                                                                                tokenizer),
                         tasks, unlabeled, hp)
    epochs = [loop.epoch_batches(epoch) for epoch in (1, 2)]
    phases = [phase for phase, _, _ in epochs[0]]
    assert phases == ["labelled", "unlabelled", "unlabelled"] * (len(phases) // 3) and len(phases) >= 6
    unlabelled = [rows for batches in epochs for phase, _, rows in batches if phase == "unlabelled"]
    assert unlabelled == loop.unlabelled_stream.batches(0, len(unlabelled))


def test_a_batch_smaller_than_the_processes_leaves_none_without_rows():
    assert tg.process_rows([4, 7, 9], 1, 2) == ([7], 1.0)
    assert tg.process_rows([4], 0, 2) == ([4], 1.0)
    assert tg.process_rows([4], 1, 2) == ([4], 0.0)  # its loss counts 0: it only joins the gradient reduction


def test_sqrt_sampling_follows_the_square_roots():
    streams = [lambda e: [[0]], lambda e: [[0]]]
    budget = StepBudgetBatches(streams, [100, 400], 4000, 4000, "sqrt", 1, 7919)
    share = sum(budget.draws(1)) / 4000
    assert share == pytest.approx(2 / 3, abs=0.03)  # sqrt(400) / (sqrt(100) + sqrt(400))


def test_bad_hyperparameters_are_named(tiny_setup, tmp_path):
    with pytest.raises(ValueError, match="ema_decay"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "a", hyperparameters='{"ema_decay": 1.5}'), cpu=True)
    with pytest.raises(ValueError, match="unknown preset keys.*warmup"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "b", hyperparameters='{"warmup": 3}'), cpu=True)
    with pytest.raises(ValueError, match="optimizer"):
        tg.train_tagger(settings(tiny_setup, tmp_path / "c", hyperparameters='{"optimizer": "lamb"}'), cpu=True)
    # each caught before anything trains, named with what it must be (a JSON string "false" is not a switch)
    for bad, requirement in (({"full_module": "false"}, "true or false"), ({"eval_batch_size": 0}, "an int >= 1"),
                             ({"epochs": 0}, "an int >= 1"), ({"max_grad_norm": None}, "a number > 0"),
                             ({"hidden_size": 2.5}, "an int >= 1"), ({"unlabeled_max_length": 0}, "an int >= 1"),
                             ({"early_stopping_patience": -1}, "an int >= 0")):
        key = next(iter(bad))
        with pytest.raises(ValueError, match=rf"tiny.yaml with --hyperparameters: hyperparameter {key}=.* must be "
                                             rf"{requirement}"):
            tg.load_hyperparameters(settings(tiny_setup, tmp_path / "d", hyperparameters=json.dumps(bad)))
    # task sampling picks a multi-task run's tasks only within a budget of labelled steps
    sqrt = json.dumps({"task_sampling": "sqrt"})
    with pytest.raises(ValueError, match="task_sampling='sqrt' must be 'proportional' for a multi-task run without "
                                         "labelled_steps"):
        tg.load_hyperparameters(settings(tiny_setup, tmp_path / "d", task=["conll2000", "ewt_upos"],
                                         hyperparameters=sqrt))
    assert tg.load_hyperparameters(settings(tiny_setup, tmp_path / "d", hyperparameters=sqrt))  # one task: moot
    assert tg.load_hyperparameters(settings(tiny_setup, tmp_path / "d", task=["conll2000", "ewt_upos"],
                                            hyperparameters=json.dumps({"task_sampling": "sqrt", "labelled_steps": 40})
                                            ))["task_sampling"] == "sqrt"


def test_hyperparameters_json_reaches_the_run_and_a_flag_beats_it(tiny_setup, tmp_path):
    chosen = {"learning_rate": 0.5, "label_scheme": "bioes", "batch_size": 8, "labelled_steps": None}
    hp = tg.load_hyperparameters(settings(tiny_setup, tmp_path, preset="cvt-paper", hyperparameters=json.dumps(chosen)))
    assert {key: hp[key] for key in chosen} == chosen  # null unsets the preset's budget
    hp = tg.load_hyperparameters(settings(tiny_setup, tmp_path, hyperparameters=json.dumps(chosen), learning_rate=0.1))
    assert hp["learning_rate"] == 0.1 and hp["batch_size"] == 8
    with pytest.raises(ValueError, match="--hyperparameters is not valid JSON"):
        tg.load_hyperparameters(settings(tiny_setup, tmp_path, hyperparameters="{ema_decay: 1}"))


def test_trainable_word_vectors_learn(tiny_setup):
    hp = {**tg.HYPERPARAMETER_DEFAULTS, "train_word_vectors": True, "hidden_size": 6, "module_dim": 6}
    run = tg.TaskRun("conll2000", ["B-NP", "I-NP", "O"], "f1", None, None, None, {})
    training = tg.build_training(settings(tiny_setup, "unused"), hp, [run], tg.load_tokenizer(str(tiny_setup[1])))
    vectors = training.model.get_input_embeddings().weight
    assert vectors.requires_grad
    ids, mask = batch()
    labels = torch.where(mask.bool(), ids % 3, torch.full_like(ids, -100))
    training.train()("labelled", ids, mask, task="conll2000", labels=labels).backward()
    assert vectors.grad is not None and vectors.grad[ids[mask.bool()]].any()


def test_xz_text_files_are_read_as_unlabelled_text(tmp_path):
    from modeling_cove.training.data.texts import corpus_texts

    path = tmp_path / "news.txt.xz"
    with lzma.open(path, "wt", encoding="utf-8") as stream:
        stream.write("Stocks rose .\n\nBonds fell .\n")
    assert corpus_texts(str(path)) == ["Stocks rose .", "Bonds fell ."]
    broken = tmp_path / "broken.txt.xz"
    broken.write_bytes(b"not xz at all")
    with pytest.raises(ValueError, match="broken.txt.xz: not a readable UTF-8 text file"):
        corpus_texts(str(broken))


def recipe(setup, output_dir, **overrides):
    """The cvt-paper preset on the tiny setup: its sizes shrunk, a budget of 6 labelled steps, validation every 3."""
    shrink = {"labelled_steps": 6, "eval_every": 3, "batch_size": 8, "hidden_size": 6, "module_dim": 6,
              "eval_batch_size": 32, "warmup_steps": 2}
    return settings(setup, output_dir, preset="cvt-paper", hyperparameters=json.dumps(shrink), **overrides)


def test_the_cvt_paper_recipe_runs_its_budget_and_resumes_exactly(tiny_setup, tmp_path):
    straight = tg.train_tagger(recipe(tiny_setup, tmp_path / "a", no_save_model=True), cpu=True)
    hp = straight["hyperparameters"]
    assert hp["optimizer"] == "sgd" and hp["ema_decay"] == 0.998 and hp["full_module"] and hp["boundary_tokens"]
    assert [e["labelled_steps"] for e in straight["epochs"]] == [3, 6]
    assert straight["global_step"] == 12  # 6 labelled steps, each followed by an unlabelled one
    assert straight["stop_reason"] == stopping.max_epochs(2)  # two periods of 3 labelled steps
    tg.train_tagger(recipe(tiny_setup, tmp_path / "b", no_save_model=True, max_steps=5, save_steps=1), cpu=True)
    resumed = tg.train_tagger(recipe(tiny_setup, tmp_path / "b", no_save_model=True, resume=True), cpu=True)
    assert [e["validation_main"] for e in resumed["epochs"]] == [e["validation_main"] for e in straight["epochs"]]
    a, b = (load_file(tmp_path / name / "best_state.safetensors") for name in ("a", "b"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert math.isfinite(straight["results"]["conll2000"]["validation"]["f1"])


def test_no_test_leaves_the_test_split_unscored(tiny_setup, tmp_path):
    with pytest.raises(ValueError, match="--no-test writes no tagger"):
        settings(tiny_setup, tmp_path / "a", no_test=True)
    metrics = tg.train_tagger(settings(tiny_setup, tmp_path / "b", no_test=True, no_save_model=True, max_steps=2),
                              cpu=True)
    assert set(metrics["results"]["conll2000"]) == {"validation"}
