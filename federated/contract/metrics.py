"""The metrics a task records, as data every side reads alike: the engine writes them
(``test_<stem>``, ``val_<stem>`` columns), ``study`` ranks trials by them and
``analysis`` builds tables on them, without importing torch.

A task (:mod:`federated.tasks`) names its metrics with :class:`MetricSpec` values, its
primary metric first.  The built-in tasks' specs are here (:data:`BUILTIN_TASK_METRICS`);
a user's own task (``task=package.module:Class``) carries its specs on its class, and a
sweep records them in its manifest (``metric_specs``) so that a report reads them as
data, never by importing the user's code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

CLASSIFICATION, SCORE = "classification", "score"


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
    """

    stem: str
    task: str
    higher_is_better: bool
    name: str
    noun: str
    percent: bool
    chance: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> MetricSpec:
        return cls(**{k: values[k] for k in cls.__dataclass_fields__})


ACCURACY = MetricSpec("acc", CLASSIFICATION, True, "accuracy", "top-1 test accuracy", True, True)
SCORE_SPECS: tuple[MetricSpec, ...] = (
    MetricSpec("srcc", SCORE, True, "SRCC", "test SRCC", False, False),
    MetricSpec("plcc", SCORE, True, "PLCC", "test PLCC", False, False),
    MetricSpec("mae", SCORE, False, "MAE", "test MAE", False, False),
    MetricSpec("rmse", SCORE, False, "RMSE", "test RMSE", False, False),
    MetricSpec(
        "acc", SCORE, True, "accuracy", "binary test accuracy at the score threshold", True, False
    ),
)
#: each built-in task's metrics, the default primary first
BUILTIN_TASK_METRICS: dict[str, tuple[MetricSpec, ...]] = {
    CLASSIFICATION: (ACCURACY,),
    SCORE: SCORE_SPECS,
}
#: a loss is always recorded (``test_loss``, ``val_loss``) and always minimised
LOSS = "loss"


def metric_stems(specs: tuple[MetricSpec, ...]) -> tuple[str, ...]:
    """The stems of ``specs``, in order (the primary first)."""
    return tuple(s.stem for s in specs)


def task_metric_specs(task: str) -> tuple[MetricSpec, ...]:
    """The metric specs of ``task``: a built-in task's from :data:`BUILTIN_TASK_METRICS`,
    a plug-in's (``package.module:Class``) from its class, imported (the sweep runs that
    code anyway; a report reads the specs from the sweep's manifest instead)."""
    if task in BUILTIN_TASK_METRICS:
        return BUILTIN_TASK_METRICS[task]
    from federated.registry import load_method

    return tuple(load_method("task", task).metrics)


def higher_is_better(column: str, specs: tuple[MetricSpec, ...] = ()) -> bool:
    """Whether a larger value of a row column (``val_mae``, ``test_srcc``, ``val_loss``
    or a bare stem) is better, by ``specs`` (a task's) first, then the built-in tasks':
    losses and errors are lower-is-better, the rest higher."""
    stem = column.split("_", 1)[1] if column.startswith(("test_", "val_")) else column
    if stem == LOSS:
        return False
    builtin = tuple(s for specs_ in BUILTIN_TASK_METRICS.values() for s in specs_)
    for spec in (*specs, *builtin):
        if spec.stem == stem:
            return spec.higher_is_better
    return True
