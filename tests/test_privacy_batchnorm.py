"""DP-FedAvg and BatchNorm, and a run that diverges under DP: the released running
variances clamped into their valid range (post-processing, docs/privacy.md), the
diverged round's row keeping the epsilon it spent, and the divergence message naming
the clip norm."""

from __future__ import annotations

import math

import torch

from federated.engine.round_loop import FederatedRun
from federated.privacy_accountant import epsilon_after
from federated.run import main as run_main
from tests.conftest import tiny


def _running_variances(run: FederatedRun) -> torch.Tensor:
    state = run.global_model.state_dict()
    return torch.cat([v.flatten() for k, v in state.items() if k.endswith("running_var")])


def test_noised_batchnorm_variances_stay_valid_and_the_run_finite(synthetic):
    """sigma = 1, C = 2, all 4 parties: noise of std 1/2 on each averaged entry, which
    (seed 0) leaves a running variance at -0.33 unclamped, and the test loss NaN; clamped
    at 0 the round is finite and every variance >= 0, the counters integers."""
    config = tiny(
        model="simple-cnn-bn",
        batchnorm="averaged",
        dp_noise_multiplier=1.0,
        dp_clip_norm=2.0,
        dp_delta=1e-3,
    )
    run = FederatedRun(config, synthetic)
    row = run.run_round()
    variances = _running_variances(run)
    assert variances.numel() == 22 and float(variances.min()) >= 0.0
    assert int((variances == 0).sum()) == 1  # the one the noise drove below 0
    assert not row["diverged"] and math.isfinite(row["test_loss"])
    counters = [v for k, v in run.global_model.state_dict().items() if "num_batches" in k]
    assert counters and all(not c.is_floating_point() for c in counters)
    assert row["dp_epsilon"] == epsilon_after(1, 4, run.config.parties_per_round, 1.0, 1e-3)


def test_a_round_that_diverges_after_its_release_keeps_its_epsilon(synthetic):
    """C = 1e30 under sigma = 1: the released model is finite (float32 holds 1e30) but
    its test loss is not; the round was released, so its row says what it spent."""
    config = tiny(dp_noise_multiplier=1.0, dp_clip_norm=1e30, dp_delta=1e-3)
    run = FederatedRun(config, synthetic)
    row = run.run_round()
    assert row["diverged"] and run.finished
    assert row["dp_epsilon"] == epsilon_after(1, 4, run.config.parties_per_round, 1.0, 1e-3)
    assert row["dp_round_clip_norm"] == 1e30
    assert run.hooks.divergence_words() == " with dp_clip_norm=1e+30, dp_noise_multiplier=1"


def test_the_divergence_message_names_the_clip_norm(tmp_path, capsys):
    code = run_main(
        [
            "--dataset", "synthetic", "--rounds", "2", "--n-parties", "4",
            "--data-fraction", "0.04", "--test-fraction", "0.1", "--threads", "1",
            "--device", "cpu", "--dp-noise-multiplier", "1", "--dp-clip-norm", "1e308",
            "--dp-delta", "1e-3", "--quiet", "--out", str(tmp_path / "rows.csv"),
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code != 0
    assert (
        "diverged at round 1 (non-finite loss) with dp_clip_norm=1e+308, dp_noise_multiplier=1"
        in out
    )
