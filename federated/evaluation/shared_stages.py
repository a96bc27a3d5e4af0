"""Scoring many parties' own models on the pooled test set without repeating the stages
they share with the global model.

A personalised method evaluates every party's own model on the whole test set each
round (:meth:`federated.evaluation.round_evaluation.RoundEvaluation._personal`): N full
passes where FedAvg makes one.  A :class:`~federated.models.FedConModel` runs three
stages in order — ``encoder``, ``head``, ``classifier`` — and a partly personal method
keeps only some of them at the party: FedPer's party model is the global encoder with
its own head and output layer.  The global model's leading stages then compute, batch
by batch, exactly what each such party's would; :class:`SharedStages` computes them
once per round and runs only the rest per party.

Exactness: a stage counts as shared when every one of its state entries (parameters and
buffers) is ``torch.equal`` to the global model's, and its outputs are kept per
evaluation batch with the batch boundaries of :func:`federated.evaluation.scoring.evaluate`;
the party's remaining stages then take the very inputs its own forward pass would, so
its scores are bitwise those of scoring it whole.  A model that is not a plain
``FedConModel`` (its own ``forward``), a party with nothing shared (LG-FedAvg keeps the
encoder, FedBN its BatchNorm layers, Ditto/APFL/SOLO whole models) or outputs that would
exceed :data:`CACHE_BYTES` are scored whole, as before.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from federated.data import Augmenter
from federated.models import FedConModel
from federated.tasks.base import MetricAccumulator, Scores

#: the stages of FedConModel.forward, in order
STAGES = ("encoder", "head", "classifier")
#: the most bytes the global model's stage outputs over the test set may take (on the
#: test set's device) for one round; beyond it parties are scored whole
CACHE_BYTES = 512 * 2**20


def staged(model: torch.nn.Module) -> bool:
    """Whether ``model``'s forward pass is FedConModel's three stages in order."""
    return isinstance(model, FedConModel) and type(model).forward is FedConModel.forward


class SharedStages:
    """One round's pooled-test scoring of parties' own models (module docstring): the
    global model's outputs of its first k stages, computed at most once per k."""

    def __init__(
        self,
        global_model: torch.nn.Module,
        images: torch.Tensor,
        targets: torch.Tensor,
        augmenter: Augmenter,
        batch_size: int,
        accumulator: Callable[[], MetricAccumulator],
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.global_model = global_model
        self.images, self.targets = images, targets
        self.augmenter = augmenter
        self.batch_size = batch_size
        self.accumulator = accumulator
        self.cache_bytes = cache_bytes
        self._global_state = global_model.state_dict() if staged(global_model) else None
        # k -> the global model's first k stages' output, one tensor per evaluation batch
        # (None: over the byte budget)
        self._outputs: dict[int, list[torch.Tensor] | None] = {}

    def shared_count(self, model: torch.nn.Module) -> int:
        """How many leading stages ``model`` shares with the global model (at most two:
        the output layer always runs per party; 0 when either is not staged)."""
        if self._global_state is None or not staged(model):
            return 0
        state = model.state_dict()
        shared = 0
        for stage in STAGES[:-1]:
            prefix = stage + "."
            for key, value in state.items():
                if key.startswith(prefix) and not torch.equal(value, self._global_state[key]):
                    return shared
            shared += 1
        return shared

    @torch.no_grad()
    def _stage_outputs(self, k: int) -> list[torch.Tensor] | None:
        if k in self._outputs:
            return self._outputs[k]
        was_training = self.global_model.training
        self.global_model.eval()
        stages = [getattr(self.global_model, s) for s in STAGES[:k]]
        outputs: list[torch.Tensor] | None = []
        used = 0
        for start in range(0, self.images.shape[0], self.batch_size):
            x = self.augmenter.normalize(self.images[start : start + self.batch_size])
            for stage in stages:
                x = stage(x)
            used += x.numel() * x.element_size()
            if used > self.cache_bytes:
                outputs = None  # too large to keep: score such parties whole
                break
            outputs.append(x)
        self.global_model.train(was_training)
        self._outputs[k] = outputs
        return outputs

    @torch.no_grad()
    def scores(self, model: torch.nn.Module) -> Scores | None:
        """``model`` on the test set through the shared stages' outputs, or None when it
        shares none (or they are over the budget): the caller scores it whole."""
        k = self.shared_count(model)
        if k == 0:
            return None
        outputs = self._stage_outputs(k)
        if outputs is None:
            return None
        was_training = model.training
        model.eval()
        stages = [getattr(model, s) for s in STAGES[k:]]
        accumulator = self.accumulator()
        for index, x in enumerate(outputs):
            # a copy: a stage that begins in place (a ReLU) must not change the kept outputs
            x = x.clone()
            for stage in stages:
                x = stage(x)
            start = index * self.batch_size
            accumulator.update(x, self.targets[start : start + self.batch_size], None)
        model.train(was_training)
        return accumulator.compute()
