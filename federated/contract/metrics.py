"""The metrics a task records, as data every side reads alike: the engine writes them
(``test_<stem>``, ``val_<stem>`` columns), ``study`` ranks trials by them and
``analysis`` builds tables on them, without importing torch.

A task (:mod:`federated.tasks`) names its metrics with :class:`MetricSpec` values, its
primary metric first, inside its declaration
(:class:`~federated.contract.task_spec.TaskSpec`; the built-in tasks' are
:mod:`federated.contract.builtin_tasks`); a sweep records the declaration in its
manifest (``task_spec``) so that a report reads it as data, never by importing the
task's code.

A column says what it holds: a score task's binary accuracy at its threshold is
``bin_acc`` (``test_bin_acc``, ``val_bin_acc``, ``party_bin_acc_mean`` ...), never
``acc``, which is classification's top-1 accuracy.  Score runs written before it had a
name of its own recorded it as ``acc``; :func:`current_column` reads such a column under
today's name (:data:`RENAMED_STEMS`).
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass
from typing import Any

CLASSIFICATION, SCORE, DETECTION = "classification", "score", "detection"


@dataclass(frozen=True)
class MetricSpec:
    """One metric of one task.

    Attributes:
        stem: the rows' column stem: ``test_<stem>``, ``val_<stem>``.
        task: the task's name (``classification``, ``score``, a plug-in's own).
        higher_is_better: False for errors (``mae``, ``rmse``).
        name: its short name in sentences ("accuracy", "SRCC", "MAE").
        noun: what a caption calls the test value ("top-1 test accuracy", "test SRCC").
        percent: recorded as a fraction, shown as a percentage (one decimal), differences
            in points; otherwise shown as recorded with three decimals.
        chance: a chance level (1/classes) applies (classification accuracy only).
        bounds: the closed range every value of it lies in ((0, 1) for a fraction,
            (-1, 1) for a correlation, (0, inf) for an error): a row's value outside it
            is damage, never a number a table shows (a "170 %" accuracy).
    """

    stem: str
    task: str
    higher_is_better: bool
    name: str
    noun: str
    percent: bool
    chance: bool
    bounds: tuple[float, float] = (-math.inf, math.inf)

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it: an open end of ``bounds`` is null (JSON has no infinity)."""
        values = asdict(self)
        values["bounds"] = [v if math.isfinite(v) else None for v in self.bounds]
        return values

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> MetricSpec:
        """The spec a manifest recorded (one written before ``bounds`` has none: any
        finite value is in range)."""
        known = {k: values[k] for k in cls.__dataclass_fields__ if k in values}
        if "bounds" in known:
            low, high = known["bounds"]
            known["bounds"] = (
                -math.inf if low is None else float(low),
                math.inf if high is None else float(high),
            )
        return cls(**known)

    def holds(self, value: float) -> bool:
        """Whether ``value`` (finite) lies in the metric's range."""
        low, high = self.bounds
        return low <= value <= high


#: a score task's binary accuracy at its threshold (its own name: ``acc`` is top-1)
BINARY_ACCURACY = "bin_acc"
FRACTION = (0.0, 1.0)
CORRELATION = (-1.0, 1.0)
ERROR = (0.0, math.inf)
ACCURACY = MetricSpec(
    "acc", CLASSIFICATION, True, "accuracy", "top-1 test accuracy", True, True, FRACTION
)
SCORE_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("srcc", SCORE, True, "SRCC", "test SRCC", False, False, CORRELATION),
    MetricSpec("plcc", SCORE, True, "PLCC", "test PLCC", False, False, CORRELATION),
    MetricSpec("mae", SCORE, False, "MAE", "test MAE", False, False, ERROR),
    MetricSpec("rmse", SCORE, False, "RMSE", "test RMSE", False, False, ERROR),
    MetricSpec(
        BINARY_ACCURACY,
        SCORE,
        True,
        "binary accuracy",
        "binary test accuracy at the score threshold",
        True,
        False,
        FRACTION,
    ),
)
#: object detection (federated/tasks/detection.py): COCO's 101-point interpolated AP,
#: fractions in [0, 1]; mAP@0.5 is the Street paper's metric, mAP@[.5:.95] COCO's
DETECTION_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("map50", DETECTION, True, "mAP@0.5", "test mAP@0.5", False, False, FRACTION),
    MetricSpec("map", DETECTION, True, "mAP@[.5:.95]", "test mAP@[.5:.95]", False, False, FRACTION),
)
#: a loss is always recorded (``test_loss``, ``val_loss``) and always minimised
LOSS = "loss"
#: per-party summaries of a task's per-party metric (``party_<stem>_mean`` ...): mean,
#: population std, the worst party and the mean of the worst ceil(N/10)
PARTY_SUMMARY_TAILS = ("mean", "std", "min", "worst10")
#: metric stems that older runs of a built-in task recorded under another name: task ->
#: {old stem: today's stem} (a score task's binary accuracy was ``acc``)
RENAMED_STEMS: dict[str, dict[str, str]] = {SCORE: {"acc": BINARY_ACCURACY}}
# the columns a stem names: test_/val_ values and their spread over parties, the row's
# per-party summaries and per-party values, parties.csv's columns and a selection
# record's search_test_<stem>
_STEM_COLUMN = re.compile(
    r"^(?P<head>(?:search_)?(?:party_val|party_test|test|val|party)_)(?P<stem>[a-z0-9]+(?:_[a-z0-9]+)*?)"
    r"(?P<tail>_std|_mean|_min|_worst10|/\d+)?$"
)


def metric_stems(specs: tuple[MetricSpec, ...]) -> tuple[str, ...]:
    """The stems of ``specs``, in order (the primary first)."""
    return tuple(s.stem for s in specs)


def higher_is_better(column: str, specs: tuple[MetricSpec, ...] = ()) -> bool:
    """Whether a larger value of a row column (``val_mae``, ``test_srcc``, ``val_loss``
    or a bare stem) is better, by ``specs`` (the run's task's): losses are
    lower-is-better, a metric as its spec says, anything else higher."""
    stem = column.split("_", 1)[1] if column.startswith(("test_", "val_")) else column
    if stem == LOSS:
        return False
    for spec in specs:
        if spec.stem == stem:
            return spec.higher_is_better
    return True


def party_summary_keys(stem: str) -> tuple[str, ...]:
    """The row's per-party summary columns of the per-party metric ``stem``:
    ``party_acc_mean``, ``party_acc_std``, ``party_acc_min``, ``party_acc_worst10``."""
    return tuple(f"party_{stem}_{tail}" for tail in PARTY_SUMMARY_TAILS)


def current_column(column: str, task: object) -> str:
    """``column`` of a run of ``task`` under today's name: an older score run's
    ``test_acc`` is ``test_bin_acc`` (likewise ``val_``, ``party_``, ``party_val_``,
    ``search_test_``, ``_std``, ``_mean`` ..., ``/<party>``); any other column, and
    every column of another task, as it is."""
    renamed = RENAMED_STEMS.get(str(task), {})
    if not renamed:
        return column
    for old, new in renamed.items():
        match = _STEM_COLUMN.match(column)
        if match and match["stem"] == old:
            return f"{match['head']}{new}{match['tail'] or ''}"
    return column


def current_stem(stem: str, task: object) -> str:
    """A metric name a run of ``task`` recorded (``primary_metric``) under today's name
    (an older score run's ``acc`` is ``bin_acc``)."""
    return RENAMED_STEMS.get(str(task), {}).get(stem, stem)
