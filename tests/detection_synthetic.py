"""Small generated detection data for the engine's detection tests: grey noisy images
with one to three solid rectangles each, one colour per class, and their exact boxes.

:func:`register` puts the data set's spec in the catalogue under :data:`NAME` (pytest's
``monkeypatch``), so a :class:`~federated.config.run_config.RunConfig` resolves it; the
images are handed to the run directly (``run_rounds(config, data)``).
"""

from __future__ import annotations

import torch

from federated.data import ImageData
from federated.data.catalog import DatasetSpec
from federated.tasks.detection.targets import BoxTargets

NAME = "boxes-test"
CLASSES = ("red", "green", "blue")
# one colour per class (uint8 RGB)
COLOURS = torch.tensor([[220, 40, 40], [40, 200, 40], [40, 60, 230]], dtype=torch.int16)


def boxes_images(
    n: int, size: int = 64, seed: int = 0, min_side: int = 12, max_side: int = 26
) -> tuple[torch.Tensor, BoxTargets]:
    """``n`` uint8 images (n, 3, size, size) and their boxes (1..3 per image)."""
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(100, 156, (n, 3, size, size), generator=g, dtype=torch.int16)
    per_image = []
    for i in range(n):
        count = int(torch.randint(1, 4, (1,), generator=g))
        boxes, labels = [], []
        for _ in range(count):
            w, h = (int(v) for v in torch.randint(min_side, max_side + 1, (2,), generator=g))
            x1 = int(torch.randint(0, size - w + 1, (1,), generator=g))
            y1 = int(torch.randint(0, size - h + 1, (1,), generator=g))
            label = int(torch.randint(0, len(CLASSES), (1,), generator=g))
            images[i, :, y1 : y1 + h, x1 : x1 + w] = COLOURS[label].view(3, 1, 1)
            boxes.append([x1, y1, x1 + w, y1 + h])
            labels.append(label)
        per_image.append((boxes, labels))
    return images.to(torch.uint8), BoxTargets.from_images(per_image)


def spec(train: int, test: int, size: int = 64) -> DatasetSpec:
    return DatasetSpec(
        NAME,
        len(CLASSES),
        3,
        size,
        size,
        train,
        test,
        "fcos-tiny",
        (0.5, 0.5, 0.5),
        (0.25, 0.25, 0.25),
        class_names=CLASSES,
        task="detection",
        target_names=CLASSES,
    )


def boxes_data(train: int = 48, test: int = 24, size: int = 64) -> ImageData:
    """The data set: train and test images drawn from different seeds."""
    train_x, train_y = boxes_images(train, size, seed=1)
    test_x, test_y = boxes_images(test, size, seed=2)
    return ImageData(spec(train, test, size), train_x, train_y, test_x, test_y)


def register(monkeypatch, data: ImageData) -> None:
    """Make :data:`NAME` a known data set with ``data``'s spec (for this test only)."""
    from federated.data import catalog

    monkeypatch.setitem(catalog.DATASETS, NAME, data.spec)
