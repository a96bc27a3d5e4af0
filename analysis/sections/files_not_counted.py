"""The report's *Files not counted* section: damaged files of otherwise counted trials."""

from __future__ import annotations

from collections.abc import Sequence


def files_not_counted_section(not_counted: Sequence[str]) -> list[str]:
    """The damaged files of otherwise counted trials and sweeps: path, what is wrong, and
    what was left out for it (the rest of each trial counts)."""
    if not not_counted:
        return []
    return [
        "## Files not counted",
        "",
        "Damaged files (never read as results): the part each held is left out, the rest "
        "of its trial or sweep is counted.",
        "",
        *[f"- {entry}" for entry in not_counted],
        "",
    ]
