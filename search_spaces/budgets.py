"""Named budgets: how much of the paper's compute a sweep spends.

A budget scales rounds, local epochs, data and seeds but never a study's varied
parameters, so a smaller budget asks the same question with less precision:

``paper``
    The MOON paper's settings (§4.1): 100 rounds (20 on Tiny-ImageNet; the ``parties``
    study's own 200/500), E = 10, all data, 3 seeds.
``laptop`` (default)
    A tenth of the rounds (at least 5), E = 2, a fifth of the training set, half of
    the test set, 3 seeds.  ``moon_mu`` (15 trials) runs in about 10 minutes on a
    2-core laptop on Fashion-MNIST.
``smoke``
    2 rounds, E = 1, 5% of the training set, 20% of the test set, 1 seed: checks
    that a sweep runs end to end in about a minute.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PAPER_ROUNDS = {"tinyimagenet": 20}
DEFAULT_PAPER_ROUNDS = 100


@dataclass(frozen=True)
class Budget:
    name: str
    description: str
    rounds_scale: float
    min_rounds: int
    local_epochs: int | None  # None: keep the paper's (10)
    data_fraction: float
    test_fraction: float
    seeds: int | None  # None: the study's own (the paper's 3)
    max_rounds: int | None = None

    def rounds(self, paper_rounds: int) -> int:
        scaled = max(self.min_rounds, round(paper_rounds * self.rounds_scale))
        return min(scaled, self.max_rounds) if self.max_rounds else scaled

    def apply(self, fields: dict[str, Any], varied: set[str]) -> dict[str, Any]:
        """Scale a trial's fields; the study's varied fields are left as they are."""
        out = dict(fields)
        dataset = out.get("dataset", "fmnist")
        out["rounds"] = self.rounds(
            out.get("rounds", PAPER_ROUNDS.get(dataset, DEFAULT_PAPER_ROUNDS))
        )
        if self.local_epochs is not None and "local_epochs" not in varied:
            out["local_epochs"] = self.local_epochs
        for name, value in (
            ("data_fraction", self.data_fraction),
            ("test_fraction", self.test_fraction),
        ):
            if name not in varied:
                out[name] = value
        return out


BUDGETS: dict[str, Budget] = {
    "paper": Budget(
        "paper",
        "the paper's settings: 100 rounds, E=10, all data, 3 seeds",
        1.0,
        1,
        None,
        1.0,
        1.0,
        None,
    ),
    "laptop": Budget(
        "laptop",
        "1/10 of the rounds (>= 5), E=2, 20% of the data, 3 seeds",
        0.1,
        5,
        2,
        0.2,
        0.5,
        None,
    ),
    "smoke": Budget(
        "smoke",
        "2 rounds, E=1, 5% of the data, 1 seed: an end-to-end check",
        0.0,
        2,
        1,
        0.05,
        0.2,
        1,
        2,
    ),
}

DEFAULT_BUDGET = "laptop"
