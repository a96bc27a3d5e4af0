"""A round's evaluations, asked by the round loop after aggregation: the test set, the
per-party outcomes, federated validation and the parties' local test splits.

Which model does party *i* evaluate with?  The method says
(:meth:`federated.algorithms.base.Algorithm.party_model`): the global model by default,
its own for a personal-model method such as SOLO.  With the global model every
evaluation is one pass over its split; with personal models each evaluated party's
model is scored on the test set, its validation split and its local test split, and the
row reports the mean over parties (the test set) and the size-weighted values
(validation), as :func:`~federated.evaluation.validation.combined_scores` combines them.

Parties' own models on the pooled test set run the stages they share with the global
model once for all of them (:mod:`federated.evaluation.shared_stages`), and only on the
rounds ``personal_test_every`` names (every k-th and the last; the rows of the others
hold NaN ``test_`` and ``party_<stem>/i`` values: it costs N passes where the global
model's costs one).

Timing: validation follows the per-party scoring period (``party_scores_every``) and
always scores the last round; the local test splits are scored on the scoring period's
rounds.  The latest validation is carried into the rows of rounds that do not validate
(``val_round`` says which round it is from).

With ``finetune_epochs`` > 0 (:mod:`federated.evaluation.fine_tuning`) each party's
local test and validation scores are those of a copy of its model fine-tuned on its
own training data; the pooled test set is still scored with the untuned model.

Each party's own splits are summarised in the fairness block
(:mod:`federated.evaluation.fairness`): ``party_test_<stem>`` (the local test splits,
on the rounds that score them, NaN on the others) and ``party_val_<stem>`` (the parties'
validation splits, carried with the ``val_`` columns), each with ``_mean``,
``_worst10`` and ``_std``.  Every method is measured at the same point: after the
round's aggregation, before the next round's local training.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from federated.contract.metrics import LOSS, higher_is_better
from federated.data import Augmenter
from federated.evaluation.fairness import fairness_block, no_fairness_block
from federated.evaluation.fine_tuning import FineTuner
from federated.evaluation.party_scores import PartyScorer, scoring_due
from federated.evaluation.scoring import evaluate
from federated.evaluation.shared_stages import SharedStages
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
        tuner: FineTuner | None = None,
        personal_test_every: int = 1,
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
        self.tuner = tuner
        #: rounds whose parties' own models are scored on the pooled test set: every
        #: k-th and the last (1: every round)
        self.personal_test_every = personal_test_every
        #: the parties' own validation splits (not the server's one slice)
        self.per_party_validation = validator is not None and len(validator.split.sizes) == len(
            party_scorer.shares
        )
        #: this round's local test values per party (the fairness block's input)
        self._own_test: np.ndarray | None = None
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

    def personal_test_due(self, round_number: int) -> bool:
        """Whether parties' own models are scored on the pooled test set this round."""
        return scoring_due(round_number, self.personal_test_every, self.rounds)

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
        self._own_test = None
        if not parties or model_of(parties[0]) is None:
            results = self._global(round_number, global_model)
        else:
            results = self._personal(round_number, global_model, parties, model_of)
        results.columns.update(self._local_fairness())
        return results

    def _global(self, round_number: int, model: torch.nn.Module) -> RoundResults:
        test = self.test_scores(model)
        results = RoundResults(dict(test.values))
        if self.task.diverged(test):
            results.diverged = True
            return results
        self.party_scorer.record(round_number, test)
        if self.tuner is not None:
            self._tuned_parties(round_number, model)
            return results
        parties = self.validation_parties(round_number)
        if parties is not None:
            scores = self.validator.score(model, self.augmenter, self.batch_size, parties)
            self.last_validation = (round_number, scores)
        if self.local_tester is not None and self.party_scorer.due(round_number):
            own = self.local_tester.score(model, self.augmenter, self.batch_size)
            self.party_scorer.use_own_scores(round_number, own.party_values[self.spread_stem])
            self._own_test = np.asarray(own.party_values[self.spread_stem], dtype=np.float64)
            self.local_test_metrics = {k: own.party_values[k] for k in self.extra_stems}
        return results

    def _personal(
        self,
        round_number: int,
        global_model: torch.nn.Module,
        parties: list[int],
        model_of: ModelOf,
    ) -> RoundResults:
        """Each party's own model on the test set, its validation and local test splits.

        The stages a party's model shares with the global model (FedPer's encoder) run
        once for all parties (:mod:`federated.evaluation.shared_stages`; the same scores
        bit for bit); a party sharing none is scored whole.  On rounds that
        ``personal_test_every`` skips, the test set is not scored: NaN test columns."""
        val_parties = self.validation_parties(round_number)
        tests: dict[int, dict[str, float]] = {}
        own_validation: dict[int, Scores] = {}
        pooled = self.personal_test_due(round_number)
        shared = SharedStages(
            global_model,
            self.test_x,
            self.test_y,
            self.augmenter,
            self.batch_size,
            self.task.accumulator,
        )
        for party in parties:
            model = model_of(party)
            if pooled:
                test = shared.scores(model)
                if test is None:
                    test = self.test_scores(model)
                self.party_scorer.record(round_number, test, party)
            else:
                test = Scores(self.task.no_scores())
            tests[party] = test.values
            self._own_splits(round_number, party, model, val_parties, own_validation)
        self._keep_validation(round_number, val_parties, own_validation)
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

    def _tuned_parties(self, round_number: int, model: torch.nn.Module) -> None:
        """With fine-tuning, the global model's per-party evaluations: each evaluating
        party's fine-tuned copy on its validation and local test splits."""
        val_parties = self.validation_parties(round_number)
        evaluating = set() if val_parties is None else {int(p) for p in val_parties}
        if self.local_tester is not None and self.party_scorer.due(round_number):
            evaluating |= {int(p) for p in self.local_tester.holding}
        own_validation: dict[int, Scores] = {}
        for party in sorted(evaluating):
            self._own_splits(round_number, party, model, val_parties, own_validation)
        self._keep_validation(round_number, val_parties, own_validation)

    def _own_splits(
        self,
        round_number: int,
        party: int,
        model: torch.nn.Module,
        val_parties: np.ndarray | None,
        own_validation: dict[int, Scores],
    ) -> None:
        """Party ``party``'s model (fine-tuned first, with ``finetune_epochs``) on its
        local test split and, when it validates this round, its validation split."""
        validates = val_parties is not None and party in val_parties
        tests = self.local_tester is not None and self.party_scorer.due(round_number)
        if not (validates or tests):
            return
        if self.tuner is not None:
            model = self.tuner.tuned(model, party, round_number)
        if tests:
            self._own_local_test(party, model)
        if validates:
            own_validation[party] = self.validator.score(
                model, self.augmenter, self.batch_size, np.array([party])
            )

    def _keep_validation(
        self, round_number: int, val_parties: np.ndarray | None, own_validation: dict[int, Scores]
    ) -> None:
        """The round's validation from parties scored one model each."""
        if val_parties is None:
            return
        self.last_validation = (
            round_number,
            combined_scores(own_validation, self.validator.split.sizes, self.task.recorded_stems()),
        )

    def _own_local_test(self, party: int, model: torch.nn.Module) -> None:
        own = self.local_tester.score(model, self.augmenter, self.batch_size, np.array([party]))
        value = float(own.party_values[self.spread_stem][party])
        self.party_scorer.own_score(party, value)
        if self._own_test is None:
            self._own_test = np.full(len(self.local_tester.split.sizes), NAN)
        self._own_test[party] = value
        for k in self.extra_stems:
            values = self.local_test_metrics.setdefault(k, np.full(len(own.party_values[k]), NAN))
            values[party] = own.party_values[k][party]

    # ------------------------------------------------------------------ columns
    def _local_fairness(self) -> dict[str, float]:
        """The local test splits' fairness block (this round's, or NaN; nothing without
        local test splits)."""
        if self.local_tester is None:
            return {}
        prefix = f"party_test_{self.spread_stem}"
        if self._own_test is None:
            return no_fairness_block(prefix)
        lower = not higher_is_better(self.spread_stem, self.task.metrics)
        return fairness_block(self._own_test, self.local_tester.split.sizes, prefix, lower)

    def _validation_fairness(self, scores: Scores | None) -> dict[str, float]:
        """The parties' validation fairness block (nothing with the server's slice)."""
        if not self.per_party_validation:
            return {}
        prefix = f"party_val_{self.spread_stem}"
        if scores is None:
            return no_fairness_block(prefix)
        values = scores.party_values[self.spread_stem]
        lower = not higher_is_better(self.spread_stem, self.task.metrics)
        return fairness_block(values, self.validator.split.sizes, prefix, lower)

    def no_fairness_columns(self) -> dict[str, float]:
        """The fairness blocks without values (a diverged round's row)."""
        self._own_test = None
        return {**self._local_fairness(), **self._validation_fairness(None)}

    def validation_columns(self) -> dict[str, float]:
        """The row's validation columns: the latest scores and the round they are from
        (nothing without validation; NaN before the first validated round)."""
        if self.validator is None:
            return {}
        if self.last_validation is None:
            return {**self.no_validation_columns(), **self._validation_fairness(None)}
        round_number, scores = self.last_validation
        return {
            **{f"val_{k}": v for k, v in scores.values.items()},
            "val_parties": scores.parties,
            "val_round": round_number,
            **self._validation_fairness(scores),
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
