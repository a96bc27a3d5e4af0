"""The report's example images of a feature-skewed sweep: per skew setting, a few
training images of parties spread over 0..N-1, as each party sees them (its noise
level or rotation).  Read from the sweep's ``feature_examples.npz``, which the sweep's
driver wrote (numpy arrays only: nothing is unpickled)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from analysis.reading.trial_files import DamagedFileError
from analysis.reading.trial_files import read_feature_examples as read_checked
from federated.contract.results import FEATURE_EXAMPLES


def read_feature_examples(
    sweep_dir: Path, not_counted: list[str] | None = None
) -> dict[str, np.ndarray] | None:
    """The arrays of ``sweep_dir``'s examples (checked by
    :func:`analysis.reading.trial_files.read_feature_examples`), or None when it has none or they
    are damaged: a damaged file is named in ``not_counted`` (path and reason), not a
    reason to lose the rest of the report."""
    try:
        return read_checked(Path(sweep_dir) / FEATURE_EXAMPLES)
    except FileNotFoundError:
        return None
    except DamagedFileError as err:
        if not_counted is not None:
            not_counted.append(f"{err}: no example-image figure for this sweep")
        return None


def feature_examples_figure(arrays: dict[str, np.ndarray]):
    """One panel row per (setting, image), one column per party; titles give the
    party and its level (noise std on the 0..1 scale, or the angle in degrees)."""
    import matplotlib.pyplot as plt

    images = arrays["images"]
    settings, parties, per_party = images.shape[:3]
    rows = settings * per_party
    fig, axes = plt.subplots(
        rows, parties, figsize=(1.3 * parties, 1.3 * rows + 0.4), squeeze=False
    )
    for s in range(settings):
        kind = str(arrays["settings"][s])
        unit = "°" if kind.startswith("rotation") else ""
        what = "angle" if unit else "σ"
        for k in range(per_party):
            for p in range(parties):
                ax = axes[s * per_party + k][p]
                img = images[s, p, k]
                if img.shape[0] == 1:
                    ax.imshow(img[0], cmap="gray", vmin=0, vmax=1)
                else:
                    ax.imshow(np.transpose(img, (1, 2, 0)))
                ax.set_xticks([])
                ax.set_yticks([])
                if k == 0:
                    level = float(arrays["levels"][s, p])
                    ax.set_title(
                        f"party {int(arrays['parties'][s, p])}\n{what}={level:.2g}{unit}",
                        fontsize=7,
                    )
                if p == 0 and k == 0:
                    ax.set_ylabel(kind, fontsize=7)
    fig.suptitle("Feature skew: training images as each party sees them", fontsize=9)
    fig.tight_layout()
    return fig
