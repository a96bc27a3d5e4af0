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

What every folder kind's reader does alike (the test-set rule, the size, the hold-out,
parties by a field, the cache) is :class:`~federated.data.kind_folder.KindFolder`'s; this
module says what a detection folder's files are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.data.folder_kinds import FolderReader
from federated.data.kind_folder import KindFolder
from federated.tasks.detection.annotations import DetectionDataError
from federated.tasks.detection.layout import DetectionLayout, is_detection_folder, scan_detection
from federated.tasks.detection.spec import DETECTION
from federated.tasks.detection.targets import BoxTargets, BoxTargetsError
from federated.tasks.detection.task import Detection

# the model a detection folder names by default (its spec's ``default_model``): the small
# detector that trains at laptop speed (federated/tasks/detection/models.py)
DEFAULT_MODEL = "fcos-tiny"


class DetectionFolder(KindFolder):
    """A detection folder's files (module docstring)."""

    task = DETECTION
    default_model = DEFAULT_MODEL
    error = DetectionDataError
    test_words = ("a test annotation file exists", "no such file (add it")
    groups = Detection.target_groups

    def scan(self, root: Path) -> DetectionLayout:
        return scan_detection(root)

    def test_place(self, layout: DetectionLayout) -> Path:
        return layout.test_file

    def train_place(self, layout: DetectionLayout) -> Path:
        return layout.annotation_files[0]

    def sizes(self, layout: DetectionLayout) -> list[tuple[int, int]]:
        return list(layout.sizes)

    def check_partition_field(self, layout: DetectionLayout, partition_by: str) -> None:
        check_partition_field(layout, partition_by)

    def party_words(self, layout: DetectionLayout, partition_by: str) -> str:
        return f"{layout.annotation_files[0]}: image field {partition_by!r}"

    def read_targets(self, layout: DetectionLayout, size: tuple[int, int]) -> BoxTargets:
        images = (*layout.train, *layout.test)
        boxes = scaled_boxes(layout, size)
        return BoxTargets.from_images([(b, image.labels) for b, image in zip(boxes, images)])

    def image_paths(self, layout: DetectionLayout) -> list[str]:
        return [image.path for image in (*layout.train, *layout.test)]

    def fields(self, layout: DetectionLayout, kept: np.ndarray) -> dict[str, list[str]]:
        names = layout.field_names()
        return {n: [layout.train[i].fields.get(n, "") for i in kept] for n in names}

    def stored(self, targets: BoxTargets, rows: np.ndarray) -> dict[str, torch.Tensor]:
        return targets[torch.as_tensor(rows)].as_tensors()

    def restored(self, stored: dict[str, torch.Tensor]) -> BoxTargets:
        return BoxTargets.from_tensors(stored)

    def targets_fit(self, payload: dict[str, Any]) -> bool:
        try:
            train_y = BoxTargets.from_tensors(payload.get("train_y"))
            test_y = BoxTargets.from_tensors(payload.get("test_y"))
        except BoxTargetsError:
            return False
        return len(train_y) == len(payload["train_x"]) and len(test_y) == len(payload["test_x"])

    def spec_extras(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"target_names": tuple(payload["class_names"])}


DETECTION_FOLDER = DetectionFolder()
#: :meth:`KindFolder.load` of a detection folder (every problem one
#: :class:`DetectionDataError` line, raised before anything is decoded or written)
load_detection_folder = DETECTION_FOLDER.load


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
def check_partition_field(layout: DetectionLayout, partition_by: str) -> None:
    """``partition_by`` is a field every training image carries."""
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


# ---------------------------------------------------------------------- reader
READER = FolderReader(
    name=DETECTION,
    recognises=is_detection_folder,
    load=load_detection_folder,
    identity=detection_identity,
    natural_parties="an image field: partition=natural with partition_by=FIELD, e.g. a camera's id",
    party_field="an image field",
)
