"""What ``python -m study.sweep`` says about studies and plans before anything runs:
the ``--list`` table, the ``--dry-run`` listing (its first two lines also head a real
sweep), what the budget changed, and the ``warning:`` lines for the ``--set`` fields and
study axes no trial would use.
"""

from __future__ import annotations

import math
from typing import Any

from federated.config.inert_settings import inert_settings
from federated.config.privacy_fields import planned_epsilon
from federated.config.protocol_notices import protocol_notices
from federated.config.run_config import RunConfig
from search_spaces import BUDGETS, STUDIES
from study.plan import SweepPlan
from study.resources import TrialResources


def list_studies() -> str:
    """The ``--list`` table: each built-in study, the paper table it reproduces, its grid
    and seeds, and the budgets."""
    lines = [f"{'study':<16} {'reproduces':<26} {'grid':>4} {'seeds':>5}  varies"]
    for s in STUDIES.values():
        varies = " x ".join(f"{a.name} ({len(a.values)})" for a in s.axes)
        lines.append(f"{s.name:<16} {s.paper:<26} {s.grid_size:>4} {s.seeds:>5}  {varies}")
        lines.append(f"{'':<16} {s.description}; paper datasets: {', '.join(s.paper_datasets)}")
    lines.append("")
    lines.append("budgets: " + "; ".join(f"{b.name}: {b.description}" for b in BUDGETS.values()))
    return "\n".join(lines)


def describe_plan(plan: SweepPlan, resources: TrialResources) -> str:
    """The ``--dry-run`` listing: the study, budget and search, each trial's resources, and
    one line per trial with the fields that tell trials apart."""
    paper = f" ({plan.study.paper})" if plan.study.paper else ""
    head = (
        f"study {plan.study.name}{paper} on {plan.dataset}, "
        f"budget {plan.budget.name}, {plan.search} search: {plan.n_trials} trials"
    )
    if plan.search == "grid":
        head += f" ({plan.study.grid_size} grid points x {len(plan.seeds)} seeds)"
    lines = [head, describe_budget(plan), f"each trial: {resources.describe()}"]
    if resources.gpus:
        lines.append("(GPUs fall back to CPU with a warning when the cluster has none)")
    if plan.search == "optuna":
        lines.append(f"seed {plan.seeds[0]}; Optuna TPE (seed 0) over:")
        for axis in plan.study.axes:
            lines.append(f"  {axis.name}: {axis.search_range.describe()}")
        lines.append("every trial resolves like this example:")
    for i, trial in enumerate(plan.trials(), 1):
        c = trial.config
        lines.append(
            f"  {i:>3}. {trial.label:<40} seed={trial.seed}  {c['algorithm']} {c['model']} "
            f"N={c['n_parties']} frac={c['sample_fraction']:g} rounds={c['rounds']} "
            f"E={c['local_epochs']} "
            f"data={c['data_fraction']:g} {c['precision']}"
            # the weight and temperature of the methods that declare them (MOON, FedProx)
            + "".join(f" {k}={c[k]:g}" for k in ("mu", "tau") if k in c)
            + _planned_epsilon(trial.run_config)
        )
    return "\n".join(lines)


def _planned_epsilon(config: RunConfig | None) -> str:
    """`` ε=535 (δ=1e-05)``: the client-level ε a DP trial's planned rounds spend;
    empty for a trial without party-level DP (or not resolved)."""
    planned = planned_epsilon(config) if config is not None else None
    if planned is None:
        return ""
    epsilon, delta = planned
    return f" ε={'inf' if math.isinf(epsilon) else f'{epsilon:.3g}'} (δ={delta:g})"


def describe_budget(plan: SweepPlan) -> str:
    """What the budget changed, ``field from -> to`` (the manifest keeps the same), and
    that values the user wrote stand."""
    changes = plan.budget_changes()

    def show(value: Any) -> str:
        return f"{value:g}" if isinstance(value, float) else str(value)

    if not changes:
        return f"budget {plan.budget.name}: changes nothing (every value as written)"
    parts = [
        f"{name} " + ", ".join(f"{show(a)} -> {show(b)}" for a, b in pairs)
        for name, pairs in changes.items()
    ]
    stands = "" if plan.study.paper_settings else " (your study's own values stand)"
    return f"budget {plan.budget.name} changed: " + "; ".join(parts) + stands


def plan_warnings(plan: SweepPlan) -> list[str]:
    """Every ``warning:`` line of a plan, printed by a dry run and a real sweep alike:
    the ``--set`` fields (:func:`override_warnings`), the study's ``[fixed]`` values
    (:func:`fixed_warnings`) and its axes (:func:`axis_warnings`) that have no effect in
    any trial."""
    configs = [t.run_config for t in plan.trials()]  # resolved once, by the plan
    written = {**plan.study.fixed, **plan.overrides}
    # each distinct notice once, in the trials' order (a FedPer cell's, not every seed's)
    notices = dict.fromkeys(line for c in configs for line in protocol_notices(c, written))
    return (
        override_warnings(plan, configs)
        + fixed_warnings(plan, configs)
        + list(notices)
        + axis_warnings(plan, configs)
    )


def fixed_warnings(plan: SweepPlan, configs: list[RunConfig] | None = None) -> list[str]:
    """``warning:`` lines for the study's ``[fixed]`` fields that have no effect in any of
    its trials (``personal_layers`` in a study of FedAvg only), as a single run warns of
    the same value; a field ``--set`` overrides is :func:`override_warnings`' to say."""
    given = [k for k in plan.study.fixed if k not in plan.overrides]
    lines = _inert_in_every_trial(plan, given, configs)
    return [line.replace("warning: ", "warning: [fixed] ", 1) for line in lines]


def axis_warnings(plan: SweepPlan, configs: list[RunConfig] | None = None) -> list[str]:
    """One ``warning:`` line per plain axis of the study whose field has no effect in any
    trial, given the trial's other settings (``feature_skew_level`` under
    ``feature_skew = "none"``, ``straggler_policy`` with ``straggler_fraction = 0``):
    its trials differ only in it and train alike.  ``configs``: the trials' configs."""
    axes = [a for a in plan.study.axes if not a.joint and len(set(map(str, a.values))) > 1]
    if not axes:
        return []
    if configs is None:
        configs = [t.run_config for t in plan.trials()]
    lines = []
    for axis in axes:
        notes = [inert_settings(c, [axis.name]) for c in configs]
        if configs and all(notes):
            why = notes[0][0].split(" has no effect: ", 1)[-1]
            values = ", ".join(str(v) for v in axis.values)
            lines.append(
                f"warning: axis {axis.name} ({values}) has no effect: {why}; the trials that "
                "differ only in it train alike"
            )
    return lines


def override_warnings(plan: SweepPlan, configs: list[RunConfig] | None = None) -> list[str]:
    """``warning:`` lines for ``--set`` fields that have no effect in any of the trials."""
    return _inert_in_every_trial(plan, list(plan.overrides), configs)


def _inert_in_every_trial(
    plan: SweepPlan, given: list[str], configs: list[RunConfig] | None
) -> list[str]:
    """The inert-setting lines of fields ``given`` that hold in every trial, sorted
    (``threads`` is the machine's business, never warned about here)."""
    given = [k for k in given if k != "threads"]
    if not given:
        return []
    if configs is None:
        configs = [t.run_config for t in plan.trials()]
    per_trial = [set(inert_settings(c, given)) for c in configs]
    return sorted(set.intersection(*per_trial)) if per_trial else []
