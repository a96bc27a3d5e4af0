"""Partitions: disjoint, covering, minimum size, deterministic, skew follows beta; the
redraws' partitions unchanged, the floor constructed at any party count (issue 53)."""

from __future__ import annotations

import hashlib
import time
import warnings

import numpy as np
import pytest

from federated.heterogeneity.partition import (
    HOPELESS_UNDER_FLOOR,
    MAX_REDRAWS,
    PILOT_TRIES,
    PartitionError,
    class_counts,
    dirichlet_partition,
    first_redraw,
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


def test_an_impossible_floor_is_refused_before_any_draw():
    too_few = np.arange(25) % 3  # three parties of >= 10 need 30 samples
    rng = _rng()
    with pytest.raises(PartitionError, match="3 parties of >= 10 samples need 30 samples"):
        dirichlet_partition(too_few, 3, 0.5, rng)
    assert rng.bit_generator.state == _rng().bit_generator.state  # nothing was drawn
    with pytest.raises(PartitionError, match="use at most 2 parties"):
        quantity_skew_partition(25, 3, 0.5, _rng())


# sha256 (first 16 hex digits) of each party's int64 indices, each followed by b"|",
# recorded with the redraw-only code before the floor could be constructed (issue 53):
# a partition the redraws found must stay the very same partition.
SNAPSHOTS = {
    ("dirichlet", 10, 0.5, 0): "8e800fcabfaaca32",
    ("dirichlet", 100, 0.5, 0): "6c1120f81daac32d",
    ("dirichlet", 100, 0.1, 0): "18381666ae9656ac",  # found at the 29th draw
    ("quantity", 10, 0.5, 0): "d1a4d4cde8c45b26",
    ("labels", 10, 2, 0): "a8df1c1f56cb913a",
    ("labels", 100, 3, 1): "f2cc4b77bd928331",
}


def _digest(parts: list[np.ndarray]) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(np.asarray(part, dtype=np.int64).tobytes())
        digest.update(b"|")
    return digest.hexdigest()[:16]


@pytest.mark.parametrize("case", sorted(SNAPSHOTS))
def test_partitions_the_redraws_found_are_unchanged(labels, case):
    scheme, n_parties, parameter, seed = case
    if scheme == "dirichlet":
        parts = dirichlet_partition(labels, n_parties, parameter, _rng(seed))
    elif scheme == "quantity":
        parts = quantity_skew_partition(len(labels), n_parties, parameter, _rng(seed))
    else:
        parts = labels_partition(labels, n_parties, parameter, _rng(seed))
    assert _digest(parts) == SNAPSHOTS[case]
    assert all(p.dtype == np.int64 for p in parts)


def test_the_redraws_give_up_only_when_the_first_draws_are_hopeless():
    calls = []

    def draw(under: int):
        def one() -> tuple[int, int]:
            calls.append(under)
            return under, len(calls)

        return one

    assert first_redraw(draw(HOPELESS_UNDER_FLOOR)) is None
    assert len(calls) == PILOT_TRIES  # 30 parties under the floor on average: hopeless
    calls.clear()
    assert first_redraw(draw(HOPELESS_UNDER_FLOOR - 1)) is None
    assert len(calls) == MAX_REDRAWS  # success is only unlikely: every draw is tried
    calls.clear()
    outcomes = iter([5] * 40 + [0])
    assert first_redraw(lambda: (next(outcomes), len(calls))) == 0  # the first success


def _check_floor(parts, n, floor=10):
    sizes = np.array([len(p) for p in parts])
    assert sizes.min() >= floor and sizes.sum() == n
    _check_cover(parts, n)


def test_dirichlet_constructs_the_floor_where_redraws_cannot_reach_it():
    labels = np.random.default_rng(1).integers(0, 10, size=60_000)
    # the case: no draw in 1,000 gave 5,000 parties >= 10 samples (158 s)
    start = time.perf_counter()
    parts = dirichlet_partition(labels, 5_000, 0.5, _rng())
    assert time.perf_counter() - start < 30  # ~0.3 s; generous for a loaded CI machine
    _check_floor(parts, 60_000)
    again = dirichlet_partition(labels, 5_000, 0.5, _rng())
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))
    # the config's limit, n_train // 10 = 6,000 parties: every party holds exactly 10
    _check_floor(dirichlet_partition(labels, 6_000, 0.5, _rng()), 60_000)
    # the constructed rest still follows Dir(beta): small beta, few classes per party
    skewed = class_counts(dirichlet_partition(labels, 2_000, 0.1, _rng()), labels, 10)
    mild = class_counts(dirichlet_partition(labels, 2_000, 100.0, _rng()), labels, 10)
    assert mean_label_entropy(skewed) < mean_label_entropy(mild) - 0.5


def test_a_hundred_thousand_parties_partition_in_seconds():
    """10^5 parties need 10^6 samples for the floor of 10: 60,000 labels are refused at
    once, 10^6 are split in seconds, the same way twice."""
    with pytest.raises(PartitionError, match="100000 parties of >= 10 samples need 1000000"):
        dirichlet_partition(np.arange(60_000) % 10, 100_000, 0.5, _rng())
    labels = np.random.default_rng(2).integers(0, 10, size=1_000_000)
    start = time.perf_counter()
    parts = dirichlet_partition(labels, 100_000, 0.5, _rng(5))
    assert time.perf_counter() - start < 60  # ~2 s here; generous for a loaded CI machine
    _check_floor(parts, 1_000_000)
    again = dirichlet_partition(labels, 100_000, 0.5, _rng(5))
    assert np.array_equal(np.concatenate(parts), np.concatenate(again))
    assert [len(p) for p in parts] == [len(p) for p in again]
    sizes = np.array([len(p) for p in quantity_skew_partition(1_000_000, 100_000, 0.5, _rng())])
    assert sizes.min() >= 10 and sizes.sum() == 1_000_000


def test_quantity_skew_constructs_the_floor_where_redraws_cannot_reach_it(labels):
    # Dir_100(0.5) sizes over 20,000 samples: some party under 10 in every draw
    parts = quantity_skew_partition(len(labels), 100, 0.5, _rng())
    _check_floor(parts, len(labels))
    sizes = np.array([len(p) for p in parts])
    assert sizes.std() > 0.3 * sizes.mean()  # still skewed


def test_the_floor_holds_when_a_class_runs_short():
    """Few samples of one class, many parties whose mix asks for it: the floor's excess
    slots of that class go to classes with samples to spare."""
    labels = np.concatenate([np.zeros(30, np.int64), np.ones(3_000, np.int64)])
    parts = dirichlet_partition(labels, 300, 0.05, _rng())
    _check_floor(parts, len(labels))


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


def test_a_constructed_floor_is_said_in_one_line_and_a_drawn_partition_is_silent():
    """At the config's limit (n = 10 N) every party holds exactly its floor: the run says
    so (issue 67); a partition the redraws found says nothing."""
    from federated.heterogeneity.partition import FloorNotice

    labels = np.random.default_rng(1).integers(0, 10, size=60_000)
    with pytest.warns(FloorNotice) as said, np.errstate(all="ignore"):
        dirichlet_partition(labels, 6_000, 0.5, _rng())
    assert [str(w.message) for w in said if w.category is FloorNotice] == [
        "Dirichlet partition: no draw of Dir(0.5) gave all 6000 parties >= 10 samples, so "
        "each party first got 10 (60000 of the 60000 samples) and none remain, so every "
        "party holds exactly 10 (docs/heterogeneity.md, the floor)"
    ]
    with pytest.warns(FloorNotice, match="and the other 20000 follow the draw's proportions"):
        quantity_skew_partition(60_000, 4_000, 0.5, _rng())
    with warnings.catch_warnings():
        warnings.simplefilter("error", FloorNotice)
        dirichlet_partition(labels, 100, 0.5, _rng())


def test_federated_run_says_a_constructed_floor_in_one_notice_line(tmp_path, capsys):
    from federated import run

    argv = [
        "--dataset", "synthetic", "--n-parties", "50", "--data-fraction", "0.01",
        "--test-fraction", "0.01", "--rounds", "1", "--threads", "1",
        "--out", str(tmp_path / "rows.csv"), "--quiet",
    ]  # fmt: skip
    assert run.main(argv) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "floor" in line]
    assert said == [
        "notice: Dirichlet partition: no draw of Dir(0.5) gave all 50 parties >= 10 "
        "samples, so each party first got 10 (500 of the 500 samples) and none remain, so "
        "every party holds exactly 10 (docs/heterogeneity.md, the floor)"
    ]
