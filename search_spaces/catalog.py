"""The built-in studies: the study files shipped in ``search_spaces/studies/``.

Each study of the MOON paper (README, "Sweeps") is one TOML file there, read by the same loader as a
user's own (:mod:`search_spaces.study_file`); the file also keeps how the report lays the
study out.  Unless a study fixes it, ``mu`` resolves per (algorithm, dataset) to the
paper's best (MOON 5 / FedProx 0.01 on CIFAR-10, 1 / 0.001 on CIFAR-100 and
Tiny-ImageNet, MOON 1 elsewhere) and ``tau`` to 0.5, so "best mu per dataset" needs no
extra axis.
"""

from __future__ import annotations

import dataclasses
from importlib import resources

from search_spaces.study import Study
from search_spaces.study_file import load_study_file

# The order ``--list`` shows them in: the paper's main results first, then ablations.
LISTING_ORDER = (
    "comparison",
    "moon_mu",
    "fedprox_mu",
    "temperature",
    "out_dim",
    "local_epochs",
    "heterogeneity",
    "parties",
    "loss_ablation",
    "projection_head",
    "negatives",
    "server_momentum",
    "iid",
    "annealed_tau",
)


def builtin_studies() -> list[Study]:
    """Every shipped study file, read and checked, in :data:`LISTING_ORDER` (others after)."""
    folder = resources.files("search_spaces") / "studies"
    # the shipped files hold the paper's settings: budgets scale them
    studies = [
        dataclasses.replace(load_study_file(entry), paper_settings=True)
        for entry in sorted(folder.iterdir(), key=lambda e: e.name)
        if entry.name.endswith(".toml")
    ]
    rank = {name: i for i, name in enumerate(LISTING_ORDER)}
    return sorted(studies, key=lambda s: (rank.get(s.name, len(rank)), s.name))


STUDIES_LIST: list[Study] = builtin_studies()
STUDIES: dict[str, Study] = {s.name: s for s in STUDIES_LIST}
