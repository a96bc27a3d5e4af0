"""Reading COCO-style detection annotations (the ``instances_*.json`` format)::

    PATH/annotations/train.json   {"images": [...], "annotations": [...], "categories": [...]}
    PATH/annotations/test.json    the same (optional: else --holdout-fraction)
    PATH/images/<file_name>       the images, ``file_name`` relative to images/

``images`` entries: ``id`` (integer or string), ``file_name``, ``width``, ``height``, and
any other scalar field (a camera id: the natural parties under ``--partition-by``);
``annotations``: ``id``, ``image_id``, ``category_id``, ``bbox`` [x, y, w, h] in pixels;
``categories``: ``id``, ``name``.  Class indices follow the categories sorted by id
(0 for the smallest id).  An image without annotations is an image without objects.
Annotations marked ``"iscrowd": 1`` are left out: they mark a crowd's region, not one
object, and COCO's own evaluation ignores them.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
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

COCO_FOLDER = "annotations"
COCO_TRAIN = "annotations/train.json"
COCO_TEST = "annotations/test.json"
COCO_IMAGES = "images"
# COCO's own image keys: never a partition field
_IMAGE_KEYS = frozenset(
    {"id", "file_name", "width", "height", "license", "coco_url", "flickr_url", "date_captured"}
)


def is_coco_folder(root: Path) -> bool:
    """Whether ``root`` holds a COCO training annotation file."""
    return (root / COCO_TRAIN).is_file()


def _list_of(data: dict[str, Any], key: str, file: Path) -> list[Any]:
    value = data.get(key, [] if key == "annotations" else None)
    if not isinstance(value, list):
        raise DetectionDataError(
            f"{file}: {key!r} is {'missing' if value is None else 'not a list'} (allowed: "
            "an object with lists 'images', 'annotations' and 'categories')"
        )
    return value


def read_coco_categories(file: Path, data: Any) -> tuple[tuple[str, ...], dict[str, int]]:
    """``categories`` of parsed ``data``: names in id order and the id -> index map."""
    if not isinstance(data, dict):
        raise DetectionDataError(
            f"{file}: a JSON {type(data).__name__} (allowed: an object with 'images', "
            "'annotations' and 'categories')"
        )
    found: dict[str, str] = {}
    for i, category in enumerate(_list_of(data, "categories", file)):
        where = f"{file}: categories[{i}]"
        cid = id_text(category.get("id")) if isinstance(category, dict) else None
        name = category.get("name") if isinstance(category, dict) else None
        if cid is None or not isinstance(name, str) or not name.strip():
            raise DetectionDataError(f"{where}: not {{'id', 'name'}} (allowed: an id and a name)")
        if cid in found or name in found.values():
            raise DetectionDataError(
                f"{where}: id {cid} or name {name!r} given twice (allowed: each once)"
            )
        found[cid] = name
    if not found:
        raise DetectionDataError(f"{file}: no categories (allowed: at least one)")
    ordered = sorted(found, key=lambda c: (0, int(c), "") if c.lstrip("-").isdigit() else (1, 0, c))
    return tuple(found[c] for c in ordered), {c: i for i, c in enumerate(ordered)}


def read_coco_split(
    root: Path, relative: str, seen_files: dict[str, str], categories: tuple[str, ...] | None
) -> tuple[tuple[str, ...], list[AnnotatedImage]]:
    """The category names and images of ``root/relative``, images in file order.
    ``seen_files`` maps each image file read so far (this split and earlier ones) to its
    entry, so a file listed twice is named; ``categories`` (the training file's names)
    must be this file's too."""
    file = root / relative
    data = read_annotation_json(file)
    names, index = read_coco_categories(file, data)
    if categories is not None and names != categories:
        raise DetectionDataError(
            f"{file}: categories {', '.join(names)} (allowed: the training file's, "
            f"{', '.join(categories)})"
        )
    entries = _images(root, file, _list_of(data, "images", file), seen_files)
    per_image: dict[str, list[tuple[list[float], int, str]]] = {key: [] for key in entries}
    seen_annotations: dict[str, str] = {}
    for i, annotation in enumerate(_list_of(data, "annotations", file)):
        _annotation(file, i, annotation, index, names, per_image, seen_annotations)
    images = []
    for key, (where, path, entry, size) in entries.items():
        boxes = [b for b, _, _ in per_image[key]]
        images.append(
            AnnotatedImage(
                path=str(path),
                entry=where,
                boxes=np.asarray(boxes, dtype=np.float64).reshape(-1, 4),
                labels=np.asarray([lab for _, lab, _ in per_image[key]], dtype=np.int64),
                box_entries=tuple(w for _, _, w in per_image[key]),
                fields=scalar_fields(entry, _IMAGE_KEYS),
                declared_size=size,
                other_fields=other_fields(entry, _IMAGE_KEYS),
            )
        )
    return names, images


def _images(
    root: Path, file: Path, entries: list[Any], seen_files: dict[str, str]
) -> dict[str, tuple[str, Path, dict[str, Any], tuple[int, int]]]:
    """image id -> (where, image path, its JSON entry, (height, width)), in file order."""
    out: dict[str, tuple[str, Path, dict[str, Any], tuple[int, int]]] = {}
    folder = root / COCO_IMAGES
    for i, entry in enumerate(entries):
        where = f"{file}: images[{i}]"
        if not isinstance(entry, dict):
            raise DetectionDataError(
                f"{where}: not an object (allowed: {{'id', 'file_name', ...}})"
            )
        image_id = id_text(entry.get("id"))
        if image_id is None:
            raise DetectionDataError(
                f"{where}: id={entry.get('id')!r} (allowed: an integer or a string)"
            )
        if image_id in out:
            raise DetectionDataError(
                f"{where}: a duplicate id {image_id}, first at {out[image_id][0]} (allowed: once)"
            )
        where = f"{where} (id {image_id})"
        name = entry.get("file_name")
        parts = PurePosixPath(name).parts if isinstance(name, str) else ()
        if not parts or PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
            raise DetectionDataError(
                f"{where}: file_name={name!r} (allowed: a path relative to {folder}, no '..')"
            )
        # one image has many spellings (sub/./2.png, sub//2.png, ./sub/2.png): the
        # normalised path is what is compared, so each spelling of it is named once
        key = PurePosixPath(*parts).as_posix()
        if key in seen_files:
            spelled = "" if key == name else f" (file_name={name!r})"
            raise DetectionDataError(
                f"{where}: {key}{spelled} is listed twice, first at {seen_files[key]} "
                "(allowed: each image once)"
            )
        seen_files[key] = where
        path = folder.joinpath(*parts)
        if not path.is_file():
            raise DetectionDataError(f"{where}: no image {path} (allowed: an existing file)")
        size = _positive_int(entry, "height", where), _positive_int(entry, "width", where)
        out[image_id] = (where, path, entry, size)
    return out


def _fail(where: str, text: str) -> DetectionDataError:
    return DetectionDataError(f"{where}: {text}")


def _positive_int(entry: dict[str, Any], key: str, where: str) -> int:
    value = entry.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise DetectionDataError(f"{where}: {key}={value!r} (allowed: the image's pixels, >= 1)")
    return value


def _annotation(
    file: Path,
    i: int,
    annotation: Any,
    index: dict[str, int],
    names: tuple[str, ...],
    per_image: dict[str, list[tuple[list[float], int, str]]],
    seen: dict[str, str],
) -> None:
    where = f"{file}: annotations[{i}]"
    if not isinstance(annotation, dict):
        raise _fail(where, "not an object (allowed: {'id', 'image_id', 'category_id', 'bbox'})")
    aid = id_text(annotation.get("id"))
    if aid is not None:
        where = f"{where} (id {aid})"
        if aid in seen:
            raise _fail(where, f"a duplicate id, first at {seen[aid]} (allowed: once)")
        seen[aid] = where
    if annotation.get("iscrowd") in (1, True):
        return  # a crowd region (see the module docstring)
    image_id = id_text(annotation.get("image_id"))
    if image_id not in per_image:
        raise _fail(
            where,
            f"image_id={annotation.get('image_id')!r} is not in 'images' (allowed: an image's id)",
        )
    category = id_text(annotation.get("category_id"))
    if category not in index:
        known = ", ".join(f"{c} ({n})" for c, n in zip(index, names))
        raise _fail(
            where,
            f"category_id={annotation.get('category_id')!r} is not a category (allowed: {known})",
        )
    xywh = number_list(annotation.get("bbox"), 4)
    if xywh is None:
        raise _fail(
            where, f"bbox={annotation.get('bbox')!r} (allowed: four finite numbers [x, y, w, h])"
        )
    x, y, w, h = xywh
    if not (w > 0 and h > 0):
        raise _fail(
            where,
            f"bbox [x, y, w, h] = {xywh} has a width or height <= 0 (allowed: w > 0 and h > 0; "
            "torchvision's detectors refuse an empty box)",
        )
    box = [x, y, x + w, y + h]
    check_degenerate(box, where)
    per_image[image_id].append((box, index[category], where))
