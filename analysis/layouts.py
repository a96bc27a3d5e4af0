"""How each study is laid out in figures: what the lines are, what the panels are, and
what goes on the x axis of its sensitivity plot.

One entry per study of search_spaces/catalog.py; a study not listed here (a new one) gets
:func:`generic_layout` from its axes.  Tables have their own per-study shapes in
:mod:`analysis.study_tables`; the two agree on which parameter is which.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """Attributes:
    lines: columns whose values are the lines of the accuracy-vs-round figure (hue).
    panels: columns whose values are its panels (one panel per value); the dataset is
        added when there are several.
    x: the varied parameter of the sensitivity figure (accuracy vs parameter); None for
        no such figure.
    x_lines: the lines of the sensitivity figure (e.g. one per method), or None.
    figure: the paper figure the accuracy-vs-round curves mirror, for captions.
    x_figure: the paper figure the sensitivity plot mirrors.
    """

    lines: tuple[str, ...]
    panels: tuple[str, ...] = ()
    x: str | None = None
    x_lines: str | None = None
    figure: str = ""
    x_figure: str = ""


LAYOUTS: dict[str, Layout] = {
    "comparison": Layout(("algorithm",), figure="Fig. 6"),
    "moon_mu": Layout(("mu",), x="mu", x_figure="Table 9 as a figure"),
    "fedprox_mu": Layout(("mu",), x="mu"),
    "temperature": Layout(("tau",), x="tau", x_figure="Fig. 11a"),
    "out_dim": Layout(("out_dim",), x="out_dim", x_figure="Fig. 11b"),
    "local_epochs": Layout(
        ("algorithm",), ("local_epochs",), x="local_epochs", x_lines="algorithm", x_figure="Fig. 7"
    ),
    "heterogeneity": Layout(
        ("algorithm",), ("beta",), x="beta", x_lines="algorithm", x_figure="Table 4 as a figure"
    ),
    "parties": Layout(("method",), ("setting",), figure="Fig. 8"),
    "loss_ablation": Layout(("second_term",)),
    "projection_head": Layout(
        ("algorithm",), ("projection_head",), x="algorithm", x_lines="projection_head"
    ),
    "negatives": Layout(("prev_models",), ("mu",), x="prev_models", x_lines="mu"),
    "server_momentum": Layout(("server",), ("algorithm",), x="server", x_lines="algorithm"),
    "iid": Layout(("mu",), x="mu", x_figure="Table 8 as a figure"),
    "annealed_tau": Layout(("tau_schedule",), ("tau",), x="tau", x_lines="tau_schedule"),
}


def generic_layout(axes: list[str]) -> Layout:
    """Lines by the first axis, panels by the others; a sensitivity plot of the first."""
    if not axes:
        return Layout(("point",))
    return Layout(
        (axes[0],),
        tuple(axes[1:2]),
        x=axes[0],
        x_lines=axes[1] if len(axes) > 1 else None,
    )


def layout_for(study: str, axes: list[str]) -> Layout:
    return LAYOUTS.get(study) or generic_layout(axes)
