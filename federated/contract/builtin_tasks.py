"""The built-in tasks' declarations (:class:`~federated.contract.task_spec.TaskSpec`),
torch-free: each task class (:mod:`federated.tasks`) names its own here as its
``contract``, and a sweep records it in its manifest.

:data:`WRITTEN_BEFORE_THE_CONTRACT` is what a task's name meant in a sweep folder whose
manifest recorded no spec (its rows say ``task: detection`` and nothing more): the
report reads such an old folder by it, and nothing else asks it.
"""

from __future__ import annotations

from federated.contract.metrics import ACCURACY, DETECTION_SPECS, SCORE_SPECS
from federated.contract.task_spec import IMAGES, TaskSpec

CLASSIFICATION_TASK = TaskSpec(
    "classification",
    (ACCURACY,),
    final_words="final accuracy",  # the paper's words
    counted=IMAGES,
    per_image_outcomes=("acc",),  # right or wrong, one image at a time
)
SCORE_TASK = TaskSpec(
    "score",
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
DETECTION_TASK = TaskSpec(
    "detection",
    DETECTION_SPECS,
    nothing_learned=0.0,  # a detector that finds no object scores AP 0
    reading_note=(
        " Detection reports average precision as recorded, three decimals: mAP@0.5 (the "
        "Street paper's metric) and mAP@[.5:.95] (COCO's), fractions in [0, 1] with COCO's "
        "101-point interpolation, higher is better; their Δ and resolvable differences are "
        "in AP units (docs/detection.md)."
    ),
    counted="boxes",
)
#: the task of rows and configs written before tasks existed (they name none)
UNTASKED_ROWS = CLASSIFICATION_TASK
#: a task's name, as a folder without a recorded spec carries it -> its declaration
#: then (rows written before score tasks carry no task at all: classification)
WRITTEN_BEFORE_THE_CONTRACT: dict[str, TaskSpec] = {
    spec.name: spec for spec in (CLASSIFICATION_TASK, SCORE_TASK, DETECTION_TASK)
}
