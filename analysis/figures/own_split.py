"""What a personalised study is judged by: each party's own test split.

- :func:`own_split_curves`: the mean over parties of each party's value on its own test
  split (``party_test_<stem>_mean``, the fairness block's mean) per scored round, mean
  over seeds with a ±1 sd band, one line per method;
- :func:`trade_off`: per method, the final pooled test value (``test_<stem>``, what a
  global model is judged by) against the final own-split mean — a table (mean and sd over
  seeds of each) and its figure, so a method that gains on its parties' own data at the
  pooled test's cost is seen as such.

Rounds that did not score the own splits hold NaN and are left out (scored every
``party_scores_every``-th round and the last: ``data/columns.csv``).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # headless, before pyplot is imported

import matplotlib.pyplot as plt
import pandas as pd
import seaborn as sns

from analysis.figures.plots import sd_band
from analysis.naming import method_name
from analysis.primary_metric import Metric
from analysis.reading.loading import COMPLETED


def own_split_column(metric: Metric) -> str:
    """The rows' column of the mean over parties on their own test splits."""
    return f"party_test_{metric.stem}_mean"


def own_split_curves(
    rounds: pd.DataFrame, trials: pd.DataFrame, metric: Metric, *, title: str = ""
) -> plt.Figure | None:
    """Own-split mean per scored round by method (band ±1 sd over seeds); None where
    no completed trial scored its own splits."""
    column = own_split_column(metric)
    done = trials[trials["status"] == COMPLETED][["sweep", "trial", "algorithm"]]
    if column not in rounds or done.empty:
        return None
    rows = rounds.drop(columns=["algorithm"], errors="ignore").merge(done, on=["sweep", "trial"])
    rows = rows.assign(value=pd.to_numeric(rows[column], errors="coerce")).dropna(subset=["value"])
    if rows.empty:
        return None
    rows["value"] = metric.units(rows["value"])
    rows["method"] = rows["algorithm"].map(method_name)
    with sns.axes_style("whitegrid"):
        fig, ax = plt.subplots(figsize=(6.4, 3.8), layout="constrained")
        sns.lineplot(
            data=rows,
            x="round",
            y="value",
            hue="method",
            errorbar=sd_band(metric),
            marker="o",
            ax=ax,
        )
        ax.set_xlabel("round (scored rounds)")
        ax.set_ylabel(f"mean over parties, own test split{metric.unit}")
        if title:
            fig.suptitle(title, fontsize=10)
    return fig


def trade_off(rounds: pd.DataFrame, trials: pd.DataFrame, metric: Metric) -> pd.DataFrame:
    """Per method: ``pooled_mean``/``pooled_sd`` (final ``test_<stem>`` over seeds,
    display units) and ``own_mean``/``own_sd`` (final own-split mean), ``n`` seeds; empty
    where no completed trial has both."""
    column = own_split_column(metric)
    done = trials[trials["status"] == COMPLETED][["sweep", "trial", "algorithm"]]
    if column not in rounds or metric.column not in rounds or done.empty:
        return pd.DataFrame()
    rows = rounds.drop(columns=["algorithm"], errors="ignore").merge(done, on=["sweep", "trial"])
    finals = []
    for (_, _, algorithm), own in rows.groupby(["sweep", "trial", "algorithm"], sort=False):
        own = own.sort_values("round")
        pooled = pd.to_numeric(own[metric.column], errors="coerce").dropna()
        split = pd.to_numeric(own[column], errors="coerce").dropna()
        if pooled.empty or split.empty:
            continue
        finals.append(
            {
                "algorithm": algorithm,
                "pooled": metric.units(pooled.iloc[-1]),
                "own": metric.units(split.iloc[-1]),
            }
        )
    if not finals:
        return pd.DataFrame()
    frame = pd.DataFrame(finals)
    table = frame.groupby("algorithm", sort=False).agg(
        pooled_mean=("pooled", "mean"),
        pooled_sd=("pooled", "std"),
        own_mean=("own", "mean"),
        own_sd=("own", "std"),
        n=("own", "size"),
    )
    return table.reset_index()


def trade_off_figure(table: pd.DataFrame, metric: Metric, *, title: str = "") -> plt.Figure:
    """The :func:`trade_off` table as points with ±1 sd bars: pooled test (x) vs own
    split (y), one per method."""
    with sns.axes_style("whitegrid"):
        fig, ax = plt.subplots(figsize=(5.6, 4.2), layout="constrained")
        for i, row in table.reset_index(drop=True).iterrows():
            ax.errorbar(
                row["pooled_mean"],
                row["own_mean"],
                xerr=row["pooled_sd"],
                yerr=row["own_sd"],
                fmt="o",
                color=f"C{i % 10}",
                label=method_name(row["algorithm"]),
                capsize=3,
            )
        ax.set_xlabel(f"pooled test set{metric.unit}")
        ax.set_ylabel(f"mean over parties, own test split{metric.unit}")
        ax.legend(fontsize=7)
        if title:
            fig.suptitle(title, fontsize=10)
    return fig
