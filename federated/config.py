"""The one configuration of a federated run: typed, validated in one place, resolved.

Every entry point (Python, ``python -m federated.run``, Tune trials, ``study.sweep``)
builds a :class:`RunConfig`.  Construction validates every field before any data is
loaded and raises :class:`ConfigError` with one line naming the field, the bad value
and what is allowed.  Fields left as ``None`` are resolved to the MOON paper's settings
(§4.1) for the chosen algorithm and dataset, so a constructed config is always complete.

Defaults are the paper's reference settings: 10 parties, Dir(0.5), 10 local epochs,
SGD lr 0.01 / momentum 0.9 / weight decay 1e-5, batch 64, out_dim 256, tau 0.5.

The chosen algorithm and server optimizer (registered names or ``package.module:Class``
plug-ins, :mod:`federated.registry`) bring their own typed parameters
(:class:`~federated.params.MethodParams`).  A parameter named like a field here (``mu``,
``tau``, ``server_lr`` ...) takes that field's value — the flat names of the studies and
results on disk keep working; any other one is a *method option*, kept in
``method_options`` and flat in :meth:`RunConfig.to_dict`.  Both are built and checked
here, at construction, with everything else: :attr:`RunConfig.algorithm_params`,
:attr:`RunConfig.server_params`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, get_type_hints

from federated.config_checks import EXECUTION_ALIASES, validate
from federated.params import (
    ConfigError,
    MethodParams,
    coerce_value,
    describe,
)
from federated.registry import (
    ALGORITHM_PATHS,
    SERVER_OPTIMIZER_PATHS,
    load_method,
)

# What a method-parameter field resolves to when no chosen method declares it: a
# neutral value, so every run's row carries the column (the declaring methods' own
# defaults, paper defaults included, live in their Params classes).
UNDECLARED_DEFAULTS = {"mu": 0.0, "tau": 0.5}


def _help(text: str) -> Any:
    return describe(text)


def _execution(text: str) -> Any:
    return describe(text, execution_only=True)


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
    init: str | None = field(
        default=None,
        metadata=_help(
            "start of the global model: a torch.save(state_dict) file, fedsweep:NAME (a "
            "shipped start) or torchvision:WEIGHTS (DEFAULT, IMAGENET1K_V1) of "
            "model=torchvision:ARCH; none: random (docs/pretrained-starts.md)"
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
        default=None,
        metadata=_help("dataset folder; default $FEDSWEEP_DATA or ~/.cache/fedsweep/data"),
    )
    image_size: str | None = field(
        default=None,
        metadata=_help("folder datasets: resize to N or HxW pixels; default the most common size"),
    )
    holdout_fraction: float | None = field(
        default=None,
        metadata=_help("folder datasets without test/: fraction of each class held out to test"),
    )
    # --- heterogeneity beyond label skew (federated/feature_skew.py,
    # federated/system_heterogeneity.py): drawn from streams of their own
    feature_skew: str = field(
        default="none",
        metadata=_help(
            "per-party input shift: none, noise (party i of N adds Gaussian noise of std "
            "level*i/N, 0..1 pixel scale) or rotation (each party's images rotated by its "
            "own angle, drawn uniformly in [-level, level] degrees)"
        ),
    )
    feature_skew_level: float = field(
        default=0.0,
        metadata=_help("feature skew strength: noise std (0..1 pixels) or largest angle (deg)"),
    )
    straggler_fraction: float = field(
        default=0.0,
        metadata=_help(
            "share of each round's drawn parties that are stragglers: each does a uniform "
            "number of local steps in [1, its full count]"
        ),
    )
    straggler_policy: str = field(
        default="partial",
        metadata=_help(
            "partial (stragglers' partial work is aggregated, FedProx) or drop (stragglers "
            "are not aggregated, FedAvg)"
        ),
    )
    local_epochs_min: int | None = field(
        default=None,
        metadata=_help(
            "per-party local work: each drawn party runs a uniform number of epochs in "
            "[local_epochs_min, local_epochs] each round (FedNova's setting); none: all E"
        ),
    )
    dropout: float = field(
        default=0.0,
        metadata=_help(
            "probability that a drawn party never reports (aggregation weights over those "
            "that do)"
        ),
    )
    # --- execution (never changes results on a given device)
    device: str = field(default="auto", metadata=_execution("auto, cpu, cuda or cuda:N"))
    threads: int | None = field(default=None, metadata=_execution("torch CPU threads"))
    eval_batch_size: int = field(
        default=256,
        # moves only the last bits of test_loss (a float32 sum over evaluation batches);
        # test_acc is exact
        metadata=_execution("batch size of evaluation (256: cache-friendly on CPU)"),
    )
    execution: str = field(
        default="packed",
        metadata=_help(
            "packed (a round's parties train together, where the method and model allow), "
            "sequential (one party after another) or reference (plain per-sample path)"
        ),
    )
    # not execution-only: MOON's frozen global model runs on all of a pack's batches at
    # once, and the batch size moves the last float bits of its representations
    pack_width: int | None = field(
        default=None,
        metadata=_help(
            "packed execution: parties per packed network; default 4 on a CPU (wider packs "
            "fall out of cache), every drawn party on a GPU"
        ),
    )
    checkpoint_every: int = field(
        default=5, metadata=_execution("Tune checkpoint period in rounds (0: never)")
    )
    fail_at_round: int | None = field(
        default=None,
        metadata=_execution("fault injection: the trial raises once after this round"),
    )
    # what a run records besides its results (federated/party_scores.py,
    # federated/representations.py): never changes them, so execution-only
    party_scores_every: int = field(
        default=1,
        metadata=_execution(
            "score the global model on each party's class mix every k rounds and the last (0: off)"
        ),
    )
    representations_at: str | None = field(
        default=None,
        metadata=_execution(
            "rounds (e.g. '3' or '1,10') at which Fig. 2's projections of the global and "
            "the first party's local model are saved"
        ),
    )
    # --- parameters of the chosen methods that are not fields above (FedDyn's alpha,
    # FedAdam's betas, a plug-in's own): name -> value, resolved to every parameter of
    # the chosen algorithm and server optimizer.  Flat in to_dict(), the CLI and sweeps.
    method_options: Mapping[str, Any] = field(
        default_factory=dict, metadata=_help("method parameters beyond the fields above")
    )

    def __post_init__(self) -> None:
        validate(self)
        _resolve(self)
        _resolve_method_params(self)

    # ------------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        """Plain flat dict of every field and method option (resolved values)."""
        values = {f: getattr(self, f) for f in field_types()}
        values.update(self.method_options)
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from a flat mapping (fields and method options); unknown keys and
        strings of the wrong type are errors."""
        known = field_types()
        plain = {k: coerce(k, v) for k, v in values.items() if k in known}
        options = {k: v for k, v in values.items() if k not in known}
        return cls(**plain, method_options=options)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` applied, validated again.  Method options of a method
        that ``changes`` swaps out are dropped with it."""
        values = self.to_dict()
        if {"algorithm", "server_optimizer"} & set(changes):
            for key in self.method_options:
                values.pop(key)
        values.update(changes)
        return RunConfig.from_dict(values)

    @property
    def algorithm_params(self) -> MethodParams:
        """The chosen algorithm's typed parameters (its ``Params`` dataclass)."""
        return self.__dict__["_algorithm_params"]

    @property
    def server_params(self) -> MethodParams:
        """The chosen server optimizer's typed parameters."""
        return self.__dict__["_server_params"]

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
    """Scalar field name -> annotated type (resolved), in declaration order (every field
    but ``method_options``)."""
    hints = get_type_hints(RunConfig)
    return {f.name: hints[f.name] for f in fields(RunConfig) if f.name != "method_options"}


def field_help() -> dict[str, str]:
    return {f.name: f.metadata.get("help", "") for f in fields(RunConfig)}


def execution_fields() -> frozenset[str]:
    """Fields that never change a run's results on a given device (a checkpoint may be
    restored under other values of them): those declared ``execution_only``."""
    return frozenset(f.name for f in fields(RunConfig) if f.metadata.get("execution_only"))


@functools.cache
def registered_params() -> dict[str, type[MethodParams]]:
    """``"algorithm moon"`` / ``"server_optimizer fedadam"`` -> that method's parameters
    class, for every registered method (imports them)."""
    out = {}
    kinds = (("algorithm", ALGORITHM_PATHS), ("server_optimizer", SERVER_OPTIMIZER_PATHS))
    for kind, paths in kinds:
        for name in paths:
            out[f"{kind} {name}"] = load_method(kind, name).Params
    return out


def config_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a trial's values a :class:`RunConfig` takes: its fields and the
    parameters of the algorithm and server optimizer they name (other keys, e.g. a
    sweep's labels, are dropped)."""
    known = set(field_types())
    for kind, default in (("algorithm", "fedavg"), ("server_optimizer", "avg")):
        known |= set(load_method(kind, str(values.get(kind, default))).Params.field_types())
    return {k: v for k, v in values.items() if k in known}


def coerce(name: str, value: Any) -> Any:
    """Convert ``value`` (often a string from a command line) to field ``name``'s type.
    A name that is no field is a method option: typed by the registered method that
    declares it, or kept as it is for its plug-in to type (and :class:`RunConfig` to
    reject when no chosen method declares it)."""
    types = field_types()
    if name in types:
        return coerce_value(name, types[name], value)
    for params in registered_params().values():
        hint = params.field_types().get(name)
        if hint is not None:
            return coerce_value(name, hint, value)
    return value


# ------------------------------------------------------------------------ resolution
def unset_default(name: str, values: Mapping[str, Any]) -> Any:
    """What method-parameter field ``name`` (``mu``, ``tau``) resolves to when left unset:
    the chosen algorithm's declared default for the run's settings ``values`` (flat:
    ``algorithm``, ``dataset``, ``tau_schedule``), or a neutral value when it declares
    no such parameter."""
    params = load_method("algorithm", str(values.get("algorithm", "fedavg"))).Params
    if name in params.field_types():
        return params.resolved_default(name, values)
    return UNDECLARED_DEFAULTS[name]


def paper_mu(algorithm: str, dataset: str) -> float:
    """The mu ``algorithm`` takes on ``dataset`` when unset (0 where it has none)."""
    return unset_default("mu", {"algorithm": algorithm, "dataset": dataset})


def _resolve(c: RunConfig) -> None:
    # frozen dataclass: resolution writes through object.__setattr__ once, at construction
    if c.model is None:
        object.__setattr__(c, "model", c.spec.default_model)
    if c.execution in EXECUTION_ALIASES:
        object.__setattr__(c, "execution", EXECUTION_ALIASES[c.execution])
    values = {"algorithm": c.algorithm, "dataset": c.dataset, "tau_schedule": c.tau_schedule}
    for name in ("mu", "tau"):
        if getattr(c, name) is None:
            object.__setattr__(c, name, unset_default(name, values))


def _resolve_method_params(c: RunConfig) -> None:
    """Build the chosen methods' parameters from the fields and ``method_options``; keep
    as options every parameter that is not a field (with its default when not given)."""
    algorithm = load_method("algorithm", c.algorithm).Params
    server = load_method("server_optimizer", c.server_optimizer).Params
    fields_ = field_types()
    given = dict(c.method_options)
    declared = {**server.field_types(), **algorithm.field_types()}
    for key in given:
        if key not in declared:
            raise ConfigError(
                key,
                given[key],
                f"a known field: {', '.join(fields_)}, or a parameter of algorithm "
                f"{c.algorithm} / server_optimizer {c.server_optimizer} "
                f"({', '.join(k for k in declared if k not in fields_) or 'none'})",
            )
    values = {**given, **{k: getattr(c, k) for k in fields_}}
    algorithm_params = algorithm.build(values)
    server_params = server.build(values)
    options = {}
    for params in (server_params, algorithm_params):
        for key in type(params).field_types():
            if key not in fields_:
                options[key] = getattr(params, key)
    object.__setattr__(c, "method_options", options)
    # cached typed views (not dataclass fields: to_dict and equality ignore them)
    c.__dict__["_algorithm_params"] = algorithm_params
    c.__dict__["_server_params"] = server_params
