"""Tests of the CoVe word-level fast tokenizer (modeling_cove/tokenization_cove.py)."""

import hashlib
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoTokenizer

from conftest import REPO
from modeling_cove import CoveConfig, CoveModel
from modeling_cove.build import create_cove_checkpoint
from modeling_cove.tokenization_cove import (
    DEFAULT_MODEL_MAX_LENGTH,
    SPECIAL_TOKENS,
    build_cove_tokenizer,
    check_tokenizer_matches,
    moses_tokenize,
    vocabulary_fingerprint,
)

# (text, expected lower-cased tokens), written by hand from the Moses rules (and checked against sacremoses 0.2.0)
HAND_PICKED = [
    ("I didn't know he's here.", ["i", "didn", "'t", "know", "he", "'s", "here", "."]),
    ("We're sure they'll say I'd've gone.",  # Moses' match consumed the "d": "'d've" stays one token
     ["we", "'re", "sure", "they", "'ll", "say", "i", "'d've", "gone", "."]),
    ("It costs 5,300 dollars, or 1,000,000 yen.",
     ["it", "costs", "5,300", "dollars", ",", "or", "1,000,000", "yen", "."]),
    ("The U.S. is big. Mr. Smith went to Washington.",
     ["the", "u.s.", "is", "big", ".", "mr.", "smith", "went", "to", "washington", "."]),
    ("Wait... what?! \"Quoted\" text.", ["wait", "...", "what", "?", "!", '"', "quoted", '"', "text", "."]),
    ("A well-known e-mail: foo@bar.com, see http://x.org/a.html .",
     ["a", "well-known", "e-mail", ":", "foo", "@", "bar.com", ",", "see", "http", ":", "/", "/", "x.org", "/",
      "a.html", "."]),
    ("rock'n'roll in the 1990's and '90s", ["rock", "'n'roll", "in", "the", "1990", "'s", "and", "'", "90s"]),
    ("the dogs' toys, 'tis said", ["the", "dogs", "'", "toys", ",", "'", "tis", "said"]),
    ("He said: end. the next", ["he", "said", ":", "end.", "the", "next"]),  # period kept before lower case
    ("No. 5 is No. Good", ["no.", "5", "is", "no", ".", "good"]),  # numeric-only prefix
    ("It was good.I liked it.", ["it", "was", "good.i", "liked", "it", "."]),
    ("Ph.D. students (Dr. No) left.", ["ph.d.", "students", "(", "dr.", "no", ")", "left", "."]),
    ("He's 5'6\" -- really?", ["he", "'s", "5", "'", "6", '"', "--", "really", "?"]),
    ("This is it.' he said", ["this", "is", "it", ".", "'", "he", "said"]),
    ("x.'", ["x", ".", "'"]),
    ("  spaces \t\n here  ", ["spaces", "here"]),
    ("Hmm.. O'Brien's", ["hmm", "..", "o", "'brien", "'s"]),
    ("a,,5 and 3,4,", ["a", ",", ",5", "and", "3,4", ","]),
]


def offsets_of(text, tokens):
    """Hand reference: each token found left to right in `text` (case-insensitively)."""
    out, start, lowered = [], 0, text.lower()
    for token in tokens:
        start = lowered.index(token, start)
        out.append((start, start + len(token)))
        start += len(token)
    return out


@pytest.fixture(scope="module")
def vocab_words():
    words = sorted({t for _, tokens in HAND_PICKED for t in tokens})
    return words + ["the", "cat", "sat", "on", "mat", "The", "Cat"]


@pytest.fixture(scope="module")
def tok(vocab_words):
    return build_cove_tokenizer(vocab_words, model_max_length=16)


@pytest.mark.parametrize("text,expected", HAND_PICKED)
def test_moses_tokenize_hand_picked(text, expected):
    assert moses_tokenize(text) == expected


@pytest.mark.parametrize("text,expected", HAND_PICKED)
def test_fast_tokenizer_tokens_and_offsets(tok, text, expected):
    encoding = tok(text, return_offsets_mapping=True)
    assert tok.convert_ids_to_tokens(encoding["input_ids"]) == expected
    assert [tuple(o) for o in encoding["offset_mapping"]] == offsets_of(text, expected)
    for (start, end), token in zip(encoding["offset_mapping"], expected):
        assert text[start:end].lower() == token


def test_offsets_exact_with_inserted_spaces_and_case():
    tokenizer = build_cove_tokenizer(["i", "didn", "'t", "."])
    text = "  I  DIDN'T.\tİstanbul..."
    encoding = tokenizer(text, return_offsets_mapping=True)
    pieces = [text[a:b] for a, b in encoding["offset_mapping"]]
    assert pieces == ["I", "DIDN", "'T", ".", "İstanbul", "..."]
    assert moses_tokenize(text) == ["i", "didn", "'t", ".", "i̇stanbul", "..."]  # Python's "İ".lower()
    assert moses_tokenize(text, lowercase=False) == pieces


def test_vocabulary_ids():
    tokenizer = build_cove_tokenizer(["the", "cat", "the", "<unk>", "sat"])
    vocab = tokenizer.get_vocab()
    assert [vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3]
    assert vocab == {"<pad>": 0, "<unk>": 1, "<s>": 2, "</s>": 3, "the": 4, "cat": 5, "sat": 6}
    assert len(tokenizer) == 7
    assert (tokenizer.pad_token_id, tokenizer.unk_token_id, tokenizer.bos_token_id, tokenizer.eos_token_id) == (
        0, 1, 2, 3)
    assert tokenizer("The dog sat")["input_ids"] == [4, 1, 6]


def test_bad_arguments():
    with pytest.raises(TypeError, match="iterable of tokens"):
        build_cove_tokenizer("the cat")
    with pytest.raises(ValueError, match="non-empty strings"):
        build_cove_tokenizer(["the", ""])
    with pytest.raises(ValueError, match="model_max_length"):
        build_cove_tokenizer(["the"], model_max_length=0)
    with pytest.raises(TypeError, match="expects a str"):
        moses_tokenize(None)


def test_lowercasing_on_and_off():
    words = ["the", "cat", "The", "Cat", "."]
    lower = build_cove_tokenizer(words, lowercase=True)
    cased = build_cove_tokenizer(words, lowercase=False)
    assert lower("The Cat.")["input_ids"] == [4, 5, 8]
    assert cased("The Cat.")["input_ids"] == [6, 7, 8]
    assert cased("the CAT")["input_ids"] == [4, 1]
    assert moses_tokenize("The Cat.", lowercase=False) == ["The", "Cat", "."]


def test_period_rule_sees_original_case_when_lowercasing():
    # Moses keeps "X." before a lower-case word and splits it before an upper-case one; lower-casing happens
    # after that decision, as when the vectors were built (Moses on cased text, then lower()).
    assert moses_tokenize("He left. She stayed") == ["he", "left", ".", "she", "stayed"]
    assert moses_tokenize("He left. she stayed") == ["he", "left.", "she", "stayed"]
    assert moses_tokenize("Ask Mr. Bean") == ["ask", "mr.", "bean"]  # "Mr" is a prefix ...
    assert moses_tokenize("Ask mr. Bean") == ["ask", "mr", ".", "bean"]  # ... "mr" is not


def test_pair_encoding_token_type_ids(tok):
    encoding = tok("The cat sat", "on the mat .")
    ids = encoding["input_ids"]
    assert tok.convert_ids_to_tokens(ids) == ["the", "cat", "sat", "on", "the", "mat", "."]
    assert encoding["token_type_ids"] == [0, 0, 0, 1, 1, 1, 1]
    assert encoding["attention_mask"] == [1] * 7
    batch = tok(["The cat", "sat"], ["on the mat", ""], padding=True)
    assert batch["input_ids"][1] == [tok.convert_tokens_to_ids("sat")] + [0] * 4
    assert batch["token_type_ids"] == [[0, 0, 1, 1, 1], [0, 0, 0, 0, 0]]  # padding has type 0
    assert batch["attention_mask"] == [[1, 1, 1, 1, 1], [1, 0, 0, 0, 0]]


def test_add_eos():
    tokenizer = build_cove_tokenizer(["a", "b"], add_eos=True, model_max_length=4)
    assert tokenizer("a b")["input_ids"] == [4, 5, 3]
    pair = tokenizer("a", "b b")
    assert pair["input_ids"] == [4, 3, 5, 5, 3]
    assert pair["token_type_ids"] == [0, 0, 1, 1, 1]
    assert tokenizer("")["input_ids"] == [3]
    # truncation keeps the </s>
    assert tokenizer("a b a b a b", truncation=True)["input_ids"] == [4, 5, 4, 3]


def test_model_max_length_truncation(tok):
    text = " ".join(["the cat sat on the mat ."] * 4)  # 28 tokens
    assert tok.model_max_length == 16
    assert len(tok(text)["input_ids"]) == 28  # no truncation unless asked (transformers' convention)
    truncated = tok(text, truncation=True)["input_ids"]
    assert truncated == tok(text)["input_ids"][:16]
    with pytest.raises(Exception, match="Sequence to truncate too short"):  # the first alone is too long
        tok(text, "the cat", truncation="only_second")
    pair = tok("the cat", text, truncation=True)
    assert len(pair["input_ids"]) == 16 and pair["token_type_ids"][:2] == [0, 0] and pair["token_type_ids"][2] == 1


def test_empty_and_whitespace_input(tok):
    for text in ["", " ", "\t\n  \u00a0"]:
        assert moses_tokenize(text) == []
        assert tok(text)["input_ids"] == []
    batch = tok(["the cat", "   "], padding=True, return_tensors="pt")
    assert batch["input_ids"].tolist() == [[tok.convert_tokens_to_ids("the"), tok.convert_tokens_to_ids("cat")],
                                           [0, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1], [0, 0]]


def test_save_and_autotokenizer_round_trip(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert config["model_max_length"] == 16 and config["padding_side"] == "right"
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    assert type(loaded).__module__.startswith("transformers.")  # the stock class, no custom code
    texts = [text for text, _ in HAND_PICKED]
    pairs = texts[1:] + texts[:1]
    assert loaded(texts, pairs, padding=True)["input_ids"] == tok(texts, pairs, padding=True)["input_ids"]
    assert loaded(texts, pairs, padding=True)["token_type_ids"] == tok(texts, pairs, padding=True)["token_type_ids"]
    assert loaded.get_vocab() == tok.get_vocab()
    assert (loaded.model_max_length, loaded.pad_token, loaded.unk_token) == (16, "<pad>", "<unk>")


def test_special_token_strings_in_text_are_plain_text(tok, tmp_path):
    """"<s>", "</s>", "<pad>" written in raw text are text, split as `moses_tokenize` splits them (no BOS, EOS or
    padding id inside a sentence, no token dropped from an MT loss), also after save -> AutoTokenizer; `add_eos`
    still appends the real `</s>`."""
    text = "strike <s>the</s> cat the<pad>mat"
    tokens = moses_tokenize(text)
    assert tokens == ["strike", "<", "s", ">", "the", "<", "/", "s", ">", "cat", "the", "<", "pad", ">", "mat"]
    expected = tok.convert_tokens_to_ids(tokens)
    assert tok(text)["input_ids"] == expected and tok(text)["attention_mask"] == [1] * len(tokens)
    assert not {tok.pad_token_id, tok.bos_token_id, tok.eos_token_id} & set(expected)
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)(text)["input_ids"] == expected
    with_eos = build_cove_tokenizer(["cat", "the"], add_eos=True)
    assert with_eos.convert_ids_to_tokens(with_eos("the </s> cat")["input_ids"]) == [
        "the", "<unk>", "<unk>", "<unk>", "<unk>", "cat", "</s>"]


def test_saved_tokenizer_loads_without_sacremoses_or_package(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    text = "I didn't know Mr. Smith's dogs' toys cost 5,300 dollars."
    expected = tok(text)["input_ids"]
    code = textwrap.dedent(f"""
        import sys
        sys.modules["sacremoses"] = None      # importing it would fail
        sys.modules["modeling_cove"] = None
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(tmp_path)!r})
        print(tok({text!r})["input_ids"])
    """)
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH="")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                            cwd=str(tmp_path))
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == str(expected)


def test_fast_tokenizer_equals_moses_tokenize_on_real_text(data_dir):
    from instruments import tokenizer_agreement as ta

    texts = ta.read_imdb(data_dir, 20) + ta.read_trec(data_dir, 50) + ta.read_sst_trees(data_dir, 50)
    expected = [moses_tokenize(text) for text in texts]
    tokenizer = build_cove_tokenizer(sorted({t for tokens in expected for t in tokens}), model_max_length=10**5)
    for text, tokens in zip(texts, expected):
        encoding = tokenizer(text, return_offsets_mapping=True)
        assert tokenizer.convert_ids_to_tokens(encoding["input_ids"]) == tokens
        assert [text[a:b].lower() for a, b in encoding["offset_mapping"]] == tokens


def test_agreement_with_sacremoses_on_real_slice(data_dir):
    import sacremoses  # noqa: F401  (a dependency: a missing one fails here)
    from instruments import tokenizer_agreement as ta

    reference = ta.reference_tokenizer(lowercase=True)
    for name, texts in [("trec", ta.read_trec(data_dir, 200)), ("sst_trees", ta.read_sst_trees(data_dir, 200)),
                        ("sst_senteval", ta.read_sst_senteval(data_dir, 100)), ("imdb", ta.read_imdb(data_dir, 20))]:
        assert len(texts) >= 20
        identical = sum(moses_tokenize(text) == reference(text) for text in texts)
        assert identical / len(texts) >= 0.97, f"{name}: {identical}/{len(texts)} identical"


def test_hand_picked_match_sacremoses():
    """The hand-written expectations above are what sacremoses itself gives (guards the test data)."""
    import sacremoses
    moses = sacremoses.MosesTokenizer(lang="en")
    for text, expected in HAND_PICKED:
        assert [t.lower() for t in moses.tokenize(text, escape=False)] == expected, text


def test_repo_layout_flat_relative_imports():
    source = (REPO / "modeling_cove" / "tokenization_cove.py").read_text()
    assert "import sacremoses" not in source and "from sacremoses" not in source
    assert "from modeling_cove" not in source and "import modeling_cove" not in source


# ---------------------------------------------------------------------------------------------------------------
# Vocabulary fingerprint (a tokenizer of another checkpoint is an error, not silently wrong vectors)
# ---------------------------------------------------------------------------------------------------------------
FP_WORDS = ["the", "cat", "sat", "on", "mat", "."]


def reference_fingerprint(tokens: list) -> str:
    """By hand: '<count>:' + the first 16 hex digits of sha256 over the JSON token list in id order."""
    payload = json.dumps(tokens, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return f"{len(tokens)}:{hashlib.sha256(payload).hexdigest()[:16]}"


def test_vocabulary_fingerprint_is_the_sha256_of_the_id_ordered_tokens(tmp_path):
    tokenizer = build_cove_tokenizer(FP_WORDS)
    expected = reference_fingerprint(SPECIAL_TOKENS + FP_WORDS)
    assert vocabulary_fingerprint(tokenizer) == expected
    assert vocabulary_fingerprint(tokenizer, size=4) == reference_fingerprint(SPECIAL_TOKENS)
    # the same words in another order are other ids: another fingerprint; lowercasing does not enter it
    assert vocabulary_fingerprint(build_cove_tokenizer(FP_WORDS[::-1])) != expected
    assert vocabulary_fingerprint(build_cove_tokenizer(FP_WORDS, lowercase=False)) == expected
    # survives save -> AutoTokenizer (added tokens count, in id order)
    tokenizer.save_pretrained(tmp_path)
    assert vocabulary_fingerprint(AutoTokenizer.from_pretrained(tmp_path)) == expected
    tokenizer.add_tokens(["zebra"])
    assert vocabulary_fingerprint(tokenizer) == reference_fingerprint(SPECIAL_TOKENS + FP_WORDS + ["zebra"])
    assert vocabulary_fingerprint(tokenizer, size=len(FP_WORDS) + 4) == expected  # the prefix is unchanged
    with pytest.raises(ValueError, match=r"size must be an int in \[1, 11\]"):
        vocabulary_fingerprint(tokenizer, size=12)
    with pytest.raises(TypeError, match="get_vocab"):
        vocabulary_fingerprint(["the", "cat"])


def test_checkpoint_records_fingerprint_and_it_survives_save(tmp_path):
    model, tokenizer = create_cove_checkpoint(FP_WORDS, torch.randn(len(FP_WORDS) + 4, 6), hidden_size=3)
    assert model.config.vocabulary_fingerprint == reference_fingerprint(SPECIAL_TOKENS + FP_WORDS)
    config = CoveConfig(hidden_size=3)
    create_cove_checkpoint(FP_WORDS, torch.randn(len(FP_WORDS) + 4, 6), config=config)  # a given config: set in place
    assert config.vocabulary_fingerprint == model.config.vocabulary_fingerprint
    with pytest.raises(ValueError, match="may not set.*vocabulary_fingerprint"):
        create_cove_checkpoint(FP_WORDS, torch.randn(10, 6), vocabulary_fingerprint="10:0123456789abcdef")
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    loaded = CoveModel.from_pretrained(tmp_path)
    assert loaded.config.vocabulary_fingerprint == model.config.vocabulary_fingerprint
    check_tokenizer_matches(loaded.config, AutoTokenizer.from_pretrained(tmp_path))  # its own tokenizer: accepted


def test_check_tokenizer_matches():
    tokenizer = build_cove_tokenizer(FP_WORDS)
    config = CoveConfig(vocab_size=len(tokenizer), vocabulary_fingerprint=vocabulary_fingerprint(tokenizer))
    check_tokenizer_matches(config, tokenizer)
    recorded = config.vocabulary_fingerprint
    # same size, another vocabulary: both fingerprints and both sizes named
    other = build_cove_tokenizer(["the", "dog", "sat", "on", "mat", "."])
    with pytest.raises(ValueError, match="does not belong to this checkpoint") as error:
        check_tokenizer_matches(config, other)
    message = str(error.value)
    assert recorded in message and vocabulary_fingerprint(other) in message and "10 tokens" in message
    # the same words in another order: other ids for the same vectors
    with pytest.raises(ValueError, match="does not belong"):
        check_tokenizer_matches(config, build_cove_tokenizer(FP_WORDS[::-1]))
    # a smaller and a larger vocabulary
    smaller = build_cove_tokenizer(FP_WORDS[:3])
    with pytest.raises(ValueError, match=f"it has 7 tokens .*{vocabulary_fingerprint(smaller)}.*has 10 .*{recorded}"):
        check_tokenizer_matches(config, smaller)
    with pytest.raises(ValueError, match="does not belong.*12 tokens"):
        check_tokenizer_matches(config, build_cove_tokenizer(["a", "b"] + FP_WORDS))
    # tokens appended with add_tokens: accepted once the model has rows for them (resize_token_embeddings)
    tokenizer.add_tokens(["zebra", "okapi"])
    with pytest.raises(ValueError, match="12 tokens but the model has 10 word-vector rows.*resize_token_embeddings"):
        check_tokenizer_matches(config, tokenizer)
    config.vocab_size = len(tokenizer)
    check_tokenizer_matches(config, tokenizer)


def test_check_tokenizer_matches_accepts_configs_without_fingerprint(tmp_path):
    """Checkpoints saved before the field existed carry no fingerprint: not checked (any tokenizer passes)."""
    old = CoveConfig(vocab_size=10)
    assert old.vocabulary_fingerprint is None
    check_tokenizer_matches(old, build_cove_tokenizer(["x"]))
    # an old config.json (no such key) loads with None
    old.save_pretrained(tmp_path)
    raw = json.loads((tmp_path / "config.json").read_text())
    raw.pop("vocabulary_fingerprint", None)
    (tmp_path / "config.json").write_text(json.dumps(raw))
    assert CoveConfig.from_pretrained(tmp_path).vocabulary_fingerprint is None
    with pytest.raises(ValueError, match="vocabulary_fingerprint must be None or '<size>:<16"):
        CoveConfig(vocabulary_fingerprint="abc")


# ---------------------------------------------------------------------------------------------------------------
# model_max_length: the built tokenizer's limit is the BCN's (pipeline(..., truncation=True) bounds texts)
# ---------------------------------------------------------------------------------------------------------------
def test_default_model_max_length_is_the_bcn_limit_and_is_saved(tmp_path):
    assert DEFAULT_MODEL_MAX_LENGTH == 4096 == CoveConfig().bcn_max_length
    assert build_cove_tokenizer(FP_WORDS).model_max_length == DEFAULT_MODEL_MAX_LENGTH
    model, tokenizer = create_cove_checkpoint(FP_WORDS, torch.randn(len(FP_WORDS) + 4, 6), hidden_size=3)
    tokenizer.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "tokenizer_config.json").read_text())["model_max_length"] == 4096
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = " ".join(["the cat"] * 2500)  # 5000 tokens
    assert len(loaded(text)["input_ids"]) == 5000
    assert loaded(text, truncation=True)["input_ids"] == loaded(text)["input_ids"][:4096]
    with pytest.raises(ValueError, match="model_max_length must be an int >= 1"):
        build_cove_tokenizer(FP_WORDS, model_max_length=2.5)


def test_text_classification_pipeline_truncates_to_model_max_length():
    """`pipeline("text-classification")(text, truncation=True)` hands the BCN at most model_max_length tokens, the
    BCN's limit; the logits equal the model's on the first 4096 tokens."""
    from transformers import pipeline

    from modeling_cove import modeling_cove_bcn as bcn

    _, tokenizer = create_cove_checkpoint(FP_WORDS, torch.randn(len(FP_WORDS) + 4, 6), hidden_size=3)
    config = CoveConfig(vocab_size=len(tokenizer), word_vector_dim=6, hidden_size=3, bcn_feedforward_dim=4,
                        bcn_hidden_size=3, bcn_maxout_reductions=[2, 2], bcn_maxout_pool=2, num_labels=2,
                        id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1})
    torch.manual_seed(0)
    model = bcn.CoveForSequenceClassification(config).eval()
    seen = []
    model.register_forward_pre_hook(lambda module, args, kwargs: seen.append(kwargs["input_ids"].shape[1]),
                                    with_kwargs=True)
    text = " ".join(["the cat sat"] * 1700)  # 5100 tokens
    classify = pipeline("text-classification", model=model, tokenizer=tokenizer)
    out = classify(text, truncation=True, top_k=None)
    assert seen == [4096]
    ids = tokenizer(text, return_tensors="pt")["input_ids"][:, :4096]
    with torch.no_grad():
        probs = model(input_ids=ids).logits.softmax(-1)[0]
    assert {d["label"]: d["score"] for d in out} == pytest.approx({"neg": probs[0].item(), "pos": probs[1].item()},
                                                                  abs=2e-7, rel=0)


def test_a_tokenizer_of_another_vocabulary_is_refused_where_model_and_tokenizer_meet(tmp_path):
    """`encode`, the feature-extraction and question-answering pipelines refuse a tokenizer whose vocabulary is not
    the checkpoint's (ids that happen to be in range would silently read other words' vectors); the checkpoint's own
    tokenizer, and it with added tokens after `resize_token_embeddings` (the fingerprint is kept), pass."""
    from transformers import pipeline

    from modeling_cove import CoveForQuestionAnswering
    from modeling_cove.pipeline_cove import CoveFeatureExtractionPipeline, CoveQuestionAnsweringPipeline

    torch.manual_seed(0)
    model, tokenizer = create_cove_checkpoint(FP_WORDS, torch.randn(len(FP_WORDS) + 4, 6), hidden_size=3)
    other = build_cove_tokenizer(FP_WORDS[::-1])  # same size, ids in range, other words
    assert len(other) == len(tokenizer)
    with pytest.raises(ValueError, match="does not belong to this checkpoint"):
        model.encode([FP_WORDS[0]], other)
    assert model.encode([FP_WORDS[0]], tokenizer)[0].shape[0] == 1
    with pytest.raises(ValueError, match="does not belong to this checkpoint"):
        pipeline("cove-feature-extraction", model=model, tokenizer=other)
    assert pipeline("cove-feature-extraction", model=model, tokenizer=tokenizer)
    model.save_pretrained(tmp_path)
    qa_model = CoveForQuestionAnswering.from_pretrained(tmp_path, dcn_hidden_size=4)
    with pytest.raises(ValueError, match="does not belong to this checkpoint"):
        CoveQuestionAnsweringPipeline(model=qa_model, tokenizer=other)
    assert CoveQuestionAnsweringPipeline(model=qa_model, tokenizer=tokenizer).model is qa_model
    # added words + resize: the fingerprint covers the first ids, so it is kept and the check stays in force
    fingerprint = model.config.vocabulary_fingerprint
    tokenizer.add_tokens(["zebra"])
    model.resize_token_embeddings(len(tokenizer))
    assert model.config.vocabulary_fingerprint == fingerprint
    assert CoveFeatureExtractionPipeline(model=model, tokenizer=tokenizer).model is model
    other.add_tokens(["zebra"])
    with pytest.raises(ValueError, match="does not belong to this checkpoint"):
        model.encode(["zebra"], other)
