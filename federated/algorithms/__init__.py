"""Federated methods (the party rules and how their contributions combine).

The registry is :data:`federated.registry.ALGORITHM_PATHS` (name -> ``module:Class``);
:data:`ALGORITHMS` is it with the classes loaded.  A new method: one file here with an
:class:`Algorithm` subclass, one line in that registry.
"""

from __future__ import annotations

from federated.algorithms.base import Algorithm, Contribution, LocalJob, LossTerms
from federated.registry import ALGORITHM_PATHS, load_method

ALGORITHMS: dict[str, type[Algorithm]] = {
    name: load_method("algorithm", name) for name in ALGORITHM_PATHS
}

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "Contribution",
    "LocalJob",
    "LossTerms",
]
