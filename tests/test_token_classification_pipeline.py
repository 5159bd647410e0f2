"""`CoveTokenClassificationPipeline` (modeling_cove/pipeline_cove.py) over a tiny `CoveForTokenClassification`:
raw text with capitals and punctuation under every aggregation strategy (`word` as written, "," a word of its own,
never inside an entity it is not tagged into), pre-split input (a word's later tokens are its sub-words), batching,
and what `pipeline("token-classification", model=dir)` does with and without `trust_remote_code=True`. The expected
results are computed here by hand from the logits the model gives each token (its forward is wrapped to return a
fixed table of logits per token id, after running the real model on the same inputs)."""

import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
from transformers import (AutoConfig, AutoModelForTokenClassification, BertConfig, BertForTokenClassification,
                          BertTokenizer, TokenClassificationPipeline, pipeline)
from transformers.modeling_outputs import TokenClassifierOutput
from transformers.pipelines import PIPELINE_REGISTRY

import modeling_cove  # noqa: F401  (registers the pipeline as "token-classification" and "cove-token-classification")
from modeling_cove import CoveConfig, CoveForTokenClassification, CoveTokenClassificationPipeline
from modeling_cove.configuration_cove import pipelines_needing_remote_code
from modeling_cove.tokenization_cove import build_cove_tokenizer, vocabulary_fingerprint

pytestmark = pytest.mark.usefixtures("single_thread")

WORDS = "paris , france is nice . new york don 't the city".split()
TAGS = ["O", "B-LOC", "I-LOC", "B-MISC"]
STRATEGIES = ("none", "simple", "first", "average", "max")
TEXT = "Paris, France is nice."
# logits per token: the location names are B-LOC ("york" I-LOC), "don" leans B-MISC weakly and "'t" O strongly
# (so first / average / max disagree on "don't"), the rest O
LOGITS = {"paris": [0.0, 3.0, 0.5, 0.0], "france": [0.2, 2.0, 0.0, 0.1], "new": [0.0, 2.5, 0.0, 0.0],
          "york": [0.0, 0.0, 2.0, 0.0], "don": [1.0, 0.0, 0.0, 1.3], "'t": [4.0, 0.0, 0.0, 0.0]}
DEFAULT_LOGITS = [2.0, 0.0, 0.0, 0.0]


def softmax(row) -> np.ndarray:
    e = np.exp(np.asarray(row, dtype=np.float64) - max(row))
    return e / e.sum()


@pytest.fixture(scope="module")
def tokenizer():
    return build_cove_tokenizer(WORDS)


def tiny_tagger(tokenizer, labels: tuple = TAGS) -> CoveForTokenClassification:
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=8, tagger_hidden_size=6,
                        tagger_module_dim=5, num_labels=len(labels), id2label=dict(enumerate(labels)),
                        label2id={tag: i for i, tag in enumerate(labels)},
                        vocabulary_fingerprint=vocabulary_fingerprint(tokenizer))
    return CoveForTokenClassification(config).eval()


@pytest.fixture(scope="module")
def table(tokenizer) -> torch.Tensor:
    """(vocab, labels) logits by token id."""
    rows = torch.tensor([DEFAULT_LOGITS] * len(tokenizer))
    for token, logits in LOGITS.items():
        rows[tokenizer.convert_tokens_to_ids(token)] = torch.tensor(logits)
    return rows


def fixed_logits_pipeline(model, tokenizer, table, monkeypatch) -> CoveTokenClassificationPipeline:
    """A pipeline whose `model` gives each token the logits of `table` by token id (the real forward still runs on
    the same inputs and its checks apply)."""
    real_forward = model.forward

    def forward(input_ids=None, attention_mask=None, **kwargs):
        real = real_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return TokenClassifierOutput(logits=table[input_ids] + 0 * real.logits)

    monkeypatch.setattr(model, "forward", forward)
    return CoveTokenClassificationPipeline(model=model, tokenizer=tokenizer)


@pytest.fixture
def fixed(tokenizer, table, monkeypatch):
    """`tiny_tagger`'s pipeline with the logits of `table`."""
    return fixed_logits_pipeline(tiny_tagger(tokenizer), tokenizer, table, monkeypatch)


def token_scores(token: str) -> np.ndarray:
    return softmax(LOGITS.get(token, DEFAULT_LOGITS))


def strip(entities) -> list:
    """Results without `score`, for exact comparison."""
    return [{k: v for k, v in e.items() if k != "score"} for e in entities]


def run_quietly(pipe, *args, **kwargs):
    """Run the pipeline and fail on any warning (the stock fallback heuristic warns)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return pipe(*args, **kwargs)


# ---------------------------------------------------------------------------------------------------------------
# raw text


def test_raw_text_tokens_keep_the_text_as_written(fixed):
    result = run_quietly(fixed, TEXT, ignore_labels=[])
    tokens = ["paris", ",", "france", "is", "nice", "."]
    assert strip(result) == [
        {"entity": TAGS[int(token_scores(t).argmax())], "index": i, "word": w, "start": s, "end": e}
        for i, (t, w, s, e) in enumerate(zip(tokens, ["Paris", ",", "France", "is", "nice", "."],
                                             [0, 5, 7, 14, 17, 21], [5, 6, 13, 16, 21, 22]))]
    for entity, token in zip(result, tokens):
        assert entity["word"] == TEXT[entity["start"]:entity["end"]]
        assert float(entity["score"]) == pytest.approx(token_scores(token).max(), abs=8e-7, rel=0)
    assert [e["entity"] for e in result] == ["B-LOC", "O", "B-LOC", "O", "O", "O"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_raw_text_every_strategy_keeps_the_comma_out(fixed, strategy):
    """Each token is a word: "Paris" and "France" are two entities, the comma (tagged O) in neither; no warning."""
    result = run_quietly(fixed, TEXT, aggregation_strategy=strategy)
    key = "entity" if strategy == "none" else "entity_group"
    label = "B-LOC" if strategy == "none" else "LOC"
    assert [(e[key], e["word"], e["start"], e["end"]) for e in result] == [(label, "Paris", 0, 5),
                                                                            (label, "France", 7, 13)]
    for entity, token in zip(result, ["paris", "france"]):
        assert entity["word"] == TEXT[entity["start"]:entity["end"]]
        assert not entity["start"] <= TEXT.index(",") < entity["end"]
        assert float(entity["score"]) == pytest.approx(token_scores(token)[1], abs=4e-7, rel=0)


def test_the_stock_pipeline_absorbs_the_comma(fixed):
    """What the subclass fixes: transformers' own pipeline, on the same model and tokenizer, treats "," (no space
    before it) as a sub-word of "Paris", warns, and reports the lower-cased token texts joined by a space."""
    stock = TokenClassificationPipeline(model=fixed.model, tokenizer=fixed.tokenizer)
    with pytest.warns(UserWarning, match="fallback heuristic"):
        result = stock(TEXT, aggregation_strategy="first")
    assert [(e["word"], e["start"], e["end"]) for e in result][0] == ("paris ,", 0, 6)


@pytest.mark.parametrize("strategy", ["simple", "first", "average", "max"])
def test_an_entity_of_several_words_is_the_text_between_its_ends(fixed, strategy):
    text = "The city, New York!"  # "!" is not in the vocabulary: an unknown token, tagged O
    (entity,) = run_quietly(fixed, text, aggregation_strategy=strategy)
    assert (entity["entity_group"], entity["word"], entity["start"], entity["end"]) == ("LOC", "New York", 10, 18)
    expected = np.mean([token_scores("new")[1], token_scores("york")[2]])  # simple: the mean of the token scores
    assert float(entity["score"]) == pytest.approx(expected, abs=5e-7, rel=0)


def test_a_comma_tagged_inside_an_entity_joins_it(fixed, table, tokenizer):
    """Punctuation is a word like any other: the model, not the pipeline, decides whether it is inside an entity."""
    comma = tokenizer.convert_tokens_to_ids(",")
    saved = table[comma].clone()
    table[comma] = torch.tensor([0.0, 0.0, 3.0, 0.0])  # I-LOC
    try:
        result = run_quietly(fixed, TEXT, aggregation_strategy="simple")
    finally:
        table[comma] = saved
    assert [(e["word"], e["start"], e["end"]) for e in result] == [("Paris,", 0, 6), ("France", 7, 13)]


# ---------------------------------------------------------------------------------------------------------------
# pre-split input


PRE_SPLIT = ["Paris,", "don't", "New", "York"]  # tokens: paris , | don 't | new | york
JOINED = "Paris, don't New York"


def test_pre_split_tokens_are_placed_in_the_joined_words(fixed):
    (result,) = run_quietly(fixed, PRE_SPLIT, is_split_into_words=True, ignore_labels=[])
    assert [(e["word"], e["start"], e["end"], e["index"]) for e in result] == [
        ("Paris", 0, 5, 0), (",", 5, 6, 1), ("don", 7, 10, 2), ("'t", 10, 12, 3), ("New", 13, 16, 4),
        ("York", 17, 21, 5)]
    for entity in result:
        assert entity["word"] == JOINED[entity["start"]:entity["end"]]


@pytest.mark.parametrize("strategy", ["first", "average", "max"])
def test_pre_split_words_fuse_their_sub_words(fixed, strategy):
    """first / average / max give one tag per word over its tokens (by `word_ids`), computed here by hand."""
    (result,) = run_quietly(fixed, PRE_SPLIT, is_split_into_words=True, aggregation_strategy=strategy,
                            ignore_labels=[])
    words = [("Paris,", ["paris", ","], 0, 6), ("don't", ["don", "'t"], 7, 12), ("New", ["new"], 13, 16),
             ("York", ["york"], 17, 21)]
    expected = []
    for word, tokens, start, end in words:
        scores = [token_scores(t) for t in tokens]
        if strategy == "first":
            chosen = scores[0]
        elif strategy == "max":
            chosen = max(scores, key=lambda s: s.max())
        else:
            chosen = np.mean(scores, axis=0)
        expected.append((TAGS[int(chosen.argmax())], chosen.max(), word, start, end))
    # then the stock grouping by tag: B-LOC New + I-LOC York -> one LOC; each group's score the mean of its words'
    groups, current = [], []
    for tag, score, word, start, end in expected:
        if current and tag.split("-")[-1] == current[-1][0].split("-")[-1] and not tag.startswith("B-"):
            current.append((tag, score, word, start, end))
        else:
            if current:
                groups.append(current)
            current = [(tag, score, word, start, end)]
    groups.append(current)
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in result] == [
        (g[0][0].split("-")[-1], JOINED[g[0][3]:g[-1][4]], g[0][3], g[-1][4]) for g in groups]
    assert [float(e["score"]) for e in result] == pytest.approx([np.mean([w[1] for w in g]) for g in groups],
                                                                abs=9e-7, rel=0)
    dont = [e for e in result if e["word"] == "don't"]
    assert dont[0]["entity_group"] == {"first": "MISC", "max": "O", "average": "O"}[strategy]


def test_pre_split_simple_tags_each_token(fixed):
    (result,) = run_quietly(fixed, PRE_SPLIT, is_split_into_words=True, aggregation_strategy="simple")
    assert [(e["entity_group"], e["word"], e["start"], e["end"]) for e in result] == [
        ("LOC", "Paris", 0, 5), ("MISC", "don", 7, 10), ("LOC", "New York", 13, 21)]


# ---------------------------------------------------------------------------------------------------------------
# batching, and loading by name


TEXTS = [TEXT, "The city, New York!", "nice", "Paris is the city, France is nice, New York is nice."]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_batch_size_does_not_change_the_results(tokenizer, strategy):
    """The real model (no fixed logits): padded batches of texts of different lengths give each text's results."""
    pipe = CoveTokenClassificationPipeline(model=tiny_tagger(tokenizer), tokenizer=tokenizer)
    one = run_quietly(pipe, TEXTS, aggregation_strategy=strategy, ignore_labels=[], batch_size=1)
    four = run_quietly(pipe, TEXTS, aggregation_strategy=strategy, ignore_labels=[], batch_size=4)
    assert [strip(r) for r in one] == [strip(r) for r in four]
    for a, b in zip(one, four):
        assert [float(e["score"]) for e in a] == pytest.approx([float(e["score"]) for e in b], abs=0, rel=0)
    for text, result in zip(TEXTS, one):
        assert all(e["word"] == text[e["start"]:e["end"]] for e in result)
    alone = run_quietly(pipe, TEXTS[1], aggregation_strategy=strategy, ignore_labels=[])
    assert strip(alone) == strip(one[1])
    split = [text.replace(",", " ,").split() for text in TEXTS]
    one = run_quietly(pipe, split, is_split_into_words=True, aggregation_strategy=strategy, batch_size=1)
    three = run_quietly(pipe, split, is_split_into_words=True, aggregation_strategy=strategy, batch_size=3)
    assert [strip(r) for r in one] == [strip(r) for r in three]


def test_a_list_runs_longest_first_and_comes_back_in_input_order(tokenizer, monkeypatch):
    """The model sees the texts longest first (characters), in batches of neighbours; each result is the one of its
    own text run alone, in the input's order; raw text and pre-split sentences alike."""
    pipe = CoveTokenClassificationPipeline(model=tiny_tagger(tokenizer), tokenizer=tokenizer)
    texts = ["nice", TEXTS[3], "Paris, France is nice.", "The city, New York!", "nice ."]
    alone = [run_quietly(pipe, text, aggregation_strategy="simple", ignore_labels=[]) for text in texts]
    seen, real_forward = [], pipe.model.forward

    def forward(input_ids=None, attention_mask=None, **kwargs):
        seen.append(attention_mask.sum(-1).tolist())  # real tokens per row of the batch
        return real_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    monkeypatch.setattr(pipe.model, "forward", forward)
    batched = run_quietly(pipe, texts, aggregation_strategy="simple", ignore_labels=[], batch_size=2)
    assert [strip(r) for r in batched] == [strip(r) for r in alone]
    for a, b in zip(batched, alone):
        assert [float(e["score"]) for e in a] == pytest.approx([float(e["score"]) for e in b], abs=0, rel=0)
    assert [n for batch in seen for n in batch] == [len(tokenizer(t)["input_ids"]) for t in
                                                    sorted(texts, key=len, reverse=True)]
    assert len(seen) == 3  # batches of 2, 2 and 1
    seen.clear()
    split = [text.replace(",", " ,").split() for text in texts]
    pre_split = run_quietly(pipe, split, is_split_into_words=True, aggregation_strategy="first", batch_size=2)
    assert [strip(r) for r in pre_split] == [
        strip(run_quietly(pipe, words, is_split_into_words=True, aggregation_strategy="first")[0]) for words in split]
    # (one pre-split sentence comes back as a list of one result, as in the stock pipeline)
    assert seen[0][0] == max(len(tokenizer(words, is_split_into_words=True)["input_ids"]) for words in split)


# ---------------------------------------------------------------------------------------------------------------
# against the model's own forward, every strategy, single and batched, with texts without tokens


RAW_TEXTS = [TEXT, "The city, New York!", "don't New York, Paris", "nice",
             "Paris is the city, France is nice, New York is nice."]
SPLIT_TEXTS = [PRE_SPLIT, ["The", "city,", "New", "York!"], ["nice"], ["don't", "Paris,", "France", "is", "nice"]]
EMPTY_TEXTS = ["", "   ", "\t\n", "\x07"]  # the last: a character the tokenizer drops, so no token either
EMPTY_SPLIT = [[], ["  "], [""]]


def varied_tagger(tokenizer) -> CoveForTokenClassification:
    """The tiny tagger with its biLSTM and prediction module drawn from U(-1, 1): its tags then differ from token to
    token (the default initialisation gives almost every token the same tag)."""
    model = tiny_tagger(tokenizer)
    generator = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for parameter in [*model.encoder.parameters(), *model.classifier.parameters()]:
            parameter.copy_(torch.rand(parameter.shape, generator=generator) * 2 - 1)
    return model


def get_tag(label: str) -> tuple:
    """(B or I, type) of a label, as transformers reads it: "O" is an I of type "O"."""
    return ("B", label[2:]) if label.startswith("B-") else ("I", label[2:]) if label.startswith("I-") else ("I", label)


def reference_entities(model, tokenizer, item, strategy: str, split: bool = False) -> list:
    """What the pipeline must return for `item` (a text, or with `split` a list of words joined by one space), every
    label kept, computed from the model's own forward: each token's scores are the softmax of its logits; a word (a
    token of raw text; the tokens of one pre-split word) takes its first token's scores ("first"), their mean
    ("average") or those of its most confident token ("max"); "simple" scores each token; then words group into
    entities by B-/I- tags (an entity's score: the mean of its words')."""
    sentence = " ".join(item) if split else item
    encoding = tokenizer(item, is_split_into_words=split, return_offsets_mapping=True, return_tensors="pt")
    if encoding["input_ids"].shape[1] == 0:
        return []
    with torch.no_grad():
        logits = model(input_ids=encoding["input_ids"], attention_mask=encoding["attention_mask"]).logits[0]
    scores = torch.softmax(logits.double(), dim=-1).numpy()
    word_ids = encoding.word_ids(0)
    word_starts = np.cumsum([0] + [len(word) + 1 for word in item])[:-1] if split else None
    tokens = []
    for index, (start, end) in enumerate(encoding["offset_mapping"][0].tolist()):
        shift = int(word_starts[word_ids[index]]) if split else 0
        tokens.append({"scores": scores[index], "start": start + shift, "end": end + shift, "index": index,
                       "unit": word_ids[index] if split and strategy != "simple" else index})
    if strategy == "none":
        return [{"entity": TAGS[int(t["scores"].argmax())], "score": t["scores"].max(), "index": t["index"],
                 "word": sentence[t["start"]:t["end"]], "start": t["start"], "end": t["end"]} for t in tokens]
    units = []
    for token in tokens:
        if units and units[-1][-1]["unit"] == token["unit"]:
            units[-1].append(token)
        else:
            units.append([token])
    words = []
    for unit in units:
        chosen = {"simple": unit[0]["scores"], "first": unit[0]["scores"],
                  "max": max(unit, key=lambda t: t["scores"].max())["scores"],
                  "average": np.mean([t["scores"] for t in unit], axis=0)}[strategy]
        words.append((TAGS[int(chosen.argmax())], chosen.max(), unit[0]["start"], unit[-1]["end"]))
    groups = []
    for word in words:
        bi, tag = get_tag(word[0])
        if groups and tag == get_tag(groups[-1][-1][0])[1] and bi != "B":
            groups[-1].append(word)
        else:
            groups.append([word])
    return [{"entity_group": get_tag(group[0][0])[1], "score": np.mean([w[1] for w in group]),
             "word": sentence[group[0][2]:group[-1][3]], "start": group[0][2], "end": group[-1][3]}
            for group in groups]


def assert_results(results, expected):
    """The same entities (labels, words, spans, indices), scores to float32 precision."""
    assert [strip(r) for r in results] == [strip(r) for r in expected]
    for result, reference in zip(results, expected):
        assert [float(e["score"]) for e in result] == pytest.approx([float(e["score"]) for e in reference],
                                                                    abs=5e-7, rel=0)


@pytest.fixture(scope="module")
def varied(tokenizer):
    model = varied_tagger(tokenizer)
    tags = {TAGS[int(i)] for text in RAW_TEXTS
            for i in model(**tokenizer(text, return_tensors="pt")).logits[0].argmax(-1)}
    assert len(tags) >= 3, tags  # the test below compares groupings, not one tag everywhere
    return model


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_results_are_the_softmax_of_the_models_logits(varied, tokenizer, strategy):
    """Raw text and pre-split words, one at a time and in batches (texts without tokens among them): every token's
    or entity's label and score are those the model's own logits give the same words."""
    pipe = CoveTokenClassificationPipeline(model=varied, tokenizer=tokenizer)
    kwargs = {"aggregation_strategy": strategy, "ignore_labels": []}
    raw = RAW_TEXTS + EMPTY_TEXTS
    raw = [raw[i] for i in (0, 5, 1, 6, 2, 3, 7, 4, 8)]  # empty texts between the others
    expected = [reference_entities(varied, tokenizer, text, strategy) for text in raw]
    assert_results([run_quietly(pipe, text, **kwargs) for text in raw], expected)
    for batch_size in (1, 2, 4):
        assert_results(run_quietly(pipe, raw, batch_size=batch_size, **kwargs), expected)
    split = [SPLIT_TEXTS[0], EMPTY_SPLIT[0], SPLIT_TEXTS[1], SPLIT_TEXTS[2], EMPTY_SPLIT[1], SPLIT_TEXTS[3],
             EMPTY_SPLIT[2]]
    expected = [reference_entities(varied, tokenizer, words, strategy, split=True) for words in split]
    # one sentence alone ([] alone is no input at all: transformers' error, as for BERT; [[]] is one empty sentence)
    assert_results([run_quietly(pipe, words or [words], is_split_into_words=True, **kwargs)[0] for words in split],
                   expected)
    for batch_size in (1, 3):
        assert_results(run_quietly(pipe, split, is_split_into_words=True, batch_size=batch_size, **kwargs),
                       expected)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_text_without_tokens_gives_an_empty_result_and_never_reaches_the_model(tokenizer, strategy, monkeypatch):
    """As transformers' pipeline does for BERT: `ner("")` is `[]`, and so is an empty or whitespace-only text (or one
    of characters the tokenizer drops) in a list, at any batch size; the model, which refuses a row without
    tokens, never sees one, and a batch of such texts alone does not run it at all."""
    pipe = CoveTokenClassificationPipeline(model=tiny_tagger(tokenizer), tokenizer=tokenizer)
    rows, real_forward = [], pipe.model.forward

    def forward(input_ids=None, attention_mask=None, **kwargs):
        rows.extend(attention_mask.sum(-1).tolist())
        return real_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    monkeypatch.setattr(pipe.model, "forward", forward)
    kwargs = {"aggregation_strategy": strategy, "ignore_labels": []}
    for text in EMPTY_TEXTS:
        assert run_quietly(pipe, text, **kwargs) == []
    assert run_quietly(pipe, EMPTY_TEXTS, batch_size=2, **kwargs) == [[]] * len(EMPTY_TEXTS)
    assert run_quietly(pipe, EMPTY_SPLIT, is_split_into_words=True, batch_size=2, **kwargs) == [[]] * 3
    assert rows == []  # no forward at all
    alone = run_quietly(pipe, "the cat sat", **kwargs)
    for batch_size in (1, 2):
        assert strip(run_quietly(pipe, ["the cat sat", ""], batch_size=batch_size, **kwargs)[0]) == strip(alone)
        assert run_quietly(pipe, ["the cat sat", ""], batch_size=batch_size, **kwargs)[1] == []
    assert rows and 0 not in rows
    streamed = list(pipe((text for text in ["", "the cat sat", "  "]), batch_size=2, **kwargs))
    assert streamed[0] == [] and streamed[2] == [] and strip(streamed[1]) == strip(alone)


def test_without_an_attention_mask_a_text_without_tokens_is_still_found(tokenizer):
    """A tokenizer that gives no attention mask (its `model_input_names` without one): which texts have tokens is
    then read from their ids; one text at a time the results are those with the mask."""
    import copy

    unmasked = copy.deepcopy(tokenizer)
    unmasked.model_input_names = ["input_ids"]
    model = tiny_tagger(tokenizer)
    masked = CoveTokenClassificationPipeline(model=model, tokenizer=tokenizer)
    pipe = CoveTokenClassificationPipeline(model=model, tokenizer=unmasked)
    assert "attention_mask" not in unmasked("the cat sat")
    assert run_quietly(pipe, "the cat sat", aggregation_strategy="none") == run_quietly(
        masked, "the cat sat", aggregation_strategy="none")
    assert run_quietly(pipe, "", aggregation_strategy="none") == []
    assert run_quietly(pipe, "  ", aggregation_strategy="none") == []


def test_a_tagger_reading_case_skips_texts_without_tokens_too(tokenizer):
    """The casing feature's `case_ids` (1, 0) of an empty text pad into a batch like its other inputs."""
    model = tiny_tagger(tokenizer)
    config = model.config.to_dict() | {"tagger_case_dim": 3}
    torch.manual_seed(0)
    model = CoveForTokenClassification(CoveConfig.from_dict(config)).eval()
    pipe = CoveTokenClassificationPipeline(model=model, tokenizer=tokenizer)
    results = run_quietly(pipe, ["", TEXT, " "], batch_size=3, ignore_labels=[])
    assert results[0] == [] and results[2] == []
    assert strip(results[1]) == strip(run_quietly(pipe, TEXT, ignore_labels=[]))


@pytest.mark.parametrize("inputs, split, message", [
    (None, False, "the input is None (NoneType), not a text (str)"),
    (5, False, "the input is 5 (int), not a text (str)"),
    (["a cat", None], False, "input 1 is None (NoneType), not a text (str)"),
    (("a cat", "nice", b"the"), False, r"input 2 is b'the' \(bytes\), not a text \(str\)"),
    ([["a", "cat"], "nice"], False, r"input 0 is \['a', 'cat'\] \(list\), not a text \(str\)"),
    (["Paris", None], True, "word 1 of the input is None (NoneType), not a str"),
    ([["Paris"], ["New", 3]], True, "word 1 of input 1 is 3 (int), not a str"),
    ("Paris", True, r"the input is 'Paris' \(str\), not a list of words \(is_split_into_words=True\)"),
], ids=["none", "int", "none-in-list", "bytes-in-tuple", "list-in-texts", "none-word", "int-word", "str-split"])
def test_any_other_bad_input_is_an_error_naming_it(fixed, inputs, split, message):
    with pytest.raises(TypeError, match=message if "\\" in message else re.escape(message)):
        fixed(inputs, is_split_into_words=split)


def test_a_bad_item_of_a_stream_is_an_error_naming_it(fixed):
    with pytest.raises(TypeError, match=re.escape("an input is None (NoneType), not a text (str)")):
        list(fixed(text for text in ["Paris", None]))
    with pytest.raises(ValueError, match="At least one input is required"):  # as transformers' own pipeline
        fixed([])


NO_FLAG = """
import json, sys
import modeling_cove  # noqa: F401
from transformers import pipeline
folder, texts, split = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ner = pipeline("token-classification", model=folder)
results = {"class": f"{type(ner).__module__}.{type(ner).__name__}",
           "model": type(ner.model).__module__}
for strategy in ("none", "simple", "first", "average", "max"):
    kwargs = {"aggregation_strategy": strategy, "ignore_labels": []}
    results[strategy] = {"single": [ner(text, **kwargs) for text in texts],
                         "batched": ner(texts, batch_size=2, **kwargs),
                         "split": ner(split, is_split_into_words=True, batch_size=2, **kwargs)}
print(json.dumps(results, default=float))
"""


def test_a_fresh_process_with_the_package_needs_no_flag(varied, tokenizer, tmp_path):
    """`import modeling_cove`, then `pipeline("token-classification", model=dir)` exactly as a user types it, in a
    new interpreter: our pipeline over the installed classes, every strategy's results those of the model's
    logits, texts without tokens `[]`."""
    folder = tmp_path / "tagger"
    varied.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    texts = [RAW_TEXTS[0], "", RAW_TEXTS[1], "  ", RAW_TEXTS[2]]
    split = [SPLIT_TEXTS[0], [], SPLIT_TEXTS[3]]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    run = subprocess.run([sys.executable, "-c", NO_FLAG, str(folder), json.dumps(texts), json.dumps(split)],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.strip().splitlines()[-1])
    assert results["class"] == "modeling_cove.pipeline_cove.CoveTokenClassificationPipeline"
    assert results["model"] == "modeling_cove.modeling_cove_tagger"
    for strategy in STRATEGIES:
        expected = [reference_entities(varied, tokenizer, text, strategy) for text in texts]
        assert_results(results[strategy]["single"], expected)
        assert_results(results[strategy]["batched"], expected)
        assert_results(results[strategy]["split"],
                       [reference_entities(varied, tokenizer, words, strategy, split=True) for words in split])


@pytest.fixture(scope="module")
def saved_tagger(tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagger")
    tiny_tagger(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_pipeline_by_task_name_needs_no_remote_code(saved_tagger):
    """With the package imported, `pipeline("token-classification", model=dir)` (and "ner") builds our pipeline over
    the installed classes, with no trust_remote_code, though the folder records the pipeline in `custom_pipelines`
    as checkpoints saved before always did (for a process without the package); trust_remote_code=True or False
    changes nothing, and "cove-token-classification" and `pipeline_class=` give the same results."""
    config = json.loads((saved_tagger / "config.json").read_text())
    assert config["custom_pipelines"]["token-classification"]["impl"] == \
        "pipeline_cove.CoveTokenClassificationPipeline"
    assert (saved_tagger / "pipeline_cove.py").is_file()
    assert not hasattr(AutoConfig.from_pretrained(str(saved_tagger)), "custom_pipelines")  # not needed here
    reference = pipeline("token-classification", model=str(saved_tagger))
    assert type(reference) is CoveTokenClassificationPipeline
    assert type(reference.model).__module__ == "modeling_cove.modeling_cove_tagger"
    others = [pipeline("ner", model=str(saved_tagger)),
              pipeline("token-classification", model=str(saved_tagger), trust_remote_code=True),
              pipeline("token-classification", model=str(saved_tagger), trust_remote_code=False),
              pipeline("cove-token-classification", model=str(saved_tagger)),
              pipeline("token-classification", model=str(saved_tagger),
                       pipeline_class=CoveTokenClassificationPipeline)]
    assert all(type(other) is CoveTokenClassificationPipeline for other in others)
    for strategy in STRATEGIES:
        expected = run_quietly(reference, TEXT, aggregation_strategy=strategy, ignore_labels=[])
        assert all(e["word"] == TEXT[e["start"]:e["end"]] for e in expected)
        for other in others:
            result = run_quietly(other, TEXT, aggregation_strategy=strategy, ignore_labels=[])
            assert strip(result) == strip(expected)
            assert [float(e["score"]) for e in result] == pytest.approx([float(e["score"]) for e in expected],
                                                                        abs=0, rel=0)


def test_the_registry_maps_the_task_to_our_class_and_keeps_its_default():
    """`import modeling_cove` registers the class as the "token-classification" task's (its alias "ner" too), with
    transformers' own model class and default model for the task."""
    for name in ("token-classification", "ner"):
        task, entry, _ = PIPELINE_REGISTRY.check_task(name)
        assert task == "token-classification" and entry["impl"] is CoveTokenClassificationPipeline
    assert entry["pt"] == (AutoModelForTokenClassification,) and entry["type"] == "text"
    assert entry["default"] == {"model": ("dbmdz/bert-large-cased-finetuned-conll03-english", "4c53496")}


def test_only_the_entries_the_registry_serves_are_left_out_of_a_config():
    """`pipelines_needing_remote_code`: an entry is dropped only when the registry maps its task to the class it
    names; the DCN's question-answering pipeline (no such task here), another class or an unknown task stay."""
    tagger = {"impl": "pipeline_cove.CoveTokenClassificationPipeline", "pt": ["AutoModelForTokenClassification"],
              "type": "text"}
    others = {"question-answering": {"impl": "pipeline_cove.CoveQuestionAnsweringPipeline"},
              "cove-feature-extraction": {"impl": "pipeline_cove.SomethingElse"}, "my-task": {"impl": "mine.X"}}
    assert pipelines_needing_remote_code({"token-classification": tagger, **others}) == others
    assert pipelines_needing_remote_code({"cove-token-classification": tagger}) == {}
    assert pipelines_needing_remote_code({"text-classification": {"impl": "pipeline_cove.CoveTokenClassification"
                                                                          "Pipeline"}}) != {}


# ---------------------------------------------------------------------------------------------------------------
# another model: transformers' own pipeline, as before


@pytest.fixture(scope="module")
def bert_tagger(tmp_path_factory):
    """A tiny BERT token classifier with a WordPiece tokenizer, saved (built here: no download)."""
    folder = tmp_path_factory.mktemp("bert")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"]
    BertTokenizer(vocab={token: i for i, token in enumerate(vocab)}).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=8, num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                        label2id={tag: i for i, tag in enumerate(TAGS)})
    BertForTokenClassification(config).eval().save_pretrained(folder)
    return folder


def test_another_model_gets_transformers_own_pipeline(bert_tagger):
    """For BERT the registered class hands over to transformers' own `TokenClassificationPipeline` (the object is
    of that very class, as before the registration), and an empty text gives `[]` there: what ours now does."""
    for name in ("token-classification", "ner"):
        ner = pipeline(name, model=str(bert_tagger))
        assert type(ner) is TokenClassificationPipeline
    assert ner("") == [] and ner("   ") == []
    result = ner(["the cat sat", ""], batch_size=2, ignore_labels=[])
    assert len(result) == 2 and len(result[0]) == 3 and result[1] == []
    direct = CoveTokenClassificationPipeline(model=ner.model, tokenizer=ner.tokenizer)
    assert type(direct) is TokenClassificationPipeline


def test_a_tokenizer_of_another_vocabulary_is_refused(tokenizer):
    other = build_cove_tokenizer(WORDS[::-1])
    with pytest.raises(ValueError, match="vocabulary"):
        CoveTokenClassificationPipeline(model=tiny_tagger(tokenizer), tokenizer=other)
