"""Detection as a task of the engine: COCO AP against a case worked by hand, the
detectors, every weight-based method and SOLO and MOON on generated box data (the
sequential path), a FedAvg run that learns, and the refusals."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
import torch

from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.execution.choice import PackingFallback
from federated.models import build_model
from federated.params import ConfigError
from federated.tasks.detection.average_precision import ImageBoxes, average_precision
from federated.tasks.detection.models import DETECTORS
from tests.detection_synthetic import CLASSES, NAME, boxes_data, register, spec


def _image(boxes, labels, scores=None) -> ImageBoxes:
    return ImageBoxes(
        np.array(boxes, dtype=np.float64).reshape(-1, 4),
        np.array(labels, dtype=np.int64),
        None if scores is None else np.array(scores, dtype=np.float64),
    )


def test_average_precision_equals_a_case_worked_by_hand():
    """Two images, three true boxes of one class, four scored predictions.

    By score: p1 (0.9, image A) hits g1 exactly: TP, recall 1/3, precision 1;
    p2 (0.8, B) overlaps nothing: FP, 1/3, 1/2; p3 (0.7, B) hits g3 exactly: TP, 2/3, 2/3;
    p4 (0.6, A) overlaps g2 with IoU 1/4: FP, 2/3, 1/2.  The monotone precision is
    (1, 2/3, 2/3, 1/2).  At COCO's 101 recall points 0, 0.01, ..., 1: 0 .. 0.33 (34
    points) reach recall 1/3 at precision 1; 0.34 .. 0.66 (33 points) reach 2/3 at
    precision 2/3; 0.67 .. 1 (34 points) are beyond the curve: 0.  AP = (34 + 33·2/3)
    / 101 = 56/101 at every IoU threshold (the hits are exact, the miss below 0.5), so
    mAP@[.5:.95] is 56/101 too."""
    truths = [
        _image([[0, 0, 10, 10], [20, 20, 40, 40]], [0, 0]),  # image A: g1, g2
        _image([[50, 50, 60, 60]], [0]),  # image B: g3
    ]
    predictions = [
        # p1 on g1; p4 on the top-left quarter of g2 (IoU 100/400 = 1/4)
        _image([[0, 0, 10, 10], [20, 20, 30, 30]], [0, 0], [0.9, 0.6]),
        _image([[0, 0, 5, 5], [50, 50, 60, 60]], [0, 0], [0.8, 0.7]),  # p2, p3
    ]
    ap = average_precision(predictions, truths, n_classes=2)
    assert ap.map50 == pytest.approx(56 / 101, abs=1e-12)
    assert ap.map == pytest.approx(56 / 101, abs=1e-12)
    assert ap.ap50[0] == pytest.approx(56 / 101, abs=1e-12)
    assert math.isnan(ap.ap50[1])  # no true box of class 1: no AP, not in the mean


def test_perfect_detections_score_one_and_none_score_zero():
    truths = [_image([[4, 4, 20, 30]], [1]), _image([[10, 10, 40, 40], [0, 0, 8, 8]], [0, 2])]
    perfect = [_image(t.boxes, t.labels, np.linspace(0.9, 0.5, len(t.labels))) for t in truths]
    assert average_precision(perfect, truths, 3).map == pytest.approx(1.0)
    nothing = [_image(np.zeros((0, 4)), []) for _ in truths]
    assert average_precision(nothing, truths, 3).map50 == 0.0


def _config(**overrides) -> RunConfig:
    values = dict(
        dataset=NAME,
        n_parties=3,
        partition="iid",
        rounds=2,
        local_epochs=1,
        batch_size=8,
        lr=0.05,
        execution="sequential",
        threads=1,
        seed=0,
    )
    values.update(overrides)
    return RunConfig(**values)


@pytest.fixture
def boxes(monkeypatch):
    data = boxes_data(train=36, test=12)
    register(monkeypatch, data)
    return data


@pytest.mark.parametrize(
    "algorithm, server",
    [
        ("fedavg", "avg"),
        ("fedprox", "avg"),
        ("scaffold", "avg"),
        ("fednova", "avg"),
        ("feddyn", "avg"),
        ("solo", "avg"),
        ("moon", "avg"),
        ("fedavg", "fedavgm"),
        ("fedavg", "fedadam"),
        ("fedavg", "fedyogi"),
        ("fedbn", "avg"),  # BatchNorm statistics kept local per party (FedBN's rule)
    ],
)
def test_every_method_trains_a_detector(boxes, algorithm, server):
    rows = list(run_rounds(_config(algorithm=algorithm, server_optimizer=server), boxes))
    assert len(rows) == 2 and not rows[-1]["diverged"]
    for row in rows:
        assert math.isfinite(row["train_loss"]) and row["train_loss"] > 0
        if math.isnan(row["test_map50"]):
            # FedBN scores its parties' own models on the test set every 5th round and
            # the last (personal_test_every's default for the personalised methods)
            assert algorithm == "fedbn" and row is not rows[-1]
            continue
        assert 0.0 <= row["test_map50"] <= 1.0 and 0.0 <= row["test_map"] <= row["test_map50"]
        assert all(f"test_ap50/{name}" in row for name in CLASSES)
    if algorithm == "moon":  # the second round has a previous model: a contrastive term
        assert math.isfinite(rows[1]["con_loss"]) and rows[1]["con_loss"] > 0


@pytest.mark.parametrize(
    "overrides",
    [
        {"algorithm": "ditto"},  # its personal model trains through the task's forward
        {"algorithm": "apfl"},  # so does its mix of personal and global weights
        {"algorithm": "fedavg", "finetune_epochs": 1},  # fine-tuning: the task's loss
        {"algorithm": "ditto", "finetune_epochs": 1},
    ],
    ids=["ditto", "apfl", "fedavg+ft", "ditto+ft"],
)
def test_personal_models_and_fine_tuning_train_a_detector(boxes, overrides):
    """Each used to end in a traceback on boxes (a detector in training mode needs the
    batch's targets; BoxTargets has no .shape): each party's own-split mAP is scored."""
    run = FederatedRun(_config(party_test_fraction=0.3, **overrides), boxes)
    rows = [run.run_round(), run.run_round()]
    assert all(math.isfinite(r["train_loss"]) and r["train_loss"] > 0 for r in rows)
    own = run.local_test_metrics["map"]
    assert own.shape == (3,) and np.all((own >= 0) & (own <= 1))
    assert 0.0 <= rows[-1]["party_test_map50_mean"] <= 1.0


def test_the_representation_probe_is_refused_on_detection_in_one_line(boxes):
    with pytest.raises(ConfigError) as err:
        _config(algorithm="moon", representations_at="1").resolved()
    assert str(err.value) == (
        "invalid config: representations_at='1' (allowed: unset: the representation probe "
        "(its figure colours images by class) needs a class label per image, which a "
        "detection task does not have)"
    )


def test_fedavg_learns_to_detect(boxes):
    rows = list(run_rounds(_config(rounds=8, local_epochs=2), boxes))
    first, best = rows[0]["test_map50"], max(r["test_map50"] for r in rows)
    assert first < 0.2 and best > 0.4, [round(r["test_map50"], 3) for r in rows]


def test_validation_and_local_test_splits_give_each_party_its_map(boxes):
    config = _config(val_fraction=0.2, party_test_fraction=0.2)
    run = FederatedRun(config, boxes)
    row = run.run_round()
    assert 0.0 <= row["val_map50"] <= 1.0 and row["val_parties"] == 3
    assert math.isnan(row["val_loss"])  # a detector has no evaluation loss
    own = run.local_test_metrics["map"]
    assert own.shape == (3,) and np.all((own >= 0) & (own <= 1))
    assert "party_test_map50_mean" in row


def test_packed_execution_says_detection_trains_one_party_at_a_time(boxes):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = FederatedRun(_config(execution="packed"), boxes)
    lines = [str(w.message) for w in caught if issubclass(w.category, PackingFallback)]
    assert len(lines) == 1 and "detection trains one party at a time" in lines[0]
    assert math.isfinite(run.run_round()["train_loss"])


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"partition": "dirichlet"}, "partition"),
        ({"partition": "labels"}, "partition"),
        ({"model": "simple-cnn"}, "model"),
        ({"feature_skew": "rotation", "feature_skew_level": 30.0}, "feature_skew"),
    ],
)
def test_what_detection_cannot_do_is_refused_in_one_line(boxes, overrides, field):
    with pytest.raises(ConfigError) as err:
        _config(**overrides).resolved()
    assert str(err.value).count("\n") == 0 and field in str(err.value)


def test_a_detector_is_refused_on_classification_data():
    with pytest.raises(ConfigError, match="model='fcos-tiny'"):
        RunConfig(dataset="synthetic", model="fcos-tiny").resolved()


def test_batchnorm_counters_stay_integers_and_statistics_are_combined(boxes):
    run = FederatedRun(_config(), boxes)
    before = copy.deepcopy(run.global_model.state_dict())
    run.run_round()
    after = run.global_model.state_dict()
    counters = [k for k in after if k.endswith("num_batches_tracked")]
    assert counters
    for k in counters:  # a step counter, never a float mean (the BatchNorm rule)
        assert after[k].dtype == torch.int64 and after[k].shape == ()
    means = [k for k in after if k.endswith("running_mean")]
    assert means and any(not torch.equal(before[k], after[k]) for k in means)


def test_moons_representation_is_the_pooled_top_feature_map_through_the_head():
    torch.manual_seed(0)
    model = build_model("fcos-tiny", spec(8, 8), out_dim=16).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = model(x)
        z = model.project(x)
        copied = copy.deepcopy(model)  # a frozen copy (MOON's previous models) keeps its hook
        assert torch.equal(copied.project(x), z)
    assert z.shape == (2, 16) and torch.equal(out.projection, z)
    assert out.features.shape == (2, 32)  # the small FCOS's stride-16 level: 32 channels


@pytest.mark.parametrize("name", [n for n in DETECTORS if n != "fcos-tiny"])
def test_torchvisions_detectors_build_offline_and_train_a_step(name):
    torch.manual_seed(0)
    model = build_model(name, spec(8, 8), out_dim=16).train()
    assert not any("IMAGENET" in str(type(m)) for m in model.modules())
    x = torch.randn(2, 3, 64, 64)
    targets = [
        {"boxes": torch.tensor([[4.0, 4.0, 30.0, 40.0]]), "labels": torch.tensor([2])},
        {"boxes": torch.zeros(0, 4), "labels": torch.zeros(0, dtype=torch.int64)},
    ]
    out = model(x, targets)
    total = out.logits.sum()
    total.backward()
    assert math.isfinite(float(total.detach()))
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_the_console_line_shows_map_and_leaves_each_class_to_the_rows(boxes):
    """``python -m federated.run``'s round line on detection: mAP@0.5 (the primary) and
    mAP, not one column per class nor the loss it never records; the row (the CSV)
    keeps every column.  A
    classification row's line is as before."""
    from federated.run import format_row

    run = FederatedRun(_config(rounds=1), boxes)
    row = run.run_round()
    assert not run.task.evaluates_loss and math.isnan(row["test_loss"])
    line = format_row(row, 1, hidden=("test_loss",))  # what federated.run passes here
    assert line.startswith("round   1/1  test_map50 0.") and "  test_map 0." in line
    assert "ap50/" not in line and "test_loss" not in line
    assert all(f"test_ap50/{name}" in row for name in CLASSES)
    classification = {
        "round": 2,
        "test_acc": 0.5,
        "test_loss": 1.25,
        "train_loss": 2.0,
        "round_seconds": 1.5,
        "samples_per_second": 100.0,
    }
    assert format_row(classification, 3) == (
        "round   2/3  test_acc 0.5000  test_loss 1.2500  train_loss 2.0000  1.50 s  100 samples/s"
    )
