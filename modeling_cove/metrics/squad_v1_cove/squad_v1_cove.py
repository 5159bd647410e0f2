"""SQuAD v1.1 exact match and F1 as an `evaluate` module that loads offline by path:

    evaluate.load("modeling_cove/metrics/squad_v1_cove")  # -> {"exact_match": 0..100, "f1": 0..100}

Same definition as the official v1.1 evaluation script (docs/paper.md §4): answers are normalised (lower-case, remove
punctuation, drop the articles a/an/the, collapse whitespace); EM = normalised strings equal; F1 = harmonic mean of
precision and recall of the normalised token multisets; each prediction takes the max over its gold answers; the
reported numbers are means over the questions, times 100. Input layout as the Hub `squad` metric.
"""

import re
import string
from collections import Counter

import datasets
import evaluate

_DESCRIPTION = "SQuAD v1.1 exact match and token F1 (official normalisation), both in percent."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[dict]`): `{"id": str, "prediction_text": str}` per question.
    references (`list[dict]`): `{"id": str, "answers": {"text": list[str], "answer_start": list[int]}}` per
        question; every predicted id must have a reference.
Returns:
    exact_match (`float`): percent of questions whose normalised prediction equals a normalised gold answer.
    f1 (`float`): mean over questions of the best token F1 against the gold answers, in percent.
Example:
    >>> metric = evaluate.load("modeling_cove/metrics/squad_v1_cove")
    >>> metric.compute(predictions=[{"id": "1", "prediction_text": "the Denver Broncos"}],
    ...                references=[{"id": "1", "answers": {"text": ["Denver Broncos"], "answer_start": [0]}}])
    {'exact_match': 100.0, 'f1': 100.0}
"""

PUNCTUATION = frozenset(string.punctuation)
ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)


def normalize_answer(text: str) -> str:
    """Lower-case, strip punctuation, drop the articles a/an/the, collapse whitespace (official v1.1 order)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in PUNCTUATION)
    text = ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match_score(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1_score(prediction: str, gold: str) -> float:
    """Token-multiset F1 of the normalised strings (0 when either side is empty and they differ)."""
    prediction_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    common = Counter(prediction_tokens) & Counter(gold_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(prediction_tokens)
    recall = overlap / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_scores(predictions: dict, golds: dict) -> dict:
    """predictions: id -> text; golds: id -> list of gold texts. Returns {"exact_match", "f1"} in percent."""
    missing = sorted(set(predictions) - set(golds))
    if missing:
        raise ValueError(f"{len(missing)} predicted ids have no reference, e.g. {missing[:3]}")
    if not predictions:
        raise ValueError("SQuAD scores of zero questions are undefined: got no predictions")
    exact = f1 = 0.0
    for qid, text in predictions.items():
        answers = golds[qid]
        if not answers:
            raise ValueError(f"question {qid!r} has no gold answer (SQuAD v1.1 always has one)")
        exact += max(exact_match_score(text, a) for a in answers)
        f1 += max(f1_score(text, a) for a in answers)
    return {"exact_match": 100.0 * exact / len(predictions), "f1": 100.0 * f1 / len(predictions)}


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SquadV1Cove(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="Rajpurkar et al. 2016, SQuAD: 100,000+ Questions for Machine Comprehension of Text.",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": {"id": datasets.Value("string"), "prediction_text": datasets.Value("string")},
                "references": {
                    "id": datasets.Value("string"),
                    "answers": datasets.features.Sequence(
                        {"text": datasets.Value("string"), "answer_start": datasets.Value("int32")}
                    ),
                },
            }),
        )

    def _compute(self, predictions, references):
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        golds = {r["id"]: list(r["answers"]["text"]) for r in references}
        texts = {p["id"]: p["prediction_text"] for p in predictions}
        if len(texts) != len(predictions):
            raise ValueError("prediction ids must be unique")
        return squad_scores(texts, golds)
