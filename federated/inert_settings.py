"""Settings that a run accepts but that have no effect on it (warned about, once).

``--mu`` with FedAvg, server momentum with plain averaging, ``--tau`` with FedProx...
are valid values that change nothing; :func:`inert_settings` names each such field that
was given a value other than its default, and says why it is inert.  The command lines
print these as ``warning:`` lines before the run starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from federated.config import RunConfig, paper_mu

# Algorithms whose party loss has a second term weighted by mu.
MU_ALGORITHMS = ("fedprox", "moon", "l2rep")
CONTRASTIVE = ("moon",)


@dataclass(frozen=True)
class InertRule:
    """``fields`` have no effect when ``applies(config)``; ``why`` says so."""

    fields: tuple[str, ...]
    applies: Callable[[RunConfig], bool]
    why: Callable[[RunConfig], str]


RULES = (
    InertRule(
        ("mu",),
        lambda c: c.algorithm not in MU_ALGORITHMS,
        lambda c: f"algorithm={c.algorithm} has no second loss term "
        f"(mu is used by {', '.join(MU_ALGORITHMS)})",
    ),
    InertRule(
        ("tau", "tau_schedule", "prev_models"),
        lambda c: c.algorithm not in CONTRASTIVE,
        lambda c: f"algorithm={c.algorithm} has no contrastive loss (only moon uses it)",
    ),
    InertRule(
        ("tau_min", "tau_sigma", "tau_scope"),
        lambda c: c.algorithm not in CONTRASTIVE or c.tau_schedule != "annealed",
        lambda c: "only moon with tau_schedule=annealed anneals the temperature",
    ),
    InertRule(
        ("server_momentum", "server_lr"),
        lambda c: c.server_optimizer != "fedavgm",
        lambda c: f"server_optimizer={c.server_optimizer} (only fedavgm uses it)",
    ),
    InertRule(
        ("server_optimizer", "server_momentum", "server_lr", "sample_fraction"),
        lambda c: c.algorithm == "solo",
        lambda c: "algorithm=solo trains every party alone: there is no server update",
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
        ("out_dim",),
        lambda c: not c.projection_head,
        lambda c: "projection_head=false: there is no projection head to size",
    ),
)


def changed_fields(config: RunConfig) -> set[str]:
    """Fields whose value differs from what an unset field resolves to."""
    resolved_default = {
        "mu": paper_mu(config.algorithm, config.dataset),
        "tau": 1.0 if config.tau_schedule == "annealed" else 0.5,
    }
    changed = set()
    for name, spec in RunConfig.__dataclass_fields__.items():
        default = resolved_default.get(name, spec.default)
        if getattr(config, name) != default:
            changed.add(name)
    return changed


def inert_settings(config: RunConfig, given: Iterable[str] | None = None) -> list[str]:
    """One ``warning: ...`` line per field of ``config`` that has no effect on the run.

    ``given`` limits the check to fields the user set (a command line's flags); by
    default every field whose value differs from RunConfig's default is checked.
    """
    names = set(given) if given is not None else changed_fields(config)
    lines: list[str] = []
    warned: set[str] = set()
    for rule in RULES:
        if not rule.applies(config):
            continue
        for name in rule.fields:
            if name in names and name not in warned:
                warned.add(name)
                value = getattr(config, name)
                lines.append(f"warning: {name}={value!r} has no effect: {rule.why(config)}")
    return lines
