"""The same federated math written the plain way: the yardstick fedsweep must beat.

What a first implementation (and the MOON paper's public code) does:

* a :class:`torch.utils.data.Dataset` per party that hands out one PIL image at a time,
  as torchvision's own datasets do, through torchvision's per-sample transforms — for
  CIFAR-shaped data RandomCrop 32 with reflect padding 4, RandomHorizontalFlip,
  ToTensor, Normalize (the reference code's chain without its extra tensor round trip
  and no-op ColorJitter; both run at the same rate); for grey-scale data ToTensor,
  Normalize;
* a :class:`~torch.utils.data.DataLoader` (batch 64, shuffle, drop_last, no worker
  processes: one trial per core owns one core);
* the frozen global model and the party's previous model moved ``.to(device)`` every
  batch; FedProx's proximal term (mu/2)·||w − w_global||² built in autograd from the
  global parameters, also moved every batch; ``loss.item()`` logged every batch;
* after aggregation, the global model evaluated on the full training set and the full
  test set (normalise only) every round.

* stock torch layers and optimizer: ``nn.MaxPool2d`` in place of fedsweep's 2x2
  pooling kernel and ``torch.optim.SGD`` with its default (foreach) step in place of the
  fused one.  The pooling gives the same numbers bit for bit; the two SGD steps apply
  the same update but round differently in the last float bit
  (tests/test_fast_kernels.py).

The math is fedsweep's: the same model (:func:`federated.models.build_model`, its pooling
swapped as above), the same partition, SGD settings, losses (MOON's contrastive loss from
:mod:`federated.algorithms.moon`) and weighted average.  Every party starts holding a
previous model (the initial weights), as in any round after the first, so no warm-up
round is needed for MOON's steady-state cost.  Training samples per second = samples
trained / training seconds (local training and aggregation); the round time adds the
evaluations.
"""

from __future__ import annotations

import copy
import statistics
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch import nn
from torch.utils.data import DataLoader, Dataset
from torchvision import transforms

from benchmarks.cases import BATCH_SIZE, MODEL, Case, dataset
from benchmarks.memory import (
    device_peak_bytes,
    peak_rss_bytes,
    reset_device_peak,
    reset_peak_rss,
    rss_bytes,
)
from federated.algorithms.moon import moon_contrastive_loss
from federated.config.run_config import RunConfig
from federated.data import DatasetSpec
from federated.heterogeneity.partition import partition_for_run
from federated.models import FedConModel, build_model
from federated.models.pooling import MaxPool2x2
from federated.runtime.device import resolve_device
from federated.runtime.seeding import numpy_stream, stream_seed

PAD = 4


class ImageDataset(Dataset):
    """uint8 images held as HWC numpy arrays (HW for one channel), handed out as PIL
    images through ``transform``, as torchvision's CIFAR and MNIST datasets do."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, transform) -> None:
        hwc = images.permute(0, 2, 3, 1).numpy()
        self.images = hwc[..., 0] if hwc.shape[-1] == 1 else hwc
        self.labels = labels.numpy()
        self.transform = transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.transform(Image.fromarray(self.images[index])), int(self.labels[index])


def train_transform(spec: DatasetSpec) -> transforms.Compose:
    normalize = transforms.Normalize(spec.mean, spec.std)
    if not spec.crop_flip:
        return transforms.Compose([transforms.ToTensor(), normalize])
    return transforms.Compose(
        [
            transforms.RandomCrop((spec.height, spec.width), padding=PAD, padding_mode="reflect"),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            normalize,
        ]
    )


def test_transform(spec: DatasetSpec) -> transforms.Compose:
    return transforms.Compose([transforms.ToTensor(), transforms.Normalize(spec.mean, spec.std)])


def with_stock_pooling(net: nn.Module) -> nn.Module:
    """``net`` with every fedsweep :class:`MaxPool2x2` replaced by ``nn.MaxPool2d(2)``."""
    for module in list(net.modules()):
        for name, child in module.named_children():
            if isinstance(child, MaxPool2x2):
                setattr(module, name, nn.MaxPool2d(2))
    return net


def local_train(
    net: FedConModel,
    global_net: FedConModel,
    previous_net: FedConModel | None,
    loader: DataLoader,
    config: RunConfig,
    device: torch.device,
) -> int:
    """E epochs of SGD on one party's loader; returns the samples trained."""
    optimizer = torch.optim.SGD(
        net.parameters(), lr=config.lr, momentum=config.momentum, weight_decay=config.weight_decay
    )
    net.train()
    samples = 0
    losses = []
    for _ in range(config.local_epochs):
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            out = net(x)
            loss = F.cross_entropy(out.logits, y)
            if config.algorithm == "moon" and previous_net is not None:
                global_net.to(device)
                previous_net.to(device)
                with torch.no_grad():
                    z_glob = global_net.project(x)
                    z_prev = previous_net.project(x)
                method = config.resolved().algorithm_params
                con = moon_contrastive_loss(out.projection, z_glob, [z_prev], method.tau)
                loss = loss + method.mu * con
            elif config.algorithm == "fedprox":
                global_net.to(device)
                prox = sum(
                    (w - w_g).norm() ** 2
                    for w, w_g in zip(net.parameters(), global_net.parameters())
                )
                loss = loss + config.resolved().algorithm_params.mu / 2 * prox
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            samples += len(y)
    return samples


@torch.no_grad()
def accuracy(net: FedConModel, loader: DataLoader, device: torch.device) -> float:
    net.eval()
    correct = total = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        correct += (net(x).logits.argmax(1) == y).sum().item()
        total += len(y)
    return correct / total


def average(states: list[dict[str, torch.Tensor]], weights: list[float]) -> dict:
    out = {}
    for key, first in states[0].items():
        if first.is_floating_point():
            out[key] = sum(w * s[key] for s, w in zip(states, weights))
        else:
            out[key] = first.clone()
    return out


class StraightforwardRun:
    """The plain loop's state: global model, party datasets, previous models.

    ``steady_state`` gives every party a previous model from the start (the initial
    weights), so MOON's first round already pays for its contrastive term; without it
    the first round skips the term, as fedsweep's does."""

    def __init__(self, case: Case, steady_state: bool = True) -> None:
        self.config = config = case.run_config()
        self.device = resolve_device(case.device)
        data = dataset(case.dataset)
        spec = data.spec
        labels = data.train_y.numpy()
        parts = partition_for_run(labels, config)
        train, test = train_transform(spec), test_transform(spec)
        self.party_sets = [ImageDataset(data.train_x[p], data.train_y[p], train) for p in parts]
        used = np.concatenate(parts)
        self.train_eval_set = ImageDataset(data.train_x[used], data.train_y[used], test)
        n_test = config.n_test
        self.test_set = ImageDataset(data.test_x[:n_test], data.test_y[:n_test], test)
        self.sampling = numpy_stream(config.seed, "sampling")

        # fedsweep's initial weights: the same stream of the same seed
        torch.manual_seed(stream_seed(config.seed, "init"))
        self.global_net = with_stock_pooling(
            build_model(MODEL, spec, config.out_dim, config.projection_head)
        )
        self.global_net.to(self.device)
        self.nets = [copy.deepcopy(self.global_net) for _ in parts]
        # previous models are kept on the CPU, as the reference code keeps them
        self.previous: list[FedConModel | None] = [
            copy.deepcopy(self.global_net).cpu() if steady_state else None for _ in parts
        ]

    def loader(self, ds: ImageDataset, train: bool) -> DataLoader:
        # a party smaller than one batch trains on all it has, as fedsweep's loop does
        drop_last = train and len(ds) >= BATCH_SIZE
        return DataLoader(ds, batch_size=BATCH_SIZE, shuffle=train, drop_last=drop_last)

    def round(self) -> dict[str, float]:
        config = self.config
        start = time.perf_counter()
        n = config.n_parties
        k = config.parties_per_round
        drawn = list(range(n)) if k >= n else sorted(self.sampling.choice(n, k, replace=False))
        self.global_net.eval()
        for p in self.global_net.parameters():
            p.requires_grad = False
        samples = 0
        for party in drawn:
            net = self.nets[party]
            net.load_state_dict(self.global_net.state_dict())
            previous = self.previous[party] if config.algorithm == "moon" else None
            if previous is not None:
                previous.eval()
                for p in previous.parameters():
                    p.requires_grad = False
            loader = self.loader(self.party_sets[party], train=True)
            samples += local_train(net, self.global_net, previous, loader, config, self.device)
            if config.algorithm == "moon":
                self.previous[party] = copy.deepcopy(net).cpu()
        sizes = [len(self.party_sets[i]) for i in drawn]
        weights = [s / sum(sizes) for s in sizes]
        self.global_net.load_state_dict(
            average([self.nets[i].state_dict() for i in drawn], weights)
        )
        train_seconds = time.perf_counter() - start

        eval_start = time.perf_counter()
        train_acc = accuracy(self.global_net, self.loader(self.train_eval_set, False), self.device)
        test_acc = accuracy(self.global_net, self.loader(self.test_set, False), self.device)
        eval_seconds = time.perf_counter() - eval_start
        return {
            "round_s": time.perf_counter() - start,
            "train_s": train_seconds,
            "eval_s": eval_seconds,
            "samples_round": samples,
            "train_acc": train_acc,
            "test_acc": test_acc,
        }


def measure_straightforward(case: Case) -> dict[str, Any]:
    """Median per-round timings (s) and training samples/s of the plain loop (no warm-up
    round: its parties start in the steady state)."""
    torch.set_num_threads(case.threads)
    dataset(case.dataset)  # loading is not part of a round
    device = resolve_device(case.device)
    reset_peak_rss()
    reset_device_peak(device)
    rss_data = rss_bytes()
    run = StraightforwardRun(case)
    rows = [run.round() for _ in range(case.rounds)]

    def median(key: str) -> float:
        return float(statistics.median(row[key] for row in rows))

    return {
        "round_s": median("round_s"),
        "train_s": median("train_s"),
        "eval_s": median("eval_s"),
        "samples_round": round(median("samples_round")),
        "samples_per_s": float(statistics.median(r["samples_round"] / r["train_s"] for r in rows)),
        "rounds_measured": len(rows),
        "test_acc": rows[-1]["test_acc"],
        "rss_data_bytes": rss_data,
        "peak_rss_bytes": peak_rss_bytes(),
        "device_peak_bytes": device_peak_bytes(device),
    }
