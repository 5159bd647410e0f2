"""Accuracy as an `evaluate` module that loads offline by path:

    evaluate.load("modeling_cove/metrics/accuracy_cove")  # -> {"accuracy": float in [0, 1]}

Accuracy = fraction of predictions equal to the reference (optionally weighted by `sample_weight`).
"""

import datasets
import evaluate
import numpy as np

_DESCRIPTION = "Accuracy: the fraction of predictions that equal their reference label."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[int]`): predicted class ids.
    references (`list[int]`): gold class ids, same length.
    normalize (`bool`, defaults to `True`): return the fraction; `False` returns the number of correct predictions.
    sample_weight (`list[float]`, *optional*): one weight per example.
Returns:
    accuracy (`float`): in [0, 1] (or a count with normalize=False).
Example:
    >>> metric = evaluate.load("modeling_cove/metrics/accuracy_cove")
    >>> metric.compute(predictions=[0, 1, 1], references=[0, 1, 0])
    {'accuracy': 0.6666666666666666}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class AccuracyCove(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references, normalize=True, sample_weight=None):
        predictions = np.asarray(predictions, dtype=np.int64)
        references = np.asarray(references, dtype=np.int64)
        if predictions.shape != references.shape:
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        if predictions.size == 0:
            raise ValueError("accuracy of zero examples is undefined: got no predictions")
        correct = (predictions == references).astype(np.float64)
        if sample_weight is not None:
            weight = np.asarray(sample_weight, dtype=np.float64)
            if weight.shape != correct.shape:
                raise ValueError(f"sample_weight has {weight.size} entries, expected {correct.size}")
            value = float((correct * weight).sum() / weight.sum()) if normalize else float((correct * weight).sum())
        else:
            value = float(correct.mean()) if normalize else float(correct.sum())
        return {"accuracy": value}
