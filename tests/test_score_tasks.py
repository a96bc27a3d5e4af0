"""Score tasks (image assessment): a folder with scores.csv trains regression heads on
its score and attributes, every method runs on it on both execution paths with resume
exact, and each evaluated round reports the field's metrics (MAE, RMSE, SRCC, PLCC and
the binary accuracy at a threshold).  The runs use a real image-quality task built from
Fashion-MNIST by examples/build_iqa_task.py."""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from federated.config.data_checks import with_data_checked
from federated.config.run_config import ConfigError, RunConfig
from federated.data.catalog import DatasetSpec
from federated.data.folder_dataset import folder_identity, load_folder
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.engine.run_files import party_columns, party_rows
from federated.tasks.base import build_task
from federated.tasks.score.task import ScoreParams, score_metrics
from federated.trainable import load_run_state, save_run_state
from tests.short_runs import folder_run
from tests.test_iqa_builder import load_builder
from tests.test_round_loop import results

FMNIST = Path("/usr/share/datasets/fashion-mnist")
needs_fmnist = pytest.mark.skipif(
    not (FMNIST / "train-images-idx3-ubyte.gz").is_file(),
    reason="needs Debian's dataset-fashion-mnist",
)
SCORE_COLUMNS = ("test_mae", "test_rmse", "test_srcc", "test_plcc")


ACC_WORD = re.compile(r"_acc(?:$|_|/)")


@pytest.fixture(scope="module")
def iqa_tree(tmp_path_factory) -> Path:
    """A real IQA task: 40 training and 10 test Fashion-MNIST sources, 3 distortions x 5
    levels, one party per distortion (600 training images, 150 test images)."""
    out = tmp_path_factory.mktemp("iqa") / "task"
    assert load_builder().main([str(out), "--train-sources", "40", "--test-sources", "10"]) == 0
    return out


def score_config(tree: Path, tmp_path: Path, **overrides) -> RunConfig:
    values = folder_run(tree, tmp_path / "cache", batch_size=32, lr=0.1) | overrides
    return with_data_checked(RunConfig.from_dict(values))


# ------------------------------------------------------------------- the objective
def test_score_metrics_by_hand():
    predicted = np.array([0.1, 0.4, 0.35, 0.8])
    truth = np.array([0.0, 0.5, 0.5, 1.0])
    m = score_metrics(predicted, truth, loss_sum=0.2, threshold=0.5)
    assert m["bin_acc"] == 0.5  # same side of 0.5: images 1 and 4
    assert "acc" not in m  # classification's top-1 accuracy: never a score column
    assert m["loss"] == pytest.approx(0.05)
    assert m["mae"] == pytest.approx((0.1 + 0.1 + 0.15 + 0.2) / 4)
    assert m["rmse"] == pytest.approx(math.sqrt((0.01 + 0.01 + 0.0225 + 0.04) / 4))
    # ranks [1, 3, 2, 4] against [1, 2.5, 2.5, 4] (ties share the average rank)
    assert m["srcc"] == pytest.approx(4.5 / math.sqrt(5 * 4.5))
    assert m["plcc"] == pytest.approx(np.corrcoef(predicted, truth)[0, 1])
    flat = score_metrics(np.full(4, 0.3), truth, 0.0, 0.5)
    assert math.isnan(flat["srcc"]) and math.isnan(flat["plcc"])  # a constant prediction


def test_the_supervised_loss_is_cross_entropy_on_labels_and_the_score_loss_on_scores():
    torch.manual_seed(0)
    spec = DatasetSpec("hand", 3, 1, 2, 2, 10, 10, "simple-cnn", (0.5,), (0.25,))
    logits = torch.randn(6, 3)
    labels = torch.tensor([0, 2, 1, 1, 0, 2])
    classification = build_task("classification", None, spec)
    assert torch.equal(classification.loss(logits, labels), F.cross_entropy(logits, labels))

    def score_loss(kind: str, outputs: torch.Tensor, targets: torch.Tensor) -> float:
        task = build_task("score", ScoreParams(score_loss=kind), spec)
        return float(task.loss(outputs, targets))

    targets = torch.rand(6, 3)
    assert score_loss("mse", logits, targets) == pytest.approx(
        float(((logits - targets) ** 2).mean())
    )
    assert score_loss("l1", logits, targets) == pytest.approx(
        float((logits - targets).abs().mean())
    )
    small = targets + 0.05  # within Huber's delta (0.1): half the squared error
    assert score_loss("huber", small, targets) == pytest.approx(0.5 * 0.05**2, rel=1e-4)


# ------------------------------------------------------------------------- the data
@needs_fmnist
def test_a_scores_folder_loads_as_a_score_task(iqa_tree, tmp_path):
    data = load_folder(f"folder:{iqa_tree}", data_root=tmp_path).data
    spec = data.spec
    assert (spec.task, spec.target_names) == ("score", ("score", "blur", "noise", "jpeg"))
    assert spec.party_names == ("blur", "jpeg", "noise") and spec.outputs == 4
    assert data.train_y.dtype == torch.float32 and tuple(data.train_y.shape) == (600, 4)
    assert tuple(data.test_y.shape) == (150, 4)
    levels = sorted({round(v, 6) for v in data.train_y[:, 0].tolist()})
    assert levels == [0.0, 0.2, 0.4, 0.6, 0.8]  # 1 - level/5, levels 1..5
    assert torch.bincount(data.train_parties).tolist() == [200, 200, 200]
    identity = folder_identity(f"folder:{iqa_tree}")
    assert identity["task"] == "score" and identity["targets"] == list(spec.target_names)


@needs_fmnist
def test_an_edited_score_is_a_new_fingerprint(iqa_tree, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(iqa_tree, copy)
    before = folder_identity(f"folder:{copy}")["fingerprint"]
    scores = copy / "scores.csv"
    lines = scores.read_text().splitlines()
    path, _old, *rest = lines[1].split(",")  # path,score,blur,noise,jpeg
    lines[1] = ",".join([path, "0.123", *rest])
    scores.write_text("\n".join(lines) + "\n")
    assert folder_identity(f"folder:{copy}")["fingerprint"] != before


@needs_fmnist
@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (dict(partition="dirichlet"), r"partition='dirichlet' \(allowed: natural, iid or quantity"),
        (dict(primary_metric="top5"), r"primary_metric='top5' \(allowed: for a score task one of"),
        # the binary accuracy's name before it had its own: refused, naming today's
        (
            dict(primary_metric="acc"),
            r"primary_metric='acc' \(allowed: for a score task one of srcc, plcc, mae, rmse, "
            r"bin_acc; acc is now bin_acc\)$",
        ),
        (dict(task="classification"), r"task='classification' \(allowed: score"),
        (dict(score_loss="ce"), r"score_loss='ce' \(allowed: one of mse, l1, huber"),
        # the tree's scores are 1 - level/5 in [0, 0.8]: 2.0 and 0.0 split no image
        (dict(score_threshold=2.0), r"score_threshold=2.0 \(allowed: a score in \(0, 0.8\]"),
        (dict(score_threshold=0.0), r"score_threshold=0.0 \(allowed: a score in \(0, 0.8\]"),
    ],
)
def test_bad_score_settings_are_refused_naming_the_field(iqa_tree, tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message):
        score_config(iqa_tree, tmp_path, **overrides)


def test_a_classification_dataset_is_not_a_score_task():
    with pytest.raises(ConfigError, match=r"task='score' \(allowed: classification"):
        with_data_checked(RunConfig.from_dict(dict(dataset="synthetic", task="score")))
    config = with_data_checked(RunConfig.from_dict(dict(dataset="synthetic")))
    assert (config.task, config.primary_metric) == ("classification", "acc")


# ------------------------------------------------------------------------- the runs
@needs_fmnist
@pytest.mark.parametrize("algorithm", ["fedavg", "fedprox", "moon", "solo"])
def test_every_method_trains_on_scores_on_both_paths(iqa_tree, tmp_path, algorithm):
    config = score_config(iqa_tree, tmp_path, algorithm=algorithm, val_fraction=0.1)
    assert (config.task, config.primary_metric) == ("score", "srcc")
    packed = list(run_rounds(config))
    sequential = list(run_rounds(config.replace(execution="sequential")))
    for rows in (packed, sequential):
        last = rows[-1]
        for column in (*SCORE_COLUMNS, "test_bin_acc", "test_loss", "val_mae", "val_bin_acc"):
            assert math.isfinite(last[column]), (column, last)
        assert 0 <= last["test_bin_acc"] <= 1 and -1 <= last["test_srcc"] <= 1
        # the binary accuracy says what it is: no score column is named acc
        assert not [k for k in last if k.split("_", 1)[-1].startswith("acc")], last
    # packed and sequential differ only in float summation order
    for a, b in zip(packed, sequential):
        assert abs(a["test_mae"] - b["test_mae"]) < 0.02, (a["test_mae"], b["test_mae"])


@needs_fmnist
def test_a_real_iqa_task_is_learned(iqa_tree, tmp_path):
    """FedAvg on the three distortion parties: the predicted quality comes to rank the
    images (SRCC well above 0) and its error falls below the constant predictor's."""
    config = score_config(iqa_tree, tmp_path, rounds=10, local_epochs=8, batch_size=16)
    rows = list(run_rounds(config))
    truth = load_folder(f"folder:{iqa_tree}", data_root=tmp_path / "cache").data.test_y[:, 0]
    constant_mae = float((truth - truth.mean()).abs().mean())
    # measured on this tree: SRCC 0.06 after round 1, 0.60 after round 10; MAE 0.218
    # against the constant predictor's 0.240
    assert rows[0]["test_srcc"] < 0.2 and rows[-1]["test_srcc"] > 0.45, [
        r["test_srcc"] for r in rows
    ]
    assert rows[-1]["test_mae"] < constant_mae - 0.01, (rows[-1]["test_mae"], constant_mae)


@needs_fmnist
@pytest.mark.parametrize("execution", ["packed", "sequential"])
def test_a_restored_score_run_continues_exactly(iqa_tree, tmp_path, execution):
    config = score_config(
        iqa_tree,
        tmp_path,
        algorithm="moon",
        execution=execution,
        val_fraction=0.1,
        party_test_fraction=0.1,
    )
    straight = results(list(run_rounds(config)))
    first = FederatedRun(config)
    head = results([first.run_round()])
    save_run_state(first, tmp_path / "ckpt")
    restored = FederatedRun(config)
    restored.load_state_dict(load_run_state(tmp_path / "ckpt"))
    tail = results([restored.run_round() for _ in range(2)])
    assert head + tail == straight
    assert straight[-1]["val_srcc"] is not None and straight[-1]["party_bin_acc_mean"] is not None


@needs_fmnist
def test_per_party_outcomes_come_from_the_parties_own_test_splits(iqa_tree, tmp_path):
    config = score_config(iqa_tree, tmp_path, rounds=1)
    assert "party_bin_acc_mean" not in next(iter(run_rounds(config)))  # no classes to re-weight
    config = score_config(iqa_tree, tmp_path, rounds=1, party_test_fraction=0.2)
    run = FederatedRun(config)
    row = run.run_round()
    assert 0 <= row["party_bin_acc_min"] <= row["party_bin_acc_mean"] <= 1
    assert "party_acc_mean" not in row
    # parties.csv: each party's own-image binary accuracy, MAE, RMSE, SRCC and PLCC, every
    # metric on the own test split under one family's name (party_test_<stem>), the
    # per-party metric too (issue 66: party_miou once stood beside party_test_dice)
    assert party_columns(run) == (
        "round",
        "party",
        "party_bin_acc",
        "party_samples",
        "party_test_samples",
        "party_test_bin_acc",
        "party_test_mae",
        "party_test_rmse",
        "party_test_srcc",
        "party_test_plcc",
    )
    rows = party_rows(run, 1, scored=True, validated=False)
    assert [r["party_test_samples"] for r in rows] == [40, 40, 40]  # 20% of 200 each
    assert all(0 < r["party_test_mae"] < 1 and -1 <= r["party_test_srcc"] <= 1 for r in rows)
    assert [r["party_test_bin_acc"] for r in rows] == [r["party_bin_acc"] for r in rows]


@needs_fmnist
def test_the_binary_accuracy_is_named_as_such_in_rows_console_and_parties(
    iqa_tree, tmp_path, capsys
):
    """``--primary-metric bin_acc`` ranks by the binary accuracy; the rows, the console
    line and parties.csv name it bin_acc, and no column of the run is named acc."""
    import pandas as pd

    from federated.run import main as run_main

    out = tmp_path / "rows.csv"
    code = run_main(
        [
            *("--dataset", f"folder:{iqa_tree}", "--partition", "natural", "--rounds", "1"),
            *("--primary-metric", "bin_acc", "--party-test-fraction", "0.2"),
            *("--val-fraction", "0.1", "--val-split", "party", "--batch-size", "32"),
            *("--threads", "1", "--device", "cpu", "--data-root", str(tmp_path / "cache")),
            *("--out", str(out)),
        ]
    )
    assert code == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("round"))
    assert "test_bin_acc " in line and "test_acc " not in line and "test_srcc " in line
    rows = pd.read_csv(out)
    assert rows["primary_metric"].iloc[0] == "bin_acc"
    assert 0 <= rows["test_bin_acc"].iloc[0] <= 1 and 0 <= rows["val_bin_acc"].iloc[0] <= 1
    assert 0 <= rows["party_bin_acc_mean"].iloc[0] <= 1
    # a column of an accuracy (``_acc`` as a word: dp_accountant is none)
    assert not [c for c in rows if ACC_WORD.search(c) and "bin_acc" not in c], list(rows)
    parties = pd.read_csv(tmp_path / "rows.parties.csv")
    assert {"party_bin_acc", "party_val_bin_acc", "party_test_srcc"} <= set(parties)
    assert not [c for c in parties if ACC_WORD.search(c) and "bin_acc" not in c], list(parties)


# ---------------------------------------------------------------------- studies
@needs_fmnist
def test_a_study_file_checks_fixed_and_axes_on_its_own_dataset(iqa_tree):
    """[fixed] and the axes are checked with the study's dataset: partition = "natural"
    on a folder of parties is allowed (it was refused against the default fmnist), a
    class skew on a score folder is refused naming the axis value."""
    from search_spaces.study_file import StudyFileError, study_from_dict

    base = {
        "name": "iqa",
        "dataset": f"folder:{iqa_tree}",
        "fixed": {"partition": "natural", "lr": 0.1},
        "axes": [{"name": "algorithm", "values": ["fedavg", "moon"]}],
    }
    study = study_from_dict(base, "iqa.toml")
    assert study.dataset == f"folder:{iqa_tree}" and study.fixed["partition"] == "natural"
    skewed = {
        **base,
        "fixed": {"lr": 0.1},
        "axes": [{"name": "partition", "values": ["iid", "dirichlet"]}],
    }
    with pytest.raises(
        StudyFileError,
        match=r"axes\[0\]\.values\[1\] = 'dirichlet' \(allowed: natural, iid or quantity",
    ):
        study_from_dict(skewed, "iqa.toml")


def test_a_failure_no_check_knew_is_one_line_and_its_traceback_a_file(
    tmp_path, monkeypatch, capsys
):
    """A bug reaching study.sweep's main is one error line naming the exception and the
    file with its traceback, exit status 1 (the IQA sweep's preflight once raised numpy's
    'object too deep' from here with 40 lines of traceback)."""
    import federated.cli.internal_error as internal_error
    from study import sweep

    monkeypatch.setattr(internal_error, "ERRORS_FOLDER", tmp_path / "errors")

    def broken(args):
        raise ValueError("object too deep for desired array")

    monkeypatch.setattr(sweep, "plan_sweep", broken)
    assert sweep.main(["moon_mu", "--dry-run"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert err[0].startswith(
        "error: study.sweep failed inside fedsweep (ValueError: object too deep for desired "
        "array); a bug, please report it with the command line; traceback in "
    )
    (saved,) = (tmp_path / "errors").iterdir()
    assert "Traceback" in saved.read_text() and "def broken" not in err[0]
