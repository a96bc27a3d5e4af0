"""The federated round loop, usable without Ray.

:func:`run_rounds` takes a :class:`~federated.config.RunConfig` and yields one metrics
dict per round.  :class:`FederatedRun` is the same loop as an object that advances one
round at a time and can save and restore its whole state (the Tune trainable uses it
for checkpoints).

One round (DESIGN.md, "The round loop"): draw ``max(1, round(N·fraction))`` parties with
the run's seeded generator; each drawn party starts from the global model, trains E
local epochs under its method's objective, and is folded into a running weighted
average with weight |D_i| / sum of drawn |D_j|; the server rule (plain average or
FedAvgM) turns the average into the next global model; the global model is evaluated
on the whole test set.

Per-round metrics (one row per round, keys stable across rounds of a run):

==================== ========================================================
``round``            1-based round number (equals Tune's training_iteration)
``test_acc``         global model's top-1 test accuracy, fraction in [0, 1]
``test_loss``        global model's mean test cross-entropy
``train_loss``       mean over drawn parties of their mean batch cross-entropy
``con_loss``         same for MOON's contrastive term (NaN where not computed)
``<part>_loss``      any other loss part a method logs (``prox``, ``l2``)
``parties_this_round``, ``samples_this_round`` (samples trained, per epoch counted)
``train_seconds``    local training + aggregation; ``eval_seconds``; ``round_seconds``
``samples_per_second`` samples_this_round / train_seconds
``bytes_up``, ``bytes_down``, ``cum_bytes``  payload bytes (model state + method extras)
``diverged``         True on the round whose loss became NaN/inf; the run stops there
==================== ========================================================

plus what the method adds (``tau_end``, ``c_global_norm``, ...); SOLO adds
``test_acc_std`` and ``party_acc/<i>``.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from federated.algorithms import ALGORITHMS, LocalJob
from federated.allocator import keep_freed_memory
from federated.config import RunConfig
from federated.data import Augmenter, ImageData, load_dataset
from federated.device import resolve_device, set_threads
from federated.evaluation import evaluate
from federated.local_training import PartyResult, train_party
from federated.models import build_model
from federated.partition import class_counts, partition_for_run
from federated.seeding import RunRandomness, stream_seed
from federated.server import SERVER_OPTIMIZERS, WeightedAverage, aggregation_weights

STATE_FORMAT = 1

# Fields that do not change a run's results on a given device: a checkpoint may be
# restored under different values of these.  (eval_batch_size moves only the last bits
# of test_loss, a float32 sum over evaluation batches; test_acc is exact.)
EXECUTION_FIELDS = frozenset(
    {"device", "threads", "eval_batch_size", "checkpoint_every", "fail_at_round", "data_root"}
)


class FederatedRun:
    """A federated run in memory: set up once, then :meth:`run_round` per round."""

    def __init__(self, config: RunConfig, data: ImageData | None = None) -> None:
        self.config = config
        set_threads(config.threads)
        keep_freed_memory()
        self.device = resolve_device(config.device)
        if data is None:
            data = load_dataset(
                config.dataset,
                config.data_root,
                image_size=config.image_size,
                holdout_fraction=config.holdout_fraction,
            )
        self.spec = data.spec
        self._setup_data(data)

        torch.manual_seed(stream_seed(config.seed, "init"))
        model = build_model(config.model, self.spec, config.out_dim, config.projection_head)
        self.global_model = model.to(self.device).requires_grad_(False)
        self.local_model = copy.deepcopy(self.global_model).requires_grad_(True)
        self.rng = RunRandomness.from_seed(config.seed)

        self.algorithm = ALGORITHMS[config.algorithm](config, self.rng.algorithm)
        self.algorithm.init_server_state(self.global_model)
        self.server = SERVER_OPTIMIZERS[config.server_optimizer](config)
        self.party_states = [self.algorithm.init_party_state(i) for i in range(config.n_parties)]
        self.augmenter = Augmenter(self.spec, self.device)

        state = self.global_model.state_dict()
        self._float_keys = [k for k, v in state.items() if v.is_floating_point()]
        self._other_keys = [k for k, v in state.items() if not v.is_floating_point()]
        self.model_bytes = sum(v.numel() * v.element_size() for v in state.values())
        self.param_bytes = sum(p.numel() * p.element_size() for p in self.global_model.parameters())

        self.round = 0
        self.diverged = False
        self.cum_bytes = 0

    # ------------------------------------------------------------------------ set-up
    def _setup_data(self, data: ImageData) -> None:
        """Subset, partition, and lay the training set out party by party on the device."""
        c = self.config
        labels = data.train_y.numpy()
        #: per party, indices into the dataset's full training set
        parties = None if data.train_parties is None else data.train_parties.numpy()
        self.partition = partition_for_run(labels, c, parties)
        self.class_counts = class_counts(self.partition, labels, self.spec.n_classes)
        parts = self.partition
        sizes = [len(p) for p in parts]
        self.party_sizes = sizes
        self._offsets = np.concatenate([[0], np.cumsum(sizes)]).tolist()
        # Party i's samples are the contiguous rows [offset_i, offset_{i+1}): no copy per party.
        order = torch.from_numpy(np.concatenate(self.partition))
        self.train_x = data.train_x[order].to(self.device)
        self.train_y = data.train_y[order].to(self.device)

        n_test = c.n_test
        test_idx = torch.arange(data.test_y.shape[0])
        if n_test < len(test_idx):  # a fixed subset: every seed and method sees the same images
            test_idx = torch.randperm(len(test_idx), generator=torch.Generator().manual_seed(0))
            test_idx = test_idx[:n_test].sort().values
        self.test_x = data.test_x[test_idx].to(self.device)
        self.test_y = data.test_y[test_idx].to(self.device)

    def party_data(self, party: int) -> tuple[torch.Tensor, torch.Tensor]:
        lo, hi = self._offsets[party], self._offsets[party + 1]
        return self.train_x[lo:hi], self.train_y[lo:hi]

    @property
    def finished(self) -> bool:
        return self.diverged or self.round >= self.config.rounds

    # ------------------------------------------------------------------------ rounds
    def draw_parties(self) -> list[int]:
        """This round's parties, sorted; all of them for SOLO or fraction 1."""
        n = self.config.n_parties
        k = self.config.parties_per_round
        if self.algorithm.personal_models or k >= n:
            return list(range(n))
        return sorted(int(i) for i in self.rng.sampling.choice(n, size=k, replace=False))

    def run_round(self) -> dict[str, Any]:
        """Run the next round and return its metrics row."""
        if self.finished:
            raise RuntimeError(f"run already finished at round {self.round}")
        start = time.perf_counter()
        drawn = self.draw_parties()
        if self.algorithm.personal_models:
            row = self._personal_round(drawn, start)
        else:
            row = self._federated_round(drawn, start)
        self.round += 1
        return row

    def _train(self, party: int, from_global: bool = True) -> tuple[LocalJob, PartyResult]:
        if from_global:
            self.local_model.load_state_dict(self.global_model.state_dict())
        images, labels = self.party_data(party)
        job = LocalJob(
            party=party,
            round_index=self.round,
            model=self.local_model,
            global_model=self.global_model,
            state=self.party_states[party],
            num_samples=labels.shape[0],
            device=self.device,
        )
        self.algorithm.begin_local(job)
        result = train_party(
            job, self.algorithm, images, labels, self.augmenter, self.config, self.rng.batches
        )
        return job, result

    def _federated_round(self, drawn: list[int], start: float) -> dict[str, Any]:
        self.global_model.eval()
        weights = aggregation_weights([self.party_sizes[i] for i in drawn])
        average = WeightedAverage(self.global_model.state_dict())
        jobs: list[LocalJob] = []
        results: list[PartyResult] = []
        for party, weight in zip(drawn, weights):
            job, result = self._train(party)
            sent = self.algorithm.end_local(job)
            jobs.append(job)
            results.append(result)
            if not result.finite:
                return self._diverged_row(drawn, results, start)
            average.add(self.local_model.state_dict(), weight)
            self.algorithm.receive(job, sent, weight)

        new_state = average.result()
        state = self.global_model.state_dict()
        self.server.step(
            [state[k] for k in self._float_keys], [new_state[k] for k in self._float_keys]
        )
        for k in self._other_keys:
            state[k].copy_(new_state[k])
        self.algorithm.finish_round(self.global_model)
        train_seconds = time.perf_counter() - start

        eval_start = time.perf_counter()
        test_acc, test_loss = evaluate(
            self.global_model, self.test_x, self.test_y, self.augmenter, self.config.eval_batch_size
        )
        eval_seconds = time.perf_counter() - eval_start
        if not math.isfinite(test_loss):
            return self._diverged_row(drawn, results, start)

        down, up = self.algorithm.extra_bytes_per_party(self.param_bytes)
        bytes_down = len(drawn) * (self.model_bytes + down)
        bytes_up = len(drawn) * (self.model_bytes + up)
        return self._row(
            drawn,
            results,
            start,
            train_seconds,
            eval_seconds,
            test_acc,
            test_loss,
            bytes_up,
            bytes_down,
            self.algorithm.round_metrics(jobs),
        )

    def _personal_round(self, drawn: list[int], start: float) -> dict[str, Any]:
        """SOLO: every party trains its own model; each is evaluated on the test set."""
        results, jobs, accs, losses = [], [], [], []
        train_seconds = eval_seconds = 0.0
        for party in drawn:
            t = time.perf_counter()
            job, result = self._train(party)
            self.algorithm.end_local(job)
            train_seconds += time.perf_counter() - t
            jobs.append(job)
            results.append(result)
            if not result.finite:
                return self._diverged_row(drawn, results, start)
            t = time.perf_counter()
            acc, loss = evaluate(
                self.local_model,
                self.test_x,
                self.test_y,
                self.augmenter,
                self.config.eval_batch_size,
            )
            eval_seconds += time.perf_counter() - t
            accs.append(acc)
            losses.append(loss)
        extra = {
            "test_acc_std": float(np.std(accs)),
            **{f"party_acc/{p}": a for p, a in zip(drawn, accs)},
            **self.algorithm.round_metrics(jobs),
        }
        return self._row(
            drawn,
            results,
            start,
            train_seconds,
            eval_seconds,
            float(np.mean(accs)),
            float(np.mean(losses)),
            0,
            0,
            extra,
        )

    # ----------------------------------------------------------------------- metrics
    def _loss_columns(self, results: list[PartyResult]) -> dict[str, float]:
        keys = {"ce", "con"} | {k for r in results for k in r.losses}
        out = {}
        for key in sorted(keys):
            values = [r.losses[key] for r in results if key in r.losses]
            name = {"ce": "train_loss", "con": "con_loss"}.get(key, f"{key}_loss")
            out[name] = float(np.mean(values)) if values else float("nan")
        return out

    def _row(
        self,
        drawn: list[int],
        results: list[PartyResult],
        start: float,
        train_seconds: float,
        eval_seconds: float,
        test_acc: float,
        test_loss: float,
        bytes_up: int,
        bytes_down: int,
        extra: dict[str, float],
    ) -> dict[str, Any]:
        samples = sum(r.samples for r in results)
        self.cum_bytes += bytes_up + bytes_down
        return {
            "round": self.round + 1,
            "test_acc": test_acc,
            "test_loss": test_loss,
            **self._loss_columns(results),
            "parties_this_round": len(drawn),
            "samples_this_round": samples,
            "train_seconds": train_seconds,
            "eval_seconds": eval_seconds,
            "round_seconds": time.perf_counter() - start,
            "samples_per_second": samples / train_seconds if train_seconds > 0 else float("nan"),
            "bytes_up": bytes_up,
            "bytes_down": bytes_down,
            "cum_bytes": self.cum_bytes,
            "diverged": False,
            **extra,
        }

    def _diverged_row(
        self, drawn: list[int], results: list[PartyResult], start: float
    ) -> dict[str, Any]:
        self.diverged = True
        nan = float("nan")
        row = self._row(drawn, results, start, nan, nan, nan, nan, 0, 0, {})
        row["diverged"] = True
        return row

    # -------------------------------------------------------------------- state I/O
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the run exactly (CPU tensors and plain values)."""
        return {
            "format": STATE_FORMAT,
            "config": self.config.to_dict(),
            "round": self.round,
            "diverged": self.diverged,
            "cum_bytes": self.cum_bytes,
            "global": {
                k: v.detach().cpu().clone() for k, v in self.global_model.state_dict().items()
            },
            "server": self.server.state_dict(),
            "algorithm": self.algorithm.server_state_dict(),
            "parties": self.party_states,
            "rng": self.rng.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"unsupported run-state format {state.get('format')!r}")
        saved, mine = state["config"], self.config.to_dict()
        differing = sorted(k for k in mine if k not in EXECUTION_FIELDS and saved.get(k) != mine[k])
        if differing:
            k = differing[0]
            raise ValueError(
                f"checkpoint was made with {k}={saved.get(k)!r}, this run has {k}={mine[k]!r}"
            )
        self.round = state["round"]
        self.diverged = state["diverged"]
        self.cum_bytes = state["cum_bytes"]
        self.global_model.load_state_dict(state["global"])
        self.server.load_state_dict(state["server"])
        self.algorithm.load_server_state_dict(state["algorithm"])
        self.party_states = state["parties"]
        self.rng.load_state_dict(state["rng"])


def run_rounds(config: RunConfig, data: ImageData | None = None) -> Iterator[dict[str, Any]]:
    """Yield one metrics row per round until ``config.rounds`` or divergence."""
    run = FederatedRun(config, data)
    while not run.finished:
        yield run.run_round()
