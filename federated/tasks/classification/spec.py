"""Classification's declaration for the report, torch-free: top-1 accuracy (``acc``), a
fraction with a chance level of 1/classes; a partition counts images per class."""

from __future__ import annotations

from federated.contract.metrics import FRACTION, MetricSpec
from federated.contract.task_spec import IMAGES, TaskSpec

CLASSIFICATION = "classification"
ACCURACY = MetricSpec(
    "acc", CLASSIFICATION, True, "accuracy", "top-1 test accuracy", True, True, FRACTION
)
SPEC = TaskSpec(
    CLASSIFICATION,
    (ACCURACY,),
    final_words="final accuracy",  # the paper's words
    counted=IMAGES,
    per_image_outcomes=("acc",),  # right or wrong, one image at a time
)
