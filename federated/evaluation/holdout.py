"""Held-out data: what each party keeps back from training to validate and to test on.

Select on validation, report on test (docs/validation.md).  After the partition is drawn,
exactly as without hold-out, each party's samples are split three ways:

- **validation** (``val_fraction``, ``val_split="party"``): ``max(1, round(f * n_i))`` of
  party i's own samples, stratified by class (largest-remainder quotas over the classes
  the party holds: a party with fewer held-out samples than classes gets one from each
  of its largest classes' turns);
- **local test** (``party_test_fraction``): the same rule on what is left, the party's
  own test images for the per-party outcomes (they see input shift: natural folders,
  feature skew);
- **training**: the rest, in the partition's order.

``val_split="server"`` instead holds out one slice of the pool, ``max(1, round(f * n))``
samples stratified by class over every party's samples, which the server keeps
(Flower's centralised evaluation); parties lose the samples of theirs that fall in it.

Every draw comes from the run's ``validation`` stream, party by party in order, so the
partition, the initial weights and every other stream are the same with and without
hold-out, and a run without it equals one from before this module to the last bit.  The
test set is never touched.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from federated.data import ImageData
from federated.heterogeneity.partition import PartitionError
from federated.runtime.seeding import numpy_stream


@dataclass(frozen=True)
class HeldOut:
    """Per-party index arrays into the dataset's full training set.

    ``train[i]``, ``val[i]``, ``local_test[i]``: party i's training, validation and
    local test samples (the latter two empty when off); ``server_val``: the
    server-held validation slice (``None`` unless ``val_split="server"``)."""

    train: list[np.ndarray]
    val: list[np.ndarray]
    local_test: list[np.ndarray]
    server_val: np.ndarray | None = None


def held_out_count(size: int, share: float) -> int:
    """How many of ``size`` samples a ``share`` in [0, 1) holds out: none when the share
    is 0, else ``round(share * size)`` but at least one."""
    return 0 if share == 0.0 else max(1, round(share * size))


def stratified_pick(labels: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """A boolean mask choosing ``count`` of the samples with ``labels``, each class's
    share as close to its share of the samples as whole numbers allow (largest
    remainder; ties broken at random), the members of a class chosen at random."""
    mask = np.zeros(len(labels), dtype=bool)
    if count == 0:
        return mask
    classes, sizes = np.unique(labels, return_counts=True)
    exact = sizes * (count / len(labels))
    quota = np.floor(exact).astype(np.int64)
    short = count - int(quota.sum())
    if short:
        tie_break = rng.permutation(len(classes))
        # the largest remainders first; among equal remainders, the random order
        order = np.lexsort((tie_break, -(exact - quota)))
        quota[order[:short]] += 1
    for cls, take in zip(classes, quota):
        if take:
            members = np.flatnonzero(labels == cls)
            mask[rng.choice(members, size=int(take), replace=False)] = True
    return mask


def hold_out(
    partition: list[np.ndarray],
    labels: np.ndarray,
    seed: int,
    val_fraction: float,
    val_split: str,
    party_test_fraction: float,
) -> HeldOut:
    """Split each party of ``partition`` (indices into the training set, whose labels
    are ``labels``) as the module docstring says.  Raises :class:`PartitionError`
    naming the field when a party would be left with no sample to train on."""
    if val_fraction == 0.0 and party_test_fraction == 0.0:
        # one empty array for every party: 10⁵ parties would hold 10⁵ of them
        empty = [np.empty(0, dtype=np.int64)] * len(partition)
        return HeldOut(train=list(partition), val=empty, local_test=list(empty))
    rng = numpy_stream(seed, "validation")
    parts = [np.asarray(p, dtype=np.int64) for p in partition]
    server_val = None
    if val_fraction and val_split == "server":
        pool = np.concatenate(parts)
        chosen = stratified_pick(labels[pool], held_out_count(len(pool), val_fraction), rng)
        server_val = np.sort(pool[chosen])
        parts = [p[~np.isin(p, server_val)] for p in parts]
    train, val, local_test = [], [], []
    for party, idx in enumerate(parts):
        val_mask = np.zeros(len(idx), dtype=bool)
        if val_fraction and val_split == "party":
            val_mask = stratified_pick(labels[idx], held_out_count(len(idx), val_fraction), rng)
        rest = idx[~val_mask]
        test_mask = stratified_pick(
            labels[rest], held_out_count(len(rest), party_test_fraction), rng
        )
        if (~test_mask).sum() == 0:
            field = "party_test_fraction" if party_test_fraction else "val_fraction"
            value = party_test_fraction or val_fraction
            raise PartitionError(
                f"{field}={value:g} leaves party {party} ({len(partition[party])} "
                "sample(s)) no sample to train on (allowed: a smaller share, or more "
                "samples per party)"
            )
        val.append(idx[val_mask])
        local_test.append(rest[test_mask])
        train.append(rest[~test_mask])
    return HeldOut(train=train, val=val, local_test=local_test, server_val=server_val)


class PartySplit:
    """One kind of per-party samples (validation or local test) laid out party by party
    on the device: party i's rows are ``[offsets[i], offsets[i+1])`` of ``x`` and ``y``."""

    def __init__(self, data: ImageData, parts: list[np.ndarray], device: torch.device) -> None:
        self.sizes = [len(p) for p in parts]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64).tolist()
        order = torch.from_numpy(np.concatenate(parts).astype(np.int64))
        self.x = data.train_x[order].to(device)
        self.y = data.train_y[order].to(device)
        #: each row's party (int64, on the device): the segment sums' index
        self.owner = torch.repeat_interleave(
            torch.arange(len(parts)), torch.tensor(self.sizes, dtype=torch.long)
        ).to(device)

    @property
    def empty(self) -> bool:
        return not self.offsets[-1]
