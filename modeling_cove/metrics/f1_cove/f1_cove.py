"""F1 as an `evaluate` module that loads offline by path (macro average by default):

    evaluate.load("modeling_cove/metrics/f1_cove")  # -> {"f1": float in [0, 1]}

A thin wrapper of scikit-learn's `f1_score`, with a class's F1 taken as 0 where it is undefined
(`zero_division=0`): a class predicted but absent, or present but never predicted, has F1 = 0. `average="macro"` is
the unweighted mean over the classes — by default those that occur in the references or the predictions; pass
`labels=range(num_labels)` to average over a fixed class list instead. `average="micro"` (= accuracy for
single-label data), `"weighted"` (by support) and `"binary"` (F1 of `pos_label`, also on data with more than two
classes) are also available.
"""

import datasets
import evaluate
import numpy as np
from sklearn.metrics import f1_score

_DESCRIPTION = "F1 score (harmonic mean of precision and recall); macro average over classes by default."
_KWARGS_DESCRIPTION = """
Args:
    predictions (`list[int]`): predicted class ids.
    references (`list[int]`): gold class ids, same length.
    average (`str`, defaults to `"macro"`): "macro", "micro", "weighted" or "binary".
    labels (`list[int]`, *optional*): the classes to average over (default: those in references or predictions).
    pos_label (`int`, defaults to 1): the positive class for average="binary".
Returns:
    f1 (`float`): in [0, 1].
Example:
    >>> metric = evaluate.load("modeling_cove/metrics/f1_cove")
    >>> metric.compute(predictions=[0, 1, 1], references=[0, 1, 0])
    {'f1': 0.6666666666666666}
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class F1Cove(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation="",
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features({"predictions": datasets.Value("int64"), "references": datasets.Value("int64")}),
        )

    def _compute(self, predictions, references, average="macro", labels=None, pos_label=1):
        predictions = np.asarray(predictions, dtype=np.int64)
        references = np.asarray(references, dtype=np.int64)
        if predictions.shape != references.shape:
            raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
        if predictions.size == 0:
            raise ValueError("F1 of zero examples is undefined: got no predictions")
        if average not in ("macro", "micro", "weighted", "binary"):
            raise ValueError(f"average must be 'macro', 'micro', 'weighted' or 'binary', got {average!r}")
        if average == "binary":  # the F1 of one class, whatever the other classes are
            average, labels = "macro", [pos_label]
        elif labels is not None:
            labels = list(labels)
        return {"f1": float(f1_score(references, predictions, labels=labels, average=average, zero_division=0.0))}
