"""Build an image-quality-assessment task from real Fashion-MNIST images.

    python examples/build_iqa_task.py trees/fmnist-iqa                 # 3 parties by distortion
    python examples/build_iqa_task.py trees/fmnist-iqa-cls --parties class
    python examples/build_iqa_task.py --help

Built the way TID2013 and KADID-10k are built (reference images degraded by known
distortions at known levels), minus the human ratings: each source image is degraded
by each distortion at levels 1..L, and its score is the quality the level implies,
``1 - level / L`` (1 = pristine, which is not in the set, as TID2013's references are
not; 0 = the strongest level).  The distortions, at level k of L:

- ``blur``:  Gaussian blur (PIL), radius ``2.0 * k / L`` pixels;
- ``noise``: additive Gaussian noise (numpy), std ``0.25 * k / L`` of the 0..255 range,
  clipped; drawn from a stream keyed by (seed, split, source index, level);
- ``jpeg``:  JPEG compression (PIL) at quality ``round(50 * (2/50) ** (k / L))``
  (geometric, 26, 14, 7, 4, 2 for L = 5), decoded again.  Below quality 2 the
  28 x 28 images change no more, and between 5 and 4 the mean pixel error does not
  always grow; with L = 5 it grows at every level (tests/test_iqa_builder.py), with
  more levels neighbouring ones may share a quality or an error.

Every image is stored as an 8-bit grey PNG of Fashion-MNIST's 28 x 28.  The tree is a
score-task folder (federated/tasks/score/scores_file.py)::

    OUT/scores.csv                 path,score,blur,noise,jpeg
    OUT/train/<party>/<image>.png  parties by distortion (blur, noise, jpeg) or by the
                                   source's class (0-tshirt ... 9-boot); --parties pool:
    OUT/train/<image>.png          one pool
    OUT/test/<image>.png           degraded images of Fashion-MNIST *test* images
    OUT/build.json                 the command's settings and the distortion parameters

The attribute columns are each distortion's level as a fraction ``k / L`` (0 where the
image has not that distortion).  Sources are drawn without replacement, seeded, from
the training images (train/) and the test images (test/), so no source is on both
sides.  A test/ folder is always written: the test set the runs report on (the
scores file makes the tree a score task: ``--dataset folder:OUT --partition natural``).
The tree is written into a hidden temporary folder beside OUT and renamed to OUT at
the end: OUT is complete or absent.  Bad input is one ``error:`` line, exit 2.
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

HERE = Path(__file__).resolve().parent  # run as a script from a checkout: its root and here
sys.path[:0] = [str(where) for where in (HERE.parent, HERE) if str(where) not in sys.path]

from builder_cli import BuildError, new_folder, run_build  # noqa: E402

from federated.cli.input_checks import OneLineParser  # noqa: E402
from federated.data.folder_layout import MIN_PARTY_IMAGES  # noqa: E402
from federated.data.idx import read_idx  # noqa: E402
from federated.export_tree import FMNIST_CLASSES  # noqa: E402
from federated.runtime.atomic_file import atomic_folder  # noqa: E402
from federated.tasks.score.scores_file import SCORES_FILE  # noqa: E402

DEFAULT_DATA = Path("/usr/share/datasets/fashion-mnist")
DISTORTIONS = ("blur", "noise", "jpeg")
PARTY_RULES = ("distortion", "class", "pool")
MAX_BLUR_RADIUS = 2.0  # pixels, at the strongest level
MAX_NOISE_STD = 0.25  # of the 0..255 range, at the strongest level
JPEG_QUALITY_RANGE = (50, 2)  # PIL quality at level 0 (not built) and at the strongest
SPLIT_KEYS = {"train": 0, "test": 1}


def blur_radius(level: int, levels: int) -> float:
    """Gaussian blur radius in pixels at ``level`` of ``levels``."""
    return MAX_BLUR_RADIUS * level / levels


def noise_std(level: int, levels: int) -> float:
    """Noise standard deviation in grey levels (0..255) at ``level`` of ``levels``."""
    return 255.0 * MAX_NOISE_STD * level / levels


def jpeg_quality(level: int, levels: int) -> int:
    """PIL JPEG quality (1..95) at ``level`` of ``levels``: geometric from 50 to 2."""
    high, low = JPEG_QUALITY_RANGE
    return max(low, round(high * (low / high) ** (level / levels)))


def quality_score(level: int, levels: int) -> float:
    """The image's score: 1 - level / levels (1 = pristine, 0 = strongest level)."""
    return (levels - level) / levels  # not 1 - level/levels: 0.2, not 0.19999...


def degrade(
    image: np.ndarray, distortion: str, level: int, levels: int, noise_key: tuple[int, ...]
) -> np.ndarray:
    """``image`` (uint8, H x W grey) degraded by ``distortion`` at ``level``; uint8."""
    if distortion == "blur":
        picture = Image.fromarray(image, mode="L")
        blurred = picture.filter(ImageFilter.GaussianBlur(blur_radius(level, levels)))
        return np.asarray(blurred, dtype=np.uint8)
    if distortion == "noise":
        rng = np.random.default_rng(list(noise_key))
        noisy = image.astype(np.float64) + rng.normal(0.0, noise_std(level, levels), image.shape)
        return np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    if distortion == "jpeg":
        encoded = io.BytesIO()
        Image.fromarray(image, mode="L").save(
            encoded, format="JPEG", quality=jpeg_quality(level, levels)
        )
        encoded.seek(0)
        with Image.open(encoded) as decoded:
            return np.asarray(decoded.convert("L"), dtype=np.uint8)
    raise BuildError(f"distortion {distortion!r} (allowed: {', '.join(DISTORTIONS)})")


@functools.lru_cache(maxsize=2)
def read_fashion_mnist(data: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST's ``split`` ("train" or "test") images (N, 28, 28) and labels (N,),
    read-only (kept for the next build in the same process)."""
    prefix = "train" if split == "train" else "t10k"
    found = {}
    for kind, suffix in (("images", "idx3-ubyte"), ("labels", "idx1-ubyte")):
        candidates = [data / f"{prefix}-{kind}-{suffix}{gz}" for gz in (".gz", "")]
        path = next((c for c in candidates if c.is_file()), None)
        if path is None:
            raise BuildError(
                f"--data {data}: no {candidates[0].name} (allowed: a folder with Fashion-MNIST's "
                "four IDX files, e.g. Debian's dataset-fashion-mnist at /usr/share/datasets/"
                "fashion-mnist)"
            )
        try:
            found[kind] = read_idx(path).numpy()
        except (OSError, ValueError, EOFError) as err:
            raise BuildError(f"--data {path}: not readable as IDX ({err})") from None
    images, labels = found["images"], found["labels"]
    if images.ndim != 3 or images.dtype != np.uint8 or len(labels) != len(images):
        raise BuildError(
            f"--data {data}: {prefix} images of shape {images.shape} with {len(labels)} labels "
            "(allowed: Fashion-MNIST's N x 28 x 28 uint8 images and N labels)"
        )
    images.setflags(write=False)
    labels.setflags(write=False)
    return images, labels


def party_of(rule: str, distortion: str, label: int) -> str | None:
    """The party folder of an image, by ``rule``; None for the pool."""
    if rule == "distortion":
        return distortion
    if rule == "class":
        return FMNIST_CLASSES[label]
    return None


def plan_split(
    images: np.ndarray, labels: np.ndarray, count: int, split: str, args: argparse.Namespace
) -> list[dict]:
    """One entry per image to write (source, distortion, level, file path, score, ...)."""
    if count > len(images):
        raise BuildError(
            f"--{split}-sources {count} (allowed: at most {len(images)}, Fashion-MNIST's "
            f"{split} images)"
        )
    draw = np.random.default_rng([args.seed, SPLIT_KEYS[split]])
    sources = np.sort(draw.choice(len(images), size=count, replace=False))
    entries = []
    for index in sources.tolist():
        label = int(labels[index])
        for distortion in DISTORTIONS:
            for level in range(1, args.levels + 1):
                name = f"{index:05d}-{distortion}-L{level}.png"
                party = party_of(args.parties, distortion, label) if split == "train" else None
                folder = f"{split}/{party}" if party is not None else split
                entries.append(
                    {
                        "path": f"{folder}/{name}",
                        "split": split,
                        "source": index,
                        "distortion": distortion,
                        "level": level,
                        "score": quality_score(level, args.levels),
                    }
                )
    return entries


def check_parties(entries: list[dict], rule: str) -> None:
    """Every party folder holds at least MIN_PARTY_IMAGES images (the reader's rule)."""
    if rule == "pool":
        return
    names = DISTORTIONS if rule == "distortion" else FMNIST_CLASSES
    sizes = {name: 0 for name in names}
    for entry in entries:
        if entry["split"] == "train":
            sizes[entry["path"].split("/")[1]] += 1
    for name, size in sizes.items():
        if size < MIN_PARTY_IMAGES:
            raise BuildError(
                f"--train-sources: party {name} would hold {size} images (allowed: at least "
                f"{MIN_PARTY_IMAGES} per party; draw more sources)"
            )


def scores_csv(entries: list[dict], levels: int) -> str:
    """The scores file's text: path, score, then each distortion's level fraction."""
    lines = [",".join(("path", "score", *DISTORTIONS))]
    for entry in sorted(entries, key=lambda e: e["path"]):
        fractions = [
            f"{entry['level'] / levels:.6g}" if d == entry["distortion"] else "0"
            for d in DISTORTIONS
        ]
        lines.append(",".join((entry["path"], f"{entry['score']:.6g}", *fractions)))
    return "\n".join(lines) + "\n"


def write_tree(staging: Path, entries: list[dict], sources: dict, args: argparse.Namespace) -> None:
    """The images, scores.csv and build.json under ``staging``."""
    for entry in entries:
        image = sources[entry["split"]][entry["source"]]
        key = (args.seed, SPLIT_KEYS[entry["split"]], entry["source"], entry["level"])
        degraded = degrade(image, entry["distortion"], entry["level"], args.levels, key)
        target = staging / entry["path"]
        target.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(degraded, mode="L").save(target, format="PNG")
    (staging / SCORES_FILE).write_text(scores_csv(entries, args.levels), encoding="utf-8")
    settings = {
        "source": "Fashion-MNIST",
        "train_sources": args.train_sources,
        "test_sources": args.test_sources,
        "levels": args.levels,
        "parties": args.parties,
        "seed": args.seed,
        "score": "1 - level / levels",
        "per_level": {
            str(k): {
                "score": quality_score(k, args.levels),
                "blur_radius_px": blur_radius(k, args.levels),
                "noise_std_grey_levels": noise_std(k, args.levels),
                "jpeg_quality": jpeg_quality(k, args.levels),
            }
            for k in range(1, args.levels + 1)
        },
    }
    (staging / "build.json").write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")


def build(args: argparse.Namespace) -> int:
    """Check everything, build into a temporary folder, rename it to ``args.out``;
    returns the number of images written."""
    out = new_folder(args.out)
    data = Path(args.data).expanduser()
    sources, entries = {}, []
    for split, count in (("train", args.train_sources), ("test", args.test_sources)):
        images, labels = read_fashion_mnist(data, split)
        sources[split] = images
        entries += plan_split(images, labels, count, split, args)
    check_parties(entries, args.parties)
    with atomic_folder(out) as staging:
        write_tree(staging, entries, sources, args)
    return len(entries)


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} (allowed: {low} to {high})")
        return value

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(
        prog="build_iqa_task.py",
        description="Build an image-quality-assessment task (a score-task folder with "
        "scores.csv) from real Fashion-MNIST images degraded by blur, noise and JPEG at "
        "known levels; score = 1 - level/levels.",
    )
    parser.add_argument("out", metavar="OUT", help="the folder to create (must not exist)")
    parser.add_argument(
        "--train-sources",
        type=_bounded_int(1, 60000),
        default=200,
        help="training source images drawn from Fashion-MNIST's training set (default 200)",
    )
    parser.add_argument(
        "--test-sources",
        type=_bounded_int(1, 10000),
        default=50,
        help="test source images drawn from Fashion-MNIST's test set (default 50; at least 1: "
        "see the module docstring)",
    )
    parser.add_argument(
        "--levels",
        type=_bounded_int(1, 20),
        default=5,
        help="distortion levels per distortion, 1..L (default 5)",
    )
    parser.add_argument(
        "--parties",
        choices=PARTY_RULES,
        default="distortion",
        help="train/ folders: one party per distortion (blur, noise, jpeg), per source "
        "class, or one pool (default distortion)",
    )
    parser.add_argument("--seed", type=_bounded_int(0, 2**31 - 1), default=0, help="default 0")
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help=f"folder with Fashion-MNIST's IDX files (default {DEFAULT_DATA})",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    return run_build(parse_args(argv), build, f"images and {SCORES_FILE}")


if __name__ == "__main__":
    sys.exit(main())
