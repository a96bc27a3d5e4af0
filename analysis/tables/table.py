"""Tables as data: the :class:`Table` every writer renders, and the generic builders.

A table is built from the per-trial frame of :mod:`analysis.reading.loading`.  Cells show
accuracies as percentages with one decimal, ``mean ± std`` over seeds (the paper's
style), then ``Δ`` to the table's baseline with its 95% interval; bold marks the best
cell of each column (or row) only where the seeds tell it from the runner-up, and the
title says the smallest difference the seeds resolve (rules: :mod:`analysis.stats.comparisons`).
The numbers behind every cell (fractions in [0, 1], and percentages, the intervals in
accuracy points) go to the CSV, one row per cell.  What a trial's accuracy is (the final
round, the mean of the last rounds, the round chosen by validation) is the caller's
column ``value`` and is named by ``metric_text`` (:mod:`analysis.stats.trial_statistic`).
Which metric a table holds (top-1 accuracy, or a score task's SRCC, MAE ...) is its
``metric`` (:mod:`analysis.primary_metric`): its direction decides better, worse, best
and reaching a target (the lowest MAE is the best), its units the cells (a correlation or
an error with three decimals, differences in its own units; the CSV's columns then drop
the ``_pct`` of the percentage columns and add ``metric``).
Under every comparison the notes say how many seeds would resolve a stated difference
(:mod:`analysis.stats.seed_plan`) and whether the trials had converged by the reported round
(:mod:`analysis.stats.convergence`).

Builders:

- :func:`accuracy_table`: rows × columns of any config columns, mean ± std (Table 1,
  4, 9, ... shapes).
- :func:`best_of_table`: the same, each cell the best value of a tuned parameter
  (Table 5's "tune μ and report the best", Tables 10 and 12).
- :func:`communication_table`: Table 2 (rounds to reach the baseline, speed-up).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.naming import parameter_name, value_label
from analysis.primary_metric import ACCURACY, Metric
from analysis.reading.loading import COMPLETED, is_number_column, status_counts
from analysis.reading.summary import counted_trials, excluded_trials, latest_per_seed, summarise
from analysis.stats.comparisons import (
    LEARNED_MARGIN,
    GridComparison,
    caption_text,
    cell_samples,
    cell_seeds_needed,
    chance_points,
    claim,
    compare_grid,
    comparison_notes,
    delta_text,
    planning_note,
)
from analysis.stats.convergence import Convergence, convergence_note, judge_convergence
from analysis.stats.paired_stats import Difference
from analysis.stats.seed_plan import DEFAULT_TARGET
from analysis.stats.trial_statistic import CLIMB_WINDOW
from analysis.tables.communication import (
    communication_frame,
    format_speedup,
    summarise_communication,
)
from analysis.tables.privacy import epsilon_text, privacy_words

PARTY_MARK = "†"
METRICS = {
    "final_acc": "final-round top-1 test accuracy (%)",
    "best_acc": "best top-1 test accuracy over rounds (%)",
}


@dataclass
class Table:
    """One table, ready for any format.

    Attributes:
        name: file stem (``table9_moon_mu``).
        title: one line saying what it shows and which paper table it mirrors.
        display: cell texts; index = row labels, columns = column labels (an Index, or
            a two-level MultiIndex for grouped headers).
        bold: same shape as ``display``: which cells are marked best.
        data: the numbers behind the cells, long form (one row per cell): the CSV.
        row_header: the header of the row-label column.
        notes: lines printed under the table (seeds, exclusions, definitions).
        resolvable: the smallest difference its seeds resolve (accuracy points, or
            ``metric``'s units; NaN: not yet, e.g. one seed or no counted trial); None for
            a table that compares no cells (rounds to reach, time per round).
        metric: what its cells hold.
    """

    name: str
    title: str
    display: pd.DataFrame
    bold: pd.DataFrame
    data: pd.DataFrame
    row_header: str = ""
    notes: list[str] = field(default_factory=list)
    resolvable: float | None = None
    metric: Metric = ACCURACY

    @property
    def row_labels(self) -> list[str]:
        return [str(v) for v in self.display.index]

    @property
    def column_labels(self) -> list[Any]:
        return list(self.display.columns)


def no_bold(display: pd.DataFrame) -> pd.DataFrame:
    """A ``bold`` mask that marks no cell: for tables that rank nothing."""
    return pd.DataFrame(False, index=display.index, columns=display.columns)


# ----------------------------------------------------------------------- ordering
def ordered_values(trials: pd.DataFrame, column: str) -> list[Any]:
    """The values of ``column`` in reading order: numbers ascending, anything else in
    the order trials were created (the study's grid order)."""
    values = trials.sort_values(["sweep_started", "order"], kind="stable")[column]
    unique = list(dict.fromkeys(values.tolist()))
    if is_number_column(values):
        return sorted(unique)
    return unique


def key_order(trials: pd.DataFrame, keys: Sequence[str]) -> list[tuple]:
    """Every combination of ``keys`` present in ``trials``, in reading order."""
    if not keys:
        return [()]
    present = set(map(tuple, trials[list(keys)].itertuples(index=False, name=None)))
    ranks = [{v: i for i, v in enumerate(ordered_values(trials, k))} for k in keys]
    return sorted(present, key=lambda t: tuple(r.get(v, 1 << 30) for r, v in zip(ranks, t)))


def row_label(keys: Sequence[str], values: Sequence[Any]) -> str:
    if len(keys) == 1:
        return value_label(keys[0], values[0])
    return " · ".join(value_label(k, v, with_name=True) for k, v in zip(keys, values))


def column_label(keys: Sequence[str], values: Sequence[Any]) -> str | tuple[str, str]:
    """One label per column; two keys give a (group, sub-column) pair."""
    named = [value_label(k, v, with_name=True) for k, v in zip(keys, values)]
    if len(named) == 0:
        return "accuracy"
    if len(named) == 1:
        return named[0]
    return (", ".join(named[:-1]), named[-1])


def _columns_index(labels: list[Any]) -> pd.Index:
    if labels and isinstance(labels[0], tuple):
        return pd.MultiIndex.from_tuples(labels)
    return pd.Index(labels, dtype=object)


# --------------------------------------------------------------------------- cells
def stat_text(
    mean: float,
    std: float,
    n: int,
    spread: str,
    common_n: int,
    metric: Metric = ACCURACY,
    party_std: float = math.nan,
) -> str:
    """``"69.1 ± 0.4"`` (``"0.812 ± 0.010"`` for a score metric): ± is the std over
    seeds in every row; a row of own models adds its std over parties apart,
    ``"42.0 ± 2.8 [7.1†]"`` (SOLO, a personalised method); ``(n=2)`` when a cell has
    fewer or more seeds than the table's usual count."""
    text = metric.show(mean)
    if not math.isnan(std):
        text += f" ± {metric.show(std)}"
    if spread == "parties":
        text += f" [{metric.show(party_std)}{PARTY_MARK}]"
    if n != common_n:
        text += f" (n={n})"
    return text


def _common_n(stats: pd.DataFrame) -> int:
    """The table's seed count: the largest (cells with fewer, e.g. after a failure, are
    the ones marked)."""
    return int(stats["n"].max()) if not stats.empty else 0


def _compare(
    trials: pd.DataFrame,
    *,
    keys: tuple[list[str], list[str]],
    grid: tuple[list[tuple], list[tuple]],
    value: str,
    statuses: Sequence[str],
    along: str | None,
    reference: tuple | None,
    classes: Mapping[str, int] | None,
    metric: Metric,
) -> tuple[GridComparison, Convergence]:
    """The table's claims (:func:`analysis.stats.comparisons.compare_grid`) and convergence
    (:func:`analysis.stats.convergence.judge_convergence`) from the counted trials of each
    cell, one per seed (the latest sweep's, as in the means)."""
    rows, columns = keys
    row_keys, col_keys = grid
    by = [*rows, *columns]
    counted = counted_trials(trials, statuses)
    counted = counted[counted[value].notna()] if value in counted else counted.iloc[0:0]
    counted, _ = latest_per_seed(counted, by)
    samples = cell_samples(counted, by, value, classes, metric)
    on_grid = {
        (ri, ci): samples[rk + ck]
        for ri, rk in enumerate(row_keys)
        for ci, ck in enumerate(col_keys)
        if rk + ck in samples
    }
    lines = col_keys if along == "row" else row_keys
    # the baseline: the named line, else the first in reading order (the study's first value)
    ref_index = lines.index(reference) if reference in lines else (0 if lines else None)
    claims = compare_grid(on_grid, along, ref_index, metric)
    # the climbs' window: CLIMB_WINDOW rounds, or as many as a trial had by its reported
    # round (the same for every cell, or "up to" the longest)
    reported = f"{value}_round"
    at = counted[reported].dropna() if reported in counted else pd.Series(dtype=float)
    windows = {min(CLIMB_WINDOW, int(r)) for r in at} or {CLIMB_WINDOW}
    return claims, judge_convergence(on_grid, claims, max(windows), len(windows) == 1)


def _exclusion_note(trials: pd.DataFrame, statuses: Sequence[str]) -> list[str]:
    left_out = excluded_trials(trials, statuses)
    if left_out.empty:
        return []
    counts = ", ".join(f"{n} {s}" for s, n in status_counts(left_out).items())
    return [f"Not counted: {len(left_out)} trial(s) ({counts}); listed in report.md."]


def _seed_note(
    stats: pd.DataFrame, statuses: Sequence[str], value: str, metric_text: str | None = None
) -> list[str]:
    common = _common_n(stats)
    kinds = " and ".join(statuses)
    if stats.empty:
        return [f"No {kinds} trial yet: nothing to average."]
    notes = [
        f"{metric_text or METRICS.get(value, value)}: mean ± std over {common} seed(s) "
        f"(sample std), {kinds} trials only; (n=k) marks a cell with fewer seeds."
    ]
    if (stats["spread"] == "parties").any():
        notes.append(
            f"[x{PARTY_MARK}] each party's own model (SOLO, a personalised method): x is the "
            "std over parties of the parties' own models (pooled over seeds; the spread the "
            "paper reports for SOLO), while ± is the std over seeds as in every row; a "
            "method that scored them on the test set every few rounds (personal_test_every) "
            "counts the scored rounds of the window."
        )
    if stats["duplicates"].sum():
        notes.append(
            f"{int(stats['duplicates'].sum())} duplicate run(s) of the same config and seed "
            "(several sweeps): the latest sweep's counted."
        )
    return notes


# ----------------------------------------------------------------------- builders
@dataclass
class _Assembled:
    """A grid laid out: cell texts, bold, the CSV rows, the claims and what they rest on."""

    display: pd.DataFrame
    bold: pd.DataFrame
    data: pd.DataFrame
    claims: GridComparison
    convergence: Convergence
    reference: str | None
    cell_labels: dict[tuple[int, int], str]


def _party_std(trials: pd.DataFrame, value: str) -> str | None:
    """The column holding SOLO's std over parties for ``value`` (``final_acc_std``), if
    there is one: best-over-rounds accuracies have none."""
    column = f"{value}_std"
    return column if column in trials else None


def _assemble(
    stats: pd.DataFrame,
    trials: pd.DataFrame,
    *,
    rows: Sequence[str],
    columns: Sequence[str],
    best: str | None,
    statuses: Sequence[str],
    suffix: Callable[[pd.Series], str] | None = None,
    row_labeller: Callable[[tuple], str] | None = None,
    value: str = "final_acc",
    sample_trials: pd.DataFrame | None = None,
    reference: tuple | None = None,
    classes: Mapping[str, int] | None = None,
    resolve_target: float = DEFAULT_TARGET,
    metric: Metric = ACCURACY,
) -> _Assembled:
    """Lay summary rows out as a grid (:class:`_Assembled`).

    ``sample_trials`` (default ``trials``) are the trials behind the cells' numbers, for
    the comparisons; ``reference`` the baseline row key (``best="column"``) or column key
    (``best="row"``), default the first.  A cell with no counted trial says why when it
    has others: ``– (2 error)``."""
    rows, columns = list(rows), list(columns)
    left_out = _left_out_counts(trials, statuses, rows, columns)
    row_keys = key_order(trials, rows)
    col_keys = key_order(trials, columns)
    common = _common_n(stats)
    lookup = {
        (tuple(r[k] for k in rows), tuple(r[k] for k in columns)): r for _, r in stats.iterrows()
    }
    labeller = row_labeller or (lambda key: row_label(rows, key))
    row_names = [labeller(k) for k in row_keys]
    col_names = [column_label(columns, k) for k in col_keys]
    text = pd.DataFrame("–", index=row_names, columns=_columns_index(col_names), dtype=object)
    claims, convergence = _compare(
        trials if sample_trials is None else sample_trials,
        keys=(rows, columns),
        grid=(row_keys, col_keys),
        value=value,
        statuses=statuses,
        along=best,
        reference=reference,
        classes=classes,
        metric=metric,
    )
    data_rows = []
    for ri, rk in enumerate(row_keys):
        for ci, ck in enumerate(col_keys):
            stat = lookup.get((rk, ck))
            if stat is None:
                if (rk, ck) in left_out:
                    why = ", ".join(f"{n} {s}" for s, n in sorted(left_out[(rk, ck)].items()))
                    text.iat[ri, ci] = f"– ({why})"
                continue
            text.iat[ri, ci] = _cell_text(stat, common, metric, suffix, claims, (ri, ci))
            row = _data_row(stat, (rows, columns), (rk, ck), (row_names[ri], col_names[ci]))
            row.update(_delta_columns(claims, ri, ci, resolve_target))
            row[f"climb{_suffix(metric)}"] = round(convergence.climbs.get((ri, ci), np.nan), 4)
            data_rows.append({**row, "_ri": ri, "_ci": ci})
    bold = pd.DataFrame(False, index=text.index, columns=text.columns)
    for ri, ci in claims.bold:
        bold.iat[ri, ci] = True
    data = _cell_data(data_rows, bold, claims, convergence, metric)
    ref_name = None
    if claims.references:
        ri, ci = next(iter(claims.references))
        ref_name = _reference_name(row_names[ri] if best != "row" else col_names[ci], rows, best)
    cell_labels = _cell_labels(row_names, col_names, rows)
    return _Assembled(text, bold, data, claims, convergence, ref_name, cell_labels)


def _left_out_counts(
    trials: pd.DataFrame, statuses: Sequence[str], rows: list[str], columns: list[str]
) -> dict[tuple, dict[str, int]]:
    """Per (row key, column key): how many trials of each status are not counted."""
    left_out: dict[tuple, dict[str, int]] = {}
    for _, t in excluded_trials(trials, statuses).iterrows():
        key = (tuple(t[k] for k in rows), tuple(t[k] for k in columns))
        left_out.setdefault(key, {}).setdefault(t["status"], 0)
        left_out[key][t["status"]] += 1
    return left_out


def _cell_labels(
    row_names: list[str], col_names: list[Any], rows: list[str]
) -> dict[tuple[int, int], str]:
    """Each cell's name in the notes: its row, and its column when there are several."""
    one_column = len(col_names) == 1
    named_rows = [_named(label, rows) for label in row_names]
    return {
        (ri, ci): named_rows[ri] if one_column else f"{named_rows[ri]} · {_flat(col_names[ci])}"
        for ri in range(len(row_names))
        for ci in range(len(col_names))
    }


def _cell_text(
    stat: pd.Series,
    common: int,
    metric: Metric,
    suffix: Callable[[pd.Series], str] | None,
    claims: GridComparison,
    cell: tuple[int, int],
) -> str:
    """A counted cell's text: ``mean ± std``, the caller's suffix, then its Δ to the
    reference (or ``(ref.)`` on the reference itself)."""
    text = stat_text(
        stat["mean"],
        stat["std"],
        stat["n"],
        stat["spread"],
        common,
        metric,
        stat.get("party_std", math.nan),
    )
    if suffix is not None:
        text += suffix(stat)
    diff = claims.deltas.get(cell)
    if diff is not None:
        text += f" · {delta_text(diff, metric)}"
    elif cell in claims.references and claims.deltas:
        text += " (ref.)"
    return text


def _data_row(
    stat: pd.Series,
    keys: tuple[list[str], list[str]],
    key: tuple[tuple, tuple],
    names: tuple[str, Any],
) -> dict[str, Any]:
    """A counted cell's CSV row before its comparison: its keys, its row and column names
    and the summary's numbers."""
    (rows, columns), (rk, ck), (row_name, col_name) = keys, key, names
    return {
        **{k: v for k, v in zip(rows, rk)},
        **{k: v for k, v in zip(columns, ck)},
        "row": row_name,
        "column": " / ".join(col_name) if isinstance(col_name, tuple) else col_name,
        **{k: stat[k] for k in stat.index if k not in (*rows, *columns)},
    }


def _cell_data(
    data_rows: list[dict[str, Any]],
    bold: pd.DataFrame,
    claims: GridComparison,
    convergence: Convergence,
    metric: Metric,
) -> pd.DataFrame:
    """The CSV's rows, one per counted cell, with the table-wide columns added: bold,
    seeds as text, percentages, the resolvable difference, convergence, the metric."""
    data = pd.DataFrame(data_rows)
    if data.empty:
        return data
    cells = list(zip(data.pop("_ri"), data.pop("_ci")))
    data["best"] = [bold.iat[r, c] for r, c in cells]
    data["seeds"] = data["seeds"].map(lambda s: ";".join(map(str, s)))
    if metric.percent:
        data["mean_pct"] = (100 * data["mean"]).round(4)
        data["std_pct"] = (100 * data["std"]).round(4)
        if "party_std" in data:
            data["party_std_pct"] = (100 * data["party_std"]).round(4)
    data[f"resolvable{_suffix(metric)}"] = round(claims.resolvable, 4)
    # the table's verdict, or "not checked" for a cell without a climb (scored every few
    # rounds: its curve has gaps)
    data["converged"] = [convergence.cell_verdict(cell) for cell in cells]
    if metric != ACCURACY:  # the classic accuracy table's CSV is as it always was
        data["metric"] = metric.stem
    return data


def _suffix(metric: Metric) -> str:
    """The CSV's unit suffix of a difference column: ``_pct`` for accuracy points,
    nothing for a metric in its own units."""
    return "_pct" if metric.percent else ""


def _resolvable(grid: _Assembled) -> float | None:
    """A table's :attr:`Table.resolvable`: None when it compares nothing."""
    return None if grid.claims.along is None else grid.claims.resolvable


def _flat(label: Any) -> str:
    return label if isinstance(label, str) else ", ".join(label)


def _named(label: str, rows: Sequence[str]) -> str:
    """A row label that names its parameter when it is a bare number (``μ=0.1``)."""
    if len(rows) == 1 and not any(c.isalpha() for c in label):
        return f"{parameter_name(rows[0])}={label}"
    return label


def _reach_sign(metric: Metric) -> str:
    """How a round reaches a target of ``metric``: ``≥``, or ``≤`` for an error."""
    return "≥" if metric.higher_is_better else "≤"


def _unlearned_targets(
    per_seed: pd.DataFrame,
    trials: pd.DataFrame,
    columns: Sequence[str],
    classes: Mapping[str, int] | None,
    metric: Metric = ACCURACY,
) -> dict[tuple, tuple[float, float]]:
    """``{column key: (lowest target, chance %)}`` for column groups whose baseline has
    not learned (a target below chance + :data:`LEARNED_MARGIN` points); for a metric
    without a chance level, ``(target, NaN)`` where a target is no better than what
    nothing learned records (:attr:`Metric.nothing_learned`: detection's mAP 0), else
    none."""
    out: dict[tuple, tuple[float, float]] = {}
    floor = metric.nothing_learned
    if per_seed.empty or not (metric.chance or floor is not None):
        return out
    groups = (
        per_seed.groupby(list(columns), dropna=False, sort=False) if columns else [((), per_seed)]
    )
    if not metric.chance:
        for key, group in groups:
            worst = float((metric.sign * group["target"]).min()) * metric.sign
            if metric.sign * worst <= metric.sign * floor:  # every round reaches it
                out[key if isinstance(key, tuple) else (key,)] = (worst, math.nan)
        return out
    datasets = set(trials["dataset"]) if "dataset" in trials else set()
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        dataset = dict(zip(columns, key)).get("dataset")
        if dataset is None and len(datasets) == 1:
            dataset = next(iter(datasets))
        chance = chance_points(dataset, classes) if dataset is not None else None
        lowest = float(group["target"].min())
        if chance is not None and metric.units(lowest) < chance + LEARNED_MARGIN:
            out[key] = (lowest, chance)
    return out


def _delta_columns(claims: GridComparison, ri: int, ci: int, target: float) -> dict[str, Any]:
    """The CSV's interval columns of one cell (accuracy points, ``_pct``, or the metric's
    units; empty for the baseline), and the seeds its Δ would need to resolve ``target``
    (from its own sd)."""
    diff = claims.deltas.get((ri, ci))
    unit = _suffix(claims.metric)
    if diff is None:
        kind = "reference" if (ri, ci) in claims.references and claims.deltas else ""
        return {
            "delta_kind": kind,
            f"delta{unit}": 0.0 if kind else np.nan,
            f"delta_low{unit}": np.nan,
            f"delta_high{unit}": np.nan,
            "delta_n": np.nan,
            "delta_claim": "",
            "seeds_to_resolve": "",
        }
    return {
        "delta_kind": diff.kind,
        f"delta{unit}": round(diff.mean, 4),
        f"delta_low{unit}": round(diff.low, 4),
        f"delta_high{unit}": round(diff.high, 4),
        "delta_n": diff.n,
        "delta_claim": _claim_word(diff, claims.metric),
        "seeds_to_resolve": cell_seeds_needed(claims, (ri, ci), target),
    }


def _claim_word(diff: Difference, metric: Metric) -> str:
    """The CSV's ``delta_claim``: ``better``, ``worse``, ``within resolution``, or ``not
    resolvable`` where the seeds showed no spread (no interval to claim from)."""
    if not diff.spread_seen:
        return "not resolvable"
    return {1: "better", -1: "worse"}.get(claim(diff, metric), "within resolution")


def _reference_name(label: Any, rows: Sequence[str], along: str | None) -> str:
    """The baseline as the notes name it: ``μ = 0``, ``FedAvg``, ``the column β=0.1``."""
    label = label if isinstance(label, str) else ", ".join(label)
    if along == "row":
        return f"the column {label}"
    if len(rows) == 1 and not any(c.isalpha() for c in label):
        return f"{parameter_name(rows[0])} = {label}"  # a bare number names nothing
    return label


def _line_labels(display: pd.DataFrame, along: str | None) -> list[str]:
    """The names of the lines cells are compared along (columns, or rows)."""
    labels = display.index if along == "row" else display.columns
    return [label if isinstance(label, str) else ", ".join(label) for label in labels]


def _with_claims(
    title: str, notes: list[str], grid: _Assembled, target: float
) -> tuple[str, list[str]]:
    """The caption gets what the seeds resolve (and a mid-climb warning); the notes how
    to read Δ and bold, the seeds that would resolve ``target`` points and whether the
    trials had converged."""
    claims = grid.claims
    tail = caption_text(claims)
    if tail and grid.convergence.mid_climb:
        tail += "; ⚠ mid-climb"
    title = f"{title} — {tail}" if tail else title
    notes = notes + comparison_notes(
        claims, grid.reference, _line_labels(grid.display, claims.along)
    )
    notes += planning_note(claims, grid.cell_labels, target)
    if claims.along is not None:
        notes += convergence_note(grid.convergence, grid.cell_labels)
    return title, notes


def precision_words(trials: pd.DataFrame) -> str:
    """The caption's word on arithmetic where a trial ran other than fp32 (the default
    says nothing): `` — bf16-mixed``, or both precisions named where they mix."""
    if "precision" not in trials:
        return ""
    used = sorted({str(p) for p in trials["precision"].dropna()} - {""})
    if used in ([], ["fp32"]):
        return ""
    return " — " + " and ".join(used) + (" (mixed precisions)" if len(used) > 1 else "")


def accuracy_table(
    trials: pd.DataFrame,
    *,
    rows: Sequence[str],
    columns: Sequence[str] = ("dataset",),
    value: str = "final_acc",
    name: str,
    title: str,
    statuses: Sequence[str] = (COMPLETED,),
    best: str | None = "column",
    row_labeller: Callable[[tuple], str] | None = None,
    metric_text: str | None = None,
    reference: tuple | None = None,
    classes: Mapping[str, int] | None = None,
    resolve_target: float = DEFAULT_TARGET,
    metric: Metric = ACCURACY,
    dp_words: bool = True,
) -> Table:
    """Mean ± std over seeds of ``value`` for every (rows, columns) combination, each
    cell's Δ to the baseline, and bold where the seeds resolve the best.

    ``best``: compare cells (and mark the best) per ``"column"``, per ``"row"``, or None
    (no comparison).  ``reference``: the baseline's row key (its column key with
    ``best="row"``), default the first in reading order.  ``classes``: ``{dataset:
    classes}`` for the chance level (:func:`analysis.stats.comparisons.dataset_classes`).
    ``metric_text`` names ``value`` in the notes (default: :data:`METRICS`).
    ``resolve_target``: the difference (accuracy points, or ``metric``'s units) the
    seed plan is made for.  ``metric``: what ``value`` is (its direction and units).
    ``dp_words``: state the DP trials' (ε, δ) (:mod:`analysis.tables.privacy`); False for
    values outside the guarantee (per-party scores).
    """
    by = [*rows, *columns]
    party_std = _party_std(trials, value)
    stats = summarise(trials, by, value, statuses=statuses, party_std=party_std)
    grid = _assemble(
        stats,
        trials,
        rows=rows,
        columns=columns,
        best=best,
        statuses=statuses,
        row_labeller=row_labeller,
        value=value,
        reference=reference,
        classes=classes,
        resolve_target=resolve_target,
        metric=metric,
    )
    notes = _seed_note(stats, statuses, value, metric_text) + _exclusion_note(trials, statuses)
    title, notes = _with_claims(title, notes, grid, resolve_target)
    data = grid.data
    display = grid.display
    dp_tail, dp_notes, per_cell = (
        privacy_words(trials, by, statuses) if dp_words else ("", [], None)
    )
    if dp_tail:
        title, notes = f"{title} — {dp_tail}", [*notes, *dp_notes]
        keys = [k for k in by if k in per_cell and k in data]
        if keys and not data.empty:
            data = data.merge(per_cell[[*keys, "dp_epsilon"]], on=keys, how="left")
            if "ε per cell" in dp_tail:
                display = _with_epsilon(display, data)
    title += precision_words(trials)
    header = " · ".join(parameter_name(k) for k in rows)
    return Table(name, title, display, grid.bold, data, header, notes, _resolvable(grid), metric)


def _with_epsilon(display: pd.DataFrame, data: pd.DataFrame) -> pd.DataFrame:
    """``display`` with each counted cell's ε (``data``'s ``dp_epsilon``, by its
    ``row`` and ``column`` names) after its value: a table whose cells spent different
    budgets says each one's where it is read, not only in its CSV."""
    shown = display.copy()
    columns = [" / ".join(c) if isinstance(c, tuple) else str(c) for c in shown.columns]
    rows = [str(r) for r in shown.index]
    for _, cell in data.iterrows():
        epsilon = pd.to_numeric(cell.get("dp_epsilon"), errors="coerce")
        if pd.isna(epsilon) or str(cell["row"]) not in rows or str(cell["column"]) not in columns:
            continue
        ri, ci = rows.index(str(cell["row"])), columns.index(str(cell["column"]))
        shown.iat[ri, ci] = f"{shown.iat[ri, ci]} · {epsilon_text(float(epsilon))}"
    return shown


def best_of_table(
    trials: pd.DataFrame,
    *,
    rows: Sequence[str],
    columns: Sequence[str] = ("dataset",),
    tuned: str,
    value: str = "final_acc",
    name: str,
    title: str,
    statuses: Sequence[str] = (COMPLETED,),
    best: str | None = "column",
    row_labeller: Callable[[tuple], str] | None = None,
    reference: tuple | None = None,
    classes: Mapping[str, int] | None = None,
    metric_text: str | None = None,
    resolve_target: float = DEFAULT_TARGET,
    metric: Metric = ACCURACY,
) -> Table:
    """Like :func:`accuracy_table`, but ``tuned`` is chosen per cell: the value with the
    best mean in ``metric``'s direction (the paper: "we tune μ ... and report the best
    accuracy").  The cell names the chosen value when there was a choice; its Δ is that
    value's trials'."""
    by = [*rows, *columns]
    party_std = _party_std(trials, value)
    full = summarise(trials, [*by, tuned], value, statuses=statuses, party_std=party_std)
    picked = []
    for _, group in full.groupby(by, dropna=False, sort=False):
        winner = group.loc[(metric.sign * group["mean"]).idxmax()].copy()
        winner["candidates"] = len(group)
        picked.append(winner)
    stats = pd.DataFrame(picked, columns=[*full.columns, "candidates"]).reset_index(drop=True)
    symbol = value_label(tuned, 0, with_name=True).split("=")[0]

    def chosen(stat: pd.Series) -> str:
        if stat["candidates"] < 2:
            return ""
        return f" ({symbol}={value_label(tuned, stat[tuned])})"

    def matchable(key: tuple) -> tuple:
        # a method that does not declare the tuned parameter has no value for it (NaN,
        # e.g. FedAvg's mu): NaN never equals itself, so it is matched as None
        return tuple(None if isinstance(v, float) and v != v else v for v in key)

    winners = {matchable(k) for k in stats[[*by, tuned]].itertuples(index=False, name=None)}
    keys = trials[[*by, tuned]].itertuples(index=False, name=None)
    chosen_trials = trials[[matchable(tuple(k)) in winners for k in keys]]
    grid = _assemble(
        stats,
        trials,
        rows=rows,
        columns=columns,
        best=best,
        statuses=statuses,
        suffix=chosen,
        row_labeller=row_labeller,
        value=value,
        sample_trials=chosen_trials,
        reference=reference,
        classes=classes,
        resolve_target=resolve_target,
        metric=metric,
    )
    data = grid.data
    if not data.empty:
        data = data.rename(columns={tuned: f"best_{tuned}"})
    notes = _seed_note(stats, statuses, value, metric_text)
    notes.append(
        f"Each cell: the best {parameter_name(tuned)} by mean {metric.name}, chosen on the "
        f"test {metric.name} as in the paper (optimistic: no separate validation set)."
    )
    notes += _exclusion_note(trials, statuses)
    title, notes = _with_claims(title, notes, grid, resolve_target)
    header = " · ".join(parameter_name(k) for k in rows)
    return Table(
        name, title, grid.display, grid.bold, data, header, notes, _resolvable(grid), metric
    )


def communication_table(
    rounds: pd.DataFrame,
    trials: pd.DataFrame,
    *,
    row: str = "algorithm",
    columns: Sequence[str] = ("dataset",),
    baseline: str = "fedavg",
    baseline_column: str = "algorithm",
    target: str = "per-seed",
    name: str,
    title: str,
    classes: Mapping[str, int] | None = None,
    metric: Metric = ACCURACY,
) -> Table:
    """Table 2: per method and column group, rounds to reach the baseline's final
    accuracy (``metric``: its final value of that, an error reached from above; mean ±
    std over seeds) and the speed-up over the baseline (± the std of the per-seed
    speed-ups).

    A column group whose baseline has not learned (a target below chance, 1/classes
    of ``classes[dataset]``, plus :data:`~analysis.stats.comparisons.LEARNED_MARGIN` points;
    classification accuracy only) gets no numbers: each of its cells says why."""
    columns = list(columns)
    per_seed = communication_frame(
        rounds,
        trials,
        row=row,
        columns=columns,
        baseline=baseline,
        baseline_column=baseline_column,
        target=target,
        metric=metric,
    )
    summary = summarise_communication(per_seed, row=row, columns=columns)
    unlearned = _unlearned_targets(per_seed, trials, columns, classes, metric)
    base_name = value_label(baseline_column, baseline)
    display = _communication_display(summary, trials, row, columns, unlearned, base_name, metric)
    bold = no_bold(display)
    data = _communication_data(per_seed, row, columns, unlearned)
    notes = _communication_notes(per_seed, base_name, target, unlearned, metric)
    notes += _gaps_note(per_seed, trials, row, _learned(per_seed, columns, unlearned))
    notes += _exclusion_note(trials, (COMPLETED,))
    return Table(name, title, display, bold, data, parameter_name(row), notes)


def _communication_display(
    summary: pd.DataFrame,
    trials: pd.DataFrame,
    row: str,
    columns: list[str],
    unlearned: dict[tuple, tuple[float, float]],
    base_name: str,
    metric: Metric,
) -> pd.DataFrame:
    """Table 2's cells: per method (row) and column group, ``#rounds`` and ``speed-up``;
    methods with no completed trial anywhere are left out."""
    row_keys = [k[0] for k in key_order(trials, [row])]
    col_keys = [k for k in key_order(trials, columns) if not summary.empty]
    present = set(map(tuple, summary[columns].itertuples(index=False, name=None)))
    col_keys = [k for k in col_keys if k in present]
    labels = []
    for ck in col_keys:
        group = column_label(columns, ck)
        group = group if isinstance(group, str) else ", ".join(group)
        labels += [(group, "#rounds"), (group, "speed-up")]
    row_names = [value_label(row, v) for v in row_keys]
    display = pd.DataFrame("–", index=row_names, columns=_columns_index(labels), dtype=object)
    for _, s in summary.iterrows():
        ri = row_keys.index(s[row])
        key = tuple(s[c] for c in columns)
        ci = 2 * col_keys.index(key)
        if key in unlearned:
            lowest, chance = unlearned[key]
            display.iat[ri, ci] = (
                f"no target: {base_name} {metric.show(lowest)} (nothing learned)"
                if math.isnan(chance)
                else f"no target: {base_name} {metric.show(lowest)}% < chance {chance:.0f}% "
                f"+ {LEARNED_MARGIN:.0f}"
            )
            display.iat[ri, ci + 1] = "none (baseline not learned)"
            continue
        display.iat[ri, ci] = _rounds_text(s)
        display.iat[ri, ci + 1] = _speedup_text(s)
    # drop method rows with no completed trial anywhere
    return display[(display != "–").any(axis=1)]


def _rounds_text(s: pd.Series) -> str:
    """A cell's ``#rounds``: mean ± std over seeds when every seed reached the target,
    else how many did not."""
    bound = "≤ " if s.get("at_most", False) else ""
    if s["n_reached"] == s["n"]:
        text = f"{bound}{s['rounds_mean']:.0f}"
        if not math.isnan(s["rounds_std"]) and s["rounds_std"] > 0:
            text += f" ± {s['rounds_std']:.1f}"
        return text
    if s["n_reached"] == 0:
        return "not reached"
    return (
        f"{bound}{s['rounds_mean_reached']:.0f} in {s['n_reached']}/{s['n']} seeds; "
        f"not reached in {s['n'] - s['n_reached']}"
    )


def _speedup_text(s: pd.Series) -> str:
    """A cell's speed-up, ± the std of the per-seed speed-ups when every seed reached;
    where only some did, theirs, said so (``<1×`` is for no seed reaching it)."""
    bound = "≥ " if s.get("at_most", False) else ""
    if 0 < s["n_reached"] < s["n"]:
        reached = s.get("speedup_reached")
        return f"{bound}{format_speedup(reached)} in {s['n_reached']}/{s['n']} seeds"
    if s["n_reached"] == 0:
        missed = s.get("baseline_missed", 0)
        return "none (baseline not reached)" if missed == s["n"] else format_speedup(None)
    speed = bound + format_speedup(s["speedup"])
    if s["n_reached"] == s["n"] and s["speedup_std"] > 0:  # (NaN > 0 is False)
        speed += f" ± {s['speedup_std']:.1f}"
    return speed


def _communication_data(
    per_seed: pd.DataFrame,
    row: str,
    columns: list[str],
    unlearned: dict[tuple, tuple[float, float]],
) -> pd.DataFrame:
    """Table 2's CSV: one row per (method, column group, seed), with whether the
    baseline learned there (no speed-up where it did not)."""
    data = per_seed.copy()
    data.insert(0, "row", [value_label(row, v) for v in data[row]])
    learned = [tuple(r) not in unlearned for r in data[columns].itertuples(index=False)]
    data["baseline_learned"] = learned
    data["speedup"] = data["speedup"].where(learned)  # a speed-up to chance is no number
    return data


def _learned(
    per_seed: pd.DataFrame, columns: list[str], unlearned: dict[tuple, tuple[float, float]]
) -> pd.Series:
    """Per row of ``per_seed``: whether its column group's baseline learned (its cell
    shows rounds, not "no target")."""
    keys = per_seed[columns].itertuples(index=False) if columns else [()] * len(per_seed)
    return pd.Series([tuple(k) not in unlearned for k in keys], index=per_seed.index, dtype=bool)


def _gaps_note(
    per_seed: pd.DataFrame, trials: pd.DataFrame, row: str, learned: pd.Series
) -> list[str]:
    """The note on the rows whose #rounds is a bound (test values with gaps, and the
    target reached at a scored round): named only where a cell shows the bound, never
    where the baseline learned nothing and the cell shows no rounds at all."""
    bounded = per_seed[per_seed["at_most"].astype(bool)] if "at_most" in per_seed else per_seed
    bounded = bounded[learned.loc[bounded.index]]
    if bounded.empty:
        return []
    shown = trials[trials[row].isin(set(bounded[row]))]
    names = ", ".join(value_label(row, v) for (v,) in key_order(shown, [row]))
    every = sorted({int(k) for k in shown.get("personal_test_every", pd.Series()).dropna()})
    period = f" (personal_test_every = {', '.join(map(str, every))})" if every else ""
    return [
        f"≤ / ≥: {names} — its own models were scored on the test set every few "
        f"rounds{period}, not every round: #rounds is its first scored round that reached "
        "the target, so it reached it at most then, and its speed-up over a baseline "
        "scored every round is at least the one given."
    ]


def _communication_notes(
    per_seed: pd.DataFrame,
    base_name: str,
    target: str,
    unlearned: dict[tuple, tuple[float, float]],
    metric: Metric,
) -> list[str]:
    """Table 2's notes: the target, how rounds and speed-ups read, and where the baseline
    has not learned."""
    final = metric.final_noun
    target_words = (
        f"the same seed's baseline {final}"
        if target == "per-seed"
        else f"the baseline's mean {final} over seeds"
    )
    reach = f"{metric.noun} {_reach_sign(metric)}"
    notes = [
        f"Baseline {base_name}: target = {target_words}; "
        f"#rounds = first round with {reach} target (mean ± std over seeds), one rule for "
        f"every row, {base_name}'s included (it reaches its own final value at its last "
        "round at the latest); a row that never reaches it within the rounds it ran is "
        "censored there: not reached, never a number.",
        "Speed-up = baseline rounds / method rounds, only for seeds where both reached "
        "the target (± the std of the per-seed speed-ups, where they differ); "
        f"{format_speedup(None)} = not reached within the rounds run in any seed, as in "
        "the paper; where only some seeds reached it, the cell gives those seeds' rounds "
        "and speed-up and says in how many of the seeds.",
    ]
    if metric.chance:
        notes.append(
            f"Rounds and speed-ups are given only where the baseline has learned: every "
            f"target at least {LEARNED_MARGIN:.0f} points above chance (1/classes)."
        )
    floor = metric.nothing_learned
    if floor is not None and not metric.chance:
        notes.append(
            "Rounds and speed-ups are given only where the baseline has learned: every "
            f"target above {metric.show(floor)}, what a model that has learned nothing records."
        )
    if unlearned and metric.chance:
        notes.append(
            f"No speed-up in {len(unlearned)} column(s): {base_name}'s final accuracy there "
            "is near chance, so reaching it says nothing about a method."
        )
    elif unlearned:
        notes.append(
            f"No speed-up in {len(unlearned)} column(s): {base_name}'s final {metric.noun} "
            f"there is {metric.show(floor)} in a seed (nothing learned), which every round "
            "reaches, so reaching it says nothing about a method."
        )
    fallback = not per_seed.empty and (per_seed["target_source"] == "mean over seeds").any()
    if fallback and target == "per-seed":
        notes.append("Seeds the baseline lacks were compared with its mean over seeds.")
    return notes
