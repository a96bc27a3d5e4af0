"""Write Fashion-MNIST as an image folder: PNG files in fedsweep's folder layouts.

    python -m federated.export_tree trees/fmnist-parties --parties 5 --data-fraction 0.05
    python -m federated.export_tree trees/fmnist-all --all

The first writes a Dirichlet(beta) draw of ``data-fraction`` of the training images over
``parties`` folders (``train/party<k>/<class>/<index>.png``, the draw of
``partition_for_run`` for dataset fmnist with that seed) and the first ``--test`` test
images (``test/<class>/<index>.png``): a natural-partition data set whose runs can be
compared with the same draw of the built-in dataset.  ``--all`` writes all 70,000 images
as ``train/<class>/`` and ``test/<class>/``.  Class folders are named ``0-tshirt`` ...
``9-boot`` so that their sorted order is Fashion-MNIST's label order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from torchvision.io import write_png

from federated.data.loading import ImageData, load_dataset

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
    """uint8 (C, H, W) -> PNG file at ``path`` (folders created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_png(image, str(path))


def export_parties(
    fmnist: ImageData,
    root: Path,
    *,
    n_parties: int = 5,
    data_fraction: float = 0.05,
    beta: float = 0.5,
    n_test: int = 1000,
    seed: int = 0,
) -> list[np.ndarray]:
    """The per-party tree (module docstring); returns the draw (per party, indices into
    the Fashion-MNIST training set)."""
    from federated.config.run_config import RunConfig  # config imports this package
    from federated.heterogeneity.partition import partition_for_run

    config = RunConfig(
        dataset="fmnist",
        partition="dirichlet",
        beta=beta,
        n_parties=n_parties,
        data_fraction=data_fraction,
        seed=seed,
    )
    parts = partition_for_run(fmnist.train_y.numpy(), config)
    for party, indices in enumerate(parts):
        for i in indices.tolist():
            label = FMNIST_CLASSES[int(fmnist.train_y[i])]
            write_image(
                root / "train" / f"party{party}" / label / f"{i:05d}.png", fmnist.train_x[i]
            )
    _export_split(fmnist.test_x[:n_test], fmnist.test_y[:n_test], root / "test")
    return parts


def export_all(fmnist: ImageData, root: Path) -> None:
    """All 60,000 training and 10,000 test images as train/<class>/ and test/<class>/."""
    _export_split(fmnist.train_x, fmnist.train_y, root / "train")
    _export_split(fmnist.test_x, fmnist.test_y, root / "test")


def _export_split(images: torch.Tensor, labels: torch.Tensor, folder: Path) -> None:
    for i in range(images.shape[0]):
        write_image(folder / FMNIST_CLASSES[int(labels[i])] / f"{i:05d}.png", images[i])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m federated.export_tree", description=__doc__)
    p.add_argument("out", type=Path, help="folder to create (must not exist)")
    p.add_argument("--all", action="store_true", help="all 70,000 images, no party folders")
    p.add_argument("--parties", type=int, default=5)
    p.add_argument("--data-fraction", type=float, default=0.05)
    p.add_argument("--beta", type=float, default=0.5)
    p.add_argument("--test", type=int, default=1000, help="test images written")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-root", default=None, help="where Fashion-MNIST is looked for")
    args = p.parse_args(argv)
    if args.out.exists():
        print(f"error: {args.out} exists (allowed: a new folder)", file=sys.stderr)
        return 2
    fmnist = load_dataset("fmnist", args.data_root)
    if args.all:
        export_all(fmnist, args.out)
    else:
        parts = export_parties(
            fmnist,
            args.out,
            n_parties=args.parties,
            data_fraction=args.data_fraction,
            beta=args.beta,
            n_test=args.test,
            seed=args.seed,
        )
        print("images per party:", ", ".join(str(len(p)) for p in parts))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
