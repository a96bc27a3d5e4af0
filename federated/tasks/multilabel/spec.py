"""Multi-label classification's declaration, torch-free: its metrics and the report's words.

The metrics are fractions in [0, 1], higher is better, shown as percentages (the
convention of VOC and COCO multi-label results):

* ``map`` (the primary): the mean over labels of each label's average precision, the
  labels without a positive image in the split left out (their AP is undefined);
* ``f1_micro``: F1 of the true positives, false positives and false negatives summed
  over every label, each label decided at probability 0.5 (logit >= 0);
* ``f1_macro``: each label's F1 at 0.5, then the mean over labels, a label with no
  positive and no prediction in the split left out (its F1 is 0/0);
* ``ap/<label>``: each label's AP (pooled evaluations only, NaN where undefined).
"""

from __future__ import annotations

from federated.contract.metrics import FRACTION, MetricSpec
from federated.contract.task_spec import TaskSpec

MULTILABEL = "multilabel"
MEAN_AP, F1_MICRO, F1_MACRO = "map", "f1_micro", "f1_macro"
#: the per-label columns' stem: ``test_ap/<label name>``
LABEL_AP = "ap"

MULTILABEL_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec(MEAN_AP, MULTILABEL, True, "mAP", "test mAP over labels", True, False, FRACTION),
    MetricSpec(
        F1_MICRO, MULTILABEL, True, "micro F1", "test micro F1 at 0.5", True, False, FRACTION
    ),
    MetricSpec(
        F1_MACRO, MULTILABEL, True, "macro F1", "test macro F1 at 0.5", True, False, FRACTION
    ),
)

#: the report's declaration: a partition counts, per party, the images carrying each label
SPEC = TaskSpec(
    MULTILABEL,
    MULTILABEL_SPECS,
    reported_beside=(F1_MICRO,),
    reading_note=(
        " Multi-label classification reports the mean over labels of each label's average "
        "precision (mAP; a label without a positive image in a split is left out of its "
        "mean) and F1 at probability 0.5 (micro: counts summed over labels; macro: the mean "
        "of the labels' F1), as percentages; a party's own split of a few images resolves "
        "its AP coarsely (docs/multilabel.md)."
    ),
    counted="images with the label",
)
