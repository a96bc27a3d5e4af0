"""The one in-memory cache of loaded data sets, per process: a sweep driver and a trial
worker load the same data set again and again (a plan, every trial a reused actor runs),
and each load after the first takes the tensors already decoded.

Every loader (folder kinds, ``hf:`` sources, the built-in data sets) keeps its data here
under a key that names the loader and everything the load depends on (the files'
fingerprint, the image settings, the party field ...), so a changed folder is a new key.
At most :data:`ENTRIES` are held, the least recently used dropped first: a worker's
memory holds a couple of decoded data sets, not every one it ever read.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

#: loaded data sets held per process (the sweep driver's and a trial's, a test's two)
ENTRIES = 2

_held: OrderedDict[Hashable, Any] = OrderedDict()


def held(key: Hashable) -> Any | None:
    """The data loaded under ``key`` in this process (now the most recently used), or
    None."""
    value = _held.get(key)
    if value is not None:
        _held.move_to_end(key)
    return value


def hold(key: Hashable, value: Any) -> Any:
    """Keep ``value`` under ``key``, dropping the least recently used beyond
    :data:`ENTRIES`; returns ``value``."""
    _held[key] = value
    _held.move_to_end(key)
    while len(_held) > ENTRIES:
        _held.popitem(last=False)
    return value


def forget() -> None:
    """Drop every held data set (a test that rewrites a folder in place)."""
    _held.clear()
