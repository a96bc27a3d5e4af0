"""The new methods in the paper studies: ``--set algorithm+=fednova,feddyn`` adds them to
``comparison``, ``--set server_optimizer=fedadam`` runs a study under FedAdam; the
manifest's overrides rebuild the same plan (resume); a real smoke sweep and its report."""

from __future__ import annotations

import pytest

from federated.config.run_config import ConfigError
from search_spaces import BUDGETS, STUDIES
from study.plan import PointLookup, SweepPlan


def plan(**overrides) -> SweepPlan:
    return SweepPlan.build(STUDIES["comparison"], BUDGETS["smoke"], overrides=overrides)


def test_extra_methods_join_the_comparison_and_survive_a_rebuild():
    extended = plan(**{"algorithm+": "fednova,feddyn", "server_optimizer": "fedadam"})
    methods = [t.config["algorithm"] for t in extended.trials()]
    assert methods == ["fedavg", "fedprox", "moon", "scaffold", "solo", "fednova", "feddyn"]
    assert {t.config["server_optimizer"] for t in extended.trials()} == {"fedadam"}
    feddyn = next(t.config for t in extended.trials() if t.config["algorithm"] == "feddyn")
    assert feddyn["alpha"] == 0.01 and feddyn["adaptive_lr"] == 0.01
    manifest = {
        "study": "comparison",
        "budget": "smoke",
        "dataset": extended.dataset,
        "search": "grid",
        "seeds": extended.seeds,
        "overrides": extended.overrides,
    }
    rebuilt = SweepPlan.from_manifest(manifest)
    assert [t.config for t in rebuilt.trials()] == [t.config for t in extended.trials()]


def test_an_axis_list_replaces_the_paper_methods_and_params_differ_per_point():
    chosen = plan(algorithm="fedavg,feddyn")
    assert [t.config["algorithm"] for t in chosen.trials()] == ["fedavg", "feddyn"]
    table = {t.label: t.config for t in chosen.trials()}
    lookup = PointLookup(table, "alpha")
    assert lookup({"point": "algorithm=feddyn"}) == 0.01
    assert lookup({"point": "algorithm=fedavg"}) is None  # FedAvg has no alpha


def test_bad_extra_methods_are_refused_before_anything_runs():
    with pytest.raises(ConfigError, match="algorithm='fedsgd'"):
        plan(**{"algorithm+": "fedsgd"})
    with pytest.raises(ConfigError, match=r"mu\+=.*a plain axis of comparison"):
        plan(**{"mu+": "1,2"})


# A real sweep of the comparison study with FedNova and FedDyn added (FedAdam on the
# server) runs in tests/test_toy_task.py, on the toy task: one sweep for both.
