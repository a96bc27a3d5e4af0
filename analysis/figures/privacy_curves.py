"""Accuracy against the ε spent, round by round: one line per cell of a DP study, the
band ±1 std over seeds (as :func:`analysis.figures.plots.accuracy_curves`), one panel
per value of the study's panel parameter (β in the ``privacy`` study).  The frame it
draws is :func:`analysis.tables.privacy_rounds.epsilon_curves`."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.figures.plots import _grid, _label, _title
from analysis.naming import parameter_name
from analysis.primary_metric import Metric

#: a log ε axis once the largest finite ε is this many times the smallest
LOG_SPAN = 10.0


#: the lines' dash patterns and markers, cycled apart (6 and 5: 30 cells before a repeat)
DASHES = ("-", "--", ":", "-.", (0, (5, 1, 1, 1, 1, 1)), (0, (1, 3)))
MARKERS = ("o", "s", "^", "D", "v")


def log_epsilon_axis(curves: pd.DataFrame) -> bool:
    """True when the curves' ε spans a decade or more (drawn on a log axis)."""
    eps = curves["epsilon"].to_numpy(dtype=float)
    eps = eps[np.isfinite(eps) & (eps > 0)]
    return eps.size > 0 and float(eps.max()) >= LOG_SPAN * float(eps.min())


def epsilon_accuracy_plot(
    curves: pd.DataFrame,
    lines: Sequence[str],
    panels: Sequence[str],
    metric: Metric,
    *,
    title: str = "",
) -> plt.Figure:
    """``curves`` (cells of ``lines`` + ``panels``, per round: ``epsilon``, ``mean``,
    ``sd``) as test ``metric`` vs ε, a marker per round, the band mean ± sd."""
    panel_values = (
        list(dict.fromkeys(curves[list(panels)].itertuples(index=False, name=None)))
        if panels
        else [()]
    )
    log = log_epsilon_axis(curves)
    fig, axes = _grid(len(panel_values))
    for ax, panel in zip(axes, panel_values):
        part = curves
        for key, value in zip(panels, panel):
            part = part[part[key] == value]
        cells = part.groupby(list(lines), sort=True, dropna=False) if lines else [((), part)]
        for number, (cell, line) in enumerate(cells):
            cell = cell if isinstance(cell, tuple) else (cell,)
            line = line.sort_values("round")
            x = line["epsilon"].to_numpy(dtype=float)
            y = line["mean"].to_numpy(dtype=float)
            sd = line["sd"].fillna(0.0).to_numpy(dtype=float)
            # each line its own dash pattern and marker, as the curves figure's: cells with
            # equal values (methods that learned alike) drew one line over another
            drawn = ax.plot(
                x, y, linestyle=DASHES[number % len(DASHES)],
                marker=MARKERS[number % len(MARKERS)], markersize=3, label=_label(lines, cell),
            )  # fmt: skip
            low, high = (metric.units(bound) for bound in metric.bounds)
            band = np.clip(y - sd, low, high), np.clip(y + sd, low, high)  # the metric's range
            ax.fill_between(x, *band, alpha=0.2, color=drawn[0].get_color())
        if log:
            ax.set_xscale("log")
        ax.set_title(_label(panels, panel), fontsize=9)
        ax.set_xlabel("ε spent (after each round)" + (", log scale" if log else ""))
        ax.set_ylabel(metric.axis_label)
        ax.grid(True, alpha=0.3)
        if lines:
            ax.legend(
                title=" · ".join(parameter_name(k) for k in lines), fontsize=6, title_fontsize=7
            )
    _title(fig, title)
    return fig
