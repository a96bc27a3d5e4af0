"""Splitting a training set among parties: IID, Dirichlet label skew, k labels, quantity
skew, and natural (each party is its own folder of an image-folder dataset, or the rows
sharing a value of an ``hf:`` data set's ``partition_by`` column).

Each function takes the labels (or the sample count) and a numpy ``Generator``, and
returns one sorted int64 index array per party.  Given the same generator state they
are deterministic on every machine, so a partition depends only on (dataset, N, scheme,
beta, seed).  The rules follow the MOON reference code's ``partition_data``
(notes/reference-code-facts.md).

**The floor** (Dirichlet and quantity skew): every party holds at least ``min_size``
(:data:`~federated.config.checks.MIN_PARTY_SAMPLES`, 10) samples, decided in three steps:

1. ``N x min_size > n`` (more floor than samples) is refused at once, in one line, before
   anything is drawn: no rule can meet it.  This is also the configuration's limit
   (``n_parties <= n_train // MIN_PARTY_SAMPLES``: 6,000 parties of Fashion-MNIST's
   60,000 images), so every party count a config accepts partitions.
2. **Redraw** (the reference code's rule, unchanged): the whole draw is repeated until
   no party is under the floor, at most :data:`MAX_REDRAWS` times.  Every draw consumes
   the generator exactly as the reference loop did, so a partition found here is the
   very one earlier versions gave (tests/test_partition.py holds snapshots).  The
   redraws stop early, after :data:`PILOT_TRIES` draws, when those draws left on average
   :data:`HOPELESS_UNDER_FLOOR` or more parties under the floor.  Measured on 60,000
   labels (N = 100 ... 6,000, beta = 0.05 ... 100), the number of parties under the floor
   in a draw is close to Poisson (variance/mean 0.8-1.0), so a draw succeeds with
   probability about ``exp(-mean)``: at a mean of 30, about 1e-13, 1e-10 over the
   remaining 990 draws.  Every case that succeeded had a mean <= 10 in its first ten
   draws.  The decision reads only the draws, never a clock: it is the same on every
   machine.
3. **Construct** when the redraws gave up or ran out: one more draw of the same
   proportions, then each party first gets its floor (``min_size`` samples; for label
   skew, drawn multinomially from the party's own class mix under that draw, a class
   that runs out of samples handing its excess slots to classes with samples left),
   and the remaining ``n - N x min_size`` samples are split by the draw's proportions
   (label skew keeps the reference's cap: a party already holding ``n / N`` samples gets
   none of later classes).  Every party then holds >= ``min_size``, whatever N.  The
   floor takes ``N x min_size`` of the samples, so only the rest follow the draw's
   quantities: at 2,000 / 3,000 / 5,000 parties of 60,000 Fashion-MNIST-like labels
   (beta 0.5) the sizes' std is 6.5 / 3.2 / 0.8 around means of 30 / 20 / 12, and at
   ``N = n / min_size`` (6,000) none remain: every party holds exactly ``min_size``.  No
   rule that keeps the floor can do otherwise there, since the floor is every sample;
   below it, sizes already follow the draw beyond the floor.  A constructed floor is
   said (:class:`FloorNotice`, a warning of one line) at the run and recorded in the
   sweep's ``partitions.json``.

Every step is vectorised over parties (numpy; one Python loop over classes, never over
parties or samples): measured on a 2-core machine, 10^5 parties of 10^6 samples take
about 1 s (2-5 s while other jobs share it), 5,000 parties of 60,000 samples 0.06 s where
the reference loop spent 158 s before it gave up.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from federated.config.checks import MIN_PARTY_SAMPLES
from federated.config.run_config import RunConfig
from federated.data import ImageData
from federated.registry import load_method
from federated.runtime.seeding import numpy_stream

#: the reference code's redraw budget: the most draws before the floor is constructed
MAX_REDRAWS = 1000
#: draws after which the redraw rule may give up (the module docstring's step 2)
PILOT_TRIES = 10
#: mean parties under the floor, over the first PILOT_TRIES draws, that ends the redraws
HOPELESS_UNDER_FLOOR = 30

Draw = TypeVar("Draw")


class PartitionError(RuntimeError):
    """No partition satisfying the rule was found."""


class FloorNotice(UserWarning):
    """The floor was constructed (the module docstring's step 3): one line saying how
    many samples the floor took and that only the rest follow the draw.  A notice, not a
    fault: ``federated.run`` prints it as ``notice: ...``, a sweep's driver records it in
    ``partitions.json`` (``floor_constructed``)."""


def floor_notice(scheme: str, beta: float, n_parties: int, n: int, min_size: int) -> str:
    """The line of :class:`FloorNotice` for ``n_parties`` parties out of ``n`` samples."""
    floored = n_parties * min_size
    rest = (
        f"the other {n - floored} follow the draw's proportions, so party sizes follow "
        f"Dir({beta:g}) only beyond the floor"
        if floored < n
        else f"none remain, so every party holds exactly {min_size}"
    )
    return (
        f"{scheme} partition: no draw of Dir({beta:g}) gave all {n_parties} parties >= "
        f"{min_size} samples, so each party first got {min_size} ({floored} of the {n} "
        f"samples) and {rest} (docs/heterogeneity.md, the floor)"
    )


def iid_partition(n_samples: int, n_parties: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle and split into ``n_parties`` near-equal parts."""
    order = rng.permutation(n_samples)
    return [np.sort(part) for part in np.array_split(order, n_parties)]


def check_floor(scheme: str, n_samples: int, n_parties: int, min_size: int) -> None:
    """Refuse, in one line, ``n_parties`` parties of >= ``min_size`` samples each out of
    ``n_samples``, when that is more than there are (step 1 of the module docstring)."""
    if n_parties * min_size > n_samples:
        raise PartitionError(
            f"{scheme} partition: {n_parties} parties of >= {min_size} samples need "
            f"{n_parties * min_size} samples, there are {n_samples}; use at most "
            f"{n_samples // max(min_size, 1)} parties or more data"
        )


def first_redraw(draw: Callable[[], tuple[int, Draw]]) -> Draw | None:
    """The reference redraw loop (step 2): call ``draw`` (which returns the number of
    parties it leaves under the floor, and itself) until a draw leaves none, and return
    that draw; None when :data:`MAX_REDRAWS` draws all failed, or when the first
    :data:`PILOT_TRIES` left on average :data:`HOPELESS_UNDER_FLOOR` or more parties under
    the floor (success is then out of reach: about exp(-30) per draw)."""
    under_floor = 0
    for tries in range(1, MAX_REDRAWS + 1):
        under, drawn = draw()
        if under == 0:
            return drawn
        under_floor += under
        if tries == PILOT_TRIES and under_floor >= HOPELESS_UNDER_FLOOR * PILOT_TRIES:
            return None
    return None


def proportional_counts(p: np.ndarray, total: int) -> np.ndarray:
    """Split ``total`` samples by the proportions ``p`` (summing to 1) as the reference
    does, cutting at ``floor(cumsum(p) x total)``; the last part takes what float rounding
    leaves.  Returns the (N,) counts, summing to ``total``."""
    bounds = np.minimum((np.cumsum(p) * total).astype(np.int64), total)
    bounds[-1] = total
    return np.diff(bounds, prepend=0)


def _split_lengths(cuts: np.ndarray, length: int) -> np.ndarray:
    """The lengths of ``np.split(a, cuts)`` for an array ``a`` of ``length``, computed
    without splitting: Python's slice rules (a negative index counts from the end, an
    index is clipped to [0, length]), so that even a NaN proportion's garbage cuts give
    the reference's sizes."""
    bounds = np.concatenate(([0], cuts, [length])).astype(np.int64)
    bounds = np.where(bounds < 0, np.maximum(bounds + length, 0), np.minimum(bounds, length))
    return np.maximum(np.diff(bounds), 0)


def _reference_draw(
    by_class: list[np.ndarray], n: int, n_parties: int, beta: float, rng: np.random.Generator
) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """One draw of the reference Dirichlet rule, consuming ``rng`` exactly as its loop
    did (per class: shuffle the class's indices, then draw p ~ Dir_N(beta)).  Returns
    the parties' sizes (N,), each class's shuffled indices and each class's (N,) counts
    (party i takes the next ``counts[i]`` shuffled indices)."""
    sizes = np.zeros(n_parties, dtype=np.int64)
    orders, counts = [], []
    for base in by_class:
        idx_k = base.copy()  # the reference recomputed these each draw, in index order
        rng.shuffle(idx_k)
        p = rng.dirichlet(np.full(n_parties, beta))
        p = p * (sizes < n / n_parties)
        p = p / p.sum()
        cuts = (np.cumsum(p) * len(idx_k)).astype(int)[:-1]
        chunk = _split_lengths(cuts, len(idx_k))
        sizes += chunk
        orders.append(idx_k)
        counts.append(chunk)
    return sizes, orders, counts


def _floor_counts(
    shares: np.ndarray, class_sizes: np.ndarray, min_size: int, rng: np.random.Generator
) -> np.ndarray:
    """(N, K) samples of each class in each party's floor: ``min_size`` per party, drawn
    multinomially from the party's class mix under ``shares`` ((K, N): each class's
    Dirichlet proportions over the parties), within each class's ``class_sizes``."""
    n_parties, n_classes = shares.shape[1], shares.shape[0]
    mix = shares.T * class_sizes  # each party's expected samples of each class
    held = mix.sum(axis=1, keepdims=True)
    # a party whose every share underflowed to 0 (tiny beta) takes the classes' own mix
    overall = np.broadcast_to(class_sizes / class_sizes.sum(), mix.shape)
    mix = np.divide(mix, held, out=overall.copy(), where=held > 0)
    floor = rng.multinomial(min_size, mix)
    excess = floor.sum(axis=0) - class_sizes
    if (excess <= 0).all():
        return floor
    # a class short of samples: some of its floor slots, chosen at random, take a class
    # with samples to spare (N x min_size <= n, so the spare samples cover the excess)
    slot_party = np.repeat(np.arange(n_parties), min_size)
    slot_class = np.repeat(np.tile(np.arange(n_classes), n_parties), floor.ravel())
    moved = np.concatenate(
        [
            rng.choice(np.flatnonzero(slot_class == k), size=excess[k], replace=False)
            for k in np.flatnonzero(excess > 0)
        ]
    )
    spare = np.repeat(np.arange(n_classes), np.maximum(-excess, 0))
    slot_class[moved] = rng.choice(spare, size=len(moved), replace=False)
    return np.bincount(slot_party * n_classes + slot_class, minlength=floor.size).reshape(
        floor.shape
    )


def _constructed_draw(
    by_class: list[np.ndarray],
    n: int,
    n_parties: int,
    beta: float,
    rng: np.random.Generator,
    min_size: int,
) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Step 3 of the module docstring for label skew: p_k ~ Dir_N(beta) per class, each
    party's floor from its class mix, the rest of each class split by p_k with the
    reference's cap.  Returns the parties' sizes, each class's shuffled indices and
    each class's owner per shuffled index."""
    class_sizes = np.array([len(base) for base in by_class], dtype=np.int64)
    shares = np.stack([rng.dirichlet(np.full(n_parties, beta)) for _ in by_class])
    floor = _floor_counts(shares, class_sizes, min_size, rng)
    sizes = floor.sum(axis=1)
    parties = np.arange(n_parties)
    orders, owners = [], []
    for k, base in enumerate(by_class):
        p = shares[k] * (sizes < n / n_parties)
        # every party holding a share may be capped already: then the plain proportions
        p = p / p.sum() if p.sum() > 0 else shares[k]
        rest = proportional_counts(p, int(class_sizes[k] - floor[:, k].sum()))
        sizes += rest
        idx_k = base.copy()
        rng.shuffle(idx_k)
        orders.append(idx_k)
        owners.append(np.concatenate((np.repeat(parties, floor[:, k]), np.repeat(parties, rest))))
    return sizes, orders, owners


def _by_party(
    n: int, sizes: np.ndarray, orders: list[np.ndarray], owners: list[np.ndarray]
) -> list[np.ndarray]:
    """Each party's sorted sample indices, given each class's shuffled indices and their
    owners: one stable sort of the owners in index order (what sorting each party's
    concatenated chunks gave, for all parties at once)."""
    owner = np.empty(n, dtype=np.int64)
    for idx_k, owner_k in zip(orders, owners):
        owner[idx_k] = owner_k
    return split_by_sizes(np.argsort(owner, kind="stable"), sizes)


def split_by_sizes(values: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """``values`` cut into consecutive parts of ``sizes`` (views; what ``np.split`` at
    the cumulative sizes gives, several times faster for 10^5 parts)."""
    ends = np.cumsum(sizes).tolist()
    return [values[start:end] for start, end in zip([0, *ends[:-1]], ends)]


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
    holds at least ``min_size`` samples; when the redraws give up, the floor is
    constructed instead (the module docstring's three steps).  Refuses
    (:class:`PartitionError`) only ``n_parties x min_size > len(labels)``.
    """
    labels = np.asarray(labels)
    n = len(labels)
    check_floor("Dirichlet", n, n_parties, min_size)
    by_class = [np.flatnonzero(labels == k) for k in np.unique(labels)]
    parties = np.arange(n_parties)

    def draw() -> tuple[int, tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]]:
        drawn = _reference_draw(by_class, n, n_parties, beta, rng)
        return int((drawn[0] < min_size).sum()), drawn

    found = first_redraw(draw)
    if found is None:
        warnings.warn(floor_notice("Dirichlet", beta, n_parties, n, min_size), FloorNotice, 2)
        return _by_party(n, *_constructed_draw(by_class, n, n_parties, beta, rng, min_size))
    sizes, orders, counts = found
    return _by_party(n, sizes, orders, [np.repeat(parties, c) for c in counts])


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
    orders, owners = [], []
    for label, owner_list in enumerate(holders):
        if not owner_list:
            continue
        idx = np.flatnonzero(labels == label)
        rng.shuffle(idx)
        # np.array_split's even split: the first len % h holders take one more sample
        h = len(owner_list)
        counts = np.full(h, len(idx) // h, dtype=np.int64)
        counts[: len(idx) % h] += 1
        orders.append(idx)
        owners.append(np.repeat(np.asarray(owner_list, dtype=np.int64), counts))
    held = np.concatenate(orders)
    owner = np.concatenate(owners)
    sizes = np.bincount(owner, minlength=n_parties)
    if sizes.min() == 0:
        raise PartitionError(
            f"labels partition: some party got no samples ({n_parties} parties, "
            f"{labels_per_party} labels each); use fewer parties"
        )
    # each party's samples in index order: sort by (owner, index) in one pass
    return split_by_sizes(held[np.lexsort((held, owner))], sizes)


def quantity_skew_partition(
    n_samples: int,
    n_parties: int,
    beta: float,
    rng: np.random.Generator,
    min_size: int = MIN_PARTY_SAMPLES,
) -> list[np.ndarray]:
    """Quantity skew: IID labels, party sizes in proportions q ~ Dir_N(beta); redrawn
    until every party holds >= ``min_size`` samples, or constructed (each party
    ``min_size`` and the rest by one more q) when the redraws give up (the module
    docstring's three steps).  Refuses only ``n_parties x min_size > n_samples``."""
    check_floor("quantity-skew", n_samples, n_parties, min_size)
    order = rng.permutation(n_samples)

    def draw() -> tuple[int, np.ndarray]:
        q = rng.dirichlet(np.full(n_parties, beta))
        return int((q * n_samples < min_size).sum()), q

    q = first_redraw(draw)
    if q is not None:
        cuts = (np.cumsum(q) * n_samples).astype(int)[:-1]
        return [np.sort(part) for part in np.split(order, cuts)]
    notice = floor_notice("quantity-skew", beta, n_parties, n_samples, min_size)
    warnings.warn(notice, FloorNotice, 2)
    q = rng.dirichlet(np.full(n_parties, beta))
    sizes = min_size + proportional_counts(q, n_samples - n_parties * min_size)
    return [np.sort(part) for part in np.split(order, np.cumsum(sizes)[:-1])]


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
