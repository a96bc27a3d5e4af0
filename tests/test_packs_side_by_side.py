"""A round's packs trained side by side on idle cores (federated/execution/packed.py,
"Packs side by side"; federated/runtime/idle_cores.py): every packable method's rows and
weights are bit for bit those of one thread, and a core counts as idle only when it was
free at two round starts in a row or at every poll of a settle window."""

from __future__ import annotations

import math
import time

import pytest
import torch

from federated.algorithms import ALGORITHMS
from federated.engine.round_loop import FederatedRun
from federated.registry import load_method
from federated.runtime.idle_cores import IdleCores, free_cpus
from tests.conftest import batchnorm_model_for, tiny

PACKABLE = [name for name in ALGORITHMS if load_method("algorithm", name).packable]
# seconds differ between any two runs; spare_core_seconds says how much of a second core
# the side-by-side run used
TIMING = {"train_seconds", "eval_seconds", "round_seconds", "samples_per_second"}


def _same(a: object, b: object) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return a == b or both_nan


@pytest.mark.parametrize("algorithm", PACKABLE)
def test_packs_side_by_side_give_the_rows_and_weights_of_one_thread(synthetic, algorithm):
    """5 parties in packs of 2 (three packs a round), 2 rounds (MOON's second has a
    previous model): one thread, then three."""
    own = load_method("algorithm", algorithm).evaluates_own_models()
    config = tiny(
        algorithm=algorithm,
        n_parties=5,
        pack_width=2,
        execution="packed",
        personal_test_every=1 if own else None,
        **batchnorm_model_for(algorithm),
    )
    alone, side = FederatedRun(config, synthetic), FederatedRun(config, synthetic)
    assert alone.use_idle_cores(1) and side.use_idle_cores(3)
    for _ in range(2):
        one, three = alone.run_round(), side.run_round()
        assert set(one) == set(three)
        for key in set(one) - TIMING - {"spare_core_seconds"}:
            assert _same(one[key], three[key]), key
        assert one["spare_core_seconds"] == 0.0 and three["spare_core_seconds"] >= 0.0
    mine, theirs = alone.global_model.state_dict(), side.global_model.state_dict()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)


def test_only_a_packed_run_on_one_torch_thread_spreads_its_packs(synthetic):
    sequential = FederatedRun(tiny(execution="sequential"), synthetic)
    assert not sequential.use_idle_cores(2)
    assert not FederatedRun(tiny(execution="packed", threads=2), synthetic).use_idle_cores(2)
    assert sequential.run_round()["spare_core_seconds"] == 0.0


def test_a_core_is_idle_only_when_free_at_two_round_starts_in_a_row():
    seen = iter([1, 1, 0, 1, 2, 2, 0])
    idle = IdleCores(lambda: next(seen), poll_period_s=None)
    # free: 1 (first look), 1, 0, 1, 2, 2, 0 -> usable min(now, before)
    assert [idle.threads() for _ in range(7)] == [1, 2, 1, 1, 2, 3, 1]


def test_a_core_free_at_every_poll_of_the_settle_window_is_idle_from_the_next_round():
    """A long round: the neighbour's core freed during it is used from the next round on
    once the polls have seen it free for ``settle_s``; a gap shorter than that is not."""
    now = [0.0]
    free = [0]
    idle = IdleCores(lambda: free[0], settle_s=2.0, poll_period_s=None, clock=lambda: now[0])
    assert idle.threads() == 1  # round 1 starts at t = 0, nothing free
    for t, f in [(1.0, 0), (1.5, 1), (2.0, 1), (3.0, 1), (3.6, 1)]:  # polls in round 1
        now[0], free[0] = t, f
        idle.look()
    now[0] = 4.0  # round 2: free since 1.5 s, at every look for 2.5 s
    assert idle.settled() == 1 and idle.threads() == 2
    # a core free for a second only (a trial between two others) is not taken
    now[0], free[0] = 0.0, 0
    brief = IdleCores(lambda: free[0], settle_s=2.0, poll_period_s=None, clock=lambda: now[0])
    assert brief.threads() == 1
    for t, f in [(1.0, 0), (2.0, 1), (2.5, 1)]:
        now[0], free[0] = t, f
        brief.look()
    now[0] = 3.0
    assert brief.threads() == 1 and brief.settled() == 0


def test_the_poll_looks_in_the_background_until_closed():
    looks = []

    def free() -> int:
        looks.append(1)
        return 0

    with IdleCores(free, poll_period_s=0.01, poll_after_round_s=0.0) as idle:
        idle.threads()
        assert len(looks) == 1  # no poll before a round has been timed
        idle.threads()
        deadline = time.monotonic() + 10
        while len(looks) < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(looks) >= 5
    seen = len(looks)
    time.sleep(0.05)
    assert len(looks) == seen  # closed: no more looks


def test_outside_ray_no_core_counts_as_free():
    """A run outside Ray (``federated.run``, a test) never spreads its packs."""
    import ray

    if ray.is_initialized():
        pytest.skip("another test of this process has joined a Ray cluster")
    assert free_cpus() == 0


def test_quick_rounds_are_not_polled():
    """Rounds shorter than ``poll_after_round_s`` leave the round-start rule alone."""
    looks = []
    with IdleCores(lambda: looks.append(1) or 0, poll_period_s=0.01, poll_after_round_s=60) as idle:
        for _ in range(3):
            idle.threads()
        time.sleep(0.05)
    assert len(looks) == 3  # one look per round start, none in between
