"""Independent random streams derived from a run's one seed, and their saved states.

One integer seeds everything, but each consumer draws from its own stream so that,
for example, changing the number of parties drawn per round does not change the initial
weights.  All streams are CPU generators: the random numbers a run sees do not depend
on its device.  :class:`RunRandomness` saves and restores every stream (including torch's
global generators used by dropout) so a checkpointed run continues exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

STREAMS = {
    "partition": 0,
    "init": 1,
    "sampling": 2,
    "batches": 3,
    "algorithm": 4,
    "dropout": 5,
    # system heterogeneity: which drawn parties straggle or drop out, and their work
    "system": 6,
    # feature skew: each party's rotation angle; its noise is keyed by (round, party, step)
    "features": 7,
    # held-out data: each party's validation and local-test samples
    # (federated/evaluation/holdout.py)
    "validation": 8,
    # which parties evaluate on their validation data each round (eval_fraction < 1)
    "evaluation": 9,
    # evaluation with local fine-tuning: each (round, party)'s batch order
    # (federated/evaluation/fine_tuning.py)
    "finetune": 10,
    # client-level differential privacy: DP-FedAvg's Gaussian noise on the clipped
    # updates and on adaptive clipping's count (federated/server/privacy.py)
    "privacy": 11,
}


def stream_seed(seed: int, stream: str) -> int:
    """A 63-bit seed for ``stream`` derived from the run seed."""
    seq = np.random.SeedSequence([seed, STREAMS[stream]])
    return int(seq.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


def numpy_stream(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([seed, STREAMS[stream]]))


def torch_stream(seed: int, stream: str) -> torch.Generator:
    return torch.Generator().manual_seed(stream_seed(seed, stream))


@dataclass
class RunRandomness:
    """The generators a run draws from after set-up.

    ``sampling`` draws the parties of each round, ``batches`` the batch order and the
    augmentation parameters, ``algorithm`` any randomness of a method (annealed tau's
    Metropolis coin), ``system`` each round's stragglers, dropouts and per-party work
    (only runs with system heterogeneity draw from it, so it changes no other stream),
    ``privacy`` DP-FedAvg's noise (likewise drawn only by runs that add noise).
    Dropout layers use torch's global generators, seeded here as well.
    """

    sampling: np.random.Generator
    batches: torch.Generator
    algorithm: torch.Generator
    system: np.random.Generator
    #: which parties evaluate on their validation data (eval_fraction < 1 only)
    evaluation: np.random.Generator
    #: DP-FedAvg's noise (runs with dp_noise_multiplier or dp_target_epsilon only)
    privacy: torch.Generator

    @classmethod
    def from_seed(cls, seed: int) -> RunRandomness:
        torch.manual_seed(stream_seed(seed, "dropout"))
        return cls(
            sampling=numpy_stream(seed, "sampling"),
            batches=torch_stream(seed, "batches"),
            algorithm=torch_stream(seed, "algorithm"),
            system=numpy_stream(seed, "system"),
            evaluation=numpy_stream(seed, "evaluation"),
            privacy=torch_stream(seed, "privacy"),
        )

    def state_dict(self) -> dict[str, Any]:
        return {
            "sampling": self.sampling.bit_generator.state,
            "batches": self.batches.get_state(),
            "algorithm": self.algorithm.get_state(),
            "system": self.system.bit_generator.state,
            "evaluation": self.evaluation.bit_generator.state,
            "privacy": self.privacy.get_state(),
            "torch_cpu": torch.get_rng_state(),
            "torch_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else [],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.sampling.bit_generator.state = state["sampling"]
        self.batches.set_state(state["batches"])
        self.algorithm.set_state(state["algorithm"])
        if "system" in state:  # checkpoints from before system heterogeneity never drew
            self.system.bit_generator.state = state["system"]
        if "evaluation" in state:  # nor before federated evaluation
            self.evaluation.bit_generator.state = state["evaluation"]
        if "privacy" in state:  # nor before differential privacy
            self.privacy.set_state(state["privacy"])
        torch.set_rng_state(state["torch_cpu"])
        if state["torch_cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["torch_cuda"])
