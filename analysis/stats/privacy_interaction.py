"""The privacy–heterogeneity interaction: does DP-FedAvg's noise cost more under skew?

For each cell of the other axes (method, ...) and each noise multiplier σ > 0, with the
least and the most skewed Dirichlet β of the study (``β_low`` < ``β_high``)::

    DiD = (acc(σ, β_low) - acc(0, β_low)) - (acc(σ, β_high) - acc(0, β_high))

in the metric's display units (accuracy points), from each trial's reported statistic.
Negative: noise costs more under the stronger skew.

**What is paired.**  A seed fixes the partition (given β and the data fields), the
initialisation and the parties' draws and batches; σ changes none of them, so within
one β the σ and σ = 0 trials of a seed share a partition and their difference is
paired by seed (when :attr:`CellSample.partition` agrees, as
:func:`~analysis.stats.paired_stats.compare` requires).  Across β the partitions differ,
so the two per-seed costs are compared unpaired (Welch's interval), as the report's
tables compare cells of different partitions.  Both intervals come from
:func:`~analysis.stats.paired_stats.compare`; a β whose trials cannot be paired gets no
per-seed cost, and its rows no interval.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from analysis.primary_metric import Metric
from analysis.stats.comparisons import CellSample, cell_samples, claim, delta_text
from analysis.stats.paired_stats import Difference, compare

NOISE = "dp_noise_multiplier"
SKEW = "beta"


@dataclass(frozen=True)
class Interaction:
    """One row: the noise's cost at ``beta_low`` and ``beta_high`` (each σ minus σ = 0,
    paired by seed) and their difference (``did``, Welch across β); None where a β's
    trials could not be paired."""

    cell: tuple
    sigma: float
    beta_low: float
    beta_high: float
    cost_low: Difference | None
    cost_high: Difference | None
    did: Difference | None


def _seed_costs(noisy: CellSample, plain: CellSample) -> dict[int, float] | None:
    """``{seed: noisy - plain}`` where the two share their seeds and partitions (a
    paired difference is valid), else None."""
    if noisy.partition != plain.partition or set(noisy.by_seed) != set(plain.by_seed):
        return None
    return {s: noisy.by_seed[s] - plain.by_seed[s] for s in sorted(noisy.by_seed)}


def privacy_interactions(
    trials: pd.DataFrame,
    keys: Sequence[str],
    value: str,
    metric: Metric,
    classes: Mapping[str, int] | None = None,
) -> list[Interaction]:
    """The interaction rows of ``trials`` (counted, one per seed and cell), whose cells
    are ``keys`` (which must hold :data:`NOISE` and :data:`SKEW`) and whose per-trial
    value is the column ``value`` (a fraction for accuracy).  Empty where the trials have
    no σ = 0 or fewer than two β."""
    others = [k for k in keys if k not in (NOISE, SKEW)]
    samples = cell_samples(trials, [*others, NOISE, SKEW], value, classes, metric)
    sigmas = sorted({float(k[len(others)]) for k in samples})
    betas = sorted({float(k[len(others) + 1]) for k in samples})
    if 0.0 not in sigmas or len(betas) < 2:
        return []
    low, high = betas[0], betas[-1]
    rows: list[Interaction] = []
    cells = list(dict.fromkeys(k[: len(others)] for k in samples))
    for cell in cells:
        for sigma in (s for s in sigmas if s > 0):
            found = {}
            for beta in (low, high):
                noisy = _sample(samples, cell, sigma, beta)
                plain = _sample(samples, cell, 0.0, beta)
                found[beta] = (noisy, plain)
            if any(n is None or p is None for n, p in found.values()):
                continue
            costs = {beta: _seed_costs(*found[beta]) for beta in (low, high)}
            cost = {
                beta: None
                if costs[beta] is None
                else compare(found[beta][0].by_seed, found[beta][1].by_seed, pairable=True)
                for beta in (low, high)
            }
            did = None
            if costs[low] is not None and costs[high] is not None:
                pairable = found[low][0].partition == found[high][0].partition
                did = compare(costs[low], costs[high], pairable=pairable)
            rows.append(Interaction(cell, sigma, low, high, cost[low], cost[high], did))
    return rows


def _sample(
    samples: Mapping[tuple, CellSample], cell: tuple, sigma: float, beta: float
) -> CellSample | None:
    for key, sample in samples.items():
        n = len(cell)
        if key[:n] == cell and float(key[n]) == sigma and float(key[n + 1]) == beta:
            return sample
    return None


def interaction_verdict(row: Interaction, metric: Metric) -> str:
    """What the seeds resolve of ``row``'s difference in differences, in words: only a
    direction whose interval excludes 0 is claimed."""
    if row.did is None:
        return "not paired within a β: no interval"
    if not row.did.has_interval:
        return "no interval (" + ("one seed" if row.did.n < 2 else "no spread") + ")"
    verdict = claim(row.did, metric)
    if verdict == 0:
        return "not resolved (the interval holds 0)"
    skewed = f"β = {row.beta_low:g}"
    if verdict < 0:
        return f"noise costs more under {skewed}"
    return f"noise costs less under {skewed}"


def interaction_frame(
    rows: Sequence[Interaction], others: Sequence[str], metric: Metric
) -> pd.DataFrame:
    """``rows`` as a frame: the cell's keys, σ, the two β, each cost and the DiD (mean,
    low, high, kind: paired or welch), their texts and the verdict."""
    records = []
    for row in rows:
        record: dict[str, object] = dict(zip(others, row.cell))
        record.update(sigma=row.sigma, beta_low=row.beta_low, beta_high=row.beta_high)
        for name, diff in (
            ("cost_low", row.cost_low),
            ("cost_high", row.cost_high),
            ("did", row.did),
        ):
            record[name] = math.nan if diff is None else diff.mean
            record[f"{name}_low"] = math.nan if diff is None else diff.low
            record[f"{name}_high"] = math.nan if diff is None else diff.high
            record[f"{name}_kind"] = "" if diff is None else diff.kind
            record[f"{name}_text"] = "not paired" if diff is None else delta_text(diff, metric)
        record["verdict"] = interaction_verdict(row, metric)
        records.append(record)
    return pd.DataFrame(records)
