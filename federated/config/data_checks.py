"""The checks that need a run's data or its model, in one place, run once its data are loaded.

Resolving a config (:meth:`~federated.config.run_config.RunConfig.resolved`) reads no file
and builds no model: it checks the values.  What only the data say (how many images, the
task their targets are, the natural parties, a folder's single split) and what only the
model says (an import-path model that builds, a start that fits it, a layer rule naming
its layers, FedBN's BatchNorm layers, the memory they take) is checked here, by
:func:`checked_against`, once the data are there and before anything trains or is written:

* ``python -m federated.run`` and a Tune trial: :class:`~federated.engine.round_loop.FederatedRun`
  checks its config against the data it has just loaded, first thing;
* a sweep: its driver checks every planned trial (:func:`with_data_checked`, through
  :func:`search_spaces.resolve.trial_config_and_changes`) before Ray starts, so a bad
  trial is refused in one line with nothing written.

A built-in data set's spec is a table (:func:`~federated.config.data_fields.declared_spec`),
so resolution completes such a config at once
(:meth:`~federated.config.run_config.RunConfig.completed_with`, no file read; its checks
against the spec are :func:`check_against_spec`'s); the model's checks still wait for the
data step.  A folder's or an ``hf:`` data set's config resolves with its values checked
and what the data decide left open (``n_parties`` under ``partition=natural``, ``model``,
``task``, ``primary_metric``, the methods' parameters unbuilt): ``completed_with`` fills
them (:func:`data_decided`) from the loaded data's spec.

The config reaches these functions as a plain object (``Any``), as it reaches
:mod:`federated.config.checks`: :mod:`federated.config.run_config` calls this module, and
this module imports nothing of it back.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import torch

from federated.config.checks import (
    MAX_PLAN_ROWS,
    MIN_PARTY_SAMPLES,
    PLAN_BYTES_PER_ROW,
    validate,
)
from federated.config.data_fields import (
    DEFAULT_PARTIES,
    check_source,
    declared_spec,
    natural_parties_source,
)
from federated.config.scoring_cadence import party_scores_every_for
from federated.contract.metrics import metric_stems
from federated.contract.task_needs import (
    CLASS_PER_SAMPLE,
    TARGETS_UNMOVED_BY_ROTATION,
    TaskNeed,
    unmet_need,
)
from federated.data.catalog import DatasetSpec
from federated.data.folder_layout import FolderDataError, is_folder_dataset
from federated.data.hub_dataset import HubDataError, is_hub_dataset
from federated.data.image_data import ImageData
from federated.data.loading import load_run_data
from federated.models import (
    MODELS,
    ModelError,
    build_model,
    check_model,
    is_import_path,
    model_families,
    model_family,
)
from federated.models.pretrained_start import StartError, check_start, start_file
from federated.params import ConfigError, ModelNames
from federated.registry import load_method
from federated.tasks.written_before import current_stem

# What partitions, feature skews and evaluations need of the task (a method declares its
# own in Algorithm.task_needs): checked by one rule in _check_task.
PARTITION_NEEDS: dict[str, tuple[TaskNeed, ...]] = {
    "dirichlet": (CLASS_PER_SAMPLE,),  # Dir(beta) over each class
    "labels": (CLASS_PER_SAMPLE,),  # #C=k classes per party
}
FEATURE_SKEW_NEEDS: dict[str, tuple[TaskNeed, ...]] = {
    "rotation": (TARGETS_UNMOVED_BY_ROTATION,),
}
EVALUATION_NEEDS: dict[str, tuple[TaskNeed, ...]] = {
    "representations_at": (CLASS_PER_SAMPLE,),
}


# ---------------------------------------------------------------------- the data step
def spec_of(c: Any) -> DatasetSpec:
    """The spec of ``c``'s data: a built-in data set's from its table, a folder's or an
    ``hf:`` data set's from its load (:func:`load_checked_data`)."""
    spec = declared_spec(c.dataset)
    return spec if spec is not None else load_checked_data(c).spec


def load_checked_data(c: Any) -> ImageData:
    """``c``'s data, loaded (the loaders keep it in memory: a second ask is free) after
    :func:`~federated.config.data_fields.check_source`; a folder or ``hf:`` data set that
    cannot be used is a :class:`ConfigError` on ``dataset``, one line naming the path."""
    check_source(c)
    try:
        return load_run_data(c)
    except FolderDataError as err:
        raise ConfigError("dataset", c.dataset, f"a usable image folder; {err}") from None
    except HubDataError as err:
        raise ConfigError("dataset", c.dataset, f"a usable data set; {err}") from None


def with_data_checked(c: Any, known: dict[tuple, DatasetSpec] | None = None) -> Any:
    """``c`` resolved, completed and checked against its data (loaded where they are
    files): what a sweep's driver makes of each planned trial before Ray starts.

    ``known``: the caller's table of the specs it has had, keyed by every field a spec
    depends on (:meth:`~federated.config.run_config.RunConfig.spec_key`, the party field
    among them), filled here: a plan of many trials on one folder scans it once, not per
    trial (the table lives as long as the plan that holds it)."""
    c = c.resolved()
    key = c.spec_key()
    spec = None if known is None else known.get(key)
    if spec is None:
        spec = spec_of(c)
        if known is not None:
            known[key] = spec
    return _checked(c, spec)


def checked_against(c: Any, spec: DatasetSpec) -> Any:
    """``c`` (resolved) completed by its data's ``spec``
    (:meth:`~federated.config.run_config.RunConfig.completed_with`), then every check that
    needs the model or a file besides the data: an import-path model builds for the data,
    a start (``init``) fits it, the chosen methods' parameters fit its layers
    (:meth:`~federated.params.MethodParams.check_model`), the task's parameters fit the
    data, the training and the parties' state fit in memory.  Raises :class:`ConfigError`
    naming the first bad field; writes nothing."""
    return _checked(c.resolved(), spec)


def _checked(c: Any, spec: DatasetSpec) -> Any:
    """:func:`checked_against` of a config already resolved."""
    from federated.models.party_memory import check_party_memory

    # the model is checked right after the choices that name it, before the party
    # sizes: a model that does not build is what a run on too small a folder hears first
    chosen = dataclasses.replace(c, **data_decided(c, spec))
    check_data_choices(chosen, spec, counted=c.n_parties is not None)
    _check_model_builds(chosen, spec)
    _check_init(chosen, spec)  # after the model: a start is matched to it
    complete = c.completed_with(spec)
    names = model_names(complete.model, spec, complete.out_dim, complete.projection_head)
    if names is not None:
        built = (complete.algorithm_params, complete.server_params, complete.task_params)
        for params in (*built, *complete.inert_params()):
            params.check_model(names)
    load_method("task", str(complete.task)).check_data(complete.task_params, complete.dataset)
    if is_folder_dataset(complete.dataset) or is_hub_dataset(complete.dataset):
        # a folder sets the image size, and with it the model's training memory; the
        # built-in data sets have fixed, documented sizes and are not estimated
        from federated.models.memory_estimate import check_training_memory

        check_training_memory(complete, spec)
    check_party_memory(complete, spec)
    return complete


# ----------------------------------------------------------------------- completion
def data_decided(c: Any, spec: DatasetSpec) -> dict[str, Any]:
    """What ``c``'s data decide where ``c`` leaves it None (its own value otherwise): the
    natural parties' count, the per-party scoring period that follows it, the default
    model, the task and its primary metric."""
    task = spec.task if c.task is None else c.task
    n_parties = _resolved_parties(c, spec)
    return {
        "n_parties": n_parties,
        "party_scores_every": party_scores_every_for(c.party_scores_every, n_parties),
        "model": spec.default_model if c.model is None else c.model,
        "task": task,
        "primary_metric": default_primary(task) if c.primary_metric is None else c.primary_metric,
    }


def check_against_spec(c: Any, spec: DatasetSpec, counted: bool) -> None:
    """Every check of ``c`` (its :func:`data_decided` fields filled in) against its data's
    ``spec``: :func:`check_data_choices`, then, where the parties were not ``counted``
    before (natural parties, ``n_parties`` unset), the value checks that waited for their
    count (:func:`~federated.config.checks.validate`), then the party sizes and the batch
    plan.  Reads no file."""
    check_data_choices(c, spec, counted)
    if not counted:
        validate(c)
    _check_party_sizes(c, spec)
    _check_plan_size(c.local_epochs, c.n_train_of(spec) * c.parties_per_round // c.n_parties)


def check_data_choices(c: Any, spec: DatasetSpec, counted: bool) -> None:
    """The choices the data constrain, in the order a refusal names them: the natural
    parties, a single split's test data, the task, the model's family."""
    _check_parties(c, spec, counted)
    if spec.test_from_parties and c.party_test_fraction == 0.0:
        raise ConfigError(
            "party_test_fraction",
            c.party_test_fraction,
            f"a fraction in (0, 1) with {c.dataset}, which has one split: each party's own "
            "test split, the test set being their union; or holdout_fraction=F for a fixed "
            "test set",
        )
    # before any party count: a task without classes conflicts with a class skew first
    _check_task(c, spec)
    _check_model_name(c, spec)


def default_primary(task: str) -> str | None:
    """The task's first metric (None for a name no task has: :func:`_check_task`
    refuses it)."""
    try:
        metrics = load_method("task", task).metrics
    except ConfigError:
        return None
    return metrics[0].stem if metrics else None


def _resolved_parties(c: Any, spec: DatasetSpec) -> int:
    """``n_parties`` once resolved: under ``partition="natural"`` the data's party count
    (a folder's: a different explicit value is an error; an ``hf:`` column's: a smaller
    one is a seeded draw of that many), else 10 when unset."""
    if c.partition != "natural":
        return DEFAULT_PARTIES if c.n_parties is None else c.n_parties
    return len(spec.party_names) if c.n_parties is None else c.n_parties


def _check_parties(c: Any, spec: DatasetSpec, counted: bool = True) -> None:
    """Under ``partition="natural"``: data with parties of their own, and ``n_parties``
    unset (not ``counted``: the data's count) or their count (an ``hf:`` column's: 2 to
    their count)."""
    if c.partition != "natural":
        return
    if not spec.party_names:
        raise ConfigError(
            "partition",
            c.partition,
            "natural only with dataset=folder:PATH laid out as PATH/train/<party>/<class>/<image>",
        )
    found = len(spec.party_names)
    if not counted:
        return
    if is_hub_dataset(c.dataset):
        if not 2 <= c.n_parties <= found:
            raise ConfigError(
                "n_parties",
                c.n_parties,
                f"2 to {found} (the parties of column {c.partition_by}) or unset, under natural",
            )
        return
    if c.n_parties != found:
        raise ConfigError(
            "n_parties", c.n_parties, f"{found} (the folder's parties) or unset, under natural"
        )


def _check_task(c: Any, spec: DatasetSpec) -> None:
    """The task reads the data's targets (the data's own task by default); the primary
    metric is one the task records; a task without classes has none to skew by."""
    task = load_method("task", c.task)
    if task.targets != spec.task:
        raise ConfigError(
            "task",
            c.task,
            f"{spec.task}, or a task on {spec.task} targets (what {c.dataset} holds), or "
            "unset: the data set the task",
        )
    stems = metric_stems(task.metrics)
    if c.primary_metric is not None and c.primary_metric not in stems:
        # a name older runs of the task used (a score task's acc, now bin_acc): said so
        renamed = current_stem(c.primary_metric, task.name)
        hint = f"; {c.primary_metric} is now {renamed}" if renamed in stems else ""
        raise ConfigError(
            "primary_metric",
            c.primary_metric,
            f"for a {task.name} task one of {', '.join(stems)}{hint}",
        )
    method = load_method("algorithm", c.algorithm)
    # (field, value, what needs something of the task, the needs, what else is allowed)
    users = (
        ("algorithm", c.algorithm, f"{c.algorithm}", method.task_needs, "another method"),
        (
            "partition",
            c.partition,
            f"a {c.partition} partition",
            PARTITION_NEEDS.get(c.partition, ()),
            "natural, iid or quantity (its natural parties are "
            f"{natural_parties_source(c.dataset)})",
        ),
        (
            "feature_skew",
            c.feature_skew,
            f"a {c.feature_skew} feature skew",
            FEATURE_SKEW_NEEDS.get(c.feature_skew, ()),
            "none or noise",
        ),
        (
            "representations_at",
            c.representations_at,
            "the representation probe (its figure colours images by class)",
            EVALUATION_NEEDS["representations_at"] if c.representations_at else (),
            "unset",
        ),
    )
    for name, value, user, needs, allowed in users:
        need = unmet_need(task, needs)
        if need is not None:
            raise ConfigError(
                name,
                value,
                f"{allowed}: {user} needs {need.what}, which a {task.name} task does not have",
            )


def _check_party_sizes(c: Any, spec: DatasetSpec) -> None:
    """The partition can give every party what it needs: ``labels_per_party`` classes
    (partition=labels), and :data:`MIN_PARTY_SAMPLES` samples each where the partition
    or an image folder requires them (1 otherwise)."""
    if c.partition == "labels" and not 1 <= c.labels_per_party <= spec.n_classes:
        # only partition=labels reads it: never an error about a field that does nothing
        raise ConfigError(
            "labels_per_party", c.labels_per_party, f"an integer in [1, {spec.n_classes}]"
        )
    # an image folder's or hf: data set's parties follow one rule whatever the partition:
    # at least MIN_PARTY_SAMPLES images each (federated/data/folder_layout.py, natural parties)
    own_data = is_folder_dataset(c.dataset) or is_hub_dataset(c.dataset)
    sized = c.partition in ("dirichlet", "quantity") or own_data
    min_size = MIN_PARTY_SAMPLES if sized else 1
    n_train = c.n_train_of(spec)
    most = n_train // min_size
    if c.partition != "natural" and c.n_parties > most:
        needed = c.n_parties * min_size
        _check_holdout_leaves(c, spec, needed, n_train, min_size)
        if c.data_fraction < 1 and needed <= spec.train_size:
            # the data fraction, not the party count, is what makes it impossible
            raise ConfigError(
                "data_fraction",
                c.data_fraction,
                f"at least {-(-needed * 10_000 // spec.train_size) / 1e4:g} for "
                f"n_parties={c.n_parties} of >= {min_size} {c.dataset} samples each "
                f"(partition={c.partition}), or fewer parties",
            )
        raise ConfigError(
            "n_parties",
            c.n_parties,
            f"at most {most} for {n_train} {c.dataset} training samples "
            f"(each party needs >= {min_size} under partition={c.partition})",
        )


def _check_holdout_leaves(
    c: Any, spec: DatasetSpec, needed: int, n_train: int, min_size: int
) -> None:
    """Where a hold-out test split (``holdout_fraction``) leaves too few training samples
    for even one party, refuse the hold-out rather than the party count, which no value
    could satisfy: ``spec.train_size`` counts what the hold-out left."""
    holdout = getattr(c, "holdout_fraction", None)
    if not holdout or n_train >= min_size:
        # some parties fit: the party count is what to lower (its message says how many)
        return
    # the hold-out draws the test split from the training images (a folder with a test
    # split of its own refuses holdout_fraction): both splits were training images
    before = spec.train_size + spec.test_size
    if needed > before * c.data_fraction:
        return  # more parties than the data hold even without a hold-out
    largest = max(0.0, 1.0 - needed / (before * c.data_fraction))
    raise ConfigError(
        "holdout_fraction",
        holdout,
        f"at most {int(largest * 1000) / 1000:g} here: it leaves {n_train} training samples "
        f"for n_parties={c.n_parties} of >= {min_size} each",
    )


def _check_plan_size(local_epochs: int, samples_per_round: int) -> None:
    """Refuse a round whose batch plan would hold more than :data:`MAX_PLAN_ROWS` rows
    (``local_epochs`` x the samples drawn in a round): the plan is drawn in full before
    the first step, so its memory grows with ``local_epochs`` whatever a party then does."""
    samples = max(1, samples_per_round)
    if local_epochs * samples > MAX_PLAN_ROWS:
        raise ConfigError(
            "local_epochs",
            local_epochs,
            f"at most {max(1, MAX_PLAN_ROWS // samples)} for the {samples} samples drawn "
            f"each round: a round's batch plan (epochs x samples) is drawn in full and holds "
            f"at most {MAX_PLAN_ROWS} rows (~{MAX_PLAN_ROWS * PLAN_BYTES_PER_ROW / 2**30:.1f} GiB)",
        )


# ------------------------------------------------------------------------- the model
def _check_model_name(c: Any, spec: DatasetSpec) -> None:
    """A model of the family the data's task trains
    (:attr:`~federated.tasks.base.Task.model_family`): one of its built-in names or, for
    an encoder and a head, an import path (built by :func:`_check_model_builds`);
    another family's name (a detector on class labels) is refused naming the family's own."""
    family = model_family(spec)
    if c.model in family.names:
        return
    if not family.import_paths or any(c.model in f.names for f in model_families()):
        raise ConfigError("model", c.model, f"for {spec.task} data one of {family.allowed()}")
    if not is_import_path(c.model):
        raise ConfigError(
            "model",
            c.model,
            "one of " + ", ".join(MODELS) + ", torchvision:NAME or package.module:factory",
        )


def _check_model_builds(c: Any, spec: DatasetSpec) -> None:
    """An import-path model builds for the data (on a dummy batch)."""
    if c.model in model_family(spec).names:
        return
    try:
        check_model(c.model, spec)
    except ModelError as err:
        raise ConfigError("model", c.model, f"a working model; {err.problem}") from None


def _check_init(c: Any, spec: DatasetSpec) -> None:
    """``init``: a start that fits the run's model (:mod:`federated.models.pretrained_start`;
    resolution has made a file's path absolute, in the driver, so every trial on every node
    reads the same file)."""
    if c.init is None:
        return
    try:
        _check_start_fits(c.init, c.model, spec, c.out_dim, c.projection_head)
    except (StartError, ModelError) as err:
        raise ConfigError("init", c.init, f"a start that fits the model; {err}") from None


_fitting_starts: set[tuple[Any, ...]] = set()


def _check_start_fits(
    init: str, model: str, spec: DatasetSpec, out_dim: int, projection_head: bool
) -> None:
    """Match start ``init`` to the model the run builds; each (start file version, model,
    shape) is checked once per process.  The model is built under a forked torch RNG, so
    checking changes no run's random numbers."""
    path = start_file(init, model)
    stat = path.stat()
    key = (init, stat.st_size, stat.st_mtime_ns, model, spec, out_dim, projection_head)
    if key in _fitting_starts:
        return
    with torch.random.fork_rng(devices=[]):
        built = build_model(model, spec, out_dim, projection_head)
    check_start(built, init, model)
    _fitting_starts.add(key)


@functools.cache
def model_names(
    model: str, spec: DatasetSpec, out_dim: int, projection_head: bool
) -> ModelNames | None:
    """The state and parameter names of ``model`` built for ``spec`` on torch's ``meta``
    device (no memory, no random numbers drawn), or None when it cannot be built there (a
    user's factory that computes on real tensors: the run checks its real model)."""
    try:
        with torch.device("meta"), torch.random.fork_rng(devices=[]):
            built = build_model(model, spec, out_dim, projection_head)
    except Exception:
        return None
    return ModelNames(
        model=model,
        state=tuple(built.state_dict()),
        parameters=tuple(n for n, _ in built.named_parameters()),
    )
