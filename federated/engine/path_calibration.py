"""Which execution path is faster here: a few timed local steps of each, or the cache.

Packed execution (a round's parties as one packed network) beats training them one by
one on some processors and loses on others (docs/speed.md), so where the user did not
choose a path, a sweep measures before its trials start: the run's model, data, batch,
method and torch threads, every drawn party training ``steps`` SGD steps through each
path's real trainer, after one warm-up step per path that is not counted; the paths
alternate at least ``repeats`` times (more, up to ``MAX_REPEATS``, while the measurement
has taken less than ``BUDGET_S``) and each keeps its fastest time: a busy machine slows
some repeats, and the fastest is the least disturbed.
The faster path is chosen; the result is cached per machine and shape in
``~/.cache/fedsweep/execution-paths.json`` (keyed by CPU model and identity, torch
version, threads, device, model, input shape, batch size, method, parties per round,
pack width, precision and what sets the party sizes), so
the next sweep of the same shape reuses it.

Tests inject a timing table (``measure=``) to exercise both outcomes without timing
anything.  The paths' results are equal within the tolerance tests/test_execution_paths.py
states, so the choice moves only the last float bits of a run, never what it compares.
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from federated.algorithms import LocalJob
from federated.config.run_config import RunConfig
from federated.data import ImageData
from federated.engine.round_loop import FederatedRun
from federated.execution.batch_plan import draw_batches, limited
from federated.execution.choice import local_trainer
from federated.execution.packed import PackedTrainer
from federated.execution.trainer import LocalTrainer
from federated.runtime.atomic_file import atomic_open
from federated.runtime.cpu_name import cpu_identity, cpu_model
from federated.tasks.base import build_task

PATHS = ("packed", "sequential")
CACHE_FORMAT = 2  # 2: at least 3 alternations, up to 2 s (1: 2 alternations)
DEFAULT_STEPS = 2  # timed SGD steps per party and repeat
DEFAULT_REPEATS = 3  # alternations of the two paths at least; each keeps its fastest
MAX_REPEATS = 12  # alternations at most
BUDGET_S = 2.0  # alternations continue (up to MAX_REPEATS) while the timed steps took less
# A sweep is timed only where the measurement's steps are at most this share of the
# training it plans: a smoke sweep's whole training is shorter than the measurement.
TIMED_SHARE = 0.1

#: seconds one measurement of each path took: {"packed": s, "sequential": s}
Timings = Mapping[str, float]
#: how a measurement is taken (tests inject a table): config -> timings, or None where
#: packed execution does not apply to the config's method or model
Measure = Callable[[RunConfig], "Timings | None"]


def default_cache_file() -> Path:
    """``~/.cache/fedsweep/execution-paths.json``."""
    return Path.home() / ".cache" / "fedsweep" / "execution-paths.json"


def calibration_key(config: RunConfig) -> dict[str, Any]:
    """What a timing depends on: the machine (CPU model and identity, torch version,
    threads, device) and the run's shape (model, input shape, batch size, method, parties
    per round, pack width, precision, and the partition's fields that set the party
    sizes).
    ``config`` is resolved."""
    from federated.config.data_checks import spec_of

    spec = spec_of(config)
    return {
        "cpu": cpu_model(),
        "cpu_identity": cpu_identity(),
        "torch": torch.__version__,
        "threads": config.threads if config.threads is not None else torch.get_num_threads(),
        "device": config.device,
        "model": config.model,
        "projection_head": config.projection_head,
        "out_dim": config.out_dim,
        "input_shape": list(spec.shape),
        "batch_size": config.batch_size,
        "algorithm": config.algorithm,
        "parties_per_round": config.parties_per_round,
        "pack_width": config.pack_width,
        # bfloat16 kernels time apart from float32 ones: a bf16-mixed trial is never
        # given a float32 timing (nor the other way round)
        "precision": config.precision,
        # what sets the party sizes, which set how many parties a pack holds (a round of
        # many small parties packs badly: issue 53), but not the seed's draw of them
        "party_sizes": {
            "dataset": config.dataset,
            "data_fraction": config.data_fraction,
            "n_parties": config.n_parties,
            "partition": config.partition,
            "beta": config.beta,
            "labels_per_party": config.labels_per_party,
            "partition_by": config.partition_by,
        },
    }


def local_steps(config: RunConfig) -> int:
    """About how many local SGD steps ``config``'s run trains: rounds x parties a round x
    local epochs x the batches of a party of average size.  ``config`` is resolved and
    completed by its data (``n_parties`` known)."""
    from federated.config.data_checks import spec_of

    party_size = spec_of(config).train_size * config.data_fraction / config.n_parties
    batches = max(1, math.ceil(party_size / config.batch_size))
    return config.rounds * config.parties_per_round * config.local_epochs * batches


def measurement_steps(config: RunConfig) -> int:
    """The most local SGD steps :func:`measure_paths` trains for ``config``: every party of
    a round, on each path, one warm-up step and :data:`MAX_REPEATS` timed alternations of
    :data:`DEFAULT_STEPS`."""
    return len(PATHS) * config.parties_per_round * (1 + DEFAULT_STEPS * MAX_REPEATS)


def task_packing_obstacle(config: RunConfig) -> str | None:
    """Why ``config``'s task cannot train packed (the task's own one line, e.g. a
    detector's per-image boxes), or None.  ``config`` is resolved."""
    from federated.config.data_checks import spec_of

    return build_task(config.task, config.task_params, spec_of(config)).packing_obstacle()


def key_text(key: Mapping[str, Any]) -> str:
    """The cache's key string of a :func:`calibration_key`."""
    return json.dumps(dict(key), sort_keys=True)


@dataclass(frozen=True)
class PathChoice:
    """The execution path a run trains on and why.

    ``source``: ``measured`` (timed now), ``cache`` (timed before on this machine and
    shape), ``not packable`` (the method or model cannot pack: packed is not measured),
    ``user`` (written by the user: honoured, nothing measured) or ``not measured`` (with
    ``reason``: trials on a GPU or on a cluster's nodes, which this machine cannot time,
    or a sweep too short to repay the measurement).
    ``timings_s``: seconds of one measurement of each path (the same work for both)."""

    path: str
    source: str
    timings_s: dict[str, float] = field(default_factory=dict)
    key: dict[str, Any] = field(default_factory=dict)
    measured_at: str | None = None
    reason: str | None = None

    @property
    def speedup(self) -> float | None:
        """Sequential's time over packed's (> 1: packed is faster)."""
        packed, sequential = self.timings_s.get("packed"), self.timings_s.get("sequential")
        if not packed or sequential is None:
            return None
        return sequential / packed

    def line(self) -> str:
        """The one line a sweep prints about its path."""
        if self.source == "user":
            return f"execution: {self.path} (as written)"
        if self.source in ("not measured", "not packable"):
            return f"execution: {self.path} (not measured: {self.reason})"
        where = "measured now" if self.source == "measured" else f"cached from {self.measured_at}"
        other = "sequential" if self.path == "packed" else "packed"
        return (
            f"execution: {self.path} ({where}: {self.path} {self.timings_s[self.path]:.2f} s, "
            f"{other} {self.timings_s[other]:.2f} s for the same steps; "
            f"--set execution={other} overrides)"
        )

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's ``execution_choice`` entry."""
        entry: dict[str, Any] = {"path": self.path, "source": self.source}
        if self.timings_s:
            entry["timings_s"] = dict(self.timings_s)
            entry["speedup_packed"] = self.speedup
            entry["measured_at"] = self.measured_at
            entry["key"] = dict(self.key)
        if self.reason:
            entry["reason"] = self.reason
        return entry


def faster_path(timings: Timings) -> str:
    """The path with the smaller time; a tie keeps packed (the long-standing default)."""
    return "sequential" if timings["sequential"] < timings["packed"] else "packed"


def _a_duration(value: object) -> bool:
    """Whether a cached timing is a duration in seconds: a finite number above zero (JSON
    admits NaN and Infinity, and a NaN compares false with everything, so it would
    silently keep packed)."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


class PathCache:
    """The per-machine file of earlier measurements, ``{key: {timings_s, measured_at}}``.
    A missing or unreadable file is an empty cache (it is rebuilt by measuring)."""

    def __init__(self, file: Path | None = None) -> None:
        self.file = file or default_cache_file()

    def _entries(self) -> dict[str, Any]:
        try:
            data = json.loads(self.file.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("format") != CACHE_FORMAT:
            return {}
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}

    def get(self, key: Mapping[str, Any]) -> dict[str, Any] | None:
        entry = self._entries().get(key_text(key))
        timings = entry.get("timings_s") if isinstance(entry, dict) else None
        if not isinstance(timings, dict) or not all(_a_duration(timings.get(p)) for p in PATHS):
            return None  # a hand-edited or damaged entry: measured again, never compared
        return entry

    def put(self, key: Mapping[str, Any], timings: Timings, measured_at: str) -> None:
        entries = self._entries()
        entries[key_text(key)] = {"timings_s": dict(timings), "measured_at": measured_at}
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            with atomic_open(self.file, "w") as fh:
                json.dump({"format": CACHE_FORMAT, "entries": entries}, fh, indent=1)
        except OSError:
            pass  # a read-only home: the choice stands, the next sweep measures again


def choose_path(
    config: RunConfig,
    *,
    cache: PathCache | None = None,
    measure: Measure | None = None,
) -> PathChoice:
    """The faster of packed and sequential for ``config`` (resolved) on this machine:
    from the cache, else measured (:func:`measure_paths`, or ``measure``) and cached."""
    cache = cache or PathCache()
    key = calibration_key(config)
    hit = cache.get(key)
    if hit is not None:
        timings = {p: float(hit["timings_s"][p]) for p in PATHS}
        return PathChoice(faster_path(timings), "cache", timings, key, hit.get("measured_at"))
    timings = (measure or measure_paths)(config)
    if timings is None:
        return PathChoice(
            "sequential", "not packable", key=key, reason="the method or model cannot pack"
        )
    timings = {p: float(timings[p]) for p in PATHS}
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    cache.put(key, timings, stamp)
    return PathChoice(faster_path(timings), "measured", timings, key, stamp)


def measure_paths(
    config: RunConfig,
    steps: int = DEFAULT_STEPS,
    repeats: int = DEFAULT_REPEATS,
    data: ImageData | None = None,
    budget_s: float = BUDGET_S,
) -> dict[str, float] | None:
    """Seconds for every party of one round to take ``steps`` SGD steps, per path: the
    fastest of ``repeats`` or more alternating measurements (up to :data:`MAX_REPEATS`
    while they took under ``budget_s`` in all) after one warm-up step per path.
    None where packed execution does not apply (the method or model cannot pack).

    Runs at the config's torch threads (restored afterwards): the trials' own.  ``data``:
    the data set already loaded (else loaded here)."""
    threads_before = torch.get_num_threads()
    try:
        with warnings.catch_warnings():
            # the run's own notices (inert settings, packing fallback) are the trials' to say
            warnings.simplefilter("ignore")
            run = FederatedRun(replace(config, execution="packed", checkpoint_every=0), data)
            if not isinstance(run.trainer, PackedTrainer):
                return None
            trainers = {
                "packed": run.trainer,
                "sequential": local_trainer(
                    replace(run.config, execution="sequential"),
                    run.algorithm,
                    run.own,
                    run.global_model,
                    run.spec,
                    run.augmenter,
                    run.data.train_x,
                    run.data.train_y,
                    run.feature_skew,
                ),
            }
            for trainer in trainers.values():  # warm-up: allocations, kernel choice
                _train(run, trainer, 1)
            best = {p: float("inf") for p in PATHS}
            spent, done = 0.0, 0
            while done < repeats or (done < MAX_REPEATS and spent < budget_s):
                for path in PATHS:
                    began = time.perf_counter()
                    _train(run, trainers[path], steps)
                    took = time.perf_counter() - began
                    best[path] = min(best[path], took)
                    spent += took
                done += 1
            return best
    finally:
        torch.set_num_threads(threads_before)


def _train(run: FederatedRun, trainer: LocalTrainer, steps: int) -> None:
    """One round's drawn parties, ``steps`` steps each, through ``trainer``; the run's
    weights and party states are not changed (no contribution is combined)."""
    parties = run.draw_parties()
    plan = draw_batches(
        parties,
        run.party_sizes,
        run.data.offsets,
        run.augmenter,
        run.config.batch_size,
        1,
        torch.Generator().manual_seed(0),
        run.data.rows,
    )
    plan = [limited(p, steps) for p in plan]
    jobs = [
        LocalJob(
            party=party,
            round_index=0,
            model=run.global_model,
            global_model=run.global_model,
            state=dict(run.party_states[party]),
            num_samples=run.party_sizes[party],
            device=run.device,
            server=run.server_state,
        )
        for party in parties
    ]
    # the sequential path trains a party only when asked for the next: consume them all
    list(trainer.train(jobs, plan))
