"""The figures render headlessly: files exist, are non-empty, and have the size asked for."""

from __future__ import annotations

import struct
import subprocess
import sys

import pandas as pd
import pytest

from analysis.figures import plots as figures
from analysis.figures.figure_layout import layout_for
from analysis.reading.grouping import study_groups
from analysis.reading.loading import load_results
from analysis.stats.search import parameter_importance, search_history
from tests.analysis_fakes import curve, plan_configs, write_sweep


def png_size(path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", header[16:24])


def saved(fig, stem) -> tuple[int, int]:
    expected = tuple(round(v * figures.DPI) for v in fig.get_size_inches())
    png, pdf = figures.save_figure(fig, stem)
    assert png.stat().st_size > 1000 and pdf.stat().st_size > 1000
    assert pdf.read_bytes()[:5] == b"%PDF-"
    assert png_size(png) == expected
    return expected


@pytest.fixture(scope="module")
def heterogeneity(tmp_path_factory):
    root = tmp_path_factory.mktemp("het")
    configs = plan_configs("heterogeneity", seeds=2)
    trials = [
        (c, curve(0.3 + 0.02 * i + 0.01 * c["seed"], c["rounds"])) for i, c in enumerate(configs)
    ]
    write_sweep(root, "het", "heterogeneity", trials)
    (group,) = study_groups(load_results(root))
    return group


def test_matplotlib_runs_headless():
    code = "import analysis.figures.plots, matplotlib; print(matplotlib.get_backend())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().lower() == "agg"


def test_accuracy_curves_one_panel_per_beta(heterogeneity, tmp_path):
    layout = layout_for(heterogeneity.report["figure"], heterogeneity.axes)
    fig = figures.accuracy_curves(heterogeneity.rounds, heterogeneity.trials, layout, title="t")
    visible = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in visible] == ["β=0.1", "β=0.5", "β=5"]
    assert len(visible[0].get_legend().get_texts()) == 5  # five methods
    width, height = saved(fig, tmp_path / "curves")
    assert (width, height) == (
        round(3 * figures.PANEL_SIZE[0] * figures.DPI),
        round(figures.PANEL_SIZE[1] * figures.DPI),
    )


def test_sensitivity_plot(heterogeneity, tmp_path):
    layout = layout_for(heterogeneity.report["figure"], heterogeneity.axes)
    fig = figures.sensitivity_plot(heterogeneity.trials, layout)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0.1", "0.5", "5"]
    saved(fig, tmp_path / "sensitivity")


def test_partition_heatmap(tmp_path):
    entry = {
        "dataset": "fmnist",
        "n_parties": 4,
        "partition": "dirichlet",
        "beta": 0.5,
        "data_fraction": 0.1,
        "seed": 0,
        "class_counts": [[5, 0, 3], [1, 9, 0], [0, 0, 7], [2, 2, 2]],
    }
    fig = figures.partition_heatmap(entry)
    assert fig.axes[0].get_xlabel() == "party" and fig.axes[0].get_ylabel() == "class"
    assert "4 parties, β=0.5, 10% of the data" in figures.partition_title(entry)
    saved(fig, tmp_path / "partition")


def test_search_history_and_importance_plots(tmp_path):
    trials = pd.DataFrame(
        {
            "sweep_started": "",
            "order": range(5),
            "trial": [f"t{i}" for i in range(5)],
            "status": ["completed", "stopped", "completed", "completed", "stopped"],
            "mu": [0.1, 5.0, 1.0, 0.5, 9.0],
            "final_acc": [0.50, 0.20, 0.60, 0.55, 0.10],
            "last_round": [4, 2, 4, 4, 2],
        }
    )
    history = search_history(trials, ["mu"])
    assert history["number"].tolist() == [1, 2, 3, 4, 5]
    assert history["best_so_far"].tolist()[2:] == [0.60, 0.60, 0.60]
    saved(figures.search_history_plot(history), tmp_path / "history")
    fig = figures.search_parameter_plot(history, ["mu"])
    assert fig.axes[0].get_xscale() == "log"  # 0.1 .. 9 spans more than a decade
    saved(fig, tmp_path / "parameters")
    importance, method = parameter_importance(history, ["mu"])
    assert importance == {"mu": 1.0} and "single" in method
    saved(figures.importance_plot(importance, method), tmp_path / "importance")


def test_importance_with_few_trials_uses_the_stated_fallback():
    rows = [
        {"number": i, "status": "completed", "mu": mu, "tau": tau, "value": acc}
        for i, (mu, tau, acc) in enumerate(
            [(0.1, 0.5, 0.3), (1.0, 0.1, 0.4), (5.0, 1.0, 0.5), (10.0, 0.5, 0.6)]
        )
    ]
    importance, method = parameter_importance(pd.DataFrame(rows), ["mu", "tau"])
    assert method.startswith("fallback")
    assert list(importance) == ["mu", "tau"]  # mu is perfectly rank-correlated
    assert sum(importance.values()) == pytest.approx(1.0)
    # tau ranks (2.5, 1, 4, 2.5) against accuracy ranks (1, 2, 3, 4): rho = 1.5 / sqrt(22.5)
    assert importance["mu"] == pytest.approx(1 / (1 + 1.5 / 22.5**0.5))


def test_equal_curves_stay_visible_each_with_its_own_dashes(heterogeneity):
    """Two methods with equal values in every round (FedAvg+FT's pooled test is
    FedAvg's) drew one line over the other (issue 68, point 10): each line now has its
    own dash pattern, whatever the study."""
    layout = layout_for(heterogeneity.report["figure"], heterogeneity.axes)
    fig = figures.accuracy_curves(heterogeneity.rounds, heterogeneity.trials, layout)
    lines = [line for line in fig.axes[0].get_lines() if len(line.get_xdata()) > 1]
    dashes = [line._dash_pattern for line in lines]
    assert len({str(d) for d in dashes}) == len(lines) == 5


def test_squeezed_party_labels_stand_upright_and_search_ticks_are_whole_trials():
    """Fig. 5's party names of 6-14 characters ran together once the width cap squeezed
    the columns; the search history's ticks were half trials (1.5) and its legend sat on
    the last point."""
    names = [f"structure_{i:02d}" for i in range(40)]
    entry = {
        "dataset": "folder:/data/x", "n_parties": 40, "partition": "natural", "seed": 0,
        "class_counts": [[3, 4]] * 40, "class_names": ["sky", "dark_structure"],
        "party_names": names, "data_fraction": 1.0,
    }  # fmt: skip
    fig = figures.partition_heatmap(entry)
    assert {t.get_rotation() for t in fig.axes[0].get_xticklabels()} == {90.0}
    import pandas as pd

    from analysis.primary_metric import ACCURACY

    history = pd.DataFrame(
        {"number": [1, 2, 3, 4], "status": "completed", "value": [0.5, 0.6, 0.55, 0.7]}
        | {"best_so_far": [0.5, 0.6, 0.6, 0.7], "counted_in_best": True}
    )
    fig = figures.search_history_plot(history, metric=ACCURACY)
    ax = fig.axes[0]
    assert all(float(t).is_integer() for t in ax.get_xticks())
    assert ax.get_legend().get_bbox_to_anchor().x0 >= ax.get_window_extent().x1 - 1


def test_a_band_over_seeds_stays_within_the_metrics_range():
    """A segmentation study's mIoU band over two seeds (0% and 20%) reached -4% (mean
    10%, sd 14%): every ±1 sd band and bar is cut at the metric's bounds (0-100%)."""
    from analysis.figures.figure_layout import Layout
    from analysis.primary_metric import ACCURACY

    trials = pd.DataFrame(
        {"sweep": "s", "trial": ["a", "b"], "status": "completed", "seed": [0, 1]}
        | {"algorithm": "fedavg", "dataset": "x", "final_acc": [0.0, 0.2], "order": [0, 1]}
        | {"sweep_started": "2026-01-01T00:00:00"}
    )
    rounds = pd.DataFrame(
        {"sweep": "s", "trial": ["a", "a", "b", "b"], "round": [1, 2, 1, 2]}
        | {"test_acc": [0.0, 0.0, 0.2, 0.2], "algorithm": "fedavg"}
    )
    fig = figures.accuracy_curves(rounds, trials, Layout(lines=("algorithm",)))
    (band,) = fig.axes[0].collections
    low, high = band.get_paths()[0].vertices[:, 1].min(), band.get_paths()[0].vertices[:, 1].max()
    assert low == pytest.approx(0.0) and high == pytest.approx(10 + 200**0.5)
    fig = figures.sensitivity_plot(trials, Layout(lines=(), x="algorithm"), value="final_acc")
    bar = [y for line in fig.axes[0].get_lines() for y in line.get_ydata()]
    assert min(bar) == pytest.approx(0.0) and max(bar) == pytest.approx(10 + 200**0.5)
    assert figures.sd_band(ACCURACY)([99.0, 100.0, 90.0])[1] == 100.0  # display units
