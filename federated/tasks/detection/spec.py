"""Detection's declaration for the report, torch-free: COCO's 101-point interpolated AP,
fractions in [0, 1]; mAP@0.5 is the Street paper's metric (the primary), mAP@[.5:.95]
COCO's; a partition counts boxes per class."""

from __future__ import annotations

from federated.contract.metrics import FRACTION, MetricSpec
from federated.contract.task_spec import TaskSpec

DETECTION = "detection"
DETECTION_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("map50", DETECTION, True, "mAP@0.5", "test mAP@0.5", False, False, FRACTION),
    MetricSpec("map", DETECTION, True, "mAP@[.5:.95]", "test mAP@[.5:.95]", False, False, FRACTION),
)
SPEC = TaskSpec(
    DETECTION,
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
