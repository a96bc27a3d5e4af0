"""Fig. 2 of the MOON paper: projection-head outputs of the global and a local model.

With ``representations_at`` (RunConfig: 1-based rounds, e.g. ``"3"`` or ``"1,10"``), at
each of those rounds the run records, on a fixed probe of the test set:

- ``global_z``: the global model the round started from (after r - 1 aggregations: the
  model every party trained from; Fig. 2c), and
- ``local_z``: the first reporting party's model after its local training of round r,
  before aggregation (Fig. 2d),

both the model's ``z`` (``ModelOutput.projection``: the projection head's output; the
encoder's features when the model has no head), float32 arrays of shape (probe size,
out_dim), with the probe's
``labels`` and ``indices`` (rows of the run's evaluated test subset).  The probe is the
first :data:`PROBE_SIZE` of a permutation drawn from a generator of its own (seed
:data:`PROBE_SEED`), sorted: the same images for every seed and method of a test
fraction, and no random stream of the run is touched.  The forward passes run under
``torch.no_grad()`` in eval mode (each model's mode is put back), so a run's results do
not change with the option.

:func:`save_representations` writes one ``round_NNNN.npz`` (numpy, no pickle) per round,
atomically; the report draws the t-SNE panel from them (analysis/figures/representations.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from federated.contract.results import REPRESENTATIONS, representation_file
from federated.evaluation.scoring import evaluate
from federated.runtime.atomic_file import atomic_open
from federated.runtime.precision import FLOAT32, Precision

PROBE_SIZE = 2000
PROBE_SEED = 2021
FOLDER = REPRESENTATIONS


def probe_indices(n_test: int, size: int = PROBE_SIZE) -> torch.Tensor:
    """Rows of the run's test subset in the probe (sorted; all of them when fewer)."""
    generator = torch.Generator().manual_seed(PROBE_SEED)  # its own: the run's streams stay
    order = torch.randperm(n_test, generator=generator)
    return order[: min(size, n_test)].sort().values


class ProjectionCollector:
    """An accumulator of the evaluation loop that keeps each batch's ``z`` (float32, on
    the CPU) instead of scoring it."""

    def __init__(self) -> None:
        self.batches: list[torch.Tensor] = []

    def update(self, outputs: torch.Tensor, targets: Any, owner: Any) -> None:
        self.batches.append(outputs.float().cpu())

    def compute(self) -> np.ndarray:
        return torch.cat(self.batches).numpy()


def projections(
    model: torch.nn.Module,
    images: torch.Tensor,
    augmenter: Any,
    batch_size: int,
    precision: Precision = FLOAT32,
) -> np.ndarray:
    """(n, d) float32 ``z`` of ``model`` on uint8 ``images`` (normalised only), in eval
    mode, the model's mode put back (a party's packed ``job.model`` included): the
    evaluation loop (:func:`~federated.evaluation.scoring.evaluate`) collecting the
    model's ``projection``."""
    return evaluate(
        model,
        images,
        images,
        augmenter,
        batch_size,
        ProjectionCollector(),
        output="projection",
        precision=precision,
    )


class RepresentationProbe:
    """Records Fig. 2's representations at the configured rounds of one run.

    ``last`` holds the latest capture (a dict of arrays and numbers, see the module
    docstring) until the caller writes it; ``seconds`` the time of the latest capture.
    """

    def __init__(
        self,
        rounds: tuple[int, ...],
        test_x: torch.Tensor,
        test_y: torch.Tensor,
        augmenter: Any,
        batch_size: int,
        precision: Precision = FLOAT32,
    ) -> None:
        self.rounds = frozenset(rounds)
        self.precision = precision
        self.indices = probe_indices(test_y.shape[0])
        index = self.indices.to(test_y.device)
        self.images = test_x.index_select(0, index)
        self.labels = test_y.index_select(0, index).cpu().numpy()
        self.augmenter = augmenter
        self.batch_size = batch_size
        self.last: dict[str, Any] | None = None

    def capture(
        self,
        round_number: int,
        party: int,
        global_model: torch.nn.Module,
        local_model: torch.nn.Module,
    ) -> float:
        """Record round ``round_number`` if it is configured; returns the seconds spent
        (0 when not), which the round leaves out of its training time."""
        if round_number not in self.rounds:
            return 0.0
        start = time.perf_counter()
        self.last = {
            "round": np.int64(round_number),
            "party": np.int64(party),
            "labels": self.labels.astype(np.int64),
            "indices": self.indices.numpy().astype(np.int64),
            "global_z": self._projections(global_model),
            "local_z": self._projections(local_model),
        }
        return time.perf_counter() - start

    def _projections(self, model: torch.nn.Module) -> np.ndarray:
        return projections(model, self.images, self.augmenter, self.batch_size, self.precision)


def save_representations(folder: str | os.PathLike, capture: dict[str, Any]) -> Path:
    """Write one capture as ``<folder>/round_NNNN.npz`` atomically; returns the file."""
    path = Path(folder) / representation_file(int(capture["round"]))
    with atomic_open(path, "wb") as fh:
        np.savez(fh, **capture)
    return path
