"""Writing a :class:`~analysis.tables.table.Table` as Markdown, LaTeX and CSV.

- Markdown (GitHub tables): the title in bold, the best cells in bold, the notes in
  italics under the table; grouped column headers read "group, sub-column".
- LaTeX (booktabs): a ``table`` float with caption, label ``tab:<name>``, grouped
  headers as ``\\multicolumn`` with ``\\cmidrule``, best cells ``\\textbf``, the
  notes as a footnote-size paragraph; unicode symbols (±, ×, μ, ...) become math.
- CSV: the numbers behind the cells (:attr:`Table.data`), one row per cell, accuracies
  both as fractions (``mean``, ``std``) and as percentages (``mean_pct``, ``std_pct``).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.tables.table import Table

FORMATS = ("md", "tex", "csv")


def _header_labels(columns: pd.Index) -> list[str]:
    if isinstance(columns, pd.MultiIndex):
        return [", ".join(str(part) for part in label) for label in columns]
    return [str(label) for label in columns]


def _md_cell(text: str, bold: bool = False) -> str:
    text = str(text).replace("|", "\\|")
    return f"**{text}**" if bold and text != "–" else text


def to_markdown(table: Table, *, title: bool = True, notes: bool = True) -> str:
    """The table as GitHub Markdown (title line, table, notes)."""
    headers = [table.row_header or " ", *_header_labels(table.display.columns)]
    lines = []
    if title:
        lines += [f"**{table.title}**", ""]
    lines.append("| " + " | ".join(_md_cell(h) for h in headers) + " |")
    lines.append("| " + " | ".join(["---"] + ["---:"] * (len(headers) - 1)) + " |")
    for i, label in enumerate(table.display.index):
        cells = [
            _md_cell(table.display.iat[i, j], bool(table.bold.iat[i, j]))
            for j in range(table.display.shape[1])
        ]
        lines.append("| " + " | ".join([_md_cell(label), *cells]) + " |")
    if notes and table.notes:
        lines.append("")
        lines += [f"*{note}*  " for note in table.notes]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- LaTeX
_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
_LATEX_UNICODE = {
    "±": r"$\pm$",
    "×": r"$\times$",
    "μ": r"$\mu$",
    "τ": r"$\tau$",
    "β": r"$\beta$",
    "ℓ": r"$\ell$",
    "†": r"$^\dagger$",
    "≥": r"$\geq$",
    "<": r"$<$",
    ">": r"$>$",
    "—": "---",
    "–": "--",
    "·": r"$\cdot$",
    "§": r"\S{}",
    "₀": r"$_0$",
    # the comparisons' marks (analysis.stats.comparisons)
    "Δ": r"$\Delta$",
    "↑": r"$\uparrow$",
    "↓": r"$\downarrow$",
    "‡": r"$^\ddagger$",
    "≈": r"$\approx$",
    "−": r"$-$",
    "√": r"$\surd$",
}


def latex_escape(text: str) -> str:
    """Plain text (with the unicode symbols tables use) as LaTeX source."""
    out = []
    for char in str(text):
        out.append(_LATEX_SPECIAL.get(char) or _LATEX_UNICODE.get(char) or char)
    return "".join(out)


def to_latex(table: Table) -> str:
    """The table as a booktabs ``table`` float."""
    display = table.display
    n_cols = display.shape[1]
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(table.title)}}}",
        rf"\label{{tab:{table.name}}}",
        r"\begin{tabular}{l" + "r" * n_cols + "}",
        r"\toprule",
    ]
    if isinstance(display.columns, pd.MultiIndex):
        groups: list[tuple[str, int]] = []
        for top, _ in display.columns:
            if groups and groups[-1][0] == top:
                groups[-1] = (top, groups[-1][1] + 1)
            else:
                groups.append((top, 1))
        cells, rules, start = [""], [], 2
        for top, width in groups:
            cells.append(rf"\multicolumn{{{width}}}{{c}}{{{latex_escape(top)}}}")
            rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
            start += width
        lines.append(" & ".join(cells) + r" \\")
        lines.append(" ".join(rules))
        subs = [latex_escape(sub) for _, sub in display.columns]
        lines.append(" & ".join([latex_escape(table.row_header), *subs]) + r" \\")
    else:
        heads = [latex_escape(h) for h in display.columns]
        lines.append(" & ".join([latex_escape(table.row_header), *heads]) + r" \\")
    lines.append(r"\midrule")
    for i, label in enumerate(display.index):
        cells = []
        for j in range(n_cols):
            text = latex_escape(display.iat[i, j])
            cells.append(rf"\textbf{{{text}}}" if table.bold.iat[i, j] else text)
        lines.append(" & ".join([latex_escape(label), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    if table.notes:
        notes = " ".join(latex_escape(n) for n in table.notes)
        lines.append(rf"\par\smallskip{{\footnotesize {notes}\par}}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """The numbers behind the table, one row per cell."""
    return table.data.to_csv(index=False)


def write_table(table: Table, folder: str | Path) -> dict[str, Path]:
    """Write ``<name>.md``, ``<name>.tex`` and ``<name>.csv`` into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for fmt, render in (("md", to_markdown), ("tex", to_latex), ("csv", to_csv)):
        path = folder / f"{table.name}.{fmt}"
        path.write_text(render(table))
        written[fmt] = path
    return written
