"""examples/privacy_usable_epsilon.toml, the cross-device study of docs/results/privacy.md
that claims a usable guarantee: it plans what the page states (1,000 parties, 100 a round
in expectation by Poisson sampling, adaptive clipping, delta <= 1/N) and its noised trials
spend a single-digit epsilon by their last round, computed as the runs compute it."""

from __future__ import annotations

import math
from pathlib import Path

from federated.server.privacy import PrivacySettings
from search_spaces import BUDGETS
from search_spaces.study_file import load_study_file
from study.plan import SweepPlan

STUDY = Path(__file__).resolve().parent.parent / "examples" / "privacy_usable_epsilon.toml"


def planned_trials() -> list:
    """The study's trials as the sweep plans them (its own seeds, values as written)."""
    return SweepPlan.build(load_study_file(STUDY), BUDGETS["as-written"]).trials()


def test_the_study_plans_the_cross_device_setting_it_claims():
    trials = planned_trials()
    assert len(trials) == 6  # sigma in {0, 1} x 3 seeds
    assert sorted({t.seed for t in trials}) == [0, 1, 2]
    for trial in trials:
        settings = PrivacySettings.from_config(trial.run_config)
        assert settings is not None
        assert settings.n_parties >= 1000
        assert settings.per_round >= 50
        assert settings.sampling == "poisson"
        assert settings.adaptive
        assert settings.accounting_of().neighbours == "add-remove"


def test_the_noised_trials_spend_a_single_digit_epsilon_at_delta_below_one_over_n():
    noised = [t for t in planned_trials() if t.config["dp_noise_multiplier"] > 0]
    assert len(noised) == 3
    for trial in noised:
        settings = PrivacySettings.from_config(trial.run_config)
        assert settings.accountant == "pld"
        assert settings.delta is not None
        assert settings.delta <= 1.0 / settings.n_parties
        epsilon = settings.accounting_of().epsilon(
            trial.run_config.rounds, settings.noise_multiplier, settings.delta
        )
        # the figure docs/results/privacy.md states for the study
        assert math.isclose(epsilon, 4.69, abs_tol=0.005)
        assert epsilon < 10


def test_the_reference_trials_differ_only_by_the_noise():
    by_seed: dict[int, dict[float, dict]] = {}
    for trial in planned_trials():
        by_seed.setdefault(trial.seed, {})[trial.config["dp_noise_multiplier"]] = trial.config
    for seed, cells in by_seed.items():
        plain, noised = cells[0.0], cells[1.0]
        differing = {k for k in plain.keys() | noised.keys() if plain.get(k) != noised.get(k)}
        # the grid point's label, and delta, filled in only where there is noise (a
        # guarantee to state)
        assert differing <= {"point", "dp_noise_multiplier", "dp_delta"}, (seed, differing)
        assert plain["dp_delta"] is None and noised["dp_delta"] == 1e-5
