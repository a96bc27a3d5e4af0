"""A round's evaluations, asked by the round loop after aggregation: the test set, the
per-party outcomes, federated validation and the parties' local test splits; built for
a run in one place (:meth:`RoundEvaluation.for_run`: its scorer, validator, local
tester, fine-tuner and representation probe).

Which model does party *i* evaluate with?  The round loop says
(``FederatedRun._party_model``, from the method's ``own_state``,
:mod:`federated.algorithms.party_own_state`): the global model by default, the global
model with the party's kept entries (FedPer, FedBN, ``batchnorm=local``), its own
model for a personal-model method (Ditto, SOLO), APFL's mix; with ``finetune_epochs`` a
copy of either fine-tuned on its training data.  Every pass is the one evaluation loop
(:func:`federated.evaluation.scoring.evaluate`), and :meth:`RoundEvaluation.evaluate`
takes one of two ways through it, by that model: with the global model every
evaluation is one pass over its split (per-party values by each row's owner); with a
model per party the parties are taken one at a time, each party's model scored on the
test set (its own models), its validation rows and its local test rows, and the row
reports the mean over parties (the test set) and the size-weighted values
(validation), as :func:`~federated.evaluation.validation.combined_scores` combines them.

Parties' own models on the pooled test set start from the loop's cache of the stages
they share with the global model (:mod:`federated.evaluation.shared_stages`), and are
scored only on the rounds ``personal_test_every`` names (every k-th and the last; the
rows of the others hold NaN ``test_`` and ``party_<stem>/i`` values: it costs N passes
where the global model's costs one).

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
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from federated.config.checks import parse_rounds
from federated.contract.metrics import LOSS, higher_is_better
from federated.contract.task_needs import unmet_need
from federated.data import Augmenter
from federated.evaluation.fairness import fairness_block, no_fairness_block
from federated.evaluation.fine_tuning import FineTuner
from federated.evaluation.party_scores import REWEIGHTING_NEEDS, PartyScorer, scoring_due
from federated.evaluation.representations import RepresentationProbe
from federated.evaluation.scoring import evaluate
from federated.evaluation.shared_stages import SharedStages
from federated.evaluation.validation import SplitEvaluator, combined_scores
from federated.runtime.precision import FLOAT32, Precision
from federated.sgd_rule import SgdRule
from federated.tasks.base import Scores, Task

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig
    from federated.data import DatasetSpec
    from federated.evaluation.holdout import PartySplit

NAN = float("nan")
#: what a party is evaluated with: party -> its model (None: the global model)
ModelOf = Callable[[int], "torch.nn.Module | None"]


class RunData(Protocol):
    """What the evaluations read of a run's laid-out data
    (:class:`federated.engine.party_data.PartyData`)."""

    spec: DatasetSpec
    class_counts: np.ndarray  # (N, C) training samples per party and class
    validation: PartySplit | None
    local_test: PartySplit | None
    test_x: torch.Tensor
    test_y: torch.Tensor

    def party(self, party: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Party ``party``'s (uint8 images, targets) training rows."""
        ...


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
        probe: RepresentationProbe | None = None,
        precision: Precision = FLOAT32,
    ) -> None:
        self.task = task
        #: the run's precision: the pooled test set's passes enter its autocast (the
        #: validator, local tester, fine-tuner and probe hold it too)
        self.precision = precision
        #: Fig. 2's representation probe, which the round loop asks during training
        #: (None: ``representations_at`` is unset)
        self.probe = probe
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
        #: every metric but the loss on the parties' own test splits, (N,) each, from
        #: the latest scored round (parties.csv's party_test_<metric>)
        self.local_test_metrics: dict[str, np.ndarray] = {}
        #: what per-party outcomes and personal models' spread report (``party_acc_*``,
        #: ``test_acc_std``, ``party_acc/i``; a score task's ``party_bin_acc_*`` ...)
        self.spread_stem = task.party_stem()
        #: the task's other metrics (parties.csv's ``party_val_<m>``, ``party_test_<m>``)
        self.extra_stems = tuple(
            s for s in task.recorded_stems() if s not in (self.spread_stem, LOSS)
        )

    @classmethod
    def for_run(
        cls,
        config: RunConfig,
        data: RunData,
        task: Task,
        augmenter: Augmenter,
        rng: np.random.Generator,
    ) -> RoundEvaluation:
        """Every evaluation ``config`` (resolved) asks for, on the run's laid-out
        ``data``: the test set, per-party outcomes, federated validation (its parties
        drawn from ``rng``, the run's ``evaluation`` stream, when ``eval_fraction`` < 1),
        the local test splits, fine-tuning and the representation probe.

        Per-party outcomes re-weight the test set by each party's class mix where the
        task meets :data:`~federated.evaluation.party_scores.REWEIGHTING_NEEDS`; a task
        that does not has them from the parties' own local test splits, or none."""
        precision = Precision(config.precision, data.test_x.device.type)
        reweights = unmet_need(type(task), REWEIGHTING_NEEDS) is None
        per_party = reweights or bool(config.party_test_fraction)
        scorer = PartyScorer(
            data.class_counts,
            data.spec.n_classes,
            config.party_scores_every if per_party else 0,
            config.rounds,
            task.party_stem(),
        )
        validator = None
        if data.validation is not None:
            draws = config.eval_fraction < 1 and config.val_split == "party"
            validator = SplitEvaluator(
                data.validation, task, config.eval_fraction, rng if draws else None, precision
            )
        local_tester = None
        if data.local_test is not None:
            local_tester = SplitEvaluator(data.local_test, task, precision=precision)
        tuner = None
        if config.finetune_epochs:
            tuner = FineTuner(
                config.finetune_epochs,
                task,
                augmenter,
                data.party,
                config.batch_size,
                SgdRule(config.lr, config.momentum, config.weight_decay),
                config.seed,
                precision,
            )
        probe = None
        rounds = parse_rounds(config.representations_at, config.rounds)
        if rounds:
            probe = RepresentationProbe(
                rounds, data.test_x, data.test_y, augmenter, config.eval_batch_size, precision
            )
        return cls(
            task,
            (data.test_x, data.test_y),
            augmenter,
            config.eval_batch_size,
            scorer,
            validator,
            local_tester,
            config.rounds,
            config.party_scores_every,
            tuner,
            config.personal_test_every,
            probe,
            precision,
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
    def test_scores(self, model: torch.nn.Module, shared: SharedStages | None = None) -> Scores:
        """``model`` on the run's test set (pooled); ``shared``: the round's cache of
        the global model's leading stages over it (parties' own models)."""
        return evaluate(
            model,
            self.test_x,
            self.test_y,
            self.augmenter,
            self.batch_size,
            self.task.accumulator(),
            shared=shared,
            precision=self.precision,
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
        (None for every party: all are evaluated with ``global_model``).

        One path for every case, parameterised by the model each party uses: with the
        global model, the test set and each of the parties' splits take one pass each
        (per-party sums by each row's owner); with a model per party (its own, or a
        fine-tuned copy) the parties are taken one by one, each model scored on the
        test set (its own models only) and on the party's own rows of its splits."""
        # a method gives every party its own model or none (a model may be one scratch
        # copy reloaded per party: each is evaluated before the next is asked for)
        self._own_test = None
        if self.tuner is not None:
            self.tuner.new_round()
        personal = bool(parties) and model_of(parties[0]) is not None
        if not personal:
            test = self.test_scores(global_model)
            results = RoundResults(dict(test.values))
            if self.task.diverged(test):
                results.diverged = True
                results.columns.update(self._local_fairness())
                return results
            self.party_scorer.record(round_number, test)
        val_parties = self.validation_parties(round_number)
        if personal:
            results = self._party_by_party(
                round_number, global_model, parties, model_of, val_parties
            )
        elif self.tuner is not None:
            self._party_by_party(round_number, global_model, None, model_of, val_parties)
        else:
            self._global_splits(round_number, global_model, val_parties)
        results.columns.update(self._local_fairness())
        if self.tuner is not None:
            # what ran: the parties whose own-split scores this row holds are fine-tuned
            # copies (0 on rounds that score no party's own splits)
            results.columns["finetuned_parties"] = len(self.tuner.tuned_parties)
        return results

    def _global_splits(
        self, round_number: int, model: torch.nn.Module, val_parties: np.ndarray | None
    ) -> None:
        """The global model on the validating parties' and every party's local test
        rows: one pass per split."""
        if val_parties is not None:
            scores = self.validator.score(model, self.augmenter, self.batch_size, val_parties)
            self.last_validation = (round_number, scores)
        if self._local_test_due(round_number):
            own = self.local_tester.score(model, self.augmenter, self.batch_size)
            self.party_scorer.use_own_scores(round_number, own.party_values[self.spread_stem])
            self._own_test = np.asarray(own.party_values[self.spread_stem], dtype=np.float64)
            self.local_test_metrics = {
                k: own.party_values[k] for k in (self.spread_stem, *self.extra_stems)
            }

    def _party_by_party(
        self,
        round_number: int,
        global_model: torch.nn.Module,
        parties: list[int] | None,
        model_of: ModelOf,
        val_parties: np.ndarray | None,
    ) -> RoundResults | None:
        """Each party's model (its own for ``parties``, else the global model; either
        fine-tuned first with ``finetune_epochs``) on its own splits, and its own model
        on the pooled test set.  Returns the pooled test results of parties' own models
        (None with the global model, whose test scores the caller has).

        Parties' own models on the test set go through one cache of the stages they
        share with the global model (FedPer's encoder; the same scores bit for bit); on
        rounds that ``personal_test_every`` skips the test set is not scored: NaN test
        columns."""
        own_validation: dict[int, Scores] = {}
        tests: dict[int, dict[str, float]] = {}
        if parties is None:
            # the global model, fine-tuned per party: the parties evaluated this round
            evaluating = set() if val_parties is None else {int(p) for p in val_parties}
            if self._local_test_due(round_number):
                evaluating |= {int(p) for p in self.local_tester.holding}
            order = sorted(evaluating)
        else:
            order = parties
        pooled = parties is not None and self.personal_test_due(round_number)
        shared = SharedStages(global_model) if pooled else None
        for party in order:
            model = global_model if parties is None else model_of(party)
            if parties is not None:
                if pooled:
                    test = self.test_scores(model, shared)
                    self.party_scorer.record(round_number, test, party)
                else:
                    test = Scores(self.task.no_scores())
                tests[party] = test.values
            self._own_splits(round_number, party, model, val_parties, own_validation)
        self._keep_validation(round_number, val_parties, own_validation)
        if parties is None:
            return None
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

    def _local_test_due(self, round_number: int) -> bool:
        return self.local_tester is not None and self.party_scorer.due(round_number)

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
        tests = self._local_test_due(round_number)
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
        # every metric, the per-party one too (parties.csv's party_test_<stem>)
        for k in (self.spread_stem, *self.extra_stems):
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
