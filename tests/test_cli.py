"""python -m federated.run: a line per round, rows on disk, one-line errors."""

from __future__ import annotations

import contextlib
import csv
import io
import subprocess
import sys

import pytest


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "federated.run", *args], capture_output=True, text=True, timeout=300
    )


@pytest.mark.slow
def test_cli_runs_moon_on_fashion_mnist_and_writes_rows(tmp_path):
    out = tmp_path / "rows.csv"
    proc = run_cli(
        "--algorithm",
        "moon",
        "--dataset",
        "fmnist",
        "--rounds",
        "2",
        "--local-epochs",
        "1",
        "--data-fraction",
        "0.1",
        "--test-fraction",
        "0.2",
        "--threads",
        "1",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("round")]
    assert len(lines) == 2 and lines[1].startswith("round   2/2  test_acc ")
    assert "status: completed" in proc.stdout
    rows = list(csv.DictReader(out.open()))
    assert [r["round"] for r in rows] == ["1", "2"]
    assert rows[0]["algorithm"] == "moon" and rows[0]["mu"] == "1.0"
    assert float(rows[1]["con_loss"]) > 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--mu", "-1"], "invalid config: mu=-1.0 (allowed: a number >= 0)"),
        (["--beta", "0"], "invalid config: beta=0.0 (allowed: a number > 0)"),
        (["--algorithm", "fedsgd"], "invalid config: algorithm='fedsgd'"),
    ],
)
def test_cli_rejects_bad_values_in_one_line(args, expected):
    proc = run_cli(*args)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [f"error: {proc.stderr.strip()[7:]}"]
    assert expected in proc.stderr


def test_a_personalised_run_prints_the_own_split_accuracy_it_is_judged_by(tmp_path):
    """Defect 17 of the report issue: a personalised round line printed ``test_acc -``
    (its pooled score is every 5th round) and the last line the pooled number; both now
    lead with the mean over parties of each party's own-split accuracy."""
    from federated.run import main

    out = tmp_path / "rows.csv"
    argv = [
        *("--algorithm", "fedper", "--dataset", "synthetic", "--rounds", "2"),
        *("--n-parties", "4", "--data-fraction", "0.04", "--test-fraction", "0.1"),
        *("--party-test-fraction", "0.2", "--threads", "1", "--out", str(out)),
    ]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(argv) == 0
    lines = printed.getvalue().splitlines()
    rounds = [line for line in lines if line.startswith("round")]
    assert rounds[0].startswith("round   1/2  party_test_acc_mean 0.")
    assert "  pooled test_acc -  " in rounds[0]  # not scored in round 1: said so
    rows = list(csv.DictReader(out.open()))
    own, pooled = float(rows[-1]["party_test_acc_mean"]), float(rows[-1]["test_acc"])
    assert lines[-1].startswith(
        f"status: completed; final own-split acc (mean over parties) {own:.4f}; "
        f"final test_acc {pooled:.4f}; rows in "
    )
