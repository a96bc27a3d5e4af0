"""Splitting a training set among parties: IID, Dirichlet label skew, k labels, quantity
skew, and natural (each party is its own folder of an image-folder dataset, or the rows
sharing a value of an ``hf:`` data set's ``partition_by`` column).

Each function takes the labels (or the sample count) and a numpy ``Generator``, and
returns one sorted int64 index array per party.  Given the same generator state they
are deterministic on every machine, so a partition depends only on (dataset, N, scheme,
beta, seed).  The rules follow the MOON reference code's ``partition_data``
(notes/reference-code-facts.md).
"""

from __future__ import annotations

import numpy as np

from federated.config.checks import MIN_PARTY_SAMPLES
from federated.config.run_config import RunConfig
from federated.data import ImageData
from federated.registry import load_method
from federated.runtime.seeding import numpy_stream

MAX_REDRAWS = 1000


class PartitionError(RuntimeError):
    """No partition satisfying the rule was found."""


def iid_partition(n_samples: int, n_parties: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle and split into ``n_parties`` near-equal parts."""
    order = rng.permutation(n_samples)
    return [np.sort(part) for part in np.array_split(order, n_parties)]


def dirichlet_partition(
    labels: np.ndarray,
    n_parties: int,
    beta: float,
    rng: np.random.Generator,
    min_size: int = MIN_PARTY_SAMPLES,
) -> list[np.ndarray]:
    """Label skew: each class is split among parties in proportions p ~ Dir_N(beta).

    As in the reference code, a party already holding at least ``n / n_parties`` samples
    gets no more of later classes, and the whole draw is repeated until every party
    holds at least ``min_size`` samples.
    """
    labels = np.asarray(labels)
    n = len(labels)
    classes = np.unique(labels)
    for _ in range(MAX_REDRAWS):
        parts: list[list[np.ndarray]] = [[] for _ in range(n_parties)]
        sizes = np.zeros(n_parties, dtype=np.int64)
        for k in classes:
            idx_k = np.flatnonzero(labels == k)
            rng.shuffle(idx_k)
            p = rng.dirichlet(np.full(n_parties, beta))
            p = p * (sizes < n / n_parties)
            p = p / p.sum()
            cuts = (np.cumsum(p) * len(idx_k)).astype(int)[:-1]
            for party, chunk in enumerate(np.split(idx_k, cuts)):
                parts[party].append(chunk)
                sizes[party] += len(chunk)
        if sizes.min() >= min_size:
            return [np.sort(np.concatenate(p)) for p in parts]
    raise PartitionError(
        f"Dirichlet partition: no draw gave all {n_parties} parties >= {min_size} samples in "
        f"{MAX_REDRAWS} tries (beta={beta}, {n} samples); use fewer parties or a larger beta"
    )


def labels_partition(
    labels: np.ndarray,
    n_parties: int,
    labels_per_party: int,
    rng: np.random.Generator,
) -> list[np.ndarray]:
    """#C=k: party i holds label ``i mod K`` plus ``k - 1`` other distinct random labels;
    each label's samples are split evenly among the parties that hold it."""
    labels = np.asarray(labels)
    n_classes = int(labels.max()) + 1
    holders: list[list[int]] = [[] for _ in range(n_classes)]
    for party in range(n_parties):
        chosen = [party % n_classes]
        while len(chosen) < labels_per_party:
            candidate = int(rng.integers(0, n_classes))
            if candidate not in chosen:
                chosen.append(candidate)
        for label in chosen:
            holders[label].append(party)
    parts: list[list[np.ndarray]] = [[] for _ in range(n_parties)]
    for label, owners in enumerate(holders):
        if not owners:
            continue
        idx = np.flatnonzero(labels == label)
        rng.shuffle(idx)
        for owner, chunk in zip(owners, np.array_split(idx, len(owners))):
            parts[owner].append(chunk)
    out = [np.sort(np.concatenate(p)) if p else np.empty(0, np.int64) for p in parts]
    if min(len(p) for p in out) == 0:
        raise PartitionError(
            f"labels partition: some party got no samples ({n_parties} parties, "
            f"{labels_per_party} labels each); use fewer parties"
        )
    return out


def quantity_skew_partition(
    n_samples: int,
    n_parties: int,
    beta: float,
    rng: np.random.Generator,
    min_size: int = MIN_PARTY_SAMPLES,
) -> list[np.ndarray]:
    """Quantity skew: IID labels, party sizes in proportions q ~ Dir_N(beta)."""
    order = rng.permutation(n_samples)
    for _ in range(MAX_REDRAWS):
        q = rng.dirichlet(np.full(n_parties, beta))
        if (q * n_samples).min() >= min_size:
            cuts = (np.cumsum(q) * n_samples).astype(int)[:-1]
            return [np.sort(part) for part in np.split(order, cuts)]
    raise PartitionError(
        f"quantity-skew partition: no draw gave all {n_parties} parties >= {min_size} samples "
        f"in {MAX_REDRAWS} tries (beta={beta}); use fewer parties or a larger beta"
    )


def make_partition(
    scheme: str,
    labels: np.ndarray,
    n_parties: int,
    rng: np.random.Generator,
    *,
    beta: float = 0.5,
    labels_per_party: int = 2,
) -> list[np.ndarray]:
    """Dispatch on ``scheme`` (``dirichlet``, ``iid``, ``labels``, ``quantity``; the
    natural partition is :func:`natural_partition`, which needs each sample's party)."""
    if scheme == "dirichlet":
        return dirichlet_partition(labels, n_parties, beta, rng)
    if scheme == "iid":
        return iid_partition(len(labels), n_parties, rng)
    if scheme == "labels":
        return labels_partition(labels, n_parties, labels_per_party, rng)
    if scheme == "quantity":
        return quantity_skew_partition(len(labels), n_parties, beta, rng)
    raise ValueError(
        f"unknown partition scheme {scheme!r} (known: dirichlet, iid, labels, quantity)"
    )


def natural_partition(
    parties: np.ndarray, n_parties: int, data_fraction: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Each party is the samples whose party id is its index; with ``data_fraction`` < 1
    each keeps round(fraction x its size) of them (at least one), drawn from ``rng``."""
    parties = np.asarray(parties)
    out = []
    for party in range(n_parties):
        idx = np.flatnonzero(parties == party)
        if data_fraction < 1:
            keep = max(1, round(data_fraction * len(idx)))
            idx = np.sort(rng.permutation(idx)[:keep])
        if len(idx) == 0:  # every image of its folder was held out as test data
            raise PartitionError(f"natural partition: party {party} has no training images")
        out.append(idx.astype(np.int64))
    return out


def natural_choice(n_found: int, config: RunConfig, rng: np.random.Generator) -> np.ndarray:
    """The natural parties a run keeps (sorted indices into the data's party names): all
    of them, or a seeded draw of ``config.n_parties`` (an ``hf:`` column's cap: FEMNIST
    has ~3,600 writers).  The draw is the first of the run's ``partition`` stream."""
    if config.n_parties >= n_found:
        return np.arange(n_found)
    return np.sort(rng.choice(n_found, size=config.n_parties, replace=False))


def natural_party_names(names: tuple[str, ...], config: RunConfig) -> list[str]:
    """The names of the parties :func:`partition_for_run` keeps, in party order."""
    chosen = natural_choice(len(names), config, numpy_stream(config.seed, "partition"))
    return [names[i] for i in chosen]


def partition_for_run(
    labels: np.ndarray, config: RunConfig, parties: np.ndarray | None = None
) -> list[np.ndarray]:
    """A run's partition: draw ``config.n_train`` training samples (all when that covers
    the set), then split them by ``config.partition``; returns per-party indices into the
    full training set.  ``partition="natural"`` instead groups the samples by
    ``parties`` (each sample's party id, from an image folder) and applies the data
    fraction within each party.

    Randomness comes from the run's ``partition`` stream, so the result depends only on
    (dataset, data fraction, N, scheme, beta or labels per party, seed)."""
    rng = numpy_stream(config.seed, "partition")
    if config.partition == "natural":
        if parties is None:
            raise PartitionError(
                f"partition=natural needs a dataset with one folder per party; "
                f"{config.dataset} has none"
            )
        parties = np.asarray(parties)
        chosen = natural_choice(int(parties.max()) + 1, config, rng)
        if len(chosen) < int(parties.max()) + 1:  # renumber the kept parties 0..n-1
            renumber = np.full(int(parties.max()) + 2, -1, dtype=np.int64)
            renumber[chosen] = np.arange(len(chosen))
            parties = renumber[parties]  # -1 (no party) indexes the last entry: stays -1
        return natural_partition(parties, config.n_parties, config.data_fraction, rng)
    n_all, n_used = len(labels), config.n_train
    subset = np.arange(n_all) if n_used >= n_all else np.sort(rng.permutation(n_all)[:n_used])
    parts = make_partition(
        config.partition,
        labels[subset],
        config.n_parties,
        rng,
        beta=config.beta,
        labels_per_party=config.labels_per_party,
    )
    return [subset[p] for p in parts]


def partition_labels(data: ImageData, task: str | None = None) -> tuple[np.ndarray, int]:
    """What partitions, hold-outs and class counts group the training samples by, and
    how many groups: the run's ``task`` says (default: the data's own task;
    :meth:`federated.tasks.base.Task.partition_groups`: the class labels, or one group
    for a task without classes, so that only natural, IID and quantity partitions apply)."""
    return load_method("task", task or data.spec.task).partition_groups(data)


def class_counts(parts: list[np.ndarray], labels: np.ndarray, n_classes: int) -> np.ndarray:
    """(n_parties, n_classes) matrix of samples per class held by each party (Fig. 5)."""
    labels = np.asarray(labels)
    return np.stack([np.bincount(labels[p], minlength=n_classes) for p in parts])


def size_statistics(counts: np.ndarray) -> dict[str, float]:
    """Mean and std of samples per party, as in the paper's Table 6."""
    sizes = counts.sum(axis=1)
    return {"mean": float(sizes.mean()), "std": float(sizes.std()), "min": float(sizes.min())}
