"""Settings that a run accepts but that have no effect on it (warned about, once).

``--mu`` with FedAvg, server momentum with plain averaging, ``--tau`` with FedProx...
are valid values that change nothing; :func:`inert_settings` names each such field that
was given a value other than its default, and says why it is inert.  The command lines
print these as ``warning:`` lines before the run starts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from federated.config.run_config import (
    METHOD_DEFAULTS,
    RunConfig,
    field_types,
    flat_names,
    method_defaults,
)
from federated.registry import load_method


@dataclass(frozen=True)
class InertRule:
    """``fields`` have no effect when ``applies(config)``; ``why`` says so."""

    fields: tuple[str, ...]
    applies: Callable[[RunConfig], bool]
    why: Callable[[RunConfig], str]


def _declaration_notes(c: RunConfig) -> dict[str, str]:
    """Method and task parameters of ``c`` (resolved) that have no effect -> why, from
    the chosen methods' and task's declarations: given but declared by none
    (``c.method_options`` keeps those), or made inert by the declarer's own values."""
    chosen = (c.algorithm_params, c.server_params, c.task_params)
    declared = {name for params in chosen for name in params.flat()}
    owners_of = flat_names()
    notes = {
        name: _undeclared(c, name, owners_of.get(name, ()))
        for name in [*owners_of, *c.method_options]
        if owners_of.get(name) != ("run",) and name not in declared
    }
    for params in chosen:
        notes.update(params.inert())
    return notes


def _undeclared(c: RunConfig, name: str, owners: tuple[str, ...]) -> str:
    """Why parameter ``name``, declared by ``owners`` only, does nothing in run ``c``."""
    tasks = [owner.removeprefix("task ") for owner in owners if owner.startswith("task ")]
    if owners and len(tasks) == len(owners):
        return f"task={c.task}: only a {' or '.join(tasks)} task has {name}"
    return (
        f"algorithm={c.algorithm} and server_optimizer={c.server_optimizer} declare "
        f"no parameter {name}"
    )


# every registered server optimizer's parameters: inert where there is no server update
SERVER_PARAMETERS = tuple(
    name
    for name, owners in flat_names().items()
    if any(owner.startswith("server_optimizer ") for owner in owners)
)


def _without_batchnorm(c: RunConfig) -> bool:
    """Whether ``c``'s model holds no BatchNorm statistics: no ``running_mean`` buffer
    among its state names, the rule's own test of a BatchNorm layer
    (federated/algorithms/batchnorm_rule.py, which the config layer does not import);
    False where the model cannot be built on ``meta``."""
    from federated.config.data_checks import model_names

    names = model_names(str(c.model), c.spec, c.out_dim, c.projection_head)
    return names is not None and not any(n.endswith(".running_mean") for n in names.state)


def _privacy_on(c: RunConfig) -> bool:
    from federated.config.privacy_fields import privacy_on

    return privacy_on(c)


def _noise_on(c: RunConfig) -> bool:
    from federated.config.privacy_fields import noise_on

    return noise_on(c)


def _stragglers_per_round(c: RunConfig) -> int:
    """Stragglers among a round's drawn parties (federated/heterogeneity/system.py)."""
    return round(c.parties_per_round * c.straggler_fraction)


RULES = (
    InertRule(
        ("server_optimizer", *SERVER_PARAMETERS, "sample_fraction", "party_sampling"),
        lambda c: load_method("algorithm", c.algorithm).own_state.trains_alone,
        lambda c: f"algorithm={c.algorithm} trains every party alone: there is no server update",
    ),
    InertRule(
        ("pack_width",),
        lambda c: c.execution != "packed",
        lambda c: f"execution={c.execution} trains parties one by one",
    ),
    InertRule(
        ("beta",),
        lambda c: c.partition not in ("dirichlet", "quantity"),
        lambda c: f"partition={c.partition} draws no Dirichlet proportions",
    ),
    InertRule(
        ("labels_per_party",),
        lambda c: c.partition != "labels",
        lambda c: f"partition={c.partition} (only partition=labels uses it)",
    ),
    InertRule(
        ("feature_skew_level",),
        lambda c: c.feature_skew == "none",
        lambda c: "feature_skew=none: there is no feature skew to scale",
    ),
    InertRule(
        ("feature_skew",),
        lambda c: c.feature_skew_level == 0,
        lambda c: f"feature_skew_level=0: {c.feature_skew} skew at level 0 changes no image",
    ),
    InertRule(
        ("straggler_policy",),
        lambda c: c.straggler_fraction == 0,
        lambda c: "straggler_fraction=0: there are no stragglers to keep or drop",
    ),
    InertRule(
        ("straggler_fraction", "straggler_policy"),
        lambda c: c.straggler_fraction > 0 and _stragglers_per_round(c) == 0,
        lambda c: (
            f"round({c.parties_per_round} parties drawn per round x "
            f"straggler_fraction={c.straggler_fraction:g}) = 0: no party is ever a straggler"
        ),
    ),
    InertRule(
        ("local_epochs_min",),
        lambda c: c.local_epochs_min is not None and c.local_epochs_min == c.local_epochs,
        lambda c: f"local_epochs_min = local_epochs={c.local_epochs}: every party runs every epoch",
    ),
    InertRule(
        ("finetune_epochs",),
        lambda c: c.val_fraction == 0 and c.party_test_fraction == 0,
        lambda c: (
            "val_fraction=0 and party_test_fraction=0: no party is scored on its own data "
            "(fine-tuning never changes test_acc)"
        ),
    ),
    InertRule(
        ("finetune_epochs",),
        lambda c: c.party_scores_every == 0,
        lambda c: (
            "party_scores_every=0: no party is scored on its own data, so nothing is fine-tuned"
        ),
    ),
    InertRule(
        ("personal_test_every",),
        lambda c: not load_method("algorithm", c.algorithm).evaluates_own_models(),
        lambda c: (
            f"algorithm={c.algorithm} scores the global model on the test set, once a round "
            "(no party has a model of its own)"
        ),
    ),
    InertRule(
        ("batchnorm",),
        lambda c: c.batchnorm == "local" and _without_batchnorm(c),
        lambda c: f"model={c.model} has no BatchNorm statistics for parties to keep",
    ),
    InertRule(
        ("party_sampling",),
        lambda c: c.parties_per_round >= c.n_parties,
        lambda c: (
            f"all {c.n_parties} parties are drawn every round (sample_fraction="
            f"{c.sample_fraction:g}): there is no draw to make"
        ),
    ),
    InertRule(
        ("dp_delta",),
        lambda c: not _noise_on(c),
        lambda c: (
            "no noise (dp_noise_multiplier=0, no dp_target_epsilon): there is no "
            "(epsilon, delta) guarantee for delta to state"
        ),
    ),
    InertRule(
        ("dp_clip_quantile",),
        lambda c: c.dp_clipping != "adaptive",
        lambda c: f"dp_clipping={c.dp_clipping}: only adaptive clipping follows a quantile",
    ),
    InertRule(
        ("dp_accountant",),
        lambda c: not _privacy_on(c) and c.dp_level != "record",
        lambda c: "DP-FedAvg is off (no dp_clip_norm, noise or target epsilon): nothing to account",
    ),
    InertRule(
        ("out_dim",),
        lambda c: not c.projection_head,
        lambda c: "projection_head=false: there is no projection head to size",
    ),
)


def changed_fields(config: RunConfig) -> set[str]:
    """Flat names whose value differs from what it resolves to when unset: run-level
    fields against their defaults, method parameters against their declarations'
    defaults for the run (the paper's), and every given parameter no chosen method
    declares."""
    values = config.to_dict()
    # a field whose default is the method's counts as changed only where it differs
    # from that method's default (FedBN's batchnorm=local is nobody's choice)
    unset = method_defaults(dataclasses.replace(config, **dict.fromkeys(METHOD_DEFAULTS)))
    changed = {
        name
        for name in field_types()
        if getattr(config, name) != RunConfig.__dataclass_fields__[name].default
        and getattr(config, name) != unset.get(name)
    }
    for params in (config.algorithm_params, config.server_params, config.task_params):
        for name, value in params.flat().items():
            if value != type(params).resolved_default(name, values):
                changed.add(name)
    return changed | set(config.method_options)


def inert_settings(config: RunConfig, given: Iterable[str] | None = None) -> list[str]:
    """One ``warning: ...`` line per field of ``config`` that has no effect on the run.

    ``given`` limits the check to fields the user set (a command line's flags); by
    default every field whose value differs from RunConfig's default is checked.
    ``config`` is resolved first (a complete one is taken as it is); on a folder or an
    ``hf:`` data set it must be complete already (checked against its data:
    ``FederatedRun.config``, a plan's trial), since what is inert may depend on them.
    """
    config = config.resolved()
    if not config.is_resolved:
        raise ValueError(
            f"inert_settings needs a config checked against its data ({config.dataset}): "
            "federated.config.data_checks.with_data_checked"
        )
    names = set(given) if given is not None else changed_fields(config)
    flat = config.to_dict()
    lines: list[str] = []
    warned: set[str] = set()
    for name, why in _declaration_notes(config).items():
        if name in names:
            warned.add(name)
            lines.append(f"warning: {name}={flat.get(name)!r} has no effect: {why}")
    for rule in RULES:
        if not rule.applies(config):
            continue
        for name in rule.fields:
            if name in names and name not in warned:
                warned.add(name)
                why = rule.why(config)
                lines.append(f"warning: {name}={flat.get(name)!r} has no effect: {why}")
    return lines
