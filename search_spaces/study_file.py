"""Study files: a study written as TOML, checked key by key before anything runs.

::

    name = "mu_by_beta"                     # letters, digits, _ and -
    description = "MOON's mu under three heterogeneity levels"
    paper = "Table 4 x Table 9"             # optional: the paper table it mirrors
    dataset = "fmnist"                      # optional: default dataset (fmnist)
    seeds = 3                               # optional: repeats of each grid point (3)
    paper_datasets = ["cifar10"]            # optional: where the paper reports it

    [fixed]                                 # RunConfig fields every trial shares
    algorithm = "moon"

    [[axes]]                                # a plain axis: one RunConfig field
    name = "mu"
    values = [0.1, 1.0, 5.0]                # the grid (--search grid)
    optuna = { kind = "loguniform", low = 0.01, high = 10.0 }   # --search optuna

    [[axes]]                                # a joint axis: several fields under labels
    name = "setting"
    [axes.joint]
    "N=10" = { n_parties = 10, rounds = 100 }
    "N=50" = { n_parties = 50, rounds = 200 }

    [report]                                # optional: the report's layout (see below)
    reproduces = "Table 9"
    table = { kind = "one_parameter", parameter = "mu", head = "...", name = "..." }
    figure = { lines = ["mu"], x = "mu" }
    statistic = "last:3"                    # optional: a trial's accuracy (final, last:K,
                                            # val, best; docs/reported-statistic.md)

Optuna kinds: ``uniform`` / ``loguniform`` (``low``, ``high``), ``int`` / ``logint``
(integer ``low``, ``high``), ``categorical`` (``choices``).  Without ``optuna`` an
axis searches a categorical over its grid values; without ``values`` it can only be
searched (``--search optuna``).

Every mistake is one :class:`StudyFileError` line naming the file, the key, the bad
value and what is allowed.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from federated.config.run_config import ConfigError, RunConfig, flat_names
from search_spaces.study import Axis, OptunaRange, Study

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as the tomli package (a dependency there)
    import tomli as tomllib

TOP_KEYS = ("name", "description", "paper", "dataset", "seeds", "paper_datasets", "fixed", "axes")
AXIS_KEYS = ("name", "values", "joint", "optuna")
REPORT_KEYS = ("reproduces", "table", "figure", "statistic")
# [report] statistic: what a trial's accuracy is (analysis/stats/trial_statistic.py parses it;
# named here without importing analysis, tests/test_analysis_statistic_report.py holds
# the two to the same forms)
STATISTIC_FORM = re.compile(r"final|val|best|last:[1-9][0-9]*")
STATISTIC_ALLOWED = "final, last:K (K a whole number >= 1), val, best"
FIGURE_KEYS = ("lines", "panels", "x", "x_lines", "figure", "x_figure")
RANGE_KINDS = ("uniform", "loguniform", "int", "logint", "categorical")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")
# Table shapes of analysis.tables.study_tables (named here, not imported: analysis imports pandas)
TABLE_KINDS = (
    "generic",
    "comparison",
    "one_parameter",
    "methods_by",
    "parties",
    "loss_ablation",
    "projection_head",
    "negatives",
    "server_momentum",
    "iid",
    "annealed_tau",
)


class StudyFileError(ValueError):
    """A study file (or ``--vary``) value is not allowed; the message is one line."""

    def __init__(self, source: str, key: str, value: Any, allowed: str) -> None:
        self.source, self.key, self.value, self.allowed = source, key, value, allowed
        super().__init__(f"{source}: {key} = {value!r} (allowed: {allowed})")


def load_study_file(path: str | Path) -> Study:
    """Read and check a study file; :class:`StudyFileError` on the first bad key."""
    path = Path(path)
    source = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StudyFileError(source, "file", source, "an existing .toml study file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise StudyFileError(source, "file", str(err), "a readable UTF-8 text file") from None
    except tomllib.TOMLDecodeError as err:
        raise StudyFileError(source, "toml", str(err), "valid TOML") from None
    return study_from_dict(data, source)


def study_from_dict(
    data: Mapping[str, Any], source: str, given: Mapping[str, Any] | None = None
) -> Study:
    """A :class:`Study` from a study file's parsed contents (``source`` names it in errors).

    ``given``: values every trial will also take (an ad hoc study's ``--set`` fields),
    which its axes' values are checked beside, as its trials will run them: ``--vary
    dp_noise_multiplier=0,1 --set dp_clip_norm=1`` is a valid study (noise needs a clip
    norm, which ``--set`` gives)."""

    def fail(key: str, value: Any, allowed: str) -> StudyFileError:
        return StudyFileError(source, key, value, allowed)

    header = _header(fail, data)
    fixed = _fixed(fail, data.get("fixed", {}))
    dataset = data.get("dataset", fixed.get("dataset", "fmnist"))
    # [fixed] on the study's dataset, which some of its values depend on (partition =
    # "natural" needs a folder of parties; a score folder refuses class skews)
    check_fields(fail, "dataset" if "dataset" in data else "fixed", {"dataset": dataset})
    # [fixed] with every axis at its first value (a trial of the grid): a fixed value may
    # need a field an axis sets (the street study: partition = "natural" with the parties
    # axis's partition_by); a refusal of a fixed field names it
    context = first_grid_point(data.get("axes"))
    check_fields(fail, "fixed", {**fixed, "dataset": dataset}, context=context)
    # what each axis's values are checked beside: [fixed], then what every trial is given
    known = flat_names()
    beside = {**fixed, **{k: v for k, v in (given or {}).items() if k in known}}
    beside["dataset"] = beside.get("dataset", dataset)
    axes = _axes(fail, data.get("axes"), fixed, beside)
    return Study(
        **header,
        axes=tuple(axes),
        fixed=dict(fixed),
        dataset=dataset,
        report=_report(fail, data.get("report", {})),
        source=source,
    )


def _header(fail, data: Mapping[str, Any]) -> dict[str, Any]:
    """The study's top-level keys but its settings and axes: name, words, seeds, the
    paper's data sets; a key no study file has is refused."""
    for key in data:
        if key not in (*TOP_KEYS, "report"):
            raise fail(key, data[key], "one of the keys " + ", ".join((*TOP_KEYS, "report")))
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise fail("name", name, "a name of letters, digits, _ and -")
    description = data.get("description", "")
    paper = data.get("paper", "")
    for key, value in (("description", description), ("paper", paper)):
        if not isinstance(value, str):
            raise fail(key, value, "a string")
    seeds = data.get("seeds", 3)
    if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
        raise fail("seeds", seeds, "an integer >= 1")
    paper_datasets = data.get("paper_datasets", ["cifar10", "cifar100", "tinyimagenet"])
    if not isinstance(paper_datasets, list) or not all(isinstance(d, str) for d in paper_datasets):
        raise fail("paper_datasets", paper_datasets, "a list of dataset names")
    return dict(
        name=name,
        paper=paper,
        description=description,
        paper_datasets=tuple(paper_datasets),
        seeds=seeds,
    )


def _fixed(fail, fixed: Any) -> dict[str, Any]:
    """``[fixed]``: a table of run-level fields and method parameters, no seed."""
    if not isinstance(fixed, dict):
        raise fail("fixed", fixed, "a table of RunConfig fields")
    known = flat_names()  # run-level fields and every registered method's parameters
    for key, value in fixed.items():
        if key not in known:
            raise fail(f"fixed.{key}", value, "a RunConfig field: " + ", ".join(known))
        if key == "seed":
            raise fail("fixed.seed", value, "no seed here: use the top-level seeds or --seeds")
    return fixed


def _axes(fail, raw_axes: Any, fixed: Mapping[str, Any], beside: Mapping[str, Any]) -> list[Axis]:
    """The ``[[axes]]`` tables, each checked beside ``beside``; no two set one field, and
    none a field ``[fixed]`` holds."""
    if not isinstance(raw_axes, list) or not raw_axes:
        raise fail("axes", raw_axes, "at least one [[axes]] table")
    axes: list[Axis] = []
    seen_fields: dict[str, str] = {}
    for i, raw in enumerate(raw_axes):
        axis = _axis(fail, f"axes[{i}]", raw, beside)
        if any(a.name == axis.name for a in axes):
            raise fail(f"axes[{i}].name", axis.name, "a name no other axis has")
        for field_name in sorted(axis.fields):
            if field_name in fixed:
                raise fail(
                    f"axes[{i}]", field_name, "a field not also in [fixed] (an axis varies it)"
                )
            if field_name in seen_fields:
                raise fail(
                    f"axes[{i}]",
                    field_name,
                    f"a field no other axis sets (axis {seen_fields[field_name]!r} does)",
                )
            seen_fields[field_name] = axis.name
        axes.append(axis)
    return axes


def check_fields(
    fail,
    key: str,
    fields: Mapping[str, Any],
    *,
    name_field: bool = True,
    context: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Validate ``fields`` through RunConfig; one line naming ``key`` (and the field, when
    ``key`` is a table of several).  A refusal of a field ``fields`` does not hold (a
    default, which another axis may set) is left to the trials' own check, which sees
    every axis together: the typed ``fields`` are returned.  ``context``: other fields
    checked with them (an axis's value) whose own refusals are likewise left."""
    every = {**(context or {}), **fields}
    if str(every.get("dataset", "")).startswith("hf:") or _folder_to_build(every):
        # reading a study never downloads a data set, nor needs a folder the user builds
        # first (the street study's tree): the sweep's plan checks these fields,
        # resolving every trial, before anything runs
        return RunConfig.from_dict(dict(fields)).to_dict()
    from federated.config.data_checks import with_data_checked

    try:
        # checked against the study's own data where they are there (a class skew on a
        # score folder is refused naming the axis value that asks for it)
        checked = with_data_checked(RunConfig.from_dict(every))
    except ConfigError as err:
        if err.field not in fields:
            return RunConfig.from_dict(dict(fields)).to_dict()
        where = f"{key}.{err.field}" if name_field and key != "dataset" else key
        raise fail(where, err.value, err.allowed) from None
    except (TypeError, ValueError) as err:
        raise fail(key, dict(fields), str(err)) from None
    return checked.to_dict() if context is None else RunConfig.from_dict(dict(fields)).to_dict()


def first_grid_point(raw_axes: Any) -> dict[str, Any]:
    """The fields the study's first grid point sets, read from its axes as written (a
    malformed axis adds nothing here: the axes' own checks refuse it)."""
    point: dict[str, Any] = {}
    for raw in raw_axes if isinstance(raw_axes, list) else []:
        if not isinstance(raw, dict):
            continue
        joint, values = raw.get("joint"), raw.get("values")
        if isinstance(joint, dict) and joint:
            first = next(iter(joint.values()))
            point.update(first if isinstance(first, dict) else {})
        elif isinstance(values, list) and values and isinstance(raw.get("name"), str):
            point[raw["name"]] = values[0]
    return point


def _folder_to_build(fields: Mapping[str, Any]) -> bool:
    """A ``folder:PATH`` data set whose PATH does not exist (yet)."""
    dataset = str(fields.get("dataset", ""))
    if not dataset.startswith("folder:"):
        return False
    return not Path(dataset[len("folder:") :]).expanduser().exists()


def _axis(fail, key: str, raw: Any, fixed: Mapping[str, Any]) -> Axis:
    if not isinstance(raw, dict):
        raise fail(key, raw, "a table with name and values, joint or optuna")
    for k in raw:
        if k not in AXIS_KEYS:
            raise fail(f"{key}.{k}", raw[k], "one of the keys " + ", ".join(AXIS_KEYS))
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise fail(f"{key}.name", name, "a name of letters, digits, _ and -")
    known = flat_names()  # run-level fields and every registered method's parameters
    if "joint" in raw:
        if "values" in raw:
            raise fail(f"{key}.values", raw["values"], "no values on a joint axis (its labels are)")
        joint = raw["joint"]
        if not isinstance(joint, dict) or not joint:
            raise fail(f"{key}.joint", joint, "a non-empty table of label = {field = value, ...}")
        if name in known:
            raise fail(f"{key}.name", name, "a label name that is not a RunConfig field")
        settings: dict[str, dict[str, Any]] = {}
        for label, fields in joint.items():
            where = f"{key}.joint.{label!r}"
            if not isinstance(fields, dict) or not fields:
                raise fail(where, fields, "a non-empty table of RunConfig fields")
            for field_name in fields:
                if field_name not in known or field_name == "seed":
                    raise fail(
                        f"{where}.{field_name}", fields[field_name], "a RunConfig field but seed"
                    )
            # a refusal of a [fixed] field here may need another axis (the trial check
            # sees them all); this axis's own fields are refused here
            check_fields(fail, where, dict(fields), context=fixed)
            settings[label] = dict(fields)
        optuna = _range(fail, f"{key}.optuna", raw["optuna"], None) if "optuna" in raw else None
        if optuna is not None and (
            optuna.kind != "categorical" or not set(optuna.choices) <= set(settings)
        ):
            raise fail(f"{key}.optuna", raw["optuna"], "a categorical over the joint labels")
        return Axis(name, tuple(settings), settings, optuna)

    if name not in known or name == "seed":
        raise fail(f"{key}.name", name, "a RunConfig field but seed (or give the axis a joint)")
    values = raw.get("values", [])
    if not isinstance(values, list) or ("values" in raw and not values):
        raise fail(f"{key}.values", values, f"a non-empty list of {name} values")
    if len(set(map(repr, values))) != len(values):
        raise fail(f"{key}.values", values, "distinct values")
    checked = []
    for j, value in enumerate(values):
        where = f"{key}.values[{j}]"
        checked.append(check_fields(fail, where, {**fixed, name: value}, name_field=False)[name])
    optuna = (
        _range(fail, f"{key}.optuna", raw["optuna"], (name, fixed)) if "optuna" in raw else None
    )
    if not checked and optuna is None:
        raise fail(key, raw, "values (a grid), an optuna range, or both")
    return Axis(name, tuple(checked), {}, optuna)


def _range(fail, key: str, raw: Any, field: tuple[str, Mapping[str, Any]] | None) -> OptunaRange:
    """An Optuna range; ``field`` (name, fixed) checks its ends or choices as that field."""
    if not isinstance(raw, dict):
        raise fail(key, raw, 'a table such as { kind = "loguniform", low = 0.01, high = 10 }')
    kind = raw.get("kind")
    if kind not in RANGE_KINDS:
        raise fail(f"{key}.kind", kind, ", ".join(RANGE_KINDS))
    if kind == "categorical":
        extra = set(raw) - {"kind", "choices"}
        if extra:
            raise fail(f"{key}.{sorted(extra)[0]}", raw[sorted(extra)[0]], "kind and choices")
        choices = raw.get("choices")
        if not isinstance(choices, list) or not choices:
            raise fail(f"{key}.choices", choices, "a non-empty list")
        if field is not None:
            name, fixed = field
            choices = [
                check_fields(fail, f"{key}.choices[{j}]", {**fixed, name: c}, name_field=False)[
                    name
                ]
                for j, c in enumerate(choices)
            ]
        return OptunaRange("categorical", choices=tuple(choices))
    extra = set(raw) - {"kind", "low", "high"}
    if extra:
        raise fail(f"{key}.{sorted(extra)[0]}", raw[sorted(extra)[0]], "kind, low and high")
    low, high = raw.get("low"), raw.get("high")
    integer = kind in ("int", "logint")
    for end, value in (("low", low), ("high", high)):
        numeric = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not numeric or not math.isfinite(value):
            raise fail(f"{key}.{end}", value, "an integer" if integer else "a finite number")
    if not low < high:
        raise fail(f"{key}.high", high, f"a number > low ({low})")
    if kind.startswith("log") and low <= 0:
        raise fail(f"{key}.low", low, f"a number > 0 for {kind}")
    if field is not None:
        name, fixed = field
        for end, value in (("low", low), ("high", high)):
            check_fields(fail, f"{key}.{end}", {**fixed, name: value}, name_field=False)
    return OptunaRange(kind, float(low), float(high))


def _report(fail, raw: Any) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise fail("report", raw, "a table with reproduces, table and figure")
    for k in raw:
        if k not in REPORT_KEYS:
            raise fail(f"report.{k}", raw[k], "one of the keys " + ", ".join(REPORT_KEYS))
    if not isinstance(raw.get("reproduces", ""), str):
        raise fail("report.reproduces", raw["reproduces"], "a string")
    statistic = raw.get("statistic", "final")
    if not isinstance(statistic, str) or not STATISTIC_FORM.fullmatch(statistic):
        raise fail("report.statistic", statistic, STATISTIC_ALLOWED)
    table = raw.get("table", {"kind": "generic"})
    if not isinstance(table, dict) or table.get("kind") not in TABLE_KINDS:
        kind = table.get("kind") if isinstance(table, dict) else table
        raise fail("report.table.kind", kind, ", ".join(TABLE_KINDS))
    if table["kind"] in ("one_parameter", "methods_by"):
        for k in ("parameter", "head", "name"):
            if not isinstance(table.get(k), str):
                raise fail(
                    f"report.table.{k}", table.get(k), f"a string ({table['kind']} needs it)"
                )
    figure = raw.get("figure", {})
    if not isinstance(figure, dict):
        raise fail("report.figure", figure, "a table of " + ", ".join(FIGURE_KEYS))
    for k, v in figure.items():
        if k not in FIGURE_KEYS:
            raise fail(f"report.figure.{k}", v, "one of the keys " + ", ".join(FIGURE_KEYS))
        ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
        if k in ("lines", "panels") and not ok:
            raise fail(f"report.figure.{k}", v, "a list of column names")
        if k not in ("lines", "panels") and not isinstance(v, str):
            raise fail(f"report.figure.{k}", v, "a string")
    return {k: v for k, v in raw.items()}


def study_to_dict(study: Study) -> dict[str, Any]:
    """A study as a study file's contents (JSON- and TOML-safe): what a manifest keeps,
    so ``--resume`` and the report need no catalogue.  :func:`study_from_dict` reads it."""
    axes = []
    for axis in study.axes:
        entry: dict[str, Any] = {"name": axis.name}
        if axis.joint:
            entry["joint"] = {label: dict(fields) for label, fields in axis.settings.items()}
        elif axis.values:
            entry["values"] = list(axis.values)
        if axis.optuna is not None:
            entry["optuna"] = _range_dict(axis.optuna)
        axes.append(entry)
    out: dict[str, Any] = {
        "name": study.name,
        "description": study.description,
        "paper": study.paper,
        "dataset": study.dataset,
        "seeds": study.seeds,
        "paper_datasets": list(study.paper_datasets),
        "fixed": dict(study.fixed),
        "axes": axes,
    }
    if study.report:
        out["report"] = dict(study.report)
    return out


def _range_dict(r: OptunaRange) -> dict[str, Any]:
    if r.kind == "categorical":
        return {"kind": r.kind, "choices": list(r.choices)}
    if r.kind in ("int", "logint"):
        return {"kind": r.kind, "low": int(r.low), "high": int(r.high)}
    return {"kind": r.kind, "low": r.low, "high": r.high}
