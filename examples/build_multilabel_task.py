"""Build a federated multi-label classification task from real Fashion-MNIST pixels, offline.

    python examples/build_multilabel_task.py trees/fmnist-multilabel        # 32 x 32, 240 + 60
    python examples/build_multilabel_task.py trees/fmnist-ml --sites 6 --objects 4
    python examples/build_multilabel_task.py --help

A multi-label folder (federated/tasks/multilabel/reader.py) whose every pixel is a real
Fashion-MNIST pixel (read by fedsweep's own loader: Debian's dataset-fashion-mnist, else
the data root; training images from Fashion-MNIST's training split, test images from its
test split), made with the segmentation builder's pieces
(examples/build_segmentation_task.py: the sites, their backgrounds, the pasting):

- **labels**: four Fashion-MNIST classes, t-shirt (Fashion-MNIST 0), trouser (1),
  sneaker (7), bag (8); an image's label set is the classes of the items it shows;
- **items**: 1 to ``--objects`` items an image (default 3, at most 4), of distinct labels,
  each in its own cell of a 2 x 2 grid (so no item hides another), scaled to 70-100% of
  the cell, coloured (its grey levels shade a random colour) and pasted with its grey
  level as opacity;
- **backgrounds from other real images**: site k's are 2 x 2 mosaics of Fashion-MNIST
  items of one class that is no label (pullover, dress, coat, sandal, shirt, ankle boot),
  upsampled, dimmed to a third and tinted with the site's colour (input skew);
- **parties by site**: ``labels.csv``'s ``site`` (0..K-1); each site draws its items'
  labels from its own Dirichlet(``--alpha``) mix (label-set skew) and holds an unequal
  number of training images (at least 12).  Test images come from every site alike.

Written::

    OUT/classes.json              ["t-shirt", "trouser", "sneaker", "bag"]
    OUT/images/<stem>.png         RGB PNG
    OUT/labels.csv                stem,labels,site: labels joined by ';'
    OUT/test/images/, OUT/test/labels.csv (stem,labels)
    OUT/build.json                the settings and each site's background, tint, label mix
                                  and image count

Everything is drawn from one seeded generator, so a seed gives the same tree.  The tree
is written into a hidden temporary folder beside OUT and renamed to OUT at the end: OUT
is complete or absent.  Bad input is one ``error:`` line, exit 2.  Train on it with
``--dataset folder:OUT --partition natural --partition-by site``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent  # run as a script from a checkout: its root and here
sys.path[:0] = [str(where) for where in (HERE.parent, HERE) if str(where) not in sys.path]

from build_segmentation_task import (  # noqa: E402
    BACKGROUND_CLASSES,
    OBJECT_CLASSES,
    Site,
    background,
    check_args,
    fashion_items,
    paste,
    plan_sites,
)
from builder_cli import bounded, run_build  # noqa: E402

from federated.cli.input_checks import OneLineParser  # noqa: E402
from federated.runtime.atomic_file import atomic_folder  # noqa: E402

#: the labels: the segmentation builder's object classes (label name -> Fashion-MNIST class)
LABELS = OBJECT_CLASSES
GRID = 2  # cells a side: an item each, none over another
ITEM_SIDE = (0.7, 1.0)  # of the cell's side
MIX_FLOOR = 1e-3  # added to a site's label mix: a draw of distinct labels needs every label


def draw_image(
    site: Site,
    items: tuple[np.ndarray, np.ndarray],
    pools: dict[int, np.ndarray],
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> tuple[np.ndarray, tuple[str, ...]]:
    """One image of ``site``, uint8 (size, size, 3), and its labels (sorted by label)."""
    size = args.size
    scene = background(site, items[0], pools[BACKGROUND_CLASSES[site.background]], size, rng)
    count = int(rng.integers(1, args.objects + 1))
    mix = np.asarray(site.class_mix) + MIX_FLOOR
    chosen = rng.choice(len(LABELS), size=count, replace=False, p=mix / mix.sum())
    cells = rng.choice(GRID * GRID, size=count, replace=False)
    cell = size // GRID
    unused = np.zeros((size, size), dtype=np.uint8)  # paste() also writes a mask
    names = list(LABELS)
    for label, place in zip(chosen, cells):
        pool = pools[LABELS[names[label]]]
        item = items[0][int(pool[rng.integers(len(pool))])]
        side = max(2, round(cell * rng.uniform(*ITEM_SIDE)))
        row, column = divmod(int(place), GRID)
        left, top = (column * cell + int(rng.integers(0, cell - side + 1)),
                     row * cell + int(rng.integers(0, cell - side + 1)))  # fmt: skip
        paste(scene, unused, item, 1, (left, top, side), rng.uniform(110, 255, 3))
    labels = tuple(names[k] for k in sorted(int(c) for c in chosen))
    return np.clip(np.rint(scene), 0, 255).astype(np.uint8), labels


def plan_images(
    args: argparse.Namespace, rng: np.random.Generator
) -> tuple[list[Site], list[tuple[str, Site]]]:
    """The sites, then every image's split and site in stem order: each site's training
    images, then the test images, each from a site drawn at random."""
    sites = plan_sites(args, rng)
    train = [("train", site) for site in sites for _ in range(site.train_images)]
    test = [("test", sites[int(rng.integers(len(sites)))]) for _ in range(args.test_images)]
    return sites, train + test


def build(args: argparse.Namespace) -> int:
    """Check everything, build into a temporary folder, rename it to OUT; returns the
    number of images written."""
    out = check_args(args)
    items = fashion_items(args.data_root)
    rng = np.random.default_rng(args.seed)
    sites, plan = plan_images(args, rng)
    with atomic_folder(out) as staging:
        _write_images(staging, args, plan, items, rng)
        _write_record(staging, args, sites)
    return len(plan)


def _write_images(
    staging: Path,
    args: argparse.Namespace,
    plan: list[tuple[str, Site]],
    items: dict[str, tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
) -> None:
    """Every image of ``plan`` (the stems are its positions) and each split's labels file."""
    pools = {
        split: {k: np.flatnonzero(labels == k) for k in range(10)}
        for split, (_, labels) in items.items()
    }
    rows = {"train": ["stem,labels,site"], "test": ["stem,labels"]}
    folders = {"train": staging, "test": staging / "test"}
    for folder in folders.values():
        (folder / "images").mkdir(parents=True)
    for number, (split, site) in enumerate(plan):
        pixels, labels = draw_image(site, items[split], pools[split], args, rng)
        Image.fromarray(pixels, "RGB").save(folders[split] / "images" / f"{number:05d}.png")
        cells = [f"{number:05d}", ";".join(labels)] + ([str(site.index)] * (split == "train"))
        rows[split].append(",".join(cells))
    for split, folder in folders.items():
        (folder / "labels.csv").write_text("\n".join(rows[split]) + "\n", encoding="utf-8")


def _write_record(staging: Path, args: argparse.Namespace, sites: list[Site]) -> None:
    """The label names and ``build.json``: the settings and each site's background class,
    tint, label mix and training images."""
    (staging / "classes.json").write_text(json.dumps(list(LABELS)) + "\n", encoding="utf-8")
    flags = ("size", "train_images", "test_images", "sites", "objects", "alpha", "seed")
    record = {
        "source": "Fashion-MNIST items pasted on mosaics of other Fashion-MNIST items",
        **{flag: getattr(args, flag) for flag in flags},
        "labels": {name: {"fashion_mnist_class": k} for name, k in LABELS.items()},
        "site_list": [
            asdict(site) | {"background_fashion_mnist_class": BACKGROUND_CLASSES[site.background]}
            for site in sites
        ],
    }
    (staging / "build.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


#: the numeric flags: (flag, number kind, lowest, highest, default, what it sets)
FLAGS = (
    ("--size", int, 16, 256, 32, "image side in pixels"),
    ("--train-images", int, 1, 100_000, 240, "training images"),
    ("--test-images", int, 1, 100_000, 60, "test images"),
    ("--sites", int, 2, len(BACKGROUND_CLASSES), 4,
     f"sites, the parties (at most {len(BACKGROUND_CLASSES)}: one background class each)"),
    ("--objects", int, 1, GRID * GRID, 3,
     f"most items an image (at least 1, at most {GRID * GRID}: a cell each)"),
    ("--alpha", float, 0.01, 1000, 0.5,
     "Dirichlet concentration of each site's label mix (smaller: more skewed)"),
    ("--seed", int, 0, 2**31 - 1, 0, "the generator's seed"),
)  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; a bad flag value exits with one ``error:`` line (status 2)."""
    parser = OneLineParser(
        prog="build_multilabel_task.py",
        description="Build a federated multi-label classification task (images, the set of "
        "items each shows, parties by site) from real Fashion-MNIST pixels.",
    )
    parser.add_argument("out", metavar="OUT", help="the folder to create (must not exist)")
    for flag, kind, low, high, default, words in FLAGS:
        parser.add_argument(
            flag,
            type=bounded(kind, low, high),
            default=default,
            help=f"{words} (default {default})",
        )
    parser.add_argument(
        "--data-root",
        help="where fedsweep looks for Fashion-MNIST besides Debian's dataset-fashion-mnist",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build OUT; bad input is one ``error:`` line and exit status 2."""
    return run_build(parse_args(argv), build, "images")


if __name__ == "__main__":
    sys.exit(main())
