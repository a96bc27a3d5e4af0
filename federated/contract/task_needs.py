"""What a method, an evaluation or a partition needs of a task, as data (torch-free).

A task says what it offers by its class attributes (:class:`~federated.tasks.base.Task`:
``has_classes``, ``targets_in_pixels``); whatever needs something of it declares a
:class:`TaskNeed` — an algorithm in ``Algorithm.task_needs``, an evaluation or a
partition beside its own definition — and :func:`unmet_need` is the one check, run by the
config before any data loads.  So a new task that offers less is refused where it cannot
serve, in one line, and a new need is one declaration; no check names a task.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskNeed:
    """One thing needed of a task.

    Attributes:
        attribute: the task class's flag that must hold (``has_classes``).
        value: the value it must have (``True``; ``False`` for "targets that a rotation
            would not move": ``targets_in_pixels`` must be False).
        what: what the need is, in the refusal's words ("a class label per image").
    """

    attribute: str
    value: bool
    what: str

    def met_by(self, task: Any) -> bool:
        return bool(getattr(task, self.attribute, False)) == self.value


#: one class label per sample: label-skew partitions, the representation probe's colours
CLASS_PER_SAMPLE = TaskNeed("has_classes", True, "a class label per image")
#: targets that rotating an image leaves as they are (not boxes or masks)
TARGETS_UNMOVED_BY_ROTATION = TaskNeed("targets_in_pixels", False, "targets a rotation leaves")


def unmet_need(task: Any, needs: tuple[TaskNeed, ...]) -> TaskNeed | None:
    """The first of ``needs`` the task class ``task`` does not meet, or None."""
    return next((need for need in needs if not need.met_by(task)), None)
