"""SQuAD preprocessing (offsets, windows, counted skips), answer extraction, the SQuAD v1.1 metric, the baseline,
and the question-answering pipeline: local name, trust_remote_code in a process without the package, bad input."""

import json
import math
import os
import site
import subprocess
import sys
import textwrap

import pytest
import torch

from conftest import require_data
from modeling_cove import CoveConfig, CoveForQuestionAnswering
from modeling_cove.squad_preprocessing import (
    extract_answers,
    prepare_eval_features,
    prepare_train_features,
    sliding_window_answer,
    tokenize_windows,
)
from modeling_cove.tokenization_cove import build_cove_tokenizer, moses_tokenize

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRIC_PATH = os.path.join(REPO, "modeling_cove", "metrics", "squad_v1_cove")


pytestmark = pytest.mark.usefixtures("single_thread")


def vocabulary(texts):
    words = []
    seen = set()
    for text in texts:
        for w in moses_tokenize(text):
            if w not in seen:
                seen.add(w)
                words.append(w)
    return words


def squad_slice(n_train=300):
    from modeling_cove.data import load_squad

    data = load_squad(require_data())
    return data["train"].select(range(n_train)), data["validation"]


def squad_metric():
    import evaluate

    return evaluate.load(METRIC_PATH)


# ----------------------------------------------------------------------------------------------------------------
# offsets -> answer text on real SQuAD dev examples
# ----------------------------------------------------------------------------------------------------------------


def test_train_features_round_trip_answer_text():
    train, _ = squad_slice(300)
    tokenizer = build_cove_tokenizer(vocabulary(list(train["context"]) + list(train["question"])))
    features, stats = prepare_train_features(train, tokenizer, max_length=200, doc_stride=64)
    assert stats["examples"] == 300 and stats["examples_used"] == 300  # every answer lies in some window
    encoding, _ = tokenize_windows(tokenizer, [train[i]["question"] for i in features["example_index"]],
                                   [train[i]["context"] for i in features["example_index"]], 10_000, 0)
    exact = 0
    for f, (start, end) in enumerate(zip(features["start_positions"], features["end_positions"])):
        row = train[features["example_index"][f]]
        ids = features["input_ids"][f]
        assert features["token_type_ids"][f][start] == 1 and features["token_type_ids"][f][end] == 1
        assert start <= end
        # the window's token ids at the span are the tokens of the answer text
        answer_tokens = moses_tokenize(row["answers"]["text"][0])
        span_tokens = tokenizer.convert_ids_to_tokens(ids[start:end + 1])
        unk = tokenizer.unk_token
        if [t if t in tokenizer.get_vocab() else unk for t in answer_tokens] == span_tokens:
            exact += 1
    # tokens that glue the answer to more text (e.g. "1990s" for "1990") are the only mismatches, and counted
    assert exact >= len(features["input_ids"]) - stats.get("inexact_token_spans", 0) - 5
    assert stats.get("inexact_token_spans", 0) <= 0.05 * len(features["input_ids"])


def test_eval_features_and_extract_answers_recover_gold_text():
    """One-hot logits on the gold tokens -> extract_answers -> the gold text (EM 100 through the metric)."""
    train, _ = squad_slice(120)
    tokenizer = build_cove_tokenizer(vocabulary(list(train["context"]) + list(train["question"])))
    labelled, stats = prepare_train_features(train, tokenizer, max_length=160, doc_stride=48)
    evalf = prepare_eval_features(train, tokenizer, max_length=160, doc_stride=48)
    windows = {}
    gold_span = {}
    for f, e in enumerate(labelled["example_index"]):
        gold_span.setdefault(e, (labelled["input_ids"][f], labelled["start_positions"][f],
                                 labelled["end_positions"][f]))
    for w, e in enumerate(evalf["example_index"]):
        ids, s, t = gold_span[e]
        n = len(evalf["input_ids"][w])
        start = torch.full((n,), -10.0)
        end = torch.full((n,), -10.0)
        if evalf["input_ids"][w] == ids:  # the labelled window
            start[s], end[t] = 10.0, 10.0
        windows.setdefault(e, []).append((start, end, evalf["offset_mapping"][w]))
    predictions = []
    for e, ws in windows.items():
        best = extract_answers(train[e]["context"], ws, max_answer_length=30)[0]
        assert train[e]["context"][best["start"]:best["end"]] == best["answer"]
        predictions.append({"id": train[e]["id"], "prediction_text": best["answer"]})
    references = [{"id": r["id"], "answers": r["answers"]} for r in train]
    scores = squad_metric().compute(predictions=predictions, references=references)
    # only answers that cover part of a token ("8" inside "18") can miss: the counted inexact spans
    ceiling = 100.0 * (1 - stats.get("inexact_token_spans", 0) / len(train))
    assert stats.get("inexact_token_spans", 0) <= 0.1 * len(train)
    assert scores["exact_match"] >= ceiling - 1e-6
    assert scores["f1"] >= scores["exact_match"]


def test_extract_answers_top_k_gives_distinct_spans_over_overlapping_windows():
    """Two windows share the token "c"; its span is kept once, with its better score, so top_k=3 reaches "a"."""
    context = "a b c d e"
    # position 0 stands for a question token (offset None); window 1 reads "a b c", window 2 "c d e"
    window_1 = [None, (0, 1), (2, 3), (4, 5)]
    window_2 = [None, (4, 5), (6, 7), (8, 9)]
    # log-probabilities as logits: the softmax over the context positions gives back the probabilities
    p_1 = torch.tensor([1.0, 0.2, 0.1, 0.7]).log()  # a, b, c (start and end alike)
    p_2 = torch.tensor([1.0, 0.6, 0.3, 0.1]).log()  # c, d, e
    windows = [(p_1, p_1, window_1), (p_2, p_2, window_2)]
    # single-token spans score P_start * P_end: c 0.7^2 = 0.49 (window 1) and 0.6^2 = 0.36 (window 2), d 0.09,
    # a 0.04, b 0.01, e 0.01
    answers = extract_answers(context, windows, max_answer_length=1, top_k=3)
    assert [(a["answer"], a["start"], a["end"]) for a in answers] == [("c", 4, 5), ("d", 6, 7), ("a", 0, 1)]
    assert [a["score"] for a in answers] == pytest.approx([0.49, 0.09, 0.04], abs=2e-7, rel=0)
    # all distinct spans when top_k exceeds them: the five tokens, c once
    answers = extract_answers(context, windows, max_answer_length=1, top_k=10)
    assert [a["answer"] for a in answers] == ["c", "d", "a", "b", "e"]


def test_long_context_windows_cover_everything_and_keep_the_answer():
    context = " ".join(f"w{i}" for i in range(100)) + " The answer is Paris ."
    question = "What is the answer ?"
    tokenizer = build_cove_tokenizer(vocabulary([context, question]))
    encoding, _ = tokenize_windows(tokenizer, [question], [context], max_length=30, doc_stride=10)
    assert len(encoding["input_ids"]) > 4
    covered = set()
    for w in range(len(encoding["input_ids"])):
        seq = encoding.sequence_ids(w)
        assert len(encoding["input_ids"][w]) <= 30 and seq[:5] == [0] * 5  # the question is in every window
        covered |= {tuple(o) for o, s in zip(encoding["offset_mapping"][w], seq) if s == 1}
    assert len(covered) == len(moses_tokenize(context))
    start = context.index("Paris")
    rows = {"question": [question], "context": [context], "answers": [{"text": ["Paris"], "answer_start": [start]}]}
    features, stats = prepare_train_features(rows, tokenizer, max_length=30, doc_stride=10)
    assert stats["windows_without_answer"] == stats["windows"] - len(features["input_ids"]) > 0
    for f in range(len(features["input_ids"])):
        s = features["start_positions"][f]
        assert tokenizer.convert_ids_to_tokens(features["input_ids"][f][s]) == "paris"


def test_preprocessing_counts_every_skip():
    context = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu"
    tokenizer = build_cove_tokenizer(vocabulary([context, "which greek letter comes first ?"]))
    long_answer = "beta gamma delta epsilon zeta eta theta"
    rows = {
        "question": ["which first ?", "   ", "which ?", "which ?", "which ?",
                     " ".join(["which"] * 20) + " ?"],
        "context": [context] * 6,
        "answers": [
            {"text": ["alpha"], "answer_start": [0]},
            {"text": ["alpha"], "answer_start": [0]},  # empty question
            {"text": ["omega"], "answer_start": [3]},  # answer not in the context
            {"text": [], "answer_start": []},  # no gold answer
            {"text": [long_answer], "answer_start": [6]},  # longer than the window overlap
            {"text": ["mu"], "answer_start": [context.index("mu")]},  # question longer than 4 tokens: cut
        ],
    }
    # windows of 9 tokens: question (<= 4 tokens after cutting) + 5 context tokens, 2 shared between windows
    features, stats = prepare_train_features(rows, tokenizer, max_length=9, doc_stride=2, max_question_length=4)
    assert stats["empty_text"] == 1
    assert stats["answer_not_in_context"] == 1
    assert stats["no_answer"] == 1
    assert stats["examples_without_answer_window"] == 1
    assert stats["questions_truncated"] == 1
    assert sorted(set(features["example_index"])) == [0, 5]
    # shifted answer_start: the nearest occurrence is used
    shifted = {"question": ["q ?"], "context": [context], "answers": [{"text": ["gamma"], "answer_start": [2]}]}
    features, stats = prepare_train_features(shifted, tokenizer, max_length=30, doc_stride=4)
    s = features["start_positions"][0]
    assert tokenizer.convert_ids_to_tokens(features["input_ids"][0][s]) == "gamma"


def test_train_features_leave_whitespace_around_the_answer_out():
    """A gold answer with a trailing space at the very end of the context, or a leading space, maps to the tokens of
    its words; an answer of only whitespace covers no token and is counted."""
    context = "The dog slept under the old tree "
    tokenizer = build_cove_tokenizer(vocabulary([context, "Where did the dog sleep ?"]))
    rows = {
        "question": ["Where did the dog sleep ?"] * 4,
        "context": [context] * 4,
        "answers": [
            {"text": ["the old tree"], "answer_start": [20]},
            {"text": ["the old tree "], "answer_start": [20]},  # ends at the context's last character (33)
            {"text": [" the old tree"], "answer_start": [19]},
            {"text": [" "], "answer_start": [32]},  # whitespace only
        ],
    }
    features, stats = prepare_train_features(rows, tokenizer, max_length=40, doc_stride=5)
    assert features["example_index"] == [0, 1, 2]
    assert stats["answer_not_tokenizable"] == 1 and "examples_without_answer_window" not in stats
    assert "inexact_token_spans" not in stats  # all three map exactly onto "the old tree"
    # no special tokens: where did the dog sleep ? (0-5), then the context the(6) dog slept under the(10) old tree(12)
    assert features["start_positions"] == [10, 10, 10] and features["end_positions"] == [12, 12, 12]
    ids = features["input_ids"][0]
    assert tokenizer.convert_ids_to_tokens(ids[10:13]) == ["the", "old", "tree"]


def test_tokenize_windows_rejects_bad_input():
    tokenizer = build_cove_tokenizer(["a", "b"])
    with pytest.raises(ValueError, match="question is empty"):
        tokenize_windows(tokenizer, [" "], ["a b"])
    with pytest.raises(ValueError, match="context is empty"):
        tokenize_windows(tokenizer, ["a"], [""])
    with pytest.raises(TypeError, match="must be a string"):
        tokenize_windows(tokenizer, [None], ["a"])
    with pytest.raises(ValueError, match="must exceed the question"):
        tokenize_windows(tokenizer, ["a b a b"], ["a b"], max_length=6, doc_stride=3)


# ----------------------------------------------------------------------------------------------------------------
# metric and baseline
# ----------------------------------------------------------------------------------------------------------------


def test_squad_metric_normalisation_em_f1():
    metric = squad_metric()
    preds = [{"id": "1", "prediction_text": "The  Denver Broncos!"},
             {"id": "2", "prediction_text": "Carolina"},
             {"id": "3", "prediction_text": "an apple"}]
    refs = [{"id": "1", "answers": {"text": ["Denver Broncos"], "answer_start": [0]}},
            {"id": "2", "answers": {"text": ["Carolina Panthers", "Panthers"], "answer_start": [0, 9]}},
            {"id": "3", "answers": {"text": ["pear"], "answer_start": [0]}}]
    scores = metric.compute(predictions=preds, references=refs)
    # EM: 1, 0, 0; F1: 1, 2*(1*0.5)/(1.5) = 2/3, 0
    assert scores["exact_match"] == 100 / 3
    assert scores["f1"] == 100 * (1 + 2 / 3) / 3
    with pytest.raises(ValueError, match="no reference"):
        metric.compute(predictions=[{"id": "x", "prediction_text": "a"}], references=[refs[0]])


def test_sliding_window_baseline_picks_the_span_near_the_question_words():
    context = "Tom lives in Boston. The capital of France is Paris, a large city."
    # "Paris" has both "capital" and "france" within 4 words; "Boston" only "capital"
    result = sliding_window_answer("What is the capital of France?", context, window=4, max_span=1)
    assert result["answer"] == "Paris"
    assert context[result["start"]:result["end"]] == "Paris"


def test_sliding_window_baseline_ties_go_to_the_shorter_then_the_earlier_span():
    context = "apple banana cherry grape kiwi lemon mango olive paris"
    # the only question word, "paris" (word 8), occurs once: weight log(1 + 1/1) = log 2. With window 5 every
    # candidate ending at word 3 or later has it within reach, so all of them tie at log 2. The earliest is
    # "apple banana cherry grape" (words 0-3), the shortest are single words and the earliest of those is "grape".
    result = sliding_window_answer("paris?", context, window=5, max_span=4)
    assert (result["answer"], result["start"], result["end"]) == ("grape", 20, 25)
    assert result["score"] == math.log(2)
    # window 2: candidates must end at word 6 or later; "mango" (6) beats "mango olive" and "olive"
    assert sliding_window_answer("paris?", context, window=2, max_span=4)["answer"] == "mango"
    # a higher score still beats a shorter span: question words "lemon" (5) and "paris" (8), window 1. "kiwi",
    # "mango" (and spans ending at "kiwi") reach only "lemon", "olive" only "paris": log 2 each; "mango olive"
    # reaches both: 2 log 2
    result = sliding_window_answer("lemon paris?", context, window=1, max_span=4)
    assert result["answer"] == "mango olive" and result["score"] == 2 * math.log(2)


# ----------------------------------------------------------------------------------------------------------------
# pipeline
# ----------------------------------------------------------------------------------------------------------------

CONTEXT = "The cat sat on the mat. It was a sunny day in Paris, and the dog slept under the old tree."
QUESTIONS = ["Where did the cat sit?", "Where did the dog sleep?"]


def save_tiny_qa(path, texts=(CONTEXT, *QUESTIONS)):
    """A tiny DCN over the words of `texts` and its tokenizer, saved in `path`; returns the path."""
    tokenizer = build_cove_tokenizer(vocabulary(texts))
    torch.manual_seed(0)
    config = CoveConfig(vocab_size=len(tokenizer), word_vector_dim=8, hidden_size=4, dcn_hidden_size=8,
                        dcn_pool_size=2)
    CoveForQuestionAnswering(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def qa_checkpoint(tmp_path_factory):
    return save_tiny_qa(tmp_path_factory.mktemp("dcn-qa"))


@pytest.fixture(scope="module")
def local_qa(qa_checkpoint):
    from transformers import pipeline

    return pipeline("cove-question-answering", model=str(qa_checkpoint))


def check_answer(answer, context=CONTEXT):
    assert set(answer) == {"answer", "score", "start", "end"}
    assert context[answer["start"]:answer["end"]] == answer["answer"]
    assert 0.0 < answer["score"] <= 1.0


def test_pipeline_local_name(local_qa):
    answer = local_qa(question=QUESTIONS[0], context=CONTEXT)
    check_answer(answer)
    assert local_qa({"question": QUESTIONS[0], "context": CONTEXT}) == answer
    assert local_qa(QUESTIONS[0], CONTEXT) == answer
    both = local_qa([{"question": q, "context": CONTEXT} for q in QUESTIONS])
    assert len(both) == 2 and both[0] == answer
    assert local_qa(question=QUESTIONS, context=[CONTEXT, CONTEXT]) == both
    # batching windows gives the same answers
    assert local_qa([{"question": q, "context": CONTEXT} for q in QUESTIONS], batch_size=2) == both


def test_a_list_of_questions_runs_longest_first_and_answers_in_input_order(local_qa, monkeypatch):
    """Questions run longest first (characters of question and context): the model sees the longest window first;
    the answers come back in the input order, each the one of its question asked alone."""
    short = "The cat sat on the mat."
    inputs = [{"question": QUESTIONS[0], "context": short}, {"question": QUESTIONS[1], "context": CONTEXT},
              {"question": QUESTIONS[0], "context": CONTEXT + " " + CONTEXT}]
    alone = [local_qa(x) for x in inputs]
    seen, real_forward = [], local_qa.model.forward

    def forward(*args, **kwargs):
        seen.append(kwargs["input_ids"].shape[-1])
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(local_qa.model, "forward", forward)
    assert local_qa(inputs) == alone
    assert seen == sorted(seen, reverse=True) and len(seen) == 3
    seen.clear()
    assert local_qa(inputs, batch_size=2) == alone
    assert len(seen) == 2


def test_model_takes_the_tokenizers_output_and_the_pipeline_answers_from_its_scores(local_qa):
    """What the tokenizer returns goes to the model as it is (return_dict=False: exactly to_tuple()); anything else
    (offset_mapping) is a TypeError naming it; the pipeline's answer is the best span of those scores."""
    from modeling_cove.modeling_cove_dcn import best_spans

    model, tokenizer = local_qa.model, local_qa.tokenizer
    encoding = tokenizer(QUESTIONS[1], CONTEXT, return_tensors="pt")
    assert set(encoding) == {"input_ids", "token_type_ids", "attention_mask"}
    output = model(**encoding)
    as_tuple = model(**encoding, return_dict=False)
    assert len(as_tuple) == len(output.to_tuple()) == 4
    assert all(torch.equal(a, b) for a, b in zip(as_tuple, output.to_tuple()))
    with_offsets = tokenizer(QUESTIONS[1], CONTEXT, return_tensors="pt", return_offsets_mapping=True)
    with pytest.raises(TypeError, match="offset_mapping"):
        model(**with_offsets)
    (start, end, score), = best_spans(output.start_logits[0], output.end_logits[0],
                                      max_answer_length=model.config.dcn_max_answer_length)
    offsets = with_offsets["offset_mapping"][0].tolist()
    answer = local_qa(question=QUESTIONS[1], context=CONTEXT)
    assert (answer["start"], answer["end"]) == (offsets[start][0], offsets[end][1])
    assert answer["score"] == pytest.approx(score, abs=0, rel=0)


def test_pipeline_top_k_and_max_answer_len(local_qa):
    answers = local_qa(question=QUESTIONS[0], context=CONTEXT, top_k=5, max_answer_len=2)
    assert len(answers) == 5
    assert [a["score"] for a in answers] == sorted((a["score"] for a in answers), reverse=True)
    assert answers[0] == local_qa(question=QUESTIONS[0], context=CONTEXT, max_answer_len=2)
    for a in answers:
        check_answer(a)
        assert 1 <= len(moses_tokenize(a["answer"])) <= 2


def test_pipeline_reads_long_context_in_windows(local_qa):
    long_context = " ".join([CONTEXT] * 30)  # ~700 tokens, far beyond max_seq_len
    answer = local_qa(question=QUESTIONS[1], context=long_context, max_seq_len=64, doc_stride=16)
    check_answer(answer, long_context)
    preprocessed = list(local_qa.preprocess({"question": QUESTIONS[1], "context": long_context}, max_seq_len=64,
                                            doc_stride=16))
    assert len(preprocessed) > 10 and preprocessed[-1]["is_last"] and not preprocessed[0]["is_last"]


def test_pipeline_doc_stride_defaults_to_half_of_max_seq_len(local_qa):
    """With only max_seq_len given, doc_stride is min(max_seq_len // 2, 128): consecutive windows share that many
    context tokens. An explicit doc_stride too large for max_seq_len is an error."""
    long_context = " ".join([CONTEXT] * 60)  # ~1,400 tokens
    for max_seq_len, shared in ((100, 50), (400, 128)):
        windows = list(local_qa.preprocess({"question": QUESTIONS[1], "context": long_context},
                                           max_seq_len=max_seq_len))
        assert len(windows) > 2 and all(w["input_ids"].shape[1] <= max_seq_len for w in windows)
        first = [o for o in windows[0]["offsets"].spans if o is not None]
        second = [o for o in windows[1]["offsets"].spans if o is not None]
        assert first[-shared:] == second[:shared] and first[-shared - 1] != second[0]
    check_answer(local_qa(question=QUESTIONS[1], context=long_context, max_seq_len=100), long_context)
    with pytest.raises(ValueError, match=r"max_length \(100\) must exceed the question .* doc_stride \(128\)"):
        local_qa(question=QUESTIONS[1], context=long_context, max_seq_len=100, doc_stride=128)


def test_pipeline_bad_input(local_qa):
    assert local_qa([]) == []  # a list in, as many answers out
    with pytest.raises(ValueError, match="question is empty"):
        local_qa(question="  ", context=CONTEXT)
    with pytest.raises(ValueError, match="context is empty"):
        local_qa(question=QUESTIONS[0], context="")
    with pytest.raises(ValueError, match="'question' and 'context'"):
        local_qa({"text": "a"})
    with pytest.raises(ValueError, match="needs a question and a context"):
        local_qa()
    with pytest.raises(TypeError, match="unknown question-answering arguments"):
        local_qa(question=QUESTIONS[0], context=CONTEXT, topk=2)
    with pytest.raises(ValueError, match="top_k must be a positive integer"):
        local_qa(question=QUESTIONS[0], context=CONTEXT, top_k=0)
    with pytest.raises(ValueError, match="top_k must be a positive integer, got True"):  # a bool is no count
        local_qa(question=QUESTIONS[0], context=CONTEXT, top_k=True)


def test_pipeline_remote_code_without_the_package(qa_checkpoint, local_qa, tmp_path):
    """A fresh interpreter that cannot import modeling_cove: `python -I -S` (no PYTHONPATH, no cwd on sys.path, no
    site processing, so the editable install's .pth finder is not loaded) with only the site-packages directories
    added by hand. It asserts that modeling_cove is not importable, then loads the pipeline from the checkpoint."""
    paths = [p for p in site.getsitepackages() if os.path.isdir(p)]
    code = textwrap.dedent(f"""
        import sys, json, importlib.util
        sys.path.extend({paths!r})
        assert importlib.util.find_spec("modeling_cove") is None, "modeling_cove must not be importable here"
        from transformers import pipeline
        qa = pipeline("question-answering", model={str(qa_checkpoint)!r}, trust_remote_code=True)
        out = [qa(question=q, context={CONTEXT!r}) for q in {QUESTIONS!r}]
        assert not any(m == "modeling_cove" or m.startswith("modeling_cove.") for m in sys.modules)
        print("RESULT" + json.dumps({{"answers": out, "class": type(qa).__module__ + "." + type(qa).__name__}}))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.split("RESULT", 1)[1])
    assert result["class"].startswith("transformers_modules.") and result["class"].endswith(
        "pipeline_cove.CoveQuestionAnsweringPipeline")
    for remote, question in zip(result["answers"], QUESTIONS):
        local = local_qa(question=question, context=CONTEXT)
        assert (remote["answer"], remote["start"], remote["end"]) == (local["answer"], local["start"], local["end"])
        assert remote["score"] == pytest.approx(local["score"], abs=0, rel=0)


def test_pipeline_question_answering_name_with_package_imported(qa_checkpoint, local_qa):
    """With the package imported, the checkpoint's custom pipeline still answers to "question-answering"."""
    from transformers import pipeline

    qa = pipeline("question-answering", model=str(qa_checkpoint), trust_remote_code=True)
    assert qa(question=QUESTIONS[0], context=CONTEXT) == local_qa(question=QUESTIONS[0], context=CONTEXT)
    with open(os.path.join(qa_checkpoint, "config.json")) as f:
        assert "question-answering" in json.load(f)["custom_pipelines"]
