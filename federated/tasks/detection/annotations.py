"""What the detection readers (:mod:`federated.tasks.detection.coco_annotations`,
:mod:`federated.tasks.detection.street_annotations`) hand over, and the rules they share.

A reader turns an annotation file into :class:`AnnotatedImage` records: the image file,
its boxes as pixel ``[x1, y1, x2, y2]`` of the original image, their class indices and the
image's own scalar fields (a camera id: the natural parties).  The rules every format
follows are here, once:

* an annotation file is JSON, UTF-8, at most :data:`MAX_ANNOTATION_BYTES` bytes; it is
  parsed by :func:`json.loads` only (nothing a data folder holds is executed);
* a box is four finite numbers with ``x2 > x1`` and ``y2 > y1`` (torchvision's detectors
  assert on a degenerate box) inside its image: ``0 <= x1``, ``0 <= y1``, ``x2 <= width``,
  ``y2 <= height`` in the image's own pixels, no tolerance (:func:`check_box_inside`);
* every problem is one :class:`DetectionDataError` line naming the file, the entry and
  what is allowed, raised before any image is decoded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from federated.contract.json_text import long_integer_text
from federated.data.folder_layout import FolderDataError

# Largest annotation file read (bytes).  json.loads holds the text and every parsed object
# at once (several times the file's size); COCO 2017's instances_train2017.json is 448 MiB.
MAX_ANNOTATION_BYTES = 512 * 2**20
BOX_RULE = "x2 > x1 and y2 > y1, inside the image (0 <= x1, 0 <= y1, x2 <= width, y2 <= height)"


class DetectionDataError(FolderDataError):
    """A detection folder cannot be used; the message is one line naming the file."""


@dataclass(frozen=True)
class AnnotatedImage:
    """One annotated image as a reader found it (nothing decoded).

    Attributes:
        path: the image file (absolute).
        entry: how messages name this image's entry (file and entry, e.g.
            ``train_label.json: entry 4 (image_id '009579')``).
        boxes: float64 (K, 4) pixel [x1, y1, x2, y2] in the original image; K may be 0.
        labels: int64 (K,) class indices into the data set's categories.
        box_entries: how messages name each box's entry (K strings).
        fields: the image's own scalar fields as text (``device1_id`` -> ``"3"``), the
            candidates for a natural partition (``--partition-by``).
        declared_size: (height, width) the annotation file states (COCO's), else None.
        other_fields: the image's other fields, which no partition can group by, and what
            each holds in words (``camera`` -> ``"a float (1.5)"``): a refusal of
            ``partition_by`` names them rather than call the field missing.
    """

    path: str
    entry: str
    boxes: np.ndarray
    labels: np.ndarray
    box_entries: tuple[str, ...]
    fields: dict[str, str] = field(default_factory=dict)
    declared_size: tuple[int, int] | None = None
    other_fields: dict[str, str] = field(default_factory=dict)


def read_annotation_json(file: Path) -> Any:
    """The parsed JSON of annotation ``file``; one line naming the file on a missing or
    oversized file, bytes that are not UTF-8, or text that is not JSON."""
    try:
        size = file.stat().st_size
    except FileNotFoundError:
        raise DetectionDataError(f"{file}: no such file") from None
    except OSError as err:
        raise DetectionDataError(f"{file}: {err.strerror or type(err).__name__}") from None
    if size > MAX_ANNOTATION_BYTES:
        raise DetectionDataError(
            f"{file}: {size:,} bytes (allowed: at most {MAX_ANNOTATION_BYTES:,} bytes per "
            "annotation file; split it or keep the images you use)"
        )
    raw = file.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DetectionDataError(
            f"{file}: line {line}: byte 0x{raw[err.start]:02x} is not UTF-8 (allowed: UTF-8 JSON)"
        ) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise DetectionDataError(
            f"{file}: line {err.lineno}, column {err.colno}: {err.msg} (allowed: JSON)"
        ) from None
    except RecursionError:
        raise DetectionDataError(f"{file}: nested too deeply (allowed: JSON)") from None
    except ValueError:  # an integer beyond Python's int-str limit: not a traceback
        raise DetectionDataError(f"{file}: {long_integer_text(text)}") from None


def number_list(value: Any, length: int) -> list[float] | None:
    """``value`` as ``length`` finite numbers, else None (booleans are not numbers)."""
    if not isinstance(value, list) or len(value) != length:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return None
    numbers = [float(v) for v in value]
    return numbers if all(math.isfinite(v) for v in numbers) else None


def id_text(value: Any) -> str | None:
    """An id field (a string or an integer) as text; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def scalar_fields(entry: dict[str, Any], skip: frozenset[str]) -> dict[str, str]:
    """An entry's scalar fields (strings and integers) as text, except ``skip``: what a
    natural partition may group images by."""
    return {
        key: str(value)
        for key, value in entry.items()
        if key not in skip and isinstance(value, (str, int)) and not isinstance(value, bool)
    }


def other_fields(entry: dict[str, Any], skip: frozenset[str]) -> dict[str, str]:
    """An entry's fields that :func:`scalar_fields` leaves out (floats, booleans, nulls,
    lists, objects), except ``skip``, each as what it holds in words."""
    return {
        key: _holds(value)
        for key, value in entry.items()
        if key not in skip and not (isinstance(value, (str, int)) and not isinstance(value, bool))
    }


def _holds(value: Any) -> str:
    """A JSON value's kind in words, with a short example of a scalar."""
    if value is None:
        return "null"
    kind = {bool: "a boolean", float: "a float", list: "a list", dict: "an object"}
    words = kind.get(type(value), f"a {type(value).__name__}")
    return f"{words} ({value!r})" if isinstance(value, (bool, float)) else words


def check_degenerate(box: list[float], where: str) -> None:
    """Refuse a box with ``x2 <= x1`` or ``y2 <= y1`` (xyxy pixels), naming ``where``."""
    x1, y1, x2, y2 = box
    if not (x2 > x1 and y2 > y1):
        raise DetectionDataError(
            f"{where}: box [x1, y1, x2, y2] = {_box_text(box)} is empty (allowed: {BOX_RULE})"
        )


def check_box_inside(image: AnnotatedImage, height: int, width: int) -> None:
    """Refuse a box of ``image`` that leaves its ``height`` x ``width`` pixels."""
    if not len(image.boxes):
        return
    b = image.boxes
    outside = (b[:, 0] < 0) | (b[:, 1] < 0) | (b[:, 2] > width) | (b[:, 3] > height)
    if outside.any():
        k = int(np.flatnonzero(outside)[0])
        raise DetectionDataError(
            f"{image.box_entries[k]}: box [x1, y1, x2, y2] = {_box_text(b[k].tolist())} "
            f"leaves its {width}x{height} image {Path(image.path).name} (allowed: {BOX_RULE})"
        )


def _box_text(box: list[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in box) + "]"
