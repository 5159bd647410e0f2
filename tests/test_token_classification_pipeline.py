"""`CoveTokenClassificationPipeline` (modeling_cove/pipeline_cove.py) over a tiny `CoveForTokenClassification`:
raw text with capitals and punctuation under every aggregation strategy (`word` as written, "," a word of its own,
never inside an entity it is not tagged into), pre-split input (a word's later tokens are its sub-words), batching,
and what `pipeline("token-classification", model=dir)` does with and without `trust_remote_code=True`. The expected
results are computed here by hand from the logits the model gives each token (its forward is wrapped to return a
fixed table of logits per token id, after running the real model on the same inputs)."""

import json
import warnings

import numpy as np
import pytest
import torch
from transformers import TokenClassificationPipeline, pipeline
from transformers.modeling_outputs import TokenClassifierOutput

import modeling_cove  # noqa: F401  (registers "cove-token-classification")
from modeling_cove import CoveConfig, CoveForTokenClassification, CoveTokenClassificationPipeline
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


def tiny_tagger(tokenizer) -> CoveForTokenClassification:
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=8, tagger_hidden_size=6,
                        tagger_module_dim=5, num_labels=len(TAGS), id2label=dict(enumerate(TAGS)),
                        label2id={tag: i for i, tag in enumerate(TAGS)},
                        vocabulary_fingerprint=vocabulary_fingerprint(tokenizer))
    return CoveForTokenClassification(config).eval()


@pytest.fixture(scope="module")
def table(tokenizer) -> torch.Tensor:
    """(vocab, labels) logits by token id."""
    rows = torch.tensor([DEFAULT_LOGITS] * len(tokenizer))
    for token, logits in LOGITS.items():
        rows[tokenizer.convert_tokens_to_ids(token)] = torch.tensor(logits)
    return rows


@pytest.fixture
def fixed(tokenizer, table, monkeypatch):
    """A pipeline whose model gives each token the logits of `table` (the real forward still runs on the same
    inputs and its checks apply)."""
    model = tiny_tagger(tokenizer)
    real_forward = model.forward

    def forward(input_ids=None, attention_mask=None, **kwargs):
        real = real_forward(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
        return TokenClassifierOutput(logits=table[input_ids] + 0 * real.logits)

    monkeypatch.setattr(model, "forward", forward)
    return CoveTokenClassificationPipeline(model=model, tokenizer=tokenizer)


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
        assert float(entity["score"]) == pytest.approx(token_scores(token).max(), abs=1e-6)
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
        assert float(entity["score"]) == pytest.approx(token_scores(token)[1], abs=1e-6)


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
    assert float(entity["score"]) == pytest.approx(expected, abs=1e-6)


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
                                                                abs=1e-6)
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
        assert [float(e["score"]) for e in a] == pytest.approx([float(e["score"]) for e in b], abs=1e-6)
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
        assert [float(e["score"]) for e in a] == pytest.approx([float(e["score"]) for e in b], abs=1e-6)
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


@pytest.fixture(scope="module")
def saved_tagger(tokenizer, tmp_path_factory):
    folder = tmp_path_factory.mktemp("tagger")
    tiny_tagger(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_pipeline_by_name_needs_trust_remote_code_or_the_local_name(saved_tagger, tokenizer):
    """A saved tagger records its pipeline as `custom_pipelines["token-classification"]`: transformers then refuses
    `pipeline("token-classification", model=dir)` without trust_remote_code=True, even with the package imported;
    with it, it runs the pipeline the folder ships; "cove-token-classification" (registered by
    `import modeling_cove`) and `pipeline_class=` need no remote code. All give the same results."""
    config = json.loads((saved_tagger / "config.json").read_text())
    assert config["custom_pipelines"]["token-classification"]["impl"] == \
        "pipeline_cove.CoveTokenClassificationPipeline"
    assert (saved_tagger / "pipeline_cove.py").is_file()
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline("token-classification", model=str(saved_tagger))
    with pytest.raises(ValueError, match="trust_remote_code=True"):
        pipeline("token-classification", model=str(saved_tagger), trust_remote_code=False)
    remote = pipeline("token-classification", model=str(saved_tagger), trust_remote_code=True)
    local = pipeline("cove-token-classification", model=str(saved_tagger))
    chosen = pipeline("token-classification", model=str(saved_tagger),
                      pipeline_class=CoveTokenClassificationPipeline)
    assert type(remote).__name__ == "CoveTokenClassificationPipeline"
    assert type(remote).__module__.startswith("transformers_modules.")
    assert type(local) is CoveTokenClassificationPipeline and type(chosen) is CoveTokenClassificationPipeline
    for strategy in STRATEGIES:
        reference = run_quietly(local, TEXT, aggregation_strategy=strategy, ignore_labels=[])
        assert all(e["word"] == TEXT[e["start"]:e["end"]] for e in reference)
        for other in (remote, chosen):
            result = run_quietly(other, TEXT, aggregation_strategy=strategy, ignore_labels=[])
            assert strip(result) == strip(reference)
            assert [float(e["score"]) for e in result] == pytest.approx([float(e["score"]) for e in reference],
                                                                        abs=1e-6)


def test_a_tokenizer_of_another_vocabulary_is_refused(tokenizer):
    other = build_cove_tokenizer(WORDS[::-1])
    with pytest.raises(ValueError, match="vocabulary"):
        CoveTokenClassificationPipeline(model=tiny_tagger(tokenizer), tokenizer=other)
