"""Per-party outcomes (federated/evaluation/party_scores.py) and Fig. 2's representations
(federated/evaluation/representations.py): hand-computed scores, the row columns, the run files,
and runs whose results do not move with either option."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
import torch
from torch import nn

from federated.config.checks import parse_rounds
from federated.config.run_config import ConfigError, RunConfig
from federated.data import Augmenter
from federated.data.catalog import DatasetSpec
from federated.engine.round_loop import FederatedRun
from federated.engine.run_files import RunFiles
from federated.evaluation.party_scores import (
    PartyScorer,
    party_accuracies,
    scoring_due,
    summary,
    worst_decile,
)
from federated.evaluation.representations import PROBE_SIZE, probe_indices, projections
from federated.evaluation.scoring import evaluate
from federated.models import ModelOutput
from federated.run import main as run_main
from federated.tasks.base import build_task
from tests.conftest import tiny

SPEC = DatasetSpec("hand", 3, 1, 2, 2, 100, 10, "simple-cnn", (0.5,), (0.25,))
TASK = build_task("classification", None, SPEC)


class PixelClassifier(nn.Module):
    """Predicts the class written in an image's first pixel (0, 1 or 2 as 0, 100, 200)."""

    def __init__(self, augmenter: Augmenter) -> None:
        super().__init__()
        codes = torch.tensor([0.0, 100.0, 200.0]).view(3, 1, 1, 1)
        self.register_buffer("codes", augmenter.normalize(codes)[:, 0, 0, 0])

    def forward(self, x: torch.Tensor) -> ModelOutput:
        logits = -(x[:, 0, 0, 0, None] - self.codes).abs()
        return ModelOutput(x.flatten(1), x.flatten(1), logits)


def hand_test_set() -> tuple[torch.Tensor, torch.Tensor]:
    """10 test images: class 0 ×4 (3 predicted right), class 1 ×2 (1 right), class 2 ×4
    (none right): per-class accuracies 0.75, 0.5, 0.0; overall 4/10."""
    labels = torch.tensor([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    predicted = torch.tensor([0, 0, 0, 1, 1, 0, 0, 1, 1, 0])
    images = (predicted * 100).to(torch.uint8).view(10, 1, 1, 1).expand(10, 1, 2, 2).clone()
    return images, labels


def test_two_parties_by_hand():
    """Party A holds classes (30, 10, 0), party B (0, 20, 60): shares (.75, .25, 0) and
    (0, .25, .75), so A = .75·.75 + .25·.5 = 0.6875 and B = .25·.5 + .75·0 = 0.125."""
    augmenter = Augmenter(SPEC, torch.device("cpu"))
    model = PixelClassifier(augmenter)
    images, labels = hand_test_set()
    scores = evaluate(model, images, labels, augmenter, 4, TASK.accumulator())
    assert scores.values["acc"] == 0.4
    assert scores.class_correct.tolist() == [3, 1, 0] and scores.class_total.tolist() == [4, 2, 4]

    counts = np.array([[30, 10, 0], [0, 20, 60]])
    scorer = PartyScorer(counts, n_classes=3, every=1, rounds=1)
    scorer.record(1, scores)
    np.testing.assert_allclose(scorer.last, [0.6875, 0.125])
    columns = scorer.columns(1)
    assert columns == pytest.approx(
        {
            "party_acc_mean": 0.40625,
            "party_acc_std": 0.28125,  # population std: |0.6875 - 0.125| / 2
            "party_acc_min": 0.125,
            "party_acc_worst10": 0.125,  # ceil(2 / 10) = 1 party
        }
    )


def test_own_models_score_their_own_mix():
    """SOLO: each party's own model on its own mix; the row summarises them."""
    augmenter = Augmenter(SPEC, torch.device("cpu"))
    images, labels = hand_test_set()
    scorer = PartyScorer(np.array([[30, 10, 0], [0, 20, 60]]), 3, every=1, rounds=1)
    scores = evaluate(PixelClassifier(augmenter), images, labels, augmenter, 4, TASK.accumulator())
    scorer.record(1, scores, party=1)
    scorer.record(1, scores, party=0)
    assert scorer.columns(1)["party_acc_mean"] == pytest.approx(0.40625)
    np.testing.assert_allclose(scorer.last, [0.6875, 0.125])


def test_classes_missing_from_the_test_set_are_renormalised():
    shares = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    # class 1 has no test sample: party 0 is scored on class 0 alone, party 1 on nothing
    scores = party_accuracies(shares, [2, 0, 0], [4, 0, 0])
    assert scores[0] == 0.5 and math.isnan(scores[1])
    assert summary(scores)["party_acc_mean"] == 0.5


def test_worst_decile_and_the_schedule():
    values = [0.9, 0.1, 0.5, 0.2, 0.3, 0.8, 0.7, 0.6, 0.4, 0.95, 0.05, 0.85]
    assert worst_decile(values) == pytest.approx((0.05 + 0.1) / 2)  # ceil(12 / 10) = 2
    assert worst_decile(values[:10]) == pytest.approx(0.1)  # its lowest of 10
    assert [r for r in range(1, 8) if scoring_due(r, 3, 7)] == [3, 6, 7]
    assert not any(scoring_due(r, 0, 7) for r in range(1, 8))


def test_options_are_validated():
    assert parse_rounds("10, 3,3", 10) == (3, 10)
    with pytest.raises(ConfigError, match=r"representations_at='11'"):
        tiny(rounds=10, representations_at="11")
    with pytest.raises(ConfigError, match=r"representations_at='a'"):
        tiny(representations_at="a")
    with pytest.raises(ConfigError, match=r"party_scores_every=-1"):
        tiny(party_scores_every=-1)


def results(rows):
    keys = ("test_acc", "test_loss", "train_loss", "con_loss", "cum_bytes")
    return [[r[k] for k in keys] for r in rows]


@pytest.mark.parametrize("algorithm", ["moon", "solo"])
def test_runs_do_not_change_with_the_options(synthetic, algorithm):
    plain = FederatedRun(tiny(algorithm=algorithm, party_scores_every=0), synthetic)
    plain_rows = [plain.run_round() for _ in range(2)]
    assert not any(k.startswith("party_acc_") for k in plain_rows[0])
    run = FederatedRun(tiny(algorithm=algorithm, representations_at="1,2"), synthetic)
    rows = [run.run_round() for _ in range(2)]
    assert results(rows) == results(plain_rows)
    # the per-party columns are the summary of the run's per-party scores
    assert rows[-1]["party_acc_mean"] == pytest.approx(float(np.nanmean(run.party_scorer.last)))
    assert rows[-1]["party_acc_min"] == pytest.approx(float(np.nanmin(run.party_scorer.last)))
    # every test image probed: tiny()'s 500
    assert run.probe.last["round"] == 2 and run.probe.last["local_z"].shape == (500, 32)


def test_sequential_execution_captures_the_same_representations(synthetic):
    captures = []
    for execution in ("packed", "sequential"):
        run = FederatedRun(
            tiny(algorithm="moon", representations_at="2", execution=execution), synthetic
        )
        run.run_round(), run.run_round()
        captures.append(run.probe.last)
    np.testing.assert_allclose(captures[0]["global_z"], captures[1]["global_z"], atol=1e-4)
    np.testing.assert_allclose(captures[0]["local_z"], captures[1]["local_z"], atol=1e-4)
    assert captures[0]["party"] == captures[1]["party"] == 0


def test_the_probe_collects_each_batchs_projection_through_the_evaluation_loop(synthetic):
    """The probe's ``z`` is the model's ``projection`` batch by batch in eval mode, bit
    for bit, and the model's training mode is put back."""
    run = FederatedRun(tiny(algorithm="moon"), synthetic)
    model = run.global_model.train()
    images = run.test_x[:70]
    with torch.no_grad():
        model.eval()
        want = torch.cat(
            [model(run.augmenter.normalize(images[s : s + 32])).projection for s in (0, 32, 64)]
        )
        model.train()
    got = projections(model, images, run.augmenter, 32)
    assert got.dtype == np.float32 and got.shape == (70, 32)
    assert np.array_equal(got, want.numpy()) and model.training


def test_probe_is_fixed_and_leaves_the_global_stream_alone():
    torch.manual_seed(5)
    before = torch.rand(3)
    torch.manual_seed(5)
    first = probe_indices(5000)
    assert torch.equal(torch.rand(3), before)
    assert torch.equal(first, probe_indices(5000)) and len(first) == PROBE_SIZE
    assert torch.equal(probe_indices(50), torch.arange(50))


def test_federated_run_writes_the_per_party_columns_and_files(tmp_path, capsys):
    out = tmp_path / "rows.csv"
    argv = [
        "--dataset", "synthetic", "--device", "cpu", "--rounds", "2", "--local-epochs", "1",
        "--n-parties", "4", "--data-fraction", "0.04", "--test-fraction", "0.1",
        "--threads", "1", "--out-dim", "32", "--party-scores-every", "2",
        "--representations-at", "1", "--out", str(out), "--quiet",
    ]  # fmt: skip
    assert run_main(argv) == 0
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert rows[0]["party_acc_mean"] == "nan"  # round 1 is not scored with every=2
    with (tmp_path / "rows.parties.csv").open() as fh:
        parties = list(csv.DictReader(fh))
    assert [(p["round"], p["party"]) for p in parties] == [("2", str(i)) for i in range(4)]
    accs = [float(p["party_acc"]) for p in parties]
    assert float(rows[1]["party_acc_mean"]) == pytest.approx(np.mean(accs))
    assert float(rows[1]["party_acc_worst10"]) == pytest.approx(min(accs))
    with np.load(tmp_path / "rows.representations" / "round_0001.npz") as npz:
        assert npz["global_z"].shape == npz["local_z"].shape == (1000, 32)  # all 1,000 tested
        assert int(npz["round"]) == 1 and npz["labels"].shape == (1000,)


def test_a_restored_trial_keeps_its_earlier_rounds(tmp_path, synthetic):
    run = FederatedRun(tiny(rounds=3), synthetic)
    files = RunFiles.in_folder(tmp_path)
    for _ in range(3):
        run.run_round()
        files.record(run)
    again = FederatedRun(tiny(rounds=3), synthetic)
    again.round = 2  # as if restored from round 2's checkpoint
    files = RunFiles.in_folder(tmp_path, start_round=2)
    again.run_round()
    files.record(again)
    with (tmp_path / "parties.csv").open() as fh:
        rounds = [int(r["round"]) for r in csv.DictReader(fh)]
    assert rounds == [1] * 4 + [2] * 4 + [3] * 4


def test_config_fields_are_execution_only():
    from federated.config.run_config import execution_fields

    assert {"party_scores_every", "representations_at"} <= execution_fields()
    assert RunConfig().party_scores_every is None and RunConfig().representations_at is None


@pytest.mark.parametrize(
    ("n_parties", "given", "resolved"),
    [
        (10, None, 1),
        (100, None, 1),
        (101, None, 2),
        (1_000, None, 10),
        (50_000, None, 500),
        (1_000, 1, 1),
        (1_000, 0, 0),
        (10, 3, 3),
    ],
)
def test_default_scoring_cadence_follows_the_party_count(n_parties, given, resolved):
    """Unset, the period averages at most 100 party scorings a round (every round up to
    100 parties: the reference runs score as before); a given value is kept."""
    config = RunConfig(
        dataset="fmnist",
        n_parties=n_parties,
        partition="iid",
        sample_fraction=min(1.0, 10 / n_parties),
        party_scores_every=given,
    ).resolved()
    assert config.party_scores_every == resolved
