"""The detection throughput benchmark at a tiny size: a generated Street-like tree, real
fcos-tiny training, its printed lines and JSON fields."""

from __future__ import annotations

import json

from benchmarks.detection_throughput import main


def test_the_benchmark_reports_training_and_evaluation_images_per_second(tmp_path, capsys):
    out = tmp_path / "throughput.json"
    assert main(["--quick", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["model"] == "fcos-tiny" and result["path"] == "sequential"
    assert "one party at a time" in result["path_reason"]
    assert result["parties"] == 5 and result["train_images"] > 0 and result["test_images"] > 0
    assert result["train_images_per_s"] > 0 and result["eval_images_per_s"] > 0
    # the rate is the federation's images over the round's training seconds
    assert (
        abs(result["train_images_per_s"] - result["train_images"] / result["train_seconds"])
        < 1e-6 * result["train_images_per_s"]
    )
    assert result["machine"] and result["rounds_measured"] == 1
    assert "training images/s:" in printed and "evaluation images/s:" in printed
    assert "path: sequential; detection cannot pack" in printed


def test_a_bad_option_is_one_usage_line(capsys):
    try:
        main(["--rounds", "0"])
    except SystemExit as exit_:
        assert exit_.code == 2
    else:
        raise AssertionError("--rounds 0 was accepted")
    assert "--rounds must be at least 1" in capsys.readouterr().err
