"""Which metric ranks a sweep's trials, the validation every selection needs, and the
fresh seeds a chosen configuration is rerun on.

Select on validation, report on test (docs/validation.md).  A sweep *selects* when it
searches (``--search optuna``), stops trials early (``--scheduler asha``) or picks a best
configuration to rerun (``--rerun-best``); each ranks trials by one metric, named here
once and used by Optuna, ASHA, the best configuration, the live view and the summary:
``val_acc`` (maximised, the default) or ``val_loss`` (minimised), the size-weighted
federated validation of federated/evaluation/validation.py.  A score task (image assessment)
ranks by the validation value of its primary metric (``val_srcc`` by default; ``val_mae``
and ``val_rmse`` minimised), or by any validation metric it records
(:func:`selection_metric`; the metrics and their directions are
:mod:`federated.contract.metrics`'s, or a plug-in task's own).  A selecting sweep whose trials hold
out no validation data is refused in one line; where the user wrote no ``val_fraction``
the sweep holds out :data:`DEFAULT_VAL_FRACTION` (FederatedScope's 0.1) and says so.  A
plain grid selects nothing and keeps the paper's protocol (no hold-out) unless asked.

The chosen configuration is rerun on seeds no searched trial used
(:func:`rerun_seeds`), so its test accuracy is measured on runs that did not choose it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from federated.cli.input_checks import InputError
from federated.contract.columns import TEST_VALUE
from federated.contract.metrics import MetricSpec, higher_is_better, metric_stems
from federated.contract.task_spec import TaskSpec
from federated.registry import load_method
from federated.tasks.written_before import UNTASKED_ROWS

#: ``--metric``'s form before the trials' task is known (a validation column), checked
#: against the task's own metrics once the configs are resolved (:func:`selection_metric`)
VALIDATION_PREFIX = "val_"
DEFAULT_METRIC = "val_acc"
#: what sweeps from before the validation protocol ranked by (their manifests name none)
LEGACY_METRIC = "test_acc"
DEFAULT_VAL_FRACTION = 0.1
#: reruns use seeds from here on (or past the largest searched seed): never a search's
RERUN_SEED_BASE = 10_000


class SelectionError(InputError):
    """A selecting sweep without validation data (one line, before any work)."""


def task_declaration(task: str) -> TaskSpec:
    """The declaration of the task ``task`` (registered or ``package.module:Class``)
    under that name: asked of the task, whose code a sweep runs anyway."""
    return load_method("task", task).task_spec(task)


def primary_stem(config: Mapping[str, Any]) -> str:
    """A trial's primary metric (its stem: ``acc``, ``map50``, ``srcc`` ...): its config's
    ``primary_metric``, else the first metric its task declares (a config recorded
    before tasks existed: the untasked rows' task)."""
    chosen = config.get("primary_metric")
    if chosen:
        return str(chosen)
    return task_declaration(str(config.get("task") or UNTASKED_ROWS.name)).metrics[0].stem


def task_metric_specs(task: str) -> tuple[MetricSpec, ...]:
    """The metrics the task ``task`` declares, the primary first."""
    return task_declaration(task).metrics


def mode_of(metric: str, task: str | None = None) -> str:
    """``"max"`` or ``"min"``: how ``metric`` ranks (test accuracy, of old sweeps: max; a
    test column, the live view's: its direction); ``task``: the trials' task, whose
    metric specs decide (a loss is minimised, an unknown column maximised)."""
    specs = task_metric_specs(task) if task else ()
    return "max" if higher_is_better(metric, specs) else "min"


def task_metrics(task: str) -> list[str]:
    """The validation metrics a ``task``'s trials record and may be ranked by."""
    return [f"val_{stem}" for stem in metric_stems(task_metric_specs(task))] + ["val_loss"]


def selection_metric(chosen: str | None, task: str, primary: str) -> str:
    """The metric a sweep whose trials are a ``task`` with ``primary`` metric ranks by:
    ``chosen`` (``--metric``) when given, else ``val_<primary>`` (``val_acc`` for
    classification, ``val_srcc`` by default for a score task).  Checked against the
    task once its trials' configs are resolved (the data set the task: a command line
    cannot know it).  Raises :class:`SelectionError` (one line) for a metric the
    task's trials do not record (``val_srcc`` on a classification sweep)."""
    if chosen is None:
        return f"val_{primary}"
    allowed = task_metrics(task)
    if chosen != LEGACY_METRIC and chosen not in allowed:
        raise SelectionError(
            f"--metric={chosen!r}: a {task} sweep's trials record no {chosen} "
            f"(allowed: {', '.join(allowed)})"
        )
    return chosen


def selector(search: str, scheduler: str, rerun_best: int) -> str | None:
    """The flag that makes a sweep select (None: it selects nothing)."""
    if search == "optuna":
        return "--search optuna"
    if scheduler == "asha":
        return "--scheduler asha"
    if rerun_best:
        return "--rerun-best"
    return None


def writes_val_fraction(study: Any, overrides: Mapping[str, Any]) -> bool:
    """Whether the user wrote ``val_fraction`` (``--set``, the study's fixed settings or
    one of its axes)."""
    if "val_fraction" in overrides or "val_fraction" in study.fixed:
        return True
    for axis in study.axes:
        if axis.name == "val_fraction":
            return True
        if any("val_fraction" in dict(s) for s in (axis.settings or {}).values()):
            return True
    return False


def with_validation(
    study: Any, overrides: Mapping[str, Any], by: str | None
) -> tuple[dict[str, Any], str | None]:
    """``overrides`` with :data:`DEFAULT_VAL_FRACTION` added when the sweep selects
    (``by``) and the user wrote no ``val_fraction``; and the line that says so (None
    when nothing was added)."""
    out = dict(overrides)
    if by is None or writes_val_fraction(study, overrides):
        return out, None
    out["val_fraction"] = DEFAULT_VAL_FRACTION
    return out, (
        f"note: {by} selects on validation: each party holds out "
        f"val_fraction={DEFAULT_VAL_FRACTION:g} of its samples (docs/validation.md; "
        "--set val_fraction=... to choose)"
    )


def personal_validation_note(
    configs: Iterable[Mapping[str, Any]], metric: str | None
) -> str | None:
    """The ``note:`` line for a sweep ranked on validation (``metric``) whose trials
    evaluate parties with models of their own — a personalised method (its
    ``own_state``), local fine-tuning (``finetune_epochs``) or local BatchNorm
    statistics (``batchnorm=local``) — saying what ranks them; None where none does.

    Every trial's ``val_<metric>`` is the size-weighted value, over the evaluating
    parties, of the model each party is evaluated with on its own validation split
    (federated/evaluation/round_evaluation.py): for these trials that is the parties'
    personal validation (the row's ``party_val_<metric>``), so searches select on it by
    default with no setting of their own."""
    if metric is None or not metric.startswith("val_"):
        return None
    from federated.registry import load_method

    personal: dict[str, None] = {}
    for config in configs:
        algorithm = str(config.get("algorithm", "fedavg"))
        own_models = load_method("algorithm", algorithm).evaluates_own_models()
        if own_models:
            personal[algorithm] = None
        if config.get("finetune_epochs"):
            personal[f"{algorithm} with finetune_epochs"] = None
        if config.get("batchnorm") == "local" and not own_models:
            personal[f"{algorithm} with batchnorm=local"] = None
    if not personal:
        return None
    return (
        f"note: trials of {', '.join(personal)} rank by {metric} on each party's own model "
        f"and own validation split (personal validation, size-weighted: party_{metric}; "
        "docs/validation.md)"
    )


def check_validated(configs: Iterable[Mapping[str, Any]], by: str | None) -> None:
    """Refuse a selecting sweep (``by``) whose trials hold out no validation data."""
    if by is None:
        return
    for config in configs:
        if not config.get("val_fraction"):
            raise SelectionError(
                f"{by} selects on validation, and val_fraction=0 holds none out (allowed: "
                "val_fraction in (0, 1), e.g. --set val_fraction=0.1; a plain grid without "
                "--rerun-best keeps the paper's protocol)"
            )


def rerun_seeds(searched: Sequence[int], k: int) -> list[int]:
    """``k`` seeds no searched trial used: from :data:`RERUN_SEED_BASE`, or past the
    largest searched seed when a search used seeds that high."""
    start = max(RERUN_SEED_BASE, max(searched, default=-1) + 1)
    return list(range(start, start + k))


def ran_all_rounds(config: Mapping[str, Any], metrics: Mapping[str, Any]) -> bool:
    """Whether a trial's last row is its config's last round (a scheduler such as ASHA
    stops trials earlier; a trial that records neither counts as complete)."""
    planned, last = config.get("rounds"), metrics.get("round")
    return not planned or last is None or int(last) >= int(planned)


def best_point(
    trials: Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any]]],
    metric: str,
    task: str | None = None,
) -> tuple[str, float, list[Mapping[str, Any]]]:
    """The point whose trials' final ``metric`` is best on average, from ``(point
    label, config, final metrics)`` per trial.  Only trials that ran all their rounds
    are compared: an early-stopped trial's value is from an earlier round than the
    others' and would rank it unfairly (high or low); NaN, missing and diverged values
    are left out too.  Returns (the point, its mean metric, its trials' metrics); raises
    :class:`SelectionError` when no complete trial has a finite value."""
    by_point: dict[str, list[Mapping[str, Any]]] = {}
    for point, config, metrics in trials:
        value = metrics.get(metric)
        finite = isinstance(value, (int, float)) and math.isfinite(value)
        if finite and ran_all_rounds(config, metrics):
            by_point.setdefault(point, []).append(metrics)
    if not by_point:
        raise SelectionError(
            f"no trial ran all its rounds with a finite {metric}: nothing to select (did "
            "every trial fail, diverge or get stopped early?)"
        )
    sign = 1.0 if mode_of(metric, task) == "max" else -1.0

    def mean(point: str) -> float:
        values = [m[metric] for m in by_point[point]]
        return sum(values) / len(values)

    chosen = max(sorted(by_point), key=lambda p: sign * mean(p))
    return chosen, mean(chosen), by_point[chosen]


def best_config(results: Iterable[Any], metric: str) -> dict[str, Any]:
    """The best point's config (seed removed) of ``results`` (Tune's ResultGrid) by its
    trials' mean final ``metric`` (a grid's seeds averaged, an Optuna trial alone; NaN
    and diverged left out), with
    ``selection``: the metric, its value and the chosen trials' search-time test
    accuracies and seeds (the report's optimism)."""
    trials = [
        (str((r.config or {}).get("point", "")), r.config or {}, r.metrics or {})
        for r in results
        if r.metrics and not r.metrics.get("diverged")
    ]
    task = next((c.get("task") for _, c, _ in trials if c.get("task")), None)
    point, value, chosen = best_point(trials, metric, task)
    compared = [t for t in trials if ran_all_rounds(t[1], t[2])]
    config = next(dict(c) for p, c, _ in trials if p == point)
    config.pop("seed", None)
    reported = TEST_VALUE.column(primary_stem(config))
    selection = {
        "metric": metric,
        "mode": mode_of(metric, task),
        "value": value,
        "point": point,
        # the chosen trials' test values of their primary metric (the report's optimism
        # reads search_test_<metric>: search_test_acc for classification)
        f"search_{reported}": [m.get(reported) for m in chosen],
        "search_seeds": [c.get("seed") for p, c, m in trials if p == point and m in chosen],
        # what the ranking compared: trials that ran all their rounds (early-stopped
        # and diverged ones left out)
        "compared_trials": len(compared),
        "stopped_early": len(trials) - len(compared),
    }
    return {"config": config, "selection": selection}
