"""Chunk-level precision / recall / F1 (and token accuracy) as an `evaluate` module that loads offline by path:

    evaluate.load("modeling_cove/metrics/seqeval_cove")
    # -> {"precision", "recall", "f1", "accuracy": float in [0, 1], "per_type": {type: {...}}}

A thin wrapper of `seqeval` (1.2.2). One list of tags per sentence. In the default mode (`mode=None`) chunks are
found as the CoNLL shared tasks' `conlleval` script finds them: a chunk starts at `B-X`, or at `I-X` after `O` or
after a chunk of another type; it ends before `O`, before a `B-`, or before a change of type; a predicted chunk is
correct when the gold chunk with the same first word has the same last word and the same type. Precision, recall
and F1 are micro averages over all chunks; a figure whose denominator is 0 is 0 (`zero_division=0`). `accuracy`
is token accuracy (the fraction of tags equal to the gold tag, `O` included). `mode="strict"` with a `scheme`
("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU") counts only chunks that are well-formed under that scheme.
"""

import datasets
import evaluate
from seqeval import scheme as seqeval_schemes
from seqeval.metrics import accuracy_score, classification_report, f1_score, precision_score, recall_score

_DESCRIPTION = "Chunk-level precision, recall and F1 (conlleval-compatible by default) and token accuracy."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[list[str]]`): predicted tags, one list per sentence (e.g. IOB2: "B-NP", "I-NP", "O").
    references (`list[list[str]]`): gold tags, same shape.
    mode (`str`, *optional*): None (default, conlleval-compatible) or "strict".
    scheme (`str`, *optional*): the tagging scheme for mode="strict": "IOB1", "IOB2", "IOE1", "IOE2", "IOBES",
        "BILOU".
Returns:
    precision, recall, f1 (`float`): micro averages over chunks, in [0, 1].
    accuracy (`float`): token accuracy, in [0, 1].
    per_type (`dict`): for each chunk type (gold or predicted) its "precision", "recall", "f1" and "number" (gold
        chunks of that type).
Example:
    >>> metric = evaluate.load("modeling_cove/metrics/seqeval_cove")
    >>> result = metric.compute(predictions=[["B-NP", "I-NP", "O"]], references=[["B-NP", "I-NP", "B-VP"]])
    >>> result["precision"], result["recall"], result["accuracy"]
    (1.0, 0.5, 0.6666666666666666)
"""
SCHEMES = ("IOB1", "IOB2", "IOE1", "IOE2", "IOBES", "BILOU")
_AVERAGES = ("micro avg", "macro avg", "weighted avg")


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class SeqevalCove(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({
                "predictions": datasets.Sequence(datasets.Value("string")),
                "references": datasets.Sequence(datasets.Value("string")),
            }),
        )

    def _compute(self, predictions, references, mode=None, scheme=None):
        if len(predictions) != len(references):
            raise ValueError(f"{len(predictions)} predicted sentences but {len(references)} reference sentences")
        if not references:
            raise ValueError("chunk F1 of zero sentences is undefined: got no predictions")
        for row, (predicted, gold) in enumerate(zip(predictions, references)):
            if len(predicted) != len(gold):
                raise ValueError(f"sentence {row}: {len(predicted)} predicted tags but {len(gold)} reference tags")
        if mode not in (None, "strict"):
            raise ValueError(f"mode must be None (conlleval-compatible) or 'strict', got {mode!r}")
        if mode == "strict":
            if scheme not in SCHEMES:
                raise ValueError(f"mode='strict' needs scheme, one of {', '.join(SCHEMES)}; got {scheme!r}")
            scheme = getattr(seqeval_schemes, scheme)
        elif scheme is not None:
            raise ValueError("scheme only applies to mode='strict'")
        references, predictions = [list(s) for s in references], [list(s) for s in predictions]
        options = {"mode": mode, "scheme": scheme, "zero_division": 0}
        result = {
            "precision": float(precision_score(references, predictions, **options)),
            "recall": float(recall_score(references, predictions, **options)),
            "f1": float(f1_score(references, predictions, **options)),
            "accuracy": float(accuracy_score(references, predictions)),
            "per_type": {},
        }
        has_chunks = any(tag != "O" for sentence in references + predictions for tag in sentence)
        if has_chunks:
            report = classification_report(references, predictions, output_dict=True, **options)
            result["per_type"] = {
                name: {"precision": float(row["precision"]), "recall": float(row["recall"]),
                       "f1": float(row["f1-score"]), "number": int(row["support"])}
                for name, row in report.items() if name not in _AVERAGES
            }
        return result
