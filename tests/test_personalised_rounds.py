"""The personalised-rounds benchmark at a tiny size: real packed training of FedAvg,
FedPer, LG-FedAvg and FedBN, its printed table and JSON fields (no timing assertion:
the machine is shared)."""

from __future__ import annotations

import json

import pytest

from benchmarks.personalised_rounds import main


def test_the_benchmark_reports_each_packed_method_beside_fedavg(tmp_path, capsys):
    out = tmp_path / "personalised.json"
    assert main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["parties"] == 4 and result["rounds_measured"] == 1
    assert result["target_ratio"] == 1.10 and result["machine"]
    rows = {row["algorithm"]: row for row in result["methods"]}
    assert set(rows) == {"fedper", "lg-fedavg", "fedbn", "fedrep", "ditto", "apfl"}
    assert rows["fedbn"]["model"] == "simple-cnn-bn" and rows["fedper"]["model"] == "simple-cnn"
    for name in ("fedper", "lg-fedavg", "fedbn"):
        row = rows[name]
        assert row["path"] == "packed" and row["path_reason"] == ""
        assert row["round_seconds"] > 0 and row["baseline_round_seconds"] > 0
        assert row["ratio"] == pytest.approx(row["round_seconds"] / row["baseline_round_seconds"])
        assert row["within_target"] == (row["ratio"] <= 1.10)
        assert row["train_ratio"] == pytest.approx(
            row["train_seconds"] / row["baseline_train_seconds"]
        )
    # FedPer and LG-FedAvg share FedAvg on simple-cnn as their baseline
    assert rows["fedper"]["baseline_round_seconds"] == rows["lg-fedavg"]["baseline_round_seconds"]
    for name in ("fedrep", "ditto", "apfl"):
        assert rows[name]["path"] == "sequential" and rows[name]["ratio"] is None
        assert rows[name]["path_reason"] and rows[name]["path_reason"] in printed
    assert "fedrep: sequential path, no packed ratio" in printed
    assert "FedAvg round s" in printed and "lg-fedavg" in printed


def test_a_bad_option_is_one_usage_line(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--data-fraction", "0"])
    assert exit_.value.code == 2
    assert "--data-fraction must be in (0, 1]" in capsys.readouterr().err


def test_scoring_own_models_every_kth_round_reports_means(tmp_path, capsys):
    """``--personal-test-every 2``: the runs score own models on the pooled test set
    every other round, and the figures are means over the measured rounds."""
    out = tmp_path / "every2.json"
    assert main(["--quick", "--personal-test-every", "2", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["personal_test_every"] == 2 and result["statistic"] == "mean"
    assert "means over 1 alternating rounds" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_:
        main(["--personal-test-every", "0"])
    assert exit_.value.code == 2
    assert "--personal-test-every must be at least 1" in capsys.readouterr().err
