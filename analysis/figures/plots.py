"""Figures (seaborn, headless): curves, sensitivity, partitions, Optuna search.

- :func:`accuracy_curves`: test accuracy (%) vs round, one line per method or
  parameter value, the band ±1 std over seeds (Fig. 6, Fig. 8); one panel per dataset
  or per the study's panel parameter.
- :func:`sensitivity_plot`: final accuracy (%) vs the varied parameter, mean with ±1
  std error bars over seeds (Fig. 7, Fig. 11); values are evenly spaced categories, as
  in the paper's plots.
- :func:`accuracy_heatmap`: mean accuracy (%) over two numeric axes of a study.
- :func:`partition_heatmap`: samples per class and party (Fig. 5).
- :func:`search_history_plot`, :func:`search_parameter_plot`, :func:`importance_plot`:
  an Optuna sweep's trials in order with the best so far, accuracy against each
  searched parameter, and parameter importance.

Accuracy reads as the figure's ``metric`` (:mod:`analysis.primary_metric`): a score
task's figures draw its metric as recorded (``test SRCC``, ``test MAE``) on the y axis.

Every function returns a Matplotlib figure of a fixed size (:data:`DPI` dots per inch,
no tight bounding box), so a saved PNG is exactly ``figsize × DPI`` pixels;
:func:`save_figure` writes PNG and PDF.  Only completed trials are drawn, except in
the search history, which also shows ASHA's stopped trials.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # headless: no display needed, before pyplot is imported

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import MaxNLocator

from analysis.figures.figure_layout import Layout
from analysis.naming import dataset_name, parameter_name, value_label
from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import COMPLETED, DIVERGED, STOPPED, is_number_column
from analysis.tables.table import key_order

if TYPE_CHECKING:
    from federated.contract.task_spec import TaskSpec

DPI = 120
PANEL_SIZE = (4.4, 3.4)  # inches per panel
MAX_PANELS_PER_ROW = 3
FIGURE_FORMATS = ("png", "pdf")


def save_figure(fig: plt.Figure, stem: str | Path, formats: Sequence[str] = FIGURE_FORMATS):
    """Write ``<stem>.png`` / ``.pdf`` at :data:`DPI` and close the figure; returns paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = stem.parent / f"{stem.name}.{fmt}"  # not with_suffix: names may hold "0.5"
        fig.savefig(path, dpi=DPI, format=fmt)
        paths.append(path)
    plt.close(fig)
    return paths


def _label(keys: Sequence[str], values: Sequence[Any]) -> str:
    return ", ".join(value_label(k, v, with_name=True) for k, v in zip(keys, values))


def _labelled(frame: pd.DataFrame, keys: Sequence[str], column: str) -> pd.DataFrame:
    """``frame`` with ``column`` holding the readable label of its ``keys`` values."""
    frame = frame.copy()
    if keys:
        frame[column] = [
            _label(keys, vals) for vals in frame[list(keys)].itertuples(index=False, name=None)
        ]
    else:
        frame[column] = ""
    return frame


def _panel_keys(trials: pd.DataFrame, layout_panels: Sequence[str]) -> list[str]:
    panels = [p for p in layout_panels if p in trials]
    if trials["dataset"].nunique() > 1:
        panels = ["dataset", *panels]
    return panels


def _grid(n_panels: int) -> tuple[plt.Figure, list[plt.Axes]]:
    cols = min(max(n_panels, 1), MAX_PANELS_PER_ROW)
    rows = max(1, math.ceil(n_panels / cols))
    fig, axes = plt.subplots(
        rows,
        cols,
        figsize=(PANEL_SIZE[0] * cols, PANEL_SIZE[1] * rows),
        squeeze=False,
        layout="constrained",
    )
    flat = list(axes.flat)
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat


#: characters of a 10-point title per inch of figure width (a longer title wraps)
TITLE_CHARS_PER_INCH = 11


def _title(fig: plt.Figure, title: str) -> None:
    """The figure's title, wrapped to the figure's width so no word is clipped."""
    if title:
        width = max(20, int(fig.get_figwidth() * TITLE_CHARS_PER_INCH))
        fig.suptitle(textwrap.fill(title, width), fontsize=10)


def sd_band(metric: Metric) -> Callable[[Sequence[float]], tuple[float, float]]:
    """seaborn's ``errorbar="sd"`` (mean ± 1 sample sd over seeds, none for one seed)
    cut at ``metric``'s bounds in display units: a band of an mIoU or an accuracy near
    0 never reads below 0% (nor above 100%), a value the metric cannot take."""
    low, high = (metric.units(bound) for bound in metric.bounds)

    def band(values: Sequence[float]) -> tuple[float, float]:
        values = np.asarray(values, dtype=float)
        mean = float(values.mean())
        sd = float(values.std(ddof=1)) if len(values) > 1 else math.nan
        return max(low, mean - sd), min(high, mean + sd)

    return band


def accuracy_curves(
    rounds: pd.DataFrame,
    trials: pd.DataFrame,
    layout: Layout,
    *,
    title: str = "",
    metric: Metric = ACCURACY,
) -> plt.Figure:
    """Test accuracy (%) (``metric``) vs round: lines by ``layout.lines``, band ±1 std
    over seeds."""
    done = trials[trials["status"] == COMPLETED]
    keys = set(zip(done["sweep"], done["trial"]))
    data = rounds[[k in keys for k in zip(rounds["sweep"], rounds["trial"])]].copy()
    y = metric.axis_label
    data[y] = metric.units(pd.to_numeric(data[metric.column], errors="coerce").astype(float))
    data["round"] = data["round"].astype(int)
    lines = [k for k in layout.lines if k in data] or ["point"]
    panels = _panel_keys(done, layout.panels)
    data = _labelled(_labelled(data, lines, "line"), panels, "panel")
    hue_order = [_label(lines, k) for k in key_order(done, lines)]
    panel_order = [_label(panels, k) for k in key_order(done, panels)] if panels else [""]
    with sns.axes_style("whitegrid"):
        fig, axes = _grid(len(panel_order))
        for ax, panel in zip(axes, panel_order):
            part = data[data["panel"] == panel]
            shown = [h for h in hue_order if h in set(part["line"])]
            # each line its own dash pattern and marker: two methods with equal values in
            # every round (FedAvg+FT's pooled test is FedAvg's) stay both visible
            sns.lineplot(
                data=part,
                x="round",
                y=y,
                hue="line",
                hue_order=shown,
                style="line",
                style_order=shown,
                dashes=True,
                markers=part["round"].nunique() <= 20,
                markersize=4,
                errorbar=sd_band(metric),
                ax=ax,
            )
            ax.set_title(panel, fontsize=9)
            ax.set_xlabel("communication round")
            legend = ax.get_legend()
            if legend is not None:
                legend.set_title(" · ".join(parameter_name(k) for k in lines))
                plt.setp(legend.get_texts(), fontsize=7)
        _title(fig, title)
    return fig


def sensitivity_plot(
    trials: pd.DataFrame,
    layout: Layout,
    *,
    value: str = "final_acc",
    title: str = "",
    metric: Metric = ACCURACY,
) -> plt.Figure:
    """Accuracy (%) (``metric``) vs ``layout.x`` (mean ± 1 std over seeds), lines by
    ``layout.x_lines``.  A categorical x (methods) gets points and error bars but no
    line joining them (no order between methods to draw a trend along), and its labels
    turned where they would overlap."""
    if layout.x is None:
        raise ValueError("this study has no sensitivity parameter")
    done = trials[(trials["status"] == COMPLETED) & trials[value].notna()].copy()
    y = metric.axis_label
    done[y] = metric.units(done[value].astype(float))
    x = layout.x
    hue = [layout.x_lines] if layout.x_lines and layout.x_lines in done else []
    panels = ["dataset"] if done["dataset"].nunique() > 1 else []
    done = _labelled(_labelled(done, hue, "line"), panels, "panel")
    done["x"] = [value_label(x, v) for v in done[x]]
    order = [value_label(x, k[0]) for k in key_order(done, [x])]
    hue_order = [_label(hue, k) for k in key_order(done, hue)] if hue else None
    panel_order = [dataset_name(k[0]) for k in key_order(done, panels)] if panels else [""]
    categorical = not is_number_column(done[x])
    with sns.axes_style("whitegrid"):
        fig, axes = _grid(len(panel_order))
        for ax, panel in zip(axes, panel_order):
            part = done[done["panel"] == panel]
            sns.pointplot(
                data=part,
                x="x",
                y=y,
                order=order,
                hue="line" if hue else None,
                hue_order=hue_order,
                errorbar=sd_band(metric),
                capsize=0.15,
                dodge=0.3 if hue else False,
                markersize=5,
                linewidth=1.5,
                linestyle="none" if categorical else "-",
                ax=ax,
            )
            if categorical or sum(len(t) for t in order) > 8 * len(order):
                ax.tick_params(axis="x", labelrotation=30)
                plt.setp(ax.get_xticklabels(), ha="right", rotation_mode="anchor")
            ax.set_xlabel(parameter_name(x))
            ax.set_title(panel, fontsize=9)
            legend = ax.get_legend()
            if legend is not None:
                legend.set_title(parameter_name(hue[0]) if hue else "")
                plt.setp(legend.get_texts(), fontsize=7)
        _title(fig, title)
    return fig


def accuracy_heatmap(
    trials: pd.DataFrame,
    x: str,
    y: str,
    *,
    value: str = "final_acc",
    title: str = "",
    metric: Metric = ACCURACY,
) -> plt.Figure:
    """Mean over seeds of ``value`` (%; ``metric``'s units) for every (``y`` row, ``x``
    column) of completed trials, annotated; one panel per dataset when there are several."""
    done = trials[(trials["status"] == COMPLETED) & trials[value].notna()].copy()
    label = metric.axis_label
    done[label] = metric.units(done[value].astype(float))
    datasets = list(dict.fromkeys(done["dataset"]))
    with sns.axes_style("white"):
        fig, axes = _grid(len(datasets))
        for ax, dataset in zip(axes, datasets):
            part = done[done["dataset"] == dataset]
            grid = part.pivot_table(index=y, columns=x, values=label, aggfunc="mean")
            grid = grid.sort_index(ascending=False).sort_index(axis=1)
            sns.heatmap(
                grid,
                ax=ax,
                cmap="viridis",
                annot=True,
                fmt=f".{metric.digits}f",
                annot_kws={"fontsize": 7},
                cbar_kws={"label": label},
            )
            ax.set_xlabel(parameter_name(x))
            ax.set_ylabel(parameter_name(y))
            name = dataset_name(dataset, metric.task_spec)
            ax.set_title(name if len(datasets) > 1 else "", fontsize=9)
        _title(fig, title)
    return fig


def partition_heatmap(
    entry: dict[str, Any], *, title: str = "", task: TaskSpec | None = None
) -> plt.Figure:
    """Fig. 5: what each party (columns) holds of each class (rows), counted as the
    task declares (:func:`partition_counts`: images, a detection's boxes, a
    segmentation's pixels); each party's images under its name where recorded.  A
    partition recorded without per-class counts (a detection folder's before the
    contract: every image as one count) is drawn as images per party, one row.

    ``entry`` is one element of ``partitions.json``.
    """
    counts, unit, classes = partition_counts(entry)
    n_parties, n_classes = counts.shape
    annotate = n_parties <= 20 and n_classes <= 20
    # image folders record their class (and natural partitions their party) names
    parties: Any = list(entry.get("party_names") or []) or (n_parties <= 50)
    images = entry.get("party_images")
    if isinstance(parties, list) and isinstance(images, list) and len(images) == n_parties:
        parties = [f"{p}\n{n} img" for p, n in zip(parties, images)]
    # each column as wide as its longest label line (about 0.085 in a character at the
    # tick font, plus a gap), so that "cam0 / 21 img" beside "cam1 / 28 img", or "231 img"
    # beside "339 img" under four columns and a colour bar, never run together
    labels = parties if isinstance(parties, list) else []
    longest = max((len(line) for p in labels for line in str(p).split("\n")), default=0)
    column = max(0.45, 0.085 * longest + 0.25)
    width = min(20.0 if labels else 12.0, max(4.5, column * n_parties + 1.5))
    height = min(10.0, max(3.2, 0.3 * n_classes + 1.6))
    fig, ax = plt.subplots(figsize=(width, height), layout="constrained")
    sns.heatmap(
        counts.T,
        ax=ax,
        cmap="YlGnBu",
        annot=annotate,
        fmt="d",
        annot_kws={"fontsize": 6},
        cbar_kws={"label": unit},
        xticklabels=parties,
        yticklabels=classes,
    )
    if column * n_parties + 1.5 > width:
        # the width cap squeezed the columns below their labels' width: labels stand
        # upright instead of running into their neighbours ("dark_structureobject")
        plt.setp(ax.get_xticklabels(), rotation=90, ha="center")
    plt.setp(ax.get_yticklabels(), rotation=0)  # class names read across, one a row
    ax.set_xlabel("party")
    ax.set_ylabel("class" if unit != IMAGES_PER_PARTY else "")
    _title(fig, title or partition_title(entry, task))
    return fig


#: the unit of a partition drawn as images per party only (no per-class counts)
IMAGES_PER_PARTY = "images per party"


def partition_counts(entry: dict[str, Any]) -> tuple[np.ndarray, str, Any]:
    """A ``partitions.json`` entry's counts as drawn: (parties × rows, the unit, the
    rows' labels).  The rows are classes, counted as the entry says (``counted``:
    ``images``, ``boxes``, ``pixels``); an entry whose counts have one column while it
    names several classes (recorded before the contract: every image as the first
    class) or that counts nothing per class (``counted`` empty: a score task) is
    images per party, one row labelled so."""
    counts = np.asarray(entry["class_counts"], dtype=np.int64)  # parties × classes
    names = list(entry.get("class_names") or [])
    counted = entry.get("counted", "images")
    one_column = counts.shape[1] == 1 and len(names) != 1
    if not counted or one_column:
        images = entry.get("party_images")
        per_party = np.asarray(images, dtype=np.int64) if images else counts.sum(axis=1)
        return per_party.reshape(-1, 1), IMAGES_PER_PARTY, [IMAGES_PER_PARTY]
    return counts, str(counted), names or (counts.shape[1] <= 50)


def partition_title(entry: dict[str, Any], task: TaskSpec | None = None) -> str:
    """Fig. 5's caption head: the data set (a folder as what it holds, by ``task``), the
    parties, the scheme, the share of the data and the seed."""
    scheme = str(entry.get("partition", ""))
    detail = f"β={entry.get('beta')}" if scheme in ("dirichlet", "quantity") else scheme
    if scheme == "natural":
        detail = "natural partition"
    return (
        f"{dataset_name(entry.get('dataset'), task)}: {entry.get('n_parties')} parties, {detail}, "
        f"{100 * float(entry.get('data_fraction', 1)):g}% of the data, seed {entry.get('seed')}"
    )


def search_history_plot(
    history: pd.DataFrame, *, title: str = "", metric: Metric = ACCURACY, ranked_by: str = ""
) -> plt.Figure:
    """Each trial's accuracy (%) (``metric``) in proposal order; the best so far over
    the trials it counts (``counted_in_best``: completed, every round run) as a step —
    the test value of the trial best so far by ``ranked_by`` (the search's validation
    metric; empty: by the test value itself), labelled so.  Stopped and diverged trials
    are drawn apart and named as not counted."""
    shown = (
        (COMPLETED, "o", "C0", COMPLETED),
        (STOPPED, "x", "C3", "stopped early (ASHA; not counted)"),
        (DIVERGED, "v", "C1", "diverged (not counted)"),
    )
    with sns.axes_style("whitegrid"):
        fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
        for status, marker, colour, label in shown:
            finite = np.isfinite(pd.to_numeric(history["value"], errors="coerce"))
            part = history[(history["status"] == status) & finite]
            if not part.empty:
                ax.scatter(
                    part["number"],
                    metric.units(part["value"]),
                    marker=marker,
                    color=colour,
                    label=label,
                    zorder=3,
                )
        best = history.dropna(subset=["best_so_far"])
        if not best.empty:
            ax.step(
                best["number"],
                metric.units(best["best_so_far"]),
                where="post",
                color="C2",
                label=f"best so far by {ranked_by}: its test value" if ranked_by else "best so far",
            )
        ax.set_xlabel("trial (in the order Optuna proposed it)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trials are counted
        ax.set_ylabel(_last_round_label(metric))
        # outside the axes: inside, it covered the last trial's point
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        _title(fig, title)
    return fig


def _last_round_label(metric: Metric) -> str:
    """The search plots' y axis: ``test accuracy at the last round (%)``."""
    return f"test {metric.name} at the last round{metric.unit}"


def search_parameter_plot(
    history: pd.DataFrame,
    params: Sequence[str],
    *,
    title: str = "",
    metric: Metric = ACCURACY,
):
    """Accuracy (%) (``metric``) of each trial against each searched parameter (one
    panel each); log scale for positive parameters spanning more than a decade."""
    with sns.axes_style("whitegrid"):
        fig, axes = _grid(len(params))
        for ax, param in zip(axes, params):
            for status, marker, colour in ((COMPLETED, "o", "C0"), (STOPPED, "x", "C3")):
                part = history[history["status"] == status]
                if not part.empty:
                    label = status if status == COMPLETED else "stopped early (ASHA)"
                    ax.scatter(
                        part[param],
                        metric.units(part["value"]),
                        marker=marker,
                        color=colour,
                        label=label,
                    )
            values = pd.to_numeric(history[param], errors="coerce")
            if values.notna().all() and values.min() > 0 and values.max() / values.min() > 10:
                ax.set_xscale("log")
            ax.set_xlabel(parameter_name(param))
            ax.set_ylabel(_last_round_label(metric))
            ax.legend(fontsize=7)
        _title(fig, title)
    return fig


def importance_plot(importance: dict[str, float], method: str, *, title: str = "") -> plt.Figure:
    """Horizontal bars: each parameter's share of the importance."""
    names = list(importance)
    with sns.axes_style("whitegrid"):
        height = 1.6 + 0.4 * max(1, len(names))
        fig, ax = plt.subplots(figsize=(6.4, height), layout="constrained")
        ax.barh([parameter_name(n) for n in names], [importance[n] for n in names], color="C0")
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.set_xlabel(f"importance ({method.split(';')[0].split('(')[0].strip()})", fontsize=8)
        _title(fig, title)
    return fig
