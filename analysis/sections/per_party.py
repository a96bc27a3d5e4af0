"""A grid study group's per-party outcomes: the per-party table, the distribution figure
and Fig. 2's t-SNE panel, where its trials recorded them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from analysis.naming import method_name
from analysis.primary_metric import Metric
from analysis.reading.grouping import StudyGroup
from analysis.reading.loading import Results
from analysis.sections.markdown import figure_block, file_links, unique_stem
from analysis.tables.formats import to_markdown, write_table
from analysis.tables.study_tables import TableOptions, names_the_method, primary_of


@dataclass(frozen=True)
class PartyLayout:
    """How a group's per-party tables are laid out: ``rows`` (by method when several
    ran, else by the study's axes), ``columns`` (the other settings, the data set), the
    Δ's ``baseline`` row (None: no Δ)."""

    rows: list[str]
    columns: list[str]
    baseline: tuple[str] | None


def per_party_section(
    group: StudyGroup,
    options: TableOptions,
    results: Results,
    party_rows: pd.DataFrame,
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str],
) -> list[str]:
    """Per-party outcomes (table, the fairness block's table, distribution figure) and
    Fig. 2's t-SNE panel of a grid group, where its trials recorded them: rows by method
    when several ran, else by the study's axes.  ``party_rows``: every trial's checked
    ``parties.csv`` (:func:`analysis.tables.party_tables.party_frame`); damaged captures
    go to ``not_counted``."""
    layout = party_layout(group, options)
    metric = primary_of(group)
    # the rows' keys as the group names them (a fine-tuned trial's method fedavg+ft1),
    # not as each parties.csv recorded its trial's config
    keys = [k for k in layout.rows if k in group.trials]
    mine = group.trials[["sweep", "trial", *keys]]
    recorded = party_rows.drop(columns=[k for k in keys if k in party_rows])
    parties = recorded.merge(mine, on=["sweep", "trial"])
    lines = party_tables_part(group, layout, metric, parties, out, used, formats)
    return lines + tsne_part(group, layout.rows, results, out, used, formats, not_counted)


def party_layout(group: StudyGroup, options: TableOptions) -> PartyLayout:
    """The group's :class:`PartyLayout`."""
    trials = group.trials
    several = "algorithm" in trials and trials["algorithm"].nunique() > 1
    rows = ["algorithm"] if several or not group.axes else list(group.axes)
    # per method *and setting*: the study's other axes are columns (a sweep of methods x
    # noise levels must not pool, nor drop, the levels of one method)
    settings = [
        a
        for a in group.axes
        if a not in rows
        and a in trials
        and not (rows == ["algorithm"] and names_the_method(trials, a))
    ]
    columns = settings + (["dataset"] if len(group.datasets) > 1 else [])
    baseline = (options.baseline,) if rows == ["algorithm"] else None
    if baseline and options.baseline not in set(trials["algorithm"]):
        baseline = None
    return PartyLayout(rows, columns, baseline)


def party_tables_part(
    group: StudyGroup,
    layout: PartyLayout,
    metric: Metric,
    parties: pd.DataFrame,
    out: Path,
    used: set[str],
    formats: Sequence[str],
) -> list[str]:
    """The per-party table, the fairness table and the distribution figure of ``metric``
    (nothing where no trial scored its parties), then the own-split part."""
    from analysis.stats.comparisons import dataset_classes
    from analysis.tables import party_tables

    trials, study = group.trials, group.study or "runs"
    classes = dataset_classes(e for sweep in group.sweeps for e in sweep.partitions)
    shape = {"rows": layout.rows, "columns": layout.columns, "classes": classes}
    table = party_tables.per_party_table(
        trials,
        group.rounds,
        name=unique_stem(f"per_party_{study}{group.suffix}", used),
        reference=layout.baseline,
        metric=metric,
        parties=parties,
        **shape,
    )
    if table is None:
        return []
    paths = write_table(table, out / "tables")
    lines = [to_markdown(table), f"Files: {file_links(paths, out)}", ""]
    fairness = party_tables.fairness_table(
        trials,
        group.rounds,
        name=unique_stem(f"fairness_{study}{group.suffix}", used),
        metric=metric,
        **shape,
    )
    if fairness is not None:
        paths = write_table(fairness, out / "tables")
        lines += [to_markdown(fairness), f"Files: {file_links(paths, out)}", ""]
    figure = party_tables.party_distribution_figure(
        parties,
        layout.rows,
        title=f"{study}: per-party {metric.name} of the final model",
        metric=metric,
    )
    if figure is not None:
        name = unique_stem(f"fig_{study}_per_party{group.suffix}", used)
        paths = figures_save(figure, out / "figures" / name, formats)
        mix = "each party's " + party_tables.party_split_words(trials, metric)
        caption = (
            f"per-party {metric.name}{metric.unit} at the final scored round, {mix}; "
            "box = quartiles over all seeds' parties, points = parties by seed"
        )
        lines += figure_block(paths, out, caption)
    return lines + own_split_part(group, metric, out, used, formats)


def tsne_part(
    group: StudyGroup,
    rows: list[str],
    results: Results,
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str],
) -> list[str]:
    """Fig. 2's t-SNE panel where the group's trials captured representations (damaged
    captures go to ``not_counted``)."""
    from analysis.figures import representations

    study = group.study or "runs"
    captures = representations.representation_captures(results, group.trials, rows, not_counted)
    if not captures:
        return []
    name = unique_stem(f"fig2_tsne_{study}{group.suffix}", used)
    figure = representations.tsne_panel(
        captures, title=f"Fig. 2: t-SNE of projection-head outputs ({study})"
    )
    paths = figures_save(figure, out / "figures" / name, formats)
    seeds = ", ".join(f"{c.label} seed {c.seed}" for c in captures)
    caption = (
        f"Fig. 2: t-SNE of z on {len(captures[0].labels)} test images, global model the "
        f"round started from (left) vs the first party's model after local training "
        f"(right); {seeds}"
    )
    return figure_block(paths, out, caption)


def own_split_part(
    group: StudyGroup, metric, out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    """What a personalised study is judged by (:mod:`analysis.figures.own_split`): the
    own-split curves and the trade-off (own split vs pooled test) as a table and a
    figure, where the group's trials scored their own test splits by method."""
    from analysis.figures import own_split

    trials, study = group.trials, group.study or "runs"
    if "algorithm" not in trials:
        return []
    lines: list[str] = []
    figure = own_split.own_split_curves(
        group.rounds, trials, metric, title=f"{study}: {metric.name} on the parties' own splits"
    )
    if figure is not None:
        name = unique_stem(f"fig_{study}_own_split_curves{group.suffix}", used)
        paths = figures_save(figure, out / "figures" / name, formats)
        caption = (
            f"{metric.name}{metric.unit} on each party's own test split, mean over parties "
            "(party_test_" + metric.stem + "_mean), per scored round; line = mean over "
            "seeds, band = ±1 sd over seeds (cut at the metric's range)"
        )
        lines += figure_block(paths, out, caption)
    table = own_split.trade_off(group.rounds, trials, metric)
    if table.empty:
        return lines
    name = unique_stem(f"trade_off_{study}{group.suffix}", used)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    csv = out / "tables" / f"{name}.csv"
    table.to_csv(csv, index=False)
    unit = metric.unit
    lines += [
        f"**Own split vs pooled test: final {metric.name}{unit}, mean ± sd over seeds**",
        "",
        f"| method | pooled test set{unit} | mean over parties, own test split{unit} | seeds |",
        "| --- | ---: | ---: | ---: |",
    ]
    for _, row in table.iterrows():
        lines.append(
            f"| {method_name(row['algorithm'])} | "
            f"{_mean_sd(row['pooled_mean'], row['pooled_sd'], metric)} | "
            f"{_mean_sd(row['own_mean'], row['own_sd'], metric)} | {int(row['n'])} |"
        )
    lines += ["", f"Files: [csv]({csv.relative_to(out).as_posix()})", ""]
    figure = own_split.trade_off_figure(table, metric, title=f"{study}: own split vs pooled")
    name = unique_stem(f"fig_{study}_trade_off{group.suffix}", used)
    paths = figures_save(figure, out / "figures" / name, formats)
    caption = (
        f"the trade-off: each method's final {metric.name}{unit} on the pooled test set (x) "
        "and on the parties' own test splits, mean over parties (y); bars = ±1 sd over seeds"
    )
    lines += figure_block(paths, out, caption)
    return lines


def _mean_sd(mean: float, sd: float, metric) -> str:
    """``62.0 ± 2.0`` in display units (the values are already in them)."""
    digits = metric.digits
    text = f"{mean:.{digits}f}"
    return text if sd != sd else f"{text} ± {sd:.{digits}f}"


def figures_save(figure, stem: Path, formats: Sequence[str]) -> list[Path]:
    """:func:`analysis.figures.plots.save_figure` (imported late: it loads Matplotlib)."""
    from analysis.figures.plots import save_figure

    return save_figure(figure, stem, formats)
