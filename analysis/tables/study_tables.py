"""Table shapes: how a study's results become tables, chosen by the study's own file.

A study file names its shape in ``[report] table = { kind = ..., ... }``; the manifest
carries it, so the report never looks a study up by its name.

=================  ===========================================================
kind               table(s)
=================  ===========================================================
comparison         Table 1 (methods × datasets) and Table 2 (rounds to reach the
                   baseline, speed-up)
one_parameter      ``parameter`` × datasets, titled ``head``, file ``name``
                   (Table 9, §4.2, Fig. 11a/b as tables)
methods_by         methods × ``parameter`` (Fig. 7, Table 4)
parties            Table 3: methods × (setting, half and all of its rounds)
loss_ablation      Table 5: second term (none, ℓ2 at its best μ, MOON); and every ℓ2 μ
projection_head    Table 7: (with/without head, method) × datasets
negatives          Table 12: k at its best μ; and k × μ
server_momentum    Table 10: datasets × {FedAvg, MOON, FedAvgM, MOON+FedAvgM} at the
                   best server momentum; and method × server
iid                Table 8: MOON μ (FedAvg as μ=0) under an IID partition
annealed_tau       annealing paper Table 2: τ0 × {fixed (MOON), annealed (NEW-MOON)}
generic            (any other study) every combination of the axes, the last axis as
                   columns when there are two or more; with ``algorithm`` an axis,
                   also the communication table
=================  ===========================================================

Columns are datasets unless the study varies something else along them; then a
second dataset shows up as part of the column label.

Every accuracy table reports one statistic of each trial (:mod:`analysis.stats.trial_statistic`:
the final round, the mean of the last K rounds, the round chosen by validation), the
user's choice, else the study file's ``[report] statistic``, else the default; its
title names it.  The communication table keeps the baseline's final-round accuracy as
its target (its title says so).

A score task's group (:mod:`analysis.primary_metric`) builds every table of its shape on
its primary metric (``test_srcc`` by default), then the same tables again on the rest of
the field's pair, SRCC and MAE (files named ``<table>_mae``, ``<table>_srcc``), each
titled with its metric.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from analysis.naming import dataset_name, format_value, method_name
from analysis.primary_metric import Metric, sweep_metric, table_metrics
from analysis.reading.grouping import StudyGroup
from analysis.stats.comparisons import dataset_classes
from analysis.stats.seed_plan import DEFAULT_TARGET
from analysis.stats.trial_statistic import (
    REPORTED,
    Statistic,
    resolve_statistic,
    shortest_rounds,
    trial_values,
    with_statistic,
)
from analysis.tables.table import (
    Table,
    accuracy_table,
    best_of_table,
    communication_table,
    key_order,
)


@dataclass(frozen=True)
class TableOptions:
    """What the user chose on the command line.

    Attributes:
        statistic: what a trial's accuracy is (None: the study file's ``[report]
            statistic``, else :data:`~analysis.stats.trial_statistic.DEFAULT_STATISTIC`).
        column: the comparison table's columns (any config column; default datasets).
        baseline: the communication table's baseline method.
        target: ``per-seed`` or ``mean`` (see :mod:`analysis.tables.communication`).
        resolve_target: the difference (accuracy points; hundredths of a score metric's
            scale, :meth:`~analysis.primary_metric.Metric.target`) the notes plan seeds for.
        metric: what the tables are built on (None: the group's primary metric, and for
            a score task the rest of SRCC and MAE after it).
    """

    statistic: Statistic | None = None
    column: str = "dataset"
    baseline: str = "fedavg"
    target: str = "per-seed"
    resolve_target: float = DEFAULT_TARGET
    metric: Metric | None = None


def primary_of(group: StudyGroup) -> Metric:
    """The primary metric every trial of ``group`` records; raises
    :class:`~analysis.primary_metric.PrimaryMetricError` (one line) when they differ."""
    sweeps = ", ".join(sweep.name for sweep in group.sweeps)
    return sweep_metric(group.trials, f"study {group.study or 'runs'} ({sweeps})")


def reported_group(group: StudyGroup, options: TableOptions) -> tuple[StudyGroup, Statistic]:
    """``group`` with its trials' reported statistic on ``options.metric`` (default: the
    group's primary) (the column :data:`~analysis.stats.trial_statistic.REPORTED` and its
    companions), and that statistic."""
    statistic = resolve_statistic(options.statistic, group.report)
    metric = options.metric or primary_of(group)
    trials = with_statistic(group.trials, group.rounds, statistic, metric)
    return dataclasses.replace(group, trials=trials), statistic


def metric_text(group: StudyGroup, statistic: Statistic, metric: Metric | None = None) -> str:
    """The words naming ``statistic`` on ``metric`` (default: the group's primary) for
    ``group`` (says where trials ran fewer rounds)."""
    return statistic.text(shortest_rounds(group.trials), metric or primary_of(group))


def _columns(group: StudyGroup, *extra: str) -> list[str]:
    """``extra`` as the columns, with the dataset in front when there are several."""
    if not extra:
        return ["dataset"]
    return (["dataset"] if len(group.datasets) > 1 else []) + list(extra)


def _title(group: StudyGroup, head: str, options: TableOptions | None) -> str:
    """``head: the statistic — datasets; condition`` (no statistic when ``options`` is
    None: the communication table's own words say what it counts)."""
    task = primary_of(group).task_spec  # a folder reads as what it holds
    where = ", ".join(dataset_name(d, task) for d in group.datasets)
    title = (
        head
        if options is None
        else f"{head}: {metric_text(group, options.statistic, options.metric)}"
    )
    extra = [where] + ([group.condition_text] if group.condition else [])
    return f"{title} — {'; '.join(extra)}"


def _name(base: str, group: StudyGroup) -> str:
    return base + group.suffix


def _classes(group: StudyGroup) -> dict[str, int]:
    """``{dataset: classes}`` for chance levels, from the group's recorded partitions."""
    return dataset_classes(entry for sweep in group.sweeps for entry in sweep.partitions)


def _claims(
    group: StudyGroup, options: TableOptions, keys: list[str], trials: pd.DataFrame | None = None
) -> dict[str, Any]:
    """A table's baseline, chance levels, reported column, its words, its metric and the
    seed plan's target (in the metric's units): the baseline method's row (or column)
    when ``keys`` name the method, else the first in reading order (the study's first
    value: μ = 0, k = 1, ...)."""
    trials = group.trials if trials is None else trials
    reference = None
    if "algorithm" in keys:
        at = keys.index("algorithm")
        found = [k for k in key_order(trials, keys) if k[at] == options.baseline]
        reference = found[0] if found else None
    elif keys == ["method"] and "algorithm" in trials:
        labels = trials.loc[trials["algorithm"] == options.baseline, "method"]
        reference = (labels.iloc[0],) if not labels.empty else None
    metric = options.metric or primary_of(group)
    return {
        "reference": reference,
        "classes": _classes(group),
        "value": REPORTED,
        "metric_text": metric_text(group, options.statistic, metric),
        "resolve_target": metric.target(options.resolve_target),
        "metric": metric,
    }


def _final_words(options: TableOptions, group: StudyGroup) -> str:
    """What the communication table's target is: ``final accuracy``, ``final test MAE``."""
    return (options.metric or primary_of(group)).final_noun


# -------------------------------------------------------------------------- studies
def comparison(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    trials, column = group.trials, options.column
    tables = [
        accuracy_table(
            trials,
            rows=["algorithm"],
            **_claims(group, options, ["algorithm"]),
            columns=[column],
            name=_name("table1_comparison", group),
            title=_title(group, "Table 1 — methods compared", options),
        )
    ]
    if options.baseline in set(trials["algorithm"]):
        # SOLO never communicates: rounds to reach mean nothing for it (the paper's Table 2
        # leaves it out too)
        federated = trials[trials["algorithm"] != "solo"]
        tables.append(
            communication_table(
                group.rounds,
                federated,
                row="algorithm",
                columns=[column],
                baseline=options.baseline,
                target=options.target,
                classes=_classes(group),
                metric=options.metric or primary_of(group),
                name=_name("table2_communication", group),
                title=_title(
                    group,
                    f"Table 2 — rounds to reach {method_name(options.baseline)}'s "
                    f"{_final_words(options, group)}, and speed-up",
                    None,
                ),
            )
        )
    return tables


def one_parameter(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    """``spec``: ``parameter`` (the rows), ``head`` (the title), ``name`` (the file)."""
    return [
        accuracy_table(
            group.trials,
            rows=[spec["parameter"]],
            **_claims(group, options, [spec["parameter"]]),
            columns=_columns(group),
            name=_name(spec["name"], group),
            title=_title(group, spec["head"], options),
        )
    ]


def methods_by(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    """Methods as rows, ``spec["parameter"]`` as columns (``head``, ``name`` as above)."""
    return [
        accuracy_table(
            group.trials,
            rows=["algorithm"],
            **_claims(group, options, ["algorithm"]),
            columns=_columns(group, spec["parameter"]),
            name=_name(spec["name"], group),
            title=_title(group, spec["head"], options),
        )
    ]


def parties(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    """Table 3: each setting at half of its rounds and at all of them (the statistic
    computed as if the trials had stopped at the column's round)."""
    trials, rounds, statistic = group.trials, group.rounds, options.statistic
    metric = options.metric or primary_of(group)
    parts = []
    for planned in sorted(set(trials["rounds"].astype(int))):
        these = trials[trials["rounds"] == planned]
        for at in dict.fromkeys([max(1, planned // 2), planned]):
            values = trial_values(rounds, statistic, upto=at, metric=metric)
            part = these.copy()
            keys = list(zip(part["sweep"], part["trial"]))
            part["at_round"] = at
            for column, name in (
                ("value", "acc_at"),
                ("std", "acc_at_std"),
                ("climb", "acc_at_climb"),
                ("round", "acc_at_round"),
            ):
                part[name] = [values[column].get(k, float("nan")) for k in keys]
            parts.append(part)
    derived = pd.concat(parts, ignore_index=True)
    keys = ["method"] if "method" in derived else ["algorithm"]
    claims = {
        **_claims(group, options, keys, derived),
        "value": "acc_at",
        "metric_text": f"{metric.words} at the round in the column header"
        + statistic.upto_words("it", metric),
    }
    table = accuracy_table(
        derived,
        rows=keys,
        **claims,
        columns=_columns(group, "setting" if "setting" in derived else "n_parties", "at_round"),
        name=_name("table3_parties", group),
        title=_title(
            group,
            f"Table 3 — number of parties: {metric.words}"
            + statistic.upto_words("the round", metric)
            + " at half and all of each setting's rounds",
            None,
        ),
    )
    return [table]


def loss_ablation(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    trials = group.trials.copy()
    terms = {"fedavg": "none (FedAvg)", "l2rep": "ℓ2 (best μ)", "moon": "MOON"}
    trials["term"] = trials["algorithm"].map(lambda a: terms.get(a, method_name(a)))
    best = best_of_table(
        trials,
        rows=["term"],
        **_claims(group, options, ["term"], trials),
        columns=_columns(group),
        tuned="mu",
        name=_name("table5_loss_ablation", group),
        title=_title(group, "Table 5 — second term of the local loss", options),
    )
    every = accuracy_table(
        group.trials,
        rows=["second_term"] if "second_term" in group.trials else ["algorithm", "mu"],
        **_claims(
            group,
            options,
            ["second_term"] if "second_term" in group.trials else ["algorithm", "mu"],
        ),
        columns=_columns(group),
        name=_name("table5_loss_ablation_all", group),
        title=_title(group, "Table 5, every ℓ2 μ", options),
    )
    return [best, every]


def projection_head(
    group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]
) -> list[Table]:
    return [
        accuracy_table(
            group.trials,
            rows=["projection_head", "algorithm"],
            **_claims(group, options, ["projection_head", "algorithm"]),
            columns=_columns(group),
            name=_name("table7_projection_head", group),
            title=_title(group, "Table 7 — with and without the projection head", options),
            row_labeller=lambda key: (
                f"{'with' if key[0] else 'without'} head · {method_name(key[1])}"
            ),
        )
    ]


def negatives(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    best = best_of_table(
        group.trials,
        rows=["prev_models"],
        **_claims(group, options, ["prev_models"]),
        columns=_columns(group),
        tuned="mu",
        name=_name("table12_negatives", group),
        title=_title(group, "Table 12 — negatives k (previous models), best μ", options),
    )
    every = accuracy_table(
        group.trials,
        rows=["prev_models"],
        **_claims(group, options, ["prev_models"]),
        columns=_columns(group, "mu"),
        name=_name("table12_negatives_all", group),
        title=_title(group, "Table 12, every (k, μ)", options),
    )
    return [best, every]


def server_momentum(
    group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]
) -> list[Table]:
    trials = group.trials.copy()

    def combo(row: pd.Series) -> str:
        method = method_name(row["algorithm"])
        if row["server_optimizer"] != "fedavgm":
            return method
        return "FedAvgM" if row["algorithm"] == "fedavg" else f"{method}+FedAvgM"

    trials["combo"] = trials.apply(combo, axis=1)
    best = best_of_table(
        trials,
        rows=["dataset"],
        **_claims(group, options, ["combo"], trials),
        columns=["combo"],
        tuned="server_momentum",
        best="row",
        name=_name("table10_server_momentum", group),
        title=_title(group, "Table 10 — MOON with FedAvgM, best server momentum", options),
    )
    every = accuracy_table(
        group.trials,
        rows=["algorithm"],
        **_claims(group, options, ["algorithm"]),
        columns=_columns(group, "server" if "server" in group.trials else "server_momentum"),
        name=_name("table10_server_momentum_all", group),
        title=_title(group, "Table 10, every server setting", options),
    )
    return [best, every]


def iid(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    def label(key: tuple) -> str:
        mu = key[0]
        return "FedAvg (μ=0)" if mu == 0 else f"MOON μ={format_value(mu)}"

    return [
        accuracy_table(
            group.trials,
            rows=["mu"],
            **_claims(group, options, ["mu"]),
            columns=_columns(group),
            name=_name("table8_iid", group),
            title=_title(group, "Table 8 — MOON and FedAvg, IID partition", options),
            row_labeller=label,
        )
    ]


def annealed_tau(group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]) -> list[Table]:
    return [
        accuracy_table(
            group.trials,
            rows=["tau"],
            **_claims(group, options, ["tau_schedule"]),
            columns=_columns(group, "tau_schedule"),
            best="row",
            name=_name("annealed_table2_tau", group),
            title=_title(group, "Annealing paper Table 2 — fixed vs annealed τ from τ0", options),
        )
    ]


def generic_tables(
    group: StudyGroup, options: TableOptions, spec: Mapping[str, Any]
) -> list[Table]:
    """Any study: accuracy for every combination of its axes (the last axis as columns
    when there are two or more); where the methods vary (an ``algorithm`` axis, or a
    joint axis naming them) and the baseline is among them, also rounds to reach the
    baseline's final value (federated methods), else a note saying why not."""
    axes = [a for a in group.axes if a in group.trials] or ["point"]
    rows, across = (axes[:-1], axes[-1:]) if len(axes) > 1 else (axes, [])
    study = group.study or "runs"
    head = f"{study} — {group.paper}" if group.paper else f"{study} — varied parameters"
    tables = [
        accuracy_table(
            group.trials,
            rows=rows,
            **_claims(group, options, rows),
            columns=_columns(group, *across),
            # named by what it holds: mu_by_beta_accuracy, seg_study_miou
            name=_name(f"{study}_{(options.metric or primary_of(group)).file_word}", group),
            title=_title(group, head, options),
        )
    ]
    method_axes = [a for a in axes if a == "algorithm" or names_the_method(group.trials, a)]
    varied = "algorithm" in group.trials and group.trials["algorithm"].nunique() > 1
    if method_axes and (varied or "algorithm" in axes):
        tables[0].notes += _communication_or_why(group, options, axes, method_axes[0], tables)
    return tables


def _communication_or_why(
    group: StudyGroup,
    options: TableOptions,
    axes: list[str],
    method_axis: str,
    tables: list[Table],
) -> list[str]:
    """A study whose methods vary, on an ``algorithm`` axis or a joint axis that names
    them (FedAvg, FedAvg+FT, FedPer ...), gets the rounds-to-target table (appended to
    ``tables``); where it cannot, the note saying why (for the first table)."""
    trials, study = group.trials, group.study or "runs"
    if options.baseline not in set(trials["algorithm"]):
        return [
            f"No rounds-to-target table: the baseline {method_name(options.baseline)} "
            "(--baseline) is not among this study's methods."
        ]
    others = [a for a in axes if a != method_axis]
    tables.append(
        communication_table(
            group.rounds,
            trials[trials["algorithm"] != "solo"],  # SOLO never communicates
            row="algorithm",
            columns=_columns(group, *others),
            baseline=options.baseline,
            target=options.target,
            classes=_classes(group),
            metric=options.metric or primary_of(group),
            name=_name(f"{study}_communication", group),
            title=_title(
                group,
                f"{study} — rounds to reach {method_name(options.baseline)}'s "
                f"{_final_words(options, group)}, and speed-up",
                None,
            ),
        )
    )
    return []


def names_the_method(trials: pd.DataFrame, axis: str) -> bool:
    """True where ``axis`` is the method under another name: a joint axis (``method``:
    FedAvg, FedPer, FedAvg+FT ...) whose labels match the trials' methods one to one
    (FedAvg+FT's ``algorithm`` already reads ``fedavg+ft1``): as a column it would give
    each method a column block of its own, a diagonal table with no Δ."""
    if "algorithm" not in trials or axis not in trials:
        return False
    pairs = trials[["algorithm", axis]].astype(str).drop_duplicates()
    return len(pairs) == trials["algorithm"].nunique() == trials[axis].astype(str).nunique()


SHAPES: dict[str, Callable[[StudyGroup, TableOptions, Mapping[str, Any]], list[Table]]] = {
    "comparison": comparison,
    "one_parameter": one_parameter,
    "methods_by": methods_by,
    "parties": parties,
    "loss_ablation": loss_ablation,
    "projection_head": projection_head,
    "negatives": negatives,
    "server_momentum": server_momentum,
    "iid": iid,
    "annealed_tau": annealed_tau,
    "generic": generic_tables,
}


def study_tables(group: StudyGroup, options: TableOptions | None = None) -> list[Table]:
    """The tables for one study group, in the shape its study file names (generic when
    it names none).

    Optuna groups get none here (their trials are search samples, not grid points;
    :mod:`analysis.stats.search` summarises them).
    """
    options = options or TableOptions()
    if group.search == "optuna" or group.trials.empty:
        return []
    metrics = [options.metric] if options.metric else table_metrics(primary_of(group))
    spec = group.report.get("table") or {"kind": "generic"}
    tables: list[Table] = []
    for metric in metrics:
        chosen = dataclasses.replace(options, metric=metric)
        reported, statistic = reported_group(group, chosen)
        chosen = dataclasses.replace(chosen, statistic=statistic)
        built = SHAPES.get(spec["kind"], generic_tables)(reported, chosen, spec)
        if metric is not metrics[0]:
            for table in built:  # the pair's other metric: its own files, named once
                if f"_{metric.file_word}" not in table.name:
                    table.name = f"{table.name}_{metric.stem}"
        tables += built
    return tables
