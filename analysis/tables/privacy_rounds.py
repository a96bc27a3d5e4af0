"""DP-FedAvg's per-round columns over a study's cells: accuracy against the ε spent
(the rows' ``dp_epsilon``) and the fraction of updates clipped (``dp_clipped_fraction``);
the words of both columns: :data:`federated.contract.columns.PRIVACY_COLUMNS`.

Both frames are over completed trials, one line per cell (the ``keys`` given: method ×
β × σ in the ``privacy`` study), seeds aggregated round by round.  ε after a round
depends on (N, m, σ, δ, the round) only, so a cell's seeds share it; the band is the
seeds' ±1 sample standard deviation (ddof 1), as the report's accuracy curves draw.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.primary_metric import Metric
from analysis.reading.loading import COMPLETED

EPSILON_COLUMN = "dp_epsilon"
CLIPPED_COLUMN = "dp_clipped_fraction"


def _completed_rounds(
    rounds: pd.DataFrame, trials: pd.DataFrame, keys: Sequence[str]
) -> pd.DataFrame:
    """The rows of ``trials``' completed trials, each with its cell's ``keys`` (the
    trials' values: the rows may carry them too)."""
    cells = trials.loc[trials["status"] == COMPLETED, ["sweep", "trial", *keys]]
    return rounds.drop(columns=[k for k in keys if k in rounds]).merge(
        cells, on=["sweep", "trial"], how="inner"
    )


def epsilon_curves(
    rounds: pd.DataFrame, trials: pd.DataFrame, keys: Sequence[str], metric: Metric
) -> pd.DataFrame:
    """Per cell of ``keys`` and round: ``epsilon`` (the seeds' ε after that round; their
    mean, should a seed differ), ``mean`` and ``sd`` of the test metric in its display
    units (accuracy points) over the seeds, and ``seeds``.  Rounds with an infinite ε
    (no noise: no guarantee) are left out, so a σ = 0 cell has no curve."""
    if EPSILON_COLUMN not in rounds:
        return pd.DataFrame(columns=[*keys, "round", "epsilon", "mean", "sd", "seeds"])
    data = _completed_rounds(rounds, trials, keys)
    data = data.assign(
        epsilon=pd.to_numeric(data[EPSILON_COLUMN], errors="coerce"),
        value=metric.units(pd.to_numeric(data[metric.column], errors="coerce").astype(float)),
        round=data["round"].astype(int),
    )
    data = data[np.isfinite(data["epsilon"]) & data["value"].notna()]
    curves = (
        data.groupby([*keys, "round"], sort=True, dropna=False)
        .agg(
            epsilon=("epsilon", "mean"),
            mean=("value", "mean"),
            sd=("value", "std"),
            seeds=("value", "size"),
        )
        .reset_index()
    )
    return curves


def clipped_fractions(
    rounds: pd.DataFrame, trials: pd.DataFrame, keys: Sequence[str]
) -> pd.DataFrame:
    """Per cell of ``keys``: the fraction of updates clipped, ``mean`` over every round
    and seed (rounds where nobody reported, NaN, left out), ``first`` and ``last`` (the
    mean over seeds of the first and the last round), ``rounds`` and ``seeds``.  Empty
    where no row records the column (a sweep run before it)."""
    columns = [*keys, "mean", "first", "last", "rounds", "seeds"]
    if CLIPPED_COLUMN not in rounds:
        return pd.DataFrame(columns=columns)
    data = _completed_rounds(rounds, trials, keys)
    data = data.assign(
        fraction=pd.to_numeric(data[CLIPPED_COLUMN], errors="coerce"),
        round=data["round"].astype(int),
    ).dropna(subset=["fraction"])
    if data.empty:
        return pd.DataFrame(columns=columns)
    records = []
    for cell, part in data.groupby(list(keys), sort=True, dropna=False):
        cell = cell if isinstance(cell, tuple) else (cell,)
        by_round = part.groupby("round")["fraction"].mean()
        records.append(
            {
                **dict(zip(keys, cell)),
                "mean": float(part["fraction"].mean()),
                "first": float(by_round.iloc[0]),
                "last": float(by_round.iloc[-1]),
                "rounds": int(by_round.size),
                "seeds": len(part[["sweep", "trial"]].drop_duplicates()),
            }
        )
    return pd.DataFrame(records, columns=columns)
