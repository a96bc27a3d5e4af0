"""A diverged run has its own exit status."""

from __future__ import annotations

from federated import run
from federated.cli import exit_codes


def test_a_diverged_run_has_its_own_exit_status(tmp_path, capsys):
    out = tmp_path / "rows.jsonl"
    argv = [
        "--dataset",
        "synthetic",
        "--rounds",
        "3",
        "--local-epochs",
        "1",
        "--n-parties",
        "4",
        "--data-fraction",
        "0.04",
        "--test-fraction",
        "0.1",
        "--threads",
        "1",
        "--device",
        "cpu",
        "--lr",
        "1e6",
        "--out",
        str(out),
        "--quiet",
    ]
    status = run.main(argv)
    assert "diverged" in capsys.readouterr().out
    assert status == exit_codes.DIVERGED == 3
    assert [p.name for p in tmp_path.iterdir()] == ["rows.jsonl"]  # no temporary file left
