"""A sweep's execution path, chosen by measurement where the user did not choose one.

Before a new sweep's trials start, the driver times packed and sequential execution on
the trials' own settings (:mod:`federated.engine.path_calibration`, a few seconds, or
the per-machine cache) and sets the faster path for every trial as the ``execution``
override, which the manifest keeps (``overrides``; ``--resume`` trains on the same path)
beside what was measured (``execution_choice``).  An ``execution`` the user wrote (a
study's fixed setting, an axis, ``--set``) is honoured untouched and nothing is timed.
Trials on GPUs or on a cluster's nodes run where the driver cannot time them, and a
sweep whose whole training is less than ten times the measurement's steps (a smoke
sweep) would spend more on timing than it could save: these keep packed execution, and
the line and manifest say why it was not measured (a shape already in the cache is read
from it whatever the sweep's size).  A task that cannot pack
(detection) trains sequentially everywhere, and so does record-level DP-SGD
(``dp_level=record``): the trials are set to sequential, nothing is timed, and the
line and manifest give the reason.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from federated.engine.path_calibration import (
    PATHS,
    TIMED_SHARE,
    Measure,
    PathCache,
    PathChoice,
    calibration_key,
    choose_path,
    faster_path,
    key_text,
    local_steps,
    measurement_steps,
    task_packing_obstacle,
)
from federated.execution.choice import record_level_obstacle
from study.plan import SweepPlan
from study.resources import TrialResources

DEFAULT_PATH = "packed"  # RunConfig's default: what trials run where nothing is measured


def user_chose_execution(plan: SweepPlan) -> bool:
    """Whether the user wrote ``execution``: ``--set``, the study's fixed settings or
    one of its axes."""
    return (
        "execution" in plan.overrides
        or "execution" in plan.study.fixed
        or any("execution" in axis.fields for axis in plan.study.axes)
    )


def sweep_path_choice(
    plan: SweepPlan,
    resources: TrialResources,
    remote: bool,
    *,
    cache: PathCache | None = None,
    measure: Measure | None = None,
) -> PathChoice:
    """The path the sweep's trials train on, and why.  A measured choice is set as the
    plan's ``execution`` override (the trials' configs and the manifest carry it).

    Trials of several shapes (an algorithm or model axis) are timed once per distinct
    shape and the path with the smaller total over all trials wins (one path per sweep:
    a user comparing methods compares them on one path)."""
    if user_chose_execution(plan):
        return PathChoice(plan.first_config().get("execution", DEFAULT_PATH), "user")
    # a task that cannot pack (detection), or record-level DP-SGD (each sample's gradient
    # on its own), trains sequentially wherever its trials run: said as its reason and
    # set on the trials (the manifest records the path they train on), never timed
    first = plan.trials()[0].run_config
    obstacle = record_level_obstacle(first) or task_packing_obstacle(first)
    if obstacle is not None:
        plan.overrides["execution"] = "sequential"
        return PathChoice("sequential", "not packable", reason=obstacle)
    if remote:
        return PathChoice(DEFAULT_PATH, "not measured", reason="trials run on a cluster's nodes")
    if resources.gpus > 0:
        return PathChoice(DEFAULT_PATH, "not measured", reason="trials run on a GPU")
    # each distinct shape by its key's text: (its calibration key, its first trial's config)
    shapes: dict[str, tuple[dict[str, Any], Any]] = {}
    counts: Counter[str] = Counter()
    for trial in plan.trials():
        key = calibration_key(trial.run_config)
        text = key_text(key)
        shapes.setdefault(text, (key, trial.run_config))
        counts[text] += 1
    cache = cache or PathCache()
    too_short = _too_short_to_time(plan, shapes, cache)
    if too_short is not None:
        return PathChoice(DEFAULT_PATH, "not measured", reason=too_short)
    choices = {
        text: choose_path(cfg, cache=cache, measure=measure) for text, (_, cfg) in shapes.items()
    }
    timed = {t: c for t, c in choices.items() if c.timings_s}
    if not timed:  # no shape can pack: the trials fall back to sequential (they say so)
        first = next(iter(choices.values()))
        return PathChoice(DEFAULT_PATH, first.source, key=first.key, reason=first.reason)
    if len(timed) == 1:  # one shape (the usual sweep): its measurement as it was taken
        (choice,) = timed.values()
    else:  # each shape's seconds times its trials, summed: the sweep's total per path
        totals = {p: sum(counts[t] * c.timings_s[p] for t, c in timed.items()) for p in PATHS}
        sources = {c.source for c in timed.values()}
        choice = PathChoice(
            faster_path(totals),
            "measured" if "measured" in sources else "cache",
            totals,
            {"shapes": [c.key for c in timed.values()]},
            max(c.measured_at or "" for c in timed.values()) or None,
        )
    plan.overrides["execution"] = choice.path
    return choice


def _too_short_to_time(
    plan: SweepPlan, shapes: dict[str, tuple[dict[str, Any], Any]], cache: PathCache
) -> str | None:
    """Why the sweep is not timed, or None: a shape (``shapes``: key text -> calibration
    key and config) not yet in the cache would be measured, and the measurement would be
    more than :data:`TIMED_SHARE` of the local steps the sweep plans (an Optuna sweep's
    trials counted as its example point's)."""
    if all(cache.get(key) is not None for key, _ in shapes.values()):
        return None  # read from the cache: free
    trials = plan.trials()
    planned = sum(local_steps(t.run_config) for t in trials) * plan.n_trials // len(trials)
    timing = sum(measurement_steps(cfg) for _, cfg in shapes.values())
    if planned * TIMED_SHARE >= timing:
        return None
    return (
        f"the sweep trains about {planned:,} local steps; timing both paths takes up to "
        f"{timing:,}, which pays from {math.ceil(timing / TIMED_SHARE):,}"
    )
