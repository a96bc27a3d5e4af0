"""What the report needs to know about a study, taken from the sweep's manifest.

A sweep's manifest holds its study's whole definition (``definition``: the study file's
contents, ``[report]`` included), so a report lays out any study, built-in or not,
without the installed catalogue.  Sweeps written before manifests carried the
definition fall back to the ``[report]`` of the shipped study file
of the same name, read here with ``tomllib`` (importing :mod:`search_spaces` would
import torch).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as the tomli package
    import tomli as tomllib


def shipped_reports() -> dict[str, dict[str, Any]]:
    """``{study name: its [report] table}`` of every study file shipped in the package."""
    folder = resources.files("search_spaces") / "studies"
    out: dict[str, dict[str, Any]] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if entry.name.endswith(".toml"):
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
            out[data["name"]] = dict(data.get("report", {}))
    return out


def report_spec(manifests: Iterable[Mapping[str, Any]], study: str) -> dict[str, Any]:
    """The ``[report]`` of ``study``: from the first manifest that carries its definition,
    else the shipped file's (older sweeps), else empty (the generic report)."""
    for manifest in manifests:
        definition = manifest.get("definition")
        if isinstance(definition, Mapping):
            return dict(definition.get("report", {}))
    return shipped_reports().get(study, {})
