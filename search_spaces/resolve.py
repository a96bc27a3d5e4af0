"""From (study, grid point, budget, dataset, seed, overrides) to one validated trial config.

Precedence, lowest first: RunConfig defaults (the paper's) < the study's fixed settings
< the grid point < the budget (rounds, E, data: only what the study leaves to it, see
:func:`budget_keeps`) < ``--set`` overrides < the seed.  The result is a complete,
validated :class:`~federated.config.run_config.RunConfig` as a dict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from federated.config.run_config import ConfigError, RunConfig, coerce
from search_spaces.budgets import Budget
from search_spaces.study import Study
from search_spaces.study_file import StudyFileError


def with_axis_values(study: Study, overrides: Mapping[str, Any]) -> tuple[Study, dict[str, Any]]:
    """Apply the ``--set`` items that change a plain axis's values: ``AXIS=v1,v2``
    replaces them, ``AXIS=v`` fixes the axis to that one value, ``AXIS+=v1,v2`` adds to
    them (e.g. ``--set algorithm+=fednova,feddyn`` puts the extra methods into
    ``comparison``).  Values are typed per item, so numbers, words and booleans all
    work.  Returns the study with those axes and the remaining (field) overrides.

    A replaced axis searches exactly the values given (its Optuna range, if any, goes:
    the user chose the values).  A comma list on a field no plain axis varies, which
    the field's type cannot hold, is refused naming the axes there are."""
    plain = {a.name for a in study.axes if not a.joint}
    axes = list(study.axes)
    rest = {}
    for key, value in overrides.items():
        name, extend = (key[:-1], True) if key.endswith("+") else (key, False)
        if name not in plain:
            if extend:
                raise ConfigError(key, value, f"a plain axis of {study.name}+=VALUES")
            _check_not_a_list(study, name, value)
            rest[key] = value
            continue
        items = str(value).split(",") if isinstance(value, str) else [value]
        values = tuple(
            coerce(name, v.strip() if isinstance(v, str) else v)
            for v in items
            if not isinstance(v, str) or v.strip()
        )
        if not values:
            raise ConfigError(key, value, f"one or more values of axis {name}, comma-separated")
        i = [a.name for a in axes].index(name)
        if extend:
            axes[i] = dataclasses.replace(
                axes[i], values=tuple(dict.fromkeys((*axes[i].values, *values)))
            )
        else:
            axes[i] = dataclasses.replace(axes[i], values=tuple(dict.fromkeys(values)), optuna=None)
    return dataclasses.replace(study, axes=tuple(axes)), rest


def _check_not_a_list(study: Study, name: str, value: Any) -> None:
    """Refuse ``--set FIELD=v1,v2`` on a field the study does not vary, where the
    field's type cannot hold the comma list (a number, a boolean): there is no axis
    for the values to replace, and the field's own error (``a number``) would not say
    why.  A text field keeps its value as written (a path may hold a comma)."""
    if not isinstance(value, str) or "," not in value:
        return
    try:
        coerce(name, value)
    except ConfigError as err:
        axes = ", ".join(a.name for a in study.axes if not a.joint) or "none"
        raise ConfigError(
            name,
            value,
            f"{err.allowed}: one value, since {study.name} does not vary {name} (a comma "
            f"list replaces the values of a plain axis: {axes}; to vary {name}, use "
            "--vary or a study file)",
        ) from None


def check_overrides(study: Study, overrides: Mapping[str, Any]) -> None:
    """A field a joint axis sets cannot be overridden (the axis's labels would no longer
    say what its points run); a plain axis's items were taken by
    :func:`with_axis_values` before this check."""
    for name in overrides:
        if name == "seed":
            raise ConfigError(name, overrides[name], "not settable with --set: use --seeds")
        if name in study.varied_fields:
            axis = next(a.name for a in study.axes if name in a.fields)
            raise ConfigError(
                name,
                overrides[name],
                f"not settable with --set: {study.name} varies it (its joint axis {axis!r} "
                "sets it with each label)",
            )


def budget_keeps(study: Study) -> set[str]:
    """The fields a budget leaves as ``study`` has them.

    A built-in study's values are the paper's settings, which budgets are made to scale:
    its rounds wherever they are set (the ``parties`` study's joint axis too), E and the
    data fractions unless the study varies them (they are then what it compares).  A
    user's study (a file, ``--vary``) wrote its ``[fixed]`` values and axes itself: a
    budget never changes them."""
    if study.paper_settings:
        # a built-in study that fixes its own batch (pretraining: small parties must
        # still fill one) keeps it; the paper's 64 is what the laptop budget lowers; one
        # that fixes its data fractions (street: a camera's few images) keeps them
        kept = {"batch_size", "data_fraction", "test_fraction"}
        return (study.varied_fields - {"rounds"}) | (kept & set(study.fixed))
    return set(study.fixed) | study.varied_fields


def _check_budget_conflicts(
    study: Study, fields: Mapping[str, Any], budget: Budget, overrides: Mapping[str, Any]
) -> None:
    """Refuse a budget that would change a value a user's study file writes in [fixed]:
    the user asked for both, so the command names the conflict rather than pick one."""
    if study.paper_settings:
        return
    for name, target in budget.targets(dict(fields)).items():
        if name in study.fixed and name not in overrides and study.fixed[name] != target:
            raise StudyFileError(
                study.source or study.name,
                f"fixed.{name}",
                study.fixed[name],
                f"a value budget {budget.name} keeps (it sets {name}={target}): run the "
                f"study as written without --budget, or choose with --set {name}=VALUE",
            )


def trial_fields_and_changes(
    study: Study,
    point: Mapping[str, Any],
    *,
    budget: Budget,
    dataset: str,
    seed: int,
    overrides: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]]]:
    """The complete RunConfig (as a dict) of one trial, and what the budget changed in
    it, ``{field: (from, to)}`` (a field ``--set`` then sets is not the budget's)."""
    config, changes = trial_config_and_changes(
        study, point, budget=budget, dataset=dataset, seed=seed, overrides=overrides
    )
    return config.to_dict(), changes


def trial_config_and_changes(
    study: Study,
    point: Mapping[str, Any],
    *,
    budget: Budget,
    dataset: str,
    seed: int,
    overrides: Mapping[str, Any] | None = None,
    known_specs: dict[tuple, Any] | None = None,
) -> tuple[RunConfig, dict[str, tuple[Any, Any]]]:
    """The resolved RunConfig of one trial, checked against its data, and what the
    budget changed in it (as :func:`trial_fields_and_changes`).  ``known_specs``: the
    plan's table of the data specs it has had (:func:`federated.config.data_checks.
    with_data_checked`), so its trials on one data set load it once."""
    overrides = overrides or {}
    fields: dict[str, Any] = {"dataset": dataset, **study.fixed, **study.point_fields(point)}
    _check_budget_conflicts(study, fields, budget, overrides)
    fields, changes = budget.apply(fields, budget_keeps(study))
    fields.update(overrides)
    fields["seed"] = seed
    changes = {k: v for k, v in changes.items() if k not in overrides}
    from federated.config.data_checks import with_data_checked

    # the one resolution of this trial in the driver, checked against its data (loaded
    # where they are files) and model before Ray starts: the plan keeps it
    # (TrialSpec.run_config)
    return with_data_checked(RunConfig.from_dict(fields), known_specs), changes


def trial_fields(
    study: Study,
    point: Mapping[str, Any],
    *,
    budget: Budget,
    dataset: str,
    seed: int,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The complete RunConfig (as a dict) of one trial."""
    return trial_fields_and_changes(
        study, point, budget=budget, dataset=dataset, seed=seed, overrides=overrides
    )[0]


def seed_list(study: Study, budget: Budget, seeds: str | None) -> list[int]:
    """``--seeds``: a count (``3`` -> 0, 1, 2) or a comma list (``0,5``); by default the
    budget's count, else the study's (the paper's 3)."""
    if seeds is None:
        return list(range(budget.seeds if budget.seeds is not None else study.seeds))
    try:
        if "," in seeds:
            values = [int(s) for s in seeds.split(",") if s.strip()]
        else:
            values = list(range(int(seeds)))
    except ValueError:
        raise ConfigError("seeds", seeds, "a count such as 3 or a list such as 0,1,2") from None
    if not values or min(values) < 0 or len(set(values)) != len(values):
        raise ConfigError("seeds", seeds, "a positive count or distinct seeds >= 0")
    return values
