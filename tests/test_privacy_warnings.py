"""DP settings that are legal but change nothing or promise little: one ``warning:`` line
each (docs/privacy.md, "delta" and "The fields"), and delta's default and bound."""

from __future__ import annotations

import pytest

from federated.config.inert_settings import inert_settings
from federated.config.protocol_notices import protocol_notices
from federated.config.run_config import RunConfig
from federated.params import ConfigError
from federated.privacy_accountant import default_delta


def config(**values) -> RunConfig:
    return RunConfig.from_dict({"rounds": 3, **values}).resolved()


@pytest.mark.parametrize(
    ("values", "line"),
    [
        (
            dict(dp_delta=1e-3),
            "warning: dp_delta=0.001 has no effect: no noise (dp_noise_multiplier=0, no "
            "dp_target_epsilon): there is no (epsilon, delta) guarantee for delta to state",
        ),
        (
            dict(dp_clip_norm=1.0, dp_delta=1e-3),
            "warning: dp_delta=0.001 has no effect: no noise",
        ),
        (
            dict(dp_clip_norm=1.0, dp_noise_multiplier=1.0, dp_clip_quantile=0.3),
            "warning: dp_clip_quantile=0.3 has no effect: dp_clipping=fixed: only adaptive "
            "clipping follows a quantile",
        ),
        (
            dict(dp_accountant="rdp"),
            "warning: dp_accountant='rdp' has no effect: DP-FedAvg is off",
        ),
    ],
)
def test_inert_privacy_settings_are_warned(values, line):
    (warned,) = inert_settings(config(**values))
    assert warned.startswith(line)


def test_adaptive_clipping_with_a_quantile_and_a_noised_delta_are_not_inert():
    assert inert_settings(config(dp_clipping="adaptive", dp_clip_quantile=0.3)) == []
    assert inert_settings(config(dp_clip_norm=1.0, dp_noise_multiplier=1.0, dp_delta=1e-3)) == []


def test_delta_default_bound_and_warning():
    # min(1e-5, 1/(10 N)): 1e-5 up to 10,000 parties, then 1/(10 N)
    assert [default_delta(n) for n in (10, 10_000, 100_000)] == [1e-5, 1e-5, 1e-6]
    noised = dict(dp_clip_norm=1.0, dp_noise_multiplier=1.0, n_parties=100)
    assert config(**noised).dp_delta == 1e-5
    assert protocol_notices(config(**noised), {}) == []
    assert protocol_notices(config(**noised, dp_delta=1e-3), {}) == []  # 1/(10 N) itself
    (line,) = protocol_notices(config(**noised, dp_delta=5e-3), {})
    assert line.startswith("warning: dp_delta=0.005 is above 1/(10 x n_parties)=0.001")
    with pytest.raises(ConfigError, match=r"dp_delta=0\.01 \(allowed: a number in \(0, 1/n"):
        config(**noised, dp_delta=0.01)


def test_poisson_sampling_is_inert_where_every_party_is_drawn():
    (line,) = inert_settings(config(party_sampling="poisson"))  # 10 of 10 parties
    assert line == (
        "warning: party_sampling='poisson' has no effect: all 10 parties are drawn every "
        "round (sample_fraction=1): there is no draw to make"
    )
    (line,) = inert_settings(config(party_sampling="poisson", algorithm="solo"))
    assert line.startswith("warning: party_sampling='poisson' has no effect: algorithm=solo")
    assert inert_settings(config(party_sampling="poisson", sample_fraction=0.5)) == []
