"""The one configuration of a federated run: typed, validated in one place, resolved.

Every entry point (Python, ``python -m federated.run``, Tune trials, ``study.sweep``)
builds a :class:`RunConfig`.  Construction validates every field before any data is
loaded and raises :class:`ConfigError` with one line naming the field, the bad value
and what is allowed.  Fields left as ``None`` are resolved to the MOON paper's settings
(§4.1) for the chosen algorithm and dataset, so a constructed config is always complete.

Defaults are the paper's reference settings: 10 parties, Dir(0.5), 10 local epochs,
SGD lr 0.01 / momentum 0.9 / weight decay 1e-5, batch 64, out_dim 256, tau 0.5.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field, fields
from typing import Any, get_type_hints

PARTITIONS = ("dirichlet", "iid", "labels", "quantity", "natural")
TAU_SCHEDULES = ("fixed", "annealed")
TAU_SCOPES = ("round", "run")
EXECUTIONS = ("fast", "reference")

# Smallest party a Dirichlet or quantity-skew partition accepts (the reference code's
# redraw rule); validation uses it to reject impossible party counts up front.
MIN_PARTY_SAMPLES = 10

# Best mu per (algorithm, dataset) from the MOON paper §4.2; other datasets get the
# paper's "reasonable choice without tuning" (MOON mu = 1) or the FedProx grid's middle.
_PAPER_MU: dict[str, dict[str, float]] = {
    "moon": {"cifar10": 5.0, "cifar100": 1.0, "tinyimagenet": 1.0},
    "fedprox": {"cifar10": 0.01, "cifar100": 0.001, "tinyimagenet": 0.001},
}
_DEFAULT_MU = {"moon": 1.0, "fedprox": 0.01, "l2rep": 0.1}


class ConfigError(ValueError):
    """A configuration value is not allowed; the message is one line naming the field."""

    def __init__(self, name: str, value: Any, allowed: str) -> None:
        self.field = name
        self.value = value
        self.allowed = allowed
        super().__init__(f"invalid config: {name}={value!r} (allowed: {allowed})")


def _help(text: str) -> Any:
    return {"help": text}


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines one federated run (one Tune trial).

    Units: ``lr`` per SGD step, ``rounds`` communication rounds, ``local_epochs`` passes
    over a party's data per round, fractions in (0, 1].
    """

    # --- what is studied
    algorithm: str = field(default="fedavg", metadata=_help("party-side method"))
    dataset: str = field(
        default="fmnist", metadata=_help("dataset name, or folder:PATH (an image folder)")
    )
    model: str | None = field(
        default=None,
        metadata=_help(
            "encoder: a built-in name, torchvision:NAME or package.module:factory; "
            "default: the paper's for the dataset"
        ),
    )
    rounds: int = field(default=100, metadata=_help("communication rounds"))
    n_parties: int | None = field(
        default=None,
        metadata=_help("number of parties N; default 10, or the folder's under partition=natural"),
    )
    sample_fraction: float = field(
        default=1.0, metadata=_help("fraction of parties drawn each round")
    )
    partition: str = field(default="dirichlet", metadata=_help("non-IID partition scheme"))
    beta: float = field(
        default=0.5, metadata=_help("Dirichlet concentration (dirichlet, quantity)")
    )
    labels_per_party: int = field(default=2, metadata=_help("labels per party (partition=labels)"))
    local_epochs: int = field(default=10, metadata=_help("local epochs E per round"))
    batch_size: int = field(default=64, metadata=_help("local batch size"))
    lr: float = field(default=0.01, metadata=_help("local SGD learning rate"))
    momentum: float = field(default=0.9, metadata=_help("local SGD momentum"))
    weight_decay: float = field(default=1e-5, metadata=_help("local SGD weight decay"))
    # --- method hyperparameters
    mu: float | None = field(
        default=None, metadata=_help("weight of the second loss term; default: paper's best")
    )
    tau: float | None = field(
        default=None,
        metadata=_help("MOON temperature (start value when annealed); default 0.5, annealed 1.0"),
    )
    tau_schedule: str = field(default="fixed", metadata=_help("MOON temperature schedule"))
    tau_min: float = field(default=0.001, metadata=_help("annealed tau floor"))
    tau_sigma: float = field(default=0.005, metadata=_help("annealed tau rate sigma"))
    tau_scope: str = field(
        default="round",
        metadata=_help("annealed tau restarts each local training (round) or carries on (run)"),
    )
    out_dim: int = field(default=256, metadata=_help("projection head output dimension"))
    projection_head: bool = field(default=True, metadata=_help("use the projection head"))
    prev_models: int = field(
        default=1, metadata=_help("MOON: previous local models kept as negatives (k)")
    )
    server_optimizer: str = field(default="avg", metadata=_help("server update rule"))
    server_momentum: float = field(default=0.9, metadata=_help("FedAvgM momentum beta"))
    server_lr: float = field(default=1.0, metadata=_help("FedAvgM server learning rate"))
    # --- data and reproducibility
    seed: int = field(default=0, metadata=_help("seeds partition, init, sampling, batches"))
    data_fraction: float = field(
        default=1.0, metadata=_help("fraction of the training set used (budgets)")
    )
    test_fraction: float = field(
        default=1.0, metadata=_help("fraction of the test set evaluated (budgets)")
    )
    data_root: str | None = field(
        default=None, metadata=_help("dataset folder; default $FEDSWEEP_DATA or ~/.cache/fedsweep")
    )
    image_size: str | None = field(
        default=None,
        metadata=_help("folder datasets: resize to N or HxW pixels; default the most common size"),
    )
    holdout_fraction: float | None = field(
        default=None,
        metadata=_help("folder datasets without test/: fraction of each class held out to test"),
    )
    # --- execution (never changes results on a given device)
    device: str = field(default="auto", metadata=_help("auto, cpu, cuda or cuda:N"))
    threads: int | None = field(default=None, metadata=_help("torch CPU threads"))
    eval_batch_size: int = field(
        default=256, metadata=_help("batch size of evaluation (256: cache-friendly on CPU)")
    )
    execution: str = field(
        default="fast", metadata=_help("fast (batched) or reference (plain per-sample) path")
    )
    checkpoint_every: int = field(
        default=5, metadata=_help("Tune checkpoint period in rounds (0: never)")
    )
    fail_at_round: int | None = field(
        default=None,
        metadata=_help("fault injection: the trial raises once after this round"),
    )

    def __post_init__(self) -> None:
        _validate(self)
        _resolve(self)

    # ------------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (resolved values)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> RunConfig:
        """Build from a mapping; unknown keys and strings of the wrong type are errors."""
        known = field_types()
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ConfigError(unknown[0], values[unknown[0]], f"a known field: {', '.join(known)}")
        return cls(**{k: coerce(k, v) for k, v in values.items()})

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied, validated again."""
        values = self.to_dict()
        values.update(changes)
        return RunConfig.from_dict(values)

    @property
    def spec(self):
        """The dataset's :class:`~federated.data.catalog.DatasetSpec` (an image folder's
        from its cached load)."""
        from federated.config_data import run_spec

        return run_spec(self)

    @property
    def n_train(self) -> int:
        """Training samples used after ``data_fraction``."""
        return max(1, round(self.spec.train_size * self.data_fraction))

    @property
    def n_test(self) -> int:
        """Test samples evaluated after ``test_fraction``."""
        return max(1, round(self.spec.test_size * self.test_fraction))

    @property
    def parties_per_round(self) -> int:
        """Parties drawn each round: round(N * fraction), at least one."""
        return max(1, round(self.n_parties * self.sample_fraction))


# ---------------------------------------------------------------------- field helpers
def field_types() -> dict[str, Any]:
    """Field name -> annotated type (resolved), in declaration order."""
    hints = get_type_hints(RunConfig)
    return {f.name: hints[f.name] for f in fields(RunConfig)}


def field_help() -> dict[str, str]:
    return {f.name: f.metadata.get("help", "") for f in fields(RunConfig)}


_NONE_WORDS = {"none", "null", ""}
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off"}


def coerce(name: str, value: Any) -> Any:
    """Convert ``value`` (often a string from a command line) to field ``name``'s type."""
    types = field_types()
    if name not in types:
        raise ConfigError(name, value, f"a known field: {', '.join(types)}")
    hint = types[name]
    optional = "None" in str(hint)
    base = _base_type(hint)
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if optional and text.lower() in _NONE_WORDS:
            return None
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


def _base_type(hint: Any) -> type:
    for candidate in (bool, int, float, str):
        if hint is candidate or candidate in getattr(hint, "__args__", ()):
            return candidate
    return str


# ----------------------------------------------------------------------- validation
def _validate(c: RunConfig) -> None:
    # Late imports: the registries import torch-side modules that import this one.
    from federated.algorithms import ALGORITHMS
    from federated.config_data import check_dataset, check_model_field, resolve_parties
    from federated.server import SERVER_OPTIMIZERS

    _types(c)
    _one_of("algorithm", c.algorithm, tuple(ALGORITHMS))
    _one_of("partition", c.partition, PARTITIONS)
    spec = check_dataset(c)  # image folders, n_parties and models: federated/config_data.py
    resolve_parties(c, spec)
    check_model_field(c, spec)
    _one_of("tau_schedule", c.tau_schedule, TAU_SCHEDULES)
    _one_of("tau_scope", c.tau_scope, TAU_SCOPES)
    _one_of("server_optimizer", c.server_optimizer, tuple(SERVER_OPTIMIZERS))
    _one_of("execution", c.execution, EXECUTIONS)

    _at_least("rounds", c.rounds, 1)
    _at_least("n_parties", c.n_parties, 1)
    _at_least("local_epochs", c.local_epochs, 1)
    _at_least("batch_size", c.batch_size, 1)
    _at_least("out_dim", c.out_dim, 1)
    _at_least("prev_models", c.prev_models, 1)
    _at_least("seed", c.seed, 0)
    _at_least("eval_batch_size", c.eval_batch_size, 1)
    _at_least("checkpoint_every", c.checkpoint_every, 0)
    if c.threads is not None:
        _at_least("threads", c.threads, 1)
    if c.fail_at_round is not None:
        _at_least("fail_at_round", c.fail_at_round, 1)

    _fraction("sample_fraction", c.sample_fraction)
    _fraction("data_fraction", c.data_fraction)
    _fraction("test_fraction", c.test_fraction)
    _positive("beta", c.beta)
    _positive("lr", c.lr)
    _positive("server_lr", c.server_lr)
    _positive("tau_min", c.tau_min)
    _non_negative("weight_decay", c.weight_decay)
    _non_negative("tau_sigma", c.tau_sigma)
    _unit_interval("momentum", c.momentum)
    _unit_interval("server_momentum", c.server_momentum)
    if c.mu is not None:
        _non_negative("mu", c.mu)
    if c.tau is not None:
        _positive("tau", c.tau)
        if c.tau_schedule == "annealed" and c.tau < c.tau_min:
            raise ConfigError("tau", c.tau, f"a start temperature >= tau_min={c.tau_min}")

    if not 1 <= c.labels_per_party <= spec.n_classes:
        raise ConfigError(
            "labels_per_party", c.labels_per_party, f"an integer in [1, {spec.n_classes}]"
        )
    min_size = MIN_PARTY_SAMPLES if c.partition in ("dirichlet", "quantity") else 1
    most = c.n_train // min_size
    if c.partition != "natural" and c.n_parties > most:
        raise ConfigError(
            "n_parties",
            c.n_parties,
            f"at most {most} for {c.n_train} {c.dataset} training samples "
            f"(each party needs >= {min_size} under partition={c.partition})",
        )
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", c.device):
        raise ConfigError("device", c.device, "auto, cpu, cuda or cuda:N")


def _types(c: RunConfig) -> None:
    for name, hint in field_types().items():
        value = getattr(c, name)
        if value is None:
            if "None" not in str(hint):
                raise ConfigError(name, value, f"a value of type {_base_type(hint).__name__}")
            continue
        base = _base_type(hint)
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


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, value, "one of " + ", ".join(allowed))


def _at_least(name: str, value: int, low: int) -> None:
    if value < low:
        raise ConfigError(name, value, f"an integer >= {low}")


def _positive(name: str, value: float) -> None:
    if not value > 0:
        raise ConfigError(name, value, "a number > 0")


def _non_negative(name: str, value: float) -> None:
    if not value >= 0:
        raise ConfigError(name, value, "a number >= 0")


def _fraction(name: str, value: float) -> None:
    if not 0 < value <= 1:
        raise ConfigError(name, value, "a number in (0, 1]")


def _unit_interval(name: str, value: float) -> None:
    if not 0 <= value < 1:
        raise ConfigError(name, value, "a number in [0, 1)")


# ------------------------------------------------------------------------ resolution
def paper_mu(algorithm: str, dataset: str) -> float:
    """The mu the MOON paper uses for ``algorithm`` on ``dataset`` (0 where unused)."""
    table = _PAPER_MU.get(algorithm, {})
    return table.get(dataset, _DEFAULT_MU.get(algorithm, 0.0))


def _resolve(c: RunConfig) -> None:
    # frozen dataclass: resolution writes through object.__setattr__ once, at construction
    if c.model is None:
        object.__setattr__(c, "model", c.spec.default_model)
    if c.mu is None:
        object.__setattr__(c, "mu", paper_mu(c.algorithm, c.dataset))
    if c.tau is None:
        object.__setattr__(c, "tau", 1.0 if c.tau_schedule == "annealed" else 0.5)
