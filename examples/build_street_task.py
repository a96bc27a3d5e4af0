"""Build a Street-like federated detection task from real images, offline.

    python examples/build_street_task.py trees/street-like            # 96 x 96, 400 + 100 images
    python examples/build_street_task.py trees/street-small --size 64 --train-images 240
    python examples/build_street_task.py --help

The Street data set (Luo et al. 2019: 956 images from 26 street cameras, 7 object classes)
is sent on request only.  This builds a tree in its release format
(federated/tasks/detection/street_annotations.py) from real pixels shipped with the project's own
dependencies:

- **scenes**: each camera looks at one of three photographs (scikit-learn's
  ``china.jpg`` and ``flower.jpg``, matplotlib's ``grace_hopper.jpg``) through its own
  square crop (35-80% of the photograph's short side, at its own place), resized to
  ``--size`` pixels, with its own lighting: a gain in [0.6, 1.3], a per-channel tint in
  [0.85, 1.15] and a gamma in [0.7, 1.4].  Each image of a camera varies its gain by up
  to +/-10% and adds sensor noise (std 3 grey levels);
- **objects**: real Fashion-MNIST items (read by fedsweep's own loader: Debian's
  dataset-fashion-mnist, else the data root), training images' objects from
  Fashion-MNIST's training split and test images' from its test split.  Each Street
  class is one Fashion-MNIST class (:data:`CLASS_MAP`): basket = bag, carton = T-shirt,
  chair = trouser, electrombile = sneaker, gastank = ankle boot, sunshade = dress,
  table = sandal.  An item is scaled to 22-42% of the image side, coloured (its grey
  levels shade a random colour) and pasted with its own grey level as opacity; its box
  is the tight box of the pixels it changed (opacity above 0), exact in the stored
  image's pixels: ``[x1, y1, x2, y2]`` with ``x2`` one past the last column.  Boxes of
  one image do not overlap; an image holds 0 to 4 objects (Poisson, mean 1.5), so some
  hold none;
- **non-IID as the paper's Table 2**: classes are drawn overall as often as Street's
  training boxes (chair and electrombile common, gastank and table rare), and per camera
  from a Dirichlet(``--alpha`` x those frequencies) mix; training images per camera are
  unequal (a Dirichlet(1) share of the images above a floor of :data:`MIN_CAMERA_IMAGES`);
- **cameras**: ``--cameras`` training cameras (``device2_id`` 0..K-1: Street-20) in 5
  groups of unequal size (``device1_id`` 0..4: Street-5), and ``--unseen-cameras`` more
  seen only in the test set; the test set mixes images of the training cameras with all
  images of the unseen ones (as Street's, whose test entries carry no device).

Written::

    OUT/Images/<image_id>.jpg     JPEG, quality 95 (the release's format)
    OUT/train_label.json          [{"image_id", "device1_id", "device2_id", "items": [...]}]
    OUT/test_label.json           [{"image_id", "items": [...]}]
    OUT/build.json                the settings, each camera (photograph, crop, lighting,
                                  class mix, images) and each test image's camera

Everything is drawn from one seeded generator, so a seed gives the same tree.  The tree
is written into a hidden temporary folder beside OUT and renamed to OUT at the end: OUT
is complete or absent.  Bad input is one ``error:`` line, exit 2.  Train on it with
``--dataset folder:OUT --partition natural --partition-by device2_id``.
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
from federated.tasks.detection.street_annotations import STREET_CLASSES, STREET_TEST, STREET_TRAIN  # noqa: E402

# Street class -> Fashion-MNIST class index (0 T-shirt, 1 trouser, 3 dress, 5 sandal,
# 7 sneaker, 8 bag, 9 ankle boot): shapes a small detector can tell apart
CLASS_MAP = {
    "basket": 8,
    "carton": 0,
    "chair": 1,
    "electrombile": 7,
    "gastank": 9,
    "sunshade": 3,
    "table": 5,
}
# Street-5's training boxes per class (the paper's Table 2): the overall class mix
STREET_BOX_COUNTS = {
    "basket": 165,
    "carton": 215,
    "chair": 494,
    "electrombile": 510,
    "gastank": 106,
    "sunshade": 413,
    "table": 102,
}
DEVICE1_GROUPS = 5
MIN_CAMERA_IMAGES = MIN_PARTY_IMAGES + 2  # a camera stays a party (>= 10) under any split
MAX_OBJECTS = 4
MEAN_OBJECTS = 1.5
OBJECT_SIDE = (0.22, 0.42)  # of the image side
NOISE_STD = 3.0  # grey levels
JPEG_QUALITY = 95


@dataclass(frozen=True)
class Camera:
    """One camera: its view of a photograph, its lighting and its class mix."""

    index: int
    photo: str
    crop: tuple[int, int, int]  # left, top, side (pixels of the photograph)
    gain: float
    tint: tuple[float, float, float]
    gamma: float
    class_mix: tuple[float, ...]  # over STREET_CLASSES
    device1_id: int | None  # None: an unseen camera (test only)
    device2_id: int | None


def scene_photographs() -> dict[str, Path]:
    """The real photographs shipped with scikit-learn and matplotlib (name -> file)."""
    import matplotlib
    import sklearn.datasets

    sklearn_images = Path(sklearn.datasets.__file__).parent / "images"
    sample_data = Path(matplotlib.get_data_path()) / "sample_data"
    found = {
        "china.jpg": sklearn_images / "china.jpg",
        "flower.jpg": sklearn_images / "flower.jpg",
        "grace_hopper.jpg": sample_data / "grace_hopper.jpg",
    }
    for name, path in found.items():
        if not path.is_file():
            raise BuildError(f"{path}: the photograph {name} is missing (reinstall the package)")
    return found


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


# ------------------------------------------------------------------ drawing
def plan_cameras(
    args: argparse.Namespace, photos: list[str], rng: np.random.Generator
) -> list[Camera]:
    """The training cameras (device ids set) then the unseen ones (test only)."""
    frequency = np.array([STREET_BOX_COUNTS[c] for c in STREET_CLASSES], dtype=np.float64)
    frequency /= frequency.sum()
    # Street-5's groups are geographic and unequal: cameras in 5 contiguous blocks whose
    # sizes are a seeded split of K (each at least 1)
    cuts = np.sort(rng.choice(np.arange(1, args.cameras), DEVICE1_GROUPS - 1, replace=False))
    group_of = np.searchsorted(cuts, np.arange(args.cameras), side="right")
    cameras = []
    for index in range(args.cameras + args.unseen_cameras):
        photo = photos[index % len(photos)]
        cameras.append(
            Camera(
                index=index,
                photo=photo,
                crop=(0, 0, 0),  # set by _with_crop from the photograph's size
                gain=float(rng.uniform(0.6, 1.3)),
                tint=tuple(float(v) for v in rng.uniform(0.85, 1.15, 3)),
                gamma=float(rng.uniform(0.7, 1.4)),
                class_mix=tuple(float(v) for v in rng.dirichlet(args.alpha * 7 * frequency)),
                device1_id=int(group_of[index]) if index < args.cameras else None,
                device2_id=index if index < args.cameras else None,
            )
        )
    return cameras


def _with_crop(camera: Camera, photo_size: tuple[int, int], rng: np.random.Generator) -> Camera:
    width, height = photo_size
    side = round(min(width, height) * rng.uniform(0.35, 0.8))
    left = int(rng.integers(0, width - side + 1))
    top = int(rng.integers(0, height - side + 1))
    return Camera(**{**asdict(camera), "crop": (left, top, side)})


def images_per_camera(total: int, cameras: int, rng: np.random.Generator) -> list[int]:
    """``total`` training images over ``cameras``: each at least MIN_CAMERA_IMAGES, the
    rest by a Dirichlet(1) share (unequal, as Street's)."""
    spare = total - cameras * MIN_CAMERA_IMAGES
    share = rng.dirichlet(np.ones(cameras))
    counts = np.floor(share * spare).astype(int)
    counts[np.argsort(-share)[: spare - counts.sum()]] += 1  # the remainder, largest shares first
    return [int(c) + MIN_CAMERA_IMAGES for c in counts]


def camera_view(camera: Camera, photo: Image.Image, size: int) -> np.ndarray:
    """The camera's lit view of its photograph, float (size, size, 3) in 0..255."""
    left, top, side = camera.crop
    view = photo.crop((left, top, left + side, top + side)).resize((size, size), Image.BILINEAR)
    x = np.asarray(view, dtype=np.float64) / 255.0
    x = np.power(x, camera.gamma) * camera.gain * np.array(camera.tint)
    return np.clip(x * 255.0, 0, 255)


def paste(
    scene: np.ndarray, item: np.ndarray, left: int, top: int, side: int, colour: np.ndarray
) -> tuple[np.ndarray, list[int]] | None:
    """``item`` (28x28 grey) scaled to ``side`` pixels at (left, top) on ``scene``
    (float H x W x 3, changed in place), its grey levels shading ``colour`` and serving as
    its opacity; returns the scene and the tight box [x1, y1, x2, y2] of the pixels it
    changed (x2, y2 one past the last), or None when the item shows no pixel."""
    scaled = Image.fromarray(item).resize((side, side), Image.BILINEAR)
    alpha = np.asarray(scaled, dtype=np.float64) / 255.0
    rows, cols = np.flatnonzero(alpha.max(axis=1) > 0), np.flatnonzero(alpha.max(axis=0) > 0)
    if not len(rows):
        return None
    shade = colour * (0.45 + 0.55 * alpha[..., None])
    region = scene[top : top + side, left : left + side]
    region[:] = region * (1 - alpha[..., None]) + shade * alpha[..., None]
    return scene, [
        left + int(cols[0]),
        top + int(rows[0]),
        left + int(cols[-1]) + 1,
        top + int(rows[-1]) + 1,
    ]


def _overlaps(box: list[int], boxes: list[list[int]]) -> bool:
    return any(box[0] < b[2] and b[0] < box[2] and box[1] < b[3] and b[1] < box[3] for b in boxes)


def draw_image(
    camera: Camera,
    view: np.ndarray,
    items: tuple[np.ndarray, np.ndarray],
    by_class: dict[int, np.ndarray],
    size: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, list[dict]]:
    """One image of ``camera``: its view, relit and noisy, with 0..MAX_OBJECTS objects."""
    scene = view * rng.uniform(0.9, 1.1)
    annotations: list[dict] = []
    boxes: list[list[int]] = []
    for _ in range(min(MAX_OBJECTS, int(rng.poisson(MEAN_OBJECTS)))):
        name = STREET_CLASSES[int(rng.choice(len(STREET_CLASSES), p=camera.class_mix))]
        pool = by_class[CLASS_MAP[name]]
        item = items[0][int(pool[rng.integers(len(pool))])]
        side = round(size * rng.uniform(*OBJECT_SIDE))
        colour = rng.uniform(20, 235, 3)
        for _try in range(20):  # a free place, else the object is left out
            left, top = (int(v) for v in rng.integers(0, size - side + 1, 2))
            if not _overlaps([left, top, left + side, top + side], boxes):
                break
        else:
            continue
        pasted = paste(scene, item, left, top, side, colour)
        if pasted is None:
            continue
        boxes.append([left, top, left + side, top + side])
        annotations.append({"class": name, "bbox": pasted[1]})
    scene = scene + rng.normal(0.0, NOISE_STD, scene.shape)
    return np.clip(np.rint(scene), 0, 255).astype(np.uint8), annotations


# ------------------------------------------------------------------ building
def check_args(args: argparse.Namespace) -> Path:
    """One line for a combination the flags cannot make; returns OUT (absolute)."""
    out = new_folder(args.out)
    if args.cameras < DEVICE1_GROUPS:
        raise BuildError(
            f"--cameras {args.cameras} (allowed: at least {DEVICE1_GROUPS}, the device1 groups)"
        )
    floor = args.cameras * MIN_CAMERA_IMAGES
    if args.train_images < floor:
        raise BuildError(
            f"--train-images {args.train_images} (allowed: at least {floor}: "
            f"{MIN_CAMERA_IMAGES} per camera for {args.cameras} cameras)"
        )
    if args.test_images <= args.unseen_cameras:
        raise BuildError(
            f"--test-images {args.test_images} (allowed: more than --unseen-cameras "
            f"{args.unseen_cameras}: each unseen camera shows at least one image, and the "
            "training cameras at least one)"
        )
    return out


def build(args: argparse.Namespace) -> int:
    """Check everything, build into a temporary folder, rename it to OUT; returns the
    number of images written."""
    out = check_args(args)
    photos = scene_photographs()
    items = fashion_items(args.data_root)
    rng = np.random.default_rng(args.seed)
    opened = {name: Image.open(path).convert("RGB") for name, path in photos.items()}
    cameras = [
        _with_crop(c, opened[c.photo].size, rng) for c in plan_cameras(args, sorted(photos), rng)
    ]
    seen, unseen = cameras[: args.cameras], cameras[args.cameras :]
    train_counts = images_per_camera(args.train_images, args.cameras, rng)
    # the test set: every unseen camera and the training cameras share it, unseen
    # cameras about a third (at least one image each)
    n_unseen = min(args.test_images - 1, max(len(unseen), args.test_images // 3)) if unseen else 0
    test_cameras = [unseen[i % len(unseen)] for i in range(n_unseen)] if unseen else []
    test_cameras += [seen[int(rng.integers(len(seen)))] for _ in range(args.test_images - n_unseen)]
    plan = [("train", c) for c, n in zip(seen, train_counts) for _ in range(n)]
    plan += [("test", c) for c in test_cameras]
    with atomic_folder(out) as staging:
        _write(staging, args, plan, cameras, opened, items, train_counts, rng)
    return len(plan)


def _write(staging, args, plan, cameras, opened, items, train_counts, rng) -> None:
    (staging / "Images").mkdir()
    views = {c.index: camera_view(c, opened[c.photo], args.size) for c in cameras}
    by_class = {
        split: {k: np.flatnonzero(labels == k) for k in set(CLASS_MAP.values())}
        for split, (_, labels) in items.items()
    }
    entries: dict[str, list[dict]] = {"train": [], "test": []}
    test_cameras = []
    for number, (split, camera) in enumerate(plan):
        image_id = f"{number:06d}"
        pixels, annotations = draw_image(
            camera, views[camera.index], items[split], by_class[split], args.size, rng
        )
        Image.fromarray(pixels, "RGB").save(
            staging / "Images" / f"{image_id}.jpg", quality=JPEG_QUALITY
        )
        entry: dict = {"image_id": image_id}
        if split == "train":
            entry.update(device1_id=camera.device1_id, device2_id=camera.device2_id)
        else:
            test_cameras.append(
                {"image_id": image_id, "camera": camera.index, "unseen": camera.device2_id is None}
            )
        entry["items"] = annotations
        entries[split].append(entry)
    (staging / STREET_TRAIN).write_text(
        json.dumps(entries["train"], indent=1) + "\n", encoding="utf-8"
    )
    (staging / STREET_TEST).write_text(
        json.dumps(entries["test"], indent=1) + "\n", encoding="utf-8"
    )
    settings = {
        "source": "Fashion-MNIST items on scikit-learn's and matplotlib's photographs",
        "size": args.size,
        "train_images": args.train_images,
        "test_images": args.test_images,
        "cameras": args.cameras,
        "unseen_cameras": args.unseen_cameras,
        "alpha": args.alpha,
        "seed": args.seed,
        "class_map": {name: {"fashion_mnist_class": k} for name, k in CLASS_MAP.items()},
        "camera_list": [
            {
                **asdict(c),
                "train_images": (train_counts[c.index] if c.device2_id is not None else 0),
            }
            for c in cameras
        ],
        "test_cameras": test_cameras,
    }
    (staging / "build.json").write_text(json.dumps(settings, indent=1) + "\n", encoding="utf-8")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="build_street_task.py",
        description="Build a Street-like federated detection task (the Street release's "
        "JSON format) from real photographs and real Fashion-MNIST objects with exact boxes.",
    )
    parser.add_argument("out", metavar="OUT", help="the folder to create (must not exist)")
    parser.add_argument(
        "--size", type=bounded(int, 32, 512), default=96, help="image side in pixels (default 96)"
    )
    add_image_counts(parser, train=400, test=100, least_test=2)
    parser.add_argument(
        "--cameras", type=bounded(int, 1, 200), default=20,
        help="training cameras, device2_id (default 20, as Street-20); device1_id groups them in 5",
    )  # fmt: skip
    parser.add_argument(
        "--unseen-cameras", type=bounded(int, 0, 200), default=6,
        help="cameras seen only in the test set (default 6, as Street's)",
    )  # fmt: skip
    parser.add_argument(
        "--alpha", type=bounded(float, 0.01, 1000), default=0.5,
        help="Dirichlet concentration of each camera's class mix, times 7 x Street's class "
        "frequencies (smaller: more skewed; default 0.5)",
    )  # fmt: skip
    add_seed_and_data_root(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run_build(parse_args(argv), build, "images")


if __name__ == "__main__":
    sys.exit(main())
