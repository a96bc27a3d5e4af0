"""Ad hoc studies from the command line: ``--vary FIELD=VALUES`` makes an axis.

    --vary mu=0,0.1,1                 grid values (comma-separated)
    --vary mu=loguniform:0.01:10      an Optuna range: uniform, loguniform, int, logint
    --vary prev_models=categorical:1,2,5
    --vary mu=0.1,1,5@loguniform:0.01:10    both: a grid and the range Optuna searches

The axes become a study dict in the study-file form and go through the same checks
(:func:`search_spaces.study_file.study_from_dict`), so an ad hoc study plans exactly the
trials of the study file that says the same; errors name the ``--vary`` item.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from search_spaces.study import Study
from search_spaces.study_file import (
    RANGE_KINDS,
    StudyFileError,
    check_fields,
    first_grid_point,
    study_from_dict,
)

SOURCE = "--vary"


def _range(item: str, text: str) -> dict[str, Any]:
    kind, _, rest = text.partition(":")
    if kind == "categorical":
        choices = [c.strip() for c in rest.split(",") if c.strip()]
        return {"kind": kind, "choices": choices}
    parts = rest.split(":")
    if len(parts) != 2:
        raise StudyFileError(
            f"{SOURCE} {item}", "range", text, f"{kind}:LOW:HIGH, e.g. {kind}:0.01:10"
        )
    number = int if kind in ("int", "logint") else float
    try:
        low, high = (number(p) for p in parts)
    except ValueError:
        raise StudyFileError(
            f"{SOURCE} {item}", "range", text, f"{kind}:LOW:HIGH with {number.__name__} ends"
        ) from None
    return {"kind": kind, "low": low, "high": high}


def parse_vary(item: str) -> dict[str, Any]:
    """One ``--vary`` item as a study file's ``[[axes]]`` table."""
    if "=" not in item:
        raise StudyFileError(SOURCE, "item", item, "FIELD=v1,v2,... or FIELD=KIND:LOW:HIGH")
    name, text = (part.strip() for part in item.split("=", 1))
    grid_text, _, range_text = text.partition("@")
    if ":" in grid_text and not range_text:  # KIND:LOW:HIGH (a range, not values)
        grid_text, range_text = "", grid_text
    axis: dict[str, Any] = {"name": name}
    if grid_text:
        values = [v.strip() for v in grid_text.split(",")]
        if not all(values):
            raise StudyFileError(
                f"{SOURCE} {item}", "values", text, "comma-separated values, none empty"
            )
        axis["values"] = values
    if range_text:
        if range_text.split(":", 1)[0] not in RANGE_KINDS:
            raise StudyFileError(
                f"{SOURCE} {item}", "range", range_text, "a range kind: " + ", ".join(RANGE_KINDS)
            )
        axis["optuna"] = _range(item, range_text)
    if not grid_text and not range_text:
        raise StudyFileError(f"{SOURCE} {item}", "values", text, "values or a range after FIELD=")
    return axis


def adhoc_study(
    items: list[str],
    name: str | None,
    given: Mapping[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
) -> Study:
    """The study ``--vary`` items describe, named ``name`` (default ``adhoc``); ``given``:
    the fields ``--set`` (and ``--dataset``) give every trial, beside which the axes'
    values are checked; ``flags``: each given field's flag as typed (``--set
    n_parties=10000``), which a refusal of that field names."""
    axes = [parse_vary(item) for item in items]
    varied = {axis["name"] for axis in axes}
    # a comma list kept as written is another axis's values, not one value for every trial
    beside = {
        k: v
        for k, v in (given or {}).items()
        if k not in varied and not (isinstance(v, str) and "," in v)
    }
    check_given(beside, flags or {}, axes)
    try:
        return study_from_dict(
            {
                "name": name or "adhoc",
                "description": "ad hoc: " + " x ".join(items),
                "axes": axes,
            },
            SOURCE,
            beside,
        )
    except StudyFileError as err:
        # name the --vary item rather than the axes[i] the study dict gives it
        match = re.match(r"axes\[(\d+)\]\.?(.*)", err.key)
        if not match:
            raise
        item = items[int(match.group(1))]
        raise StudyFileError(
            f"{SOURCE} {item}", match.group(2) or "axis", err.value, err.allowed
        ) from None


def check_given(
    given: Mapping[str, Any], flags: Mapping[str, str], axes: list[dict[str, Any]]
) -> None:
    """The fields every trial is given, checked before the axes' values are checked beside
    them: a value ``--set`` or ``--dataset`` gave that no trial allows is refused naming
    that flag, never an axis (the axes' first grid point is their context: a refusal that
    needs an axis's other value is left to the trials' own check)."""

    def fail(key: str, value: Any, allowed: str) -> StudyFileError:
        field = key.split(".", 1)[1] if "." in key else next(iter(given), key)
        flag = flags.get(field, f"--set {field}={value}")
        return StudyFileError(flag, field, value, allowed)

    if given:
        check_fields(fail, "given", dict(given), context=first_grid_point(axes))
