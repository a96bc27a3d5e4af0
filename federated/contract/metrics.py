"""The metrics a task records, as data every side reads alike: the engine writes them
(``test_<stem>``, ``val_<stem>`` columns), ``study`` ranks trials by them and
``analysis`` builds tables on them, without importing torch.

A task kind (``federated/tasks/<kind>/``) names its metrics with :class:`MetricSpec`
values, its primary metric first, inside its declaration
(:class:`~federated.contract.task_spec.TaskSpec`, the kind's torch-free ``spec.py``); a
sweep records the declaration in its manifest (``task_spec``) so that a report reads it
as data, never by importing the task's code.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


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


FRACTION = (0.0, 1.0)
CORRELATION = (-1.0, 1.0)
ERROR = (0.0, math.inf)
#: a loss is always recorded (``test_loss``, ``val_loss``) and always minimised
LOSS = "loss"
#: per-party summaries of a task's per-party metric (``party_<stem>_mean`` ...): mean,
#: population std, the worst party and the mean of the worst ceil(N/10)
PARTY_SUMMARY_TAILS = ("mean", "std", "min", "worst10")


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
