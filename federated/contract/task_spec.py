"""A task as the report sees it: its metrics and the words its tables use, as data.

A task (:class:`federated.tasks.base.Task`) declares one :class:`TaskSpec` (its
``contract``; a user's task without one gets :meth:`TaskSpec.plain` from its metrics).
A sweep records it in its manifest (``task_spec``) and the report, the live view and
the console read it there, torch-free: no table, caption or figure asks which task it
is, and a user's task reads right with none of its code imported.

A folder written before the manifest recorded a spec says only its task's name (the
rows' ``task``) and, later ones, its metrics (``metric_specs``):
:func:`spec_of_manifest` reads what the folder carries, the built-in tasks' specs
(:mod:`federated.tasks.written_before`) standing for what their names meant then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from federated.contract.metrics import MetricSpec

#: what a partition's per-class counts count, by default: the images of each class
IMAGES = "images"


@dataclass(frozen=True)
class TaskSpec:
    """One task's declaration for everything that reads its results.

    Attributes:
        name: the task's name as the rows' ``task`` holds it (a plug-in's import path).
        metrics: its metrics, the default primary first (never empty).
        reported_beside: stems every report also tables beside the primary (a score
            task's field pair SRCC and MAE); the primary itself is skipped.
        final_words: what a rounds-to-reach table calls the baseline's target ("final
            accuracy", the paper's words); empty: ``final <noun>``.
        nothing_learned: what a model that learned nothing records on its metrics where
            no chance level applies (a detector that finds nothing scores mAP 0): a
            rounds-to-reach target no better is reached by any round; None: unknown.
        reading_note: the sentence the report's *Runs* section adds on how to read its
            metrics (empty: none).
        counted: what a partition's per-class counts count: ``images`` (one class per
            image), ``boxes`` (a detection's objects), ``pixels`` (a mask's); empty: the
            task has no classes (a partition has image counts per party only).
    """

    name: str
    metrics: tuple[MetricSpec, ...]
    reported_beside: tuple[str, ...] = ()
    final_words: str = ""
    nothing_learned: float | None = None
    reading_note: str = ""
    counted: str = IMAGES

    @classmethod
    def plain(cls, name: str, metrics: tuple[MetricSpec, ...], has_classes: bool) -> TaskSpec:
        """A task that declared its metrics only (a user's): no words beyond them."""
        return cls(name, tuple(metrics), counted=IMAGES if has_classes else "")

    def named(self, name: str) -> TaskSpec:
        """The same declaration under the name the rows carry (a plug-in's import path)."""
        return TaskSpec(
            name,
            self.metrics,
            self.reported_beside,
            self.final_words,
            self.nothing_learned,
            self.reading_note,
            self.counted,
        )

    def to_dict(self) -> dict[str, Any]:
        """As the manifest holds it (JSON)."""
        return {
            "name": self.name,
            "metrics": [m.to_dict() for m in self.metrics],
            "reported_beside": list(self.reported_beside),
            "final_words": self.final_words,
            "nothing_learned": self.nothing_learned,
            "reading_note": self.reading_note,
            "counted": self.counted,
        }

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> TaskSpec:
        """The spec a manifest recorded; :class:`ValueError` (one line) when it is not one."""
        try:
            metrics = tuple(MetricSpec.from_dict(m) for m in values["metrics"])
            nothing = values.get("nothing_learned")
            spec = cls(
                str(values["name"]),
                metrics,
                tuple(str(s) for s in values.get("reported_beside") or ()),
                str(values.get("final_words") or ""),
                None if nothing is None else float(nothing),
                str(values.get("reading_note") or ""),
                str(values.get("counted", IMAGES) or ""),
            )
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"task_spec is not a task's declaration ({err!r:.80})") from None
        if not metrics:
            raise ValueError("task_spec names no metric (allowed: one or more)")
        return spec


def spec_of_manifest(
    manifest: Mapping[str, Any], builtin: Mapping[str, TaskSpec]
) -> TaskSpec | None:
    """The task spec a sweep folder carries: its manifest's ``task_spec``; in a folder
    written before it, ``metric_specs`` under the manifest's ``task`` (the words of the
    built-in task of that name where there is one, ``builtin``); None where the manifest
    names no task (its rows' ``task`` decides, :func:`spec_of_name`)."""
    recorded = manifest.get("task_spec")
    if isinstance(recorded, Mapping):
        return TaskSpec.from_dict(recorded)
    task = manifest.get("task")
    if not isinstance(task, str) or not task:
        return None
    if task in builtin:
        return builtin[task]
    specs = manifest.get("metric_specs")
    if not isinstance(specs, list) or not specs:
        return None
    metrics = tuple(MetricSpec.from_dict(s) for s in specs)
    return TaskSpec.plain(task, metrics, has_classes=False)
