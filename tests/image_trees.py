"""Real images on disk for the folder-dataset tests: Fashion-MNIST exported as PNG trees."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torchvision.io import write_png

from federated.config import RunConfig
from federated.data import ImageData
from federated.partition import partition_for_run

# Folder names sort in label order, so a folder dataset's label i is Fashion-MNIST's i.
FMNIST_CLASSES = (
    "0-tshirt",
    "1-trouser",
    "2-pullover",
    "3-dress",
    "4-coat",
    "5-sandal",
    "6-shirt",
    "7-sneaker",
    "8-bag",
    "9-boot",
)


def write_image(path: Path, image: torch.Tensor) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_png(image, str(path))


def export_fmnist_parties(
    fmnist: ImageData,
    root: Path,
    *,
    n_parties: int = 5,
    data_fraction: float = 0.05,
    n_test: int = 1000,
    seed: int = 0,
) -> list[np.ndarray]:
    """Write a Dirichlet(0.5) draw of ``data_fraction`` of the training images as
    ``root/train/party<k>/<class>/<index>.png`` and the first ``n_test`` test images as
    ``root/test/<class>/<index>.png``; returns the draw (per party, indices into the
    Fashion-MNIST training set)."""
    config = RunConfig(
        dataset="fmnist",
        partition="dirichlet",
        beta=0.5,
        n_parties=n_parties,
        data_fraction=data_fraction,
        seed=seed,
    )
    parts = partition_for_run(fmnist.train_y.numpy(), config)
    for party, indices in enumerate(parts):
        for i in indices:
            label = FMNIST_CLASSES[int(fmnist.train_y[i])]
            path = root / "train" / f"party{party}" / label / f"{i:05d}.png"
            write_image(path, fmnist.train_x[i])
    for i in range(n_test):
        label = FMNIST_CLASSES[int(fmnist.test_y[i])]
        write_image(root / "test" / label / f"{i:05d}.png", fmnist.test_x[i])
    return parts
