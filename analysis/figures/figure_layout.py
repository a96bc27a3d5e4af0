"""How a study is laid out in figures: what the lines are, what the panels are, and
what goes on the x axis of its sensitivity plot.

A study file says it in ``[report] figure = {...}`` (the fields of :class:`Layout`);
a study that does not gets :func:`generic_layout` from its axes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


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


def layout_for(figure: Mapping[str, Any], axes: list[str]) -> Layout:
    """The layout a study file's ``[report] figure`` gives, else :func:`generic_layout`."""
    if not figure:
        return generic_layout(axes)
    return Layout(
        tuple(figure.get("lines", axes[:1] or ["point"])),
        tuple(figure.get("panels", ())),
        x=figure.get("x"),
        x_lines=figure.get("x_lines"),
        figure=figure.get("figure", ""),
        x_figure=figure.get("x_figure", ""),
    )
