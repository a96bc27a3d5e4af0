"""The one configuration of a federated run: a typed value, resolved in one explicit step.

Every entry point (Python, ``python -m federated.run``, Tune trials, ``study.sweep``)
builds a :class:`RunConfig`.  Constructing one does no I/O and changes nothing: it is
the values given.  :meth:`RunConfig.resolved` is the one step that checks every field as
a value (reading no file, building no model; :class:`ConfigError` with one line naming
the field, the bad value and what is allowed) and returns a new config: fields left as
``None`` take the MOON paper's settings (§4.1) for the chosen algorithm and dataset, a
folder dataset's path is made absolute and the chosen methods' parameters are built.
What the data or the model decide is checked once the data are loaded, in one place,
:mod:`federated.config.data_checks` (a folder's parties counted, its task and default
model read from it, a model built, a layer rule matched to it).

Defaults are the paper's reference settings: 10 parties, Dir(0.5), 10 local epochs,
SGD lr 0.01 / momentum 0.9 / weight decay 1e-5, batch 64, out_dim 256, tau 0.5.

The chosen algorithm and server optimizer (registered names or ``package.module:Class``
plug-ins, :mod:`federated.registry`) bring their own typed parameters
(:class:`~federated.params.MethodParams`), each declared once, by its ``Params`` class
(default, range, help): :attr:`RunConfig.algorithm_params`,
:attr:`RunConfig.server_params`.  Users write them by flat name (``--mu 1``, ``mu = 1``
in a study file, the ``mu`` column of results); :func:`flat_names` is the one table from
those names to where they live, read by :meth:`RunConfig.from_dict` and
:meth:`RunConfig.to_dict` and through them by the command lines, study files and results.
A run's rows hold the parameters of its chosen methods only: a FedAvg row has no ``mu``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any

from federated.config.checks import check_types, execution_named, validate
from federated.data.catalog import DatasetSpec
from federated.params import (
    ConfigError,
    MethodParams,
    coerce_value,
    describe,
    type_hints,
)
from federated.registry import (
    ALGORITHM_PATHS,
    SERVER_OPTIMIZER_PATHS,
    TASK_PATHS,
    kind_specs,
    load_method,
)

# RunConfig's fields that hold the chosen methods' parameters (the rest are run-level)
METHOD_FIELDS = ("method_options", "algorithm_params", "server_params", "task_params")
# RunConfig's fields that are no flat setting: the methods' parameters and the data's spec
NOT_FLAT = (*METHOD_FIELDS, "data_spec")
# What a run made before a field existed did, for the fields whose default is resolved
# per method (None): a checkpoint without the field is compared as this value
BEFORE_FIELD = {"batchnorm": "averaged"}
# Run-level fields whose default (None) is the chosen algorithm's: field -> the attribute
# of its party-state declaration (Algorithm.own_state, an OwnState) that holds it
METHOD_DEFAULTS = {
    "batchnorm": "batchnorm_default",
    "personal_test_every": "personal_test_every",
}


#: The run-level fields by what they set, each in one group (a test holds every field in
#: exactly one).  The fields stay flat: their names are the flags, the study files' keys,
#: the results' columns and the checkpoints' and manifests' keys (:meth:`RunConfig.to_dict`
#: is unchanged by the groups); :meth:`RunConfig.group` is a read-only view of one group.
FIELD_GROUPS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        # what is studied: the methods, the model, the task
        "method": (
            "algorithm",
            "server_optimizer",
            "model",
            "init",
            "out_dim",
            "projection_head",
            "batchnorm",
            "task",
            "primary_metric",
        ),
        # which data, how they load (the natural parties' field among them), how much is used
        "data": (
            "dataset",
            "data_root",
            "image_size",
            "holdout_fraction",
            "image_column",
            "label_column",
            "partition_by",
            "data_fraction",
            "test_fraction",
        ),
        # how the training set is split into parties and drawn each round
        "partition": (
            "n_parties",
            "partition",
            "beta",
            "labels_per_party",
            "sample_fraction",
            "party_sampling",
        ),
        # heterogeneity beyond label skew: features and system
        "heterogeneity": (
            "feature_skew",
            "feature_skew_level",
            "straggler_fraction",
            "straggler_policy",
            "local_epochs_min",
            "dropout",
        ),
        # local training and the run's length and seed
        "training": (
            "rounds",
            "local_epochs",
            "batch_size",
            "lr",
            "momentum",
            "weight_decay",
            "seed",
        ),
        # held-out data and what is scored when
        "evaluation": (
            "val_fraction",
            "val_split",
            "eval_fraction",
            "party_test_fraction",
            "finetune_epochs",
            "party_scores_every",
            "personal_test_every",
            "representations_at",
        ),
        # client-level differential privacy (federated/config/privacy_fields.py)
        "privacy": (
            "dp_noise_multiplier",
            "dp_clip_norm",
            "dp_clipping",
            "dp_clip_quantile",
            "dp_target_epsilon",
            "dp_delta",
            "dp_accountant",
            "dp_level",
        ),
        # where and how it runs (execution_fields() says which never change results)
        "execution": (
            "device",
            "threads",
            "eval_batch_size",
            "execution",
            "pack_width",
            "precision",
            "checkpoint_every",
            "party_memory_mib",
            "party_state_dir",
            "fail_at_round",
        ),
    }
)


class FieldGroup(Mapping[str, Any]):
    """A read-only view of one of :data:`FIELD_GROUPS` of a config: its fields by name,
    as a mapping and as attributes (``config.group("privacy").dp_delta``)."""

    __slots__ = ("_name", "_values")

    def __init__(self, name: str, values: Mapping[str, Any]) -> None:
        self._name = name
        self._values = MappingProxyType(dict(values))

    def __getattr__(self, key: str) -> Any:
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(f"field group {self._name!r} has no field {key!r}") from None

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        return f"FieldGroup({self._name!r}, {dict(self._values)!r})"


# the fields a data set's spec depends on (the data group but the fractions used of it)
SPEC_FIELDS = tuple(f for f in FIELD_GROUPS["data"] if f not in ("data_fraction", "test_fraction"))


def _metrics_by_task() -> str:
    """Each registered kind's metrics in words ("classification: acc; score: srcc, ...",
    lower-is-better ones marked), for the ``primary_metric`` help."""
    return "; ".join(
        f"{name}: "
        + ", ".join(
            m.stem + ("" if m.higher_is_better else " (lower is better)") for m in spec.metrics
        )
        for name, spec in kind_specs().items()
    )


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
        default="fmnist",
        metadata=_help(
            "dataset name, folder:PATH (an image folder), or hf:NAME[:CONFIG] / hf:PATH "
            "(a Hugging Face data set)"
        ),
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
        metadata=_help(
            "number of parties N; default 10, or the data's under partition=natural (hf: at "
            "most those, a seeded draw)"
        ),
    )
    sample_fraction: float = field(
        default=1.0, metadata=_help("fraction of parties drawn each round")
    )
    party_sampling: str = field(
        default="fixed",
        metadata=_help(
            "fixed: round(N x sample_fraction) parties drawn without replacement each "
            "round; poisson: each party independently with probability "
            "round(N x sample_fraction)/N (DP-FedAvg's sampling)"
        ),
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
    # --- the model's heads (the methods' own parameters live in their Params classes)
    out_dim: int = field(default=256, metadata=_help("projection head output dimension"))
    projection_head: bool = field(default=True, metadata=_help("use the projection head"))
    server_optimizer: str = field(default="avg", metadata=_help("server update rule"))
    # --- personalisation (federated/algorithms/batchnorm_rule.py,
    # federated/evaluation/fine_tuning.py)
    batchnorm: str | None = field(
        default=None,
        metadata=_help(
            "BatchNorm running statistics: averaged (the server averages them like weights) "
            "or local (each party keeps its own, in its state); never the step counter; "
            "default: the method's (local for fedbn, averaged for every other)"
        ),
    )
    finetune_epochs: int = field(
        default=0,
        metadata=_help(
            "evaluation with local fine-tuning (FedAvg+FT): each evaluating party trains a "
            "copy of its model this many epochs on its own training data before its local "
            "test and validation scores; the copy is thrown away (0: off)"
        ),
    )
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
        metadata=_help(
            "folder and hf: datasets without a test split: fraction of the training images "
            "held out to test, the same share of each of the task's hold-out groups (a "
            "classification's classes; one group where images have no class)"
        ),
    )
    image_column: str | None = field(
        default=None,
        metadata=_help("hf: datasets: the image column; default image, img or the Image column"),
    )
    label_column: str | None = field(
        default=None,
        metadata=_help(
            "hf: datasets: the target column, whose type decides the task (each task kind "
            "says which types it reads, docs/own-data-and-models.md); default label, "
            "character, fine_label, labels or the one ClassLabel"
        ),
    )
    partition_by: str | None = field(
        default=None,
        metadata=_help(
            "under partition=natural: the column of an hf: dataset, or the field of an image "
            "folder's parties file, whose values are the parties (e.g. writer_id, Street's "
            "device1_id, a segmentation folder's site); parties under 10 training images "
            "are left out"
        ),
    )
    # --- the evaluation protocol (federated/evaluation/holdout.py and validation.py):
    # selection on validation, reporting on test; held out from their own stream
    val_fraction: float = field(
        default=0.0,
        metadata=_help(
            "share of each party's samples held out for validation, stratified by class "
            "(0: no validation; every search needs it); the party trains on the rest"
        ),
    )
    val_split: str = field(
        default="party",
        metadata=_help(
            "where validation data live: party (each party's own held-out samples, "
            "evaluated federated) or server (one class-stratified slice of the training "
            "pool the server holds)"
        ),
    )
    eval_fraction: float = field(
        default=1.0,
        metadata=_help(
            "share of parties evaluating on their validation data each scored round, a "
            "seeded draw (Flower's fraction_evaluate; the cross-device setting)"
        ),
    )
    party_test_fraction: float = field(
        default=0.0,
        metadata=_help(
            "share of each party's samples held out as its local test split: per-party "
            "outcomes on the party's own images (0: re-weight the pooled test set by class)"
        ),
    )
    # --- the task (federated/tasks/<kind>/): set by the data, recorded with every run
    task: str | None = field(
        default=None,
        metadata=_help(
            f"a built-in task kind ({', '.join(TASK_PATHS)}) or package.module:Class; "
            "default: what the dataset is (a task on other targets is refused)"
        ),
    )
    primary_metric: str | None = field(
        default=None,
        metadata=_help(
            "what tables and searches rank by, one of the task's metrics (the first by "
            f"default): {_metrics_by_task()}"
        ),
    )
    # --- heterogeneity beyond label skew (federated/heterogeneity/feature_skew.py,
    # federated/heterogeneity/system.py): drawn from streams of their own
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
            "probability that a drawn party never reports (aggregation weights over those that do)"
        ),
    )
    # --- client-level differential privacy, DP-FedAvg (federated/server/privacy.py,
    # federated/privacy_accountant.py, docs/privacy.md); checked in one place,
    # federated/config/privacy_fields.py
    dp_noise_multiplier: float = field(
        default=0.0,
        metadata=_help(
            "DP-FedAvg: Gaussian noise of std sigma x clip norm added to the sum of the "
            "parties' clipped updates (0: no noise)"
        ),
    )
    dp_clip_norm: float | None = field(
        default=None,
        metadata=_help(
            "DP-FedAvg: each party's update (its weights minus the round's global ones) "
            "clipped to this L2 norm; under adaptive clipping the first round's norm "
            "(default 0.1 there); none: no clipping"
        ),
    )
    dp_clipping: str = field(
        default="fixed",
        metadata=_help(
            "fixed (dp_clip_norm every round) or adaptive (the norm follows the "
            "dp_clip_quantile of the update norms, Andrew et al. 2021)"
        ),
    )
    dp_clip_quantile: float = field(
        default=0.5,
        metadata=_help("adaptive clipping: the share of updates in (0, 1) it leaves unclipped"),
    )
    dp_target_epsilon: float | None = field(
        default=None,
        metadata=_help(
            "DP-FedAvg: the epsilon all planned rounds may spend; the noise multiplier is "
            "solved from it (give this or dp_noise_multiplier)"
        ),
    )
    dp_delta: float | None = field(
        default=None,
        metadata=_help(
            "DP-FedAvg's delta, in (0, 1/n_parties); default min(1e-5, 1/(10 n_parties)) "
            "when noise is on"
        ),
    )
    dp_level: str = field(
        default="party",
        metadata=_help(
            "party: DP-FedAvg protects each party's data at the server; record: DP-SGD "
            "inside each party protects each record (Poisson batches, per-sample clipping "
            "to dp_clip_norm, noise dp_noise_multiplier x C per local step)"
        ),
    )
    dp_accountant: str | None = field(
        default=None,
        metadata=_help(
            "the accountant: rdp (Renyi DP) or pld (privacy loss distributions: "
            "party_sampling=poisson or dp_level=record); default pld there, rdp under fixed"
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
    # not execution-only: bfloat16 arithmetic changes the float results (docs/speed.md)
    precision: str = field(
        default="fp32",
        metadata=_help(
            "fp32, or bf16-mixed: forward passes and losses under bfloat16 autocast; weights, "
            "optimizer, the methods' state and aggregation float32 (refused on a processor "
            "without bfloat16: federated/runtime/precision.py)"
        ),
    )
    checkpoint_every: int = field(
        default=5, metadata=_execution("Tune checkpoint period in rounds (0: never)")
    )
    # execution-only: a state pushed out of memory and read back is the same tensors
    # (federated/engine/party_store.py), so the budget never changes a result
    party_memory_mib: int | None = field(
        default=None,
        metadata=_execution(
            "MiB of the parties' own state (MOON's previous models, SCAFFOLD's control "
            "variates, personal models) kept in memory between rounds; the rest waits on "
            "this node's disk (default: half the memory available as the run starts)"
        ),
    )
    # execution-only as well: where a state waits never changes it
    party_state_dir: str | None = field(
        default=None,
        metadata=_execution(
            "folder on this node's disk for the parties' own state beyond party_memory_mib "
            "(default: the system's temporary folder, $TMPDIR)"
        ),
    )
    fail_at_round: int | None = field(
        default=None,
        metadata=_execution("fault injection: the trial raises once after this round"),
    )
    # when a run measures (federated/evaluation/round_evaluation.py,
    # federated/evaluation/representations.py): training never depends on them, so a
    # checkpoint restores under other values (execution-only); but the rounds that
    # validate and score per-party outcomes follow party_scores_every, so its val_ and
    # per-party columns do (docs/architecture.md, "Checkpoint compatibility")
    party_scores_every: int | None = field(
        default=None,
        metadata=_execution(
            "score per-party outcomes (each party's class mix, or its local test split) every "
            "k rounds and the last (0: off); validation runs on the same rounds, and the last; "
            "default: every round up to 100 parties, every ceil(N/100)-th above "
            "(federated/config/scoring_cadence.py)"
        ),
    )
    personal_test_every: int | None = field(
        default=None,
        metadata=_execution(
            "score each party's own model (a personalised method's) on the pooled test set "
            "every k rounds and the last; the rows between hold NaN test_ values "
            "(N passes over the test set per scored round, where FedAvg makes one); "
            "default: the method's (5 for the personalised methods, 1 for solo)"
        ),
    )
    representations_at: str | None = field(
        default=None,
        metadata=_execution(
            "rounds (e.g. '3' or '1,10') at which Fig. 2's projections of the global and "
            "the first party's local model are saved"
        ),
    )
    # --- the chosen methods' parameters.  ``method_options``: values given by flat name
    # (``mu``, ``alpha``, a plug-in's own) and not yet built; resolved() builds them, with
    # the paper defaults, into ``algorithm_params`` and ``server_params`` and keeps here
    # only the given names that neither chosen method declares (inert, warned about).
    method_options: Mapping[str, Any] = field(
        default_factory=dict, metadata=_help("method parameters by flat name, not yet built")
    )
    algorithm_params: MethodParams | None = field(
        default=None, metadata=_help("the chosen algorithm's typed parameters (resolved)")
    )
    server_params: MethodParams | None = field(
        default=None, metadata=_help("the chosen server optimizer's typed parameters (resolved)")
    )
    task_params: MethodParams | None = field(
        default=None, metadata=_help("the task's typed parameters (resolved)")
    )
    # what the data said when the config was completed (completed_with): not a flat field
    # (to_dict leaves it out; a trial's dict is completed again against its loaded data)
    data_spec: DatasetSpec | None = field(
        default=None,
        repr=False,
        metadata=_help("the data's spec the config was completed with (resolved)"),
    )

    # ------------------------------------------------------------------- resolution
    @property
    def is_resolved(self) -> bool:
        """Whether this config is complete (the methods' parameters built): resolved on a
        built-in data set, or checked against its loaded data."""
        return (
            self.algorithm_params is not None
            and self.server_params is not None
            and self.task_params is not None
        )

    def resolved(self) -> RunConfig:
        """The checked config: a new value (this one is left as it is); a complete one
        returns itself.  Raises :class:`ConfigError` naming the first bad field.  Reads
        no file and builds no model: on a built-in data set (whose spec is a table) the
        config is complete; on a folder or an ``hf:`` data set, what the data decide
        (natural parties, model, task, the methods' parameters) is filled in and checked
        once they are loaded, by :func:`federated.config.data_checks.checked_against`."""
        if self.is_resolved:
            return self
        return _resolve(self)

    def group(self, name: str) -> FieldGroup:
        """The fields of group ``name`` of :data:`FIELD_GROUPS` (``data``, ``partition``,
        ``training``, ``evaluation``, ``privacy``, ``execution`` ...), a read-only view."""
        if name not in FIELD_GROUPS:
            raise KeyError(f"no field group {name!r} (groups: {', '.join(FIELD_GROUPS)})")
        return FieldGroup(name, {f: getattr(self, f) for f in FIELD_GROUPS[name]})

    def completed_with(self, spec: Any) -> RunConfig:
        """This config (resolved: its values checked) with what its data decide filled in
        from their :class:`~federated.data.catalog.DatasetSpec` ``spec`` (the natural
        parties' count, the default model, the task and its primary metric; then the
        methods' and the task's parameters built and the privacy defaults that follow the
        party count) and checked against it
        (:func:`federated.config.data_checks.check_against_spec`).  Reads no file: a
        built-in data set's config is completed by :meth:`resolved` itself, a folder's by
        :func:`federated.config.data_checks.checked_against` once it is loaded.  A
        complete config is checked and returned as it is."""
        from federated.config.data_checks import check_against_spec, data_decided
        from federated.config.privacy_fields import privacy_defaults

        complete = replace(self, data_spec=spec, **data_decided(self, spec))
        check_against_spec(complete, spec, counted=self.n_parties is not None)
        if complete.is_resolved:
            return complete
        algorithm_params, server_params, task_params, inert = method_params(complete)
        return replace(
            complete,
            method_options=inert,
            algorithm_params=algorithm_params,
            server_params=server_params,
            task_params=task_params,
            **privacy_defaults(complete),
        )

    # ------------------------------------------------------------------ conversions
    def to_dict(self) -> dict[str, Any]:
        """Plain flat dict: every run-level field, then every method parameter by its
        flat name (the built ones once resolved, else those given)."""
        values = {f: getattr(self, f) for f in field_types()}
        values.update(self.method_options)
        for params in (self.task_params, self.server_params, self.algorithm_params):
            if params is not None:
                values.update(params.flat())
        return values

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunConfig:
        """Build from a flat mapping (run-level fields and method parameters by flat
        name, :func:`flat_names`), typed; not resolved.  Names neither a field nor a
        parameter of the chosen methods are refused by :meth:`resolved`."""
        known = field_types()
        plain = {k: coerce(k, v) for k, v in values.items() if k in known}
        given = {k: v for k, v in values.items() if k not in known and k not in NOT_FLAT}
        given.update(values.get("method_options") or {})  # a nested mapping (Python callers)
        return cls(**plain, method_options={k: coerce(k, v) for k, v in given.items()})

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with ``changes`` (flat names) applied, resolved again when this one was.
        Method parameters of a method that ``changes`` swaps out are dropped with it."""
        values = self.to_dict()
        chosen = (
            ("algorithm", self.algorithm_params),
            ("server_optimizer", self.server_params),
            ("task", self.task_params),
        )
        for kind, params in chosen:
            if kind in changes and changes[kind] != getattr(self, kind):
                for key in params.flat() if params is not None else self.method_options:
                    values.pop(key, None)
        values.update(changes)
        config = RunConfig.from_dict(values)
        if not self.is_resolved:
            return config
        config = config.resolved()
        if not config.is_resolved and config.spec_key() == self.spec_key():
            config = config.completed_with(self.data_spec)  # the same data: its spec holds
        return config

    @property
    def spec(self):
        """The dataset's :class:`~federated.data.catalog.DatasetSpec`: a built-in data
        set's from its table; a folder's or an ``hf:`` data set's from its load (the
        loaders keep it in memory; :func:`federated.config.data_checks.spec_of`).  A
        complete config holds its data's spec (:attr:`data_spec`): no I/O."""
        if self.data_spec is not None:
            return self.data_spec
        from federated.config.data_checks import spec_of

        return spec_of(self)

    def inert_params(self) -> list[MethodParams]:
        """The parameters, built, of every registered method or task that declares a value
        this config gives but none of its chosen ones does (``method_options`` once
        resolved): an inert value is still one its declarers allow (a layer rule naming no
        layer of the model is refused under FedAvg too)."""
        context = {f: getattr(self, f) for f in field_types()}
        built = []
        for params in registered_params().values():
            theirs = {k: v for k, v in self.method_options.items() if k in params.field_types()}
            if theirs:
                built.append(params.build(theirs, context))
        return built

    def spec_key(self) -> tuple[Any, ...]:
        """The values of :data:`SPEC_FIELDS`: what this config's data spec depends on."""
        return tuple(getattr(self, name) for name in SPEC_FIELDS)

    def n_train_of(self, spec: Any) -> int:
        """Training samples used after ``data_fraction``, of data with spec ``spec``."""
        return max(1, round(spec.train_size * self.data_fraction))

    @property
    def n_train(self) -> int:
        """Training samples used after ``data_fraction`` (:attr:`spec`'s)."""
        return self.n_train_of(self.spec)

    @property
    def n_test(self) -> int:
        """Test samples evaluated after ``test_fraction``."""
        return max(1, round(self.spec.test_size * self.test_fraction))

    @property
    def parties_per_round(self) -> int:
        """Parties drawn each round: round(N * fraction), at least one."""
        return max(1, round(self.n_parties * self.sample_fraction))


# ---------------------------------------------------------------------- field helpers
def _refusing_unknown_fields(init: Any) -> Any:
    """The dataclass ``__init__``, refusing a keyword that names no field in one line
    that lists the fields (Python's own ``unexpected keyword argument`` names none)."""

    @functools.wraps(init)
    def checked_init(self: RunConfig, *args: Any, **kwargs: Any) -> None:
        names = {f.name for f in fields(RunConfig)}
        for key, value in kwargs.items():
            if key not in names:
                raise ConfigError(
                    key,
                    value,
                    "a RunConfig field: "
                    + ", ".join(field_types())
                    + "; a method's parameter by RunConfig.from_dict or method_options",
                )
        init(self, *args, **kwargs)

    return checked_init


RunConfig.__init__ = _refusing_unknown_fields(RunConfig.__init__)  # type: ignore[method-assign]


def field_types() -> dict[str, Any]:
    """Run-level field name -> annotated type (resolved), in declaration order (every
    field but those holding the methods' parameters and the data's spec, :data:`NOT_FLAT`)."""
    hints = type_hints(RunConfig)
    return {f.name: hints[f.name] for f in fields(RunConfig) if f.name not in NOT_FLAT}


def field_help() -> dict[str, str]:
    """Run-level field name -> its help text."""
    run_level = field_types()
    return {f.name: f.metadata.get("help", "") for f in fields(RunConfig) if f.name in run_level}


def execution_fields() -> frozenset[str]:
    """Fields that never change a run's results on a given device (a checkpoint may be
    restored under other values of them): those declared ``execution_only``."""
    return frozenset(f.name for f in fields(RunConfig) if f.metadata.get("execution_only"))


@functools.cache
def registered_params() -> dict[str, type[MethodParams]]:
    """``"algorithm moon"`` / ``"server_optimizer fedadam"`` / ``"task score"`` -> that
    method's (or task's) parameters class, for every registered one (imports them)."""
    out = {}
    kinds = (
        ("algorithm", ALGORITHM_PATHS),
        ("server_optimizer", SERVER_OPTIMIZER_PATHS),
        ("task", TASK_PATHS),
    )
    for kind, paths in kinds:
        for name in paths:
            out[f"{kind} {name}"] = load_method(kind, name).Params
    return out


@functools.cache
def flat_names() -> dict[str, tuple[str, ...]]:
    """The one table of the flat names users write (``--mu``, ``mu = 1`` in a study file,
    the ``mu`` column of results) -> where each lives: ``("run",)`` for a run-level
    field, else the registered methods that declare it as a parameter
    (``("algorithm fedprox", "algorithm moon", "algorithm l2rep")`` for ``mu``).  A
    plug-in's own parameters are found through the plug-in, when it is chosen."""
    table: dict[str, tuple[str, ...]] = {name: ("run",) for name in field_types()}
    for owner, params in registered_params().items():
        for name in params.field_types():
            table[name] = (*table.get(name, ()), owner)
    return table


def config_values(values: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a trial's values a :class:`RunConfig` takes: its fields and the
    parameters of the algorithm and server optimizer they name (other keys, e.g. a
    sweep's labels, are dropped)."""
    known = set(field_types())
    for kind, default in (("algorithm", "fedavg"), ("server_optimizer", "avg")):
        known |= set(load_method(kind, str(values.get(kind, default))).Params.field_types())
    # the task is the data's until resolved: every registered task's parameters, and a
    # named plug-in task's own
    for name in TASK_PATHS:
        known |= set(load_method("task", name).Params.field_types())
    if values.get("task"):
        known |= set(load_method("task", str(values["task"])).Params.field_types())
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
def _resolve(c: RunConfig) -> RunConfig:
    """:meth:`RunConfig.resolved`: each step returns a new value, none rewrites one; no
    file is read and no model built (names are made absolute: path look-ups only)."""
    from federated.config.data_fields import DEFAULT_PARTIES, declared_spec, folder_path_resolved
    from federated.config.scoring_cadence import party_scores_every_for
    from federated.models.pretrained_start import absolute_start

    check_types(c)
    load_method("algorithm", c.algorithm)
    load_method("server_optimizer", c.server_optimizer)
    checked = replace(
        c,
        dataset=folder_path_resolved(c.dataset),
        # under partition=natural the data count the parties (completed_with)
        n_parties=(
            DEFAULT_PARTIES if c.n_parties is None and c.partition != "natural" else c.n_parties
        ),
        init=None if c.init is None else absolute_start(c.init),
        execution=execution_named(c.execution),
        **method_defaults(c),
    )
    checked = replace(
        checked,
        party_scores_every=party_scores_every_for(c.party_scores_every, checked.n_parties),
    )
    validate(checked)
    spec = declared_spec(checked.dataset)
    _check_method_options(checked, checked.task or (spec.task if spec is not None else None))
    # a built-in data set's spec is a table: complete the config now; a folder's or an
    # hf: data set's waits for its load (federated.config.data_checks.checked_against)
    return checked.completed_with(spec) if spec is not None else checked


def _check_method_options(c: RunConfig, task: str | None) -> None:
    """The given method parameters as values, before they are built (:func:`method_params`,
    once the data have said which ``task`` the run is where it is a folder's: None until
    then): every name one of the chosen methods, the task or some registered method
    declares, every value one its declarers allow."""
    algorithm = load_method("algorithm", c.algorithm).Params
    server = load_method("server_optimizer", c.server_optimizer).Params
    declared = {**server.field_types(), **algorithm.field_types()}
    if task is not None:
        declared.update(load_method("task", task).Params.field_types())
    given = dict(c.method_options)
    _refuse_unknown_names(c, given, declared, task)
    context = {f: getattr(c, f) for f in field_types()}
    chosen = {k: v for k, v in given.items() if k in declared}
    algorithm.build(chosen, context)
    server.build(chosen, context)
    for params in registered_params().values():
        theirs = {k: v for k, v in given.items() if k not in declared and k in params.field_types()}
        if theirs:
            params.build(theirs, context)


def _refuse_unknown_names(
    c: RunConfig, given: Mapping[str, Any], declared: Mapping[str, Any], task: str | None
) -> None:
    """:class:`ConfigError` for the first given name that is no run field and no
    parameter of any registered method or task (``declared``: the chosen ones', named in
    the message; ``task`` None while a folder's data have not said it)."""
    names = flat_names()
    for key in given:
        if key not in declared and key not in names:
            raise ConfigError(
                key,
                given[key],
                f"a known field: {', '.join(field_types())}, or a parameter of algorithm "
                f"{c.algorithm} / server_optimizer {c.server_optimizer}"
                + (f" / task {task}" if task is not None else "")
                + f" ({', '.join(declared) or 'none'})",
            )


def method_defaults(c: RunConfig) -> dict[str, Any]:
    """The :data:`METHOD_DEFAULTS` fields of ``c``, each the chosen algorithm's default
    where ``c`` leaves it None (its own value otherwise)."""
    declared = load_method("algorithm", c.algorithm).own_state
    return {
        name: getattr(declared, attribute) if getattr(c, name) is None else getattr(c, name)
        for name, attribute in METHOD_DEFAULTS.items()
    }


def method_params(
    c: RunConfig,
) -> tuple[MethodParams, MethodParams, MethodParams, dict[str, Any]]:
    """The chosen methods' and the task's parameters from ``c.method_options`` (the paper
    defaults for the rest), and the given values that none declares but some registered
    method or task does (inert: warned about, kept so that a run records what its user
    wrote)."""
    algorithm = load_method("algorithm", c.algorithm).Params
    server = load_method("server_optimizer", c.server_optimizer).Params
    task = load_method("task", str(c.task)).Params
    given = dict(c.method_options)
    declared = {**task.field_types(), **server.field_types(), **algorithm.field_types()}
    _refuse_unknown_names(c, given, declared, str(c.task))
    context = {f: getattr(c, f) for f in field_types()}
    chosen = {k: v for k, v in given.items() if k in declared}
    inert = {k: v for k, v in given.items() if k not in declared}
    # an inert value is still one its declarers allow: --mu -1 is refused under FedAvg
    # too (a typo is a typo whichever method it reaches), not run and warned about
    for params in registered_params().values():
        theirs = {k: v for k, v in inert.items() if k in params.field_types()}
        if theirs:
            params.build(theirs, context)
    return (
        algorithm.build(chosen, context),
        server.build(chosen, context),
        task.build(chosen, context),
        inert,
    )
