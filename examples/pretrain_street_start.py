"""Train the detector start shipped as ``init=fedsweep:street-fcos-tiny``, centrally.

    python examples/build_street_task.py /tmp/street-source --seed 101 --size 64 \\
        --train-images 240 --test-images 60
    python examples/pretrain_street_start.py /tmp/street-source     # rewrites the shipped file
    python examples/pretrain_street_start.py /tmp/street-source --out /tmp/start.pt

The source task is a Street-like tree built with another seed than the study's: other
cameras (other crops, lighting and class mixes of the same three photographs) and other
Fashion-MNIST items of the same seven classes.  The model is fedsweep's ``fcos-tiny``
with its projection head (out_dim 256), built exactly as a federated run builds it, so
the saved ``state_dict()`` fits a run with the default detector on any Street-like tree
(its layers do not depend on the image size).  It plays the part ImageNet weights play
in the Street paper (a start learnt on other images) but is much closer to the target:
it has seen these classes on these photographs, so the gain it gives is an upper end of
what a generic start would give (docs/detection.md says so beside the study).

Trained on the source tree's training images only; its test images' mAP@0.5 is printed as
a check.  CPU, one thread, seed 0: the file is the same each time on one machine.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from federated.data import Augmenter, load_dataset  # noqa: E402
from federated.evaluation.scoring import evaluate  # noqa: E402
from federated.models import build_model  # noqa: E402
from federated.models.pretrained_start import SHIPPED_FOLDER  # noqa: E402
from federated.runtime.atomic_file import atomic_open  # noqa: E402
from federated.tasks.detection.task import Detection  # noqa: E402

SHIPPED = SHIPPED_FOLDER / "street-fcos-tiny.pt"


def train_start(
    source: Path, epochs: int, batch_size: int, lr: float, seed: int
) -> tuple[dict[str, torch.Tensor], float]:
    """``fcos-tiny`` trained on the tree at ``source``; returns its state and the
    source's test mAP@0.5."""
    data = load_dataset(f"folder:{source}")
    spec = data.spec
    if spec.task != "detection":
        raise SystemExit(f"error: {source} is not a detection folder")
    augmenter = Augmenter(spec, torch.device("cpu"))
    torch.manual_seed(seed)
    model = build_model("fcos-tiny", spec)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-5)
    order = torch.Generator().manual_seed(seed)
    n = len(data.train_y)
    model.train()
    for epoch in range(epochs):
        permutation = torch.randperm(n, generator=order)
        total = 0.0
        for start in range(0, n - batch_size + 1, batch_size):
            rows = permutation[start : start + batch_size]
            x = augmenter.normalize(data.train_x[rows])
            loss = model(x, data.train_y[rows].to_dicts()).logits.sum()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch + 1}: training loss {total / (n // batch_size):.4f}", flush=True)
    task = Detection(Detection.Params.build({}), spec)
    scores = evaluate(model, data.test_x, data.test_y, augmenter, 64, task.accumulator())
    return model.state_dict(), scores.values["map50"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a Street-like tree (build_street_task.py)")
    parser.add_argument("--out", type=Path, default=SHIPPED, help="file to write")
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--lr", type=float, default=0.02)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()
    state, map50 = train_start(args.source, args.epochs, args.batch_size, args.lr, args.seed)
    with atomic_open(args.out, "wb") as fh:
        torch.save(state, fh)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(
        f"wrote {args.out} ({args.out.stat().st_size:,} bytes, sha256 {digest}); "
        f"source test mAP@0.5 {map50:.4f}; {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
