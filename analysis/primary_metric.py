"""What a table ranks and reports: each metric a run records, defined once, and a sweep's
primary metric read from its trials.

A run records its task and its primary metric in its config (``task``: ``classification``
or ``score``; ``primary_metric``: federated/config/run_config.py).  Rows written before score tasks
existed have neither: they are classification runs reporting accuracy.

- Classification reports top-1 test accuracy (``acc``), as always: a fraction in the rows,
  a percentage with one decimal in the tables, differences in *points*, a chance level
  (1/classes) below which nothing has learned.
- A score task (image assessment: a score per image, federated/tasks/score/task.py) reports its
  primary metric, ``srcc`` by default, else the one the run chose: ``srcc`` / ``plcc``
  (Spearman / Pearson correlation, in [-1, 1], higher is better), ``mae`` / ``rmse`` (the
  error of the predicted score in the score's own units, lower is better), or
  ``bin_acc`` (the binary accuracy at the score threshold, a percentage; no chance
  level: the two sides of the threshold need not be equally common).  Older score runs
  recorded it as ``acc``: the readers (analysis/reading/trial_files.py) give it as
  ``bin_acc``.  Correlations and errors are shown
  with three decimals, their differences in the metric's own units.

Every score report also gives the field's pair, SRCC and MAE (the score task's ``reported_beside``):
its tables on the primary metric first, then the same tables on whichever of the pair is
not the primary (docs/reports.md, "Score tasks: the primary metric").

``--resolve-target POINTS`` (the seed plan's difference) is a share of each metric's
scale: POINTS accuracy points, or POINTS/100 in a correlation's or an error's units (2 ->
0.02), :meth:`Metric.target`.

Nothing here imports torch and nothing asks which task it is: a sweep's manifest
records its task's declaration (``task_spec``, :class:`~federated.contract.task_spec.TaskSpec`:
its metrics, the words its tables use), the loader puts it beside each trial (the trials
frame's ``task_spec`` column) and every metric is read from it; a folder written before
the manifest recorded one is read by the one adapter, :mod:`analysis.folder_task`.
This module adds how a table shows them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields

import pandas as pd

from analysis.folder_task import TASK_SPEC, rows_task
from analysis.naming import percent
from federated.contract.metrics import MetricSpec
from federated.contract.metrics import higher_is_better as contract_higher_is_better
from federated.contract.results import DAMAGED
from federated.contract.task_spec import TaskSpec
from federated.tasks.written_before import UNTASKED_ROWS


class PrimaryMetricError(ValueError):
    """Trials whose primary metrics cannot share a table, or a metric no task has: one
    line naming where and what is allowed."""


@dataclass(frozen=True)
class Metric(MetricSpec):
    """One reported metric of one task (:class:`~federated.contract.metrics.MetricSpec`'s
    fields), its task's words (:class:`~federated.contract.task_spec.TaskSpec`) and how
    a table shows it.

    Attributes (beside the spec's):
        final_words: the task's words for a rounds-to-reach target (empty: ``final <noun>``).
        nothing_learned: what a model that has learned nothing records, or None where
            the task gives no such value (a chance level applies instead, or none).
        reading_note: the task's sentence on how to read its metrics (empty: none).
        task_spec: the whole declaration it came from (its other metrics, what its
            partitions count); not part of the metric's identity.
    """

    final_words: str = ""
    nothing_learned: float | None = None
    reading_note: str = ""
    task_spec: TaskSpec | None = field(default=None, compare=False, repr=False)

    @property
    def column(self) -> str:
        """The rows' test column (``test_srcc``)."""
        return f"test_{self.stem}"

    @property
    def val_column(self) -> str:
        """The rows' validation column (``val_srcc``)."""
        return f"val_{self.stem}"

    @property
    def per_image_outcome(self) -> bool:
        """Whether its value is the share of images with a right outcome (one Bernoulli
        trial per image), as its task declares: only then is one image worth
        ``scale / images`` of it, and a binomial count of the images a difference needs
        meaningful."""
        return self.task_spec is not None and self.stem in self.task_spec.per_image_outcomes

    @property
    def sign(self) -> float:
        """+1 where higher is better, -1 where lower is: ``sign × value`` ranks upwards."""
        return 1.0 if self.higher_is_better else -1.0

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
        return self.final_words or f"final {self.noun}"

    @property
    def diff_unit(self) -> str:
        """What a difference is counted in: ``points``, or the metric's name (``SRCC``)."""
        return "points" if self.percent else self.name

    @property
    def diff_words(self) -> str:
        """The notes' words for a difference's unit: ``accuracy points``, ``mIoU points``,
        ``MAE units``: the metric's own name, never another's."""
        return f"{self.name} points" if self.percent else f"{self.name} units"

    @property
    def axis_label(self) -> str:
        """A figure axis: ``accuracy (%)``, ``mIoU (%)``, ``test SRCC``."""
        return f"{self.name} (%)" if self.percent else self.noun

    @property
    def file_word(self) -> str:
        """The metric in a file name: ``accuracy``, ``miou``, ``map_0_5``, ``srcc``."""
        return re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_") or self.stem

    @property
    def value_label(self) -> str:
        """A figure axis that names no split (a per-party or own-split figure, whose
        caption says the split): ``accuracy (%)``, ``mAP@0.5``, ``SRCC``."""
        return f"{self.name}{self.unit}"

    def units(self, value: float) -> float:
        """A recorded value (a fraction for accuracy) in display units."""
        return self.scale * value

    def show(self, value: float | None, digits: int | None = None) -> str:
        """A recorded value as a table shows it (``69.1``, ``0.812``; ``digits``
        decimals instead of :attr:`digits`); ``–`` when missing; a value that rounds to
        zero shows no sign (``-0.00`` read as a loss where there is none)."""
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        digits = self.digits if digits is None else digits
        text = percent(value, digits) if self.percent else f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text

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


def metrics_of(task: TaskSpec) -> dict[str, Metric]:
    """``task``'s metrics by stem as tables show them, the primary first."""
    return {
        spec.stem: Metric(
            **{f.name: getattr(spec, f.name) for f in fields(MetricSpec)},
            final_words=task.final_words,
            nothing_learned=task.nothing_learned,
            reading_note=task.reading_note,
            task_spec=task,
        )
        for spec in task.metrics
    }


#: the primary metric of rows that name no task (classification's), every default here
ACCURACY = next(iter(metrics_of(UNTASKED_ROWS).values()))


def metric_of(task: TaskSpec, stem: str | None = None) -> Metric:
    """The :class:`Metric` ``stem`` of ``task`` (default: the task's primary).  Raises
    :class:`PrimaryMetricError` for a metric the task does not declare."""
    metrics = metrics_of(task)
    stem = next(iter(metrics)) if stem is None else stem
    if stem not in metrics:
        allowed = ", ".join(metrics)
        raise PrimaryMetricError(
            f"primary_metric={stem!r} for a {task.name} task (allowed: {allowed})"
        )
    return metrics[stem]


def higher_is_better(column: str, metric: Metric) -> bool:
    """Whether a larger value of a row column of ``metric``'s task (``val_mae``,
    ``test_srcc``, ``val_loss``, or a bare stem) is better, as the task declares: losses
    are lower-is-better, each metric as its spec says, anything else higher."""
    specs = metric.task_spec.metrics if metric.task_spec else (metric,)
    return contract_higher_is_better(column, specs)


def _text(value: object) -> str | None:
    """A config cell as text; None where it is missing (older rows, NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return str(value)


def trial_metric(task: TaskSpec | None, primary: object, name: object = None) -> Metric:
    """One trial's metric from its task's declaration (None: none recorded, and its
    rows' task ``name`` is none an older folder could mean) and its ``primary_metric``
    config value (missing: the task's first metric)."""
    if task is None:
        raise PrimaryMetricError(f"task={_text(name)!r} declared by no manifest")
    return metric_of(task, _text(primary))


def sweep_metric(trials: pd.DataFrame, where: str) -> Metric:
    """The primary metric every trial of ``trials`` records (``where`` names them in an
    error: a sweep, a study).  Trials whose config was never read (damaged) say nothing.

    Raises :class:`PrimaryMetricError`, one line, when trials disagree (a table ranks by
    one metric) or record a metric no task has."""
    read = trials[trials["status"] != DAMAGED] if "status" in trials else trials
    names = read["task"] if "task" in read else pd.Series(None, index=read.index, dtype=object)
    tasks = read[TASK_SPEC] if TASK_SPEC in read else names.map(rows_task)
    primaries = (
        read["primary_metric"]
        if "primary_metric" in read
        else pd.Series(None, index=read.index, dtype=object)
    )
    counts: dict[Metric, int] = {}
    for task, primary, name in zip(tasks, primaries, names):
        try:
            metric = trial_metric(task, primary, name)
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
    """The metrics a study's tables are built on: the primary, then those its task
    declares ``reported_beside`` (a score task's SRCC and MAE)."""
    task = primary.task_spec
    if task is None:
        return [primary]
    metrics = metrics_of(task)
    beside = [metrics[s] for s in task.reported_beside if s != primary.stem and s in metrics]
    return [primary, *beside]
