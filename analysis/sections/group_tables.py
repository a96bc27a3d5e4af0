"""A study group's tables: its paper-shaped tables (:mod:`analysis.tables.study_tables`)
and Table 11's time per round, each written as Markdown, LaTeX and CSV."""

from __future__ import annotations

from pathlib import Path

from analysis.reading.grouping import StudyGroup
from analysis.sections.markdown import file_links, unique_stem
from analysis.tables.formats import to_markdown, write_table
from analysis.tables.study_tables import TableOptions, study_tables
from analysis.tables.table import Table


def table_section(
    group: StudyGroup, options: TableOptions, out: Path, used: set[str]
) -> tuple[list[str], list[Table]]:
    """The group's tables written into ``out/tables`` and shown; returns (lines, tables)."""
    lines: list[str] = []
    tables = study_tables(group, options)
    timing = _timing_table(group)
    tables += [timing] if timing is not None else []
    for table in tables:
        table.name = unique_stem(table.name, used)
        paths = write_table(table, out / "tables")
        lines += [to_markdown(table), f"Files: {file_links(paths, out)}", ""]
    return lines, tables


def _timing_table(group: StudyGroup) -> Table | None:
    """Table 11 for a grid group: rows by method when several ran, else by the first axis
    (by dataset too when there are several)."""
    from analysis.tables.timing import time_per_round_table

    if group.search == "optuna" or group.trials.empty:
        return None
    trials = group.trials
    several = "algorithm" in trials and trials["algorithm"].nunique() > 1
    rows = ["algorithm"] if several or not group.axes else [group.axes[0]]
    rows = (["dataset"] if len(group.datasets) > 1 else []) + rows
    return time_per_round_table(
        group.rounds,
        trials,
        [sweep.manifest for sweep in group.sweeps],
        rows=rows,
        name=f"table11_time_per_round_{group.study or 'runs'}{group.suffix}",
        title="Table 11 — time per round (s), training vs evaluation",
    )
