"""The report's *What of the paper this reproduces* section: per study present, the
shipped studies missing, and what no report produces."""

from __future__ import annotations

from analysis.reading.grouping import StudyGroup
from analysis.reading.study_spec import shipped_reports
from analysis.tables.study_tables import primary_of

NOT_REPRODUCED = [
    "Figs. 1, 3, 4 (diagrams); Fig. 2 (t-SNE of representations) only for sweeps run with "
    "representations_at (--set representations_at=ROUND)",
    "Table 6 (dataset statistics: a property of the data, not of runs)",
]


def reproduction_section(groups: list[StudyGroup]) -> list[str]:
    """Per study present what it reproduces; the shipped studies not run; what no report
    draws."""
    reproduces = {g.study: g.report.get("reproduces", "") for g in groups if g.study}
    # a study that reproduces nothing gets the generic table, on its own metric
    generic = {g.study: f"a generic {primary_of(g).name} table" for g in groups if g.study}
    present = sorted(reproduces)
    lines = ["## What of the paper this reproduces", ""]
    for study in present:
        lines.append(f"- `{study}`: {reproduces[study] or generic[study]}")
    lines.append("- partitions.json of every sweep: Fig. 5 (and Figs. 9–10 for β = 0.1 and 5)")
    # the built-in studies (shipped study files) not among these results
    shipped = {n: r.get("reproduces", "") for n, r in shipped_reports().items()}
    missing = sorted(set(shipped) - set(present))
    if missing:
        lines.append(
            "- not in these results (run those studies to get them): "
            + "; ".join(f"{s} ({shipped[s]})" if shipped[s] else s for s in missing)
        )
    lines.append("- never produced by the report: " + "; ".join(NOT_REPRODUCED))
    return [*lines, ""]
