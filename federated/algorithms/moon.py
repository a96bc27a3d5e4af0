"""MOON (Li, He, Song; CVPR 2021): model-contrastive federated learning.

Local objective per batch (§3.3, Appendix G, eq. 7)::

    l = CE(y_hat, y) + mu * l_con
    l_con = -log( e^{s_glob/tau} / (e^{s_glob/tau} + sum_j e^{s_prev_j/tau}) )
    s_glob = sim(z, z_glob),  s_prev_j = sim(z, z_prev_j)

with cosine similarity, ``z_glob`` from this round's frozen global model and
``z_prev_j`` from the party's own last ``k = prev_models`` local models.  Before a party
has trained once it has no previous model, hence no negative, and the contrastive term
is skipped (the reference code's first round gives it zero gradient).  With fewer than
k previous models (early rounds) the ones that exist are used, as the paper says.

Previous models are kept per party on the CPU (``state["prev"]``, oldest first) and are
registered as the job's frozen models once per local training (``job.frozen``: copied
to the device once, never once per batch; under packed execution all parties' previous
models run as one frozen packed network and the global model once on every party's
batch).  The temperature is a schedule object made per job
(:mod:`federated.algorithms.temperature`): fixed, or annealed for NEW-MOON.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from federated.algorithms.base import Algorithm, LocalJob, LossTerms, model_state_to_cpu
from federated.algorithms.party_own_state import OwnState
from federated.models import FedConModel, ModelOutput
from federated.params import (
    ConfigError,
    MethodParams,
    at_least,
    describe,
    non_negative,
    one_of,
    positive,
)
from federated.registry import TEMPERATURE_SCHEDULE_PATHS, load_method
from federated.runtime.precision import float32, full_precision

# where an annealed temperature lives: one local training, or the party's whole run
TAU_SCOPES = ("round", "run")


def contrastive_similarities(
    z: torch.Tensor, z_glob: torch.Tensor, z_prevs: list[torch.Tensor]
) -> torch.Tensor:
    """(B, 1 + k) cosine similarities: column 0 the positive pair, then each negative."""
    pos = F.cosine_similarity(z, z_glob, dim=-1)
    negs = [F.cosine_similarity(z, zp, dim=-1) for zp in z_prevs]
    return torch.stack([pos, *negs], dim=1)


def contrastive_loss_from_similarities(similarities: torch.Tensor, tau: float) -> torch.Tensor:
    """Mean over the batch of -log softmax(similarities / tau)[:, 0]."""
    target = torch.zeros(similarities.shape[0], dtype=torch.long, device=similarities.device)
    return F.cross_entropy(similarities / tau, target)


def moon_contrastive_loss(
    z: torch.Tensor, z_glob: torch.Tensor, z_prevs: list[torch.Tensor], tau: float
) -> torch.Tensor:
    """MOON's l_con (eq. 7), averaged over the batch."""
    return contrastive_loss_from_similarities(contrastive_similarities(z, z_glob, z_prevs), tau)


@dataclass(frozen=True)
class MoonParams(MethodParams):
    """MOON's parameters (their one declaration): ``mu`` and ``tau`` default to the
    paper's settings for the run (:meth:`resolved_default`)."""

    mu: float = field(
        default=1.0,
        metadata=describe(
            "weight of the contrastive term >= 0 (paper's best: 5 on cifar10, else 1)"
        ),
    )
    tau: float = field(
        default=0.5,
        metadata=describe("temperature > 0 (start value when annealed; then default 1.0)"),
    )
    tau_schedule: str = field(
        default="fixed", metadata=describe("temperature schedule, fixed or annealed")
    )
    tau_min: float = field(default=0.001, metadata=describe("annealed tau floor > 0"))
    tau_sigma: float = field(default=0.005, metadata=describe("annealed tau rate sigma >= 0"))
    tau_scope: str = field(
        default="round",
        metadata=describe("annealed tau restarts each local training (round) or carries on (run)"),
    )
    prev_models: int = field(
        default=1, metadata=describe("previous local models kept as negatives (k) >= 1")
    )

    # the MOON paper's best mu per dataset (§4.2); elsewhere its "reasonable choice
    # without tuning", mu = 1
    PAPER_MU: ClassVar[dict[str, float]] = {"cifar10": 5.0, "cifar100": 1.0, "tinyimagenet": 1.0}

    @classmethod
    def resolved_default(cls, name: str, values: Mapping[str, Any]) -> Any:
        if name == "mu":
            return cls.PAPER_MU.get(str(values.get("dataset")), cls.defaults()["mu"])
        if name == "tau":  # an annealed schedule starts hot (Li et al.'s NEW-MOON)
            return 1.0 if values.get("tau_schedule") == "annealed" else cls.defaults()["tau"]
        return super().resolved_default(name, values)

    def check(self) -> None:
        non_negative("mu", self.mu)
        positive("tau", self.tau)
        one_of("tau_schedule", self.tau_schedule, tuple(TEMPERATURE_SCHEDULE_PATHS))
        positive("tau_min", self.tau_min)
        non_negative("tau_sigma", self.tau_sigma)
        one_of("tau_scope", self.tau_scope, TAU_SCOPES)
        at_least("prev_models", self.prev_models, 1)
        if self.tau_schedule == "annealed" and self.tau < self.tau_min:
            raise ConfigError("tau", self.tau, f"a start temperature >= tau_min={self.tau_min}")

    def inert(self) -> dict[str, str]:
        if self.tau_schedule == "annealed":
            return {}
        why = "only tau_schedule=annealed anneals the temperature"
        return {name: why for name in ("tau_min", "tau_sigma", "tau_scope")}


def previous_models(params: MoonParams) -> float:
    """Model states a MOON party keeps: its ``prev_models`` previous models."""
    return float(params.prev_models)


class Moon(Algorithm):
    name = "moon"
    packable = True
    own_state = OwnState(state_copies=previous_models)
    dp_obstacle = None  # sends its weights only: its previous models stay at the party
    Params = MoonParams

    def init_party_state(self, party: int) -> dict:
        return {"prev": []}

    def packing_obstacle(self) -> str | None:
        if self.params.tau_schedule == "annealed":
            # its Metropolis coins come from the run's one algorithm stream, step by step
            # and party by party: parties side by side would draw them in another order
            return "MOON's annealed temperature draws random numbers while parties train"
        return None

    def begin_local(self, job: LocalJob) -> None:
        prev = job.state["prev"]
        job.frozen.register("prev", prev)
        job.info["negatives"] = len(prev)
        kind = load_method("tau_schedule", self.params.tau_schedule)
        schedule = kind(self.params, self.generator)
        schedule.begin(job.state)
        job.scratch["temperature"] = schedule

    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        ce = self.supervised_loss(out, y)
        if not job.info["negatives"]:
            return LossTerms(ce, {"ce": ce.detach()})
        # the similarities and l_con in float32 whatever the run's precision: cosines of
        # bfloat16 projections (8 mantissa bits) blur the margins tau = 0.5 divides
        with full_precision(job.device):
            z_glob = float32(job.frozen.global_projection(x))
            z_prevs = float32(job.frozen.projections("prev", x))
            similarities = contrastive_similarities(float32(out.projection), z_glob, z_prevs)
            tau = job.scratch["temperature"].value
            con = contrastive_loss_from_similarities(similarities, tau)
        job.scratch["similarities"] = similarities.detach()
        return LossTerms(ce + self.params.mu * con, {"ce": ce.detach(), "con": con.detach()})

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        if job.info["negatives"]:
            sims = job.scratch["similarities"]
            job.scratch["temperature"].observe(
                lambda: gradient_norm(job.model),
                lambda t: float(contrastive_loss_from_similarities(sims, t)),
            )
        return {}

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        job.info.update(job.scratch["temperature"].end(job.state))
        prev = job.state["prev"]
        prev.append(model_state_to_cpu(job.model))
        del prev[: -self.params.prev_models]
        return {}

    def round_metrics(self, jobs: list[LocalJob], server: dict[str, Any]) -> dict[str, float]:
        # mean number of negatives (previous models) the drawn parties used this round
        metrics = {"negatives": sum(j.info["negatives"] for j in jobs) / max(1, len(jobs))}
        taus = [j.info["tau"] for j in jobs if "tau" in j.info]
        if taus:
            # a party that proposed nothing (one local step) reports NaN: leave it out, or
            # one small party would blank the rate of the whole round
            rates = [j.info.get("tau_acceptance", math.nan) for j in jobs]
            rates = [r for r in rates if not math.isnan(r)]
            metrics.update(
                tau_end=sum(taus) / len(taus),
                tau_end_lowest=min(taus),
                tau_acceptance=sum(rates) / len(rates) if rates else math.nan,
            )
        return metrics


def gradient_norm(model: FedConModel) -> float:
    """L2 norm of all parameter gradients together."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))))
