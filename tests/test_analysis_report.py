"""``python -m analysis.report``: the command line, the files it writes, and (slow) the
whole path from a real sweep to the report, also while a sweep is still running."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.figures import plots as figures
from analysis.report import main
from study.driver_liveness import driver_record
from tests.analysis_fakes import curve, plan_configs, write_sweep, write_trial

REPO = Path(__file__).resolve().parent.parent


def report(*args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "analysis.report", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=REPO)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


@pytest.fixture
def comparison_results(tmp_path) -> Path:
    """A comparison sweep (2 seeds) and a temperature sweep whose trials all failed."""
    root = tmp_path / "results"
    configs = plan_configs("comparison", seeds=2)
    trials = [(c, curve(0.3 + 0.05 * i, c["rounds"])) for i, c in enumerate(configs)]
    partitions = [
        {
            "dataset": "fmnist",
            "n_parties": 10,
            "partition": "dirichlet",
            "beta": 0.5,
            "labels_per_party": 2,
            "data_fraction": 0.05,
            "seed": 0,
            "class_counts": [[3] * 10 for _ in range(10)],
        }
    ]
    write_sweep(root, "comparison-fake", "comparison", trials, partitions=partitions)
    failing = root / "temperature-fake"
    write_sweep(root, "temperature-fake", "temperature", [])
    for i, c in enumerate(plan_configs("temperature", seeds=1)):
        write_trial(failing, i, c, [0.2], error="InjectedFailureError: boom")
    return root


# ------------------------------------------------------------------ command line
def test_a_path_without_a_sweep_exits_2_with_one_line(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "holds no sweep" in err[0]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--baseline", "fedsgd"], "unknown --baseline 'fedsgd'"),
        (["--metric", "median"], "--metric='median'"),
        (["--target", "median"], "--target='median'"),
        (["--column", "colour"], "--column='colour' is not a config column"),
    ],
)
def test_bad_options_exit_2_with_one_line(comparison_results, tmp_path, capsys, option, message):
    assert main([str(comparison_results), "--out", str(tmp_path / "out"), *option]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_report_files_tables_and_failures(comparison_results, tmp_path, capsys):
    out = tmp_path / "out"
    # the fakes set each trial's final-round accuracy
    assert main([str(comparison_results), "--out", str(out), "--statistic", "final"]) == 0
    assert f"report: {out / 'report.md'}" in capsys.readouterr().out
    for stem in ("table1_comparison", "table2_communication", "fig11a_temperature"):
        for fmt in ("md", "tex", "csv"):
            assert (out / "tables" / f"{stem}.{fmt}").stat().st_size > 0
    for stem in ("fig_comparison_curves", "fig5_partition_fmnist_N10_dirichlet0.5_data0.05_seed0"):
        for fmt in ("png", "pdf"):
            assert (out / "figures" / f"{stem}.{fmt}").stat().st_size > 1000
    text = (out / "report.md").read_text()
    # every linked file exists
    for line in text.splitlines():
        for part in line.split("](")[1:]:
            assert (out / part.split(")")[0]).is_file(), part
    # plan order is (point, seed): MOON's seeds are trials 4 and 5, 0.50 and 0.55
    # every seed 20 points above FedAvg's same seed: a paired Δ without spread, whose
    # zero-width interval would measure no noise: not resolvable, no arrow, no bold
    assert "| MOON | 52.5 ± 3.5 · Δ +20.0 (not resolvable from 2 seeds) |" in text
    assert "| SOLO | 72.5 ± 3.5 · Δ +40.0 (not resolvable from 2 seeds) |" in text
    assert "Fashion-MNIST — not resolvable from 2 seeds" in text  # the caption
    assert "No bold in Fashion-MNIST: best − runner-up is the same on every seed" in text
    assert "| `temperature-fake` | `abcde_00000_tau=0.1_seed0` | error |" in text
    assert "InjectedFailureError: boom" in text
    assert "No completed trial yet" in text
    assert "| 0.1 | – (1 error) |" in text  # an empty cell says why
    rows = list(csv.DictReader((out / "data" / "trials.csv").open()))
    assert sorted({r["status"] for r in rows}) == ["completed", "error"]


def test_a_sweep_that_has_not_started_a_trial_yet(tmp_path):
    root = tmp_path / "results"
    write_sweep(root, "fresh", "moon_mu", [], status="running")
    out = tmp_path / "out"
    assert main([str(root), "--out", str(out), "--column", "dataset"]) == 0
    text = (out / "report.md").read_text()
    assert "no trial started yet | none yet (of 0) | **still running**" in text


def test_best_metric_and_no_pdf(comparison_results, tmp_path):
    out = tmp_path / "out"
    assert main([str(comparison_results), "--out", str(out), "--metric", "best", "--no-pdf"]) == 0
    assert "best top-1 test accuracy over rounds" in (out / "report.md").read_text()
    assert not list((out / "figures").glob("*.pdf"))


def test_optuna_sweep_gets_history_and_importance(tmp_path):
    root = tmp_path / "results"
    configs = plan_configs("moon_mu", seeds=1)
    trials = []
    for i, c in enumerate(configs):
        c["point"] = f"mu={c['mu']}"
        rounds = c["rounds"] if i != 2 else 1  # the third was stopped by ASHA
        trials.append((c, curve(0.3 + 0.05 * i, c["rounds"])[:rounds]))
    write_sweep(root, "optuna-fake", "moon_mu", trials, search="optuna", scheduler="asha")
    out = tmp_path / "out"
    assert main([str(root), "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "(Optuna search)" in text and "| 3 | 1 | stopped | 1 |" in text
    assert "Parameter importance (single searched parameter" in text
    for stem in ("fig_search_history", "fig_search_parameters", "fig_importance"):
        assert (out / "figures" / f"{stem}_moon_mu_optuna.png").is_file()
    history = list(csv.DictReader((out / "tables" / "search_history_moon_mu_optuna.csv").open()))
    assert [float(r["best_so_far"]) for r in history][-1] == pytest.approx(0.5)


def test_report_does_not_import_ray(comparison_results, tmp_path):
    code = (
        "import sys; from analysis.report import main; "
        f"assert main([{str(comparison_results)!r}, '--out', {str(tmp_path / 'o')!r}, "
        "'--quiet']) == 0; assert 'ray' not in sys.modules, 'ray imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]


# ------------------------------------------------------------- end to end (slow)
def last_accuracy(trial_dir: Path) -> float:
    """Test accuracy at the last round, read straight from result.json."""
    rows = [json.loads(line) for line in (trial_dir / "result.json").read_text().splitlines()]
    return max(rows, key=lambda r: r["round"])["test_acc"]


@pytest.mark.slow
def test_real_sweep_to_report(moon_mu_smoke_sweep, tmp_path):
    out = tmp_path / "report"
    proc = report(str(moon_mu_smoke_sweep), "--out", str(out), "--statistic", "final")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "5 completed" in proc.stdout

    for fmt in ("md", "tex", "csv"):
        assert (out / "tables" / f"table9_moon_mu.{fmt}").stat().st_size > 0
    panel = tuple(round(v * figures.DPI) for v in figures.PANEL_SIZE)
    for stem in ("fig_moon_mu_curves", "fig_moon_mu_sensitivity"):
        assert png_size(out / "figures" / f"{stem}.png") == panel
        assert (out / "figures" / f"{stem}.pdf").stat().st_size > 1000
    (partition,) = (out / "figures").glob("fig5_partition_fmnist_N10_dirichlet0.5_*.png")
    assert partition.stat().st_size > 1000

    # the table's rows and columns, and its numbers equal the per-round rows'
    rows = list(csv.DictReader((out / "tables" / "table9_moon_mu.csv").open()))
    assert [float(r["mu"]) for r in rows] == [0.0, 0.1, 1.0, 5.0, 10.0]
    assert {r["column"] for r in rows} == {"Fashion-MNIST"}
    expected = {}
    for trial_dir in moon_mu_smoke_sweep.iterdir():
        if (trial_dir / "params.json").is_file():
            mu = json.loads((trial_dir / "params.json").read_text())["mu"]
            expected[mu] = last_accuracy(trial_dir)
    assert {float(r["mu"]): float(r["mean"]) for r in rows} == expected
    assert all(r["n"] == "1" for r in rows)
    markdown = (out / "tables" / "table9_moon_mu.md").read_text()
    for mu, acc in expected.items():
        assert f"| {mu:g} | " in markdown and f"{100 * acc:.1f}" in markdown
    text = (out / "report.md").read_text()
    assert moon_mu_smoke_sweep.name in text and "None: every trial completed." in text


@pytest.mark.slow
def test_report_on_a_sweep_still_being_written(moon_mu_smoke_sweep, tmp_path):
    """A copy of the real sweep put back in the state of a running one: the manifest says
    running, one trial has one round and a half-written line, one has no round yet."""
    sweep = tmp_path / "results" / moon_mu_smoke_sweep.name
    shutil.copytree(moon_mu_smoke_sweep, sweep)
    manifest = json.loads((sweep / "fedsweep_sweep.json").read_text())
    # running, with a live driver (this process): not a killed one
    manifest.update(status="running", finished=None, trials={}, driver=driver_record())
    (sweep / "fedsweep_sweep.json").write_text(json.dumps(manifest))
    trial_dirs = sorted(p for p in sweep.iterdir() if (p / "params.json").is_file())
    first, second = trial_dirs[-2:]
    lines = (first / "result.json").read_text().splitlines()
    (first / "result.json").write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])
    (second / "result.json").unlink()

    out = tmp_path / "report"
    proc = report(str(sweep.parent), "--out", str(out), "--no-pdf")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "3 completed, 2 running" in proc.stdout
    text = (out / "report.md").read_text()
    assert "**still running**" in text
    assert f"| `{first.name}` | running | 1 / 2 |" in text
    assert f"| `{second.name}` | running | 0 / 2 |" in text
    rows = list(csv.DictReader((out / "tables" / "table9_moon_mu.csv").open()))
    assert len(rows) == 3  # the two running trials' grid points have no completed seed
