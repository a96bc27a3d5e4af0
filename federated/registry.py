"""Where every method lives: name -> ``module:Class``, and plug-ins by import path.

A new algorithm is one file in :mod:`federated.algorithms` and one line in
:data:`ALGORITHM_PATHS`; a new server optimizer one file in :mod:`federated.server`
and one line in :data:`SERVER_OPTIMIZER_PATHS`; a new task kind one folder
``federated/tasks/<kind>/`` and one line in :data:`TASK_PATHS`.  A user's own method
needs no line at all: ``--algorithm package.module:Class`` (or
``server_optimizer=package.module:Class`` in a study file or sweep) imports it.

Entries are import paths, not classes, so that :mod:`federated.config.run_config` can look methods
up without importing torch-side modules at import time, and the torch-side modules
never import the config: the dependency runs one way (config -> registry -> method
module -> :mod:`federated.params`).
"""

from __future__ import annotations

import importlib
from typing import Any

from federated.params import ConfigError

ALGORITHM_PATHS: dict[str, str] = {
    "fedavg": "federated.algorithms.fedavg:FedAvg",
    "fedprox": "federated.algorithms.fedprox:FedProx",
    "moon": "federated.algorithms.moon:Moon",
    "scaffold": "federated.algorithms.scaffold:Scaffold",
    "solo": "federated.algorithms.solo:Solo",
    "l2rep": "federated.algorithms.l2rep:L2Representation",
    "fednova": "federated.algorithms.fednova:FedNova",
    "feddyn": "federated.algorithms.feddyn:FedDyn",
    "fedper": "federated.algorithms.fedper:FedPer",
    "fedrep": "federated.algorithms.fedrep:FedRep",
    "lg-fedavg": "federated.algorithms.lg_fedavg:LgFedAvg",
    "ditto": "federated.algorithms.ditto:Ditto",
    "apfl": "federated.algorithms.apfl:Apfl",
    "fedbn": "federated.algorithms.fedbn:FedBN",
}

SERVER_OPTIMIZER_PATHS: dict[str, str] = {
    "avg": "federated.server.base:ServerOptimizer",
    "fedavgm": "federated.server.fedavgm:FedAvgM",
    "fedadam": "federated.server.fedadam:FedAdam",
    "fedyogi": "federated.server.fedadam:FedYogi",
}

# MOON's temperature schedules (tau_schedule): a new schedule is one file and one line
TEMPERATURE_SCHEDULE_PATHS: dict[str, str] = {
    "fixed": "federated.algorithms.temperature:TemperatureSchedule",
    "annealed": "federated.algorithms.annealed_temperature:AnnealedTemperature",
}

# The task kinds (federated/tasks/<kind>/, docs/adding-a-task.md): a new kind is one
# folder and one line; the data say which task they are (DatasetSpec.task), a user's own
# is task=package.module:Class
TASK_PATHS: dict[str, str] = {
    "classification": "federated.tasks.classification.task:Classification",
    "score": "federated.tasks.score.task:ScoreTask",
    "detection": "federated.tasks.detection.task:Detection",
    "segmentation": "federated.tasks.segmentation.task:Segmentation",
    "multilabel": "federated.tasks.multilabel.task:MultiLabel",
}

KINDS = {
    "algorithm": (ALGORITHM_PATHS, "federated.algorithms.base:Algorithm"),
    "server_optimizer": (SERVER_OPTIMIZER_PATHS, "federated.server.base:ServerOptimizer"),
    "tau_schedule": (
        TEMPERATURE_SCHEDULE_PATHS,
        "federated.algorithms.temperature:TemperatureSchedule",
    ),
    "task": (TASK_PATHS, "federated.tasks.base:Task"),
}


def kind_specs() -> dict[str, Any]:
    """Each registered kind's torch-free declaration (the ``SPEC`` of the ``spec`` module
    beside its task module, ``federated/tasks/<kind>/spec.py``) by its registered name,
    for words that list the kinds (help texts) without importing torch."""
    specs = {}
    for name, path in TASK_PATHS.items():
        package = path.partition(":")[0].rpartition(".")[0]
        specs[name] = importlib.import_module(package + ".spec").SPEC
    return specs


def is_plugin(name: str) -> bool:
    """``package.module:Class`` rather than a registered name."""
    return ":" in name


def _import(path: str) -> Any:
    module_name, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


def load_method(kind: str, name: str) -> type:
    """The class registered as ``name`` (or imported from ``package.module:Class``) for
    ``kind`` ("algorithm", "server_optimizer", "tau_schedule" or "task");
    :class:`ConfigError` if there is none."""
    paths, base_path = KINDS[kind]
    allowed = "one of " + ", ".join(paths) + ", or package.module:Class"
    if name in paths:
        return _import(paths[name])
    if not is_plugin(name):
        raise ConfigError(kind, name, allowed)
    module_name, _, attribute = name.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as err:  # a user's module may fail on import in any way: one line
        what = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        raise ConfigError(kind, name, f"an importable module ({what.strip()})") from None
    cls = getattr(module, attribute, None)
    base = _import(base_path)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(kind, name, f"a subclass of {base.__name__} in {module_name}")
    return cls
