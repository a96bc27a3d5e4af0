"""Client-level differential privacy (DP-FedAvg, docs/privacy.md): clipping by hand, the
noise's scale and exact values for a seed, epsilon against ``dp_accounting`` called
directly and against published figures, the noise solved from a target epsilon, exact
resume, both execution paths, the one-line refusals, and a Fashion-MNIST run."""

from __future__ import annotations

import math

import dp_accounting
import pytest
import torch
from dp_accounting.rdp import RdpAccountant

from federated.config.run_config import RunConfig
from federated.contract.columns import PRIVACY_COLUMNS
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.params import ConfigError
from federated.privacy_accountant import (
    SOLVE_TOLERANCE,
    composed_epsilon,
    default_delta,
    epsilon_after,
    noise_for_epsilon,
    update_noise_multiplier,
)
from federated.run import main as run_main
from federated.runtime.seeding import torch_stream
from federated.server.contribution import Contribution
from federated.server.privacy import ClientPrivacy, PrivacySettings
from federated.trainable import load_run_state, save_run_state
from tests.conftest import tiny
from tests.test_round_loop import results

REPLACE_ONE = dp_accounting.NeighboringRelation.REPLACE_ONE
ADD_OR_REMOVE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def settings(**overrides) -> PrivacySettings:
    values = dict(
        noise_multiplier=0.0,
        clip_norm=1.0,
        adaptive=False,
        quantile=0.5,
        n_parties=2,
        per_round=2,
        delta=None,
    )
    values.update(overrides)
    return PrivacySettings(**values)


def contribution(party: int, weights: dict[str, torch.Tensor]) -> Contribution:
    return Contribution(party, weights, 0.5, 10, 1, {})


# ------------------------------------------------------------------------ the mechanism
def test_clipping_bounds_each_update_by_hand():
    """Party 0's update (3, 4 | 0) has norm 5 > C = 1: scaled to (0.6, 0.8 | 0); party 1's
    (0.3, 0 | 0.4) has norm 0.5 and stays; the mean over m = 2 parties, weights equal
    whatever the data sizes: (0.45, 0.4 | 0.2) added to the global model; an integer
    entry keeps the global value."""
    privacy = ClientPrivacy(settings(), torch_stream(0, "privacy"))
    base = {
        "w": torch.tensor([1.0, -1.0], dtype=torch.float64),
        "b": torch.tensor([2.0], dtype=torch.float64),
        "count": torch.tensor(7),
    }
    aggregator = privacy.aggregator(base, ["w", "b"])
    aggregator.add(
        contribution(
            0,
            {
                "w": base["w"] + torch.tensor([3.0, 4.0], dtype=torch.float64),
                "b": base["b"].clone(),
                "count": torch.tensor(9),
            },
        )
    )
    aggregator.add(
        contribution(
            1,
            {
                "w": base["w"] + torch.tensor([0.3, 0.0], dtype=torch.float64),
                "b": base["b"] + 0.4,
                "count": torch.tensor(8),
            },
        )
    )
    out = aggregator.result()
    assert aggregator.norms == pytest.approx([5.0, 0.5])
    assert aggregator.unclipped == 1
    torch.testing.assert_close(out["w"], torch.tensor([1.45, -0.6], dtype=torch.float64))
    torch.testing.assert_close(out["b"], torch.tensor([2.2], dtype=torch.float64))
    assert int(out["count"]) == 7
    # each clipped update's norm is at most C: the mean of m of them at most C
    move = torch.cat([out["w"] - base["w"], out["b"] - base["b"]])
    assert float(move.norm()) <= 1.0 + 1e-12
    # one of the two updates exceeded C: the row's clipped fraction, then the next
    # round's starts afresh (NaN where nobody reports)
    assert privacy.end_round()["dp_clipped_fraction"] == 0.5
    privacy.aggregator(base, ["w", "b"])
    assert math.isnan(privacy.end_round()["dp_clipped_fraction"])


def test_noise_std_is_sigma_times_clip_over_the_expected_cohort_and_seeded():
    """Updates of zero leave the noise alone: its std is sigma·C/m (1·2/4 = 0.5) on every
    entry, drawn from the privacy stream in key order; the values for seed 0 are fixed."""
    s = settings(noise_multiplier=1.0, clip_norm=2.0, n_parties=8, per_round=4, delta=1e-3)
    privacy = ClientPrivacy(s, torch_stream(0, "privacy"))
    base = {"w": torch.zeros(200_000), "b": torch.ones(3)}
    aggregator = privacy.aggregator(base, ["w", "b"])
    for party in range(4):
        aggregator.add(contribution(party, base))
    out = aggregator.result()
    noise = out["w"]
    assert float(noise.std()) == pytest.approx(0.5, rel=0.01)
    assert abs(float(noise.mean())) < 0.005
    # exactly torch.randn on the seeded stream, scaled: the same on every device
    generator = torch_stream(0, "privacy")
    expected_w = torch.randn(200_000, generator=generator) * 2.0
    expected_b = torch.randn(3, generator=generator) * 2.0
    torch.testing.assert_close(noise, expected_w / 4, rtol=0, atol=0)
    torch.testing.assert_close(out["b"], 1 + expected_b / 4, rtol=0, atol=0)
    assert noise[:4].tolist() == pytest.approx(
        [0.3559408485889435, 0.271889865398407, 0.5333210229873657, -0.030051395297050476],
        abs=1e-7,
    )
    row = privacy.end_round()
    assert row["dp_noise_std"] == 0.5
    assert row["dp_round_clip_norm"] == 2.0
    assert row["dp_epsilon"] == epsilon_after(1, 8, 4, 1.0, 1e-3)


def test_adaptive_clipping_moves_the_norm_toward_the_quantile():
    """Andrew et al. 2021 without noise: both updates clipped (share 0) at C = 0.1 and
    target 0.5, so C <- 0.1·exp(-0.2·(0 - 0.5)); both unclipped: C <- C·exp(-0.1)."""
    privacy = ClientPrivacy(settings(adaptive=True, clip_norm=0.1), torch_stream(0, "privacy"))
    base = {"w": torch.zeros(2, dtype=torch.float64)}
    big = {"w": torch.tensor([1.0, 0.0], dtype=torch.float64)}
    aggregator = privacy.aggregator(base, ["w"])
    aggregator.add(contribution(0, big))
    aggregator.add(contribution(1, big))
    aggregator.result()
    assert privacy.clip_norm == pytest.approx(0.1 * math.exp(0.1))
    assert privacy.end_round()["dp_round_clip_norm"] == 0.1
    aggregator = privacy.aggregator(base, ["w"])
    aggregator.add(contribution(0, base))
    aggregator.add(contribution(1, base))
    aggregator.result()
    assert privacy.clip_norm == pytest.approx(0.1)


def test_adaptive_clipping_lowers_the_update_noise_to_pay_for_the_count():
    """z = (sigma^-2 - (2 sigma_b)^-2)^-1/2 with sigma_b = m/20: the update's and the
    count's Gaussians together are one mechanism of multiplier sigma (replace-one)."""
    sigma, m = 0.5, 20
    z = update_noise_multiplier(sigma, m, adaptive=True)
    sigma_b = m / 20
    assert z == pytest.approx((sigma**-2 - (2 * sigma_b) ** -2) ** -0.5)
    # replace-one sensitivities 2C (updates) and 1 (centred count): (z/2)^-2 + sigma_b^-2
    assert ((z / 2) ** -2 + sigma_b**-2) ** -0.5 == pytest.approx(sigma / 2)
    assert update_noise_multiplier(sigma, m, adaptive=False) == sigma
    assert math.isnan(update_noise_multiplier(2.0, 10, adaptive=True))


# ------------------------------------------------------------------------ the accountant
@pytest.mark.parametrize(
    ("n", "m", "sigma", "rounds", "delta"),
    [(100, 10, 1.0, 50, 1e-5), (10, 3, 0.7, 20, 1e-2), (10, 10, 2.0, 5, 1e-3)],
)
def test_epsilon_equals_dp_accounting_called_directly(n, m, sigma, rounds, delta):
    """Fixed-size sampling without replacement (replace-one), the sum's sensitivity 2C:
    dp_accounting's own accountant composing the event ``rounds`` times agrees exactly."""
    accountant = RdpAccountant(neighboring_relation=REPLACE_ONE)
    event = dp_accounting.SampledWithoutReplacementDpEvent(
        n, m, dp_accounting.GaussianDpEvent(sigma / 2)
    )
    accountant.compose(dp_accounting.SelfComposedDpEvent(event, rounds))
    assert epsilon_after(rounds, n, m, sigma, delta) == accountant.get_epsilon(delta)


def test_epsilon_against_published_figures():
    """The per-round composition fedsweep uses, on Abadi et al. (CCS 2016, §3.1): q = 0.01,
    sigma = 4, 10,000 steps, delta = 1e-5 gives epsilon ~ 1.26 by the moments accountant;
    dp_accounting's Rényi accountant (a tighter conversion) gives 1.035, and
    sigma = 1.1 gives 5.632 — both equal to the library's own compose."""
    for sigma, expected in ((4.0, 1.0354900660362436), (1.1, 5.632010670081592)):
        event = dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(sigma))
        accountant = RdpAccountant(neighboring_relation=ADD_OR_REMOVE)
        accountant.compose(event, 10_000)
        ours = composed_epsilon(event, 10_000, 1e-5, ADD_OR_REMOVE)
        assert ours == accountant.get_epsilon(1e-5)
        assert ours == pytest.approx(expected, rel=1e-9)
    assert (
        composed_epsilon(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(4.0)),
            10_000,
            1e-5,
            ADD_OR_REMOVE,
        )
        < 1.26
    )


def test_a_known_renyi_value_and_the_two_c_convention():
    """dp_accounting's own test values: Poisson q = 0.01, sigma = 2.5, 50 steps, at orders
    1.5 .. 100; and its noise 4.530877117 that is exactly (1, 1e-6)-DP in one release,
    which fedsweep reaches with every party drawn and sigma twice that (sensitivity 2C)."""
    accountant = RdpAccountant(orders=[1.5, 2.5, 5, 50, 100])
    accountant.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(2.5)), 50
        )
    )
    assert accountant.rdp.tolist() == pytest.approx(
        [6.70579741e-04, 1.08548710e-03, 2.18075656e-03, 2.38460375e-02, 1.67416308e02],
        rel=1e-4,
    )
    assert epsilon_after(1, 10, 10, 2 * 4.530877117, 1e-6) == pytest.approx(1.0, abs=1e-5)


def test_noise_solved_from_a_target_meets_it_and_barely():
    target, delta, rounds = 8.0, 1e-2, 10
    sigma = noise_for_epsilon(target, delta, rounds, 10, 3)
    assert sigma is not None
    assert epsilon_after(rounds, 10, 3, sigma, delta) <= target
    assert epsilon_after(rounds, 10, 3, sigma / (1 + SOLVE_TOLERANCE), delta) > target
    assert noise_for_epsilon(1e-3, 1e-6, 100, 10, 10) is None  # beyond sigma = 1000


def test_a_run_with_a_target_spends_at_most_it(synthetic):
    config = tiny(rounds=3, sample_fraction=0.75, dp_target_epsilon=20.0, dp_clip_norm=0.05)
    assert config.dp_delta == default_delta(4)
    rows = list(run_rounds(config, synthetic))
    epsilons = [r["dp_epsilon"] for r in rows]
    assert epsilons == sorted(epsilons) and epsilons[-1] <= 20.0
    assert epsilons[-1] > 20.0 / (1 + 10 * SOLVE_TOLERANCE)


# -------------------------------------------------------------------- resume and paths
DP_RUNS = {
    "fixed": dict(dp_noise_multiplier=0.5, dp_clip_norm=0.05),
    "adaptive": dict(dp_noise_multiplier=0.2, dp_clipping="adaptive"),
    "target": dict(dp_target_epsilon=30.0, dp_clip_norm=0.05),
    "fedper": dict(algorithm="fedper", dp_noise_multiplier=0.5, dp_clip_norm=0.05),
}


@pytest.mark.parametrize("execution", ["packed", "sequential"])
@pytest.mark.parametrize("case", sorted(DP_RUNS))
def test_a_restored_private_run_continues_exactly(case, execution, synthetic, tmp_path):
    """Saved after round 1 through the trainable's files and restored: the same rows, bit
    for bit (the noise stream, the clip norm and the round count cross the checkpoint)."""
    config = tiny(rounds=3, sample_fraction=0.75, execution=execution, **DP_RUNS[case])
    run = FederatedRun(config, synthetic)
    straight = results([run.run_round() for _ in range(3)])

    first = FederatedRun(config, synthetic)
    head = results([first.run_round()])
    save_run_state(first, tmp_path)
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path))
    tail = results([restored.run_round() for _ in range(2)])
    assert head + tail == straight  # the clipped fraction included: it is per round
    assert [r["dp_epsilon"] for r in straight] == sorted(r["dp_epsilon"] for r in straight)
    fractions = [r["dp_clipped_fraction"] for r in straight]
    assert all(0 <= f <= 1 for f in fractions)
    # 3 of the 4 tiny parties report each round: a count of thirds
    assert all(f * 3 == round(f * 3) for f in fractions)


def test_the_accountant_refuses_a_checkpoint_of_other_parameters():
    mine = ClientPrivacy(settings(noise_multiplier=1.0, delta=1e-3), torch_stream(0, "privacy"))
    other = ClientPrivacy(settings(noise_multiplier=2.0, delta=1e-3), torch_stream(0, "privacy"))
    refusal = r"noise_multiplier=2.0, this run has noise_multiplier=1.0"
    with pytest.raises(ValueError, match=refusal):
        mine.load_state_dict(other.state_dict())


@pytest.mark.parametrize("execution", ["packed", "sequential"])
def test_both_paths_clip_where_contributions_are_aggregated(execution, synthetic):
    """Without noise, each round moves the global model's weights by the mean of m
    clipped updates: at most C, on the packed path as on the sequential one."""
    config = tiny(rounds=2, execution=execution, dp_clip_norm=0.005)
    run = FederatedRun(config, synthetic)
    for _ in range(2):
        before = [p.detach().clone() for p in run.global_model.parameters()]
        row = run.run_round()
        assert row["execution_path"] == execution
        move = torch.cat(
            [(p.detach() - b).flatten() for p, b in zip(run.global_model.parameters(), before)]
        )
        assert 0 < float(move.norm()) <= 0.005 * (1 + 1e-5)
        assert row["dp_epsilon"] == math.inf  # clipping alone guarantees nothing
        # C = 0.005 is below every tiny update's norm (the smallest measured: 0.01 to
        # 0.02): all clipped, on either path
        assert row["dp_clipped_fraction"] == 1.0


def test_packed_and_sequential_private_rounds_agree(synthetic):
    """The same noise (drawn on the CPU, in key order) reaches both paths' aggregation."""
    weights = []
    for execution in ("packed", "sequential"):
        config = tiny(rounds=1, execution=execution, dp_noise_multiplier=0.5, dp_clip_norm=0.05)
        run = FederatedRun(config, synthetic)
        run.run_round()
        weights.append(torch.cat([p.flatten() for p in run.global_model.parameters()]))
    torch.testing.assert_close(weights[0], weights[1], rtol=0, atol=1e-5)


def test_personal_layers_never_move_under_dp(synthetic):
    """FedPer's classifier stays at each party: the server's copy keeps its initial value;
    the shared entries take the noised mean."""
    config = tiny(algorithm="fedper", dp_noise_multiplier=0.5, dp_clip_norm=0.05)
    run = FederatedRun(config, synthetic)
    local = run.own.kept
    before = {k: v.clone() for k, v in run.global_model.state_dict().items()}
    run.run_round()
    after = run.global_model.state_dict()
    assert local and all(torch.equal(after[k], before[k]) for k in local)
    shared = run._float_keys
    assert shared and not set(shared) & local
    assert any(not torch.equal(after[k], before[k]) for k in shared)


# ------------------------------------------------------------------------ refusals
BAD = [
    (
        dict(dp_target_epsilon=0.0, dp_clip_norm=1.0),
        "dp_target_epsilon=0.0 (allowed: a number > 0)",
    ),
    (dict(dp_target_epsilon=-1.0, dp_clip_norm=1.0), "dp_target_epsilon=-1.0"),
    (
        dict(dp_noise_multiplier=1.0, dp_clip_norm=1.0, dp_delta=0.1),
        "dp_delta=0.1 (allowed: a number in (0, 1/n_parties=0.1)",
    ),
    (dict(dp_noise_multiplier=1.0), "dp_noise_multiplier=1.0 (allowed: 0/unset without clipping"),
    (dict(dp_target_epsilon=3.0), "dp_target_epsilon=3.0 (allowed: 0/unset without clipping"),
    (
        dict(dp_noise_multiplier=1.0, dp_target_epsilon=3.0, dp_clip_norm=1.0),
        "dp_target_epsilon=3.0 (allowed: unset when dp_noise_multiplier=1 is given",
    ),
    (
        dict(dp_target_epsilon=1e-3, dp_clip_norm=1.0, dp_delta=1e-6, rounds=100),
        "dp_target_epsilon=0.001 (allowed: an epsilon 100 rounds of 10 of 10 parties can "
        "meet with a noise multiplier <= 1000",
    ),
    (
        dict(dp_noise_multiplier=2000.0, dp_clip_norm=1.0),
        "dp_noise_multiplier=2000.0 (allowed: at most 1000",
    ),
    (dict(dp_noise_multiplier=-0.5), "dp_noise_multiplier=-0.5 (allowed: a number >= 0"),
    (dict(dp_clip_norm=0.0), "dp_clip_norm=0.0 (allowed: a number > 0)"),
    (dict(dp_clipping="sometimes"), "dp_clipping='sometimes' (allowed: one of fixed, adaptive)"),
    (
        dict(dp_clip_quantile=1.0, dp_clipping="adaptive"),
        "dp_clip_quantile=1.0 (allowed: a number in (0, 1))",
    ),
    (
        dict(dp_clipping="adaptive", dp_noise_multiplier=1.5),
        "dp_noise_multiplier=1.5 (allowed: a noise multiplier < 1 under adaptive clipping",
    ),
    (
        dict(algorithm="scaffold", dp_clip_norm=1.0),
        "algorithm='scaffold' (allowed: a method DP-FedAvg can protect (fedavg, fedprox, "
        "moon, ...): scaffold uploads its control-variate change",
    ),
    (dict(algorithm="solo", dp_noise_multiplier=1.0, dp_clip_norm=1.0), "solo has no server"),
    (
        dict(algorithm="fednova", dp_clip_norm=1.0),
        "fednova divides each party's update by its step count",
    ),
    (dict(algorithm="feddyn", dp_clip_norm=1.0), "feddyn builds its server state h"),
    (
        dict(algorithm="tests.plugin_method:LabelSmoothing", dp_clip_norm=1.0),
        "does not declare dp_obstacle = None",
    ),
]


@pytest.mark.parametrize(("values", "words"), BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_privacy_settings_are_refused_in_one_line(values, words):
    with pytest.raises(ConfigError) as caught:
        RunConfig.from_dict({"rounds": 5, **values}).resolved()
    message = str(caught.value)
    assert "\n" not in message
    assert words in message


def test_the_command_line_refuses_in_one_line(capsys):
    assert run_main(["--rounds", "3", "--dp-noise-multiplier", "1", "--algorithm", "fedavg"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: invalid config: dp_noise_multiplier")


@pytest.mark.parametrize(
    "algorithm",
    ["fedavg", "fedprox", "moon", "l2rep", "fedper", "fedrep", "lg-fedavg", "ditto", "apfl"],
)
def test_methods_that_send_only_their_model_are_allowed(algorithm):
    config = RunConfig.from_dict(
        dict(algorithm=algorithm, rounds=5, dp_noise_multiplier=1.0, dp_clip_norm=1.0)
    ).resolved()
    assert config.dp_delta == 1e-5  # min(1e-5, 1/(10 N)) at N = 10


# ------------------------------------------------------------------------ a real run
def test_a_private_fashion_mnist_fedavg_run_trains_and_spends_epsilon(fmnist):
    """FedAvg under sigma = 1, C = 1 with 50 of 100 parties a round (noise 0.02 per entry
    of the mean; with 5 a round it is 0.2, and the simple CNN diverges by round 3):
    finite rows, epsilon increasing each round and equal to the accountant's."""
    config = RunConfig.from_dict(
        dict(
            dataset="fmnist",
            algorithm="fedavg",
            n_parties=100,
            sample_fraction=0.5,
            data_fraction=0.1,
            test_fraction=0.1,
            rounds=3,
            local_epochs=1,
            threads=1,
            device="cpu",
            dp_noise_multiplier=1.0,
            dp_clip_norm=1.0,
        )
    ).resolved()
    rows = list(run_rounds(config, fmnist))
    assert len(rows) == 3 and not any(r["diverged"] for r in rows)
    assert all(math.isfinite(r["test_loss"]) and math.isfinite(r["train_loss"]) for r in rows)
    epsilons = [r["dp_epsilon"] for r in rows]
    assert epsilons[0] < epsilons[1] < epsilons[2]
    delta = 1e-5  # the default at N = 100: min(1e-5, 1/(10 N))
    assert epsilons == [epsilon_after(k, 100, 50, 1.0, delta) for k in (1, 2, 3)]
    assert all(r["dp_noise_std"] == pytest.approx(1.0 * 1.0 / 50) for r in rows)


def test_a_run_without_privacy_writes_no_privacy_column(synthetic):
    """The privacy columns are DP-FedAvg's: a plain run's rows stay as they were."""
    row = FederatedRun(tiny(rounds=1), synthetic).run_round()
    names = {column.column for column in PRIVACY_COLUMNS}
    assert names == {
        "dp_epsilon",
        "dp_epsilon_accountant",
        "dp_epsilon_neighbours",
        "dp_epsilon_sampling",
        "dp_round_clip_norm",
        "dp_noise_std",
        "dp_clipped_fraction",
    }
    assert names.isdisjoint(row)


def test_a_dry_run_plans_each_dp_settings_epsilon_once_by_the_runs_accountant(capsys):
    """Issue 68, point 9: ``--dry-run`` gives the epsilon each distinct DP setting will
    have spent by its last round (once per setting, not per seed), the number a run's
    rows would carry (its accountant, :class:`ClientPrivacy`); record-level DP-SGD's says
    it needs the parties' sizes; a plan without DP has no such line."""
    from study.sweep import main as sweep_main

    base = ["--seeds", "2", "--budget", "smoke", "--dry-run"]  # smoke: 2 rounds, 10 parties
    grid = ["--vary", "dp_noise_multiplier=0.5,1.0", "--set", "dp_clip_norm=1"]
    assert sweep_main([*grid, *base]) == 0
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("privacy:")]
    assert len(lines) == 2, lines
    for sigma, line in zip((0.5, 1.0), lines):
        privacy = ClientPrivacy(PrivacySettings(sigma, 1.0, False, 0.5, 10, 10, 1e-5), None)
        privacy.end_round()
        spent = privacy.end_round()["dp_epsilon"]  # what round 2's row says
        assert f"sigma={sigma:g}, C=1, 2 rounds, 10 of 10 parties per round" in line
        assert line.endswith(f"delta=1e-05: planned epsilon {spent:.4g} (replace-one neighbours)")
    record = ["--vary", "lr=0.01", "--set", "dp_level=record", "--set", "dp_noise_multiplier=1"]
    assert sweep_main([*record, "--set", "dp_clip_norm=1", *base]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("privacy:")]
    assert "dp_level=record" in line and "known once the data are read" in line
    assert sweep_main(["--vary", "lr=0.01,0.02", *base]) == 0
    assert "privacy:" not in capsys.readouterr().out
