"""``python -m benchmarks.femnist_scale``: the ``femnist_writers`` study at FEMNIST's real
size, offline, on a stand-in with FEMNIST's shape (issue 53).

    python -m benchmarks.femnist_scale --folder /tmp/femnist-like \
        --out docs/results/femnist-scale.json

The stand-in (built once into ``--folder``, a ``save_to_disk`` folder as ``hf:PATH``
reads it): :data:`WRITERS` writers (LEAF's FEMNIST: 3,597) with power-law sizes
(``10 + 432 x Lomax(3)``, mean ~226 images a writer, as FEMNIST's ~805,000 images over its
writers), FEMNIST's columns (``image``, ``character``, ``writer_id``), one split; the
images are Fashion-MNIST's 60,000 training images in turn (10 classes where FEMNIST has 62:
a systems check, not an accuracy one).  Then the built-in study runs on it, as a user
would with ``--set dataset=hf:PATH``: the whole data set (``data_fraction=1``), every
writer of 10 images or more a party candidate, the study's 200 writers drawn per seed,
its three participation rates, ``--budget smoke`` (2 rounds) with ``--set``
``algorithm=fedavg,scaffold``.  Reported: the stand-in's size, the sweep's wall time and
exit code, and per trial its rounds' ``round_seconds`` and the writers it drew.

Units: seconds, images, MiB.  The machine is shared: compare within one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from federated.data import load_dataset
from federated.runtime.cpu_name import cpu_model

WRITERS = 3_597


def writer_sizes(writers: int = WRITERS, seed: int = 0) -> np.ndarray:
    """Images per writer (module docstring); the first 3,597 are the same at any
    ``writers``."""
    rng = np.random.default_rng(seed)
    return (10 + 432 * rng.pareto(3.0, writers)).astype(np.int64)


def build_stand_in(folder: Path, writers: int = WRITERS) -> int:
    """Write the stand-in of ``writers`` writers into ``folder`` (unless one is there);
    returns its images (842,900 at FEMNIST's 3,597 writers)."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Image, Value

    sizes = writer_sizes(writers)
    total = int(sizes.sum())
    if (folder / "dataset_dict.json").is_file():
        return total
    fmnist = load_dataset("fmnist")
    writer_of = np.repeat([f"f{i:04d}" for i in range(writers)], sizes)
    np.random.default_rng(1).shuffle(writer_of)
    n_source = fmnist.train_x.shape[0]

    def rows():
        for i in range(total):
            k = i % n_source
            yield {
                "image": fmnist.train_x[k, 0].numpy(),
                "character": int(fmnist.train_y[k]),
                "writer_id": str(writer_of[i]),
            }

    features = Features(
        {
            "image": Image(),
            "character": ClassLabel(names=[f"class{k}" for k in range(10)]),
            "writer_id": Value("string"),
        }
    )
    train = Dataset.from_generator(rows, features=features)
    DatasetDict({"train": train}).save_to_disk(str(folder))
    return total


def trial_rows(trial: Path) -> list[dict[str, Any]]:
    lines = (trial / "result.json").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def trial_summary(trial: Path) -> dict[str, Any]:
    """A trial's method, participation and per-round seconds, parties and accuracy."""
    params = json.loads((trial / "params.json").read_text())
    rows = trial_rows(trial)
    return {
        "trial": trial.name,
        "algorithm": params["algorithm"],
        "sample_fraction": params["sample_fraction"],
        "round_seconds": [r["round_seconds"] for r in rows],
        "parties_this_round": [r["parties_this_round"] for r in rows],
        "test_acc": [r["test_acc"] for r in rows],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--folder", type=Path, required=True, help="the stand-in's folder")
    parser.add_argument("--storage", type=Path, default=Path("/tmp/femnist-scale-results"))
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    images = build_stand_in(args.folder.resolve())
    built = time.perf_counter() - start
    name = f"femnist-{int(time.time())}"
    cmd = [
        sys.executable, "-m", "study.sweep", "femnist_writers", "--budget", "smoke",
        "--set", f"dataset=hf:{args.folder.resolve()}", "--set", "data_fraction=1",
        "--set", "algorithm=fedavg,scaffold", "--storage-path", str(args.storage),
        "--name", name, "--quiet",
    ]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    sweep = args.storage / name
    trials = sorted(p for p in sweep.iterdir() if (p / "params.json").is_file())
    result = {
        "machine": cpu_model(),
        "writers": WRITERS,
        "images": images,
        "build_s": built,
        "sweep_s": wall,
        "exit": proc.returncode,
        "command": " ".join(cmd),
        "trials": [trial_summary(t) for t in trials],
        "tail": (proc.stdout + proc.stderr)[-2000:],
    }
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
