"""One study group's part of the report: its heading, its tables, then an Optuna search's
history or a grid's figures, its differential-privacy part (DP trials only) and
per-party outcomes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from analysis.reading.grouping import StudyGroup
from analysis.reading.loading import Results
from analysis.sections.group_figures import figure_section
from analysis.sections.group_tables import table_section
from analysis.sections.optuna_search import optuna_section
from analysis.sections.per_party import per_party_section
from analysis.sections.privacy_section import privacy_section
from analysis.tables.study_tables import TableOptions, primary_of


def study_group_section(
    group: StudyGroup,
    options: TableOptions,
    results: Results,
    party_rows: pd.DataFrame,
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str],
) -> list[str]:
    """The group's heading, tables and figures (file stems join ``used``; damaged
    captures go to ``not_counted``)."""
    lines = [f"## {group_heading(group)}", ""]
    if group.study and not group.report.get("table") and group.search != "optuna":
        what = primary_of(group).name
        lines += [f"(No paper shape known for this study: varied parameters vs {what}.)", ""]
    table_lines, _ = table_section(group, options, out, used)
    lines += table_lines
    if group.search == "optuna":
        return lines + optuna_section(group, out, used, formats)
    lines += figure_section(group, options, out, used, formats)
    lines += privacy_section(group, options, out, used, formats)
    lines += per_party_section(group, options, results, party_rows, out, used, formats, not_counted)
    return lines


def group_heading(group: StudyGroup) -> str:
    """The group's heading: study, paper, Optuna, and the condition that split it off."""
    study = group.study or "runs without a study label"
    paper = f" — {group.paper}" if group.paper else ""
    search = " (Optuna search)" if group.search == "optuna" else ""
    condition = f" [{group.condition_text}]" if group.condition else ""
    return f"{study}{paper}{search}{condition}"
