"""Named budgets: how much of the paper's compute a sweep spends.

A budget scales rounds, local epochs, data, the batch size and seeds but never a
study's varied parameters, so a smaller budget asks the same question with less
precision:

``paper``
    The MOON paper's settings (§4.1): 100 rounds (20 on Tiny-ImageNet; the ``parties``
    study's own 200/500), E = 10, all data, 3 seeds.
``laptop`` (default for the built-in studies)
    A tenth of the rounds (at least 5), E = 2, a fifth of the training set, half of
    the test set, batch size 16 (the paper's 64 takes a quarter of the SGD steps per
    sample pass: at this compute nothing it compares has left its steep climb), 3
    seeds.  ``moon_mu`` (15 trials) runs in about 8 minutes on a 2-core machine on
    Fashion-MNIST and resolves about 1 point (docs/results/budget.md).
``smoke``
    2 rounds, E = 1, 5% of the training set, 20% of the test set, 1 seed: checks
    that a sweep runs end to end in about a minute.
``as-written`` (default for a user's own study: a study file or ``--vary``)
    Changes nothing: every field is what the study and ``--set`` write, else
    RunConfig's default (the paper's); the study's own seeds.

Whose values a budget may change (:func:`search_spaces.resolve.budget_keeps`): in the
built-in studies every value is the paper's setting, which the budgets are made to
scale (the ``parties`` study's 200/500 rounds too), except a varied E or data fraction.
In a user's study the ``[fixed]`` values and the axes are the user's: a budget fills only
the fields the study leaves to it, and refuses (one line) where it would change a value
the study's ``[fixed]`` writes.  ``--set`` always stands: it is applied after the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from federated.config.run_config import RunConfig

PAPER_ROUNDS = {"tinyimagenet": 20}
# The laptop budget's batch: a quarter of the paper's 64 gives each party four times the
# SGD steps for the same sample passes (steps per party = passes / (N * B)), which is
# what a cut-off run lacks; measured to resolve Table 9 to about 1 point with 3 seeds
# where B = 64 resolved 26 (docs/results/budget.md).
LAPTOP_BATCH_SIZE = 16
DEFAULT_PAPER_ROUNDS = 100


# The fields a budget may set, and what each is when nobody writes it (RunConfig's
# defaults: the paper's); a change is reported as "from -> to" against these.
BUDGET_FIELDS = ("rounds", "local_epochs", "data_fraction", "test_fraction", "batch_size")


def _unwritten(name: str) -> Any:
    return RunConfig.__dataclass_fields__[name].default


@dataclass(frozen=True)
class Budget:
    name: str
    description: str
    rounds_scale: float | None  # None: rounds as written
    min_rounds: int
    local_epochs: int | None  # None: keep the study's (the paper's 10 unless written)
    data_fraction: float | None  # None: as written
    test_fraction: float | None  # None: as written
    seeds: int | None  # None: the study's own (the paper's 3)
    max_rounds: int | None = None
    batch_size: int | None = None  # None: as written (the paper's 64)

    def rounds(self, paper_rounds: int) -> int:
        scale = 1.0 if self.rounds_scale is None else self.rounds_scale
        scaled = max(self.min_rounds, round(paper_rounds * scale))
        return min(scaled, self.max_rounds) if self.max_rounds else scaled

    def targets(self, fields: dict[str, Any]) -> dict[str, Any]:
        """What this budget sets each field it scales to, for a trial's ``fields``."""
        out: dict[str, Any] = {}
        if self.rounds_scale is not None:
            dataset = fields.get("dataset", "fmnist")
            out["rounds"] = self.rounds(
                fields.get("rounds", PAPER_ROUNDS.get(dataset, DEFAULT_PAPER_ROUNDS))
            )
        for name in ("local_epochs", "data_fraction", "test_fraction", "batch_size"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def apply(
        self, fields: dict[str, Any], keep: set[str]
    ) -> tuple[dict[str, Any], dict[str, tuple[Any, Any]]]:
        """Scale a trial's fields, leaving the ``keep`` fields as they are.

        Returns the fields and the changes, ``{field: (from, to)}``: what the plan and
        the manifest report (``from`` is the written value, else RunConfig's default)."""
        out = dict(fields)
        changes: dict[str, tuple[Any, Any]] = {}
        for name, value in self.targets(fields).items():
            if name in keep:
                continue
            before = fields.get(name, _unwritten(name))
            if value != before:
                changes[name] = (before, value)
            out[name] = value
        return out, changes


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
        "1/10 of the rounds (>= 5), E=2, 20% of the data, batch 16, 3 seeds",
        0.1,
        5,
        2,
        0.2,
        0.5,
        None,
        batch_size=LAPTOP_BATCH_SIZE,
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
    "as-written": Budget(
        "as-written",
        "nothing scaled: the study's and --set's values, else the paper's defaults",
        None,
        1,
        None,
        None,
        None,
        None,
    ),
}

DEFAULT_BUDGET = "laptop"  # built-in studies
USER_DEFAULT_BUDGET = "as-written"  # a user's study file or --vary study
