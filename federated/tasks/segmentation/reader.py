"""A segmentation folder: images and one mask each (a class per pixel) as an
:class:`~federated.data.image_data.ImageData`, decoded once into the data root's cache.

Layout (a ``folder:PATH`` is one when PATH holds both ``images/`` and ``masks/``)::

    PATH/classes.json             a JSON list of class names: class i is the i-th
                                  (or PATH/classes.txt: one name a line)
    PATH/images/<stem>.<ext>      training images (.png, .jpg, .jpeg, .gif, .webp)
    PATH/masks/<stem>.png         each image's mask: the same stem and size, one channel
                                  (8-bit grey or palette PNG), each pixel's value its class
                                  index, 255 = ignore (unlabelled: no loss, no metric)
    PATH/test/images/, PATH/test/masks/   the test set (optional: else holdout_fraction)
    PATH/parties.csv              optional: a header ``stem,<field>,...`` and one row per
                                  training image; ``partition_by`` names a field

The rules:

* **one size**: images are resized to ``image_size`` ("H" or "HxW"; default the most
  common size) by a plain resize (bilinear, antialiased), their masks to the same size by
  nearest neighbour (:func:`~federated.tasks.segmentation.targets.resize_masks`: a class is never
  blended with its neighbour's); grey-scale images beside RGB ones are repeated to three
  channels, an alpha channel is dropped;
* **test set**: ``test/``; without it, ``holdout_fraction`` of the training images (a
  fixed draw, seed 0) becomes the test set; both, or neither, is an error;
* **natural parties**: ``partition_by`` names a column of ``parties.csv`` (a site, a
  scanner, a background); its values are the parties, sorted (numbers numerically), a
  party under :data:`~federated.data.folder_layout.MIN_PARTY_IMAGES` training images is
  left out, as for a detection folder's image field; every training image needs a value;
* **cache**: ``<data root>/folder-cache/<path hash>-<key>.pt`` (``torch.load(
  weights_only=True)``), the key hashing every file's relative path, size and
  modification time, the classes and parties files' contents, the size and the hold-out;
  masks are held as uint8 ``(N, H, W)`` (:mod:`federated.tasks.segmentation.targets`);
* normalisation: the training images' per-channel mean and std; no random augmentation
  (a crop or flip would have to move the masks too).

What every folder kind's reader does alike (the test-set rule, the size, the hold-out,
parties by a field, the cache) is :class:`~federated.data.kind_folder.KindFolder`'s; the
scan is :mod:`federated.tasks.segmentation.layout`.  Everything is parsed
(``json.loads``, ``csv``), never executed; every problem is one
:class:`SegmentationDataError` line naming the file, raised before anything is written:
a missing mask or image, a mask of another size than its image, a mask that is not one
channel, a pixel value beyond the classes, a malformed classes or parties file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.data.folder_kinds import FolderReader
from federated.data.image_data import ImageData
from federated.data.kind_folder import FieldTableFolder
from federated.tasks.segmentation.layout import (
    IMAGES,
    MASK_MODES,
    PARTIES_FILE,
    MaskedImage,
    SegmentationDataError,
    SegmentationLayout,
    check_partition_field,
    is_segmentation_folder,
    scan_segmentation,
)
from federated.tasks.segmentation.spec import SEGMENTATION
from federated.tasks.segmentation.targets import (
    MaskTargetsError,
    check_mask_values,
    class_pixel_counts,
    resize_masks,
)
from federated.tasks.segmentation.task import Segmentation

#: the model a segmentation folder names by default: the small network that trains at
#: laptop speed (federated/tasks/segmentation/models.py)
SEGMENTATION_DEFAULT_MODEL = "unet-tiny"


class SegmentationFolder(FieldTableFolder):
    """A segmentation folder's files (module docstring)."""

    identity_format = "images+masks"
    task = SEGMENTATION
    default_model = SEGMENTATION_DEFAULT_MODEL
    error = SegmentationDataError
    test_words = (
        "a test folder exists",
        "no such folder (add test/images/ and test/masks/",
    )
    groups = Segmentation.target_groups

    def scan(self, root: Path) -> SegmentationLayout:
        return scan_segmentation(root)

    def test_place(self, layout: SegmentationLayout) -> Path:
        return layout.test_dir

    def train_place(self, layout: SegmentationLayout) -> Path:
        return layout.root / IMAGES

    def sizes(self, layout: SegmentationLayout) -> list[tuple[int, int]]:
        return [item.size for item in (*layout.train, *layout.test)]

    def check_partition_field(self, layout: SegmentationLayout, partition_by: str) -> None:
        check_partition_field(layout, partition_by)

    def party_words(self, layout: SegmentationLayout, partition_by: str) -> str:
        return f"{layout.root / PARTIES_FILE}: field {partition_by!r}"

    def read_targets(self, layout: SegmentationLayout, size: tuple[int, int]) -> torch.Tensor:
        n_classes = len(layout.class_names)
        items = (*layout.train, *layout.test)
        return torch.stack([resize_masks(read_mask(item, n_classes), size) for item in items])

    def image_paths(self, layout: SegmentationLayout) -> list[str]:
        return [str(item.image) for item in (*layout.train, *layout.test)]

    def targets_fit(self, payload: dict[str, Any]) -> bool:
        x, test_x = payload["train_x"], payload["test_x"]
        y, test_y = payload.get("train_y"), payload.get("test_y")
        return (
            isinstance(y, torch.Tensor)
            and isinstance(test_y, torch.Tensor)
            and y.dtype == torch.uint8 == test_y.dtype
            and y.ndim == 3 == test_y.ndim
            and tuple(y.shape) == (x.shape[0], *x.shape[2:])
            and tuple(test_y.shape) == (test_x.shape[0], *test_x.shape[2:])
        )


SEGMENTATION_FOLDER = SegmentationFolder()
#: :meth:`KindFolder.load` of a segmentation folder (every problem one
#: :class:`SegmentationDataError` line, raised before anything is written)
load_segmentation_folder = SEGMENTATION_FOLDER.load


#: what a sweep's manifest records of such a folder (:meth:`FieldTableFolder.identity`)
segmentation_identity = SEGMENTATION_FOLDER.identity


def read_mask(item: MaskedImage, n_classes: int) -> torch.Tensor:
    """Image ``item``'s mask as uint8 (H, W) class indices, every value checked."""
    from PIL import Image

    try:
        with Image.open(item.mask) as mask:
            if mask.mode not in MASK_MODES:  # changed since the scan
                raise SegmentationDataError(
                    f"{item.mask}: a {mask.mode} image (allowed: one channel of class indices, "
                    "an 8-bit grey or palette PNG)"
                )
            # a palette PNG's array is its palette indices: VOC's masks are stored so
            values = np.array(mask, dtype=np.uint8)
    except OSError as err:
        raise SegmentationDataError(f"{item.mask}: not a readable image ({err})") from None
    try:
        check_mask_values(values, n_classes, str(item.mask))
    except MaskTargetsError as err:
        raise SegmentationDataError(str(err)) from None
    return torch.from_numpy(values)


def train_pixels_per_class(data: ImageData) -> list[int]:
    """The training masks' pixels of each class (ignored pixels left out)."""
    return [int(v) for v in class_pixel_counts(data.train_y, data.spec.n_classes)]


# ---------------------------------------------------------------------- reader
READER = FolderReader(
    name=SEGMENTATION,
    recognises=is_segmentation_folder,
    load=load_segmentation_folder,
    identity=segmentation_identity,
    natural_parties=(
        "a column of parties.csv: partition=natural with partition_by=FIELD, e.g. a site's id"
    ),
    party_field="a column of parties.csv",
)
