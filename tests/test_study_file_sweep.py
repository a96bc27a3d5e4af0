"""Real sweeps of a user's study: a two-axis study file (MOON, mu x beta) on real
Fashion-MNIST at the smoke budget under a local Ray, its report's table checked cell by
cell against the trials' own rows; an ad hoc Optuna search whose study lands in
``<sweep>/optuna.db``."""

from __future__ import annotations

import csv
import json
import pickle
from pathlib import Path

import pytest

from analysis.report import main as report_main
from study.tune.optuna_storage import OPTUNA_DB, storage_url
from tests.conftest_analysis import OPTUNA_SEARCH_NAME, OPTUNA_SEARCH_TRIALS, run_sweep

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "mu_by_beta.toml"
# What is asserted (the study's cells, the Optuna storage) holds for any data: the least
# that trains, 40% of the smoke budget's training set and a quarter of its test set.
SMALL = ("--set", "data_fraction=0.02", "--set", "test_fraction=0.05")


def final_rows(sweep_dir: Path, metric: str = "test_acc") -> list[tuple[dict, float]]:
    """(params, ``metric`` at the last round) of every trial, from its own files."""
    out = []
    for trial_dir in sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file()):
        rows = [json.loads(x) for x in (trial_dir / "result.json").read_text().splitlines()]
        last = max(rows, key=lambda r: r["round"])
        out.append((json.loads((trial_dir / "params.json").read_text()), last[metric]))
    return out


def test_two_axis_study_file_end_to_end_with_its_report(tmp_path, capsys):
    # one trial process, reused: less CPU
    serial = ("--max-concurrent", "1")
    sweep_dir = run_sweep(tmp_path / "results", str(EXAMPLE), "--budget", "smoke", *SMALL, *serial)
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert manifest["status"] == "finished" and manifest["study"] == "mu_by_beta"
    assert manifest["definition"]["axes"][0]["name"] == "mu"  # the report needs no catalogue
    trials = final_rows(sweep_dir)
    assert len(trials) == 4  # 2 mu x 2 beta x 1 seed (smoke)
    assert all(p["algorithm"] == "moon" and p["rounds"] == 2 for p, _ in trials)

    out = tmp_path / "report"
    # the final round: what the trials' own last rows hold (the default is last:3)
    argv = [str(sweep_dir), "--out", str(out), "--no-pdf", "--quiet", "--statistic", "final"]
    assert report_main(argv) == 0
    rows = list(csv.DictReader((out / "tables" / "mu_by_beta_accuracy.csv").open()))
    cells = {(float(r["mu"]), float(r["beta"])): float(r["mean"]) for r in rows}
    expected = {(p["mu"], p["beta"]): acc for p, acc in trials}
    assert set(cells) == {(mu, beta) for mu in (0.1, 5.0) for beta in (0.1, 0.5)}
    assert cells == expected
    assert all(r["n"] == "1" for r in rows)
    assert (out / "figures" / "fig_mu_by_beta_heatmap.png").stat().st_size > 1000
    assert (out / "figures" / "fig_mu_by_beta_curves.png").stat().st_size > 1000


def test_optuna_search_keeps_its_study_in_the_sweep_folder(optuna_search):
    import optuna

    # the session's ad hoc Optuna search (tests/conftest_analysis.py): 6 trials of mu, lr
    sweep_dir = optuna_search.sweep_dir
    assert (sweep_dir / OPTUNA_DB).is_file()
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert manifest["optuna_storage"] == OPTUNA_DB
    study = optuna.load_study(study_name=OPTUNA_SEARCH_NAME, storage=storage_url(sweep_dir))
    assert len(study.trials) == OPTUNA_SEARCH_TRIALS
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done
    # each complete Optuna trial's value is its Tune trial's last validation accuracy (a
    # search selects on validation), for the same mu (ASHA's stopped trials: PRUNED)
    by_mu = {round(p["mu"], 12): acc for p, acc in final_rows(sweep_dir, "val_acc")}
    assert {round(t.params["mu"], 12): t.value for t in done} == {
        round(t.params["mu"], 12): by_mu[round(t.params["mu"], 12)] for t in done
    }
    # --resume restores Tune's pickled searcher: it holds this same storage
    (state,) = sweep_dir.glob("searcher-state-*.pkl")
    searcher = pickle.loads(state.read_bytes())
    storage = searcher["_storage"]
    assert storage.url == storage_url(sweep_dir) and searcher["_study_name"] == OPTUNA_SEARCH_NAME
