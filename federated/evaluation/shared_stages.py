"""The evaluation loop's cache of the stages parties' own models share with the global
model, so that scoring many of them on the pooled test set does not repeat them.

A personalised method evaluates every party's own model on the whole test set each
round (:mod:`federated.evaluation.round_evaluation`): N full passes where FedAvg makes
one.  A :class:`~federated.models.FedConModel` runs three stages in order — ``encoder``,
``head``, ``classifier`` — and a partly personal method keeps only some of them at the
party: FedPer's party model is the global encoder with its own head and output layer.
Every such party's leading stages compute, batch by batch, exactly what the global
model's would; :class:`SharedStages` keeps their outputs per evaluation batch, and the
loop (:func:`federated.evaluation.scoring.evaluate`) runs only the rest per party.  The
first party sharing k stages fills the cache for k in its own pass (its stages run one
after another, as its forward does); the next ones start from the kept outputs.

Exactness: a stage counts as shared when every one of its state entries (parameters and
buffers) is ``torch.equal`` to the global model's, and its outputs are kept per
evaluation batch with the loop's batch boundaries; a party's remaining stages then take
the very inputs its own forward pass would, so its scores are bitwise those of scoring
it whole.  A model that is not a plain ``FedConModel`` (its own ``forward``), a party
with nothing shared (LG-FedAvg keeps the encoder, FedBN its BatchNorm layers,
Ditto/APFL/SOLO whole models) or outputs that would exceed :data:`CACHE_BYTES` are
scored whole.
"""

from __future__ import annotations

import torch

from federated.models import FedConModel

#: the stages of FedConModel.forward, in order
STAGES = ("encoder", "head", "classifier")
#: the most bytes the leading stages' outputs over one set may take (on the set's
#: device) for one round; beyond it parties are scored whole
CACHE_BYTES = 512 * 2**20


def staged(model: torch.nn.Module) -> bool:
    """Whether ``model``'s forward pass is FedConModel's three stages in order."""
    return isinstance(model, FedConModel) and type(model).forward is FedConModel.forward


class SharedStages:
    """One round's cache, for one evaluated set, of the outputs of the global model's
    first k stages per evaluation batch (module docstring)."""

    def __init__(self, global_model: torch.nn.Module, cache_bytes: int = CACHE_BYTES) -> None:
        self.cache_bytes = cache_bytes
        self._global_state = global_model.state_dict() if staged(global_model) else None
        # k -> the first k stages' output, one tensor per evaluation batch so far
        # (None: over the byte budget)
        self._outputs: dict[int, list[torch.Tensor] | None] = {}
        self._bytes: dict[int, int] = {}

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

    def run_for(self, model: torch.nn.Module) -> StagedPass | None:
        """``model``'s pass through the cache, or None when it shares no stage (or the
        shared stages' outputs are over the budget): the loop then runs it whole."""
        k = self.shared_count(model)
        if k == 0:
            return None
        if k not in self._outputs:
            self._outputs[k], self._bytes[k] = [], 0
        if self._outputs[k] is None:
            return None
        return StagedPass(self, model, k)

    def _keep(self, k: int, index: int, x: torch.Tensor) -> None:
        """Keep batch ``index``'s output of the first ``k`` stages, or give the cache of
        ``k`` up when it would exceed the budget."""
        kept = self._outputs[k]
        if kept is None or index != len(kept):
            return
        self._bytes[k] += x.numel() * x.element_size()
        if self._bytes[k] > self.cache_bytes:
            self._outputs[k] = None  # too large to keep: later parties are scored whole
            return
        kept.append(x)


class StagedPass:
    """One model's pass through a :class:`SharedStages` cache: its first ``k`` stages
    taken from the cache where kept, run (and kept) where not, the rest run."""

    def __init__(self, cache: SharedStages, model: torch.nn.Module, k: int) -> None:
        self.cache = cache
        self.k = k
        self.leading_stages = [getattr(model, s) for s in STAGES[:k]]
        self.rest_stages = [getattr(model, s) for s in STAGES[k:]]

    def kept(self, index: int) -> torch.Tensor | None:
        """The cached output of the first ``k`` stages on evaluation batch ``index``
        (None: not kept; :meth:`leading` computes it)."""
        kept = self.cache._outputs[self.k]
        return kept[index] if kept is not None and index < len(kept) else None

    def leading(self, index: int, x: torch.Tensor) -> torch.Tensor:
        """The model's first ``k`` stages on batch ``index``'s normalised images ``x``,
        kept for the next models while the budget allows."""
        for stage in self.leading_stages:
            x = stage(x)
        self.cache._keep(self.k, index, x)
        return x

    def rest(self, x: torch.Tensor) -> torch.Tensor:
        """The model's remaining stages on the first ``k`` stages' output ``x``: its
        logits."""
        # a copy: a stage that begins in place (a ReLU) must not change the kept outputs
        x = x.clone()
        for stage in self.rest_stages:
            x = stage(x)
        return x
