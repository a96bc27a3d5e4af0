"""The round loop: one federated run, in memory, round by round.

One round (docs/architecture.md, "The round"): draw ``max(1, round(N·fraction))``
parties with the run's ``sampling`` stream (all of them for personal-model methods such
as SOLO); each drawn party copies the global model and trains E local epochs on the
round's batch plan through the run's local trainer (:mod:`federated.execution`: packed,
sequential or reference, chosen once; this loop does not know which) and, in the drawn
order, hands its :class:`Contribution` (weights, |D_i|-share, step count, extras) to the
algorithm's aggregator; the server
optimizer turns the aggregator's combined state into the next global model (unless
the method keeps none); the global model — or each party's own, for SOLO — is
evaluated on the test set.  The row's keys are documented in
:mod:`federated.engine.round_row`.

The pieces, one job each: :class:`~federated.engine.party_data.PartyData` lays the data out on
the device, :class:`~federated.engine.round_row.RoundRow` is the row,
:mod:`federated.engine.run_state` says which checkpoints fit, and this module runs rounds.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from federated.algorithms import Contribution, LocalJob
from federated.config.data_checks import checked_against, load_checked_data
from federated.config.inert_settings import inert_settings
from federated.config.run_config import RunConfig
from federated.data import Augmenter, ImageData
from federated.engine.party_data import PartyData
from federated.engine.party_draw import draw_parties
from federated.engine.party_store import PartyArchive, PartyStates
from federated.engine.round_hooks import round_hooks
from federated.engine.round_row import RoundRow, work_columns
from federated.engine.run_state import (
    EXECUTION_FIELDS,
    STATE_FORMAT,
    check_compatible,
    tree_to,
    unreadable_format,
)
from federated.evaluation.party_scores import PartyScorer
from federated.evaluation.representations import RepresentationProbe
from federated.evaluation.round_evaluation import RoundEvaluation
from federated.evaluation.validation import SplitEvaluator
from federated.execution.batch_plan import PartyBatches, draw_batches, limited, rotated
from federated.execution.choice import PackingFallback, local_trainer
from federated.execution.packed import PackedTrainer
from federated.execution.trainer import PartyResult
from federated.heterogeneity.feature_skew import FeatureSkew
from federated.heterogeneity.system import RoundWork, draw_round_work
from federated.models import build_model
from federated.models.party_memory import memory_budget, spill_folder
from federated.models.pretrained_start import StartNotice, apply_start
from federated.registry import load_method
from federated.runtime.allocator import keep_freed_memory
from federated.runtime.device import resolve_device, set_threads
from federated.runtime.precision import precision_for_run
from federated.runtime.seeding import RunRandomness, stream_seed
from federated.server import aggregation_weights
from federated.tasks.base import Scores, build_task

NAN = float("nan")

__all__ = ["EXECUTION_FIELDS", "STATE_FORMAT", "FederatedRun", "PackingFallback", "run_rounds"]


class FederatedRun:
    """A federated run in memory: set up once, then :meth:`run_round` per round.

    Where state lives: the global model and the algorithm's server state
    (``server_state``) on the run's device; the server optimizer's own state (FedAvgM's
    velocity, FedAdam's moments) in the optimizer; each party's state
    (``party_states[i]``) on the CPU between its local trainings, in memory up to
    ``party_memory_mib`` and on disk beyond it (:class:`PartyStates`); random streams
    in ``rng``.  :meth:`state_dict` saves all of them.
    """

    def __init__(self, config: RunConfig, data: ImageData | None = None) -> None:
        config = config.resolved()  # values checked (no I/O); a complete one as it is
        set_threads(config.threads)
        keep_freed_memory()
        self.device = resolve_device(config.device)
        # bf16-mixed on a device without bfloat16: refused before any data load
        precision_for_run(config.precision, self.device)
        if data is None:
            data = load_checked_data(config)
        # the one check of the config against its data and model, before anything else
        config = checked_against(config, data.spec)
        self.config = config
        self.spec = data.spec
        self.task = build_task(config.task, config.task_params, self.spec)
        self.data = PartyData(data, config, self.device)
        self.global_model = self._initial_model(config)
        # the streams after the model: the init stream's draws come first
        self.rng = RunRandomness.from_seed(config.seed)

        self.algorithm = load_method("algorithm", config.algorithm)(config, self.rng.algorithm)
        # what each party keeps, on the real model (a rule it refutes is refused here)
        self.own = self.algorithm.own_state.for_run(
            self.global_model, self.algorithm.params, config
        )
        self.server_state = self.algorithm.init_server_state(self.global_model)
        self.server = load_method("server_optimizer", config.server_optimizer)(config)
        self.party_states = PartyStates(
            [self._initial_party_state(i) for i in range(config.n_parties)],
            memory_budget(config.party_memory_mib),
            spill_folder(config.party_state_dir),
        )
        self.augmenter = Augmenter(self.spec, self.device)
        self.feature_skew = FeatureSkew.from_config(config)
        self._measure_model()

        self.round = 0
        self.diverged = False
        self.cum_bytes = 0
        self.trainer = local_trainer(
            config,
            self.algorithm,
            self.own,
            self.global_model,
            self.spec,
            self.augmenter,
            self.data.train_x,
            self.data.train_y,
            self.feature_skew,
            self.data.records,
        )
        self.evaluation = RoundEvaluation.for_run(
            config, self.data, self.task, self.augmenter, self.rng.evaluation
        )
        # the cross-cutting features (DP, the probe, the store's pinning): hooks on the
        # round, built from the config in one place (federated/engine/round_hooks.py)
        self.hooks = round_hooks(
            config,
            self.rng,
            self.evaluation.probe,
            self.party_states,
            self.global_model,
            self._float_keys,
            self.party_sizes,
        )

    def _initial_model(self, config: RunConfig) -> torch.nn.Module:
        """The global model before round 1: built from the ``init`` stream, then the
        configured start (``init``) applied; on the run's device, without gradients."""
        torch.manual_seed(stream_seed(config.seed, "init"))
        model = build_model(
            config.model,
            self.spec,
            config.out_dim,
            config.projection_head,
            outputs=self.task.head_size(self.spec),
        )
        if config.init is not None:
            # after the init stream's draws, drawing none itself: every other random
            # number of the run is as without a start; a resumed run's restored weights
            # replace it (load_state_dict)
            notice = apply_start(model, config.init, config.model)
            if notice is not None:
                # stacklevel 3: the line that built the run (FederatedRun(...))
                warnings.warn(notice, StartNotice, stacklevel=3)
        return model.to(self.device).requires_grad_(False)

    def _initial_party_state(self, party: int) -> dict[str, Any]:
        """Party ``party``'s state before its first round: its own state's keys (what
        ``own_state`` keeps) and the method's."""
        own = self.own.initial()
        method = self.algorithm.init_party_state(party)
        clash = sorted(set(own) & set(method))
        if clash:
            raise ValueError(
                f"algorithm {self.config.algorithm}'s init_party_state uses {clash}, the "
                "keys of the state its own_state keeps: name its own entries otherwise"
            )
        return {**own, **method}

    def _measure_model(self) -> None:
        """The global model's entries the server optimizer moves (floating point) and
        those it copies, and the bytes a party is sent."""
        state = self.global_model.state_dict()
        # the one place the server is told what it never moves: what each party keeps
        # (and BatchNorm's counters); DP-FedAvg clips and noises what is left
        moved = {k: v for k, v in state.items() if k not in self.own.server_skips}
        self._float_keys = [k for k, v in moved.items() if v.is_floating_point()]
        self._other_keys = [k for k, v in moved.items() if not v.is_floating_point()]
        self.model_bytes = sum(v.numel() * v.element_size() for v in state.values())
        # what travels: the model less the entries the method keeps at the party
        self.shared_bytes = self.model_bytes - self.own.kept_bytes(self.global_model)
        self.param_bytes = sum(p.numel() * p.element_size() for p in self.global_model.parameters())

    # ----------------------------------------------------------------- data (views)
    @property
    def partition(self) -> list[np.ndarray]:
        return self.data.partition

    @property
    def class_counts(self) -> np.ndarray:
        return self.data.class_counts

    @property
    def party_sizes(self) -> list[int]:
        return self.data.party_sizes

    @property
    def train_x(self) -> torch.Tensor:
        return self.data.train_x

    @property
    def train_y(self) -> torch.Tensor:
        return self.data.train_y

    @property
    def test_x(self) -> torch.Tensor:
        return self.data.test_x

    @property
    def test_y(self) -> torch.Tensor:
        return self.data.test_y

    def party_data(self, party: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.data.party(party)

    @property
    def finished(self) -> bool:
        return self.diverged or self.round >= self.config.rounds

    # ------------------------------------------------------------------------ rounds
    def draw_parties(self) -> list[int]:
        """This round's parties, sorted (``party_sampling``,
        :mod:`federated.engine.party_draw`); all of them for personal models or fraction 1."""
        c = self.config
        if self.own.trains_alone:
            return list(range(c.n_parties))
        return draw_parties(
            c.party_sampling,
            c.seed,
            self.round,
            c.n_parties,
            c.parties_per_round,
            self.rng.sampling,
        )

    @property
    def spreads_packs(self) -> bool:
        """Whether idle cores can train this run's packs side by side: the packed path
        on one torch thread (:meth:`use_idle_cores`)."""
        return isinstance(self.trainer, PackedTrainer) and self.config.threads == 1

    def use_idle_cores(self, threads: int) -> bool:
        """Train the next rounds' packs on ``threads`` threads at once (1: one after
        another; :mod:`federated.execution.packed`, "Packs side by side"): results are
        the same, only the wall time changes.  False, and nothing changes, where the run
        has nothing to spread (:attr:`spreads_packs`)."""
        if not self.spreads_packs:
            return False
        self.trainer.pack_threads = max(1, threads)
        return True

    def run_round(self) -> dict[str, Any]:
        """Run the next round and return its metrics row."""
        if self.finished:
            raise RuntimeError(f"run already finished at round {self.round}")
        row = self._round(time.perf_counter())
        self.cum_bytes = row.cum_bytes
        self.diverged = row.diverged
        self.round += 1
        return row.as_dict()

    def _round_plan(self, drawn: list[int]) -> tuple[RoundWork, list[PartyBatches]]:
        """This round's work and the batch plans of the parties that train.  Every drawn
        party's plan is drawn in full first, so stragglers and dropouts change no other
        party's batches; then the ``system`` stream cuts work and picks who reports."""
        config = self.config
        plan = draw_batches(
            drawn,
            self.party_sizes,
            self.data.offsets,
            self.augmenter,
            config.batch_size,
            config.local_epochs,
            self.rng.batches,
            self.data.rows,
        )
        work = draw_round_work(
            drawn,
            [p.steps for p in plan],
            [p.steps // config.local_epochs for p in plan],
            config,
            self.rng.system,
        )
        by_party = {p.party: p for p in plan}
        trained = []
        for party in work.reporting:
            batches = limited(by_party[party], work.step_limit.get(party))
            if self.feature_skew is not None:
                batches = rotated(batches, self.feature_skew.angle(party))
            trained.append(batches)
        return work, trained

    def _local_trainings(
        self, parties: list[int], plan: list[PartyBatches]
    ) -> Iterator[tuple[LocalJob, PartyResult]]:
        """Each party's finished local training on its plan, in the given order (the
        trainer sets each job's model)."""
        jobs = [
            LocalJob(
                party=party,
                round_index=self.round,
                model=self.global_model,
                global_model=self.global_model,
                state=self.party_states[party],
                num_samples=self.party_sizes[party],
                device=self.device,
                server=self.server_state,
            )
            for party in parties
        ]
        return self.trainer.train(jobs, plan)

    # what the run's files, checkpoints and rounds read of its evaluation
    @property
    def probe(self) -> RepresentationProbe | None:
        return self.evaluation.probe

    @property
    def party_scorer(self) -> PartyScorer:
        return self.evaluation.party_scorer

    @property
    def validator(self) -> SplitEvaluator | None:
        return self.evaluation.validator

    @property
    def local_tester(self) -> SplitEvaluator | None:
        return self.evaluation.local_tester

    @property
    def last_validation(self) -> tuple[int, Scores] | None:
        return self.evaluation.last_validation

    @property
    def local_test_metrics(self) -> dict[str, np.ndarray]:
        return self.evaluation.local_test_metrics

    def validation_columns(self) -> dict[str, float]:
        """The row's validation columns (:meth:`RoundEvaluation.validation_columns`)."""
        return self.evaluation.validation_columns()

    def _party_model(self, party: int) -> torch.nn.Module | None:
        """The model party ``party`` is evaluated with (None: the global model): one of
        the method's own making, else the one its own state gives."""
        state = self.party_states[party]
        model = self.algorithm.party_model(party, self.global_model, state)
        return self.own.evaluated(self.global_model, state) if model is None else model

    def _round(self, start: float) -> RoundRow:
        drawn = self.draw_parties()
        work, plan = self._round_plan(drawn)
        reporting = work.reporting
        row = RoundRow(
            round=self.round + 1,
            parties=len(drawn),
            results=[],
            execution_path=self.trainer.path,
            precision=self.config.precision,
        )
        row.cum_bytes = self.cum_bytes
        self.hooks.before_round(reporting)
        try:
            return self._trained_round(row, work, plan, start)
        finally:
            self.hooks.after_round(reporting)

    def _trained_round(
        self, row: RoundRow, work: RoundWork, plan: list[PartyBatches], start: float
    ) -> RoundRow:
        """The round's local trainings, aggregation, server step and evaluation."""
        reporting = work.reporting
        self.global_model.eval()
        weights = aggregation_weights([self.party_sizes[i] for i in reporting])
        # both execution paths hand their contributions to this one aggregator, so a
        # hook's wrapper (DP-FedAvg's clipping) applies to either
        aggregator = self.hooks.aggregator(
            lambda: self.algorithm.aggregator(self.server_state, self.global_model)
        )
        jobs: list[LocalJob] = []
        hook_seconds = 0.0  # the hooks' own work (the probe's forward passes)
        for (job, result), weight in zip(self._local_trainings(reporting, plan), weights):
            extras = self.algorithm.end_local(job)
            self.own.finish(job.model, job.state, job.personal)
            jobs.append(job)
            row.results.append(result)
            if not result.finite:
                return self._diverged(row, start)
            hook_seconds += self.hooks.after_local(job, row.round, len(jobs) - 1)
            aggregator.add(
                Contribution(
                    party=job.party,
                    weights=job.model.state_dict(),
                    weight=weight,
                    num_samples=job.num_samples,
                    steps=result.steps,
                    extras=extras,
                )
            )
        # a round where nobody reported leaves the global model as it was, unless the
        # aggregator releases one anyway (DP under Poisson sampling: noise alone)
        combined = aggregator.result() if jobs or aggregator.releases_empty else None
        if combined is not None:
            self._server_step(combined)
        self.hooks.after_server_step(self.global_model)
        released = self.hooks.row_fields()
        row.extra.update(released)
        row.extra.update(work_columns(work, row.results))
        if self.config.partition_by:
            # what ran: the natural parties left out under the size floor are in no
            # round (partitions.json names them; docs/heterogeneity.md)
            row.extra["left_out_parties"] = len(self.spec.left_out_parties)
        row.train_seconds = time.perf_counter() - start - hook_seconds
        # cores beyond the trial's own that its packs used (use_idle_cores)
        row.extra["spare_core_seconds"] = self.trainer.spare_core_seconds

        t = time.perf_counter()
        results = self.evaluation.evaluate(
            row.round, self.global_model, reporting, self._party_model
        )
        row.test = results.test
        row.eval_seconds = time.perf_counter() - t
        if results.diverged:
            return self._diverged(row, start, released)
        row.extra.update(results.columns)
        row.extra.update(self.validation_columns())
        row.extra.update(self.party_scorer.columns(row.round))
        down, up = self.algorithm.bytes_per_party(self.shared_bytes, self.param_bytes)
        # every drawn party was sent the model; only those that report send one back
        row.bytes_down, row.bytes_up = row.parties * down, len(reporting) * up
        row.cum_bytes += row.bytes_up + row.bytes_down
        row.extra.update(self.algorithm.round_metrics(jobs, self.server_state))
        row.round_seconds = time.perf_counter() - start
        return row

    def _server_step(self, combined: dict[str, torch.Tensor]) -> None:
        """The server optimizer moves the global model's floating-point state towards
        ``combined``; other entries take the combined value; the entries the parties
        keep and BatchNorm's counters stay as they are (:meth:`_measure_model`)."""
        state = self.global_model.state_dict()
        self.server.step(
            [state[k] for k in self._float_keys], [combined[k] for k in self._float_keys]
        )
        for k in self._other_keys:
            state[k].copy_(combined[k])

    def _diverged(
        self, row: RoundRow, start: float, released: dict[str, Any] | None = None
    ) -> RoundRow:
        """The row of a round that diverged; ``released``: the hooks' columns of a round
        whose model was released before it diverged (its epsilon was spent)."""
        return RoundRow(
            round=row.round,
            parties=row.parties,
            results=row.results,
            test=self.task.no_scores(),
            round_seconds=time.perf_counter() - start,
            cum_bytes=self.cum_bytes,
            diverged=True,
            execution_path=row.execution_path,
            precision=row.precision,
            # every metric key the run's other rows carry, NaN: a sweep's ranking metric
            # is in every row (Tune's strict check), and NaN is never read as a value
            extra={
                **self.evaluation.no_validation_columns(),
                **self.evaluation.no_fairness_columns(),
                **(released or {}),
            },
        )

    # -------------------------------------------------------------------- state I/O
    def state_dict(self, archive: PartyArchive | None = None) -> dict[str, Any]:
        """Everything needed to continue the run exactly (CPU tensors and plain values).

        With ``archive`` (a checkpoint) the parties' states changed since the last
        checkpoint are written there and the state holds their index
        (:meth:`PartyStates.checkpoint`); without, it holds every party's state."""
        parties = (
            list(self.party_states)
            if archive is None
            else self.party_states.checkpoint(archive, self.round)
        )
        return {
            "format": STATE_FORMAT,
            "config": self.config.to_dict(),
            "round": self.round,
            "diverged": self.diverged,
            "cum_bytes": self.cum_bytes,
            "global": tree_to(self.global_model.state_dict(), "cpu"),
            "server": self.server.state_dict(),
            "algorithm": tree_to(self.server_state, "cpu"),
            "parties": parties,
            "rng": self.rng.state_dict(),
            "validation": validation_state(self.last_validation),
            # the hooks' own (DP: the accountant and adaptive clipping's norm)
            **self.hooks.state_for_checkpoint(),
        }

    def load_state_dict(self, state: dict[str, Any], archive: PartyArchive | None = None) -> None:
        """Continue from ``state`` (:meth:`state_dict`); ``archive`` holds the parties'
        states a checkpoint indexes."""
        if state.get("format") != STATE_FORMAT:
            raise ValueError(unreadable_format(state.get("format")))
        check_compatible(state["config"], self.config)
        self.round = state["round"]
        self.diverged = state["diverged"]
        self.cum_bytes = state["cum_bytes"]
        self.global_model.load_state_dict(state["global"])
        self.server.load_state_dict(state["server"])
        self.server_state = tree_to(state["algorithm"], self.device)
        parties = state["parties"]
        if isinstance(parties, list):
            self.party_states.replace(parties)
        elif archive is None:
            raise ValueError("checkpoint indexes its parties' states in an archive: none given")
        else:
            self.party_states.restore(parties, archive)
        self.rng.load_state_dict(state["rng"])
        # a checkpoint from before federated evaluation holds none (nor did its run)
        self.evaluation.last_validation = validation_from_state(state.get("validation"))
        # check_compatible above held the config equal: the checkpoint's hooks are these
        self.hooks.restore(state)


def validation_state(last: tuple[int, Scores] | None) -> dict[str, Any] | None:
    """The latest validation as plain values (checkpoints load with weights_only)."""
    if last is None:
        return None
    round_number, scores = last
    return {
        "round": round_number,
        "values": dict(scores.values),
        "party_values": {k: v.tolist() for k, v in scores.party_values.items()},
        "parties": scores.parties,
    }


def validation_from_state(state: dict[str, Any] | None) -> tuple[int, Scores] | None:
    """Inverse of :func:`validation_state`; also reads checkpoints written before tasks
    were objects (``acc``, ``loss``, ``party_acc``, ``party_loss``, ``metrics``,
    ``party_metrics``), so older runs resume."""
    if state is None:
        return None
    if "values" in state:
        values, party_values = dict(state["values"]), dict(state["party_values"])
    else:
        values = {"acc": state["acc"], "loss": state["loss"], **state.get("metrics", {})}
        party_values = {
            "acc": state["party_acc"],
            "loss": state["party_loss"],
            **state.get("party_metrics", {}),
        }
    scores = Scores(
        values=values,
        party_values={k: np.asarray(v, dtype=np.float64) for k, v in party_values.items()},
        parties=state["parties"],
    )
    return state["round"], scores


def run_rounds(config: RunConfig, data: ImageData | None = None) -> Iterator[dict[str, Any]]:
    """Yield one metrics row per round until ``config.rounds`` or divergence.

    Settings that have no effect on this run are warned about (``UserWarning``)."""
    run = FederatedRun(config, data)  # checked against its data before anything trains
    for line in inert_settings(run.config):
        warnings.warn(line.removeprefix("warning: "), UserWarning, stacklevel=2)
    while not run.finished:
        yield run.run_round()
