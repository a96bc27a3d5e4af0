"""What a study is: the paper experiment it reproduces, its fixed settings and its axes.

A study varies one or more **axes**.  A plain axis varies one
:class:`~federated.config.run_config.RunConfig` field (``mu`` over 0, 0.1, 1, 5, 10).  A joint axis
varies several fields together under readable labels (``"N=100, 20% per round"`` sets
``n_parties``, ``sample_fraction`` and ``rounds``); the label itself becomes a column of
the results.  Each axis carries its paper grid (grid mode) and its Optuna range (Optuna
mode: log-uniform where the grid is geometric, integer or categorical where it must be).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OptunaRange:
    """A parameter range for Optuna's TPE sampler.

    ``kind``: ``loguniform`` / ``uniform`` (floats in [low, high]), ``int`` / ``logint``
    (integers in [low, high]), or ``categorical`` over ``choices``.
    """

    kind: str
    low: float = 0.0
    high: float = 0.0
    choices: tuple[Any, ...] = ()

    def suggest(self, trial: Any, name: str) -> Any:
        """Draw a value through an ``optuna.Trial`` (define-by-run)."""
        if self.kind == "loguniform":
            return trial.suggest_float(name, self.low, self.high, log=True)
        if self.kind == "uniform":
            return trial.suggest_float(name, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(name, int(self.low), int(self.high))
        if self.kind == "logint":
            return trial.suggest_int(name, int(self.low), int(self.high), log=True)
        if self.kind == "categorical":
            return trial.suggest_categorical(name, list(self.choices))
        raise ValueError(f"unknown Optuna range kind {self.kind!r}")

    @property
    def example(self) -> Any:
        """A value inside the range (the first choice, else the low end)."""
        if self.kind == "categorical":
            return self.choices[0]
        return int(self.low) if self.kind in ("int", "logint") else self.low

    def describe(self) -> str:
        if self.kind == "categorical":
            return "{" + ", ".join(map(str, self.choices)) + "}"
        return f"{self.kind}[{self.low:g}, {self.high:g}]"


def loguniform(low: float, high: float) -> OptunaRange:
    return OptunaRange("loguniform", low, high)


def logint(low: int, high: int) -> OptunaRange:
    return OptunaRange("logint", low, high)


def categorical(*choices: Any) -> OptunaRange:
    return OptunaRange("categorical", choices=tuple(choices))


@dataclass(frozen=True)
class Axis:
    """One varied dimension of a study."""

    name: str
    values: tuple[Any, ...]
    # label -> RunConfig fields, for a joint axis; empty for a plain axis
    settings: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    optuna: OptunaRange | None = None

    @property
    def joint(self) -> bool:
        return bool(self.settings)

    def fields_for(self, value: Any) -> dict[str, Any]:
        """RunConfig fields this axis sets for ``value``."""
        return dict(self.settings[value]) if self.joint else {self.name: value}

    @property
    def fields(self) -> set[str]:
        if self.joint:
            return {k for s in self.settings.values() for k in s}
        return {self.name}

    @property
    def search_range(self) -> OptunaRange:
        """The Optuna range; by default a categorical over the paper grid."""
        return self.optuna or categorical(*self.values)

    @property
    def example(self) -> Any:
        """The value an Optuna plan shows its example trial with: the grid's first."""
        return self.values[0] if self.values else self.search_range.example


def joint(
    name: str, settings: Mapping[str, Mapping[str, Any]], optuna: OptunaRange | None = None
) -> Axis:
    return Axis(name, tuple(settings), settings, optuna)


@dataclass(frozen=True)
class Study:
    """One paper experiment.

    Attributes:
        name: what ``python -m study.sweep NAME`` takes.
        paper: the table or figure it reproduces.
        description: one line for ``--list``.
        axes: the varied dimensions; the grid is their Cartesian product.
        fixed: RunConfig fields every trial shares (e.g. ``algorithm="moon"``).
        paper_datasets: the datasets the paper reports it on.
        dataset: the default dataset here (Fashion-MNIST: works offline on any machine).
        seeds: repeats of each grid point in the paper (seeds 0, 1, ...).
        report: how the report lays the study out, kept beside its definition:
            ``table`` (a table shape of :mod:`analysis.tables.study_tables` and its options),
            ``figure`` (the fields of :class:`analysis.figures.figure_layout.Layout`) and
            ``reproduces`` (what of the paper it reproduces); empty: the generic report.
        source: the study file it was read from.
        paper_settings: its fixed values and axes are the paper's settings, which budgets
            are made to scale (the built-in studies); False for a user's study, whose
            written values a budget never changes (:mod:`search_spaces.budgets`).
    """

    name: str
    paper: str
    description: str
    axes: tuple[Axis, ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)
    paper_datasets: tuple[str, ...] = ("cifar10", "cifar100", "tinyimagenet")
    dataset: str = "fmnist"
    seeds: int = 3
    report: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    paper_settings: bool = False

    def grid(self) -> list[dict[str, Any]]:
        """Every grid point as ``{axis name: value}``, in axis order."""
        names = [a.name for a in self.axes]
        return [
            dict(zip(names, combo)) for combo in itertools.product(*(a.values for a in self.axes))
        ]

    @property
    def grid_size(self) -> int:
        size = 1
        for axis in self.axes:
            size *= len(axis.values)
        return size

    def example_point(self) -> dict[str, Any]:
        """One point of the space: what an Optuna plan resolves as its example."""
        return {a.name: a.example for a in self.axes}

    def axis(self, name: str) -> Axis:
        for axis in self.axes:
            if axis.name == name:
                return axis
        raise KeyError(name)

    def point_fields(self, point: Mapping[str, Any]) -> dict[str, Any]:
        """RunConfig fields a grid point sets."""
        out: dict[str, Any] = {}
        for axis in self.axes:
            out.update(axis.fields_for(point[axis.name]))
        return out

    @property
    def varied_fields(self) -> set[str]:
        return set().union(*(a.fields for a in self.axes))

    @property
    def label_columns(self) -> list[str]:
        """Axis names that are labels rather than RunConfig fields (joint axes)."""
        return [a.name for a in self.axes if a.joint]


# Significant digits of a float in a point's label (live view, summary, folder names,
# trackers, the report); params.json and the manifest keep the full value.
LABEL_DIGITS = 4
FULL_PRECISION_DIGITS = 17  # enough for any float: repr's shortest round trip beyond


def label_value(value: Any, digits: int | None = LABEL_DIGITS) -> str:
    """``value`` as a label writes it: a float that ``digits`` significant digits would
    not give back exactly is rounded to them (``0.020547625125911337`` -> ``0.02055``);
    any other value as written (``5.0``, ``0.001``, ``moon``).  ``digits=None``: as
    written, always (the labels of sweeps from before the rounding)."""
    if isinstance(value, float) and digits and math.isfinite(value):
        short = f"{value:.{digits}g}"
        if float(short) != value:
            return short
    return str(value)


def point_label(point: Mapping[str, Any], digits: int | None = LABEL_DIGITS) -> str:
    """``"mu=5"``, ``"algorithm=moon, setting=N=50"``, ``"mu=0.02055, lr=0.1342"``: a
    point in words, floats at ``digits`` significant digits (:func:`label_value`)."""
    return ", ".join(f"{k}={label_value(v, digits)}" for k, v in point.items())


def distinct_label(
    point: Mapping[str, Any],
    earlier: Iterable[tuple[Mapping[str, Any], str]],
    digits: int | None = LABEL_DIGITS,
) -> str:
    """``point``'s label, kept apart from the ``earlier`` points' labels: two points
    whose rounded labels coincide are different points (a selection or a report groups
    trials by label), so the later one gets more digits, one at a time, until its label
    is new; a label that full precision cannot part (a value written exactly as another
    point's rounded label) gets `` (2)``, `` (3)``...  The same point keeps the same
    label.  Deterministic: it depends on the earlier points and their order only."""
    taken = [(dict(p), label) for p, label in earlier]
    mine = dict(point)
    clashes = lambda text: any(text == label and p != mine for p, label in taken)  # noqa: E731
    for same, label in taken:
        if same == mine:
            return label
    tried = digits
    while tried is not None:
        label = point_label(point, tried)
        if not clashes(label):
            return label
        tried = tried + 1 if tried < FULL_PRECISION_DIGITS else None
    label = point_label(point, None)
    if not clashes(label):  # full precision (digits=None: labels from before rounding)
        return label
    n = 2
    while clashes(f"{label} ({n})"):
        n += 1
    return f"{label} ({n})"


def distinct_labels(
    points: Sequence[Mapping[str, Any]], digits: int | None = LABEL_DIGITS
) -> list[str]:
    """Every point's :func:`distinct_label`, in order (a grid's labels)."""
    labels: list[str] = []
    for i, point in enumerate(points):
        labels.append(distinct_label(point, zip(points[:i], labels), digits))
    return labels
