"""Fig. 2 of the MOON paper: t-SNE maps of the global and a local model's representations.

Trials run with ``representations_at`` save ``representations/round_NNNN.npz`` in their
folders (federated/evaluation/representations.py: ``global_z``, ``local_z``, ``labels``, ``round``,
``party``).  :func:`representation_captures` picks, per method/setting, the completed
trial of the lowest seed and its latest saved round; :func:`tsne_panel` draws one row per
method — the global model the round started from (Fig. 2c) and the first reporting
party's model after its local training (Fig. 2d) — coloured by class.  The maps are
scikit-learn's ``TSNE`` (2-D, PCA initialisation, perplexity 30, seeded with
:data:`TSNE_SEED`), so a report draws the same maps every time.  Files are read through
:func:`analysis.reading.trial_files.read_representation` (``allow_pickle=False``: the report never
unpickles; a damaged capture is named, never drawn).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot is imported

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis.reading.loading import COMPLETED, Results
from analysis.reading.trial_files import DamagedFileError, read_representation
from analysis.tables.table import key_order, row_label
from federated.contract.results import REPRESENTATIONS

FOLDER = REPRESENTATIONS
TSNE_SEED = 0
PANEL = 3.2  # inches per map


@dataclass(frozen=True)
class Capture:
    """One trial's saved representations at one round (arrays as saved)."""

    label: str  # the method/setting's row label
    trial: str
    seed: int
    round: int
    party: int
    labels: np.ndarray  # (n,) classes
    global_z: np.ndarray  # (n, d)
    local_z: np.ndarray  # (n, d)


def read_capture(path: Path, label: str, trial: str, seed: int) -> Capture:
    """One ``round_NNNN.npz`` (no pickle), checked by
    :func:`analysis.reading.trial_files.read_representation`; raises its
    :class:`~analysis.reading.trial_files.DamagedFileError` when damaged."""
    arrays = read_representation(path)
    return Capture(
        label,
        trial,
        seed,
        int(arrays["round"]),
        int(arrays["party"]),
        arrays["labels"],
        arrays["global_z"],
        arrays["local_z"],
    )


def representation_captures(
    results: Results,
    trials: pd.DataFrame,
    keys: Sequence[str],
    not_counted: list[str] | None = None,
) -> list[Capture]:
    """Per ``keys`` value in reading order: the lowest-seed completed trial's latest
    readable capture (trials without one are passed over).  A damaged capture is named
    in ``not_counted`` (path and reason) and the next one (an earlier round, else the
    next seed) drawn instead."""
    done = trials[trials["status"] == COMPLETED]
    paths = {sweep.name: sweep.path for sweep in results.sweeps}
    out = []
    for key in key_order(done, keys):
        cell = done
        for column, value in zip(keys, key):
            cell = cell[cell[column] == value]
        capture = None
        for _, trial in cell.sort_values("seed").iterrows():
            folder = paths[trial["sweep"]] / trial["trial"] / FOLDER
            files = sorted(folder.glob("round_*.npz"), reverse=True) if folder.is_dir() else []
            for path in files:
                try:
                    capture = read_capture(
                        path, row_label(keys, key), trial["trial"], int(trial["seed"])
                    )
                    break
                except DamagedFileError as err:
                    if not_counted is not None:
                        not_counted.append(f"{err}: left out of Fig. 2 (t-SNE)")
            if capture is not None:
                out.append(capture)
                break
    return out


def tsne_map(z: np.ndarray) -> np.ndarray:
    """(n, 2) seeded t-SNE embedding of ``z`` (n, d)."""
    from sklearn.manifold import TSNE

    perplexity = min(30.0, max(2.0, (len(z) - 1) / 3))
    tsne = TSNE(2, perplexity=perplexity, init="pca", random_state=TSNE_SEED)
    return tsne.fit_transform(np.asarray(z, dtype=np.float32))


def tsne_panel(captures: Sequence[Capture], *, title: str = "") -> plt.Figure:
    """One row per capture: global model (left), local model (right), points coloured
    by class (tab10; tab20 / a continuous map beyond)."""
    n = len(captures)
    fig, axes = plt.subplots(n, 2, figsize=(2 * PANEL + 1.2, n * PANEL + 0.6), squeeze=False)
    classes = int(max(c.labels.max() for c in captures)) + 1
    cmap = plt.get_cmap("tab10" if classes <= 10 else "tab20" if classes <= 20 else "viridis")
    for row, capture in zip(axes, captures):
        for ax, z, which in (
            (row[0], capture.global_z, "global model"),
            (row[1], capture.local_z, f"local model (party {capture.party})"),
        ):
            xy = tsne_map(z)
            ax.scatter(
                xy[:, 0],
                xy[:, 1],
                c=capture.labels,
                cmap=cmap,
                vmin=-0.5,
                vmax=classes - 0.5,
                s=2,
                linewidths=0,
            )
            ax.set_xticks([]), ax.set_yticks([])
            ax.set_title(f"{capture.label}: {which}, round {capture.round}", fontsize=8)
    handles = [
        plt.Line2D(
            [],
            [],
            marker="o",
            linestyle="",
            markersize=4,
            color=cmap(i / max(1, classes - 1)) if classes > 20 else cmap(i),
        )
        for i in range(min(classes, 20))
    ]
    fig.legend(
        handles,
        [str(i) for i in range(len(handles))],
        title="class",
        loc="center right",
        fontsize=7,
        title_fontsize=7,
    )
    if title:
        fig.suptitle(title, fontsize=10)
    fig.subplots_adjust(
        left=0.03,
        right=0.86,
        bottom=0.03,
        top=1 - (0.6 if title else 0.3) / (n * PANEL + 0.6),  # title room in inches
        wspace=0.08,
        hspace=0.25,
    )
    return fig
