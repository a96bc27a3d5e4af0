"""What each trial asks Ray for, and the CPU fallback when GPUs are asked for but absent.

On a 2-core laptop the default is one CPU (and one torch thread) per trial, so two
trials run side by side; ``--gpus-per-trial 0.25`` packs four trials on each GPU.  Ray
keeps a trial that asks for a GPU the cluster does not have PENDING forever, so a GPU
request on a cluster without GPUs is dropped with a one-line warning and the trials run
on CPU instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TrialResources:
    cpus: float
    gpus: float

    @property
    def threads(self) -> int:
        """Torch threads for a trial given ``cpus`` (fractional CPUs get one)."""
        return max(1, math.floor(self.cpus))

    def as_ray(self) -> dict[str, float]:
        return {"cpu": self.cpus, "gpu": self.gpus}

    def describe(self) -> str:
        gpu = f", {self.gpus:g} GPU" if self.gpus else ""
        return f"{self.cpus:g} CPU ({self.threads} torch thread{'s' * (self.threads > 1)}){gpu}"


def choose_resources(
    cpus_per_trial: float, gpus_per_trial: float, cluster_gpus: float
) -> tuple[TrialResources, str | None]:
    """Resources per trial, and a warning when a GPU request had to be dropped."""
    if gpus_per_trial > 0 and cluster_gpus <= 0:
        warning = (
            f"warning: --gpus-per-trial {gpus_per_trial:g} asked for, but the Ray cluster has "
            "no GPU: running every trial on CPU"
        )
        return TrialResources(cpus_per_trial, 0.0), warning
    return TrialResources(cpus_per_trial, gpus_per_trial), None


@dataclass(frozen=True)
class Execution:
    """How to run (never what): resources, concurrency, scheduler, failures."""

    resources: TrialResources
    max_concurrent: int | None = None
    scheduler: str | None = None  # "asha"
    max_failures: int = 1
    verbose: int = 1
    # a finished trial's actor runs the next trial (torch, fedsweep and the data stay
    # loaded); off where a Ray dashboard lists actors by trial (study/tune/trial_actor.py)
    reuse_actors: bool = False
