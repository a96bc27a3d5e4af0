"""A sweep accepts what a single run accepts: parties smaller than one batch (the default
batch size 64 against 60 samples per party) train on one batch of all their samples in
``python -m federated.run`` and in a sweep alike; the sweep says so in a warning line."""

from __future__ import annotations

from federated.engine.round_loop import FederatedRun
from study import sweep
from study.preflight import batch_warnings, check_batches
from tests.conftest import tiny


def _small_parties():
    # 8 parties share 500 synthetic samples: 62 on average, fewer than batch_size=64
    return tiny(n_parties=8, data_fraction=0.01, rounds=1)


def test_a_single_run_trains_parties_smaller_than_a_batch(synthetic):
    config = _small_parties()
    assert config.n_train // config.n_parties < config.batch_size
    row = FederatedRun(config, synthetic).run_round()
    assert row["round"] == 1 and row["local_steps_max"] == 1  # one batch of all it holds


def test_the_sweep_accepts_them_with_a_warning(capsys):
    configs = [("small", _small_parties()), ("large", tiny())]
    check_batches(configs)  # accepted: no PreflightError
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("warning: trial small: n_parties=8 share 500")
    assert "62 per party on average, fewer than batch_size=64" in err[0]
    assert batch_warnings([("large", tiny())]) == []  # 214 to 290 samples a party: no line


def test_a_sweep_dry_run_of_small_parties_is_not_refused(capsys):
    # the parties study's smoke budget: N=50 and N=100 parties of 60 and 30 samples
    assert sweep.main(["parties", "--budget", "smoke", "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "warning: trial setting=N=50" in err and "fewer than batch_size=64" in err
    assert "error:" not in err


def test_a_constructed_floor_is_said_by_the_driver_and_recorded_in_partitions_json(capsys):
    """The sweep's partition record (partitions.json's rows) says whether the Dirichlet
    floor was constructed; the driver says it once per partition (issue 67)."""
    from search_spaces import BUDGETS, STUDIES
    from study.plan import SweepPlan
    from study.preflight import partitions, trial_configs

    def rows(n_parties: int) -> list[dict]:
        overrides = {"dataset": "synthetic", "n_parties": n_parties, "data_fraction": 0.1}
        plan = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides=overrides)
        return partitions(plan, trial_configs(plan))

    (at_limit,) = rows(500)  # 5,000 samples, 500 parties of >= 10: the floor is all
    assert at_limit["floor_constructed"] and set(at_limit["party_images"]) == {10}
    assert capsys.readouterr().err.startswith(
        "notice: Dirichlet partition: no draw of Dir(0.5) gave all 500 parties >= 10 "
        "samples, so each party first got 10 (5000 of the 5000 samples) and none remain"
    )
    (drawn,) = rows(10)
    assert not drawn["floor_constructed"] and capsys.readouterr().err == ""
