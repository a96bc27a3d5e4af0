"""The round loop: determinism, MOON(mu=0) = FedAvg, divergence, metrics schema."""

from __future__ import annotations

import math

import pytest

from federated.engine.round_loop import FederatedRun, run_rounds
from tests.conftest import tiny

TIMING = {"train_seconds", "eval_seconds", "round_seconds", "samples_per_second"}


def results(rows):
    """Rows without timings; NaN (not computed) as None so rows compare equal."""

    def clean(v):
        return None if isinstance(v, float) and math.isnan(v) else v

    return [{k: clean(v) for k, v in r.items() if k not in TIMING} for r in rows]


def test_same_seed_gives_identical_rows_and_another_seed_differs(synthetic):
    config = tiny(algorithm="moon", rounds=3)
    a = results(run_rounds(config, synthetic))
    b = results(run_rounds(config, synthetic))
    c = results(run_rounds(config.replace(seed=1), synthetic))
    assert a == b
    assert [r["test_loss"] for r in a] != [r["test_loss"] for r in c]


def test_moon_with_mu_zero_is_exactly_fedavg(synthetic):
    moon = list(run_rounds(tiny(algorithm="moon", mu=0.0, rounds=3), synthetic))
    fedavg = list(run_rounds(tiny(algorithm="fedavg", rounds=3), synthetic))
    assert [r["test_acc"] for r in moon] == [r["test_acc"] for r in fedavg]
    assert [r["test_loss"] for r in moon] == [r["test_loss"] for r in fedavg]
    assert math.isnan(moon[0]["con_loss"]) and moon[1]["con_loss"] > 0  # computed, weight 0


def test_metrics_schema(synthetic):
    rows = list(run_rounds(tiny(algorithm="fedavg", rounds=2), synthetic))
    first = rows[0]
    for key in (
        "round",
        "test_acc",
        "test_loss",
        "train_loss",
        "con_loss",
        "parties_this_round",
        "samples_this_round",
        "round_seconds",
        "samples_per_second",
        "bytes_up",
        "bytes_down",
        "cum_bytes",
        "diverged",
    ):
        assert key in first, key
    assert [r["round"] for r in rows] == [1, 2]
    assert set(rows[0]) == set(rows[1])
    assert 0.0 <= first["test_acc"] <= 1.0
    assert first["bytes_up"] == first["bytes_down"] == 4 * _model_bytes(synthetic)
    assert rows[1]["cum_bytes"] == 2 * (first["bytes_up"] + first["bytes_down"])
    assert first["samples_this_round"] > 0 and first["diverged"] is False


def _model_bytes(data) -> int:
    return FederatedRun(tiny(), data).model_bytes


def test_a_nan_loss_stops_the_run_as_diverged(synthetic):
    rows = list(run_rounds(tiny(lr=50.0, momentum=0.0, rounds=5), synthetic))
    assert rows[-1]["diverged"] is True
    assert len(rows) < 5
    assert all(r["diverged"] is False for r in rows[:-1])
    assert math.isnan(rows[-1]["test_acc"])


def test_finished_run_refuses_another_round(synthetic):
    run = FederatedRun(tiny(rounds=1), synthetic)
    run.run_round()
    with pytest.raises(RuntimeError, match="already finished"):
        run.run_round()


def test_threads_follow_the_config(synthetic):
    import torch

    FederatedRun(tiny(threads=2), synthetic)
    assert torch.get_num_threads() == 2
