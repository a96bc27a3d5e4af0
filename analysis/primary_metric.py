"""What a table ranks and reports: each metric a run records, defined once, and a sweep's
primary metric read from its trials.

A run records its task and its primary metric in its config (``task``: ``classification``
or ``score``; ``primary_metric``: federated/config/run_config.py).  Rows written before score tasks
existed have neither: they are classification runs reporting accuracy.

- Classification reports top-1 test accuracy (``acc``), as always: a fraction in the rows,
  a percentage with one decimal in the tables, differences in *points*, a chance level
  (1/classes) below which nothing has learned.
- A score task (image assessment: a score per image, federated/tasks/score.py) reports its
  primary metric, ``srcc`` by default, else the one the run chose: ``srcc`` / ``plcc``
  (Spearman / Pearson correlation, in [-1, 1], higher is better), ``mae`` / ``rmse`` (the
  error of the predicted score in the score's own units, lower is better), or
  ``bin_acc`` (the binary accuracy at the score threshold, a percentage; no chance
  level: the two sides of the threshold need not be equally common).  Older score runs
  recorded it as ``acc``: the readers (analysis/reading/trial_files.py) give it as
  ``bin_acc``.  Correlations and errors are shown
  with three decimals, their differences in the metric's own units.

Every score report also gives the field's pair, SRCC and MAE (:data:`SCORE_REPORTED`):
its tables on the primary metric first, then the same tables on whichever of the pair is
not the primary (docs/reports.md, "Score tasks: the primary metric").

``--resolve-target POINTS`` (the seed plan's difference) is a share of each metric's
scale: POINTS accuracy points, or POINTS/100 in a correlation's or an error's units (2 ->
0.02), :meth:`Metric.target`.

Nothing here imports torch: the metrics are the torch-free specs of
:mod:`federated.contract.metrics`, the same ones the engine's tasks record; this module
adds how a table shows them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import pandas as pd

from analysis.naming import percent
from federated.contract.metrics import ACCURACY as ACCURACY_SPEC
from federated.contract.metrics import (
    BUILTIN_TASK_METRICS,
    CLASSIFICATION,
    DETECTION,
    SCORE,
    SCORE_SPECS,
    MetricSpec,
    metric_stems,
)
from federated.contract.metrics import higher_is_better as contract_higher_is_better
from federated.contract.results import DAMAGED

#: the field's pair every score report shows besides its primary metric
SCORE_REPORTED = ("srcc", "mae")
#: per task, the metrics its reports show beside the primary (as data: no branch on a
#: task's name); a task without an entry is reported on its primary alone
REPORTED_BESIDE: dict[str, tuple[str, ...]] = {SCORE: SCORE_REPORTED}
#: per task, what a rounds-to-reach table calls the baseline's target where the task's
#: words are not ``final <noun>`` (classification keeps the paper's "final accuracy")
FINAL_WORDS: dict[str, str] = {CLASSIFICATION: "final accuracy"}
#: per task, what a model that has learned nothing records on its metrics where the task
#: has no chance level (a detector that finds no object scores mAP 0): a rounds-to-reach
#: target no better than it is reached by any round, so that table gives no speed-up
NOTHING_LEARNED: dict[str, float] = {DETECTION: 0.0}
#: per task, the sentence the report's *Runs* section adds on how to read its metrics
READING_NOTES: dict[str, str] = {
    SCORE: (
        " Score tasks (image assessment) report their primary metric as recorded, three "
        "decimals: SRCC and PLCC (correlations in [-1, 1], higher is better), MAE and RMSE "
        "(in the score's own units, lower is better); their Δ and resolvable differences "
        'are in the metric\'s units (docs/reports.md, "Score tasks: the primary metric").'
    ),
    DETECTION: (
        " Detection reports average precision as recorded, three decimals: mAP@0.5 (the "
        "Street paper's metric) and mAP@[.5:.95] (COCO's), fractions in [0, 1] with COCO's "
        "101-point interpolation, higher is better; their Δ and resolvable differences are "
        "in AP units (docs/detection.md)."
    ),
}


class PrimaryMetricError(ValueError):
    """Trials whose primary metrics cannot share a table, or a metric no task has: one
    line naming where and what is allowed."""


@dataclass(frozen=True)
class Metric(MetricSpec):
    """One reported metric of one task (:class:`~federated.contract.metrics.MetricSpec`'s
    fields) and how a table shows it."""

    @property
    def column(self) -> str:
        """The rows' test column (``test_srcc``)."""
        return f"test_{self.stem}"

    @property
    def val_column(self) -> str:
        """The rows' validation column (``val_srcc``)."""
        return f"val_{self.stem}"

    @property
    def sign(self) -> float:
        """+1 where higher is better, -1 where lower is: ``sign × value`` ranks upwards."""
        return 1.0 if self.higher_is_better else -1.0

    @property
    def nothing_learned(self) -> float | None:
        """What a model that has learned nothing records (:data:`NOTHING_LEARNED`), or
        None where the task gives no such value (a chance level applies instead, or none)."""
        return NOTHING_LEARNED.get(self.task)

    @property
    def scale(self) -> float:
        """Display units per recorded unit: 100 for percentages, else 1."""
        return 100.0 if self.percent else 1.0

    @property
    def digits(self) -> int:
        return 1 if self.percent else 3

    @property
    def unit(self) -> str:
        """The caption's unit after the noun: ``" (%)"`` or nothing."""
        return " (%)" if self.percent else ""

    @property
    def words(self) -> str:
        """The caption words: ``"top-1 test accuracy (%)"``, ``"test SRCC"``."""
        return f"{self.noun}{self.unit}"

    @property
    def final_noun(self) -> str:
        """The baseline's target of a rounds-to-reach table: ``final accuracy`` (the
        paper's words, classification), ``final test MAE``."""
        return FINAL_WORDS.get(self.task, f"final {self.noun}")

    @property
    def diff_unit(self) -> str:
        """What a difference is counted in: ``points``, or the metric's name (``SRCC``)."""
        return "points" if self.percent else self.name

    @property
    def diff_words(self) -> str:
        """The notes' words for a difference's unit: ``accuracy points``, ``MAE units``."""
        return "accuracy points" if self.percent else f"{self.name} units"

    @property
    def axis_label(self) -> str:
        """A figure axis: ``accuracy (%)``, ``test SRCC``."""
        return "accuracy (%)" if self.percent else self.noun

    def units(self, value: float) -> float:
        """A recorded value (a fraction for accuracy) in display units."""
        return self.scale * value

    def show(self, value: float | None, digits: int | None = None) -> str:
        """A recorded value as a table shows it (``69.1``, ``0.812``; ``digits``
        decimals instead of :attr:`digits`); ``–`` when missing."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        digits = self.digits if digits is None else digits
        return percent(value, digits) if self.percent else f"{value:.{digits}f}"

    def amount(self, difference: float) -> str:
        """A difference in display units with its unit: ``2.1 points``, ``0.021 SRCC``."""
        return f"{difference:.{self.digits}f} {self.diff_unit}"

    def target(self, points: float) -> float:
        """``--resolve-target POINTS`` in display units: POINTS for a percentage, POINTS
        hundredths of the scale otherwise (2 -> 0.02)."""
        return points if self.percent else points / 100.0

    def points(self, difference: float) -> float:
        """A difference in display units as hundredths of the scale (the inverse of
        :meth:`target`): what ``--seeds until:T`` compares with T."""
        return difference if self.percent else difference * 100.0


def _shown(spec: MetricSpec) -> Metric:
    return Metric(**{f.name: getattr(spec, f.name) for f in fields(MetricSpec)})


ACCURACY = _shown(ACCURACY_SPEC)
SCORE_METRICS: dict[str, Metric] = {spec.stem: _shown(spec) for spec in SCORE_SPECS}
#: each built-in task's metrics as tables show them, the primary first
BUILTIN_METRICS: dict[str, tuple[Metric, ...]] = {
    CLASSIFICATION: (ACCURACY,),
    SCORE: tuple(SCORE_METRICS.values()),
    # every other built-in task (detection: mAP@0.5, mAP@[.5:.95]) as its specs say
    **{
        task: tuple(_shown(spec) for spec in specs)
        for task, specs in BUILTIN_TASK_METRICS.items()
        if task not in (CLASSIFICATION, SCORE)
    },
}
#: each task's metrics, the default (primary) first
TASK_METRICS: dict[str, tuple[str, ...]] = {
    task: metric_stems(specs) for task, specs in BUILTIN_TASK_METRICS.items()
}


#: the metrics of tasks that are not built in (a user's ``package.module:Class``), as
#: the sweeps' manifests recorded them (:func:`record_task_metrics`): read as data, the
#: task's code is never imported by a report
RECORDED_TASK_METRICS: dict[str, tuple[Metric, ...]] = {}


def record_task_metrics(manifest: dict) -> None:
    """Make a sweep's own task's metrics known (its manifest's ``task`` and
    ``metric_specs``, written by ``study.sweep``); built-in tasks keep their own."""
    task, specs = manifest.get("task"), manifest.get("metric_specs")
    if not task or task in TASK_METRICS or not isinstance(specs, list) or not specs:
        return
    try:
        RECORDED_TASK_METRICS[str(task)] = tuple(
            _shown(MetricSpec.from_dict(spec)) for spec in specs
        )
    except (KeyError, TypeError):
        return  # a damaged record: the trials' metric is then refused in one line


def _task_metrics(task: str) -> dict[str, Metric]:
    """``task``'s metrics by stem, the primary first: a built-in task's, or a recorded one's."""
    shown = BUILTIN_METRICS.get(task) or RECORDED_TASK_METRICS.get(task, ())
    return {m.stem: m for m in shown}


def metric_of(task: str, stem: str | None = None) -> Metric:
    """The :class:`Metric` ``stem`` of ``task`` (default: the task's primary).  Raises
    :class:`PrimaryMetricError` for a task or metric no run records."""
    metrics = _task_metrics(task)
    if not metrics:
        known = [*TASK_METRICS, *RECORDED_TASK_METRICS]
        raise PrimaryMetricError(f"task={task!r} (allowed: {', '.join(known)})")
    stem = next(iter(metrics)) if stem is None else stem
    if stem not in metrics:
        allowed = ", ".join(metrics)
        raise PrimaryMetricError(f"primary_metric={stem!r} for a {task} task (allowed: {allowed})")
    return metrics[stem]


def higher_is_better(column: str) -> bool:
    """Whether a larger value of a row column (``val_mae``, ``test_srcc``, ``val_loss``,
    or a bare stem) is better: errors and losses are lower-is-better, the rest higher
    (a recorded plug-in task's metrics by their specs)."""
    recorded = tuple(m for metrics in RECORDED_TASK_METRICS.values() for m in metrics)
    return contract_higher_is_better(column, recorded)


def _text(value: object) -> str | None:
    """A config cell as text; None where it is missing (older rows, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def trial_metric(task: object, primary: object) -> Metric:
    """One trial's metric from its ``task`` and ``primary_metric`` config values (missing
    in rows written before score tasks: classification accuracy)."""
    task_text = _text(task) or CLASSIFICATION
    return metric_of(task_text, _text(primary))


def sweep_metric(trials: pd.DataFrame, where: str) -> Metric:
    """The primary metric every trial of ``trials`` records (``where`` names them in an
    error: a sweep, a study).  Trials whose config was never read (damaged) say nothing.

    Raises :class:`PrimaryMetricError`, one line, when trials disagree (a table ranks by
    one metric) or record a metric no task has."""
    read = trials[trials["status"] != DAMAGED] if "status" in trials else trials
    tasks = read["task"] if "task" in read else pd.Series(None, index=read.index, dtype=object)
    primaries = (
        read["primary_metric"]
        if "primary_metric" in read
        else pd.Series(None, index=read.index, dtype=object)
    )
    counts: dict[Metric, int] = {}
    for task, primary in zip(tasks, primaries):
        try:
            metric = trial_metric(task, primary)
        except PrimaryMetricError as err:
            raise PrimaryMetricError(f"{where}: {err}") from None
        counts[metric] = counts.get(metric, 0) + 1
    if len(counts) > 1:
        found = ", ".join(f"{m.task} {m.stem}: {n} trial(s)" for m, n in counts.items())
        raise PrimaryMetricError(
            f"{where}: the trials record different primary metrics ({found}); a table ranks "
            "by one metric: report each primary_metric's sweeps apart"
        )
    return next(iter(counts), ACCURACY)


def table_metrics(primary: Metric) -> list[Metric]:
    """The metrics a study's tables are built on: the primary, then the rest of its
    task's :data:`REPORTED_BESIDE` (a score task's SRCC and MAE)."""
    metrics = _task_metrics(primary.task)
    beside = REPORTED_BESIDE.get(primary.task, ())
    return [primary, *(metrics[s] for s in beside if s != primary.stem)]
