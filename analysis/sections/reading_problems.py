"""The report's *Problems while reading* section: what loading the results folders could
not read (a sweep without a readable manifest, an unreadable trial folder ...)."""

from __future__ import annotations

from collections.abc import Sequence


def reading_problems_section(problems: Sequence[str]) -> list[str]:
    """One bullet per problem; nothing when loading met none."""
    if not problems:
        return []
    return ["## Problems while reading", "", *[f"- {p}" for p in problems], ""]
