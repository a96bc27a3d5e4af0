"""The next task is one file: a toy third task, defined here and nowhere else, runs
through ``python -m federated.run``, a real two-trial Ray sweep and the report.

The task reads Fashion-MNIST's labels as an ordered scale (0..9): the head gives one
value, trained by the squared error to ``label / 9``; its metrics are the share of images
whose predicted rank is within one class of the label (``within1``, higher is better,
the primary) and the mean absolute rank error (``rank_mae``, lower is better).  It is a
user's task by import path (``task=tests.test_toy_task:OrdinalTask``), with a parameter
of its own (``ordinal_tolerance``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch

from federated.contract.metrics import MetricSpec
from federated.params import MethodParams, describe, non_negative
from federated.tasks.base import Scores, Task, per_party_mean
from tests.short_runs import short_run

TASK = "tests.test_toy_task:OrdinalTask"


@dataclass(frozen=True)
class OrdinalParams(MethodParams):
    ordinal_tolerance: int = field(
        default=1, metadata=describe("ranks within this many classes count as right")
    )

    def check(self) -> None:
        non_negative("ordinal_tolerance", self.ordinal_tolerance)


class OrdinalTask(Task):
    name = "ordinal"
    targets = "classification"  # reads class labels
    has_classes = True  # label-skew partitions apply
    Params = OrdinalParams
    metrics = (
        MetricSpec(
            "within1",
            "ordinal",
            True,
            "within-one accuracy",
            "test within-one accuracy",
            True,
            False,
        ),
        MetricSpec("rank_mae", "ordinal", False, "rank MAE", "test rank MAE", False, False),
    )

    @classmethod
    def head_size(cls, spec) -> int:
        return 1

    @classmethod
    def partition_groups(cls, data):
        return data.train_y.numpy(), data.spec.n_classes

    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return (outputs[:, 0] - targets.float() / (self.spec.n_classes - 1)) ** 2

    def accumulator(self, n_parties: int | None = None):
        return OrdinalAccumulator(self, n_parties or 1, pooled=n_parties is None)


class OrdinalAccumulator:
    def __init__(self, task: OrdinalTask, n: int, pooled: bool) -> None:
        self.task, self.n, self.pooled = task, n, pooled
        self.sums = torch.zeros(4, n, dtype=torch.float64)  # within, |error|, loss, samples

    def update(self, outputs, targets, owner) -> None:
        scale = self.task.spec.n_classes - 1
        rank = (outputs[:, 0].float() * scale).round().clamp(0, scale)
        error = (rank - targets.float()).abs().double()
        within = (error <= self.task.params.ordinal_tolerance).double()
        loss = self.task.per_sample_loss(outputs, targets).double()
        owner = torch.zeros_like(targets) if owner is None else owner
        for row, values in enumerate((within, error, loss, torch.ones_like(loss))):
            self.sums[row].index_add_(0, owner.cpu(), values.cpu())

    def compute(self) -> Scores:
        within, error, loss, samples = self.sums.numpy()
        total = samples.sum()
        values = {
            "within1": within.sum() / total,
            "loss": loss.sum() / total,
            "rank_mae": error.sum() / total,
        }
        if self.pooled:
            return Scores({k: float(v) for k, v in values.items()})
        party = {
            "within1": per_party_mean(within, samples),
            "loss": per_party_mean(loss, samples),
            "rank_mae": per_party_mean(error, samples),
        }
        return Scores({k: float(v) for k, v in values.items()}, party, int((samples > 0).sum()))


def test_a_task_by_import_path_trains_through_the_run_command(tmp_path, capsys):
    from federated.run import main as run_main

    out = tmp_path / "rows.csv"
    code = run_main(
        [
            *("--task", TASK, "--dataset", "fmnist", "--rounds", "2", "--local-epochs", "1"),
            *("--data-fraction", "0.05", "--test-fraction", "0.1", "--n-parties", "4"),
            *("--val-fraction", "0.1", "--party-test-fraction", "0.1", "--lr", "0.05"),
            *("--ordinal-tolerance", "1", "--threads", "1", "--device", "cpu"),
            *("--out", str(out)),
        ]
    )
    assert code == 0
    import pandas as pd

    rows = pd.read_csv(out)
    assert list(rows["round"]) == [1, 2]
    for column in ("test_within1", "test_loss", "test_rank_mae", "val_within1", "val_rank_mae"):
        assert rows[column].notna().all(), column
    assert "test_acc" not in rows  # the task records no accuracy
    # per-party outcomes are named by the task's per-party metric, never acc
    assert rows["party_within1_mean"].between(0, 1).all()
    assert not [c for c in rows if c.startswith("party_acc")], list(rows)
    assert (rows["test_within1"].between(0, 1)).all()
    assert rows["primary_metric"].iloc[0] == "within1" and rows["task"].iloc[0] == TASK
    # the task's own parameter is a flat name like a method's
    assert rows["ordinal_tolerance"].iloc[0] == 1


def test_the_runs_task_sizes_the_head_and_groups_the_partition(fmnist):
    from federated.config.run_config import RunConfig
    from federated.engine.round_loop import FederatedRun

    values = short_run("fmnist", parties=4, rounds=1, fractions=(0.02, 0.05), task=TASK)
    config = RunConfig.from_dict(values).resolved()
    run = FederatedRun(config, fmnist)
    logits = run.global_model(run.augmenter.normalize(run.test_x[:2])).logits
    assert logits.shape == (2, 1)  # OrdinalTask.head_size, not the data's 10 classes
    assert run.class_counts.shape == (4, 10)  # its partition_groups: the labels


def test_a_bad_value_of_the_tasks_parameter_is_refused_in_one_line(tmp_path, capsys):
    from federated.run import main as run_main

    code = run_main(["--task", TASK, "--ordinal-tolerance", "-1", "--rounds", "1"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: invalid config: ordinal_tolerance=-1 (allowed: a number >= 0)"]


@pytest.mark.slow
def test_a_task_by_import_path_runs_a_real_sweep_and_its_report(tmp_path):
    """The toy task through a real sweep of the built-in ``comparison`` study with two of
    the methods added to it (FedNova, FedDyn; FedAdam on the server), and its report: the
    task's metrics in the manifest, rows and report; the added methods as the table's
    rows (names it does not know shown as they are).  One sweep for both subjects."""
    from analysis.report import main as report
    from tests.test_sweep_ray import manifest, rounds, sweep, sweep_dirs, trial_dirs

    sweep(
        tmp_path,
        *("comparison", "--set", f"task={TASK}", "--budget", "smoke"),
        *("--set", "algorithm=fednova,feddyn", "--set", "server_optimizer=fedadam"),
        *("--set", "rounds=2", "--name", "ordinal"),
        # the paths through a sweep are the subject: the least data that trains
        *("--set", "data_fraction=0.02", "--set", "test_fraction=0.05"),
        *("--max-concurrent", "1"),  # one trial process, reused: less CPU
    )
    (sweep_dir,) = sweep_dirs(tmp_path)
    written = manifest(sweep_dir)
    assert written["status"] == "finished" and written["task"] == TASK
    assert [s["stem"] for s in written["metric_specs"]] == ["within1", "rank_mae"]
    trials = trial_dirs(sweep_dir)
    assert len(trials) == 2
    for trial in trials:
        last = rounds(trial)[2]
        assert 0 <= last["test_within1"] <= 1 and last["test_rank_mae"] >= 0

    out = tmp_path / "report"
    assert report([str(sweep_dir), "--out", str(out), "--no-pdf"]) == 0
    text = (out / "report.md").read_text()
    assert "within-one accuracy" in text
    data = json.loads(json.dumps(written["metric_specs"]))
    assert data[1]["higher_is_better"] is False
    assert np.isfinite(last["test_loss"])
    # the comparison table's rows are the added methods
    tables = "\n".join(p.read_text() for p in out.rglob("*.md")).lower()
    for method in ("fednova", "feddyn"):
        assert f"| {method}" in tables, method
