"""Which task a sweep folder's trials ran, as its manifest declares it: the one adapter
for folders written before manifests recorded a declaration.

A sweep records its task's declaration in its manifest (``task_spec``,
:class:`~federated.contract.task_spec.TaskSpec`); the report reads every metric, word
and column of a trial from it and never asks which task it is.  A folder written before
that says only its task's name (the manifest's or the rows' ``task``; rows written
before tasks existed name none: classification) and, later ones, its metrics
(``metric_specs``): :func:`sweep_task` and :func:`rows_task` read what such a folder
carries, the built-in tasks' declarations of the time standing for what their names
meant then (:data:`~federated.tasks.written_before.WRITTEN_BEFORE_THE_CONTRACT`).
Nothing else in the report looks a task up by its name.

An older folder may also name a metric as it was then (a score trial's binary accuracy
was ``acc``): :func:`current_name` and :func:`current_metric` read its columns and its
``primary_metric`` under today's names, by the rows' task.

The loader (:mod:`analysis.reading.loading`) puts each trial's declaration in the
trials frame's :data:`TASK_SPEC` column (never written to ``data/trials.csv``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from federated.contract.task_spec import TaskSpec, spec_of_manifest
from federated.tasks.written_before import (
    UNTASKED_ROWS,
    WRITTEN_BEFORE_THE_CONTRACT,
    current_column,
    current_stem,
)

#: the trials frame's column holding each trial's task declaration (a TaskSpec, or None
#: where no manifest declared one and the rows' task name meant none)
TASK_SPEC = "task_spec"


def sweep_task(manifest: Mapping[str, Any]) -> TaskSpec | None:
    """The declaration a sweep's manifest carries (``task_spec``, or what an older
    manifest's ``task`` and ``metric_specs`` meant); None where it names no task (its
    trials' rows decide, :func:`rows_task`) or its record is damaged (the trials'
    metric is then refused in one line)."""
    try:
        spec = spec_of_manifest(manifest, WRITTEN_BEFORE_THE_CONTRACT)
    except (ValueError, TypeError, KeyError):
        return None
    recorded = manifest.get("task_spec")
    older = WRITTEN_BEFORE_THE_CONTRACT.get(spec.name) if spec is not None else None
    if older is not None and isinstance(recorded, Mapping) and "per_image_outcomes" not in recorded:
        # recorded before the declaration said which metrics are per-image outcomes
        return replace(spec, per_image_outcomes=older.per_image_outcomes)
    return spec


def rows_task(name: object) -> TaskSpec | None:
    """What the rows' task ``name`` meant in a folder whose manifest declared no task
    (missing: rows written before tasks existed, classification); None for a name no
    such folder could carry."""
    if name is None or (isinstance(name, float) and name != name):
        return UNTASKED_ROWS
    return WRITTEN_BEFORE_THE_CONTRACT.get(str(name))


def trial_task(declared: TaskSpec | None, name: object) -> TaskSpec | None:
    """A trial's task: its sweep's ``declared`` one, else what its rows' ``name`` meant."""
    return declared if declared is not None else rows_task(name)


def current_name(column: str, task: object) -> str:
    """A column of an older folder's trial of the rows' task ``task`` under today's name
    (a score trial's ``test_acc`` is ``test_bin_acc``); any other as it is."""
    return current_column(column, task)


def current_metric(stem: str, task: object) -> str:
    """An older trial's ``primary_metric`` under today's name (score ``acc``: ``bin_acc``)."""
    return current_stem(stem, task)
