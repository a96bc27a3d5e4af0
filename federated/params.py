"""Typed parameters: the error every bad value raises, value coercion and checks, and
:class:`MethodParams`, the base of each method's own frozen parameter dataclass.

This module imports nothing of fedsweep's, so the config (:mod:`federated.config.run_config`), the
methods (:mod:`federated.algorithms`, :mod:`federated.server`) and plug-ins all build on
it without importing one another.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, get_type_hints


@functools.cache
def type_hints(cls: type) -> Mapping[str, Any]:
    """``typing.get_type_hints(cls)``, evaluated once per class: a dataclass's annotations
    do not change after its definition, and evaluating them is most of the time a config
    takes to build and check (read-only: the cache is shared)."""
    return MappingProxyType(get_type_hints(cls))


class ConfigError(ValueError):
    """A configuration value is not allowed; the message is one line naming the field."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.field = name
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid config: {name}={value!r} (allowed: {allowed})")


def describe(text: str, execution_only: bool = False) -> dict[str, Any]:
    """Field metadata: ``help`` (shown by ``--help``) and ``execution_only`` (the field
    never changes a run's results on a given device, so a checkpoint may be restored
    under another value of it)."""
    return {"help": text, "execution_only": execution_only}


# ---------------------------------------------------------------------- coercion
_NONE_WORDS = {"none", "null"}
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off"}


def base_type(hint: Any) -> type:
    """bool, int, float or str: the scalar type behind an annotation such as ``float | None``."""
    for candidate in (bool, int, float, str):
        if hint is candidate or candidate in getattr(hint, "__args__", ()):
            return candidate
    return str


def coerce_value(name: str, hint: Any, value: Any) -> Any:
    """Convert ``value`` (often a string from a command line) to the type ``hint``."""
    optional = "None" in str(hint)
    base = base_type(hint)
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if optional and text.lower() in _NONE_WORDS:
            return None
        if optional and not text:
            # an empty value is a slip (an unset shell variable, a stray comma), not "unset"
            raise ConfigError(name, value, "a value; none (or leaving it out) unsets it")
        if base is bool:
            if text.lower() in _TRUE_WORDS:
                return True
            if text.lower() in _FALSE_WORDS:
                return False
            raise ConfigError(name, value, "true or false")
        if base is int:
            try:
                return int(text)
            except ValueError:
                raise ConfigError(name, value, "an integer") from None
        if base is float:
            try:
                return float(text)
            except ValueError:
                raise ConfigError(name, value, "a number") from None
        return text
    # numpy scalars from Tune/Optuna search spaces
    if hasattr(value, "item") and not isinstance(value, (list, tuple, dict)):
        value = value.item()
    if base is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if base is int and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def check_type(name: str, hint: Any, value: Any) -> None:
    """Raise :class:`ConfigError` unless ``value`` has the annotated type (finite floats)."""
    if value is None:
        if "None" not in str(hint):
            raise ConfigError(name, value, f"a value of type {base_type(hint).__name__}")
        return
    base = base_type(hint)
    ok = {
        bool: isinstance(value, bool),
        int: isinstance(value, int) and not isinstance(value, bool),
        float: isinstance(value, (int, float)) and not isinstance(value, bool),
        str: isinstance(value, str),
    }[base]
    if not ok:
        raise ConfigError(name, value, f"a value of type {base.__name__}")
    if base is float and not math.isfinite(value):
        raise ConfigError(name, value, "a finite number")


# ------------------------------------------------------------------------ checks
def one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, "one of " + ", ".join(allowed))


def at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ConfigError(name, value, f"an integer >= {low}")


def at_most(name: str, value: int, high: int) -> None:
    """An upper size limit: the message names the limit (it is fedsweep's, not the value's
    type's, so the user knows what to change)."""
    if value > high:
        raise ConfigError(name, value, f"an integer <= {high:,} (fedsweep's limit for {name})")


def positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(name, value, "a number > 0")


def non_negative(name: str, value: float) -> None:
    if not value >= 0:
        raise ConfigError(name, value, "a number >= 0")


def fraction(name: str, value: float) -> None:
    if not 0 < value <= 1:
        raise ConfigError(name, value, "a number in (0, 1]")


def unit_interval(name: str, value: float) -> None:
    if not 0 <= value < 1:
        raise ConfigError(name, value, "a number in [0, 1)")


# ------------------------------------------------------------------ method params
@dataclasses.dataclass(frozen=True)
class ModelNames:
    """What a run's model is made of, for the parameters checked against it: the model's
    name (as the run's ``model`` field holds it), its ``state_dict`` names and, among them,
    its parameters' names (buffers such as BatchNorm's running statistics are the rest)."""

    model: str
    state: tuple[str, ...]
    parameters: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class MethodParams:
    """Base of a method's parameters: a frozen dataclass whose fields have defaults and
    ``describe(...)`` metadata — the one declaration of each parameter (its default, its
    allowed range in :meth:`check`, its help text).  Users set a parameter by its flat
    name (``--mu 1``, ``mu = 1`` in a study file, the ``mu`` column of results), which
    :func:`federated.config.run_config.flat_names` maps to the chosen methods that declare it."""

    def check(self) -> None:
        """Raise :class:`ConfigError` naming the field of the first bad value."""
        return None

    def check_model(self, names: ModelNames) -> None:
        """Raise :class:`ConfigError` where these values do not fit the run's model
        (``names``: the model built on torch's ``meta`` device once the data are loaded,
        :mod:`federated.config.data_checks`): a layer rule naming no layer, FedBN without
        BatchNorm.  Most parameters fit every model."""
        return None

    def inert(self) -> dict[str, str]:
        """Parameters that these values make inert -> why (one clause), for the
        inert-setting warnings; e.g. MOON's annealing rates under a fixed temperature."""
        return {}

    @classmethod
    def field_types(cls) -> dict[str, Any]:
        hints = type_hints(cls)
        return {f.name: hints[f.name] for f in dataclasses.fields(cls)}

    @classmethod
    def field_help(cls) -> dict[str, str]:
        return {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls)}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        return {
            f.name: f.default
            for f in dataclasses.fields(cls)
            if f.default is not dataclasses.MISSING
        }

    @classmethod
    def resolved_default(cls, name: str, values: Mapping[str, Any]) -> Any:
        """The value a run takes for parameter ``name`` when nobody set it, given the
        run's other settings ``values`` (flat: ``dataset``, ``tau_schedule`` ...).  The
        field's default here; a method whose paper default depends on the setting (MOON's
        and FedProx's mu per dataset, MOON's tau per schedule) overrides it."""
        return cls.defaults()[name]

    @classmethod
    def build(
        cls, values: Mapping[str, Any], context: Mapping[str, Any] | None = None
    ) -> MethodParams:
        """The parameters from ``values`` (flat; other keys are ignored), typed and
        checked.  A field not in ``values`` takes :meth:`resolved_default` for the run's
        settings ``context`` (flat run-level fields and the given parameters: the paper
        defaults that depend on the dataset), or its plain default without a context."""
        types = cls.field_types()
        setting = {**(context or {}), **values}
        picked = {}
        for name, hint in types.items():
            if name in values:
                picked[name] = coerce_value(name, hint, values[name])
            elif context is not None:
                picked[name] = cls.resolved_default(name, setting)
            else:
                continue
            check_type(name, hint, picked[name])
        params = cls(**picked)
        params.check()
        return params

    def flat(self) -> dict[str, Any]:
        """Every parameter by its flat name (as ``RunConfig.to_dict`` writes it)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class NoParams(MethodParams):
    """A method without parameters of its own (FedAvg, SOLO, plain averaging)."""
