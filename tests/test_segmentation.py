"""Semantic segmentation, the fourth task: IoU, Dice and pixel accuracy against a case
worked by hand (and scikit-learn's own), the masks' loss, the folder reader (layout,
parties by a field, the cache, bad input in one line), the models, the builder of a task
from real Fashion-MNIST pixels, and FedAvg, FedProx and MOON runs on a built folder."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from federated.config.data_checks import with_data_checked
from federated.config.run_config import RunConfig
from federated.data.catalog import DatasetSpec
from federated.data.folder_dataset import folder_identity, load_folder
from federated.data.folder_kinds import folder_reader, folder_readers
from federated.data.folder_layout import FolderDataError
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.models import build_model, model_family
from federated.params import ConfigError, NoParams
from federated.tasks.segmentation.models import SEGMENTATION_MODELS, SEGMENTERS
from federated.tasks.segmentation.reader import READER, SegmentationDataError
from federated.tasks.segmentation.targets import (
    IGNORE_INDEX,
    MaskTargetsError,
    collate_masks,
    resize_masks,
    take_masks,
)
from federated.tasks.segmentation.task import Segmentation, confusion_scores
from tests.example_scripts import assert_refused_in_one_line, built_tree, load_example
from tests.short_runs import site_run

CLASSES = ("background", "square", "bar")
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "build_segmentation_task.py"
FMNIST = Path("/usr/share/datasets/fashion-mnist")
needs_fmnist = pytest.mark.skipif(
    not (FMNIST / "train-images-idx3-ubyte.gz").is_file(),
    reason="needs Debian's dataset-fashion-mnist",
)


def _spec(classes: tuple[str, ...] = CLASSES, **overrides) -> DatasetSpec:
    values = dict(
        name="masks-test", n_classes=len(classes), channels=3, height=2, width=3,
        train_size=2, test_size=2, default_model="unet-tiny", mean=(0.5,) * 3,
        std=(0.25,) * 3, class_names=classes, task="segmentation",
    )  # fmt: skip
    values.update(overrides)
    return DatasetSpec(**values)


def _task(classes: tuple[str, ...] = CLASSES) -> Segmentation:
    return Segmentation(NoParams(), _spec(classes))


# ---------------------------------------------------------------- the metrics
# Two images of 2 x 3 pixels, classes 0..2, 255 = ignore.  Truth by prediction over the
# labelled pixels: A gives (0,0) (0,1) (1,1) (1,1) (2,0), B (2,2) (2,0) (0,0) (1,1) (0,0).
TRUTH = torch.tensor(
    [[[0, 0, 1], [1, 2, IGNORE_INDEX]], [[2, 2, 0], [IGNORE_INDEX, 1, 0]]], dtype=torch.uint8
)
PREDICTED = torch.tensor([[[0, 1, 1], [1, 0, 2]], [[2, 0, 0], [1, 1, 0]]])


def _logits(predicted: torch.Tensor, classes: int) -> torch.Tensor:
    """Scores (B, C, H, W) whose arg-max is ``predicted``."""
    return torch.nn.functional.one_hot(predicted, classes).permute(0, 3, 1, 2).float() * 10


def test_iou_dice_and_pixel_accuracy_equal_a_case_worked_by_hand():
    """The confusion matrix (rows truth, columns prediction) is [[3, 1, 0], [0, 3, 0],
    [2, 0, 1]]: TP (3, 3, 1), FP (2, 1, 0), FN (1, 0, 2).  IoU = TP / (TP + FP + FN) =
    (3/6, 3/4, 1/3), mIoU = 19/36; Dice = 2TP / (2TP + FP + FN) = (6/9, 6/7, 2/4), mean
    85/126; pixel accuracy 7/10 (the two ignored pixels count nowhere, whatever their
    prediction).  A fourth class, absent from truth and prediction, has no IoU and is left
    out of the means."""
    for classes in (CLASSES, (*CLASSES, "absent")):
        acc = _task(classes).accumulator()
        acc.update(_logits(PREDICTED, len(classes)), TRUTH, None)
        values = acc.compute().values
        assert values["miou"] == pytest.approx(19 / 36, abs=1e-12)
        assert values["dice"] == pytest.approx(85 / 126, abs=1e-12)
        assert values["pixel_acc"] == pytest.approx(7 / 10, abs=1e-12)
        assert [values[f"iou/{n}"] for n in CLASSES] == pytest.approx([1 / 2, 3 / 4, 1 / 3])
    assert math.isnan(values["iou/absent"])


def test_the_metrics_agree_with_scikit_learns_on_the_labelled_pixels():
    """Dataset-level IoU is scikit-learn's Jaccard index of the split's labelled pixels,
    Dice its F1 score, pixel accuracy its accuracy (torchmetrics is not a dependency)."""
    from sklearn.metrics import accuracy_score, f1_score, jaccard_score

    rng = np.random.default_rng(0)
    truth = rng.integers(0, 4, (5, 6, 7))
    truth[rng.random(truth.shape) < 0.1] = IGNORE_INDEX
    predicted = rng.integers(0, 4, truth.shape)
    acc = _task(("a", "b", "c", "d")).accumulator()
    for rows in (slice(0, 2), slice(2, 5)):  # two batches: the sums, not the batches, decide
        acc.update(
            _logits(torch.from_numpy(predicted[rows]), 4), torch.from_numpy(truth[rows]), None
        )
    values = acc.compute().values
    keep = truth != IGNORE_INDEX
    t, p = truth[keep], predicted[keep]
    assert values["miou"] == pytest.approx(jaccard_score(t, p, average="macro"))
    assert values["dice"] == pytest.approx(f1_score(t, p, average="macro"))
    assert values["pixel_acc"] == pytest.approx(accuracy_score(t, p))


def test_per_party_values_are_each_partys_own_pixels_and_pooled_the_sum():
    """Party 0 holds image A: matrix [[1, 1, 0], [0, 2, 0], [1, 0, 0]], IoU (1/3, 2/3, 0)
    (class 2 is in A's truth: its 0 counts), mIoU 1/3.  Party 1 holds B: [[2, 0, 0],
    [0, 1, 0], [1, 0, 1]], IoU (2/3, 1, 1/2), mIoU 13/18.  Party 2 holds nothing: NaN.
    The pooled values are the summed matrix's (19/36), not the parties' mean."""
    acc = _task().accumulator(3)
    acc.update(_logits(PREDICTED, 3), TRUTH, torch.tensor([0, 1]))
    scores = acc.compute()
    assert scores.party_values["miou"][:2] == pytest.approx([1 / 3, 13 / 18])
    assert math.isnan(scores.party_values["miou"][2]) and scores.parties == 2
    assert scores.values["miou"] == pytest.approx(19 / 36)
    assert scores.party_values["pixel_acc"][:2] == pytest.approx([3 / 5, 4 / 5])


def test_confusion_scores_leave_a_class_without_pixels_out():
    matrix = np.array([[4, 0, 0], [0, 0, 0], [1, 0, 5]])  # class 1: no pixel, no prediction
    scores = confusion_scores(matrix)
    assert math.isnan(scores["iou"][1])
    assert scores["miou"] == pytest.approx((4 / 5 + 5 / 6) / 2)
    assert math.isnan(confusion_scores(np.zeros((2, 2)))["miou"])


def test_the_loss_is_each_images_mean_over_its_labelled_pixels():
    task = _task()
    logits = torch.zeros(3, 3, 2, 3)  # uniform scores: ln 3 at every labelled pixel
    masks = TRUTH.long()
    masks = torch.cat([masks, torch.full((1, 2, 3), IGNORE_INDEX)])  # no labelled pixel
    per_image = task.per_sample_loss(logits, masks)
    assert per_image.tolist() == pytest.approx([math.log(3), math.log(3), 0.0])
    # the image without a labelled pixel adds nothing to the batch's mean
    assert float(task.loss(logits, masks)) == pytest.approx(math.log(3))
    acc = task.accumulator()
    acc.update(logits, masks, None)
    assert acc.compute().values["loss"] == pytest.approx(math.log(3))


def test_masks_are_taken_as_int64_and_resized_by_nearest_neighbour():
    masks = torch.tensor([[[0, 1], [2, IGNORE_INDEX]]], dtype=torch.uint8).repeat(3, 1, 1)
    taken = take_masks(masks, torch.tensor([2, 0]))
    assert taken.dtype == torch.int64 and taken.shape == (2, 2, 2)
    assert take_masks(masks, slice(1, 3)).shape == (2, 2, 2)
    doubled = resize_masks(masks, (4, 4))[0]
    assert doubled.tolist() == [[0, 0, 1, 1], [0, 0, 1, 1], [2, 2, 255, 255], [2, 2, 255, 255]]
    shrunk = resize_masks(torch.arange(36, dtype=torch.uint8).view(1, 6, 6), (3, 3))
    assert set(shrunk.unique().tolist()) <= set(range(36))  # copied, never blended
    assert collate_masks([masks[0], masks[1]]).dtype == torch.int64
    with pytest.raises(MaskTargetsError):
        collate_masks([masks[0], torch.zeros(3, 3)])


def test_flips_crops_and_rotations_are_refused_in_one_line():
    for moving in (dict(crop_flip=True), dict(rotate_degrees=15.0)):
        with pytest.raises(ValueError) as err:
            Segmentation(NoParams(), _spec(**moving))
        assert "\n" not in str(err.value) and "masks" in str(err.value)


# ---------------------------------------------------------------- the folder
def write_folder(
    root: Path,
    train: int = 24,
    test: int = 6,
    size: tuple[int, int] = (20, 24),
    sites: int = 2,
    seed: int = 0,
) -> Path:
    """A segmentation folder of grey noise with a bright square (class 1) and a dark bar
    (class 2) in each image, a one-pixel ignored rim around the square."""
    rng = np.random.default_rng(seed)
    rows = ["stem,site,odd"]
    for split, count in (("", train), ("test", test)):
        if not count:
            continue
        base = root / split
        (base / "images").mkdir(parents=True, exist_ok=True)
        (base / "masks").mkdir(exist_ok=True)
        for k in range(count):
            h, w = size
            image = rng.integers(90, 140, (h, w, 3)).astype(np.uint8)
            mask = np.zeros((h, w), dtype=np.uint8)
            top, left = (int(v) for v in rng.integers(1, 8, 2))
            mask[top - 1 : top + 7, left - 1 : left + 7] = IGNORE_INDEX
            mask[top : top + 6, left : left + 6] = 1
            image[top : top + 6, left : left + 6] = 230
            mask[h - 4 : h - 2, 2 : w - 2] = 2
            image[h - 4 : h - 2, 2 : w - 2] = 20
            stem = f"{split or 'train'}{k:03d}"
            Image.fromarray(image, "RGB").save(base / "images" / f"{stem}.png")
            Image.fromarray(mask, "L").save(base / "masks" / f"{stem}.png")
            if not split:
                rows.append(f"{stem},{k % sites},x")
    (root / "classes.json").write_text(json.dumps(list(CLASSES)))
    (root / "parties.csv").write_text("\n".join(rows) + "\n")
    return root


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_folder(tmp_path / "seg")


def test_a_segmentation_folder_is_read_by_its_own_reader_from_the_tasks_registry(folder):
    readers = folder_readers()
    assert READER in readers and readers[-1].name == "image"  # the fallback is asked last
    assert folder_reader(folder) is READER
    load = load_folder(f"folder:{folder}", data_root=folder.parent / "data")
    data = load.data
    assert data.spec.task == "segmentation" and data.spec.class_names == CLASSES
    assert data.spec.default_model == "unet-tiny" and model_family(data.spec) is SEGMENTERS
    assert data.train_x.shape == (24, 3, 20, 24) and data.test_x.shape == (6, 3, 20, 24)
    assert data.train_y.shape == (24, 20, 24) and data.train_y.dtype == torch.uint8
    stored = np.asarray(Image.open(folder / "masks" / "train000.png"))
    assert np.array_equal(data.train_y[0].numpy(), stored)  # the file's values, exactly
    assert load.source == "decoded"
    again = load_folder(f"folder:{folder}", data_root=folder.parent / "data", use_memory=False)
    assert again.source == "disk cache" and torch.equal(again.data.train_y, data.train_y)
    identity = folder_identity(f"folder:{folder}")
    assert identity["task"] == "segmentation" and identity["party_fields"] == {"site": 2, "odd": 1}


def test_image_size_resizes_masks_by_nearest_neighbour_and_parties_come_from_a_field(folder):
    data = load_folder(
        f"folder:{folder}", "40x48", None, folder.parent / "data", partition_by="site"
    ).data
    assert data.train_y.shape == (24, 40, 48)
    stored = torch.from_numpy(np.array(Image.open(folder / "masks" / "train000.png")))
    assert torch.equal(data.train_y[0], resize_masks(stored[None], (40, 48))[0])
    assert data.spec.party_names == ("0", "1") and data.train_parties.tolist() == [0, 1] * 12


def test_without_a_test_folder_a_holdout_is_drawn(tmp_path):
    root = write_folder(tmp_path / "seg", train=30, test=0)
    data = load_folder(f"folder:{root}", None, 0.2, tmp_path / "data").data
    assert data.train_x.shape[0] == 24 and data.test_x.shape[0] == 6
    with pytest.raises(SegmentationDataError, match="no such folder"):
        load_folder(f"folder:{root}", None, None, tmp_path / "data")


def _one_line(root: Path, **load) -> str:
    with pytest.raises(FolderDataError) as err:
        load_folder(f"folder:{root}", data_root=root.parent / "data", **load)
    text = str(err.value)
    assert "\n" not in text
    return text


def _rewrite_mask(path: Path, change) -> None:
    values = np.array(Image.open(path))
    Image.fromarray(change(values)).save(path)


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda r: (r / "masks" / "train003.png").unlink(), "train003.png: no mask"),
        (
            lambda r: Image.new("L", (3, 3)).save(r / "masks" / "stray.png"),
            "stray.png: no image",
        ),
        (
            lambda r: Image.new("L", (24, 19)).save(r / "masks" / "train001.png"),
            "24x19 (width x height), but its image train001.png is 24x20",
        ),
        (
            lambda r: _rewrite_mask(
                r / "masks" / "train002.png", lambda v: np.where(v == 2, 7, v).astype(np.uint8)
            ),
            "pixel value 7 at row 16, column 2 is beyond the 3 classes",
        ),
        (
            lambda r: Image.new("RGB", (24, 20)).save(r / "masks" / "train004.png"),
            "a RGB image (allowed: one channel of class indices",
        ),
        (lambda r: (r / "classes.json").unlink(), "classes.json: no such file"),
        (lambda r: (r / "classes.json").write_text('["a", "b"'), "line 1, column 10"),
        (lambda r: (r / "classes.json").write_text('["a", "a"]'), "class name 'a' twice"),
        (lambda r: (r / "classes.json").write_text('["a"]'), "1 classes (allowed: 2 to 255"),
        (
            lambda r: (r / "images" / "train005.txt").write_text("x"),
            "train005.txt: not an image file",
        ),
        (
            lambda r: (r / "masks" / "train000.png").rename(r / "masks" / "train000.jpg"),
            "train000.jpg: not a PNG mask",
        ),
        (
            lambda r: (r / "parties.csv").write_text("stem,site\nnobody,1\n"),
            "line 2: stem 'nobody' is no training image",
        ),
        (lambda r: (r / "parties.csv").write_text("name,site\n"), "line 1: the header must"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(folder, damage, expected):
    damage(folder)
    assert expected in _one_line(folder)


def test_a_test_folder_and_a_holdout_together_are_refused(folder):
    assert "a test folder exists and holdout_fraction=0.2" in _one_line(
        folder, holdout_fraction=0.2
    )


def test_a_party_field_must_exist_and_name_every_training_images_party(folder):
    assert "no field 'camera' for partition_by (fields: site, odd)" in _one_line(
        folder, partition_by="camera"
    )
    assert "field 'odd' gives 1 parties" in _one_line(folder, partition_by="odd")
    lines = (folder / "parties.csv").read_text().splitlines()
    (folder / "parties.csv").write_text("\n".join(lines[:-1]) + "\n")  # train023 has no row
    assert "train023.png: no site in parties.csv" in _one_line(folder, partition_by="site")


def test_the_config_takes_partition_by_and_refuses_what_segmentation_cannot_do(folder):
    base = dict(dataset=f"folder:{folder}", data_root=str(folder.parent / "data"))
    resolved = with_data_checked(RunConfig(**base, partition="natural", partition_by="site"))
    assert resolved.n_parties == 2 and resolved.task == "segmentation"
    assert with_data_checked(RunConfig(**base, partition="iid", n_parties=2)).model == "unet-tiny"
    refusals = [
        ({"partition": "natural"}, "partition_by=FIELD (a column of parties.csv) for a segm"),
        ({"partition": "dirichlet"}, "its natural parties are a column of parties.csv"),
        (
            {"partition": "iid", "model": "simple-cnn"},
            "for segmentation data one of unet-tiny, lraspp-mobilenet-v3",
        ),
        (
            {"partition": "iid", "feature_skew": "rotation", "feature_skew_level": 30.0},
            "feature_skew='rotation'",
        ),
    ]
    for overrides, expected in refusals:
        with pytest.raises(ConfigError) as err:
            with_data_checked(RunConfig(**base, **overrides))
        assert expected in str(err.value) and "\n" not in str(err.value)


# ---------------------------------------------------------------- the models
@pytest.mark.parametrize("name", list(SEGMENTATION_MODELS))
def test_every_segmentation_network_builds_offline_and_trains_a_step(name):
    torch.manual_seed(0)
    spec = _spec(height=32, width=32)
    model = build_model(name, spec, out_dim=16).train()
    x = torch.randn(2, 3, 32, 32)
    out = model(x)
    assert out.logits.shape == (2, 3, 32, 32) and out.projection.shape == (2, 16)
    Segmentation(NoParams(), spec).loss(out.logits, torch.randint(0, 3, (2, 32, 32))).backward()
    # the projection head reaches the objective with a zero gradient (FedDyn, FedProx)
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    with torch.no_grad():
        assert torch.equal(model.project(x), model(x).projection)


def test_moons_representation_is_the_pooled_deepest_encoder_map_through_the_head():
    torch.manual_seed(0)
    model = build_model("unet-tiny", _spec(height=32, width=32), out_dim=16).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        deepest = model.encoder(x)[-1]
        out = model(x)
    assert deepest.shape == (2, 64, 8, 8)
    assert torch.allclose(out.features, deepest.mean(dim=(2, 3)))
    names = {n.split(".")[0] for n, _ in model.named_parameters()}
    assert names == {"encoder", "classifier", "head"}  # FedPer's and LG-FedAvg's stages


# ---------------------------------------------------------------- the builder
def load_builder():
    return load_example(EXAMPLE)


SMALL = ["--train-images", "48", "--test-images", "12", "--sites", "3"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    return built_tree(tmp_path_factory, EXAMPLE, SMALL, "segmentation")


@needs_fmnist
def test_the_built_tree_loads_with_exact_masks_and_sites_as_parties(tree, tmp_path):
    data = load_folder(f"folder:{tree}", None, None, tmp_path, partition_by="site").data
    assert data.spec.class_names == ("background", "t-shirt", "trouser", "sneaker", "bag")
    assert data.train_x.shape == (48, 3, 32, 32) and data.test_x.shape == (12, 3, 32, 32)
    assert data.spec.party_names == ("0", "1", "2")
    values = set(data.train_y.unique().tolist()) | set(data.test_y.unique().tolist())
    assert values == {0, 1, 2, 3, 4, IGNORE_INDEX}
    objects = (data.train_y > 0) & (data.train_y < IGNORE_INDEX)
    assert bool(objects.flatten(1).any(dim=1).all())  # every image shows an object
    # an object's pixels are brighter than the dimmed background mosaic around them
    bright = data.train_x.float().mean(dim=1)
    assert float(bright[objects].mean()) > float(bright[data.train_y == 0].mean()) + 40
    build = json.loads((tree / "build.json").read_text())
    assert [s["train_images"] for s in build["site_list"]] == np.bincount(
        data.train_parties.numpy()
    ).tolist()


@needs_fmnist
def test_the_same_seed_builds_the_same_bytes(tree, tmp_path):
    again = tmp_path / "again"
    assert load_builder().main([str(again), *SMALL]) == 0
    for name in ("masks/00007.png", "images/00007.png", "test/masks/00050.png", "parties.csv"):
        assert (again / name).read_bytes() == (tree / name).read_bytes()


@needs_fmnist
@pytest.mark.parametrize(
    "argv, what, by_parser",
    [
        (["--train-images", "20", "--sites", "2"], "--train-images 20 (allowed: at least 24", 0),
        (["--sites", "9"], "argument --sites: 9 (allowed: 2 to 6)", 1),
        (["--size", "8"], "argument --size: 8 (allowed: 16 to 256)", 1),
    ],
)
def test_bad_builder_input_is_one_line_and_writes_nothing(tmp_path, capsys, argv, what, by_parser):
    assert_refused_in_one_line(load_builder(), argv, what, by_parser, tmp_path, capsys)


# ---------------------------------------------------------------- the runs
def _config(tree: Path, data_root: Path, **overrides) -> RunConfig:
    return RunConfig(**site_run(tree, data_root, rounds=2) | overrides)


METRIC_PREFIXES = ("test_", "val_", "party_", "train_loss", "con_loss")


def _metrics(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in row.items() if k.startswith(METRIC_PREFIXES)} for row in rows]


@needs_fmnist
@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "moon"])
def test_fedavg_fedprox_and_moon_train_two_rounds_with_miou_in_the_rows(tree, tmp_path, algorithm):
    with pytest.warns(UserWarning, match="segmentation trains one party at a time"):
        run = FederatedRun(_config(tree, tmp_path, algorithm=algorithm))
    rows = [run.run_round(), run.run_round()]
    for row in rows:
        assert not row["diverged"] and math.isfinite(row["train_loss"])
        for stem in ("miou", "dice", "pixel_acc"):
            assert 0.0 <= row[f"test_{stem}"] <= 1.0 and 0.0 <= row[f"val_{stem}"] <= 1.0
        assert math.isfinite(row["test_loss"]) and run.task.party_stem() == "miou"
        assert all(f"test_iou/{name}" in row for name in run.spec.class_names)
        assert 0.0 <= row["party_miou_mean"] <= 1.0  # the parties' own local test splits
    assert run.local_test_metrics["dice"].shape == (3,)
    if algorithm == "moon":  # the second round has a previous model: a contrastive term
        assert math.isfinite(rows[1]["con_loss"]) and rows[1]["con_loss"] > 0


@needs_fmnist
@pytest.mark.parametrize(
    "overrides",
    [
        {"algorithm": name}
        for name in (
            "scaffold", "fednova", "feddyn", "l2rep", "solo", "fedbn", "fedper", "fedrep",
            "lg-fedavg", "ditto", "apfl",
        )
    ]
    + [{"server_optimizer": "fedadam"}, {"finetune_epochs": 1}],
    ids=lambda o: "-".join(map(str, o.values())),
)  # fmt: skip
def test_the_other_methods_fine_tuning_and_server_optimizers_run_a_round(tree, tmp_path, overrides):
    """Every weight-based and personalised method: the segmentation network's stages
    are named as FedPer's, FedRep's and LG-FedAvg's rules read them (encoder,
    classifier, head), and BatchNorm follows the run's rule (FedBN)."""
    with pytest.warns(UserWarning):
        rows = list(run_rounds(_config(tree, tmp_path, rounds=1, **overrides)))
    row = rows[-1]
    assert not row["diverged"] and math.isfinite(row["train_loss"])
    assert 0.0 <= row["test_miou"] <= 1.0


@needs_fmnist
def test_a_start_of_another_class_count_keeps_the_dense_heads_last_layer_fresh(tree, tmp_path):
    """A pretrained start is a state-dict file of the same network (``init``): a start
    trained on other classes sets every layer but the 1 x 1 output convolution."""
    torch.manual_seed(3)
    seven = build_model("unet-tiny", _spec(tuple("abcdefg"), height=32, width=32))
    torch.save(seven.state_dict(), tmp_path / "start.pt")
    with pytest.warns(UserWarning, match="classifier.out"):
        run = FederatedRun(_config(tree, tmp_path, init=str(tmp_path / "start.pt")))
    state = run.global_model.state_dict()
    assert torch.equal(
        state["encoder.level1.0.weight"], seven.state_dict()["encoder.level1.0.weight"]
    )
    assert state["classifier.out.weight"].shape[0] == 5


@needs_fmnist
def test_a_run_is_the_same_for_the_same_seed_and_another_for_another(tree, tmp_path):
    first = _metrics(list(run_rounds(_config(tree, tmp_path, algorithm="moon"))))
    second = _metrics(list(run_rounds(_config(tree, tmp_path, algorithm="moon"))))
    other = _metrics(list(run_rounds(_config(tree, tmp_path, algorithm="moon", seed=1))))
    assert json.dumps(first) == json.dumps(second)  # NaN-aware, bit for bit
    assert json.dumps(first) != json.dumps(other)


def _png_header(width: int, height: int) -> bytes:
    """A small real PNG whose IHDR chunk is rewritten to declare ``width`` x ``height``
    (its pixels stay few: a header that promises more than the file holds)."""
    import io
    import struct
    import zlib

    buffer = io.BytesIO()
    Image.new("L", (4, 4)).save(buffer, format="PNG")
    data = bytearray(buffer.getvalue())
    body = b"IHDR" + struct.pack(">II", width, height) + bytes(data[24:29])
    data[12:29] = body
    data[29:33] = struct.pack(">I", zlib.crc32(body))
    return bytes(data)


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        ("empty-image", "images/train003.png: an empty file (0 bytes; allowed: an image)"),
        ("huge-image", "images/train003.png: 9000x9000 pixels (allowed: at most 67,108,864"),
        ("huge-mask", "masks/train003.png: 20000x20000 pixels (allowed: at most 67,108,864"),
        (
            "jpeg-mask",
            "masks/train003.png: its bytes are JPEG, not PNG (a lossy codec alters class labels",
        ),
    ],
)
def test_a_damaged_segmentation_file_is_one_line_naming_it(tmp_path, damage, words):
    root = write_folder(tmp_path / "seg")
    image, mask = root / "images" / "train003.png", root / "masks" / "train003.png"
    if damage == "empty-image":
        image.write_bytes(b"")
    elif damage == "huge-image":
        image.write_bytes(_png_header(9000, 9000))
    elif damage == "huge-mask":
        mask.write_bytes(_png_header(20000, 20000))
    else:  # a JPEG under the mask's .png name
        Image.open(mask).convert("L").save(mask, format="JPEG")
    with pytest.raises(SegmentationDataError) as caught:
        load_folder(f"folder:{root}", data_root=tmp_path / "data")
    assert words in str(caught.value) and "\n" not in str(caught.value)
