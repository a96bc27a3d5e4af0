"""Partitions: disjoint, covering, minimum size, deterministic, skew follows beta."""

from __future__ import annotations

import numpy as np
import pytest

from federated.heterogeneity.partition import (
    PartitionError,
    class_counts,
    dirichlet_partition,
    iid_partition,
    labels_partition,
    quantity_skew_partition,
    size_statistics,
)


@pytest.fixture(scope="module")
def labels() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 10, size=20_000)


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def _check_cover(parts, n):
    flat = np.concatenate(parts)
    assert len(flat) == n, "every sample is assigned"
    assert len(np.unique(flat)) == n, "no sample is assigned twice"


def mean_label_entropy(counts: np.ndarray) -> float:
    """Mean over parties of the entropy (nats) of their label distribution."""
    p = counts / counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.nansum(np.where(p > 0, p * np.log(p), 0.0), axis=1)
    return float(h.mean())


def test_dirichlet_is_disjoint_covering_and_min_size(labels):
    parts = dirichlet_partition(labels, 10, 0.5, _rng())
    _check_cover(parts, len(labels))
    assert min(len(p) for p in parts) >= 10


def test_dirichlet_is_identical_for_the_same_seed(labels):
    a = dirichlet_partition(labels, 10, 0.5, _rng(3))
    b = dirichlet_partition(labels, 10, 0.5, _rng(3))
    c = dirichlet_partition(labels, 10, 0.5, _rng(4))
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_dirichlet_small_beta_is_more_skewed(labels):
    skewed = class_counts(dirichlet_partition(labels, 10, 0.1, _rng()), labels, 10)
    mild = class_counts(dirichlet_partition(labels, 10, 5.0, _rng()), labels, 10)
    # uniform labels give entropy log(10) = 2.30 nats
    assert mean_label_entropy(mild) > 2.1
    assert mean_label_entropy(skewed) < 1.2
    assert mean_label_entropy(skewed) < mean_label_entropy(mild) - 1.0


def test_dirichlet_redraw_rule_gives_up_with_a_clear_error():
    too_few = np.arange(25) % 3  # three parties of >= 10 need 30 samples
    with pytest.raises(PartitionError, match="no draw gave all 3 parties >= 10 samples"):
        dirichlet_partition(too_few, 3, 0.5, _rng())


def test_iid_is_balanced(labels):
    parts = iid_partition(len(labels), 7, _rng())
    _check_cover(parts, len(labels))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_labels_per_party(labels):
    parts = labels_partition(labels, 10, 2, _rng())
    _check_cover(parts, len(labels))
    counts = class_counts(parts, labels, 10)
    assert ((counts > 0).sum(axis=1) == 2).all()
    assert all(counts[i, i % 10] > 0 for i in range(10))


def test_quantity_skew_keeps_labels_iid_but_sizes_vary(labels):
    parts = quantity_skew_partition(len(labels), 10, 0.5, _rng())
    _check_cover(parts, len(labels))
    sizes = np.array([len(p) for p in parts])
    assert sizes.min() >= 10
    assert sizes.std() > 0.3 * sizes.mean()


def test_class_counts_and_table6_statistics():
    labels = np.array([0, 0, 1, 2, 2, 2])
    counts = class_counts([np.array([0, 2]), np.array([1, 3, 4, 5])], labels, 3)
    assert counts.tolist() == [[1, 1, 0], [1, 0, 3]]
    stats = size_statistics(counts)
    assert stats == {"mean": 3.0, "std": 1.0, "min": 2.0}
