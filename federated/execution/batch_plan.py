"""The batch plan: which training rows each party sees at each SGD step of a round.

Drawn once per round, before any party trains, from the run's ``batches`` stream, party
by party in the drawn order; every execution path trains from it, so a party sees the
very same batches (and augmentation parameters) whichever path runs it.

Per party and epoch: one random permutation of its samples and one set of augmentation
parameters (both from the stream, in that order).  As in the MOON reference code each
epoch drops its last partial batch; a party smaller than one batch trains on one batch
of all its samples instead of not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from federated.data import Augmenter, AugmentParams
from federated.data.augment import PAD


@dataclass
class PartyBatches:
    """One party's batches for a whole local training, in step order."""

    party: int
    batch: int  # samples per batch
    steps: int  # SGD steps (batches over all epochs)
    index: torch.Tensor  # (steps·batch,) rows of the training tensors, step order
    augment: AugmentParams | None  # the same rows' augmentation parameters

    def rows(self, first: int, stop: int) -> tuple[torch.Tensor, AugmentParams | None]:
        """Rows and augmentation parameters of steps ``first`` .. ``stop - 1``."""
        lo, hi = first * self.batch, stop * self.batch
        augment = None if self.augment is None else self.augment.slice(lo, hi)
        return self.index[lo:hi], augment


def batches_per_epoch(n_samples: int, batch_size: int) -> int:
    """Full batches per epoch; at least one (a small party's one batch is all it has)."""
    return max(1, n_samples // batch_size)


def draw_party_batches(
    party: int,
    n_samples: int,
    offset: int,
    augmenter: Augmenter,
    batch_size: int,
    local_epochs: int,
    generator: torch.Generator,
    rows: torch.Tensor | None = None,
) -> PartyBatches:
    """One party's plan: its ``n_samples`` rows start at ``offset`` of the laid-out
    training set; ``local_epochs`` epochs of batches of ``batch_size`` (or all it has).
    ``rows`` maps a laid-out position to its row of the training tensors (None: the
    positions are the rows); the plan's ``index`` holds those rows."""
    batch = min(batch_size, n_samples)
    used = batches_per_epoch(n_samples, batch_size) * batch
    orders, params = [], []
    for _ in range(local_epochs):
        order = torch.randperm(n_samples, generator=generator)
        order = order.to(augmenter.device, non_blocking=True)
        drawn = augmenter.draw(n_samples, generator)
        picked = order[:used] + offset
        orders.append(picked if rows is None else rows.index_select(0, picked))
        if drawn is not None:
            params.append(drawn.slice(0, used))
    augment = None
    if params:
        augment = AugmentParams(
            torch.cat([p.dy for p in params]),
            torch.cat([p.dx for p in params]),
            torch.cat([p.flip for p in params]),
            None if params[0].angle is None else torch.cat([p.angle for p in params]),
        )
    steps = local_epochs * (used // batch)
    return PartyBatches(party, batch, steps, torch.cat(orders), augment)


def draw_batches(
    parties: Sequence[int],
    sizes: Sequence[int],
    offsets: Sequence[int],
    augmenter: Augmenter,
    batch_size: int,
    local_epochs: int,
    generator: torch.Generator,
    rows: torch.Tensor | None = None,
) -> list[PartyBatches]:
    """The round's plan: every drawn party's batches, in the drawn order (``rows``: as
    :func:`draw_party_batches`)."""
    return [
        draw_party_batches(
            party,
            sizes[party],
            offsets[party],
            augmenter,
            batch_size,
            local_epochs,
            generator,
            rows,
        )
        for party in parties
    ]


def limited(batches: PartyBatches, steps: int | None) -> PartyBatches:
    """The plan's first ``steps`` steps (all of them for None or more): a party that does
    less local work sees the very batches it would have started with."""
    if steps is None or steps >= batches.steps:
        return batches
    rows = steps * batches.batch
    augment = None if batches.augment is None else batches.augment.slice(0, rows)
    return replace(batches, steps=steps, index=batches.index[:rows], augment=augment)


def rotated(batches: PartyBatches, degrees: float) -> PartyBatches:
    """The plan with every sample also rotated by ``degrees`` (a party's rotated domain,
    :mod:`federated.heterogeneity.feature_skew`); a dataset without random augmentation gets the
    identity crop, so only the rotation changes its images."""
    if degrees == 0.0:
        return batches
    n = batches.index.shape[0]
    device = batches.index.device
    angle = torch.full((n,), float(degrees), device=device)
    augment = batches.augment
    if augment is None:
        centre = torch.full((n,), PAD, dtype=torch.long, device=device)
        flip = torch.zeros(n, dtype=torch.bool, device=device)
        augment = AugmentParams(centre, centre.clone(), flip, angle)
    else:
        angle = angle if augment.angle is None else augment.angle + angle
        augment = AugmentParams(augment.dy, augment.dx, augment.flip, angle)
    return replace(batches, augment=augment)
