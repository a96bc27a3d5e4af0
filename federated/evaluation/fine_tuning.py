"""Evaluation with local fine-tuning (``finetune_epochs`` = E_ft > 0; FedAvg+FT).

Before a party's own evaluations of a round — its local test split and its validation
split — a copy of the model it is evaluated with (the global model, or the method's
personal model for it) trains E_ft epochs on the party's own training data; the
party's scores are the fine-tuned copy's, and the copy is then thrown away: nothing of
it reaches training, the global model or the pooled test set (``test_*`` is the
untuned model's).  This is FederatedScope's ``finetune.before_eval``, FLGo's
``fedavg_finetune`` and pfl-research's ``Reptile`` evaluation, and the baseline Matsuda
et al. (2022) find often beats personalised methods.

The fine-tuning trains as a round's local training does, on the plain objective: its
batches are a batch plan's (:func:`~federated.execution.batch_plan.draw_party_batches`,
the function that draws every round's plan: per epoch a permutation of the party's
training rows, its last partial batch dropped, a party smaller than one batch taking one
batch of all it holds), each step is the sequential trainer's
(:meth:`~federated.sgd_rule.SgdRule.step_reached` after ``backward``, with the run's
``lr``, ``momentum`` and ``weight_decay`` and a fresh momentum; parameters the loss did
not reach are left be), on the task's own forward pass and loss
(:meth:`~federated.tasks.base.Task.forward`, so a detector gets its boxes).  It applies no
augmentation or feature skew (the local test and validation splits have neither).  The
plan is drawn from a generator of its own per (round, party), seeded from the run's
``finetune`` stream: fine-tuning draws nothing from any other stream, so every other
number of the run is unchanged.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch

from federated.data import Augmenter
from federated.execution.batch_plan import draw_party_batches
from federated.runtime.precision import FLOAT32, Precision, float32
from federated.runtime.seeding import STREAMS
from federated.sgd_rule import SgdRule
from federated.tasks.base import Task

#: a party's (uint8 images, targets) training rows, on the run's device
PartyRows = Callable[[int], tuple[torch.Tensor, torch.Tensor]]


def finetune_seed(seed: int, round_number: int, party: int) -> int:
    """The 63-bit seed of party ``party``'s fine-tuning at 1-based ``round_number``."""
    sequence = np.random.SeedSequence([seed, STREAMS["finetune"], round_number, party])
    return int(sequence.generate_state(1, dtype=np.uint64)[0] >> np.uint64(1))


class FineTuner:
    """Fine-tunes copies of models on the parties' training rows (module docstring)."""

    def __init__(
        self,
        epochs: int,
        task: Task,
        augmenter: Augmenter,
        party_rows: PartyRows,
        batch_size: int,
        rule: SgdRule,
        seed: int,
        precision: Precision = FLOAT32,
    ) -> None:
        """``rule``: the run's local solver (its ``lr``, ``momentum``, ``weight_decay``);
        ``precision``: the run's (each step's forward pass and loss under its autocast)."""
        self.precision = precision
        self.epochs = epochs
        self.task = task
        self.augmenter = augmenter
        self.party_rows = party_rows
        self.batch_size = batch_size
        self.rule = rule
        self.seed = seed
        self._work: torch.nn.Module | None = None  # the copy, reused; never state
        #: parties fine-tuned since :meth:`new_round` (a row's ``finetuned_parties``)
        self.tuned_parties: set[int] = set()

    def new_round(self) -> None:
        """Start counting the parties a round fine-tunes afresh."""
        self.tuned_parties = set()

    def tuned(self, model: torch.nn.Module, party: int, round_number: int) -> torch.nn.Module:
        """A copy of ``model`` fine-tuned on party ``party``'s training rows (valid
        until the next call)."""
        self.tuned_parties.add(party)
        if self._work is None:
            self._work = copy.deepcopy(model).requires_grad_(True)
        work = self._work
        work.load_state_dict(model.state_dict())
        images, targets = self.party_rows(party)
        generator = torch.Generator().manual_seed(finetune_seed(self.seed, round_number, party))
        plan = draw_party_batches(
            party, int(images.shape[0]), 0, self.augmenter, self.batch_size, self.epochs, generator
        )
        params = list(work.parameters())
        momenta = self.rule.new_momenta(params)
        work.train()
        for step in range(plan.steps):
            rows, _ = plan.rows(step, step + 1)  # drawn augmentation left unapplied
            x = self.augmenter.train_batch(images.index_select(0, rows), None)
            y = self.task.take_targets(targets, rows)
            with self.precision.autocast():
                loss = self.task.loss(float32(self.task.forward(work, x, y).logits), y)
            for p in params:
                p.grad = None
            loss.backward()
            self.rule.step_reached(params, momenta)
        work.eval()
        return work
