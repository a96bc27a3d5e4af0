"""Example training images per party for a feature-skewed sweep: what each party's
inputs look like under its noise level or rotation, drawn by the driver (it has the
data) into ``feature_examples.npz`` for the report to show (the report never imports
the engine).  Written only when some trial has a feature skew."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from federated.config.run_config import RunConfig
from federated.contract.results import FEATURE_EXAMPLES
from federated.heterogeneity.feature_skew import FeatureSkew
from federated.heterogeneity.partition import partition_for_run
from federated.runtime.atomic_file import atomic_open
from study.preflight import training_data

# parties shown per setting (evenly spaced over 0..N-1) and images per party
SHOWN_PARTIES = 6
IMAGES_PER_PARTY = 3


def write_feature_examples(configs: list[tuple[str, RunConfig]], sweep_dir: Path) -> bool:
    """One row of example images per distinct skew setting of the sweep (seed of its
    first trial); False when no trial has a feature skew (nothing written)."""
    settings: dict[tuple, RunConfig] = {}
    for _, config in configs:
        if FeatureSkew.from_config(config) is not None:
            settings.setdefault((config.feature_skew, config.feature_skew_level), config)
    if not settings:
        return False
    data, labels, parties_of = training_data(next(iter(settings.values())))
    images, names, shown, levels = [], [], [], []
    # one width for every row, even where settings differ in their number of parties
    count = min(SHOWN_PARTIES, *(c.n_parties for c in settings.values()))
    for (kind, level), config in sorted(settings.items()):
        skew = FeatureSkew.from_config(config)
        partition = partition_for_run(labels, config, parties_of)
        parties = np.linspace(0, config.n_parties - 1, count).round().astype(int).tolist()
        images.append(skew.example_images(data.train_x, parties, partition, IMAGES_PER_PARTY))
        names.append(f"{kind} {level:g}")
        shown.append(parties)
        per_party = skew.noise_std if kind == "noise" else skew.angles
        levels.append([float(per_party[p]) for p in parties])
    with atomic_open(sweep_dir / FEATURE_EXAMPLES, "wb") as fh:
        np.savez_compressed(
            fh,
            images=np.stack(images),
            settings=np.array(names),
            parties=np.array(shown),
            levels=np.array(levels),
        )
    return True
