"""Mean ± std over seeds, seed counts, and which trials are left out of them.

Accuracies stay fractions in [0, 1] here; tables turn them into percentages.

Conventions (the paper's Table 1: "we run three trials and report the mean and
standard deviation"):

- ``std`` is the sample standard deviation over seeds (ddof = 1); it is NaN for a
  single seed, where there is no spread to report.
- Only trials whose status is in ``statuses`` count (by default ``completed``): an
  errored, diverged, stopped or unfinished trial never enters a mean; use
  :func:`excluded_trials` to list them.
- ``n`` counts distinct seeds.  The same config and seed loaded twice (two sweeps of
  the same study) is one seed: the trial of the latest sweep is kept and
  ``duplicates`` says how many were dropped.
- SOLO reports each party's own model: its rows carry ``test_acc`` (the mean over
  parties) and ``test_acc_std`` (the std over parties).  As in the paper, SOLO's spread
  is the one over parties: with ``party_std`` given and present for every trial of a
  group, ``std`` is the pooled within-run std over parties, sqrt(mean over seeds of
  std²), ``spread`` says ``"parties"`` and ``seed_std`` keeps the spread over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from analysis.reading.loading import COMPLETED

SUMMARY_COLUMNS = [
    "mean",
    "std",
    "n",
    "seeds",
    "spread",
    "seed_std",
    "duplicates",
    "party_std",
]


def counted_trials(trials: pd.DataFrame, statuses: Iterable[str] = (COMPLETED,)) -> pd.DataFrame:
    """The trials that enter means: status in ``statuses``."""
    return trials[trials["status"].isin(list(statuses))]


def excluded_trials(trials: pd.DataFrame, statuses: Iterable[str] = (COMPLETED,)) -> pd.DataFrame:
    """The trials left out of means (status not in ``statuses``), to be listed."""
    return trials[~trials["status"].isin(list(statuses))]


def latest_per_seed(trials: pd.DataFrame, by: Sequence[str]) -> tuple[pd.DataFrame, int]:
    """One trial per (group, seed): the latest sweep's.  Returns (trials, dropped count)."""
    keys = [*by, "seed"]
    ordered = trials.sort_values(["sweep_started", "order"], kind="stable")
    kept = ordered.drop_duplicates(subset=keys, keep="last")
    return kept.sort_index(), len(trials) - len(kept)


def summarise(
    trials: pd.DataFrame,
    by: Sequence[str],
    value: str = "final_acc",
    *,
    statuses: Iterable[str] = (COMPLETED,),
    party_std: str | None = "final_acc_std",
) -> pd.DataFrame:
    """Per group of ``by``: mean and std over seeds of ``value``, and the seed count.

    Returns one row per group with the ``by`` columns and :data:`SUMMARY_COLUMNS`
    (``seeds`` is the sorted tuple of seeds counted).  Groups with no counted trial do
    not appear.
    """
    by = list(by)
    counted = counted_trials(trials, statuses)
    counted = counted[counted[value].notna()] if value in counted else counted.iloc[0:0]
    if counted.empty:
        return pd.DataFrame(columns=[*by, *SUMMARY_COLUMNS])
    rows = []
    for key, group in counted.groupby(by, dropna=False, sort=False):
        group, dropped = latest_per_seed(group, by)
        values = group[value].to_numpy(dtype=float)
        seed_std = float(np.std(values, ddof=1)) if len(values) > 1 else math.nan
        # ± is the std over seeds in every row; a row of own models also carries its
        # spread over parties (pooled over seeds), shown apart, never in the ± column
        spread, over_parties = "seeds", math.nan
        if party_std and party_std in group and group[party_std].notna().all():
            per_party = group[party_std].to_numpy(dtype=float)
            over_parties, spread = float(np.sqrt(np.mean(per_party**2))), "parties"
        key = key if isinstance(key, tuple) else (key,)
        rows.append(
            {
                **dict(zip(by, key)),
                "mean": float(np.mean(values)),
                "std": seed_std,
                "n": len(values),
                "seeds": tuple(sorted(int(s) for s in group["seed"])),
                "spread": spread,
                "seed_std": seed_std,
                "duplicates": dropped,
                "party_std": over_parties,
            }
        )
    return pd.DataFrame(rows, columns=[*by, *SUMMARY_COLUMNS])
