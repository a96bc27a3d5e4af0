"""Ragged per-image boxes held flat: a detection data set's targets (:class:`BoxTargets`).

A detection image has any number of boxes (none included), so its targets cannot be rows
of one tensor.  :class:`BoxTargets` holds every box of every image in two flat tensors and
says where each image's boxes start::

    boxes    float32 (M, 4)  pixel [x1, y1, x2, y2] in the stored (resized) image
    labels   int64   (M,)    class index 0..C-1 (background is not a class here: a
                             torchvision detector, whose class 0 is background, adds 1)
    offsets  int64   (N+1,)  image i's boxes are boxes[offsets[i]:offsets[i + 1]]

It stands where a classification data set's int64 labels stand
(:attr:`federated.data.image_data.ImageData.train_y` / ``test_y``): ``len()`` is the number of
images, indexing by an index tensor, a list, a numpy array, a boolean mask or a slice
returns the targets of those images in that order, :meth:`to_dicts` gives torchvision's
target format, and :meth:`as_tensors` / :meth:`save` store it as plain tensors that
``torch.load(weights_only=True)`` reads back.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.runtime.atomic_file import atomic_open

# the keys of :meth:`BoxTargets.as_tensors` (a cache payload or a saved file holds them)
TENSOR_KEYS = ("boxes", "labels", "offsets")


class BoxTargetsError(ValueError):
    """Tensors that do not make a :class:`BoxTargets`; the message is one line."""


@dataclass(frozen=True)
class BoxTargets:
    """Every image's boxes and their classes, held flat (see the module docstring).

    Built checked: ``boxes`` float32 (M, 4), ``labels`` int64 (M,), ``offsets`` int64 (N+1,)
    starting at 0, never decreasing and ending at M, all on one device.  Box values are
    not checked here (the readers refuse a degenerate or outside box, naming its file)."""

    boxes: torch.Tensor
    labels: torch.Tensor
    offsets: torch.Tensor

    def __post_init__(self) -> None:
        boxes, labels, offsets = self.boxes, self.labels, self.offsets
        for name, value in (("boxes", boxes), ("labels", labels), ("offsets", offsets)):
            if not isinstance(value, torch.Tensor):
                raise BoxTargetsError(
                    f"BoxTargets.{name}: a {type(value).__name__} (allowed: a tensor)"
                )
        if boxes.dtype != torch.float32 or boxes.ndim != 2 or boxes.shape[1] != 4:
            raise BoxTargetsError(
                f"BoxTargets.boxes: {boxes.dtype} {tuple(boxes.shape)} (allowed: float32 (M, 4))"
            )
        if labels.dtype != torch.int64 or labels.shape != (boxes.shape[0],):
            raise BoxTargetsError(
                f"BoxTargets.labels: {labels.dtype} {tuple(labels.shape)} (allowed: int64 "
                f"({boxes.shape[0]},), one per box)"
            )
        if offsets.dtype != torch.int64 or offsets.ndim != 1 or len(offsets) < 1:
            raise BoxTargetsError(
                f"BoxTargets.offsets: {offsets.dtype} {tuple(offsets.shape)} "
                "(allowed: int64 (N+1,))"
            )
        if not (boxes.device == labels.device == offsets.device):
            raise BoxTargetsError(
                f"BoxTargets: boxes on {boxes.device}, labels on {labels.device}, offsets on "
                f"{offsets.device} (allowed: one device)"
            )
        first, last = int(offsets[0]), int(offsets[-1])
        if first != 0 or last != boxes.shape[0] or bool((offsets[1:] < offsets[:-1]).any()):
            raise BoxTargetsError(
                f"BoxTargets.offsets: from {first} to {last} (allowed: from 0 to the box count "
                f"{boxes.shape[0]}, never decreasing)"
            )

    # ------------------------------------------------------------------ building
    @classmethod
    def empty(cls, n_images: int = 0) -> BoxTargets:
        """``n_images`` images without boxes."""
        return cls(
            torch.zeros(0, 4, dtype=torch.float32),
            torch.zeros(0, dtype=torch.int64),
            torch.zeros(n_images + 1, dtype=torch.int64),
        )

    @classmethod
    def from_images(cls, per_image: Sequence[tuple[Any, Any]]) -> BoxTargets:
        """From one ``(boxes (K, 4), labels (K,))`` pair per image (tensors, arrays or
        lists; K may be 0), in image order."""
        boxes, labels, counts = [], [], [0]
        for image_boxes, image_labels in per_image:
            b = torch.as_tensor(np.asarray(image_boxes, dtype=np.float32).reshape(-1, 4))
            lab = torch.as_tensor(np.asarray(image_labels, dtype=np.int64).reshape(-1))
            boxes.append(b)
            labels.append(lab)
            counts.append(len(lab))
        if not boxes:
            return cls.empty(0)
        return cls(
            torch.cat(boxes),
            torch.cat(labels),
            torch.cumsum(torch.tensor(counts, dtype=torch.int64), 0),
        )

    @classmethod
    def concat(cls, parts: Sequence[BoxTargets]) -> BoxTargets:
        """The images of ``parts`` one after another (all on one device)."""
        if not parts:
            return cls.empty(0)
        starts = [0]
        for part in parts[:-1]:
            starts.append(starts[-1] + part.n_boxes)
        offsets = [parts[0].offsets[:1]] + [p.offsets[1:] + s for p, s in zip(parts, starts)]
        return cls(
            torch.cat([p.boxes for p in parts]),
            torch.cat([p.labels for p in parts]),
            torch.cat(offsets),
        )

    # ------------------------------------------------------------------ reading
    def __len__(self) -> int:
        """The number of images (N)."""
        return self.offsets.shape[0] - 1

    @property
    def n_boxes(self) -> int:
        """The number of boxes of all images (M)."""
        return self.boxes.shape[0]

    @property
    def device(self) -> torch.device:
        return self.boxes.device

    def boxes_per_image(self) -> torch.Tensor:
        """int64 (N,): how many boxes each image holds."""
        return self.offsets[1:] - self.offsets[:-1]

    def image(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Image ``i``'s boxes float32 (K, 4) and labels int64 (K,) (views, K may be 0)."""
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"image {i} of {n}")
        i = i % n
        start, end = int(self.offsets[i]), int(self.offsets[i + 1])
        return self.boxes[start:end], self.labels[start:end]

    def __getitem__(self, index: Any) -> BoxTargets:
        """The targets of images ``index``, in that order: an int64 index tensor (any
        device), a list or numpy array of ints, a boolean mask (N,) or a slice.  An int
        is refused (use :meth:`image`): an int would make the result's type depend on
        the index's."""
        if isinstance(index, (int, np.integer)):
            raise TypeError("BoxTargets[int]: use .image(i) for one image's (boxes, labels)")
        if isinstance(index, slice):
            index = torch.arange(len(self), device=self.device)[index]
        index = torch.as_tensor(index, device=self.device)
        if index.dtype == torch.bool:
            if index.shape != (len(self),):
                raise IndexError(
                    f"a boolean mask of shape {tuple(index.shape)} for {len(self)} images"
                )
            index = torch.nonzero(index).reshape(-1)
        index = index.to(torch.int64).reshape(-1)
        if index.numel() and not (-len(self) <= int(index.min()) and int(index.max()) < len(self)):
            raise IndexError(f"image index out of range for {len(self)} images")
        index = index % max(len(self), 1)
        starts = self.offsets[index]
        counts = self.offsets[index + 1] - starts
        offsets = torch.zeros(len(index) + 1, dtype=torch.int64, device=self.device)
        torch.cumsum(counts, 0, out=offsets[1:])
        total = int(offsets[-1])
        # box j of the result is box (start of its image) + (its place within that image)
        within = torch.arange(total, device=self.device) - torch.repeat_interleave(
            offsets[:-1], counts, output_size=total
        )
        rows = torch.repeat_interleave(starts, counts, output_size=total) + within
        return BoxTargets(self.boxes[rows], self.labels[rows], offsets)

    def to(self, device: torch.device | str) -> BoxTargets:
        """The same targets on ``device``."""
        return BoxTargets(self.boxes.to(device), self.labels.to(device), self.offsets.to(device))

    def to_dicts(self, device: torch.device | str | None = None) -> list[dict[str, torch.Tensor]]:
        """torchvision's detection targets: one ``{"boxes": float32 (K, 4) xyxy pixels,
        "labels": int64 (K,)}`` per image (labels 0..C-1 as stored), on ``device``
        (default: where they are)."""
        moved = self if device is None else self.to(device)
        cuts = moved.boxes_per_image().tolist()
        return [
            {"boxes": b, "labels": lab}
            for b, lab in zip(torch.split(moved.boxes, cuts), torch.split(moved.labels, cuts))
        ]

    def counts_per_class(self, n_classes: int) -> torch.Tensor:
        """int64 (C,): how many boxes of each class (all images)."""
        return torch.bincount(self.labels.cpu(), minlength=n_classes)[:n_classes]

    def equals(self, other: BoxTargets) -> bool:
        """Whether ``other`` holds exactly the same images, boxes and labels."""
        return (
            torch.equal(self.offsets.cpu(), other.offsets.cpu())
            and torch.equal(self.labels.cpu(), other.labels.cpu())
            and torch.equal(self.boxes.cpu(), other.boxes.cpu())
        )

    # ------------------------------------------------------------------ storing
    def as_tensors(self) -> dict[str, torch.Tensor]:
        """Plain CPU tensors (keys :data:`TENSOR_KEYS`), for a cache payload or :meth:`save`."""
        return {
            "boxes": self.boxes.cpu(),
            "labels": self.labels.cpu(),
            "offsets": self.offsets.cpu(),
        }

    @classmethod
    def from_tensors(cls, stored: Any) -> BoxTargets:
        """The inverse of :meth:`as_tensors`; a foreign or damaged dict is a
        :class:`BoxTargetsError` (one line)."""
        if not isinstance(stored, dict) or any(k not in stored for k in TENSOR_KEYS):
            raise BoxTargetsError(f"stored box targets: keys {TENSOR_KEYS} expected")
        return cls(stored["boxes"], stored["labels"], stored["offsets"])

    def save(self, path: str | os.PathLike) -> None:
        """Write the tensors to ``path`` (atomically: a reader never sees half a file)."""
        with atomic_open(Path(path), "wb") as fh:
            torch.save(self.as_tensors(), fh)

    @classmethod
    def load(cls, path: str | os.PathLike) -> BoxTargets:
        """Read what :meth:`save` wrote (``torch.load(weights_only=True)``)."""
        return cls.from_tensors(torch.load(Path(path), weights_only=True))
