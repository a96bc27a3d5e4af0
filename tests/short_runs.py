"""The values the tests' short runs repeat, so that each test names only what it varies.

One local epoch, and the CPU on one thread: exact comparisons hold per device (a GPU machine
must not move a test's run to CUDA) and one thread keeps the CPU's reductions in one order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: pinned to the CPU on one thread, for runs that compare exact numbers
ONE_CPU_THREAD: dict[str, Any] = dict(device="cpu", threads=1)


def short_run(
    dataset: str, *, parties: int, rounds: int, fractions: tuple[float, float], **more: Any
) -> dict[str, Any]:
    """The values of a run of ``rounds`` rounds of one local epoch among ``parties`` on one
    CPU thread, on ``fractions`` = (training, test) shares (0..1) of ``dataset``; ``more``
    adds or overrides any other RunConfig field (``device="auto"`` for a run that takes the
    machine's accelerator where it has one)."""
    values = dict(
        dataset=dataset,
        n_parties=parties,
        rounds=rounds,
        local_epochs=1,
        data_fraction=fractions[0],
        test_fraction=fractions[1],
        **ONE_CPU_THREAD,
    )
    return values | more


#: each party's own validation and test shares (0..1 of its data), scored every other round
PARTY_SCORES: dict[str, Any] = dict(val_fraction=0.2, party_test_fraction=0.2, party_scores_every=2)


def folder_run(root: Path, data_root: Path | str, **more: Any) -> dict[str, Any]:
    """The values of a three-round run of one local epoch on the image folder ``root`` split
    by its own parties, on one CPU thread, caching under ``data_root``; ``more`` adds or
    overrides any other RunConfig field."""
    values = dict(
        dataset=f"folder:{root}",
        partition="natural",
        rounds=3,
        local_epochs=1,
        out_dim=32,
        data_root=str(data_root),
        **ONE_CPU_THREAD,
    )
    return values | more


def site_run(tree: Path, data_root: Path, rounds: int) -> dict[str, Any]:
    """The values of a run of ``rounds`` rounds of one local epoch on a task tree built by
    examples/ (parties by site, batches of 8 at lr 0.05), one thread, seed 0, each party
    holding out 20% for validation and 20% for its own test; not pinned to a device."""
    return dict(
        dataset=f"folder:{tree}", data_root=str(data_root), partition="natural",
        partition_by="site", rounds=rounds, local_epochs=1, batch_size=8, lr=0.05, threads=1,
        seed=0, val_fraction=0.2, party_test_fraction=0.2,
    )  # fmt: skip
