"""Starts for the detectors (:mod:`federated.tasks.detection.models`): which torchvision weights
each one takes, how their tensors are named in fedsweep's model, and which layers hold
one output per class.

A detector's ``init=torchvision:WEIGHTS`` names either

* the **whole detector's** weights, torchvision's ``<Detector>_Weights`` (``DEFAULT``,
  ``COCO_V1``, or qualified: ``FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1``): every
  tensor of torchvision's detector, set into the wrapped ``detector.*``; or
* its **backbone's** ImageNet weights, qualified by their enum
  (``MobileNet_V3_Large_Weights.IMAGENET1K_V1``, ``ResNet50_Weights.IMAGENET1K_V2``): the
  classification network's tensors below its classifier, renamed as torchvision's
  builder places them (``features.3.block.0.0.weight`` ->
  ``detector.backbone.body.3.block.0.0.weight``); every other layer (FPN, RPN, heads)
  keeps its fresh initialisation.  SSDlite takes no backbone weights: torchvision builds
  its scratch MobileNet with a halved tail (``reduced_tail``), the ImageNet one without,
  so the two do not fit.

COCO's detectors have 91 classes (background and 90 COCO ids), a task its own: the
**class layers** (:data:`CLASS_LAYERS`, the layers whose shape follows the class count)
keep their fresh initialisation where the start's shape differs, as Detectron2's and
MMDetection's checkpoint loaders skip shape-mismatched tensors, but only these layers:
any other mismatch is still refused, naming the layer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

# fedsweep's name -> torchvision's builder (torchvision.models.detection); the one table
# federated.tasks.detection.models builds its torchvision detectors from
TORCHVISION_DETECTORS = {
    "fasterrcnn-mobilenet-v3": "fasterrcnn_mobilenet_v3_large_fpn",
    "ssdlite320": "ssdlite320_mobilenet_v3_large",
    "fcos-resnet50": "fcos_resnet50_fpn",
    "retinanet-resnet50": "retinanet_resnet50_fpn",
}

# The layers whose output count is the number of classes, per detector (names inside the
# wrapped ``detector``); tests/test_detection_pretrained.py holds them equal to the
# layers whose shape changes with num_classes.
CLASS_LAYERS: dict[str, tuple[str, ...]] = {
    "fcos-tiny": ("head.classification_head.cls_logits",),
    "fasterrcnn-mobilenet-v3": (
        "roi_heads.box_predictor.cls_score",
        "roi_heads.box_predictor.bbox_pred",  # one box per class
    ),
    "ssdlite320": tuple(f"head.classification_head.module_list.{i}.1" for i in range(6)),
    "fcos-resnet50": ("head.classification_head.cls_logits",),
    "retinanet-resnet50": ("head.classification_head.cls_logits",),
}

DETECTOR_PREFIX = "detector."
BACKBONE_BODY = DETECTOR_PREFIX + "backbone.body."


def _below(prefix: str, dropped: str) -> Callable[[str], str | None]:
    """A renaming that puts ``prefix``'s tensors in the backbone's body and drops the
    ImageNet classifier (``dropped``)."""

    def rename(name: str) -> str | None:
        if name.startswith(dropped) or not name.startswith(prefix):
            return None
        return BACKBONE_BODY + name[len(prefix) :]

    return rename


# fedsweep's name -> (torchvision classification arch of its backbone, renaming of that
# arch's tensors into the detector; None: a tensor the detector does not use).  The
# renamings follow torchvision's builders: ``_mobilenet_extractor`` keeps
# ``mobilenet.features`` as the FPN's body, ``_resnet_fpn_extractor`` the ResNet up to
# ``layer4``.
BACKBONES: dict[str, tuple[str, Callable[[str], str | None]]] = {
    "fasterrcnn-mobilenet-v3": ("mobilenet_v3_large", _below("features.", "classifier.")),
    "fcos-resnet50": ("resnet50", _below("", "fc.")),
    "retinanet-resnet50": ("resnet50", _below("", "fc.")),
}


class DetectorWeightsError(ValueError):
    """The weights named cannot start this detector (one line)."""


def detector_weights(wanted: str, model: str) -> Any:
    """The torchvision weights (an enum member) ``wanted`` names for detector ``model``:
    ``DEFAULT`` or a member of its own weights, or ``Enum.MEMBER`` of its own or its
    backbone's weights; :class:`DetectorWeightsError` listing the names it has."""
    import torchvision.models

    if model not in TORCHVISION_DETECTORS:
        raise DetectorWeightsError(
            f"{model} is fedsweep's own detector and has no torchvision weights (start it "
            "from a file or a shipped start, e.g. fedsweep:street-fcos-tiny)"
        )
    own = torchvision.models.get_model_weights(TORCHVISION_DETECTORS[model])
    enums = [own]
    if model in BACKBONES:
        enums.append(torchvision.models.get_model_weights(BACKBONES[model][0]))
    named: dict[str, Any] = {"DEFAULT": own.DEFAULT}
    named.update({m: own[m] for m in own.__members__})
    for enum in enums:
        named[f"{enum.__name__}.DEFAULT"] = enum.DEFAULT
        named.update({f"{enum.__name__}.{m}": enum[m] for m in enum.__members__})
    if wanted not in named:
        no_backbone = (
            "; SSDlite takes no backbone weights (torchvision's scratch SSDlite has a "
            "halved MobileNet tail, the ImageNet one a full one)"
            if model == "ssdlite320"
            else ""
        )
        listed = ", ".join(n for n in named if not n.endswith(".DEFAULT"))
        raise DetectorWeightsError(
            f"{model} has no torchvision weights {wanted!r} (named: {listed}){no_backbone}"
        )
    return named[wanted]


def is_backbone_weights(weights: Any, model: str) -> bool:
    """Whether ``weights`` (from :func:`detector_weights`) are ``model``'s backbone's
    rather than the whole detector's."""
    import torchvision.models

    own = torchvision.models.get_model_weights(TORCHVISION_DETECTORS[model])
    return not isinstance(weights, own)


def backbone_tensors(tensors: dict[str, torch.Tensor], model: str) -> dict[str, torch.Tensor]:
    """An ImageNet backbone's tensors renamed into detector ``model`` (classifier dropped)."""
    rename = BACKBONES[model][1]
    out: dict[str, torch.Tensor] = {}
    for name, tensor in tensors.items():
        mine = rename(name)
        if mine is not None:
            out[mine] = tensor
    return out


def class_layers(model: str) -> frozenset[str]:
    """Detector ``model``'s class layers, named as fedsweep's model names them."""
    return frozenset(DETECTOR_PREFIX + n for n in CLASS_LAYERS.get(model, ()))
