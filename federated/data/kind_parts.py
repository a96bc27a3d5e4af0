"""What the registered task kinds declare, by import path: a generic layer asks the kinds
(each kind's task class, :data:`federated.registry.TASK_PATHS`) for one part — its folder
reader, its ``hf:`` column decoder, its model family — and never names a kind.

Import paths, not classes: the data and model layers do not import the kinds' packages
(which import them), so neither side imports the other's modules at import time.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

from federated.registry import TASK_PATHS, load_method


def imported(path: str) -> Any:
    """The object ``package.module:name`` names."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


@functools.cache
def _parts(attribute: str, tasks: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
    found: dict[str, Any] = {}
    for name, _ in tasks:
        path = getattr(load_method("task", name), attribute, None)
        if path and path not in found:
            found[path] = imported(path)
    return tuple(found.values())


def kind_parts(attribute: str) -> tuple[Any, ...]:
    """The part each registered kind's task class names by import path in ``attribute``
    (``folder_reader``, ``hub_column`` ...), each once, in the registry's order; kinds
    that declare none are skipped.  Built once per registry content."""
    return _parts(attribute, tuple(TASK_PATHS.items()))
