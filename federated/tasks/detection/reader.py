"""A detection folder (:mod:`federated.tasks.detection.layout`) as an :class:`ImageData`:
uint8 images of one size and each image's boxes as a
:class:`~federated.tasks.detection.targets.BoxTargets`, decoded once into the data root's cache.

The rules:

* **one size**: every image is resized to ``image_size`` ("H" or "HxW"; default the
  most common size among the images) by a plain resize (bilinear, antialiased; the
  aspect ratio follows the target size, no letterbox), and every box is scaled by the
  same factors exactly: ``x * W_new / W_old``, ``y * H_new / H_old``.  A box that the
  scaling would make empty in float32 is refused before decoding, naming it;
* **channels**: grey-scale images beside RGB ones are repeated to three channels (a
  detection set such as COCO mixes a few grey photographs into a colour set);
* **test set**: the test annotation file; without one, ``holdout_fraction`` of the
  training images (a fixed draw, seed 0, whatever their boxes) becomes the test set;
* **natural parties**: ``partition_by`` names a scalar field of the training images
  (Street's ``device1_id`` for Street-5, ``device2_id`` for Street-20, a COCO image's
  own extra field); its values are the parties, sorted (numbers numerically), and a
  party under :data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images is
  left out (its images belong to no party), as for an ``hf:`` column.  Every training
  image must carry the field.  Test images need none (Street's carry no device);
* **cache**: ``<data root>/folder-cache/<path hash>-<key>.pt`` (``torch.load(
  weights_only=True)``), the key hashing the layout's fingerprint, the image size and the
  hold-out; it holds every image field, so Street-5 and Street-20 share one decoding;
* normalisation statistics are the training images' per-channel mean and std; no
  random augmentation (a flip would need its boxes flipped too).
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.data.folder_cache import FolderLoad, cache_entry_path, payload_spec, write_cache
from federated.data.folder_decode import (
    channel_stats,
    check_decode_memory,
    choose_size,
    decode_files,
    parse_image_size,
    stack_resized,
)
from federated.data.folder_kinds import FolderReader
from federated.data.folder_layout import MIN_PARTY_IMAGES, ImageFile
from federated.data.holdout_draw import holdout_split
from federated.data.image_data import ImageData
from federated.data.party_field import parties_by_value
from federated.tasks.detection.annotations import DetectionDataError
from federated.tasks.detection.layout import DetectionLayout, is_detection_folder, scan_detection
from federated.tasks.detection.spec import DETECTION
from federated.tasks.detection.targets import BoxTargets, BoxTargetsError

CACHE_FORMAT = 1
# the model a detection folder names by default (its spec's ``default_model``): the small
# detector that trains at laptop speed (federated/tasks/detection/models.py)
DEFAULT_MODEL = "fcos-tiny"
MEMORY_ENTRIES = 2  # loaded folders kept in memory per process (sweep driver, trial)

_memory: dict[tuple[str, str | None], ImageData] = {}  # (cache key, partition_by) -> data


def load_detection_folder(
    root: Path,
    image_size: str | None = None,
    holdout_fraction: float | None = None,
    data_root: str | os.PathLike | None = None,
    partition_by: str | None = None,
    *,
    use_memory: bool = True,
) -> FolderLoad:
    """Load detection folder ``root`` (see the module docstring); every problem is one
    :class:`DetectionDataError` line, raised before anything is decoded or written."""
    start = time.perf_counter()
    layout = scan_detection(root)
    test_file = layout.test_file
    if layout.has_test and holdout_fraction is not None:
        raise DetectionDataError(
            f"{test_file}: a test annotation file exists and holdout_fraction="
            f"{holdout_fraction} is set (allowed: one of the two)"
        )
    if not layout.has_test and holdout_fraction is None:
        raise DetectionDataError(
            f"{test_file}: no such file (add it, or hold out part of the training images "
            "with holdout_fraction, e.g. --holdout-fraction 0.2)"
        )
    _check_partition_field(layout, partition_by)
    size = parse_image_size(image_size) if image_size else choose_size(list(layout.sizes))
    key = _settings_key(layout.fingerprint, size, holdout_fraction)
    cache_file = cache_entry_path(layout.root, key, data_root)
    if use_memory and (key, partition_by) in _memory:
        data = _memory[(key, partition_by)]
        return FolderLoad(
            data, layout.fingerprint, "memory", time.perf_counter() - start, cache_file
        )
    payload, source = _read_cache(cache_file, key), "disk cache"
    if payload is None:
        payload, source = _decode(layout, size, holdout_fraction, key), "decoded"
    parties, party_names, left_out = _parties(layout, payload, partition_by)
    if source == "decoded":
        write_cache(cache_file, payload)
    data = _image_data(payload, f"folder:{layout.root}", parties, party_names, left_out)
    if use_memory:
        _memory[(key, partition_by)] = data
        while len(_memory) > MEMORY_ENTRIES:
            _memory.pop(next(iter(_memory)))
    return FolderLoad(data, layout.fingerprint, source, time.perf_counter() - start, cache_file)


def detection_identity(root: Path) -> dict[str, Any]:
    """What a sweep manifest records of a detection folder: its path, format, content
    fingerprint, sizes, classes with their box counts, and the image fields a natural
    partition may use with their number of distinct values."""
    layout = scan_detection(root)
    labels = np.concatenate([image.labels for image in layout.train])
    counts = np.bincount(labels, minlength=len(layout.class_names))
    return {
        "path": str(layout.root),
        "format": layout.format,
        "fingerprint": layout.fingerprint,
        "task": DETECTION,
        "train_images": len(layout.train),
        "test_images": len(layout.test),
        "classes": list(layout.class_names),
        "train_boxes_per_class": [int(c) for c in counts],
        "party_fields": {
            name: len({image.fields.get(name) for image in layout.train} - {None})
            for name in layout.field_names()
        },
    }


# ------------------------------------------------------------------- checks
def _check_partition_field(layout: DetectionLayout, partition_by: str | None) -> None:
    """``partition_by`` is a field every training image carries."""
    if partition_by is None:
        return
    fields = layout.field_names()
    # a field that is there but holds no id (floats, lists...) is named as such, not
    # as missing: the user sees it in the file
    odd = next((image for image in layout.train if partition_by in image.other_fields), None)
    if partition_by not in fields:
        if odd is not None:
            raise DetectionDataError(
                f"{odd.entry}: image field {partition_by!r} holds "
                f"{odd.other_fields[partition_by]} (allowed for partition_by: a field of "
                f"strings or integers, e.g. a camera's id; such fields here: "
                f"{', '.join(fields) or 'none'})"
            )
        raise DetectionDataError(
            f"{layout.annotation_files[0]}: no image field {partition_by!r} for partition_by "
            f"(fields: {', '.join(fields) or 'none'})"
        )
    for image in layout.train:
        if partition_by in image.other_fields:
            raise DetectionDataError(
                f"{image.entry}: {partition_by} holds {image.other_fields[partition_by]} "
                f"(allowed: a string or an integer naming the image's party under "
                f"partition_by={partition_by})"
            )
        if partition_by not in image.fields:
            raise DetectionDataError(
                f"{image.entry}: no {partition_by} (allowed: every training image names its "
                f"party under partition_by={partition_by})"
            )


def _settings_key(fingerprint: str, size: tuple[int, int], holdout: float | None) -> str:
    text = f"detection|{CACHE_FORMAT}|{fingerprint}|{size[0]}x{size[1]}|{holdout!r}"
    return hashlib.sha256(text.encode()).hexdigest()


def scaled_boxes(layout: DetectionLayout, size: tuple[int, int]) -> list[np.ndarray]:
    """Each image's boxes (train, then test) in the pixels of ``size`` (height, width),
    float32; a box the scaling makes empty is named."""
    out = []
    for image, (h, w) in zip((*layout.train, *layout.test), layout.sizes):
        factors = np.array([size[1] / w, size[0] / h, size[1] / w, size[0] / h])
        boxes = (image.boxes * factors).astype(np.float32)
        empty = (boxes[:, 2] <= boxes[:, 0]) | (boxes[:, 3] <= boxes[:, 1])
        if empty.any():
            k = int(np.flatnonzero(empty)[0])
            raise DetectionDataError(
                f"{image.box_entries[k]}: box {image.boxes[k].tolist()} is empty at image size "
                f"{size[0]}x{size[1]} (allowed: a larger --image-size, or a larger box)"
            )
        out.append(boxes)
    return out


# ------------------------------------------------------------------- decoding
def _decode(
    layout: DetectionLayout, size: tuple[int, int], holdout: float | None, key: str
) -> dict[str, Any]:
    images = (*layout.train, *layout.test)
    boxes = scaled_boxes(layout, size)  # before decoding: a refusal costs nothing
    files = [ImageFile(image.path, -1, -1, 0, 0) for image in images]
    check_decode_memory(layout.root, files, f"{size[0]}x{size[1]}")
    decoded = decode_files(files)
    if any(im.shape[0] == 3 for im in decoded):  # grey beside RGB: three channels each
        decoded = [im.expand(3, -1, -1) if im.shape[0] == 1 else im for im in decoded]
    x = stack_resized(decoded, size)
    targets = BoxTargets.from_images([(b, image.labels) for b, image in zip(boxes, images)])
    n_train = len(layout.train)
    train, test = np.arange(n_train), np.arange(n_train, len(images))
    if holdout is not None:
        keep, held = holdout_split(np.zeros(n_train, dtype=np.int64), holdout)
        if len(held) == 0:
            raise DetectionDataError(
                f"{layout.annotation_files[0]}: holdout_fraction={holdout} holds out no image "
                "(allowed: a fraction that leaves at least one test image)"
            )
        train, test = keep, held
    names = layout.field_names()
    mean, std = channel_stats(x[train])
    return {
        "format": CACHE_FORMAT,
        "key": key,
        "train_x": x[train].contiguous(),
        "train_y": targets[torch.as_tensor(train)].as_tensors(),
        "test_x": x[test].contiguous(),
        "test_y": targets[torch.as_tensor(test)].as_tensors(),
        "class_names": list(layout.class_names),
        "fields": {n: [layout.train[i].fields.get(n, "") for i in train] for n in names},
        "mean": list(mean),
        "std": list(std),
    }


def _parties(
    layout: DetectionLayout, payload: dict[str, Any], partition_by: str | None
) -> tuple[torch.Tensor | None, list[str], list[tuple[str, int]]]:
    """Each kept training image's party under ``partition_by`` (-1: a party left out),
    the parties' names and the values left out (with their image counts)."""
    if partition_by is None:
        return None, [], []
    parties, names, left_out = parties_by_value(
        np.array(payload["fields"][partition_by], dtype=object)
    )
    if len(names) < 2:
        raise DetectionDataError(
            f"{layout.annotation_files[0]}: image field {partition_by!r} gives {len(names)} "
            f"parties of at least {MIN_PARTY_IMAGES} training images (allowed: at least 2)"
        )
    return parties, names, left_out


def _image_data(
    payload: dict[str, Any],
    name: str,
    parties: torch.Tensor | None,
    party_names: list[str],
    left_out: list[tuple[str, int]],
) -> ImageData:
    spec = payload_spec(
        payload,
        name=name,
        task=DETECTION,
        default_model=DEFAULT_MODEL,
        party_names=party_names,
        left_out_parties=left_out,
        target_names=tuple(payload["class_names"]),
    )
    train_x = payload["train_x"]
    return ImageData(
        spec,
        train_x,
        BoxTargets.from_tensors(payload["train_y"]),
        payload["test_x"],
        BoxTargets.from_tensors(payload["test_y"]),
        parties,
    )


# ---------------------------------------------------------------------- cache
def _read_cache(path: Path, key: str) -> dict[str, Any] | None:
    """The cache entry at ``path`` when it is this key's and whole, else None (decode
    again: a truncated, foreign or damaged file is never a traceback later)."""
    if not path.is_file():
        return None
    try:
        payload = torch.load(path, weights_only=True)
        ok = (
            isinstance(payload, dict)
            and payload.get("key") == key
            and payload.get("format") == CACHE_FORMAT
            and _payload_ok(payload)
        )
    except Exception:  # an unreadable or foreign file
        return None
    return payload if ok else None


def _payload_ok(payload: dict[str, Any]) -> bool:
    x, test_x = payload.get("train_x"), payload.get("test_x")
    if not (isinstance(x, torch.Tensor) and isinstance(test_x, torch.Tensor)):
        return False
    try:
        train_y = BoxTargets.from_tensors(payload.get("train_y"))
        test_y = BoxTargets.from_tensors(payload.get("test_y"))
    except BoxTargetsError:
        return False
    fields = payload.get("fields")
    return (
        x.dtype == torch.uint8 == test_x.dtype
        and x.ndim == 4 == test_x.ndim
        and x.shape[1:] == test_x.shape[1:]
        and len(train_y) == len(x)
        and len(test_y) == len(test_x)
        and isinstance(payload.get("class_names"), list)
        and isinstance(fields, dict)
        and all(isinstance(v, list) and len(v) == len(x) for v in fields.values())
        and all(
            isinstance(payload.get(k), list) and len(payload[k]) == x.shape[1]
            for k in ("mean", "std")
        )
    )


# ---------------------------------------------------------------------- reader
READER = FolderReader(
    name=DETECTION,
    recognises=is_detection_folder,
    load=load_detection_folder,
    identity=detection_identity,
    natural_parties="an image field: partition=natural with partition_by=FIELD, e.g. a camera's id",
    party_field="an image field",
)
