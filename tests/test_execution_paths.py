"""The sequential path never changes results: same seed, same device -> the same
per-round numbers as the engine's plain reference path (per-sample torchvision
augmentation).  Packed execution is held to the sequential path in
tests/test_packed_execution.py."""

from __future__ import annotations

import warnings

import pytest

from federated.engine.round_loop import run_rounds
from federated.execution.choice import PackingFallback
from tests.conftest import tiny


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "moon"])
def test_sequential_and_reference_paths_give_identical_rounds(synthetic, algorithm):
    config = tiny(algorithm=algorithm, rounds=2)  # an equality
    fast = list(run_rounds(config.replace(execution="sequential"), synthetic))
    plain = list(run_rounds(config.replace(execution="reference"), synthetic))
    for key in ("test_acc", "test_loss", "train_loss"):
        assert [r[key] for r in fast] == [r[key] for r in plain], key


@pytest.mark.parametrize(
    "algorithm, execution, ran",
    [
        ("fedavg", "packed", "packed"),
        ("fedavg", "sequential", "sequential"),
        ("fedavg", "reference", "reference"),
        # methods that run a personal model beside the global one cannot pack
        ("ditto", "packed", "sequential"),
        ("apfl", "packed", "sequential"),
        ("fedrep", "packed", "sequential"),
    ],
)
def test_each_row_records_the_path_its_parties_trained_on(synthetic, algorithm, execution, ran):
    """What a row records is what ran: ``execution`` is what was asked (params.json),
    ``execution_path`` the path the round trained on."""
    config = tiny(algorithm=algorithm, rounds=1, execution=execution, party_test_fraction=0.2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PackingFallback)
        (row,) = run_rounds(config, synthetic)
    assert row["execution_path"] == ran
