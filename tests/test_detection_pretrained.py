"""Pretrained starts for the detectors: torchvision's COCO weights for the whole detector
and ImageNet weights for its backbone, read from a torch cache the test fills (no
network: each file is a state dict of the right torchvision architecture saved under the
name its weights' url gives), the class-layer rule, and the offline refusal."""

from __future__ import annotations

import hashlib
import math
import warnings
from pathlib import Path

import pytest
import torch
import torchvision.models
import torchvision.models.detection as tv_detection

from federated.config.data_checks import with_data_checked
from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.models import build_model
from federated.models.pretrained_start import (
    StartNotice,
    StartWeights,
    apply_start,
    match_start,
    start_hashes,
    torchvision_cache_file,
)
from federated.params import ConfigError
from federated.tasks.detection.models import DETECTORS
from federated.tasks.detection.weights import (
    BACKBONE_BODY,
    BACKBONES,
    CLASS_LAYERS,
    TORCHVISION_DETECTORS,
    backbone_tensors,
    class_layers,
)
from tests.detection_synthetic import NAME, boxes_data, register, spec

COCO_FASTER_RCNN = "torchvision:FasterRCNN_MobileNet_V3_Large_FPN_Weights.COCO_V1"
COCO_CLASSES = 91  # torchvision's COCO detectors: background and 90 category ids


def _config(**overrides) -> RunConfig:
    values = dict(
        dataset=NAME,
        model="fasterrcnn-mobilenet-v3",
        n_parties=2,
        partition="iid",
        rounds=1,
        local_epochs=1,
        batch_size=8,  # 8 training images per party: one step each
        lr=0.01,
        execution="sequential",
        threads=1,
        seed=0,
    )
    values.update(overrides)
    # checked against the data and the model: a start is read and matched then
    return with_data_checked(RunConfig(**values))


@pytest.fixture
def boxes(monkeypatch):
    data = boxes_data(train=16, test=4, size=64)
    register(monkeypatch, data)
    return data


@pytest.fixture
def torch_home(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    return tmp_path


def _cache(init: str, model: str, state: dict[str, torch.Tensor]):
    """Save ``state`` where torch's cache keeps the weights ``init`` names."""
    path = torchvision_cache_file(init, model)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(state, path)
    return path


def _meta_state(name: str, classes: int) -> dict[str, torch.Tensor]:
    with torch.device("meta"):
        return DETECTORS[name](spec(8, 8), classes).state_dict()


# --------------------------------------------------------------------- the names
@pytest.mark.parametrize("name", list(DETECTORS))
def test_the_class_layers_are_the_layers_that_follow_the_class_count(name):
    coco, ours = _meta_state(name, COCO_CLASSES), _meta_state(name, 8)
    differ = {k.rsplit(".", 1)[0] for k in coco if coco[k].shape != ours[k].shape}
    assert differ == set(CLASS_LAYERS[name])


def test_fedsweeps_torchvision_detectors_are_torchvisions_builders():
    for name, builder in TORCHVISION_DETECTORS.items():
        ours = _meta_state(name, 8)
        with torch.device("meta"):
            theirs = getattr(tv_detection, builder)(
                weights=None, weights_backbone=None, num_classes=8
            ).state_dict()
        assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}


@pytest.mark.parametrize("name", list(BACKBONES))
def test_every_imagenet_backbone_tensor_has_its_place_in_the_detector(name):
    arch, _ = BACKBONES[name]
    with torch.device("meta"):
        imagenet = torchvision.models.get_model(arch, weights=None).state_dict()
    placed = backbone_tensors(imagenet, name)
    detector = {"detector." + k: v for k, v in _meta_state(name, 8).items()}
    body = {k for k in detector if k.startswith("detector.backbone.body.")}
    assert set(placed) == body  # the whole body, nothing else
    assert all(placed[k].shape == detector[k].shape for k in placed)
    classifier = [k for k in imagenet if k.startswith(("classifier.", "fc."))]
    assert classifier and len(placed) + len(classifier) == len(imagenet)  # only it is dropped


@pytest.mark.parametrize("name", list(TORCHVISION_DETECTORS))
def test_each_detectors_coco_and_backbone_layouts_match_all_but_the_class_layers(name):
    """The layouts alone (a COCO detector's and an ImageNet backbone's tensors on the meta
    device, as FrozenBatchNorm2d saves them: no step counters) against the model a run
    builds: every layer matches but the class layers (COCO) or the modules outside the
    backbone's body (ImageNet)."""
    torch.manual_seed(0)
    model = build_model(name, spec(8, 8), out_dim=16)
    coco = {
        "detector." + k: v
        for k, v in _meta_state(name, COCO_CLASSES).items()
        if not k.endswith("num_batches_tracked")
    }
    weights = StartWeights(coco, Path("coco.pth"), False, class_layers=class_layers(name))
    match = match_start(model, weights, "torchvision:COCO_V1")
    assert set(match.fresh_classes) == class_layers(name) and match.fresh_head == (
        "head.0",
        "head.2",
    )
    assert not match.fresh_uncovered and not match.fresh_adapted
    assert len(match.copied) == len(coco) - 2 * len(class_layers(name))  # weight and bias each
    if name not in BACKBONES:
        return
    with torch.device("meta"):
        imagenet = torchvision.models.get_model(BACKBONES[name][0], weights=None).state_dict()
    backbone = StartWeights(
        backbone_tensors(imagenet, name), Path("imagenet.pth"), False, covers=BACKBONE_BODY
    )
    match = match_start(model, backbone, "torchvision:IMAGENET1K_V1")
    assert set(match.copied) == {k for k in model.state_dict() if k.startswith(BACKBONE_BODY)}
    assert "detector.backbone.fpn" in match.fresh_uncovered


# ---------------------------------------------------------------- COCO weights
def test_coco_weights_start_every_layer_but_the_class_layers(boxes, torch_home):
    """A stand-in COCO file (torchvision's architecture at 91 classes, seeded; without
    BatchNorm counters, as FrozenBatchNorm2d's file): every tensor whose shape fits is
    the file's, the two class layers and MOON's head keep the run's fresh weights, one
    notice line says so, and a round trains from it."""
    torch.manual_seed(7)
    coco = tv_detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=COCO_CLASSES
    ).state_dict()
    coco = {k: v for k, v in coco.items() if not k.endswith("num_batches_tracked")}
    path = _cache(COCO_FASTER_RCNN, "fasterrcnn-mobilenet-v3", coco)
    assert path.name == "fasterrcnn_mobilenet_v3_large_fpn-fb6a3cc7.pth"

    config = _config(init=COCO_FASTER_RCNN)  # the config check reads and matches it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = FederatedRun(config, boxes)
    notices = [str(w.message) for w in caught if issubclass(w.category, StartNotice)]
    assert len(notices) == 1 and "\n" not in notices[0]
    assert (
        "class layers of another class count in the start: "
        "detector.roi_heads.box_predictor.cls_score, detector.roi_heads.box_predictor.bbox_pred"
    ) in notices[0]
    assert "head.0, head.2" in notices[0]  # MOON's projection head: not a COCO layer

    state = run.global_model.state_dict()
    loaded = fresh_kept = 0
    for name, mine in state.items():
        theirs = coco.get(name.removeprefix("detector."))
        if theirs is not None and theirs.shape == mine.shape:
            assert torch.equal(mine, theirs), name
            loaded += 1
        elif not name.endswith("num_batches_tracked"):
            fresh_kept += 1
    assert loaded == len(coco) - 4  # all but cls_score's and bbox_pred's weight and bias
    assert fresh_kept == 4 + 4  # those four and the projection head's four
    assert state["detector.roi_heads.box_predictor.cls_score.weight"].shape == (4, 1024)

    row = run.run_round()
    assert math.isfinite(row["train_loss"]) and 0.0 <= row["test_map50"] <= 1.0
    # the manifest's record: the cache file read and its sha256
    hashes = start_hashes([{"init": COCO_FASTER_RCNN, "model": "fasterrcnn-mobilenet-v3"}])
    assert hashes == {
        COCO_FASTER_RCNN: {
            "file": str(path),
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    }


def test_a_backbone_start_sets_the_body_and_leaves_the_rest_as_without_it(boxes, torch_home):
    init = "torchvision:MobileNet_V3_Large_Weights.IMAGENET1K_V1"
    torch.manual_seed(3)
    imagenet = torchvision.models.mobilenet_v3_large(weights=None).state_dict()
    path = _cache(init, "fasterrcnn-mobilenet-v3", imagenet)
    assert path.name == "mobilenet_v3_large-8738ca79.pth"

    torch.manual_seed(0)
    model = build_model("fasterrcnn-mobilenet-v3", boxes.spec)
    torch.manual_seed(0)
    plain = build_model("fasterrcnn-mobilenet-v3", boxes.spec).state_dict()
    notice = apply_start(model, init, "fasterrcnn-mobilenet-v3")
    state = model.state_dict()
    assert torch.equal(state["detector.backbone.body.0.0.weight"], imagenet["features.0.0.weight"])
    assert torch.equal(
        state["detector.backbone.body.16.1.running_var"], imagenet["features.16.1.running_var"]
    )
    outside = [k for k in state if not k.startswith("detector.backbone.body.")]
    assert all(torch.equal(state[k], plain[k]) for k in outside)  # no random draw
    assert notice is not None and "\n" not in notice
    assert (
        "modules outside the start's backbone: detector.backbone.fpn, detector.rpn.head, "
        "detector.roi_heads.box_head, detector.roi_heads.box_predictor"
    ) in notice


def test_a_detectors_own_file_of_another_class_count_keeps_its_class_layer_fresh(tmp_path):
    torch.manual_seed(1)
    seven = build_model("fcos-tiny", spec(8, 8), outputs=7)  # a 7-class detector's file
    path = tmp_path / "seven.pt"
    torch.save(seven.state_dict(), path)
    torch.manual_seed(0)
    model = build_model("fcos-tiny", spec(8, 8))
    notice = apply_start(model, str(path), "fcos-tiny")
    assert notice == (
        f"init {path}: freshly initialised from the run's seed, class layers of another "
        "class count in the start: detector.head.classification_head.cls_logits"
    )
    state = model.state_dict()
    theirs = seven.state_dict()
    assert torch.equal(
        state["detector.backbone.level8.0.weight"], theirs["detector.backbone.level8.0.weight"]
    )


# -------------------------------------------------------------------- refusals
def test_offline_and_not_cached_is_one_line_naming_the_weights_and_the_path(boxes, torch_home):
    init = "torchvision:COCO_V1"
    cached = torchvision_cache_file(init, "ssdlite320")
    try:
        with pytest.raises(ConfigError) as caught:
            _config(model="ssdlite320", init=init)
    except pytest.fail.Exception:  # the machine is online: the download filled the cache
        assert cached.is_file()
        return
    line = str(caught.value)
    assert caught.value.field == "init" and "\n" not in line
    assert "SSDLite320_MobileNet_V3_Large_Weights.COCO_V1" in line and str(cached) in line
    assert "torchvision.models.detection.ssdlite as m" in line and "TORCH_HOME" in line
    assert not any(p.is_file() for p in torch_home.rglob("*"))  # nothing written


@pytest.mark.parametrize(
    "model, init, words",
    [
        ("fcos-tiny", "torchvision:DEFAULT", "fedsweep's own detector"),
        ("ssdlite320", "torchvision:MobileNet_V3_Large_Weights.IMAGENET1K_V1", "halved"),
        ("fcos-resnet50", "torchvision:IMAGENET1K_V1", "ResNet50_Weights.IMAGENET1K_V1"),
        ("retinanet-resnet50", "torchvision:MobileNet_V3_Large_Weights.IMAGENET1K_V1", "COCO_V1"),
    ],
)
def test_weights_a_detector_does_not_have_are_refused_listing_those_it_has(
    boxes, torch_home, model, init, words
):
    with pytest.raises(ConfigError) as caught:
        _config(model=model, init=init)
    line = str(caught.value)
    assert caught.value.field == "init" and "\n" not in line and words in line
    assert not any(torch_home.rglob("*"))


def test_a_classification_models_weights_may_be_qualified_by_their_enum(torch_home):
    named = "torchvision:ResNet18_Weights.IMAGENET1K_V1"
    plain = "torchvision:IMAGENET1K_V1"
    model = "torchvision:resnet18"
    assert torchvision_cache_file(named, model) == torchvision_cache_file(plain, model)
    assert torchvision_cache_file(named, model).name == "resnet18-f37072fd.pth"
