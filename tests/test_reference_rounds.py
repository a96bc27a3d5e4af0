"""A refactor changes no result: every method's per-round numbers on a fixed real
Fashion-MNIST run equal those recorded in ``tests/fixtures/reference_rounds.json``.

The fixture was recorded before the algorithm-interface refactor (issue 11), on the
sequential path (then named ``fast``), with
``python -m tests.test_reference_rounds --record``; re-record only for a change that is
meant to change results, and say so in its commit.  CPU, one thread, seed 0: exact.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import pytest

from federated.config import RunConfig
from federated.data import ImageData, load_dataset
from federated.round_loop import run_rounds

FIXTURE = Path(__file__).parent / "fixtures" / "reference_rounds.json"

# Small and fixed: 5 parties, Dir(0.5), 10% of the training set, 20% of the test set,
# 3 rounds of 1 local epoch, lr 0.05, seed 0, CPU, one thread.
BASE: dict[str, Any] = dict(
    dataset="fmnist",
    n_parties=5,
    rounds=3,
    local_epochs=1,
    data_fraction=0.1,
    test_fraction=0.2,
    seed=0,
    device="cpu",
    threads=1,
    out_dim=64,
    lr=0.05,  # learns within 3 short rounds, so accuracies move
    # the recorded path, exact; packed execution is held to it in test_packed_execution.py
    execution="sequential",
)

CASES: dict[str, dict[str, Any]] = {
    "fedavg": dict(algorithm="fedavg"),
    "fedprox": dict(algorithm="fedprox", mu=0.1),
    "moon": dict(algorithm="moon", mu=1.0),
    "moon_k3": dict(algorithm="moon", mu=1.0, prev_models=3),
    "moon_annealed": dict(algorithm="moon", mu=1.0, tau_schedule="annealed"),
    "scaffold": dict(algorithm="scaffold"),
    "solo": dict(algorithm="solo"),
    "l2rep": dict(algorithm="l2rep", mu=0.1),
    "fedavgm": dict(algorithm="fedavg", server_optimizer="fedavgm", server_momentum=0.5),
    "moon_sampled": dict(algorithm="moon", mu=1.0, sample_fraction=0.6),
}

# Timings change run to run; everything else in a row is a result.
TIMING = {"train_seconds", "eval_seconds", "round_seconds", "samples_per_second"}


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """A row's results, NaN as None (JSON has no NaN and NaN != NaN)."""
    out = {}
    for key, value in row.items():
        if key in TIMING:
            continue
        out[key] = None if isinstance(value, float) and math.isnan(value) else value
    return out


def rows_of(case: str, data: ImageData) -> list[dict[str, Any]]:
    config = RunConfig(**{**BASE, **CASES[case]})
    return [_comparable(row) for row in run_rounds(config, data)]


@pytest.mark.parametrize("case", sorted(CASES))
def test_per_round_results_equal_the_recorded_ones(case, fmnist):
    recorded = json.loads(FIXTURE.read_text())[case]
    rows = rows_of(case, fmnist)
    assert len(rows) == len(recorded)
    for got, want in zip(rows, recorded):
        # every recorded value is reproduced exactly; a row may gain new keys
        assert {k: got.get(k, "missing") for k in want} == want


def record() -> None:
    data = load_dataset("fmnist")
    FIXTURE.write_text(json.dumps({c: rows_of(c, data) for c in CASES}, indent=1) + "\n")
    print(f"recorded {len(CASES)} cases into {FIXTURE}")


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    record()
