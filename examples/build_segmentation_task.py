"""Build a federated semantic-segmentation task from real Fashion-MNIST pixels, offline.

    python examples/build_segmentation_task.py trees/fmnist-seg            # 32 x 32, 240 + 60
    python examples/build_segmentation_task.py trees/fmnist-seg-64 --size 64 --sites 6
    python examples/build_segmentation_task.py --help

A segmentation folder (federated/tasks/segmentation/reader.py) whose every pixel is a real
Fashion-MNIST pixel (read by fedsweep's own loader: Debian's dataset-fashion-mnist, else
the data root; training images from Fashion-MNIST's training split, test images from its
test split):

- **objects**: items of four Fashion-MNIST classes, the task's classes 1-4 (class 0 is
  the background): t-shirt (Fashion-MNIST 0), trouser (1), sneaker (7), bag (8).  An item
  is scaled to 35-65% of the image side, coloured (its grey levels shade a random
  colour) and pasted with its grey level as opacity at a random place; 1 to
  ``--objects`` items an image, later ones painted over earlier ones;
- **exact masks**: a pixel is an item's class where that item changed it with opacity
  of at least :data:`EDGE_OPACITY` (a quarter) and was not painted over; a pixel an item
  changed more faintly is 255 (ignore: the boundary band VOC's masks leave unlabelled,
  where neither class is right); every other pixel is background (0);
- **backgrounds from other real images**: each site's backgrounds are mosaics of 2 x 2
  Fashion-MNIST items of one class that is no object class (pullover, dress, coat,
  sandal, shirt, ankle boot: site k's is the k-th), upsampled to the image size, dimmed to
  a third and tinted with the site's colour: the sites differ in their input, as
  hospitals' scanners or cameras do;
- **parties by site**: ``parties.csv`` holds each training image's ``site`` (0..K-1);
  each site draws its objects' classes from its own Dirichlet(``--alpha``) mix (pixel-level
  label skew) and holds an unequal number of training images (at least
  :data:`MIN_SITE_IMAGES`, the rest a Dirichlet(1) share).  Test images come from every
  site alike and carry no site.

Written::

    OUT/classes.json                   ["background", "t-shirt", "trouser", "sneaker", "bag"]
    OUT/images/<stem>.png              RGB PNG (lossless: the masks stay exact)
    OUT/masks/<stem>.png               8-bit grey PNG: class index per pixel, 255 = ignore
    OUT/test/images/, OUT/test/masks/  the test set
    OUT/parties.csv                    stem,site (training images)
    OUT/build.json                     the settings and each site's background, tint,
                                       class mix and image count

Everything is drawn from one seeded generator, so a seed gives the same tree.  The tree
is written into a hidden temporary folder beside OUT and renamed to OUT at the end: OUT
is complete or absent.  Bad input is one ``error:`` line, exit 2.  Train on it with
``--dataset folder:OUT --partition natural --partition-by site``.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent  # run as a script from a checkout: its root and here
sys.path[:0] = [str(where) for where in (HERE.parent, HERE) if str(where) not in sys.path]

from builder_cli import (  # noqa: E402
    BuildError,
    add_image_counts,
    add_seed_and_data_root,
    bounded,
    new_folder,
    run_build,
)

from federated.cli.input_checks import OneLineParser  # noqa: E402
from federated.data.folder_layout import MIN_PARTY_IMAGES  # noqa: E402
from federated.runtime.atomic_file import atomic_folder  # noqa: E402
from federated.tasks.segmentation.targets import IGNORE_INDEX  # noqa: E402

# the task's object classes (1..4; 0 is the background) -> Fashion-MNIST class index:
# shapes a small network can tell apart at 32 pixels
OBJECT_CLASSES = {"t-shirt": 0, "trouser": 1, "sneaker": 7, "bag": 8}
CLASS_NAMES = ("background", *OBJECT_CLASSES)
# the Fashion-MNIST classes backgrounds are made of (no object class): site k's is the k-th
BACKGROUND_CLASSES = {"pullover": 2, "dress": 3, "coat": 4, "sandal": 5, "shirt": 6, "boot": 9}
MOSAIC = 2  # background tiles a side
BACKGROUND_LEVEL = 1 / 3  # backgrounds are dimmed to a third: objects stand out
EDGE_OPACITY = 0.25  # a pixel an item changed more faintly is ignored (255)
OBJECT_SIDE = (0.35, 0.65)  # of the image side
MIN_SITE_IMAGES = MIN_PARTY_IMAGES + 2  # a site stays a party (>= 10) under a hold-out


@dataclass(frozen=True)
class Site:
    """One site: the Fashion-MNIST class its backgrounds are made of, its tint, its
    objects' class mix and its training images."""

    index: int
    background: str
    tint: tuple[float, float, float]
    class_mix: tuple[float, ...]  # over OBJECT_CLASSES
    train_images: int


@functools.lru_cache(maxsize=1)
def fashion_items(data_root: str | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Fashion-MNIST's images (N, 28, 28) uint8 and labels (N,) per split, by fedsweep's
    loader (kept for the next build in the same process)."""
    from federated.data import DatasetUnavailableError, load_dataset

    try:
        data = load_dataset("fmnist", data_root)
    except DatasetUnavailableError as err:
        raise BuildError(str(err)) from None
    return {
        "train": (data.train_x[:, 0].numpy(), data.train_y.numpy()),
        "test": (data.test_x[:, 0].numpy(), data.test_y.numpy()),
    }


def images_per_site(total: int, sites: int, rng: np.random.Generator) -> list[int]:
    """``total`` training images over ``sites``: each at least MIN_SITE_IMAGES, the rest
    by a Dirichlet(1) share (unequal)."""
    spare = total - sites * MIN_SITE_IMAGES
    share = rng.dirichlet(np.ones(sites))
    counts = np.floor(share * spare).astype(int)
    counts[np.argsort(-share)[: spare - counts.sum()]] += 1  # the remainder, largest first
    return [int(c) + MIN_SITE_IMAGES for c in counts]


def plan_sites(args: argparse.Namespace, rng: np.random.Generator) -> list[Site]:
    """The sites in order: site k's backgrounds from the k-th background class, its tint,
    class mix and training images."""
    counts = images_per_site(args.train_images, args.sites, rng)
    backgrounds = list(BACKGROUND_CLASSES)
    return [
        Site(
            index=k,
            background=backgrounds[k],
            tint=tuple(float(v) for v in rng.uniform(0.5, 1.0, 3)),
            class_mix=tuple(float(v) for v in rng.dirichlet(np.full(4, args.alpha))),
            train_images=counts[k],
        )
        for k in range(args.sites)
    ]


def background(
    site: Site, items: np.ndarray, pool: np.ndarray, size: int, rng: np.random.Generator
) -> np.ndarray:
    """A mosaic of MOSAIC x MOSAIC real items of the site's background class, upsampled
    to ``size``, dimmed and tinted: float (size, size, 3) in 0..255."""
    picks = items[rng.choice(pool, MOSAIC * MOSAIC, replace=False)]
    rows = [
        np.concatenate(list(picks[r * MOSAIC : (r + 1) * MOSAIC]), axis=1) for r in range(MOSAIC)
    ]
    mosaic = Image.fromarray(np.concatenate(rows, axis=0)).resize((size, size), Image.BILINEAR)
    grey = np.asarray(mosaic, dtype=np.float64) * BACKGROUND_LEVEL
    return grey[..., None] * np.array(site.tint)


def paste(
    scene: np.ndarray,
    mask: np.ndarray,
    item: np.ndarray,
    label: int,
    place: tuple[int, int, int],
    colour: np.ndarray,
) -> bool:
    """``item`` (28 x 28 grey) scaled to ``side`` pixels at (left, top) on ``scene``
    (float H x W x 3) and into ``mask`` (uint8 H x W), both changed in place; its grey
    levels shade ``colour`` and are its opacity.  Returns whether it showed a labelled
    pixel (opacity >= EDGE_OPACITY)."""
    left, top, side = place
    scaled = Image.fromarray(item).resize((side, side), Image.BILINEAR)
    alpha = np.asarray(scaled, dtype=np.float64) / 255.0
    region = scene[top : top + side, left : left + side]
    shade = colour * (0.45 + 0.55 * alpha[..., None])
    region[:] = region * (1 - alpha[..., None]) + shade * alpha[..., None]
    labels = mask[top : top + side, left : left + side]
    labels[alpha > 0] = IGNORE_INDEX  # changed, but too faintly to say whose pixel it is
    solid = alpha >= EDGE_OPACITY
    labels[solid] = label
    return bool(solid.any())


def draw_image(
    site: Site,
    items: tuple[np.ndarray, np.ndarray],
    pools: dict[int, np.ndarray],
    args: argparse.Namespace,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """One image of ``site`` and its mask: uint8 (size, size, 3) and (size, size)."""
    size = args.size
    scene = background(site, items[0], pools[BACKGROUND_CLASSES[site.background]], size, rng)
    mask = np.zeros((size, size), dtype=np.uint8)
    for _ in range(int(rng.integers(1, args.objects + 1))):
        label = 1 + int(rng.choice(len(OBJECT_CLASSES), p=site.class_mix))
        pool = pools[OBJECT_CLASSES[CLASS_NAMES[label]]]
        item = items[0][int(pool[rng.integers(len(pool))])]
        side = max(2, round(size * rng.uniform(*OBJECT_SIDE)))
        left, top = (int(v) for v in rng.integers(0, size - side + 1, 2))
        paste(scene, mask, item, label, (left, top, side), rng.uniform(110, 255, 3))
    return np.clip(np.rint(scene), 0, 255).astype(np.uint8), mask


def check_args(args: argparse.Namespace) -> Path:
    """One line for a combination the flags cannot make; returns OUT (absolute)."""
    out = new_folder(args.out)
    floor = args.sites * MIN_SITE_IMAGES
    if args.train_images < floor:
        raise BuildError(
            f"--train-images {args.train_images} (allowed: at least {floor}: "
            f"{MIN_SITE_IMAGES} per site for {args.sites} sites)"
        )
    return out


def build(args: argparse.Namespace) -> int:
    """Check everything, build into a temporary folder, rename it to OUT; returns the
    number of images written."""
    out = check_args(args)
    items = fashion_items(args.data_root)
    rng = np.random.default_rng(args.seed)
    sites = plan_sites(args, rng)
    plan = [("train", site) for site in sites for _ in range(site.train_images)]
    plan += [("test", sites[int(rng.integers(len(sites)))]) for _ in range(args.test_images)]
    with atomic_folder(out) as staging:
        _write(staging, args, plan, sites, items, rng)
    return len(plan)


def _write(
    staging: Path,
    args: argparse.Namespace,
    plan: list[tuple[str, Site]],
    sites: list[Site],
    items: dict[str, tuple[np.ndarray, np.ndarray]],
    rng: np.random.Generator,
) -> None:
    """Every image and mask of ``plan`` (in order: the stems are its positions), the
    classes, the sites' rows and the build record, into ``staging``."""
    for folder in ("images", "masks", "test/images", "test/masks"):
        (staging / folder).mkdir(parents=True)
    pools = {
        split: {k: np.flatnonzero(labels == k) for k in range(10)}
        for split, (_, labels) in items.items()
    }
    rows = ["stem,site"]
    for number, (split, site) in enumerate(plan):
        stem = f"{number:05d}"
        pixels, mask = draw_image(site, items[split], pools[split], args, rng)
        where = staging if split == "train" else staging / "test"
        Image.fromarray(pixels, "RGB").save(where / "images" / f"{stem}.png")
        Image.fromarray(mask, "L").save(where / "masks" / f"{stem}.png")
        if split == "train":
            rows.append(f"{stem},{site.index}")
    (staging / "classes.json").write_text(json.dumps(list(CLASS_NAMES)) + "\n", encoding="utf-8")
    (staging / "parties.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    settings = {
        "source": "Fashion-MNIST items pasted on mosaics of other Fashion-MNIST items",
        "size": args.size,
        "train_images": args.train_images,
        "test_images": args.test_images,
        "sites": args.sites,
        "objects": args.objects,
        "alpha": args.alpha,
        "seed": args.seed,
        "edge_opacity": EDGE_OPACITY,
        "classes": {
            name: {"fashion_mnist_class": OBJECT_CLASSES.get(name)} for name in CLASS_NAMES
        },
        "site_list": [
            {**asdict(site), "background_fashion_mnist_class": BACKGROUND_CLASSES[site.background]}
            for site in sites
        ],
    }
    (staging / "build.json").write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="build_segmentation_task.py",
        description="Build a federated semantic-segmentation task (images, exact masks, "
        "parties by site) from real Fashion-MNIST pixels.",
    )
    parser.add_argument("out", metavar="OUT", help="the folder to create (must not exist)")
    parser.add_argument(
        "--size", type=bounded(int, 16, 256), default=32, help="image side in pixels (default 32)"
    )
    add_image_counts(parser, train=240, test=60, least_test=1)
    parser.add_argument(
        "--sites", type=bounded(int, 2, len(BACKGROUND_CLASSES)), default=4,
        help=f"sites, the parties (default 4, at most {len(BACKGROUND_CLASSES)}: one "
        "background class each)",
    )  # fmt: skip
    parser.add_argument(
        "--objects", type=bounded(int, 1, 8), default=3,
        help="most objects an image (default 3; at least 1)",
    )  # fmt: skip
    parser.add_argument(
        "--alpha", type=bounded(float, 0.01, 1000), default=0.5,
        help="Dirichlet concentration of each site's class mix (smaller: more skewed; "
        "default 0.5)",
    )  # fmt: skip
    add_seed_and_data_root(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run_build(parse_args(argv), build, "images")


if __name__ == "__main__":
    sys.exit(main())
