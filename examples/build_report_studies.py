"""The data and the sweeps of the report contract's four re-run studies
(docs/results/report-contract.md), built offline from real pixels.

``OUT/coco``: the Street-like tree of ``examples/build_street_task.py`` (real photographs,
real Fashion-MNIST objects, exact boxes) rewritten as a COCO folder
(``annotations/train.json``, ``annotations/test.json``, ``[x, y, w, h]`` boxes, category
ids 10-16), each training image carrying its own ``camera`` field: parties by camera.

``OUT/writers``: a FEMNIST-like Hugging Face ``save_to_disk`` folder of real Fashion-MNIST
training images with FEMNIST's columns (``image``, ``character``, ``writer_id``): 8
writers of 150 ... 50 images, writer w drawing only the classes w, w+1, w+2 (mod 10), a
writer-block label skew (study file: ``examples/personalised_writers.toml``).

``OUT/seg``: the segmentation folder of ``examples/build_segmentation_task.py`` (real
Fashion-MNIST objects pasted on mosaics of other real Fashion-MNIST items, exact masks,
32 x 32, 240 training images from 4 sites, 60 test images), parties by ``site``.

The DP sweep needs no folder: the built-in ``privacy`` study (DP-FedAvg's noise
multiplier x Dirichlet beta x method, 18 trials) on Fashion-MNIST at the smoke budget,
with 5 rounds on 10% of the training data (at the budget's 2 rounds on 5% every cell
read 8.9%, one class).

Each study is small (a few minutes on two cores, one trial at a time): the point is that
the reports read right, not what they find.  The sweeps' commands, printed at the end
(:func:`study_commands`), write under ``results/``; ``OUT`` must be ``data`` for the
personalised study, whose file names ``hf:data/writers``.

Usage::

    python examples/build_report_studies.py data        # about 45 s on two shared cores
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WRITER_SIZES = (150, 120, 100, 90, 80, 70, 60, 50)  # images per writer
CLASSES_PER_WRITER = 3
CATEGORY_BASE = 10  # COCO category ids need not start at 0 or 1: the reader maps them


def build_coco(out: Path, street: Path) -> None:
    """``street`` (built here if missing) as a COCO folder at ``out``."""
    if not street.exists():
        builder = [sys.executable, str(ROOT / "examples" / "build_street_task.py"), str(street)]
        sizes = ["--size", "64", "--train-images", "200", "--test-images", "50"]
        cameras = ["--cameras", "6", "--unseen-cameras", "0"]
        subprocess.run([*builder, *sizes, *cameras], check=True)
    (out / "annotations").mkdir(parents=True)
    (out / "images").symlink_to(street.resolve() / "Images")
    train = json.loads((street / "train_label.json").read_text())
    test = json.loads((street / "test_label.json").read_text())
    names = sorted({item["class"] for entry in train + test for item in entry["items"]})
    categories = [{"id": CATEGORY_BASE + k, "name": n} for k, n in enumerate(names)]
    next_id = iter(range(1, 1 << 31))

    def coco(entries: list[dict], cameras: bool) -> dict:
        images, annotations = [], []
        for entry in entries:
            image_id = int(entry["image_id"])
            image = {"id": image_id, "file_name": f"{entry['image_id']}.jpg"}
            image.update(width=64, height=64)
            if cameras:
                image["camera"] = f"cam{entry['device2_id']}"
            images.append(image)
            for item in entry["items"]:
                x1, y1, x2, y2 = item["bbox"]
                annotations.append(
                    {
                        "id": next(next_id),
                        "image_id": image_id,
                        "bbox": [x1, y1, x2 - x1, y2 - y1],
                        "category_id": CATEGORY_BASE + names.index(item["class"]),
                    }
                )
        return {"images": images, "annotations": annotations, "categories": categories}

    (out / "annotations" / "train.json").write_text(json.dumps(coco(train, True)))
    (out / "annotations" / "test.json").write_text(json.dumps(coco(test, False)))


def build_segmentation(out: Path) -> None:
    """The segmentation folder at ``out``: 4 sites of unequal size, 240 + 60 images."""
    builder = [sys.executable, str(ROOT / "examples" / "build_segmentation_task.py"), str(out)]
    subprocess.run([*builder, "--sites", "4"], check=True)


def study_commands(data: Path) -> dict[str, list[str]]:
    """Each re-run study's ``python -m study.sweep`` arguments on the folders in ``data``
    (the argument list after ``-m study.sweep``), by sweep name."""
    quiet = ["--quiet", "--max-concurrent", "1"]
    return {
        "det": [
            *("--vary", "algorithm=fedavg,fedprox,moon", "--vary", "lr=loguniform:0.005:0.05"),
            *("--search", "optuna", "--num-samples", "6", "--dataset", f"folder:{data}/coco"),
            *("--set", "partition=natural", "--set", "partition_by=camera", "--set", "rounds=8"),
            *("--set", "data_fraction=1.0", "--set", "test_fraction=1.0", "--rerun-best", "2"),
            *("--set", "party_test_fraction=0.2", "--budget", "smoke", "--name", "det", *quiet),
        ],
        "pers": [
            "examples/personalised_writers.toml",
            *("--name", "pers", "--seeds", "2", "--set", "rounds=10", "--set", "lr=0.05", *quiet),
        ],
        "seg": [
            *("--vary", "algorithm=fedavg,fedprox,moon", "--dataset", f"folder:{data}/seg"),
            *("--set", "partition=natural", "--set", "partition_by=site", "--set", "rounds=6"),
            *("--set", "local_epochs=1", "--set", "batch_size=8", "--set", "lr=0.05"),
            *("--set", "party_test_fraction=0.2"),
            *("--set", "data_fraction=1.0", "--set", "test_fraction=1.0", "--seeds", "2"),
            *("--name", "seg", *quiet),
        ],
        "dp": [
            *("privacy", "--budget", "smoke", "--set", "rounds=5", "--set", "data_fraction=0.1"),
            *("--name", "dp", *quiet),
        ],
    }


def build_writers(out: Path, seed: int) -> None:
    """The writer-block Fashion-MNIST folder at ``out`` (images drawn with ``seed``)."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, Value

    sys.path.insert(0, str(ROOT))
    from federated.data.loading import load_dataset

    fmnist = load_dataset("fmnist")
    rng = np.random.default_rng(seed)
    labels = fmnist.train_y.numpy()
    rows: dict[str, list] = {"image": [], "character": [], "writer_id": []}
    for writer, size in enumerate(WRITER_SIZES):
        block = [(writer + k) % 10 for k in range(CLASSES_PER_WRITER)]
        pool = np.flatnonzero(np.isin(labels, block))
        for i in rng.choice(pool, size, replace=False):
            rows["image"].append(fmnist.train_x[i, 0].numpy())
            rows["character"].append(int(labels[i]))
            rows["writer_id"].append(f"w{writer:02d}")
    features = Features(
        {
            "image": Image(),
            "character": ClassLabel(names=[f"class{k}" for k in range(10)]),
            "writer_id": Value("string"),
        }
    )
    DatasetDict({"train": Dataset.from_dict(rows, features=features)}).save_to_disk(str(out))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="folder to create (coco/, writers/, street/, seg/)")
    parser.add_argument("--seed", type=int, default=0, help="the writers' image draw (0)")
    args = parser.parse_args(argv)
    if args.out.exists():
        print(f"error: {args.out}: already exists (allowed: a new folder)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True)
    build_coco(args.out / "coco", args.out / "street")
    build_writers(args.out / "writers", args.seed)
    build_segmentation(args.out / "seg")
    print(f"wrote {args.out / 'coco'}, {args.out / 'writers'} and {args.out / 'seg'}; the sweeps:")
    for argv in study_commands(args.out).values():
        print(" ".join(["OMP_NUM_THREADS=1", "python", "-m", "study.sweep", *argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
