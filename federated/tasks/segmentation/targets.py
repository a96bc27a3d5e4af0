"""Masks as targets: one class per pixel, a segmentation data set's targets.

A data set's masks are one uint8 tensor ``(N, H, W)``, the stored images' own pixels
(1 byte a pixel: the run keeps its whole training set on the device), each value a class
index ``0..C-1`` or :data:`IGNORE_INDEX` (255, VOC's value for unlabelled pixels, left out
of the loss and of every metric).  A batch's targets are int64 ``(B, H, W)``
(:func:`take_masks`, :func:`collate_masks`): the dtype cross-entropy reads.

Geometry: a mask is resized with its image by **nearest neighbour** (:func:`resize_masks`:
a class index is never blended with its neighbour's); a random crop, flip or rotation of
the images would have to move the masks the same way, which the batched augmenter
(:mod:`federated.data.augment`) does not, so segmentation data carry none
(:func:`pixel_moving_augmentation` says why in one line) and a rotating feature skew is
refused (the task's ``targets_in_pixels``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from federated.data.catalog import DatasetSpec

#: a pixel without a class: left out of the loss and the metrics (VOC's value)
IGNORE_INDEX = 255
#: the most classes a mask's uint8 values can name besides the ignore value (0..254)
MAX_CLASSES = IGNORE_INDEX


class MaskTargetsError(ValueError):
    """Masks that cannot be targets; the message is one line naming where."""


def take_masks(masks: torch.Tensor, index: torch.Tensor | slice) -> torch.Tensor:
    """The masks of images ``index`` (an index tensor on any device, a boolean mask or a
    slice), in that order, as int64 ``(B, H, W)``."""
    if isinstance(index, torch.Tensor):
        index = index.to(masks.device)
        rows = masks[index] if index.dtype == torch.bool else masks.index_select(0, index)
    else:
        rows = masks[index]
    return rows.long()


def collate_masks(masks: Sequence[torch.Tensor]) -> torch.Tensor:
    """One int64 ``(B, H, W)`` batch of ``(H, W)`` masks of one size."""
    if not masks:
        raise MaskTargetsError("no mask to collate (allowed: at least one)")
    shapes = {tuple(m.shape) for m in masks}
    if len(shapes) > 1 or len(next(iter(shapes))) != 2:
        raise MaskTargetsError(
            f"masks of shapes {sorted(shapes)} (allowed: (H, W) masks of one size)"
        )
    return torch.stack([m.long() for m in masks])


def check_mask_values(mask: np.ndarray, n_classes: int, where: str) -> None:
    """Refuse a pixel value that is neither a class index (``0..n_classes-1``) nor
    :data:`IGNORE_INDEX`, naming ``where`` (the file) and the first such pixel."""
    bad = (mask >= n_classes) & (mask != IGNORE_INDEX)
    if bad.any():
        row, col = (int(v) for v in np.argwhere(bad)[0])
        raise MaskTargetsError(
            f"{where}: pixel value {int(mask[row, col])} at row {row}, column {col} is beyond "
            f"the {n_classes} classes (allowed: 0 to {n_classes - 1}, or {IGNORE_INDEX} = "
            "ignore)"
        )


def nearest_rows(old: int, new: int) -> torch.Tensor:
    """The source index of each of ``new`` positions resized from ``old`` by nearest
    neighbour: the pixel whose centre is nearest, ``floor((i + 0.5) * old / new)``."""
    return ((torch.arange(new, dtype=torch.float64) + 0.5) * (old / new)).floor().long()


def resize_masks(masks: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``(N, H, W)`` masks at ``size`` (height, width) by nearest neighbour (values are
    copied, never mixed); the masks themselves where the size is theirs."""
    h, w = masks.shape[-2:]
    if (h, w) == tuple(size):
        return masks
    rows, cols = nearest_rows(h, size[0]), nearest_rows(w, size[1])
    return masks[..., rows, :][..., cols]


def class_pixel_counts(masks: torch.Tensor, n_classes: int) -> torch.Tensor:
    """int64 ``(C,)``: the pixels of each class over all masks (ignored pixels left out)."""
    values = masks.reshape(-1).long()
    values = values[values != IGNORE_INDEX]
    return torch.bincount(values.cpu(), minlength=n_classes)[:n_classes]


def pixel_moving_augmentation(spec: DatasetSpec) -> str | None:
    """Why masks of data ``spec`` cannot be targets under its augmentation (one line), or
    None: random crops, flips and rotations move pixels the masks would not follow."""
    if spec.crop_flip or spec.rotate_degrees:
        return (
            f"segmentation data {spec.name}: random crops, flips and rotations would move "
            "the pixels without their masks (allowed: none)"
        )
    return None
