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
checked when the config resolves (on the model built on torch's ``meta`` device, no
memory) and again on the run's real model (a user's model factory that cannot build on
``meta``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from federated.params import ConfigError, MethodParams, describe

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


# the run-level fields that decide a model's state names
_MODEL_FIELDS = (
    "model",
    "dataset",
    "out_dim",
    "projection_head",
    "image_size",
    "holdout_fraction",
    "data_root",
    "image_column",
    "label_column",
    "partition_by",
)


@functools.cache
def _names_on_meta(fields: tuple[tuple[str, Any], ...]) -> tuple[list[str], list[str]] | None:
    """(state names, parameter names) of the run's model built on the ``meta`` device,
    or None when it cannot be built there."""
    from federated.config.data_fields import run_spec
    from federated.models import build_model

    values = dict(fields)
    try:
        spec = run_spec(SimpleNamespace(**values))
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            model = build_model(values["model"], spec, values["out_dim"], values["projection_head"])
    # a user's factory may compute on real tensors (or need its data): the run checks
    # the rule on its real model instead (PartlyPersonal.local_names)
    except Exception:
        return None
    return list(model.state_dict()), [n for n, _ in model.named_parameters()]


def run_model_names(context: Mapping[str, Any]) -> tuple[list[str], list[str]] | None:
    """(state names, parameter names) of the model of the run whose run-level fields are
    ``context``, built on ``meta``; None when it has no model yet or cannot be built
    there (its rule is then checked on the run's real model)."""
    if context.get("model") is None:
        return None
    return _names_on_meta(tuple((k, context.get(k)) for k in _MODEL_FIELDS))


def check_rule_for_run(rule: str, context: Mapping[str, Any]) -> None:
    """Refuse ``rule`` for the run whose run-level fields are ``context`` (when its
    model builds on ``meta``)."""
    names = run_model_names(context)
    if names is not None:
        local_names(*names, rule)


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

    @classmethod
    def build(
        cls, values: Mapping[str, Any], context: Mapping[str, Any] | None = None
    ) -> MethodParams:
        params = super().build(values, context)
        if context is not None:
            check_rule_for_run(params.personal_layers, {**context, **values})
        return params

    def check(self) -> None:
        if not prefixes(self.personal_layers):
            raise ConfigError(FIELD, self.personal_layers, "comma-separated layer-name prefixes")
