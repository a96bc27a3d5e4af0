"""examples/build_street_task.py: a Street-format tree of real photographs and real
Fashion-MNIST objects with exact boxes, that the Street reader loads as Street-5 and
Street-20; seeded; bad flags refused in one line with nothing written."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from federated.data.folder_dataset import load_folder
from federated.tasks.detection.street_annotations import STREET_CLASSES
from tests.example_scripts import load_example

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "build_street_task.py"
FMNIST = Path("/usr/share/datasets/fashion-mnist")
pytestmark = pytest.mark.skipif(
    not (FMNIST / "train-images-idx3-ubyte.gz").is_file(),
    reason="needs Debian's dataset-fashion-mnist",
)
SMALL = ["--size", "48", "--train-images", "360", "--test-images", "30", "--unseen-cameras", "3"]


def load_builder():
    return load_example(EXAMPLE)


builder = load_builder()


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("street") / "task"
    assert builder.main([str(out), *SMALL]) == 0
    return out


def test_the_tree_loads_as_street_20_and_street_5(tree, tmp_path):
    street20 = load_folder(f"folder:{tree}", None, None, tmp_path, partition_by="device2_id").data
    street5 = load_folder(f"folder:{tree}", None, None, tmp_path, partition_by="device1_id").data
    assert street20.spec.task == "detection" and street20.spec.target_names == STREET_CLASSES
    assert street20.train_x.shape == (360, 3, 48, 48) and street20.test_x.shape[0] == 30
    assert street20.spec.party_names == tuple(str(k) for k in range(20))
    assert street5.spec.party_names == tuple(str(k) for k in range(5))
    # the stored size is the built size: the loaded boxes are the JSON's, unscaled
    entries = json.loads((tree / "train_label.json").read_text())
    for i in (0, 100, 359):
        boxes, labels = street20.train_y.image(i)
        assert boxes.tolist() == [item["bbox"] for item in entries[i]["items"]]
        assert [STREET_CLASSES[k] for k in labels] == [it["class"] for it in entries[i]["items"]]


def test_cameras_are_non_iid_and_the_test_set_mixes_known_and_unseen(tree):
    entries = json.loads((tree / "train_label.json").read_text())
    build = json.loads((tree / "build.json").read_text())
    per_camera = Counter(e["device2_id"] for e in entries)
    assert min(per_camera.values()) >= 12 and max(per_camera.values()) > 2 * min(
        per_camera.values()
    )
    assert len(set(Counter(e["device1_id"] for e in entries).values())) > 1  # unequal groups
    classes = Counter(item["class"] for e in entries for item in e["items"])
    assert set(classes) == set(STREET_CLASSES)
    assert any(not e["items"] for e in entries)  # images without objects
    mixes = np.array([c["class_mix"] for c in build["camera_list"][:20]])
    assert mixes.max(axis=0).min() > 0.2 and (mixes.max(axis=1) > 0.4).any()  # skewed mixes
    unseen = [t for t in build["test_cameras"] if t["unseen"]]
    assert {t["camera"] for t in unseen} == {20, 21, 22}
    assert 0 < len(unseen) < 30
    test = json.loads((tree / "test_label.json").read_text())
    assert all(set(e) == {"image_id", "items"} for e in test)  # no device, as Street's


def test_a_pasted_item_changes_exactly_the_pixels_of_its_box():
    scene = np.zeros((40, 40, 3))
    item = np.zeros((28, 28), dtype=np.uint8)
    item[5:20, 9:15] = 200
    _, box = builder.paste(scene, item, 3, 7, 28, np.array([100.0, 50.0, 25.0]))
    rows = np.flatnonzero(scene.sum(axis=(1, 2)) > 0)
    cols = np.flatnonzero(scene.sum(axis=(0, 2)) > 0)
    assert box == [3 + 9, 7 + 5, 3 + 15, 7 + 20]
    assert box == [int(cols[0]), int(rows[0]), int(cols[-1]) + 1, int(rows[-1]) + 1]


def test_a_seed_gives_the_same_tree(tree, tmp_path):
    again = tmp_path / "again"
    assert builder.main([str(again), *SMALL]) == 0
    for name in ("train_label.json", "test_label.json", "build.json", "Images/000007.jpg"):
        assert (again / name).read_bytes() == (tree / name).read_bytes(), name


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--cameras", "3"], "--cameras 3 (allowed: at least 5"),
        (["--train-images", "100"], "--train-images 100 (allowed: at least 240"),
        (["--test-images", "6"], "--test-images 6 (allowed: more than --unseen-cameras 6"),
        (["--size", "8"], "--size: 8 (allowed: 32 to 512)"),
        (["--alpha", "0"], "--alpha: 0 (allowed: 0.01 to 1000)"),
        (["--seed", "x"], "'x' is not an integer"),
    ],
)
def test_bad_flags_are_one_line_and_write_nothing(argv, words, tmp_path, capsys):
    before = sorted(tmp_path.iterdir())
    try:
        status = builder.main([str(tmp_path / "out"), *argv])
    except SystemExit as stop:  # argparse's own errors
        status = stop.code
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and err[0].startswith("error: ") and words in err[0], err
    assert sorted(tmp_path.iterdir()) == before


def test_an_existing_out_is_refused(tree, capsys):
    assert builder.main([str(tree)]) == 2
    assert "already exists" in capsys.readouterr().err
