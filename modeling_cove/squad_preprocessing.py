"""SQuAD for the DCN: windowed pair tokenization with character offsets, training labels, answer extraction, and
the sliding-window word-overlap baseline (batching for training: `modeling_cove.training.data.collators`).

Long contexts are cut into overlapping windows (`max_length` tokens for question + context, consecutive windows
share `doc_stride` context tokens), so no part of a context is ever dropped. In training, a window whose context
part does not contain the whole answer is left out and COUNTED (`stats["windows_without_answer"]`); an example
none of whose windows contains the answer (an answer longer than the overlap) is counted in
`stats["examples_without_answer_window"]`. Nothing is dropped silently: the script prints and saves the counts.

The fast tokenizer's `offset_mapping` gives each token's character span in the ORIGINAL text (also with the
lower-casing normalizer), so a token span (s, e) maps back to `context[offsets[s][0]:offsets[e][1]]`.
"""

import math
import re
from collections import Counter
from typing import Optional, Sequence

import torch

from .modeling_cove_dcn import CONTEXT_SEGMENT, best_spans

__all__ = ["char_span_to_tokens", "check_text", "context_range", "DEFAULT_DOC_STRIDE", "DEFAULT_MAX_LENGTH",
           "DEFAULT_MAX_QUESTION_LENGTH", "extract_answers", "find_answer", "prepare_eval_features",
           "prepare_train_features", "sliding_window_answer", "tokenize_windows", "truncate_questions", "word_spans"]

DEFAULT_MAX_LENGTH = 384
DEFAULT_DOC_STRIDE = 128
DEFAULT_MAX_QUESTION_LENGTH = 64


# ----------------------------------------------------------------------------------------------------------------
# tokenization into windows
# ----------------------------------------------------------------------------------------------------------------


def check_text(text, name: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{name} is empty: the DCN needs a non-empty question and context")
    return text


def truncate_questions(tokenizer, questions: Sequence[str], max_question_length: int):
    """Cut each question after `max_question_length` tokens (at the end of that token's characters).
    Returns (questions, their token counts, number truncated). Raises ValueError for a question with no tokens."""
    encoded = tokenizer(list(questions), add_special_tokens=False, return_offsets_mapping=True)
    result, lengths, truncated = [], [], 0
    for question, offsets in zip(questions, encoded["offset_mapping"]):
        if not offsets:
            raise ValueError(f"question {question!r} has no tokens after tokenization")
        if len(offsets) > max_question_length:
            question = question[: offsets[max_question_length - 1][1]]
            truncated += 1
        result.append(question)
        lengths.append(min(len(offsets), max_question_length))
    return result, lengths, truncated


def tokenize_windows(tokenizer, questions: Sequence[str], contexts: Sequence[str],
                     max_length: int = DEFAULT_MAX_LENGTH, doc_stride: int = DEFAULT_DOC_STRIDE,
                     max_question_length: int = DEFAULT_MAX_QUESTION_LENGTH):
    """Tokenize (question, context) pairs into overlapping windows.

    Returns (encoding, questions_truncated): a `BatchEncoding` with one row per window holding `input_ids`,
    `token_type_ids`, `attention_mask`, `offset_mapping` and `overflow_to_sample_mapping` (window -> pair index),
    plus `encoding.sequence_ids(i)`. Raises ValueError for empty text or a non-fast tokenizer.
    """
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError("SQuAD preprocessing needs a fast tokenizer (character offsets)")
    if len(questions) != len(contexts):
        raise ValueError(f"{len(questions)} questions for {len(contexts)} contexts")
    for q, c in zip(questions, contexts):
        check_text(q, "question")
        check_text(c, "context")
    if max_question_length < 1 or doc_stride < 0:
        raise ValueError(f"max_question_length must be >= 1 and doc_stride >= 0, got {max_question_length}, "
                         f"{doc_stride}")
    questions, lengths, truncated = truncate_questions(tokenizer, questions, max_question_length)
    extra = tokenizer.num_special_tokens_to_add(pair=True)
    longest = max(lengths) + extra
    if max_length <= longest + doc_stride:
        raise ValueError(
            f"max_length ({max_length}) must exceed the question ({longest} tokens with special tokens) plus "
            f"doc_stride ({doc_stride}) so that every window holds new context tokens; raise max_length or lower "
            f"doc_stride / max_question_length"
        )
    encoding = tokenizer(
        list(questions),
        list(contexts),
        truncation="only_second",
        max_length=max_length,
        stride=doc_stride,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
        return_token_type_ids=True,
        padding=False,
    )
    for i in range(len(encoding["input_ids"])):
        if CONTEXT_SEGMENT not in encoding["token_type_ids"][i]:
            pair = encoding["overflow_to_sample_mapping"][i]
            raise ValueError(f"context {contexts[pair][:60]!r}... has no tokens after tokenization")
    return encoding, truncated


def context_range(sequence_ids) -> tuple:
    """(first, last) token index of the context (sequence id 1) in one window."""
    indices = [i for i, s in enumerate(sequence_ids) if s == 1]
    return indices[0], indices[-1]


def char_span_to_tokens(offsets, sequence_ids, start_char: int, end_char: int) -> tuple:
    """Token span of the context tokens covering characters [start_char, end_char) of the context in one window.

    Returns ((s, e), "ok"), or (None, "outside") when the answer is not wholly inside the window's context part,
    or (None, "no_token") when it covers no token (e.g. only whitespace, or an empty span end_char <= start_char)."""
    if end_char <= start_char:
        return None, "no_token"
    first, last = context_range(sequence_ids)
    if start_char < offsets[first][0] or end_char > offsets[last][1]:
        return None, "outside"
    start = next((i for i in range(first, last + 1) if offsets[i][1] > start_char), None)
    end = next((i for i in range(last, first - 1, -1) if offsets[i][0] < end_char), None)
    if start is None or end is None or end < start:
        return None, "no_token"
    return (start, end), "ok"


def find_answer(context: str, text: str, answer_start: int) -> Optional[int]:
    """Character start of `text` in `context`: `answer_start` when it matches, else the occurrence nearest to it
    (some datasets have shifted offsets), else None."""
    if context[answer_start: answer_start + len(text)] == text:
        return answer_start
    starts = [m.start() for m in re.finditer(re.escape(text), context)] if text else []
    return min(starts, key=lambda s: abs(s - answer_start)) if starts else None


def prepare_train_features(examples, tokenizer, max_length: int = DEFAULT_MAX_LENGTH,
                           doc_stride: int = DEFAULT_DOC_STRIDE,
                           max_question_length: int = DEFAULT_MAX_QUESTION_LENGTH, progress: bool = False):
    """SQuAD rows (dict of lists or a `datasets.Dataset`: question, context, answers{text, answer_start}) ->
    (features: dict of lists, stats: dict). Features are windows that contain the (first) answer, with
    `input_ids`, `token_type_ids`, `start_positions`, `end_positions` (input positions), `example_index`.

    Whitespace at either end of the gold answer text is left out of its character span before it is mapped to
    tokens (an answer "the old tree " ending the context still lies in the window that holds "the old tree").

    Skips are counted in `stats`, never silent: `empty_text` (empty question/context), `no_answer` (no gold
    answer), `answer_not_in_context` (answer text not found), `answer_not_tokenizable` (covers no token),
    `windows_without_answer`, `examples_without_answer_window`; `inexact_token_spans` counts answers whose token
    span reaches beyond the answer characters (kept; the EM ceiling shows in `stats`).
    """
    questions, contexts, answers = list(examples["question"]), list(examples["context"]), list(examples["answers"])
    stats = Counter(examples=len(questions))
    keep = []
    for i, (q, c, a) in enumerate(zip(questions, contexts, answers)):
        if not (isinstance(q, str) and q.strip() and isinstance(c, str) and c.strip()):
            stats["empty_text"] += 1
        elif not a["text"]:
            stats["no_answer"] += 1
        else:
            keep.append(i)
    features = {"input_ids": [], "token_type_ids": [], "start_positions": [], "end_positions": [],
                "example_index": []}
    chunks = range(0, len(keep), 1000)
    if progress:
        from tqdm.auto import tqdm

        chunks = tqdm(chunks, desc="tokenizing", unit=" x1000 examples")
    for begin in chunks:
        index = keep[begin: begin + 1000]
        encoding, truncated = tokenize_windows(tokenizer, [questions[i] for i in index],
                                               [contexts[i] for i in index], max_length, doc_stride,
                                               max_question_length)
        stats["questions_truncated"] += truncated
        found = {}
        for w, pair in enumerate(encoding["overflow_to_sample_mapping"]):
            example = index[pair]
            context, answer = contexts[example], answers[example]
            text = answer["text"][0]
            start_char = find_answer(context, text, answer["answer_start"][0])
            stats["windows"] += 1
            if start_char is None:
                found.setdefault(example, "answer_not_in_context")
                continue
            # leave surrounding whitespace out: it belongs to no token and may lie past the last one
            end_char = start_char + len(text.rstrip())
            start_char += len(text) - len(text.lstrip())
            span, reason = char_span_to_tokens(encoding["offset_mapping"][w], encoding.sequence_ids(w),
                                               start_char, end_char)
            if span is None:
                stats["windows_without_answer"] += 1
                if found.get(example) != "ok":
                    found[example] = "answer_not_tokenizable" if reason == "no_token" else \
                        found.get(example, "no_window")
                continue
            offsets = encoding["offset_mapping"][w]
            if context[offsets[span[0]][0]: offsets[span[1]][1]] != text.strip():
                stats["inexact_token_spans"] += 1
            found[example] = "ok"
            features["input_ids"].append(encoding["input_ids"][w])
            features["token_type_ids"].append(encoding["token_type_ids"][w])
            features["start_positions"].append(span[0])
            features["end_positions"].append(span[1])
            features["example_index"].append(example)
        for example, status in found.items():
            if status == "answer_not_in_context":
                stats["answer_not_in_context"] += 1
            elif status == "answer_not_tokenizable":
                stats["answer_not_tokenizable"] += 1
            elif status == "no_window":  # the answer is longer than the window overlap
                stats["examples_without_answer_window"] += 1
    stats["features"] = len(features["input_ids"])
    stats["examples_used"] = len(set(features["example_index"]))
    return features, dict(stats)


def prepare_eval_features(examples, tokenizer, max_length: int = DEFAULT_MAX_LENGTH,
                          doc_stride: int = DEFAULT_DOC_STRIDE,
                          max_question_length: int = DEFAULT_MAX_QUESTION_LENGTH):
    """All windows of every example (for prediction): dict of lists with `input_ids`, `token_type_ids`,
    `offset_mapping` (character spans into the context; None for question tokens) and `example_index`."""
    encoding, truncated = tokenize_windows(tokenizer, list(examples["question"]), list(examples["context"]),
                                           max_length, doc_stride, max_question_length)
    offsets = []
    for w in range(len(encoding["input_ids"])):
        seq = encoding.sequence_ids(w)
        offsets.append([tuple(o) if s == 1 else None for o, s in zip(encoding["offset_mapping"][w], seq)])
    return {
        "input_ids": encoding["input_ids"],
        "token_type_ids": encoding["token_type_ids"],
        "offset_mapping": offsets,
        "example_index": list(encoding["overflow_to_sample_mapping"]),
        "questions_truncated": truncated,
    }


def extract_answers(context: str, windows: list, max_answer_length: int = 15, top_k: int = 1) -> list:
    """Best answers over the windows of one example.

    windows: list of (start_logits (T,), end_logits (T,), offsets list with None outside the context).
    Returns up to `top_k` dicts {answer, score, start, end} (character offsets into `context`), best first;
    scores are P_start * P_end within a window. The answers are distinct character spans: a span found in several
    overlapping windows appears once, with its best score over those windows. Equal scores keep window order.
    """
    best_score = {}  # (start char, end char) -> best score over the windows
    for start_logits, end_logits, offsets in windows:
        length = len(offsets)
        mask = torch.tensor([o is not None for o in offsets], dtype=torch.bool)
        for s, e, p in best_spans(start_logits[:length], end_logits[:length], max_answer_length, top_k, mask):
            span = (offsets[s][0], offsets[e][1])
            if span not in best_score or p > best_score[span]:
                best_score[span] = p
    answers = [{"score": p, "start": start, "end": end, "answer": context[start:end]}
               for (start, end), p in best_score.items()]
    answers.sort(key=lambda a: -a["score"])
    return answers[:top_k]


# ----------------------------------------------------------------------------------------------------------------
# sliding-window word-overlap baseline
# ----------------------------------------------------------------------------------------------------------------

WORD_RE = re.compile(r"\w+(?:[-'.]\w+)*|[^\w\s]", re.UNICODE)
STOPWORDS = frozenset(
    "a an the of in on at to for from by with and or is are was were be been being do does did what which who whom "
    "whose when where why how that this these those it its as into than then there their they he she his her him "
    "i you we our your not no s 's".split()
)


def word_spans(text: str) -> list:
    """(lower-cased word, start char, end char) for each word or punctuation mark."""
    return [(m.group().lower(), m.start(), m.end()) for m in WORD_RE.finditer(text)]


def sliding_window_answer(question: str, context: str, window: int = 5, max_span: int = 4) -> dict:
    """Word-overlap baseline (after Richardson et al. 2013 / Rajpurkar et al. 2016's sliding window).

    Candidates are spans of 1..`max_span` context words that contain no question word and neither start nor end
    with a stop word or punctuation. A candidate scores the sum, over the distinct question content words found
    within `window` words on either side of it, of log(1 + 1 / count of the word in the context) (rare words
    count more). Best score wins (scores within 1e-12 are equal); ties go to the span with fewer words, then to the
    earlier one. Returns {answer, start, end, score} (character offsets into `context`; the first word when
    nothing matches).
    """
    words = word_spans(context)
    if not words:
        return {"answer": "", "start": 0, "end": 0, "score": 0.0}
    tokens = [w for w, _, _ in words]
    question_words = {w for w, _, _ in word_spans(question) if w not in STOPWORDS and any(ch.isalnum() for ch in w)}
    counts = Counter(tokens)
    weights = {w: math.log(1.0 + 1.0 / counts[w]) for w in question_words if w in counts}
    # prefix[w][i] = occurrences of w among tokens[:i]
    prefix = {}
    for w in weights:
        running, acc = [0], 0
        for t in tokens:
            acc += t == w
            running.append(acc)
        prefix[w] = running
    is_question = [t in question_words for t in tokens]
    bad_edge = [t in STOPWORDS or not any(ch.isalnum() for ch in t) for t in tokens]
    best = (-1.0, 0, 0)
    n = len(tokens)
    for s in range(n):
        if bad_edge[s] or is_question[s]:
            continue
        for e in range(s, min(n, s + max_span)):
            if is_question[e]:
                break
            if bad_edge[e]:
                continue
            lo, hi = max(0, s - window), min(n, e + 1 + window)
            score = sum(weight for w, weight in weights.items()
                        if prefix[w][hi] - prefix[w][e + 1] + prefix[w][s] - prefix[w][lo] > 0)
            better = score > best[0] + 1e-12
            tied = not better and score > best[0] - 1e-12
            if better or (tied and (e - s, s) < (best[2] - best[1], best[1])):  # fewer words, then earlier
                best = (score, s, e)
    score, s, e = best
    start, end = words[s][1], words[e][2]
    return {"answer": context[start:end], "start": start, "end": end, "score": max(score, 0.0)}
