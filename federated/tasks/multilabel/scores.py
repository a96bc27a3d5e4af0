"""A split's multi-label metrics from its scores and truths (numpy, no torch).

Average precision is scikit-learn's ``average_precision_score`` (a maintained
implementation: the area under the step precision-recall curve, ``sum_n (R_n - R_{n-1})
P_n`` over the distinct scores, ties taken together; no interpolation).  A label
without a positive image in the split has no AP: scikit-learn would warn and score it 0;
here it is NaN and left out of the mean (``map``), so a label a small split never shows
neither lowers nor raises it.

F1 comes from counts (true positives, false positives, false negatives per label, each
image's label decided at probability 0.5, i.e. logit >= 0): the accumulator sums them
per party on the device.  ``f1_micro`` sums the counts over labels first; ``f1_macro``
is the mean of the labels' F1, a label with ``2 TP + FP + FN = 0`` (no positive and no
prediction) left out, as scikit-learn's ``f1_score(average="macro",
zero_division=np.nan)`` leaves it.
"""

from __future__ import annotations

import numpy as np

from federated.tasks.multilabel.spec import F1_MACRO, F1_MICRO, MEAN_AP

NAN = float("nan")


def label_average_precision(scores: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Each label's AP, (L,) float64, NaN for a label without a positive image and for
    one with a non-finite score (a diverged model ranks nothing); ``scores`` (N, L) any
    monotone score (logits or probabilities), ``truth`` (N, L) 0/1."""
    truth = np.asarray(truth) > 0.5
    scores = np.asarray(scores, dtype=np.float64)
    ap = np.full(truth.shape[1], NAN)
    ranked = truth.any(axis=0) & np.isfinite(scores).all(axis=0)
    if len(truth) and ranked.any():
        # scikit-learn imports in about a second: only multi-label trials pay it
        from sklearn.metrics import average_precision_score

        # one label's AP comes back as a number, several as an array: both fill ap[ranked]
        ap[ranked] = average_precision_score(truth[:, ranked], scores[:, ranked], average=None)
    return ap


def f1_scores(tp: np.ndarray, fp: np.ndarray, fn: np.ndarray) -> dict[str, float]:
    """Micro and macro F1 of per-label counts ``tp``, ``fp``, ``fn`` ((L,) each); NaN
    where undefined (no positive and no prediction at all)."""
    tp, fp, fn = (np.asarray(v, dtype=np.float64) for v in (tp, fp, fn))
    denominator = 2 * tp + fp + fn
    per_label = np.divide(2 * tp, denominator, out=np.full_like(tp, NAN), where=denominator > 0)
    total = denominator.sum()
    return {
        F1_MICRO: float(2 * tp.sum() / total) if total > 0 else NAN,
        F1_MACRO: float(np.nanmean(per_label)) if (denominator > 0).any() else NAN,
    }


def mean_of_defined(values: np.ndarray) -> float:
    """The mean of the finite entries (a label's AP where it has one), NaN without any."""
    finite = np.isfinite(values)
    return float(values[finite].mean()) if finite.any() else NAN


def split_scores(
    scores: np.ndarray, truth: np.ndarray, counts: tuple[np.ndarray, np.ndarray, np.ndarray]
) -> dict[str, float]:
    """``map``, ``f1_micro`` and ``f1_macro`` of one split: its scores and truths (N, L)
    and its per-label (TP, FP, FN) counts at 0.5."""
    return {MEAN_AP: mean_of_defined(label_average_precision(scores, truth)), **f1_scores(*counts)}
