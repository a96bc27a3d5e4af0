"""Segmentation's declaration for the report, torch-free: mIoU (the primary), mean Dice
and pixel accuracy, fractions in [0, 1] shown as percentages (segmentation papers'
convention); a partition counts pixels per class."""

from __future__ import annotations

from federated.contract.metrics import FRACTION, MetricSpec
from federated.contract.task_spec import TaskSpec

SEGMENTATION = "segmentation"
SEGMENTATION_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("miou", SEGMENTATION, True, "mIoU", "test mIoU", True, False, FRACTION),
    MetricSpec("dice", SEGMENTATION, True, "mean Dice", "test mean Dice", True, False, FRACTION),
    MetricSpec(
        "pixel_acc",
        SEGMENTATION,
        True,
        "pixel accuracy",
        "test pixel accuracy",
        True,
        False,
        FRACTION,
    ),
)
SPEC = TaskSpec(SEGMENTATION, SEGMENTATION_SPECS, counted="pixels")
