"""How a pretrained start meets a fedsweep detector (the detector family's
:attr:`~federated.models.family.ModelFamily.start`): a fedsweep detector's state dict
(``detector.*``, ``head.*``), a bare torchvision detector's (named as torchvision names
it: ``detector.`` added), or a backbone's ImageNet weights (renamed into the backbone's
body, every layer outside it left fresh); the class layers stay fresh where the start
has another class count (COCO's 91 against the task's).  The weights' layout is
:mod:`federated.tasks.detection.weights`'."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from federated.models.import_path import TORCHVISION_PREFIX
from federated.models.pretrained_start import (
    HEAD_PREFIXES,
    StartError,
    StartWeights,
    start_kind,
)
from federated.tasks.detection.weights import (
    BACKBONE_BODY,
    DETECTOR_PREFIX,
    DetectorWeightsError,
    backbone_tensors,
    class_layers,
    detector_weights,
    is_backbone_weights,
)


class DetectorStart:
    """The detector family's reading of a start (module docstring)."""

    def named_weights(self, wanted: str, model: str) -> Any:
        """The torchvision weights enum member ``wanted`` names for detector ``model``
        (its COCO weights or its backbone's ImageNet ones); :class:`StartError` else."""
        try:
            return detector_weights(wanted, model)
        except DetectorWeightsError as err:
            raise StartError(str(err)) from None

    def weights(
        self, init: str, model: str, tensors: dict[str, torch.Tensor], path: Path
    ) -> StartWeights:
        """Start ``init``'s ``tensors`` (read from ``path``) named as detector ``model``
        names them."""
        classes = class_layers(model)
        if start_kind(init) == "torchvision" and is_backbone_weights(
            self.named_weights(init[len(TORCHVISION_PREFIX) :], model), model
        ):
            return StartWeights(
                backbone_tensors(tensors, model),
                path,
                encoder_only=False,
                class_layers=classes,
                covers=BACKBONE_BODY,
            )
        if not any(k.startswith((DETECTOR_PREFIX, *HEAD_PREFIXES)) for k in tensors):
            tensors = {DETECTOR_PREFIX + k: v for k, v in tensors.items()}
        return StartWeights(tensors, path, encoder_only=False, class_layers=classes)


DETECTOR_START = DetectorStart()
