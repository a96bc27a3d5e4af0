"""A DP study group's privacy part of the report: accuracy vs ε curves with bands, the
fraction of updates clipped per round, and the privacy–heterogeneity interaction with
its intervals (docs/privacy.md).  Only for groups whose trials recorded an ε."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.naming import dataset_name, parameter_name, value_label
from analysis.primary_metric import Metric
from analysis.reading.grouping import StudyGroup
from analysis.reading.loading import COMPLETED
from analysis.sections.markdown import figure_block, file_links, unique_stem
from analysis.stats.privacy_interaction import (
    NOISE,
    SKEW,
    interaction_frame,
    privacy_interactions,
)
from analysis.stats.trial_statistic import REPORTED
from analysis.tables.formats import to_markdown, write_table
from analysis.tables.privacy import EPSILON, accountant_words, delta_words
from analysis.tables.privacy_rounds import clipped_fractions, epsilon_curves
from analysis.tables.study_tables import TableOptions, metric_text, primary_of, reported_group
from analysis.tables.table import Table, key_order, no_bold, row_label
from federated.contract.columns import PRIVACY_COLUMNS

CLIPPED = next(c for c in PRIVACY_COLUMNS if c.column == "dp_clipped_fraction")


def privacy_section(
    group: StudyGroup, options: TableOptions, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    """The group's DP part (figure and tables into ``out``, stems joining ``used``);
    nothing for a group without DP trials."""
    if EPSILON not in group.trials or group.trials[EPSILON].isna().all():
        return []
    from analysis.figures.plots import save_figure
    from analysis.figures.privacy_curves import epsilon_accuracy_plot, log_epsilon_axis

    metric = primary_of(group)
    keys = [a for a in group.axes if a in group.trials and a != "seed"]
    done = group.trials[group.trials["status"] == COMPLETED]
    where = ", ".join(dataset_name(d, metric.task_spec) for d in group.datasets)
    study = group.study or "runs"
    lines = ["### Differential privacy", ""]

    curves = epsilon_curves(group.rounds, group.trials, keys, metric)
    if not curves.empty:
        panels = [SKEW] if SKEW in keys else []
        line_keys = [k for k in keys if k not in panels]
        name = unique_stem(f"fig_{study}_accuracy_vs_epsilon{group.suffix}", used)
        figure = epsilon_accuracy_plot(
            curves, line_keys, panels, metric, title=f"{study}: test {metric.name} vs ε"
        )
        paths = save_figure(figure, out / "figures" / name, formats)
        seeds = done["seed"].nunique()
        log = ", log ε axis" if log_epsilon_axis(curves) else ""
        caption = (
            f"test {metric.name} vs the ε spent after each round, at δ = "
            f"{delta_words(done)}, on {where}{log}; one line per cell, a marker per round, "
            f"line = mean over {seeds} seed(s), band = ±1 std over seeds (ddof 1, cut at the "
            "metric's range); cells "
            f"without noise (ε = ∞) are not drawn; {accountant_words(done)}"
        )
        lines += figure_block(paths, out, caption)

    fractions = clipped_fractions(group.rounds, group.trials, keys)
    record_level = "dp_level" in done and set(done["dp_level"].dropna()) == {"record"}
    if fractions.empty and record_level:
        lines += [
            f"*{CLIPPED.column} is the share of party updates clipped: record-level DP "
            "clips each record's gradient inside its party, which no row counts.*",
            "",
        ]
    elif fractions.empty:
        lines += [
            f"*The fraction of updates clipped per round ({CLIPPED.column}) is not in these "
            "rows: the sweep ran before fedsweep recorded it.*",
            "",
        ]
    else:
        table = _clipped_table(fractions, keys, done, f"{study}_clipped{group.suffix}", used)
        lines += _shown(table, out)

    interaction = _interaction_table(group, options, keys, metric, used)
    if interaction is not None:
        lines += _shown(interaction, out)
    return lines


def _shown(table: Table, out: Path) -> list[str]:
    paths = write_table(table, out / "tables")
    return [to_markdown(table), f"Files: {file_links(paths, out)}", ""]


def _labels(frame: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    return [row_label(keys, v) for v in frame[list(keys)].itertuples(index=False, name=None)]


def _ordered(frame: pd.DataFrame, keys: Sequence[str], trials: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s cells in the report's reading order of ``trials``' values."""
    order = {k: i for i, k in enumerate(key_order(trials, keys))}
    rank = [order.get(v, len(order)) for v in frame[list(keys)].itertuples(index=False, name=None)]
    return frame.assign(_rank=rank).sort_values("_rank").drop(columns="_rank")


def _clipped_table(
    fractions: pd.DataFrame,
    keys: Sequence[str],
    trials: pd.DataFrame,
    name: str,
    used: set[str],
) -> Table:
    """Mean clipped fraction over rounds and seeds, and the first and last round's."""
    fractions = _ordered(fractions, keys, trials).reset_index(drop=True)
    display = pd.DataFrame(
        {
            "mean over rounds": [f"{v:.2f}" for v in fractions["mean"]],
            "round 1": [f"{v:.2f}" for v in fractions["first"]],
            "last round": [f"{v:.2f}" for v in fractions["last"]],
        },
        index=_labels(fractions, keys),
    )
    seeds = ", ".join(str(s) for s in sorted(set(fractions["seeds"])))
    return Table(
        name=unique_stem(f"table_{name}", used),
        title=f"Fraction of updates clipped per round ({CLIPPED.column})",
        display=display,
        bold=no_bold(display),
        data=fractions,
        row_header=" · ".join(parameter_name(k) for k in keys),
        notes=[
            f"{CLIPPED.statistic}, on {CLIPPED.split}; mean over every round and seed, and "
            f"the mean over seeds of the first and last round ({seeds} seed(s) a cell)."
        ],
    )


def _interaction_table(
    group: StudyGroup, options: TableOptions, keys: Sequence[str], metric: Metric, used: set[str]
) -> Table | None:
    """Per method (the other axes) and σ > 0: the noise's cost at the least and most
    skewed β and their difference in differences; None without σ = 0 or two β."""
    if NOISE not in keys or SKEW not in keys:
        return None
    reported, statistic = reported_group(group, options)
    done = reported.trials[reported.trials["status"] == COMPLETED]
    rows = privacy_interactions(done, keys, REPORTED, metric)
    if not rows:
        return None
    others = [k for k in keys if k not in (NOISE, SKEW)]
    frame = interaction_frame(rows, others, metric)
    low, high = rows[0].beta_low, rows[0].beta_high
    sigma = parameter_name(NOISE)
    labels = [
        (row_label(others, r.cell) + " · " if others else "")
        + value_label(NOISE, r.sigma, with_name=True)
        for r in rows
    ]
    display = pd.DataFrame(
        {
            f"noise cost, β={low:g}": frame["cost_low_text"].tolist(),
            f"noise cost, β={high:g}": frame["cost_high_text"].tolist(),
            "difference in differences": frame["did_text"].tolist(),
            "what the seeds resolve": frame["verdict"].tolist(),
        },
        index=labels,
    )
    words = metric_text(reported, statistic, metric)
    return Table(
        name=unique_stem(f"table_{group.study or 'runs'}_interaction{group.suffix}", used),
        title=f"Privacy–heterogeneity interaction: {words}",
        display=display,
        bold=no_bold(display),
        data=frame,
        row_header=" · ".join([*(parameter_name(k) for k in others), sigma]),
        notes=[
            f"Noise cost at β: acc(σ, β) − acc(σ = 0, β) in {metric.diff_words}, paired "
            "by seed (same partition, initialisation and draws; σ changes none of them), "
            "95% t interval. "
            f"Difference in differences: cost at β = {low:g} − cost at β = {high:g}, "
            "Welch's interval (‡) over the two sets of per-seed costs, because the two β "
            "are different partitions; negative = noise costs more under the stronger "
            "skew.  A direction is claimed only where the interval excludes 0.",
        ],
    )
