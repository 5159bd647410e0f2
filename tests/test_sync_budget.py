"""Every entry point within its host-device sync budget (issue 63): what a forward or a training step would make a
GPU process wait for, counted on CPU by `sync_counter.HostSyncCounter` (its docstring lists the exact calls it
counts: `READS`, `VALUE_SHAPED`, boolean-mask indexing, blocking host -> device copies).

Each entry point runs as it would on CUDA: under `lstm_implementation="single_call"` (what "auto" picks there), and
the DCN's decoder without its per-iteration early-stop read (`EARLY_STOP_READ_DEVICE_TYPES` without "cpu": on CPU
that read costs nothing, and the outputs are the same, tests/test_dcn.py), on a batch of 8 ragged sentences whose
inputs, parameters and buffers count as device tensors. A training step is the forward with labels,
`loss.backward()` and an AdamW step. Budgets: at most 2 per forward, 3 per training step; `BUDGETS` holds each one
and the count each makes today, which the test requires exactly (a new sync fails it even within the budget).
The input checks keep their errors (the heads' own tests), but read the device once for all of them, together with
the lengths the LSTMs are planned from.
"""

from unittest import mock

import pytest
import torch
from sync_counter import HostSyncCounter

from modeling_cove import (CoveConfig, CoveForMachineTranslation, CoveForQuestionAnswering,
                           CoveForSequenceClassification, CoveForTokenClassification, CoveModel)
from modeling_cove import modeling_cove_dcn
from modeling_cove.training.loops.cvt import TaggerTraining

pytestmark = pytest.mark.usefixtures("single_thread")

LENGTHS = [7, 3, 9, 1, 5, 9, 2, 6]  # a batch of 8 ragged sentences, in arrival order (not sorted)
PAIRS = [(3, 5), (2, 7), (4, 2), (1, 6), (3, 3), (5, 4), (2, 2), (4, 6)]  # (first / question, second / context)
VOCAB = 30
LABELS = ["B-NP", "I-NP", "O"]

# entry point -> (its budget: the at most 2 per forward, 3 per training step; what it makes today). The test
# holds both: a new sync inside the budget still fails until its count is written here, with its reason.
BUDGETS = {
    "encoder forward": (2, 1),
    "encoder encode": (2, 0),
    "bcn forward": (2, 1),
    "bcn training step": (3, 1),
    "bcn pair forward": (2, 1),
    "bcn pair training step": (3, 1),
    "dcn forward": (2, 1),
    "dcn training step": (3, 1),
    "tagger forward": (2, 1),
    "tagger training step": (3, 1),
    "tagger pipeline batch forward": (2, 1),  # before: 2 (the empty-text check read the device mask)
    "tagger pipeline batch forward, an empty text in it": (2, 1),  # before: 7 (two reads, boolean masks)
    "cvt labelled step": (3, 1),
    "cvt unlabelled step": (3, 1),
    "mt generate step forward": (2, 1),
    "mt training step": (3, 1),
}


def common_fields(**overrides) -> dict:
    fields = dict(vocab_size=VOCAB, word_vector_dim=6, hidden_size=6, lstm_implementation="single_call")
    fields.update(overrides)
    return fields


def single_texts(seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.zeros(len(LENGTHS), max(LENGTHS), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(LENGTHS):
        ids[row, :length] = torch.randint(4, VOCAB, (length,), generator=generator)
        mask[row, :length] = 1
    return ids, mask


def pair_texts(seed=0):
    generator = torch.Generator().manual_seed(seed)
    width = max(x + y for x, y in PAIRS)
    ids, types, mask = (torch.zeros(len(PAIRS), width, dtype=torch.long) for _ in range(3))
    for row, (x, y) in enumerate(PAIRS):
        ids[row, :x + y] = torch.randint(4, VOCAB, (x + y,), generator=generator)
        types[row, x:x + y] = 1
        mask[row, :x + y] = 1
    return ids, types, mask


def token_labels(mask: torch.Tensor, seed=0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, len(LABELS), mask.shape, generator=generator)
    return labels.masked_fill(mask == 0, -100)


def count(model: torch.nn.Module, batch: dict, call) -> HostSyncCounter:
    """Syncs of `call()` with `model`'s parameters and buffers and `batch`'s tensors on the device."""
    counter = HostSyncCounter()
    counter.on_device(model, batch)
    with counter:
        call()
    return counter


def count_step(model: torch.nn.Module, batch: dict, loss_of) -> HostSyncCounter:
    """Syncs of one training step: `loss_of()` (the forward with labels), its backward and an AdamW step."""
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)

    def step():
        loss_of().backward()
        optimizer.step()
        optimizer.zero_grad()

    return count(model, batch, step)


def bcn(**overrides):
    torch.manual_seed(0)
    return CoveForSequenceClassification(CoveConfig(**common_fields(
        bcn_feedforward_dim=5, bcn_hidden_size=4, bcn_maxout_reductions=[2, 2], bcn_maxout_pool=3, num_labels=3,
        **overrides)))


def dcn():
    torch.manual_seed(0)
    return CoveForQuestionAnswering(CoveConfig(**common_fields(
        dcn_hidden_size=6, dcn_pool_size=3, dcn_max_iterations=4, dcn_input="vectors+cove")))


def tagger(tagger_input="vectors+cove"):
    torch.manual_seed(0)
    return CoveForTokenClassification(CoveConfig(**common_fields(
        tagger_input=tagger_input, tagger_hidden_size=5, tagger_module_dim=4, num_labels=len(LABELS),
        id2label=dict(enumerate(LABELS)), label2id={name: i for i, name in enumerate(LABELS)})))


def mt():
    torch.manual_seed(0)
    return CoveForMachineTranslation(CoveConfig(**common_fields(
        target_vocab_size=20, decoder_embedding_dim=5, decoder_hidden_size=12, freeze_encoder=False,
        freeze_embeddings=False, max_source_length=12)))


def encoder_forward():
    torch.manual_seed(0)
    model = CoveModel(CoveConfig(**common_fields())).eval()
    ids, mask = single_texts()
    batch = {"input_ids": ids, "attention_mask": mask}
    return count(model, batch, lambda: model(**batch, output_final_states=False))


def encoder_encode():
    torch.manual_seed(0)
    model = CoveModel(CoveConfig(**common_fields())).eval()
    ids, mask = single_texts()
    texts = [row[:length].tolist() for row, length in zip(ids, LENGTHS)]
    return count(model, {}, lambda: model.encode(texts, num_workers=1))


def bcn_forward():
    model = bcn().eval()
    ids, mask = single_texts()
    batch = {"input_ids": ids, "attention_mask": mask}
    return count(model, batch, lambda: model(**batch))


def bcn_training_step():
    model = bcn()
    ids, mask = single_texts()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])}
    return count_step(model, batch, lambda: model(**batch).loss)


def bcn_pair_forward():
    model = bcn().eval()
    ids, types, mask = pair_texts()
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    return count(model, batch, lambda: model(**batch))


def bcn_pair_training_step():
    model = bcn()
    ids, types, mask = pair_texts()
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
             "labels": torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])}
    return count_step(model, batch, lambda: model(**batch).loss)


def dcn_forward(early_stop_reads=()):
    """The DCN in eval mode; `early_stop_reads`: the device types whose decoder reads back when to stop (CUDA's
    path by default: none)."""
    model = dcn().eval()
    ids, types, mask = pair_texts()
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
    with mock.patch.object(modeling_cove_dcn, "EARLY_STOP_READ_DEVICE_TYPES", early_stop_reads):
        return count(model, batch, lambda: model(**batch))


def dcn_training_step():
    model = dcn()
    ids, types, mask = pair_texts()
    starts = torch.tensor([x for x, _ in PAIRS])  # the first context token
    ends = torch.tensor([x + y - 1 for x, y in PAIRS])  # the last one
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "start_positions": starts,
             "end_positions": ends}
    return count_step(model, batch, lambda: model(**batch).loss)


def tagger_forward():
    model = tagger().eval()
    ids, mask = single_texts()
    batch = {"input_ids": ids, "attention_mask": mask}
    return count(model, batch, lambda: model(**batch))


def tagger_pipeline_batch_forward(texts=("the film was good", "a very bad plot", "the actors", "good",
                                          "the plot was not very good", "bad", "a film", "the good actors")):
    """`pipeline("token-classification")`'s forward of one batch of 8 texts (`batch_size=8`), as the pipeline gives
    it: each text preprocessed on the host, the batch collated, then moved to the device with the model."""
    from transformers.pipelines.base import pad_collate_fn

    from modeling_cove.pipeline_cove import CoveTokenClassificationPipeline
    from modeling_cove.tokenization_cove import build_cove_tokenizer, vocabulary_fingerprint

    tokenizer = build_cove_tokenizer(sorted({word for text in texts for word in text.split()}))
    model = tagger()
    model.resize_token_embeddings(len(tokenizer))
    model.config.vocabulary_fingerprint = vocabulary_fingerprint(tokenizer)
    pipe = CoveTokenClassificationPipeline(model=model.eval(), tokenizer=tokenizer)
    preprocess, _, _ = pipe._sanitize_parameters()
    items = [item for text in texts for item in pipe.preprocess(text, **preprocess)]
    batch = pad_collate_fn(tokenizer, None)(items)
    return count(model, {k: v for k, v in batch.items() if k in ("input_ids", "attention_mask")},
                 lambda: pipe._forward(batch))


def tagger_training_step():
    model = tagger()
    ids, mask = single_texts()
    batch = {"input_ids": ids, "attention_mask": mask, "labels": token_labels(mask)}
    return count_step(model, batch, lambda: model(**batch).loss)


def cvt_step(phase: str):
    training = TaggerTraining(tagger(tagger_input="vectors"), {"chunk": LABELS}, cvt=True)
    ids, mask = single_texts()
    batch = {"input_ids": ids, "attention_mask": mask}
    if phase == "labelled":
        batch.update(task="chunk", labels=token_labels(mask))
    return count_step(training, batch, lambda: training(phase, **batch))


def mt_generate_step_forward():
    """One forward of `generate()`'s loop after the first: the decoder on the newest token, from its state."""
    model = mt().eval()
    ids, mask = single_texts()
    with torch.no_grad():
        encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask, return_dict=True)
        first = model(encoder_outputs=encoder_outputs, attention_mask=mask,
                      decoder_input_ids=torch.full((len(LENGTHS), 1), model.config.decoder_start_token_id))
    decoder_ids = torch.full((len(LENGTHS), 2), model.config.decoder_start_token_id)
    inputs = model.prepare_inputs_for_generation(decoder_ids, cache=first.cache, attention_mask=mask,
                                                 encoder_outputs=encoder_outputs)
    with torch.no_grad():
        return count(model, {"inputs": inputs, "mask": mask, "encoder": encoder_outputs.to_tuple()},
                     lambda: model(**inputs))


def mt_training_step():
    model = mt()
    ids, mask = single_texts()
    labels = torch.randint(4, 20, (len(LENGTHS), 5), generator=torch.Generator().manual_seed(1))
    batch = {"input_ids": ids, "attention_mask": mask, "labels": labels}
    return count_step(model, batch, lambda: model(**batch).loss)


ENTRY_POINTS = {
    "encoder forward": encoder_forward,
    "encoder encode": encoder_encode,
    "bcn forward": bcn_forward,
    "bcn training step": bcn_training_step,
    "bcn pair forward": bcn_pair_forward,
    "bcn pair training step": bcn_pair_training_step,
    "dcn forward": dcn_forward,
    "dcn training step": dcn_training_step,
    "tagger forward": tagger_forward,
    "tagger training step": tagger_training_step,
    "tagger pipeline batch forward": tagger_pipeline_batch_forward,
    "tagger pipeline batch forward, an empty text in it": lambda: tagger_pipeline_batch_forward(
        ("the film was good", "", "the actors", "good", "  ", "bad", "a film", "the good actors")),
    "cvt labelled step": lambda: cvt_step("labelled"),
    "cvt unlabelled step": lambda: cvt_step("unlabelled"),
    "mt generate step forward": mt_generate_step_forward,
    "mt training step": mt_training_step,
}


@pytest.mark.parametrize("entry_point", list(BUDGETS))
def test_entry_point_within_its_sync_budget(entry_point):
    counter = ENTRY_POINTS[entry_point]()
    budget, today = BUDGETS[entry_point]
    report = "\n".join([f"{entry_point}: {counter.count} syncs (budget {budget}, {today} recorded)"] + counter.calls)
    assert today <= budget and counter.count == today, report


def test_counter_sees_what_makes_a_gpu_wait():
    """The counter on a plain computation: reads of device values, value-shaped ops, boolean masks and blocking
    host -> device copies count; host tensors (a factory's, a `.cpu()` copy's) and non-blocking copies do not."""
    weights = torch.arange(6.0)
    counter = HostSyncCounter()
    counter.on_device(weights)
    with counter:
        lengths = (weights > 1).sum().cpu()  # 1: a device value to the host
        assert int(lengths) == 4 and bool(torch.tensor([1, 2]).sum() == 3)  # host values: free
        weights[weights > 2].sum()  # 2: a boolean mask
        weights.nonzero()  # 3: a value-shaped op
        host = torch.arange(3)
        host.to(weights.device)  # 4: a blocking copy to the device
        host.to(weights.device, non_blocking=True)  # free
        near = torch.zeros(2, device=weights.device)  # made on the device, free
        float(near.sum())  # 5
    assert counter.count == 5, counter.calls
    assert [call.split(" at ")[0] for call in counter.calls] == [
        "cpu device -> host", "__getitem__ with a boolean mask", "nonzero", "to host -> device", "__float__"]


def test_dcn_early_stop_reads_once_per_iteration_where_it_reads_back():
    """On CPU (`EARLY_STOP_READ_DEVICE_TYPES`) the eval decoder reads back which rows converged: once per iteration
    it ran, besides the forward's one read of its checks and lengths."""
    counter = dcn_forward(early_stop_reads=("cpu",))
    model = dcn().eval()
    ids, types, mask = pair_texts()
    iterations = int(model(input_ids=ids, token_type_ids=types, attention_mask=mask).num_iterations.max())
    assert iterations < model.config.dcn_max_iterations  # the batch stops early
    assert counter.count == 1 + iterations, counter.calls
