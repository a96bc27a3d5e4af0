"""Detection folders: the Street and COCO readers, one size with exact boxes, natural
parties from an image field, the cache, and bad input refused in one line before any
work (federated/tasks/detection/: layout.py, annotations.py, coco_annotations.py,
street_annotations.py, reader.py).

The Street data set is not downloadable, so its files are written here from the
release's documented format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from federated.config.data_checks import spec_of, with_data_checked
from federated.config.run_config import ConfigError, RunConfig
from federated.data import load_dataset
from federated.data.folder_dataset import folder_identity, load_folder
from federated.data.hub_dataset import HubColumns
from federated.tasks.detection import annotations as detection_annotations
from federated.tasks.detection.annotations import DetectionDataError

STREET_CLASSES = ("basket", "carton", "chair", "electrombile", "gastank", "sunshade", "table")


def _photo(path: Path, height: int, width: int, seed: int, mode: str = "RGB") -> None:
    rng = np.random.default_rng(seed)
    shape = (height, width, 3) if mode == "RGB" else (height, width)
    Image.fromarray(rng.integers(0, 256, shape, dtype=np.uint8), mode).save(path)


def street_tree(root: Path, n_train: int = 30, n_test: int = 6) -> Path:
    """A Street-format folder of 80x60 photographs: every third image has no box, the
    others a chair at [8, 6, 40, 30] (plus a table on even images); device1_id 2-way,
    device2_id 3-way; test entries carry no device."""
    (root / "Images").mkdir(parents=True)
    train, test = [], []
    for i in range(n_train + n_test):
        image_id = f"{i:06d}"
        _photo(root / "Images" / f"{image_id}.jpg", 60, 80, i)
        items = []
        if i % 3:
            items.append({"class": "chair", "bbox": [8, 6, 40, 30]})
            if i % 2 == 0:
                items.append({"class": "table", "bbox": [0, 0, 80, 60]})
        entry = {"image_id": image_id, "items": items}
        if i < n_train:
            entry.update(device1_id=i % 2, device2_id=f"cam{i % 3}")
            train.append(entry)
        else:
            test.append(entry)
    (root / "train_label.json").write_text(json.dumps(train))
    (root / "test_label.json").write_text(json.dumps(test))
    return root


def coco_tree(root: Path, n_images: int = 24, with_test: bool = False) -> Path:
    """A COCO-style folder: categories with ids 7 ('dog') and 3 ('cat'), 40x50 images
    (one grey-scale), a crowd annotation, a 'camera' field on every image."""
    (root / "images" / "sub").mkdir(parents=True)
    (root / "annotations").mkdir()

    def split(ids: range) -> dict:
        images, annotations = [], []
        for i in ids:
            name = f"sub/{i}.png"
            _photo(root / "images" / name, 40, 50, i, "L" if i == 1 else "RGB")
            images.append(
                {"id": i, "file_name": name, "width": 50, "height": 40, "camera": f"c{i % 2}"}
            )
            annotations.append(
                {"id": 100 + i, "image_id": i, "category_id": 3 if i % 2 else 7,
                 "bbox": [5, 4, 20, 10]}
            )  # fmt: skip
            if i == 2:
                annotations.append(
                    {"id": 999, "image_id": i, "category_id": 7, "bbox": [0, 0, 50, 40],
                     "iscrowd": 1}
                )  # fmt: skip
        categories = [{"id": 7, "name": "dog"}, {"id": 3, "name": "cat"}]
        return {"images": images, "annotations": annotations, "categories": categories}

    (root / "annotations" / "train.json").write_text(json.dumps(split(range(n_images))))
    if with_test:
        test = split(range(n_images, n_images + 4))
        (root / "annotations" / "test.json").write_text(json.dumps(test))
    return root


# ------------------------------------------------------------------ loading
def test_street_folder_loads_with_exact_boxes_and_natural_parties(tmp_path):
    root = street_tree(tmp_path / "street")
    cache = tmp_path / "data"
    load = load_folder(f"folder:{root}", "30x40", None, cache, partition_by="device2_id")
    data = load.data
    assert load.source == "decoded"
    assert data.spec.task == "detection" and data.spec.target_names == STREET_CLASSES
    assert data.spec.class_names == STREET_CLASSES and data.spec.n_classes == 7
    assert data.train_x.shape == (30, 3, 30, 40) and data.train_x.dtype == torch.uint8
    assert data.test_x.shape == (6, 3, 30, 40)
    # plain resize 80x60 -> 40x30: every coordinate halves, exactly
    boxes, labels = data.train_y.image(2)
    assert boxes.tolist() == [[4, 3, 20, 15], [0, 0, 40, 30]] and labels.tolist() == [2, 6]
    assert data.train_y.image(0)[0].shape == (0, 4)  # an image without objects
    assert data.spec.party_names == ("cam0", "cam1", "cam2")
    assert data.train_parties.tolist() == [i % 3 for i in range(30)]
    street5 = load_folder(f"folder:{root}", "30x40", None, cache, partition_by="device1_id")
    assert street5.source == "disk cache"  # Street-5 and Street-20 share one decoding
    assert street5.data.spec.party_names == ("0", "1")
    assert street5.data.train_y.equals(data.train_y)
    none = load_folder(f"folder:{root}", "30x40", None, cache).data
    assert none.train_parties is None and none.spec.party_names == ()


def test_the_loader_reaches_a_detection_folder_through_load_dataset(tmp_path):
    root = street_tree(tmp_path / "street")
    data = load_dataset(
        f"folder:{root}", tmp_path / "data", columns=HubColumns(partition_by="device1_id")
    )
    # no image size given: the most common (here the only) size, 60x80
    assert data.train_x.shape[2:] == (60, 80)
    assert data.train_y.image(1)[0].tolist() == [[8, 6, 40, 30]]
    assert len(data.spec.party_names) == 2


def test_an_edited_annotation_file_is_a_new_decoding(tmp_path):
    root = street_tree(tmp_path / "street")
    cache = tmp_path / "data"
    first = load_folder(f"folder:{root}", "30x40", None, cache)
    entries = json.loads((root / "train_label.json").read_text())
    entries[0]["items"] = [{"class": "basket", "bbox": [0, 0, 10, 10]}]
    (root / "train_label.json").write_text(json.dumps(entries))
    second = load_folder(f"folder:{root}", "30x40", None, cache)
    assert second.fingerprint != first.fingerprint and second.source == "decoded"
    assert second.data.train_y.image(0)[1].tolist() == [0]
    assert len(list((cache / "folder-cache").glob("*.pt"))) == 1  # the stale entry went


def test_coco_folder_categories_crowds_channels_and_holdout(tmp_path):
    root = coco_tree(tmp_path / "coco", n_images=40)
    load = load_folder(f"folder:{root}", None, 0.25, tmp_path / "data", partition_by="camera")
    data = load.data
    # categories sorted by id: cat (3) is class 0, dog (7) class 1
    assert data.spec.target_names == ("cat", "dog")
    assert data.spec.channels == 3  # the grey image is repeated to three channels
    assert data.spec.train_size == 30 and data.spec.test_size == 10  # round(0.25 * 40)
    assert data.spec.party_names == ("c0", "c1")
    everything = torch.cat([data.train_y.boxes, data.test_y.boxes])
    # [x, y, w, h] = [5, 4, 20, 10] -> [5, 4, 25, 14]; the crowd box is left out
    assert everything.tolist() == [[5, 4, 25, 14]] * 40
    assert (data.train_y.counts_per_class(2) + data.test_y.counts_per_class(2)).tolist() == [20, 20]
    identity = folder_identity(f"folder:{root}")
    assert identity["format"] == "coco" and identity["party_fields"] == {"camera": 2}
    assert identity["train_boxes_per_class"] == [20, 20]


def test_coco_test_file_is_the_test_set(tmp_path):
    root = coco_tree(tmp_path / "coco", with_test=True)
    data = load_folder(f"folder:{root}", "20x25", None, tmp_path / "data").data
    assert (data.spec.train_size, data.spec.test_size) == (24, 4)
    assert data.test_y.boxes.tolist() == [[2.5, 2, 12.5, 7]] * 4


def test_config_fields_for_a_detection_folder(tmp_path):
    root = street_tree(tmp_path / "street")
    base = {"dataset": f"folder:{root}", "data_root": str(tmp_path / "data")}
    spec = spec_of(RunConfig(**base, partition="natural", partition_by="device2_id").resolved())
    assert spec.party_names == ("cam0", "cam1", "cam2")
    with pytest.raises(ConfigError, match="partition=natural together with partition_by"):
        spec_of(RunConfig(**base, partition="iid", partition_by="device1_id").resolved())
    with pytest.raises(ConfigError, match="partition_by=FIELD"):
        spec_of(RunConfig(**base, partition="natural").resolved())
    with pytest.raises(ConfigError, match="no image field 'camera'"):
        spec_of(RunConfig(**base, partition="natural", partition_by="camera").resolved())


def test_partition_by_on_a_class_folder_is_refused(tmp_path):
    for label in ("a", "b"):
        (tmp_path / "classes" / "train" / label).mkdir(parents=True)
        for i in range(2):
            _photo(tmp_path / "classes" / "train" / label / f"{i}.png", 8, 8, i)
    with pytest.raises(DetectionDataError.__mro__[1], match="partition_by='x'"):
        load_folder(
            f"folder:{tmp_path / 'classes'}", None, 0.5, tmp_path / "data", partition_by="x"
        )


def test_small_parties_are_left_out_as_for_an_hf_column(tmp_path):
    root = street_tree(tmp_path / "street", n_train=30)
    entries = json.loads((root / "train_label.json").read_text())
    for i, entry in enumerate(entries):
        entry["device1_id"] = "big" if i < 25 else "small"  # 25 and 5 images
    entries[-1]["device1_id"] = "other"
    (root / "train_label.json").write_text(json.dumps(entries))
    with pytest.raises(DetectionDataError, match="image field 'device1_id' gives 1 parties"):
        load_folder(f"folder:{root}", "30x40", None, tmp_path / "data", partition_by="device1_id")
    assert not (tmp_path / "data").exists()  # refused before the cache is written


# ------------------------------------------------------------------ bad input
def _street_edit(edit):
    def make(root: Path) -> Path:
        street_tree(root)
        entries = json.loads((root / "train_label.json").read_text())
        edit(root, entries)
        (root / "train_label.json").write_text(json.dumps(entries))
        return root

    return make


def _coco_edit(edit):
    def make(root: Path) -> Path:
        coco_tree(root)
        data = json.loads((root / "annotations" / "train.json").read_text())
        edit(root, data)
        (root / "annotations" / "train.json").write_text(json.dumps(data))
        return root

    return make


def _raw(name: str, content: bytes):
    def make(root: Path) -> Path:
        street_tree(root)
        (root / name).write_bytes(content)
        return root

    return make


def _set(path: list, value):
    def edit(root, data):
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value

    return edit


def _both_layouts(root: Path) -> Path:
    coco_tree(root)
    street_tree(root)
    return root


BAD = [
    ("street-box-outside", _street_edit(_set([1, "items", 0, "bbox"], [8, 6, 81, 30])),
     "train_label.json: entry 1 (image_id '000001'), item 0: box [x1, y1, x2, y2] = "
     "[8, 6, 81, 30] leaves its 80x60 image"),
    ("street-box-negative", _street_edit(_set([1, "items", 0, "bbox"], [-1, 6, 40, 30])),
     "leaves its 80x60 image"),
    ("street-x2-le-x1", _street_edit(_set([1, "items", 0, "bbox"], [40, 6, 40, 30])),
     "item 0: box [x1, y1, x2, y2] = [40, 6, 40, 30] is empty"),
    ("street-y2-lt-y1", _street_edit(_set([1, "items", 0, "bbox"], [8, 30, 40, 6])),
     "is empty (allowed: x2 > x1 and y2 > y1"),
    ("street-bbox-three", _street_edit(_set([1, "items", 0, "bbox"], [8, 6, 40])),
     "bbox=[8, 6, 40] (allowed: four finite numbers"),
    ("street-unknown-class", _street_edit(_set([1, "items", 0, "class"], "bicycle")),
     "class 'bicycle' is not a category (allowed: basket, carton"),
    ("street-missing-image", _street_edit(_set([2, "image_id"], "424242")),
     "entry 2 (image_id '424242'): no image"),
    ("street-duplicate-id", _street_edit(_set([2, "image_id"], "000001")),
     "entry 2 (image_id '000001'): a duplicate id, first at"),
    ("street-id-path", _street_edit(_set([2, "image_id"], "../x")), "image_id='../x'"),
    ("street-not-a-list", _raw("train_label.json", b'{"image_id": "1"}'),
     "a JSON dict (allowed: a list of entries"),
    ("street-not-utf8", _raw("train_label.json", b'[{"image_id": "\xff"}]'),
     "train_label.json: line 1: byte 0xff is not UTF-8"),
    ("street-malformed", _raw("train_label.json", b'[{"image_id": "000001",\n "items": [}]'),
     "train_label.json: line 2, column"),
    ("test-duplicates-train", _raw("test_label.json", b'[{"image_id": "000003", "items": []}]'),
     "test_label.json: entry 0 (image_id '000003'): a duplicate id"),
    ("test-unreadable-image", _raw("Images/000031.jpg", b"not a jpeg"),
     "000031.jpg is not a readable image"),
    ("coco-box-outside", _coco_edit(_set(["annotations", 4, "bbox"], [40, 4, 20, 10])),
     "annotations[4] (id 103): box [x1, y1, x2, y2] = [40, 4, 60, 14] leaves its 50x40 image"),
    ("coco-zero-width", _coco_edit(_set(["annotations", 4, "bbox"], [5, 4, 0, 10])),
     "has a width or height <= 0"),
    ("coco-unknown-category", _coco_edit(_set(["annotations", 4, "category_id"], 5)),
     "category_id=5 is not a category (allowed: 3 (cat), 7 (dog))"),
    ("coco-unknown-image", _coco_edit(_set(["annotations", 4, "image_id"], 77)),
     "image_id=77 is not in 'images'"),
    ("coco-duplicate-image-id", _coco_edit(_set(["images", 3, "id"], 2)),
     "images[3]: a duplicate id 2"),
    ("coco-duplicate-annotation-id", _coco_edit(_set(["annotations", 4, "id"], 101)),
     "annotations[4] (id 101): a duplicate id"),
    ("coco-duplicate-file", _coco_edit(_set(["images", 3, "file_name"], "sub/2.png")),
     "sub/2.png is listed twice"),
    ("coco-missing-image", _coco_edit(_set(["images", 3, "file_name"], "sub/nope.png")),
     "images[3] (id 3): no image"),
    ("coco-escaping-path", _coco_edit(_set(["images", 3, "file_name"], "../x.png")),
     "file_name='../x.png' (allowed: a path relative to"),
    ("coco-wrong-size", _coco_edit(_set(["images", 3, "width"], 64)),
     "width x height 64x40, but 3.png is 50x40"),
    ("coco-no-categories", _coco_edit(_set(["categories"], [])), "no categories"),
    ("coco-no-boxes", _coco_edit(_set(["annotations"], [])), "no boxes in any training image"),
    ("both-layouts", _both_layouts, "holds both annotations/train.json and train_label.json"),
]  # fmt: skip


def _snapshot(folder: Path) -> dict[str, int]:
    return {str(p): p.stat().st_mtime_ns for p in folder.rglob("*")}


@pytest.mark.parametrize(("make", "words"), [pytest.param(m, w, id=i) for i, m, w in BAD])
def test_bad_detection_input_is_one_line_before_any_work(make, words, tmp_path):
    root = make(tmp_path / "data_folder")
    before = _snapshot(root)
    with pytest.raises(DetectionDataError) as caught:
        load_folder(f"folder:{root}", None, None, tmp_path / "cache")
    message = str(caught.value)
    assert "\n" not in message and words in message, message
    assert str(root) in message  # names the file
    assert not (tmp_path / "cache").exists() and _snapshot(root) == before


def test_a_huge_annotation_file_is_refused_unread(tmp_path, monkeypatch):
    root = street_tree(tmp_path / "street")
    monkeypatch.setattr(detection_annotations, "MAX_ANNOTATION_BYTES", 100)
    with pytest.raises(
        DetectionDataError, match=r"train_label.json: \d[\d,]* bytes \(allowed: at most 100"
    ):
        load_folder(f"folder:{root}", None, None, tmp_path / "cache")


def test_the_cli_names_a_bad_box_in_one_line(tmp_path, capsys):
    from federated import run

    root = _street_edit(_set([1, "items", 0, "bbox"], [8, 6, 99, 30]))(tmp_path / "street")
    status = run.main(
        ["--dataset", f"folder:{root}", "--data-root", str(tmp_path / "cache"), "--rounds", "1"]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert status != 0 and len(err) == 1 and err[0].startswith("error: ")
    assert "item 0: box [x1, y1, x2, y2] = [8, 6, 99, 30] leaves its 80x60 image" in err[0]
    assert not (tmp_path / "cache").exists()


@pytest.mark.skipif(
    "detection" not in __import__("federated.registry").registry.TASK_PATHS,
    reason="the detection task is not registered",
)
def test_a_label_skew_partition_on_detection_data_is_refused_in_one_line(tmp_path):
    root = street_tree(tmp_path / "street")
    config = RunConfig(
        dataset=f"folder:{root}", data_root=str(tmp_path / "data"), partition="dirichlet"
    )
    refusal = "needs a class label per image, which a detection task does not have"
    with pytest.raises(ConfigError, match=refusal) as err:
        with_data_checked(config)
    assert "\n" not in str(err.value)
    # a detection folder's parties are an image field, never party folders
    assert "natural parties are an image field: partition=natural with partition_by=FIELD" in (
        str(err.value)
    )
    assert "train/<party>" not in str(err.value) and "party folders" not in str(err.value)


@pytest.mark.skipif(
    "detection" not in __import__("federated.registry").registry.TASK_PATHS,
    reason="the detection task is not registered",
)
@pytest.mark.parametrize("partition", ["iid", "quantity", "natural"])
def test_iid_quantity_and_natural_partitions_split_detection_images(partition, tmp_path):
    from federated.heterogeneity.partition import partition_for_run

    root = street_tree(tmp_path / "street", n_train=40)
    config = with_data_checked(
        RunConfig(
            dataset=f"folder:{root}",
            data_root=str(tmp_path / "data"),
            partition=partition,
            n_parties=None if partition == "natural" else 3,
            partition_by="device2_id" if partition == "natural" else None,
            beta=5.0,
        )
    )
    data = load_dataset(config.dataset, config.data_root, columns=HubColumns.of(config))
    parts = partition_for_run(np.zeros(len(data.train_y), np.int64), config, data.train_parties)
    assert len(parts) == 3 and sum(len(p) for p in parts) == 40
    assert sorted(np.concatenate(parts).tolist()) == list(range(40))
    if partition == "natural":  # each party is one camera's images
        assert [sorted({i % 3 for i in p.tolist()}) for p in parts] == [[0], [1], [2]]


def test_a_missing_tree_is_named_as_the_dataset_before_partition_by(tmp_path):
    """The street study fixes partition_by (an image field of a detection folder): a
    tree that is not there is the dataset's error, not partition_by's."""
    from search_spaces import BUDGETS, STUDIES
    from study.plan import SweepPlan

    missing = tmp_path / "no-tree"
    expected = f"dataset='folder:{missing}' (allowed: a usable image folder; {missing}: no such"
    with pytest.raises(ConfigError) as raised:
        SweepPlan.build(
            STUDIES["street"], BUDGETS["smoke"], overrides={"dataset": f"folder:{missing}"}
        )
    assert expected in str(raised.value) and "partition_by" not in str(raised.value)
    with pytest.raises(ConfigError, match="dataset='folder:"):
        with_data_checked(
            RunConfig(dataset=f"folder:{missing}", partition="natural", partition_by="device2_id")
        )
    assert not missing.exists()
