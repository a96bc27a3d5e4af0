"""What a table may claim: each cell against the table's baseline, the bold rule, and
the smallest difference its seeds resolve.  The statistics are :mod:`analysis.stats.paired_stats`'s;
this module decides which cells are compared with which and how that is written.

A table compares its cells along one direction: down each column (``along="column"``,
the rows are the alternatives, e.g. methods) or along each row.  Each such *line* has a
reference cell, the table's baseline (FedAvg, μ = 0, the study's first value: the table
shape names it).  Rules, all in accuracy points (on a score task's metric, in its own
units, :mod:`analysis.primary_metric`, and "better", "best" and "highest" in its
direction: the lowest MAE is the best):

- **Δ**: every other cell minus its line's reference.  Paired over seeds when the two
  cells share their partitions (the same :data:`PARTITION_FIELDS`: trials of one seed then
  share partition, initialisation and batches) and hold exactly the same seeds;
  otherwise unpaired, Welch's interval, marked ``‡``.  The cell says ``↑`` (better) or
  ``↓`` (worse) only when the 95% interval excludes 0.
- **Bold**: the line's highest mean, only when the interval of best − runner-up excludes
  0 (paired or Welch as above) and the best is above chance (1/classes) by
  :data:`LEARNED_MARGIN` points, where the dataset's classes are known (classification
  accuracy only: no other metric has a chance level).  Otherwise no bold, and a note
  says the top cells are within the seeds' resolution (or at chance).
- **One seed** (no cell has two): no Δ, no bold, and the table says it makes no claim.
- **No spread**: a Δ whose per-seed differences are all equal (or a Welch Δ whose two
  cells both do not vary) has no interval (:mod:`analysis.stats.paired_stats`, "No spread,
  no interval"): its cell says "not resolvable from N seeds", without ``↑``/``↓``; a line
  whose best − runner-up is such a difference gets no bold, and a note says why.  Such
  differences are left out of the pooled sd behind **Resolvable** (they measured no
  noise); a table left with none says "not resolvable from N seeds" in its caption.
- **Resolvable**: :func:`~analysis.stats.paired_stats.resolvable_difference` pooled over every
  paired Δ of the table (each cell's per-seed differences to its reference, weighted by
  seeds - 1), with n = the table's seed count (the largest in a cell); a table with only
  unpaired comparisons uses :func:`~analysis.stats.paired_stats.resolvable_unpaired` over its
  cells' values.
- **Seeds to resolve** a stated difference (the report's ``--resolve-target``): the same
  arithmetic inverted (:func:`analysis.stats.seed_plan.seeds_to_resolve`) on the table's pooled
  sd, and on each Δ cell's own (a noisier estimate, for the CSV and the note).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from analysis.primary_metric import ACCURACY, Metric
from analysis.stats.paired_stats import (
    LEVEL,
    PAIRED,
    WELCH,
    Difference,
    compare,
    no_spread,
    pooled_sd,
    resolvable_difference,
    resolvable_unpaired,
)
from analysis.stats.seed_plan import DEFAULT_TARGET, seeds_text

# A trial's partition is drawn from these config fields and its seed: cells that differ in
# one of them do not share partitions, so their seeds cannot be paired.
PARTITION_FIELDS = (
    "dataset",
    "data_root",
    "partition",
    "beta",
    "n_parties",
    "labels_per_party",
    "data_fraction",
    "test_fraction",
    "holdout_fraction",
)
# A baseline (or a table's best cell) has learned when its accuracy is at least chance
# (1/classes) plus this many accuracy points: 10 points is far outside the seed-to-seed
# spread of an untrained model (± 1-2 points on a 10-class test set), and small next to
# what any method reaches once it learns.
LEARNED_MARGIN = 10.0
# federated.data.catalog's class counts (not imported: it imports torch); a sweep's
# partitions.json, when there is one, says it for any dataset, image folders included.
KNOWN_CLASSES = {
    "cifar10": 10,
    "cifar100": 100,
    "tinyimagenet": 200,
    "fmnist": 10,
    "mnist": 10,
    "synthetic": 10,
}
UNPAIRED_MARK = "‡"
BETTER, WORSE = "↑", "↓"


def dataset_classes(partitions: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``{dataset: classes}``: the built-in datasets', and any a partition entry records
    (its class-count table has one column per class)."""
    out = dict(KNOWN_CLASSES)
    for entry in partitions:
        counts = entry.get("class_counts")
        if entry.get("dataset") and counts:
            out[str(entry["dataset"])] = len(counts[0])
    return out


def chance_points(dataset: Any, classes: Mapping[str, int] | None) -> float | None:
    """Chance accuracy of ``dataset`` in points (100 / classes); None when unknown."""
    n = (classes or KNOWN_CLASSES).get(str(dataset))
    return 100.0 / n if n else None


def has_learned(accuracy_points: float, chance: float | None) -> bool:
    """At least :data:`LEARNED_MARGIN` points above chance (True when chance is unknown)."""
    return chance is None or accuracy_points >= chance + LEARNED_MARGIN


def signed(value: float, digits: int = 1) -> str:
    """``+2.6`` / ``-0.4`` (``digits`` decimals, one by default; never ``-0.0``)."""
    shown = round(value, digits)
    return f"{0.0 if shown == 0 else shown:+.{digits}f}"


def claim(diff: Difference, metric: Metric) -> int:
    """+1 when ``diff`` (a minus b) is resolved better in ``metric``'s direction, -1
    resolved worse, 0 within the seeds' resolution (or without an interval)."""
    return diff.direction if metric.higher_is_better else -diff.direction


@dataclass
class CellSample:
    """What a cell's statistics are computed from.

    Attributes:
        by_seed: ``{seed: accuracy points}`` of its counted trials (a score metric's
            value as recorded: display units, :attr:`Metric.units`).
        partition: the distinct values of :data:`PARTITION_FIELDS` among its trials.
        chance: its dataset's chance accuracy in points (None: unknown, or a metric
            without a chance level).
        climb_by_seed: ``{seed: points}`` (display units), each trial's climb over its
            last rounds up to the reported round (:mod:`analysis.stats.trial_statistic`);
            empty when unknown.
    """

    by_seed: dict[int, float]
    partition: frozenset
    chance: float | None = None
    climb_by_seed: dict[int, float] = field(default_factory=dict)

    @property
    def mean(self) -> float:
        return float(np.mean(list(self.by_seed.values())))


def cell_samples(
    trials: pd.DataFrame,
    keys: Sequence[str],
    value: str,
    classes: Mapping[str, int] | None,
    metric: Metric = ACCURACY,
) -> dict[tuple, CellSample]:
    """``{key tuple: CellSample}`` from counted, one-per-seed trials (``value`` as
    recorded, a fraction for accuracy, turned into ``metric``'s display units; its
    climbs from the column ``<value>_climb`` where the trials have one)."""
    fields = [f for f in PARTITION_FIELDS if f in trials]
    climb = f"{value}_climb"
    out: dict[tuple, CellSample] = {}
    groups = trials.groupby(list(keys), dropna=False, sort=False) if keys else [((), trials)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        values = group[value].astype(float)
        signatures = frozenset(
            tuple(str(v) for v in row) for row in group[fields].itertuples(index=False)
        )
        datasets = set(group["dataset"]) if "dataset" in group else set()
        chances = {chance_points(d, classes) for d in datasets} if metric.chance else {None}
        climbs = (
            {int(s): metric.units(float(c)) for s, c in zip(group["seed"], group[climb])}
            if climb in group
            else {}
        )
        out[key] = CellSample(
            {int(s): metric.units(v) for s, v in zip(group["seed"], values)},
            signatures,
            chances.pop() if len(chances) == 1 else None,
            climbs,
        )
    return out


@dataclass
class GridComparison:
    """The claims of one table (cells as (row index, column index)).

    Attributes:
        along: ``"column"`` or ``"row"``: the direction cells are compared in.
        metric: what the cells hold (its direction decides better, worse and best; its
            units the text).
        deltas: each compared cell's difference to its line's reference.
        paired_diffs: each paired cell's per-seed differences (for the CSV and the caption).
        references: the reference cells.
        bold: the cells marked best.
        unresolved: lines whose top two cells are within the seeds' resolution.
        spreadless: lines whose best − runner-up showed no spread over seeds (not
            resolvable from them: no bold).
        at_chance: lines whose best cell is resolved but not above chance.
        resolvable: the smallest resolvable difference (points, or the metric's units;
            NaN: none computable).
        no_spread: the table compares cells over two or more seeds, but no comparison
            showed any spread to estimate ``resolvable`` from.
        seeds: the table's seed count (the largest in a cell).
        pooled_sd: the sd behind ``resolvable`` (points): of the paired differences pooled
            over the Δ cells, or the within-cell sd for an unpaired table.
        spreads: each Δ cell's own sd (points): of its paired differences, or (Welch)
            the root mean square of the two cells' sds.
        sd_dof: the degrees of freedom ``pooled_sd`` rests on (Σ seeds − 1 over the
            samples pooled): below :data:`MIN_PLAN_DOF` no seed count is planned from it.
    """

    along: str | None
    metric: Metric = ACCURACY
    deltas: dict[tuple[int, int], Difference] = field(default_factory=dict)
    references: set[tuple[int, int]] = field(default_factory=set)
    bold: set[tuple[int, int]] = field(default_factory=set)
    unresolved: list[int] = field(default_factory=list)
    spreadless: list[int] = field(default_factory=list)
    at_chance: list[int] = field(default_factory=list)
    resolvable: float = math.nan
    no_spread: bool = False
    resolvable_kind: str = PAIRED
    seeds: int = 0
    pooled_sd: float = math.nan
    spreads: dict[tuple[int, int], float] = field(default_factory=dict)
    sd_dof: int = 0

    @property
    def no_claim(self) -> bool:
        return self.seeds < 2

    @property
    def unpaired(self) -> bool:
        return any(d.kind == WELCH for d in self.deltas.values())

    @property
    def spreadless_deltas(self) -> bool:
        """Whether some Δ showed no spread over its seeds (not resolvable from them)."""
        return any(not d.spread_seen for d in self.deltas.values())


def compare_grid(
    samples: Mapping[tuple[int, int], CellSample],
    along: str | None,
    reference: int | None,
    metric: Metric = ACCURACY,
) -> GridComparison:
    """The Δ of every cell to its line's reference (``reference``: the row index when
    comparing down columns, the column index along rows), the bold cells and the
    resolvable difference (rules in the module docstring), ``metric``'s direction
    deciding which cell is best."""
    result = GridComparison(along, metric)
    result.seeds = max((len(s.by_seed) for s in samples.values()), default=0)
    if along is None or result.no_claim:
        return result
    lines: dict[int, dict[int, CellSample]] = {}
    for (ri, ci), sample in samples.items():
        line, position = (ci, ri) if along == "column" else (ri, ci)
        lines.setdefault(line, {})[position] = sample
    if all(len(cells) < 2 for cells in lines.values()):
        # no line holds two cells (a one-cell grid): nothing to compare, so no Δ, no
        # bold and no resolvable difference, whatever the table's shape or metric
        result.along = None
        return result

    def cell(line: int, position: int) -> tuple[int, int]:
        return (position, line) if along == "column" else (line, position)

    paired_sets: list[list[float]] = []  # per-seed differences that showed spread
    for line, cells in sorted(lines.items()):
        ref = cells.get(reference) if reference is not None else None
        if ref is not None:
            result.references.add(cell(line, reference))
            for position, sample in cells.items():
                if position == reference:
                    continue
                diff = compare(
                    sample.by_seed, ref.by_seed, pairable=sample.partition == ref.partition
                )
                result.deltas[cell(line, position)] = diff
                if diff.kind == PAIRED and diff.has_interval:
                    seeds = sorted(sample.by_seed)
                    paired_sets.append([sample.by_seed[s] - ref.by_seed[s] for s in seeds])
                    result.spreads[cell(line, position)] = float(np.std(paired_sets[-1], ddof=1))
                elif diff.kind == WELCH and diff.has_interval:
                    a, b = list(sample.by_seed.values()), list(ref.by_seed.values())
                    squares = (np.var(a, ddof=1) + np.var(b, ddof=1)) / 2
                    result.spreads[cell(line, position)] = float(np.sqrt(squares))
        ranked = sorted(cells.items(), key=lambda item: -metric.sign * item[1].mean)
        if len(ranked) < 2:
            continue  # a lone cell is not the best of anything
        (top, best), (_, runner_up) = ranked[0], ranked[1]
        gap = compare(
            best.by_seed, runner_up.by_seed, pairable=best.partition == runner_up.partition
        )
        if not gap.spread_seen:
            result.spreadless.append(line)
        elif claim(gap, metric) <= 0:
            result.unresolved.append(line)
        elif not has_learned(best.mean, best.chance):
            result.at_chance.append(line)
        else:
            result.bold.add(cell(line, top))
    _set_resolvable(result, paired_sets, samples)
    return result


def _set_resolvable(
    result: GridComparison,
    paired_sets: list[list[float]],
    samples: Mapping[tuple[int, int], CellSample],
) -> None:
    """``result``'s resolvable difference and the sd behind it: pooled over the paired
    differences that showed spread, or, for a table without any (but an unpaired Δ, or
    no Δ at all), over the cells' values that vary (unpaired).  A table whose seeds
    showed no spread anywhere gets NaN and ``no_spread``: a zero sd would claim that any
    difference resolves."""
    kinds = {d.kind for d in result.deltas.values()}
    if paired_sets:
        result.resolvable = resolvable_difference(paired_sets, n=result.seeds)
        result.pooled_sd = pooled_sd(paired_sets)[0]
        result.sd_dof = sum(len(s) - 1 for s in paired_sets)
    elif kinds == {PAIRED}:
        result.no_spread = True  # every Δ paired, and none showed spread
    else:
        values = [list(s.by_seed.values()) for s in samples.values()]
        varying = [v for v in values if len(v) >= 2 and not no_spread(v)]
        result.resolvable_kind = WELCH
        if varying:
            result.resolvable = resolvable_unpaired(varying, n=result.seeds)
            result.pooled_sd = pooled_sd(varying)[0]
            result.sd_dof = sum(len(v) - 1 for v in varying)
        else:
            result.no_spread = any(len(v) >= 2 for v in values)


def delta_text(diff: Difference, metric: Metric = ACCURACY) -> str:
    """``Δ +2.6 [+1.1, +4.1] ↑`` (``↑`` better / ``↓`` worse in ``metric``'s direction,
    only when the interval excludes 0: a lower MAE is ``↑``; ``‡`` for an unpaired
    interval); ``Δ +2.6 (no interval)`` with a single seed."""
    mark = UNPAIRED_MARK if diff.kind == WELCH else ""
    d = metric.digits
    if not diff.spread_seen:
        return f"Δ {signed(diff.mean, d)}{mark} ({not_resolvable_words(diff.n)})"
    if not diff.has_interval:
        return f"Δ {signed(diff.mean, d)}{mark} (no interval)"
    arrow = {1: f" {BETTER}", -1: f" {WORSE}"}.get(claim(diff, metric), "")
    return f"Δ {signed(diff.mean, d)} [{signed(diff.low, d)}, {signed(diff.high, d)}]{mark}{arrow}"


def not_resolvable_words(seeds: int) -> str:
    """``not resolvable from 2 seeds``: a difference (or a table) whose seeds showed no
    spread to estimate an interval from."""
    return f"not resolvable from {seeds} seed{'s' if seeds != 1 else ''}"


def caption_text(result: GridComparison) -> str:
    """The caption's tail: ``resolvable ≈ 2.1 points (95%, 3 seeds)``, or the no-claim
    words with one seed; empty when the table compares nothing."""
    if result.along is None:
        return ""
    if result.no_claim:
        return "one seed: no claim"
    if result.no_spread:
        return not_resolvable_words(result.seeds)
    if math.isnan(result.resolvable):
        return ""
    amount = result.metric.amount(result.resolvable)
    return f"resolvable ≈ {amount} ({LEVEL:.0%}, {result.seeds} seeds)"


def comparison_notes(
    result: GridComparison, reference_text: str | None, line_labels: Sequence[str]
) -> list[str]:
    """The lines under a table that say how to read its Δ, bold and caption."""
    if result.along is None:
        return []
    line = result.along
    if result.no_claim:
        return [
            "One seed: this table makes no claim — no interval, no better/worse, no bold "
            "(run 2 or more seeds; 3 or more for useful intervals)."
        ]
    notes = []
    metric = result.metric
    lower = "" if metric.higher_is_better else f" ({BETTER} = a lower {metric.name})"
    if reference_text:
        notes.append(
            f"Δ = difference to {reference_text} in the same {line}, in {metric.diff_words}: "
            "mean over seeds of the paired difference (trials of a seed share partition, "
            f"initialisation and batches) [{LEVEL:.0%} Student-t interval]; "
            f"{BETTER}/{WORSE}{lower} only where the interval excludes 0."
        )
    if result.unpaired:
        notes.append(
            f"{UNPAIRED_MARK} unpaired (different partitions, or seeds that do not match up): "
            f"Welch's {LEVEL:.0%} interval of the difference of means."
        )
    best = "" if metric.higher_is_better else f" (the lowest {metric.name})"
    notes.append(
        f"Bold: the best{best} of its {line}, only where the {LEVEL:.0%} interval of best − "
        "runner-up excludes 0."
    )
    if result.unresolved:
        where = ", ".join(line_labels[i] for i in result.unresolved)
        notes.append(
            f"No bold in {where}: the top cells are within the seeds' resolution "
            "(the interval of best − runner-up includes 0)."
        )
    notes += _spreadless_notes(result, line_labels)
    if result.at_chance:
        where = ", ".join(line_labels[i] for i in result.at_chance)
        notes.append(
            f"No bold in {where}: the best is not {LEARNED_MARGIN:.0f} points above chance "
            "(1/classes): nothing there has learned."
        )
    if not math.isnan(result.resolvable):
        how = (
            "t(0.975, n−1) · s / √n, s = the sd of the paired differences pooled over the "
            "table's Δ cells (each weighted by its seeds − 1)"
            if result.resolvable_kind == PAIRED
            else "t(0.975, 2(n−1)) · s · √(2/n), s = the within-cell sd pooled over the "
            "cells (unpaired)"
        )
        thin = (
            f"; s rests on {result.sd_dof} degree of freedom, so this is a rough guess"
            if result.sd_dof < MIN_PLAN_DOF
            else ""
        )
        notes.append(
            f"Resolvable ≈ {metric.amount(result.resolvable)}: the smallest difference "
            f"{result.seeds} seeds tell from 0 at {LEVEL:.0%} ({how}{thin})."
        )
    return notes


def _spreadless_notes(result: GridComparison, line_labels: Sequence[str]) -> list[str]:
    """The notes on differences whose seeds showed no spread: the Δ cells that say "not
    resolvable from N seeds", and the lines left without bold for it."""
    notes = []
    if result.spreadless_deltas or result.no_spread:
        notes.append(
            "Not resolvable: the per-seed differences are equal on every seed (to "
            "rounding), so their interval would have zero width and measure no "
            f"seed-to-seed noise; no {BETTER}/{WORSE} and no bold rest on them (more seeds, "
            "or a larger test set, can tell)."
        )
    if result.spreadless:
        where = ", ".join(line_labels[i] for i in result.spreadless)
        notes.append(
            f"No bold in {where}: best − runner-up is the same on every seed, "
            f"{not_resolvable_words(result.seeds)}."
        )
    return notes


# A note lists each comparison's seeds up to this many Δ cells, else their range.
LISTED_COMPARISONS = 8
# An sd from fewer degrees of freedom than this plans no seed count: one difference of
# two seeds says almost nothing of the noise (its sd could be 10x off either way).
MIN_PLAN_DOF = 2


def cell_seeds_needed(result: GridComparison, cell: tuple[int, int], target: float) -> str:
    """Seeds the Δ of ``cell`` would need to resolve ``target`` (points, or the metric's
    units), from its own sd (``"–"`` where it has no interval)."""
    sd = result.spreads.get(cell, math.nan)
    return seeds_text(sd, target, paired=result.deltas[cell].kind == PAIRED)


def planning_note(
    result: GridComparison,
    cell_labels: Mapping[tuple[int, int], str],
    target: float = DEFAULT_TARGET,
) -> list[str]:
    """The line saying how many seeds would resolve ``target`` (points, or the metric's
    units): for the table (its pooled sd) and for each comparison (its own sd); empty
    without an sd."""
    if result.along is None or result.no_claim or math.isnan(result.pooled_sd):
        return []
    paired = result.resolvable_kind == PAIRED
    if result.sd_dof < MIN_PLAN_DOF:
        dof = result.sd_dof
        return [
            f"Seeds to resolve {target:g} {result.metric.diff_unit}: not estimated — the sd "
            f"rests on {dof} degree{'s' if dof != 1 else ''} of freedom (a single "
            "comparison of two seeds), too few to plan a seed count from."
        ]
    table = seeds_text(result.pooled_sd, target, paired=paired)
    sd_words = "paired differences" if paired else "cells (unpaired)"
    unit = result.metric.diff_unit
    line = (
        f"Seeds to resolve {target:g} {unit} at {LEVEL:.0%}: {table} for the table "
        f"(sd of the {sd_words} {result.metric.amount(result.pooled_sd)}, the arithmetic of "
        f"Resolvable inverted; {result.seeds} run)"
    )
    cells = [c for c in sorted(result.deltas) if c in result.spreads]
    needs = {c: cell_seeds_needed(result, c, target) for c in cells}
    if cells and len(cells) <= LISTED_COMPARISONS:
        line += "; per comparison, from its own sd: " + ", ".join(
            f"{cell_labels.get(c, str(c))}: {needs[c]}" for c in cells
        )
    elif cells:
        counts = [int(n) for n in needs.values() if n != "–"]
        if counts:
            line += f"; per comparison {min(counts)}–{max(counts)} (CSV column seeds_to_resolve)"
    return [line + "."]
