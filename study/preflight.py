"""The checks a trial would fail at run time, run by the driver before Ray starts.

A trial validates its config when it starts, draws its partition, picks its device and
loads its data.  Each of these can fail for a config that passed the plan's checks (an
impossible partition, ``device=cuda`` on a machine without CUDA): the driver runs the
same code first, so the sweep is refused in one line before Ray starts and before
anything is written, rather than every trial erroring in turn.  What a trial accepts,
the sweep accepts: parties smaller than one batch train on one batch of all their
samples, in a sweep as in ``python -m federated.run`` (a ``warning:`` line says so).
It also computes the class counts of every distinct partition (``partitions.json``),
since it has drawn them.  This module does not import Ray.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any

import numpy as np

from federated.cli.input_checks import InputError
from federated.config.run_config import RunConfig
from federated.data import ImageData
from federated.data.hub_dataset import HubColumns
from federated.data.loading import load_run_data
from federated.data.party_field import left_out_words
from federated.heterogeneity.feature_skew import FeatureSkew
from federated.heterogeneity.partition import (
    FloorNotice,
    PartitionError,
    natural_party_names,
    partition_for_run,
    partition_labels,
)
from federated.registry import load_method
from federated.runtime.device import DeviceUnavailableError, resolve_device
from federated.runtime.precision import precision_for_run
from study.plan import SweepPlan

# The fields a trial's partition depends on (with the dataset's own samples).
PARTITION_KEYS = (
    "dataset",
    "n_parties",
    "partition",
    "beta",
    "labels_per_party",
    "data_fraction",
    "seed",
)


class PreflightError(InputError):
    """A planned trial would fail at run time (one line naming the trial)."""


def check_cpus(cpus_per_trial: float) -> None:
    """A local Ray has this machine's CPUs: a trial asking for more would stay pending
    forever, so it is refused with the limit named."""
    available = os.cpu_count() or 1
    if cpus_per_trial > available:
        raise PreflightError(
            f"--cpus-per-trial={cpus_per_trial:g} (allowed: at most {available}, the CPUs of "
            "this machine; a trial asking for more would never start)"
        )


def trial_configs(plan: SweepPlan) -> list[tuple[str, RunConfig]]:
    """``(trial label, its RunConfig)`` of every planned trial."""
    return [
        (f"{t.label}, seed={t.seed}", t.run_config)  # resolved once, by the plan
        for t in plan.trials()
    ]


def check_devices(configs: list[tuple[str, RunConfig]]) -> None:
    """``device=cuda`` where this machine has no CUDA, ``precision=bf16-mixed`` where its
    processor has no bfloat16 (a local Ray runs trials here)."""
    for device, precision in sorted({(c.device, c.precision) for _, c in configs}):
        try:
            precision_for_run(precision, resolve_device(device))
        except DeviceUnavailableError as err:
            raise PreflightError(str(err)) from None


def batch_warnings(configs: list[tuple[str, RunConfig]]) -> list[str]:
    """A ``warning:`` line when trials' parties hold, on average, fewer samples than one
    batch (none otherwise).  The run accepts them, and so does the sweep: each epoch such
    a party takes one SGD step on a batch of all its samples instead of none
    (federated/execution/batch_plan.py), the same in ``python -m federated.run`` and in a
    trial; the line says so, since a study may mean minibatch SGD."""
    small = [
        (label, c)
        for label, c in configs
        # natural parties: the folders decide, each party's size is the loader's
        if c.partition != "natural" and c.n_train // c.n_parties < c.batch_size
    ]
    if not small:
        return []
    label, c = small[0]
    others = f" and {len(small) - 1} other trials" if len(small) > 1 else ""
    return [
        f"warning: trial {label}{others}: n_parties={c.n_parties} share {c.n_train} "
        f"{c.dataset} samples (data_fraction={c.data_fraction:g}), "
        f"{c.n_train // c.n_parties} per party on average, fewer than "
        f"batch_size={c.batch_size}: a party smaller than one batch trains on one batch "
        "of all its samples each epoch (one SGD step), as in python -m federated.run"
    ]


def check_batches(configs: list[tuple[str, RunConfig]]) -> None:
    """Parties smaller than one batch: accepted, as a single run accepts them, with
    :func:`batch_warnings`' line printed to stderr (the sweep's dry run and its real run
    each call this once)."""
    for line in batch_warnings(configs):
        print(line, file=sys.stderr)


def training_data(config: RunConfig) -> tuple[ImageData, np.ndarray, np.ndarray | None]:
    """The run's dataset as its trials load it, what its partitions group samples by
    (:func:`~federated.heterogeneity.partition.partition_labels`) and (natural folders) each
    training
    sample's party, as numpy arrays for partition draws."""
    data = load_run_data(config)
    parties = None if data.train_parties is None else data.train_parties.numpy()
    return data, partition_labels(data, config.task)[0], parties


def partitions(plan: SweepPlan, configs: list[tuple[str, RunConfig]]) -> list[dict[str, Any]]:
    """Draw every distinct partition of the plan, as its trials will, and return their
    class counts (Fig. 5).  Loading the data here also checks that the dataset is there.
    Optuna sweeps that vary the partition check and record the example point's only."""
    # one load per set of named columns: the natural parties' field may be an axis
    # (the street study's Street-5 and Street-20 are device1_id and device2_id)
    loaded: dict[HubColumns, tuple[ImageData, np.ndarray, np.ndarray | None]] = {}
    seen: dict[tuple, dict[str, Any]] = {}
    for label, config in configs:
        columns = HubColumns.of(config)
        if columns not in loaded:
            loaded[columns] = training_data(config)
            spec = loaded[columns][0].spec
            said = left_out_words(config.partition_by or "", spec.left_out_parties)
            if said:
                print(said, file=sys.stderr)
        data, labels, parties = loaded[columns]
        skew = FeatureSkew.from_config(config)
        key = tuple(getattr(config, k) for k in PARTITION_KEYS)
        if config.partition_by:  # the field the natural parties come from
            key += (config.partition_by,)
        if skew is not None:  # the same partition under another skew is another row
            key += (config.feature_skew, config.feature_skew_level)
        if key in seen:
            continue
        try:
            # a hopeless redraw of the Dirichlet rule divides by zero (numpy warns) before
            # the floor is constructed: the partition, or the one line below, says it all
            with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
                warnings.simplefilter("ignore", RuntimeWarning)
                parts = partition_for_run(labels, config, parties)
        except PartitionError as err:
            raise PreflightError(f"trial {label}: {err}") from None
        floor = [w for w in caught if issubclass(w.category, FloorNotice)]
        for other in (w for w in caught if w not in floor):
            warnings.showwarning(other.message, other.category, other.filename, other.lineno)
        for notice in floor:  # said once per distinct partition, and recorded below
            print(f"notice: {notice.message}", file=sys.stderr)
        task = load_method("task", config.task or data.spec.task)
        seen[key] = {
            **dict(zip(PARTITION_KEYS, key)),
            # what the task holds per class and party, counted as it declares (images;
            # a detection's boxes, a segmentation's pixels), and each party's images
            "class_counts": task.party_class_counts(data, parts).tolist(),
            "counted": task.task_spec().counted,
            "party_images": [len(p) for p in parts],
            # the floor was constructed: sizes follow the draw only beyond it
            "floor_constructed": bool(floor),
        }
        if data.spec.class_names:  # image folders: the names the heat-map shows
            seen[key]["class_names"] = list(data.spec.class_names)
        if config.partition == "natural":  # an hf: column's parties may be a drawn few
            seen[key]["party_names"] = natural_party_names(data.spec.party_names, config)
        if config.partition_by:
            seen[key]["partition_by"] = config.partition_by
            if data.spec.left_out_parties:  # under the floor: in no party (the report says)
                seen[key]["left_out_parties"] = [list(v) for v in data.spec.left_out_parties]
        if skew is not None:  # each party's noise std (0..1 pixels) or angle (degrees)
            seen[key]["feature_skew"] = config.feature_skew
            seen[key]["feature_skew_level"] = config.feature_skew_level
            seen[key]["feature_skew_parties"] = skew.per_party()
    return list(seen.values())


def preflight(plan: SweepPlan, *, local: bool) -> list[dict[str, Any]]:
    """Every run-time check of every planned trial; returns ``partitions.json``'s rows.

    ``local``: trials run on this machine (a local Ray), so its devices are theirs; on a
    cluster the workers' devices are not known here."""
    configs = trial_configs(plan)
    if local:
        check_devices(configs)
    check_batches(configs)
    return partitions(plan, configs)
