"""A grid study group's per-party outcomes: the per-party table, the distribution figure
and Fig. 2's t-SNE panel, where its trials recorded them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.reading.grouping import StudyGroup
from analysis.reading.loading import Results
from analysis.sections.markdown import figure_block, file_links, unique_stem
from analysis.tables.formats import to_markdown, write_table
from analysis.tables.study_tables import TableOptions, primary_of


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
    from analysis.figures import representations
    from analysis.stats.comparisons import dataset_classes
    from analysis.tables import party_tables

    trials, study = group.trials, group.study or "runs"
    several = "algorithm" in trials and trials["algorithm"].nunique() > 1
    rows = ["algorithm"] if several or not group.axes else list(group.axes)
    # per method *and setting*: the study's other axes are columns (a sweep of methods x
    # noise levels must not pool, nor drop, the levels of one method)
    settings = [a for a in group.axes if a not in rows and a in trials]
    columns = settings + (["dataset"] if len(group.datasets) > 1 else [])
    baseline = (options.baseline,) if rows == ["algorithm"] else None
    if baseline and options.baseline not in set(trials["algorithm"]):
        baseline = None
    classes = dataset_classes(e for sweep in group.sweeps for e in sweep.partitions)
    metric = primary_of(group)
    mine = trials[["sweep", "trial"]]
    parties = party_rows.merge(mine, on=["sweep", "trial"])
    lines: list[str] = []
    table = party_tables.per_party_table(
        trials,
        group.rounds,
        rows=rows,
        columns=columns,
        name=unique_stem(f"per_party_{study}{group.suffix}", used),
        reference=baseline,
        classes=classes,
        metric=metric,
        parties=parties,
    )
    if table is not None:
        paths = write_table(table, out / "tables")
        lines += [to_markdown(table), f"Files: {file_links(paths, out)}", ""]
        fairness = party_tables.fairness_table(
            trials,
            group.rounds,
            rows=rows,
            columns=columns,
            name=unique_stem(f"fairness_{study}{group.suffix}", used),
            classes=classes,
        )
        if fairness is not None:
            paths = write_table(fairness, out / "tables")
            lines += [to_markdown(fairness), f"Files: {file_links(paths, out)}", ""]
        figure = party_tables.party_distribution_figure(
            parties,
            rows,
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
    captures = representations.representation_captures(results, trials, rows, not_counted)
    if captures:
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
        lines += figure_block(paths, out, caption)
    return lines


def figures_save(figure, stem: Path, formats: Sequence[str]) -> list[Path]:
    """:func:`analysis.figures.plots.save_figure` (imported late: it loads Matplotlib)."""
    from analysis.figures.plots import save_figure

    return save_figure(figure, stem, formats)
