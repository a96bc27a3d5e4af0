"""Train the start shipped as ``init=fedsweep:fmnist-0to4-simple-cnn``, centrally.

    python examples/pretrain_start.py                       # rewrites the shipped file
    python examples/pretrain_start.py --out /tmp/start.pt   # anywhere else

The source task is half of real Fashion-MNIST: the training images of classes 0-4
(T-shirt, trouser, pullover, dress, coat; 30,000 images), a 5-way classifier.  The model
is fedsweep's ``simple-cnn`` with its projection head (out_dim 256), built exactly as a
federated run builds it, so the saved ``state_dict()`` fits a run on ``fmnist`` with the
default model: the encoder and projection head start from it; the output layer (5
classes here, 10 there) differs in shape and starts fresh, which the run says in one
line.  No test image is used for training; the source task's test accuracy (classes 0-4
of the test set) is printed as a check.

Why this start (no MNIST is on this machine offline): it is real data the project trains
itself, and the federated task then differs from it the way the slides' setting does —
new classes on top of features learnt elsewhere, with each party holding few images.
Unlike ImageNet-to-street-cameras, the start has seen *training images* of five of the
ten target classes (never test images); docs/pretrained-starts.md says what this means
for the study's numbers.

CPU, one thread, seed 0: the file is the same each time on one machine.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(ROOT))

from federated.data import Augmenter, load_dataset  # noqa: E402
from federated.models import build_model  # noqa: E402
from federated.models.pretrained_start import SHIPPED_FOLDER  # noqa: E402
from federated.runtime.atomic_file import atomic_open  # noqa: E402

SOURCE_CLASSES = (0, 1, 2, 3, 4)
SHIPPED = SHIPPED_FOLDER / "fmnist-0to4-simple-cnn.pt"


def train_start(
    epochs: int, batch_size: int, lr: float, seed: int, data_root: str | None
) -> tuple[dict[str, torch.Tensor], float]:
    """The trained model's state dict and its accuracy on the source classes' test images."""
    data = load_dataset("fmnist", data_root)
    spec = data.spec
    source = torch.tensor(SOURCE_CLASSES)
    train = torch.isin(data.train_y, source)
    test = torch.isin(data.test_y, source)
    train_x, train_y = data.train_x[train], data.train_y[train]
    test_x, test_y = data.test_x[test], data.test_y[test]
    device = torch.device("cpu")
    augmenter = Augmenter(spec, device)

    torch.manual_seed(seed)
    model = build_model("simple-cnn", spec_with_classes(spec, len(SOURCE_CLASSES)))
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-5)
    order = torch.Generator().manual_seed(seed)
    model.train()
    for epoch in range(epochs):
        permutation = torch.randperm(len(train_y), generator=order)
        total = 0.0
        for start in range(0, len(permutation), batch_size):
            rows = permutation[start : start + batch_size]
            logits = model(augmenter.normalize(train_x[rows])).logits
            loss = F.cross_entropy(logits, train_y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(rows)
        print(f"epoch {epoch + 1}: training loss {total / len(train_y):.4f}", flush=True)
    model.eval()
    with torch.no_grad():
        predicted = torch.cat(
            [
                model(augmenter.normalize(test_x[i : i + 1000])).logits.argmax(1)
                for i in range(0, len(test_y), 1000)
            ]
        )
    return model.state_dict(), float((predicted == test_y).float().mean())


def spec_with_classes(spec, n_classes: int):
    """Fashion-MNIST's spec with the source task's class count."""
    from dataclasses import replace

    return replace(spec, n_classes=n_classes, class_names=())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SHIPPED, help="file to write")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data-root", default=None, help="fedsweep's data folder")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()
    state, accuracy = train_start(args.epochs, args.batch_size, args.lr, args.seed, args.data_root)
    with atomic_open(args.out, "wb") as fh:
        torch.save(state, fh)
    digest = hashlib.sha256(args.out.read_bytes()).hexdigest()
    print(
        f"wrote {args.out} ({args.out.stat().st_size:,} bytes, sha256 {digest}); "
        f"test accuracy on classes 0-4: {accuracy:.4f}; {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
