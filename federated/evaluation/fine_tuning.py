"""Evaluation with local fine-tuning (``finetune_epochs`` = E_ft > 0; FedAvg+FT).

Before a party's own evaluations of a round — its local test split and its validation
split — a copy of the model it is evaluated with (the global model, or the method's
personal model for it) trains E_ft epochs on the party's own training data; the
party's scores are the fine-tuned copy's, and the copy is then thrown away: nothing of
it reaches training, the global model or the pooled test set (``test_*`` is the
untuned model's).  This is FederatedScope's ``finetune.before_eval``, FLGo's
``fedavg_finetune`` and pfl-research's ``Reptile`` evaluation, and the baseline Matsuda
et al. (2022) find often beats personalised methods.

The fine-tuning is the run's local solver (:class:`~federated.sgd_rule.SgdRule`: its
``lr``, ``momentum`` and ``weight_decay``, a fresh momentum) on the task's own forward
pass and loss (:meth:`~federated.tasks.base.Task.forward`, so a detector gets its
boxes), each step the sequential trainer's (:meth:`~federated.sgd_rule.SgdRule.step_reached`
after ``backward``: parameters the loss did not reach are left be), ``batch_size``
samples a step over a shuffled pass of the party's training rows per epoch, without
augmentation or feature skew (the local test and validation splits have neither).  Its
batches are not a round's batch plan
(:class:`~federated.execution.batch_plan.PartyBatches`): the plan drops an epoch's last
partial batch, fine-tuning keeps it.  The order is drawn from a generator
of its own per (round, party), seeded from the run's ``finetune`` stream: fine-tuning
draws nothing from any other stream, so every other number of the run is unchanged.  A
last batch of a single sample is left out (BatchNorm cannot normalise one sample).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch

from federated.data import Augmenter
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
    ) -> None:
        """``rule``: the run's local solver (its ``lr``, ``momentum``, ``weight_decay``)."""
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
        n = int(images.shape[0])
        generator = torch.Generator().manual_seed(finetune_seed(self.seed, round_number, party))
        params = list(work.parameters())
        momenta = self.rule.new_momenta(params)
        work.train()
        for _ in range(self.epochs):
            order = torch.randperm(n, generator=generator).to(images.device)
            for start in range(0, n, self.batch_size):
                rows = order[start : start + self.batch_size]
                if rows.numel() < 2:
                    continue
                x = self.augmenter.train_batch(images.index_select(0, rows), None)
                y = self.task.take_targets(targets, rows)
                loss = self.task.loss(self.task.forward(work, x, y).logits, y)
                for p in params:
                    p.grad = None
                loss.backward()
                self.rule.step_reached(params, momenta)
        work.eval()
        return work
