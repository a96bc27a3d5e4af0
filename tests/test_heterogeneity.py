"""Feature skew and system heterogeneity (stragglers, per-party work, dropouts): each
against a construction or a hand computation, deterministic, resumed exactly, packed
equal to sequential, and runs without them unchanged (tests/test_reference_rounds.py)."""

from __future__ import annotations

import copy
from typing import ClassVar

import numpy as np
import pytest
import torch

import federated.engine.round_loop as round_loop
from federated.algorithms.fedavg import FedAvg
from federated.algorithms.fednova import normalizing_factor
from federated.config.inert_settings import inert_settings
from federated.config.run_config import RunConfig
from federated.engine.round_loop import FederatedRun
from federated.heterogeneity.feature_skew import FeatureSkew
from federated.heterogeneity.system import RoundWork, draw_round_work
from federated.params import ConfigError
from federated.runtime.seeding import numpy_stream
from tests.conftest import tiny
from tests.restored_runs import restored_results
from tests.short_runs import short_run
from tests.test_round_loop import results

EVERYTHING = dict(
    feature_skew="noise",
    feature_skew_level=0.4,
    straggler_fraction=0.5,
    local_epochs_min=1,
    local_epochs=2,
    dropout=0.25,
)


# ----------------------------------------------------------------------- the draws
def test_round_work_draws_stragglers_their_steps_and_dropouts_from_the_system_stream():
    config = tiny(n_parties=8, straggler_fraction=0.5, dropout=0.3, straggler_policy="drop")
    drawn = list(range(8))
    full = [10, 12, 9, 30, 7, 10, 11, 8]
    work = draw_round_work(drawn, full, full, config, numpy_stream(0, "system"))
    again = draw_round_work(drawn, full, full, config, numpy_stream(0, "system"))
    assert work == again  # one seed, one draw
    assert len(work.stragglers) == 4  # round(8 * 0.5)
    # drop: neither the stragglers nor the dropped report
    assert set(work.reporting) == set(drawn) - set(work.stragglers) - set(work.dropped)
    partial = draw_round_work(
        drawn, full, full, config.replace(straggler_policy="partial"), numpy_stream(0, "system")
    )
    assert partial.stragglers == work.stragglers
    for party in partial.stragglers:
        if party in partial.reporting:
            assert 1 <= partial.step_limit.get(party, full[party]) <= full[party]
    assert set(partial.reporting) == set(drawn) - set(partial.dropped)


def test_without_system_heterogeneity_everyone_reports_and_nothing_is_drawn():
    rng = numpy_stream(0, "system")
    before = rng.bit_generator.state
    assert draw_round_work([0, 2], [5, 5], [5, 5], tiny(), rng) == RoundWork([0, 2])
    assert rng.bit_generator.state == before


def test_a_straggler_doing_k_steps_equals_a_party_that_does_k_steps_by_construction(
    synthetic, monkeypatch
):
    """A party cut to one epoch of its E=2 plan trains exactly as the same party of an
    E=1 run (its plan's first epoch is the E=1 plan: the same draws, in the same order,
    for a run of one party), so round 1 is identical to the last bit."""

    def one_epoch(drawn, full_steps, per_epoch, config, rng):
        return RoundWork(list(drawn), dict(zip(drawn, per_epoch)), list(drawn))

    one = FederatedRun(tiny(n_parties=1, local_epochs=1, execution="sequential"), synthetic)
    row_one = one.run_round()
    monkeypatch.setattr(round_loop, "draw_round_work", one_epoch)
    cut = FederatedRun(tiny(n_parties=1, local_epochs=2, execution="sequential"), synthetic)
    row_cut = cut.run_round()
    for key, value in one.global_model.state_dict().items():
        assert torch.equal(value, cut.global_model.state_dict()[key]), key
    assert row_cut["test_acc"] == row_one["test_acc"]
    assert row_cut["local_steps_max"] == row_one["local_steps_max"]
    assert row_cut["straggler_parties"] == 1


def test_stragglers_change_neither_partition_nor_init_nor_a_non_stragglers_batches(synthetic):
    plain = FederatedRun(tiny(n_parties=6, execution="sequential"), synthetic)
    straggling = FederatedRun(
        tiny(n_parties=6, execution="sequential", straggler_fraction=0.5), synthetic
    )
    assert all(np.array_equal(a, b) for a, b in zip(plain.partition, straggling.partition))
    for key, value in plain.global_model.state_dict().items():
        assert torch.equal(value, straggling.global_model.state_dict()[key])
    drawn = plain.draw_parties()
    assert straggling.draw_parties() == drawn
    work, plan = straggling._round_plan(drawn)
    _, full = plain._round_plan(drawn)
    assert len(work.stragglers) == 3
    for mine, theirs in zip(plan, full):
        if mine.party in work.stragglers:
            assert mine.steps <= theirs.steps
            assert torch.equal(mine.index, theirs.index[: mine.index.shape[0]])
        else:
            assert mine.steps == theirs.steps and torch.equal(mine.index, theirs.index)


def test_rows_record_each_rounds_work(synthetic):
    config = tiny(n_parties=6, rounds=3, straggler_fraction=0.5, straggler_policy="drop")
    rows = list(round_loop.run_rounds(config, synthetic))
    for row in rows:
        assert row["straggler_parties"] == 3
        assert row["reporting_parties"] == 3  # the stragglers were dropped
        assert row["dropped_parties"] == 0
        assert row["local_steps_min"] <= row["local_steps_mean"] <= row["local_steps_max"]
    (plain,) = round_loop.run_rounds(tiny(rounds=1), synthetic)
    assert plain["reporting_parties"] == 4 and plain["straggler_parties"] == 0


def test_a_round_where_nobody_reports_keeps_the_global_model(synthetic, monkeypatch):
    monkeypatch.setattr(
        round_loop,
        "draw_round_work",
        lambda drawn, *_: RoundWork([], {}, [], list(drawn)),
    )
    run = FederatedRun(tiny(), synthetic)
    before = copy.deepcopy(run.global_model.state_dict())
    row = run.run_round()
    assert row["reporting_parties"] == 0 and row["dropped_parties"] == 4
    assert row["bytes_up"] == 0
    for key, value in before.items():
        assert torch.equal(value, run.global_model.state_dict()[key])


# ------------------------------------------------------------ methods see the work
def test_fednova_normalises_by_the_steps_stragglers_actually_took(synthetic, monkeypatch):
    """x_new = x - tau_eff * sum_i p_i (x - y_i) / a_i with a_i from each party's real
    step count (momentum-corrected), by hand from the contributions."""
    from federated.algorithms.fednova import NormalizedAverage

    seen = []
    original_add = NormalizedAverage.add

    def add(self, contribution):
        seen.append(
            (
                contribution.steps,
                contribution.weight,
                {k: v.clone() for k, v in contribution.weights.items()},
            )
        )
        original_add(self, contribution)

    monkeypatch.setattr(NormalizedAverage, "add", add)
    config = tiny(algorithm="fednova", n_parties=6, straggler_fraction=0.5, execution="sequential")
    run = FederatedRun(config, synthetic)
    x = {k: v.clone() for k, v in run.global_model.state_dict().items()}
    row = run.run_round()
    steps = [s for s, _, _ in seen]
    assert len(set(steps)) > 1  # the stragglers did less
    assert row["local_steps_min"] == min(steps) and row["local_steps_max"] == max(steps)
    a = [normalizing_factor(s, config.momentum) for s in steps]
    tau_eff = sum(p * ai for (_, p, _), ai in zip(seen, a))
    for key, value in x.items():
        if not value.is_floating_point():
            continue
        update = sum(p * (value - y[key]) / ai for (_, p, y), ai in zip(seen, a))
        expected = value - tau_eff * update
        torch.testing.assert_close(run.global_model.state_dict()[key], expected)


# -------------------------------------------------------------------- feature skew
class RecordingFedAvg(FedAvg):
    """FedAvg that keeps every batch each party's loss saw (party -> list of x)."""

    name = "recording"
    packable = True
    batches: ClassVar[dict[int, list[torch.Tensor]]] = {}

    def loss(self, job, out, x, y):
        RecordingFedAvg.batches.setdefault(job.party, []).append(x.detach().clone())
        return super().loss(job, out, x, y)


def _seen(config: RunConfig, data) -> dict[int, torch.Tensor]:
    RecordingFedAvg.batches = {}
    FederatedRun(config, data).run_round()
    return {party: torch.cat(xs) for party, xs in RecordingFedAvg.batches.items()}


def test_party_i_sees_noise_of_std_level_i_over_n_on_its_training_batches(fmnist):
    """Same batches with and without the skew (its noise draws from no other stream);
    their difference, on the 0..1 pixel scale, has std level·i/N for party i."""
    base = short_run(
        "fmnist",
        parties=4,
        rounds=1,
        fractions=(0.05, 0.05),
        algorithm="tests.test_heterogeneity:RecordingFedAvg",
        execution="sequential",
    )
    clean = _seen(RunConfig(**base), fmnist)
    noisy = _seen(RunConfig(**base, feature_skew="noise", feature_skew_level=0.8), fmnist)
    std = 0.3530  # Fashion-MNIST's pixel std (federated/data/catalog.py)
    for party in range(4):
        noise = (noisy[party] - clean[party]) * std  # back to the 0..1 pixel scale
        assert float(noise.std()) == pytest.approx(0.8 * party / 4, rel=0.02, abs=1e-6)
        assert abs(float(noise.mean())) < 0.01


def test_rotation_turns_each_partys_images_by_its_own_angle(synthetic):
    skew = FeatureSkew("rotation", 30.0, 4, seed=0)
    again = FeatureSkew("rotation", 30.0, 4, seed=0)
    assert np.array_equal(skew.angles, again.angles)
    assert all(-30 <= a <= 30 for a in skew.angles) and len(set(skew.angles)) == 4
    config = tiny(algorithm="tests.test_heterogeneity:RecordingFedAvg", execution="sequential")
    clean = _seen(config, synthetic)
    turned = _seen(config.replace(feature_skew="rotation", feature_skew_level=30.0), synthetic)
    for party in clean:
        assert clean[party].shape == turned[party].shape
        # nearest-neighbour rotation by a degree or two moves no pixel of a 32x32 image
        if abs(skew.angle(party)) > 5:
            assert not torch.equal(clean[party], turned[party]), party


def test_the_test_set_stays_clean(synthetic):
    plain = FederatedRun(tiny(), synthetic)
    skewed = FederatedRun(tiny(feature_skew="noise", feature_skew_level=1.0), synthetic)
    assert torch.equal(plain.test_x, skewed.test_x)
    plain_scores = plain.evaluation.test_scores(plain.global_model).values
    assert plain_scores == skewed.evaluation.test_scores(skewed.global_model).values


# ------------------------------------------------ determinism, resume, execution paths
@pytest.mark.parametrize("execution", ["packed", "sequential"])
@pytest.mark.parametrize(
    "settings",
    [EVERYTHING, dict(feature_skew="rotation", feature_skew_level=20.0, dropout=0.3)],
    ids=["noise+stragglers+epochs+dropout", "rotation+dropout"],
)
def test_new_settings_are_deterministic_and_resume_exactly(
    settings, execution, synthetic, tmp_path
):
    # parties of 125 to 229 samples: 1 to 3 full batches of 64 each round
    config = tiny(
        rounds=3, n_parties=6, algorithm="scaffold", execution=execution, **settings,
    )  # fmt: skip
    straight = results(list(round_loop.run_rounds(config, synthetic)))
    assert straight == results(list(round_loop.run_rounds(config, synthetic)))
    assert restored_results(config, synthetic, tmp_path) == straight


@pytest.mark.parametrize("algorithm", ["fedavg", "moon", "fednova", "scaffold"])
def test_packed_equals_sequential_with_the_new_settings(algorithm, synthetic):
    config = tiny(rounds=2, n_parties=6, algorithm=algorithm, **EVERYTHING)
    runs = {}
    for execution in ("packed", "sequential"):
        run = FederatedRun(config.replace(execution=execution), synthetic)
        rows = [run.run_round() for _ in range(2)]
        runs[execution] = (run, rows)
    (packed, packed_rows), (sequential, sequential_rows) = runs["packed"], runs["sequential"]
    for a, b in zip(packed_rows, sequential_rows):
        for key in ("reporting_parties", "straggler_parties", "dropped_parties"):
            assert a[key] == b[key]
        assert a["local_steps_mean"] == b["local_steps_mean"]
    worst = max(
        float((v - sequential.global_model.state_dict()[k]).abs().max())
        for k, v in packed.global_model.state_dict().items()
        if v.is_floating_point()
    )
    assert worst <= 1e-5, worst


# ---------------------------------------------------------------- checks, warnings
@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("feature_skew", "blur", "one of none, noise, rotation"),
        ("feature_skew_level", -1.0, "a number >= 0"),
        ("straggler_fraction", 1.5, "a number in [0, 1]"),
        ("straggler_policy", "wait", "one of partial, drop"),
        ("dropout", 1.0, "a probability in [0, 1)"),
        ("local_epochs_min", 3, "an integer in [1, local_epochs=2]"),
    ],
)
def test_bad_heterogeneity_values_are_one_line_errors(field, value, allowed):
    with pytest.raises(ConfigError) as caught:
        tiny(local_epochs=2, **{field: value})
    message = str(caught.value)
    assert "\n" not in message and field in message and allowed in message


def test_inert_heterogeneity_settings_are_warned():
    lines = inert_settings(
        RunConfig(feature_skew_level=0.5, straggler_policy="drop", dataset="synthetic")
    )
    assert any("feature_skew_level=0.5 has no effect" in line for line in lines)
    assert any("straggler_policy='drop' has no effect" in line for line in lines)
    assert inert_settings(RunConfig(feature_skew="noise", feature_skew_level=0.5)) == []


# ----------------------------------------------------------------- example images
def test_the_driver_writes_example_images_that_the_report_draws(tmp_path):
    from analysis.figures.feature_examples import feature_examples_figure, read_feature_examples
    from study.feature_examples import IMAGES_PER_PARTY, write_feature_examples

    configs = [
        (f"t{i}", tiny(n_parties=8, feature_skew=kind, feature_skew_level=level))
        for i, (kind, level) in enumerate([("noise", 0.5), ("rotation", 40.0), ("none", 0.0)])
    ]
    assert write_feature_examples(configs, tmp_path)
    arrays = read_feature_examples(tmp_path)
    images = arrays["images"]
    # two skewed settings (none shows nothing), six parties spread over 0..7
    assert images.shape == (2, 6, IMAGES_PER_PARTY, 3, 32, 32)
    assert list(arrays["settings"]) == ["noise 0.5", "rotation 40"]
    assert arrays["parties"][0].tolist() == [0, 1, 3, 4, 6, 7]
    assert arrays["levels"][0].tolist() == [0.5 * p / 8 for p in (0, 1, 3, 4, 6, 7)]
    assert images.min() >= 0.0 and images.max() <= 1.0
    figure = feature_examples_figure(arrays)
    assert len(figure.axes) == 2 * IMAGES_PER_PARTY * 6
    assert not write_feature_examples(configs[2:], tmp_path / "none")
    assert read_feature_examples(tmp_path / "none") is None
    (tmp_path / "feature_examples.npz").write_bytes(b"damaged")
    assert read_feature_examples(tmp_path) is None
