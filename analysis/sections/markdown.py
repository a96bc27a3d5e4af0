"""The report folder's pieces of markdown: unique file stems, links to a table's files and
figure blocks, shared by every section of :mod:`analysis.sections`."""

from __future__ import annotations

from pathlib import Path


def unique_stem(name: str, used: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``… when taken in ``used`` (which it joins)."""
    candidate, k = name, 2
    while candidate in used:
        candidate, k = f"{name}_{k}", k + 1
    used.add(candidate)
    return candidate


def figure_block(paths: list[Path], out: Path, caption: str) -> list[str]:
    """The PNG shown with its caption, the other formats linked, paths relative to ``out``."""
    png = next(p for p in paths if p.suffix == ".png")
    others = " · ".join(
        f"[{p.suffix[1:]}]({p.relative_to(out).as_posix()})" for p in paths if p != png
    )
    line = f"![{caption}]({png.relative_to(out).as_posix()})"
    return [line, "", f"*{caption}*" + (f" ({others})" if others else ""), ""]


def file_links(paths: dict[str, Path], out: Path) -> str:
    """Links to one table's files (``md · tex · csv``), paths relative to ``out``."""
    return " · ".join(f"[{fmt}]({p.relative_to(out).as_posix()})" for fmt, p in paths.items())
