"""Which of a model's entries stay with a party: a rule over state names.

Partly personal methods (FedPer, FedRep, LG-FedAvg) keep some layers at each party and
share the rest.  The rule is ``personal_layers``: comma-separated prefixes of the
model's ``state_dict`` names, matched at a dot (``classifier`` matches
``classifier.weight`` and ``classifier.bias``, not ``classifier2.weight``).  An entry —
a parameter or a buffer, such as BatchNorm's running statistics — is local when some
prefix matches it, shared otherwise.  Every fedsweep model is
``encoder.*`` (the body), ``head.*`` (the projection head, absent without one) and
``classifier.*`` (the output layer), so the methods' defaults are written in those names.

Refused in one line naming ``personal_layers``: an empty rule, a prefix that matches no
entry of the model (a typo would otherwise silently share everything), and a rule that
keeps every parameter local (nothing would be federated: that is SOLO).  The rule is
checked once the run's data are loaded, before any training
(:meth:`LayerRuleParams.check_model`, on the model built on torch's ``meta`` device by
:mod:`federated.config.data_checks`, no memory), and again on the run's real model (a
user's model factory that cannot build on ``meta``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from federated.params import ConfigError, MethodParams, ModelNames, describe

FIELD = "personal_layers"


def prefixes(rule: str) -> tuple[str, ...]:
    """The rule's prefixes, stripped, empty ones dropped."""
    return tuple(p.strip() for p in rule.split(",") if p.strip())


def matches(name: str, prefix: str) -> bool:
    """Whether ``prefix`` names entry ``name`` or a module above it."""
    return name == prefix or name.startswith(prefix + ".")


def layer_names(names: Sequence[str]) -> list[str]:
    """The modules holding ``names`` (the entry names without their last part), in order:
    what a refusal lists as the names a rule may use."""
    seen: dict[str, None] = {}
    for name in names:
        seen[name.rpartition(".")[0] or name] = None
    return list(seen)


def local_names(names: Sequence[str], parameter_names: Sequence[str], rule: str) -> frozenset[str]:
    """The entries of a model with state names ``names`` (parameters ``parameter_names``
    among them) that ``rule`` keeps local; :class:`ConfigError` for a bad rule."""
    wanted = prefixes(rule)
    known = ", ".join(layer_names(names))
    if not wanted:
        raise ConfigError(FIELD, rule, f"comma-separated prefixes of the model's layers ({known})")
    for prefix in wanted:
        if not any(matches(name, prefix) for name in names):
            raise ConfigError(
                FIELD, rule, f"prefixes of the model's layers ({known}); {prefix!r} names none"
            )
    local = frozenset(n for n in names if any(matches(n, p) for p in wanted))
    if all(name in local for name in parameter_names):
        raise ConfigError(
            FIELD, rule, "a rule that leaves some parameter shared (this one keeps all local)"
        )
    return local


def model_local_names(model: torch.nn.Module, rule: str) -> frozenset[str]:
    """:func:`local_names` for a built model."""
    names = list(model.state_dict())
    return local_names(names, [n for n, _ in model.named_parameters()], rule)


@dataclass(frozen=True)
class LayerRuleParams(MethodParams):
    """A partly personal method's rule (module docstring); the default is the method's
    (:meth:`resolved_default`)."""

    personal_layers: str = field(
        default="head,classifier",
        metadata=describe(
            "comma-separated prefixes of the model's state names kept at each party "
            "(encoder, head, classifier, or deeper: encoder.fc2); the head by default "
            "(classifier alone without a projection head)"
        ),
    )

    def check_model(self, names: ModelNames) -> None:
        local_names(names.state, names.parameters, self.personal_layers)

    def check(self) -> None:
        if not prefixes(self.personal_layers):
            raise ConfigError(FIELD, self.personal_layers, "comma-separated layer-name prefixes")
