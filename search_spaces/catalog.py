"""The built-in studies: the study files shipped in ``search_spaces/studies/``.

Each study of the MOON paper (README, "Sweeps") is one TOML file there, read by the same loader as a
user's own (:mod:`search_spaces.study_file`); the file also keeps how the report lays the
study out.  Unless a study fixes it, ``mu`` resolves per (algorithm, dataset) to the
paper's best (MOON 5 / FedProx 0.01 on CIFAR-10, 1 / 0.001 on CIFAR-100 and
Tiny-ImageNet, MOON 1 elsewhere) and ``tau`` to 0.5, so "best mu per dataset" needs no
extra axis.

A study's file is read and checked when the study is first asked for, not when this
module is imported: a sweep reads one study, and every command that imports the studies
(a sweep's driver, the report, ``--help``) would otherwise read and check all of them
(about 0.2 CPU-s).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator, Mapping
from importlib import resources
from importlib.resources.abc import Traversable

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


def _study_files() -> dict[str, Traversable]:
    """Each shipped study file by its name (the file's stem), in :data:`LISTING_ORDER`
    (others after, by name)."""
    folder = resources.files("search_spaces") / "studies"
    files = {e.name.removesuffix(".toml"): e for e in folder.iterdir() if e.name.endswith(".toml")}
    rank = {name: i for i, name in enumerate(LISTING_ORDER)}
    return {name: files[name] for name in sorted(files, key=lambda n: (rank.get(n, len(rank)), n))}


@functools.cache
def _read(entry: Traversable) -> Study:
    # the shipped files hold the paper's settings: budgets scale them
    study = dataclasses.replace(load_study_file(entry), paper_settings=True)
    stem = entry.name.removesuffix(".toml")
    if study.name != stem:
        raise ValueError(f"{entry.name}: name = {study.name!r} (allowed: {stem!r}, its file's)")
    return study


class BuiltInStudies(Mapping[str, Study]):
    """The shipped studies by name, in listing order; each file is read and checked the
    first time its study is asked for (module docstring)."""

    def __init__(self) -> None:
        self._files = _study_files()

    def __getitem__(self, name: str) -> Study:
        return _read(self._files[name])

    def __iter__(self) -> Iterator[str]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


STUDIES: Mapping[str, Study] = BuiltInStudies()
