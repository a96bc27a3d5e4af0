"""The sequential path never changes results: same seed, same device -> the same
per-round numbers as the engine's plain reference path (per-sample torchvision
augmentation).  Packed execution is held to the sequential path in
tests/test_packed_execution.py."""

from __future__ import annotations

import pytest

from federated.engine.round_loop import run_rounds
from tests.conftest import tiny


@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "moon"])
def test_sequential_and_reference_paths_give_identical_rounds(synthetic, algorithm):
    fast = list(run_rounds(tiny(algorithm=algorithm, rounds=2, execution="sequential"), synthetic))
    plain = list(run_rounds(tiny(algorithm=algorithm, rounds=2, execution="reference"), synthetic))
    for key in ("test_acc", "test_loss", "train_loss"):
        assert [r[key] for r in fast] == [r[key] for r in plain], key
