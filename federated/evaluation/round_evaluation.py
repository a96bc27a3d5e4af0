"""A round's evaluations, asked by the round loop after aggregation: the test set, the
per-party outcomes, federated validation and the parties' local test splits.

Which model does party *i* evaluate with?  The method says
(:meth:`federated.algorithms.base.Algorithm.party_model`): the global model by default,
its own for a personal-model method such as SOLO.  With the global model every
evaluation is one pass over its split; with personal models each evaluated party's
model is scored on the test set, its validation split and its local test split, and the
row reports the mean over parties (the test set) and the size-weighted values
(validation), as :func:`~federated.evaluation.validation.combined_scores` combines them.

Timing: validation follows the per-party scoring period (``party_scores_every``) and
always scores the last round; the local test splits are scored on the scoring period's
rounds.  The latest validation is carried into the rows of rounds that do not validate
(``val_round`` says which round it is from).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from federated.contract.metrics import LOSS
from federated.data import Augmenter
from federated.evaluation.party_scores import PartyScorer, scoring_due
from federated.evaluation.scoring import evaluate
from federated.evaluation.validation import SplitEvaluator, combined_scores
from federated.tasks.base import Scores, Task

NAN = float("nan")
#: what a party is evaluated with: party -> its model (None: the global model)
ModelOf = Callable[[int], "torch.nn.Module | None"]


@dataclass
class RoundResults:
    """What a round's evaluation adds to its row: the ``test_`` values, and the other
    columns (validation, per-party outcomes, personal models' spread)."""

    test: dict[str, float]
    columns: dict[str, float] = field(default_factory=dict)
    #: the global model's test loss is NaN/inf: the run diverged
    diverged: bool = False


class RoundEvaluation:
    """Every evaluation of one run (module docstring), with the state the rows carry
    from round to round (``last_validation``, ``local_test_metrics``)."""

    def __init__(
        self,
        task: Task,
        test: tuple[torch.Tensor, torch.Tensor],
        augmenter: Augmenter,
        batch_size: int,
        party_scorer: PartyScorer,
        validator: SplitEvaluator | None,
        local_tester: SplitEvaluator | None,
        rounds: int,
        scoring_every: int,
    ) -> None:
        self.task = task
        self.test_x, self.test_y = test
        self.augmenter = augmenter
        self.batch_size = batch_size
        self.party_scorer = party_scorer
        self.validator = validator
        self.local_tester = local_tester
        self.rounds = rounds
        self.scoring_every = scoring_every
        #: the latest validation: (1-based round, its scores)
        self.last_validation: tuple[int, Scores] | None = None
        #: per-party metrics beyond accuracy and loss on the parties' own test splits,
        #: (N,) each, from the latest scored round (parties.csv's party_test_<metric>)
        self.local_test_metrics: dict[str, np.ndarray] = {}
        #: what per-party outcomes and personal models' spread report (``party_acc_*``,
        #: ``test_acc_std``, ``party_acc/i``; a score task's ``party_bin_acc_*`` ...)
        self.spread_stem = task.party_stem()
        #: the task's other metrics (parties.csv's ``party_val_<m>``, ``party_test_<m>``)
        self.extra_stems = tuple(
            s for s in task.recorded_stems() if s not in (self.spread_stem, LOSS)
        )

    # ------------------------------------------------------------------ timing
    def validation_due(self, round_number: int) -> bool:
        return round_number == self.rounds or scoring_due(
            round_number, self.scoring_every, self.rounds
        )

    def validation_parties(self, round_number: int) -> np.ndarray | None:
        """The parties whose validation data score this round (None: none do)."""
        if self.validator is None or not self.validation_due(round_number):
            return None
        return self.validator.chosen_parties()

    # -------------------------------------------------------------- evaluation
    def test_scores(self, model: torch.nn.Module) -> Scores:
        """``model`` on the run's test set (pooled)."""
        return evaluate(
            model,
            self.test_x,
            self.test_y,
            self.augmenter,
            self.batch_size,
            self.task.accumulator(),
        )

    def evaluate(
        self,
        round_number: int,
        global_model: torch.nn.Module,
        parties: list[int],
        model_of: ModelOf,
    ) -> RoundResults:
        """The round's evaluations; ``parties``: those that trained and reported (the
        ones a personal-model method evaluates); ``model_of``: each party's own model
        (None for every party: all are evaluated with ``global_model``)."""
        # a method gives every party its own model or none (a model may be one scratch
        # copy reloaded per party: each is evaluated before the next is asked for)
        if not parties or model_of(parties[0]) is None:
            return self._global(round_number, global_model)
        return self._personal(round_number, parties, model_of)

    def _global(self, round_number: int, model: torch.nn.Module) -> RoundResults:
        test = self.test_scores(model)
        results = RoundResults(dict(test.values))
        if self.task.diverged(test):
            results.diverged = True
            return results
        self.party_scorer.record(round_number, test)
        parties = self.validation_parties(round_number)
        if parties is not None:
            scores = self.validator.score(model, self.augmenter, self.batch_size, parties)
            self.last_validation = (round_number, scores)
        if self.local_tester is not None and self.party_scorer.due(round_number):
            own = self.local_tester.score(model, self.augmenter, self.batch_size)
            self.party_scorer.use_own_scores(round_number, own.party_values[self.spread_stem])
            self.local_test_metrics = {k: own.party_values[k] for k in self.extra_stems}
        return results

    def _personal(self, round_number: int, parties: list[int], model_of: ModelOf) -> RoundResults:
        """Each party's own model on the test set, its validation and local test splits."""
        val_parties = self.validation_parties(round_number)
        tests: dict[int, dict[str, float]] = {}
        own_validation: dict[int, Scores] = {}
        for party in parties:
            model = model_of(party)
            test = self.test_scores(model)
            tests[party] = test.values
            self.party_scorer.record(round_number, test, party)
            self._own_local_test(round_number, party, model)
            if val_parties is not None and party in val_parties:
                own_validation[party] = self.validator.score(
                    model, self.augmenter, self.batch_size, np.array([party])
                )
        if val_parties is not None:
            self.last_validation = (
                round_number,
                combined_scores(
                    own_validation, self.validator.split.sizes, self.task.recorded_stems()
                ),
            )
        stem = self.spread_stem
        spread = [values[stem] for values in tests.values()]
        first = next(iter(tests.values()))
        columns = {
            f"test_{stem}_std": float(np.std(spread)),
            **{f"party_{stem}/{p}": values[stem] for p, values in tests.items()},
        }
        # each party's own model on the test set: the mean over parties
        test = {k: float(np.mean([values[k] for values in tests.values()])) for k in first}
        return RoundResults(test, columns)

    def _own_local_test(self, round_number: int, party: int, model: torch.nn.Module) -> None:
        if self.local_tester is None or not self.party_scorer.due(round_number):
            return
        own = self.local_tester.score(model, self.augmenter, self.batch_size, np.array([party]))
        self.party_scorer.own_score(party, float(own.party_values[self.spread_stem][party]))
        for k in self.extra_stems:
            values = self.local_test_metrics.setdefault(k, np.full(len(own.party_values[k]), NAN))
            values[party] = own.party_values[k][party]

    # ------------------------------------------------------------------ columns
    def validation_columns(self) -> dict[str, float]:
        """The row's validation columns: the latest scores and the round they are from
        (nothing without validation; NaN before the first validated round)."""
        if self.validator is None:
            return {}
        if self.last_validation is None:
            return self.no_validation_columns()
        round_number, scores = self.last_validation
        return {
            **{f"val_{k}": v for k, v in scores.values.items()},
            "val_parties": scores.parties,
            "val_round": round_number,
        }

    def no_validation_columns(self) -> dict[str, float]:
        """The validation columns without a value: NaN metrics, no parties, round 0
        (nothing without validation)."""
        if self.validator is None:
            return {}
        return {
            **{f"val_{k}": NAN for k in self.task.no_scores()},
            "val_parties": 0,
            "val_round": 0,
        }
