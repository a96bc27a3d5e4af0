"""Combining a round's contributions: the :class:`Aggregator` interface and its default,
the weighted mean w = sum_i (|D_i| / |D|) · w_i over the drawn parties.

:class:`WeightedAverage` accumulates parties one at a time as they finish, so a round
holds two copies of the model (the running sum and the party being trained) however
many parties are drawn.  Floating-point entries of the state (parameters, BatchNorm
statistics) are averaged in their own dtype, in party order, so the result is
deterministic; integer entries (BatchNorm's ``num_batches_tracked``) are averaged in
float64 and rounded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from federated.server.contribution import Contribution


def aggregation_weights(sizes: Sequence[int]) -> list[float]:
    """|D_i| / sum_j |D_j| for the parties drawn this round."""
    total = float(sum(sizes))
    return [n / total for n in sizes]


class WeightedAverage:
    """Running weighted sum of model states with fixed keys."""

    def __init__(self, template: Mapping[str, torch.Tensor]) -> None:
        self._sum = {
            k: torch.zeros_like(v, dtype=v.dtype if v.is_floating_point() else torch.float64)
            for k, v in template.items()
        }
        self._float_keys = [k for k, v in template.items() if v.is_floating_point()]
        self._other_keys = [k for k, v in template.items() if not v.is_floating_point()]
        self._dtypes = {k: v.dtype for k, v in template.items()}
        self.total_weight = 0.0

    def add(self, state: Mapping[str, torch.Tensor], weight: float) -> None:
        with torch.no_grad():
            if self._float_keys:  # foreach ops refuse empty lists
                torch._foreach_add_(
                    [self._sum[k] for k in self._float_keys],
                    [state[k].detach() for k in self._float_keys],
                    alpha=weight,
                )
            for k in self._other_keys:
                self._sum[k].add_(state[k].to(torch.float64), alpha=weight)
        self.total_weight += weight

    def result(self) -> dict[str, torch.Tensor]:
        """The weighted sum (the weighted mean when the weights sum to one)."""
        out = {k: self._sum[k] for k in self._float_keys}
        for k in self._other_keys:
            out[k] = self._sum[k].round().to(self._dtypes[k])
        return out


def weighted_average(
    states: Sequence[Mapping[str, torch.Tensor]], sizes: Sequence[int]
) -> dict[str, torch.Tensor]:
    """The |D_i|-weighted mean of ``states``."""
    average = WeightedAverage(states[0])
    for state, weight in zip(states, aggregation_weights(sizes)):
        average.add(state, weight)
    return average.result()


class Aggregator:
    """Combines one round's contributions, added one party at a time in draw order."""

    #: whether :meth:`result` is taken in a round where nobody reported (a mechanism that
    #: releases every round, such as DP-FedAvg under Poisson sampling's empty cohorts)
    releases_empty: bool = False

    def add(self, contribution: Contribution) -> None:
        """Take in one party's contribution (its tensors are valid during this call only)."""
        raise NotImplementedError

    def result(self) -> dict[str, torch.Tensor] | None:
        """The combined model state the server optimizer steps towards; ``None`` when the
        method keeps no global model (SOLO)."""
        raise NotImplementedError


class WeightedMean(Aggregator):
    """The default: the |D_i|-weighted mean of the drawn parties' weights (FedAvg)."""

    def __init__(self, template: Mapping[str, torch.Tensor]) -> None:
        self.average = WeightedAverage(template)

    def add(self, contribution: Contribution) -> None:
        self.average.add(contribution.weights, contribution.weight)

    def result(self) -> dict[str, torch.Tensor]:
        return self.average.result()


class NoAggregation(Aggregator):
    """Nothing is combined: every party keeps its own model (SOLO)."""

    def add(self, contribution: Contribution) -> None:
        return None

    def result(self) -> None:
        return None
