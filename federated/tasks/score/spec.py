"""A score task's declaration for the report, torch-free: SRCC, PLCC, MAE, RMSE and the
binary accuracy at the score threshold (``bin_acc``; its own name: ``acc`` is
classification's top-1 accuracy); a score per image, no classes to count."""

from __future__ import annotations

from federated.contract.metrics import CORRELATION, ERROR, FRACTION, MetricSpec
from federated.contract.task_spec import TaskSpec

SCORE = "score"
#: a score task's binary accuracy at its threshold (its own name: ``acc`` is top-1)
BINARY_ACCURACY = "bin_acc"
SCORE_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("srcc", SCORE, True, "SRCC", "test SRCC", False, False, CORRELATION),
    MetricSpec("plcc", SCORE, True, "PLCC", "test PLCC", False, False, CORRELATION),
    MetricSpec("mae", SCORE, False, "MAE", "test MAE", False, False, ERROR),
    MetricSpec("rmse", SCORE, False, "RMSE", "test RMSE", False, False, ERROR),
    MetricSpec(
        BINARY_ACCURACY,
        SCORE,
        True,
        "binary accuracy",
        "binary test accuracy at the score threshold",
        True,
        False,
        FRACTION,
    ),
)
SPEC = TaskSpec(
    SCORE,
    SCORE_SPECS,
    reported_beside=("srcc", "mae"),  # the field's pair, beside whichever is primary
    reading_note=(
        " Score tasks (image assessment) report their primary metric as recorded, three "
        "decimals: SRCC and PLCC (correlations in [-1, 1], higher is better), MAE and RMSE "
        "(in the score's own units, lower is better); their Δ and resolvable differences "
        'are in the metric\'s units (docs/reports.md, "Score tasks: the primary metric").'
    ),
    counted="",  # a score per image: no classes to count
    per_image_outcomes=("bin_acc",),  # each image on the right side of the threshold or not
)
#: stems that score runs written before ``bin_acc`` had its own name recorded: old -> today
OLD_STEMS = {"acc": BINARY_ACCURACY}
