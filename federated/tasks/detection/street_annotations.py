"""Reading the Street data set's own annotation files (Luo et al., "Real-World Image
Datasets for Federated Learning", 2019), as its release documents them::

    PATH/train_label.json      [{"image_id": "009579", "device1_id": 3, "device2_id": 12,
                                 "items": [{"class": "chair", "bbox": [x1, y1, x2, y2]}]}]
    PATH/test_label.json       the same entries without device ids (optional: else
                               --holdout-fraction)
    PATH/Images/<image_id>.jpg the images (``images/`` is read too; .jpeg and .png as well)
    PATH/classes.names         optional: the class names, one a line; default the
                               release's seven, :data:`STREET_CLASSES`

``device1_id`` is the 5-way (Street-5) and ``device2_id`` the 20-way (Street-20) split
of the training cameras; any scalar field of an entry can be the natural partition
(``--partition natural --partition-by device1_id``).  ``bbox`` is pixel
``[xmin, ymin, xmax, ymax]``; ``class`` a class name; ``image_id`` a string (``"009579"``
names ``Images/009579.jpg``) or an integer, whose digits name the file (9579:
``9579.jpg``).  An entry with no items is an image without objects.  The data set itself
is not downloadable (its authors send it on request), so this reader is built from that
description and tested on files the tests write.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from federated.tasks.detection.annotations import (
    AnnotatedImage,
    DetectionDataError,
    check_degenerate,
    id_text,
    number_list,
    other_fields,
    read_annotation_json,
    scalar_fields,
)

STREET_TRAIN = "train_label.json"
STREET_TEST = "test_label.json"
STREET_CLASSES_FILE = "classes.names"
STREET_IMAGE_FOLDERS = ("Images", "images")
STREET_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# The release's classes, in data/custom/classes.names order.
STREET_CLASSES = ("basket", "carton", "chair", "electrombile", "gastank", "sunshade", "table")
_ENTRY_KEYS = frozenset({"image_id", "items"})


def is_street_folder(root: Path) -> bool:
    """Whether ``root`` holds a Street training annotation file."""
    return (root / STREET_TRAIN).is_file()


def street_class_names(root: Path) -> tuple[str, ...]:
    """``root/classes.names`` (UTF-8, one name a line, blank lines skipped), else the
    release's seven classes."""
    file = root / STREET_CLASSES_FILE
    if not file.exists():
        return STREET_CLASSES
    try:
        text = file.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise DetectionDataError(
            f"{file}: not UTF-8 (allowed: UTF-8 text, one class name a line)"
        ) from None
    names = tuple(line.strip() for line in text.splitlines() if line.strip())
    if len(set(names)) != len(names) or not names:
        raise DetectionDataError(
            f"{file}: {len(names)} names, {len(set(names))} distinct (allowed: at least one "
            "class name a line, each once)"
        )
    return names


def street_image_folder(root: Path) -> Path:
    """``root/Images`` (the release's) or ``root/images``; one of them, not both."""
    found = [root / name for name in STREET_IMAGE_FOLDERS if (root / name).is_dir()]
    # a case-insensitive file system shows one folder under both names
    if len(found) == 2 and found[0].resolve() != found[1].resolve():
        raise DetectionDataError(f"{root}: both Images/ and images/ (allowed: one image folder)")
    if not found:
        raise DetectionDataError(
            f"{root / 'Images'}: no such folder (a Street folder holds {STREET_TRAIN}, "
            f"optionally {STREET_TEST}, and Images/<image_id>.jpg)"
        )
    return found[0]


def read_street_split(
    root: Path, file_name: str, class_names: tuple[str, ...], seen: dict[str, str]
) -> list[AnnotatedImage]:
    """The entries of ``root/file_name`` as images, in file order.  ``seen`` maps each
    image_id read so far (this split and earlier ones) to its entry, so an id that
    repeats within or across the files is named."""
    file = root / file_name
    entries = read_annotation_json(file)
    if not isinstance(entries, list):
        raise DetectionDataError(
            f"{file}: a JSON {type(entries).__name__} (allowed: a list of entries "
            '{"image_id", "items": [{"class", "bbox"}], ...})'
        )
    images = street_image_folder(root)
    label_of = {name: i for i, name in enumerate(class_names)}
    return [_image(file, i, entry, images, label_of, seen) for i, entry in enumerate(entries)]


def _image(
    file: Path,
    index: int,
    entry: Any,
    images: Path,
    label_of: dict[str, int],
    seen: dict[str, str],
) -> AnnotatedImage:
    where = f"{file}: entry {index}"
    if not isinstance(entry, dict):
        raise DetectionDataError(
            f"{where}: a JSON {type(entry).__name__} (allowed: an object with image_id and items)"
        )
    image_id = id_text(entry.get("image_id"))
    if image_id is None or "/" in image_id or "\\" in image_id or image_id.startswith("."):
        raise DetectionDataError(
            f"{where}: image_id={entry.get('image_id')!r} (allowed: a file name stem such as "
            "'009579', no path)"
        )
    where = f"{where} (image_id {image_id!r})"
    if image_id in seen:
        raise DetectionDataError(
            f"{where}: a duplicate id, first at {seen[image_id]} (allowed: once)"
        )
    seen[image_id] = where
    path = _image_file(images, image_id, where)
    items = entry.get("items", [])
    if not isinstance(items, list):
        raise DetectionDataError(
            f"{where}: items is a JSON {type(items).__name__} (allowed: a list, empty for an "
            "image without objects)"
        )
    boxes, labels, names = [], [], []
    for k, item in enumerate(items):
        item_where = f"{where}, item {k}"
        if not isinstance(item, dict):
            raise DetectionDataError(f"{item_where}: not an object (allowed: {{'class', 'bbox'}})")
        name = item.get("class")
        if not isinstance(name, str) or name not in label_of:
            raise DetectionDataError(
                f"{item_where}: class {name!r} is not a category (allowed: {', '.join(label_of)})"
            )
        box = number_list(item.get("bbox"), 4)
        if box is None:
            raise DetectionDataError(
                f"{item_where}: bbox={item.get('bbox')!r} (allowed: four finite numbers "
                "[xmin, ymin, xmax, ymax] in pixels)"
            )
        check_degenerate(box, item_where)
        boxes.append(box)
        labels.append(label_of[name])
        names.append(item_where)
    return AnnotatedImage(
        path=str(path),
        entry=where,
        boxes=np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
        labels=np.asarray(labels, dtype=np.int64),
        box_entries=tuple(names),
        fields=scalar_fields(entry, _ENTRY_KEYS),
        other_fields=other_fields(entry, _ENTRY_KEYS),
    )


def _image_file(images: Path, image_id: str, where: str) -> Path:
    for suffix in STREET_IMAGE_SUFFIXES:
        candidate = images / f"{image_id}{suffix}"
        if candidate.is_file():
            return candidate
    raise DetectionDataError(
        f"{where}: no image {images / (image_id + '.jpg')} (allowed: an existing "
        f"{images.name}/<image_id> file ending {', '.join(STREET_IMAGE_SUFFIXES)})"
    )
