"""Markdown, LaTeX and CSV writers on small hand-made tables."""

from __future__ import annotations

import io

import pandas as pd

from analysis.tables.formats import latex_escape, to_csv, to_latex, to_markdown, write_table
from analysis.tables.table import Table


def simple() -> Table:
    display = pd.DataFrame(
        {"CIFAR-10": ["69.1 ± 0.4", "66.3 ± 0.5", "46.3 ± 5.1†"]},
        index=["MOON", "FedAvg", "SOLO"],
    )
    bold = pd.DataFrame({"CIFAR-10": [True, False, False]}, index=display.index)
    data = pd.DataFrame({"algorithm": ["moon", "fedavg", "solo"], "mean": [0.691, 0.663, 0.463]})
    return Table(
        "table1", "Table 1 — μ_best, 100% | test", display, bold, data, "method", ["a note"]
    )


def grouped() -> Table:
    columns = pd.MultiIndex.from_tuples(
        [
            ("CIFAR-10", "#rounds"),
            ("CIFAR-10", "speed-up"),
            ("CIFAR-100", "#rounds"),
            ("CIFAR-100", "speed-up"),
        ]
    )
    display = pd.DataFrame(
        [["100", "1.0×", "100", "1.0×"], ["27", "3.7×", "not reached", "<1×"]],
        index=["FedAvg", "MOON"],
        columns=columns,
    )
    bold = pd.DataFrame(False, index=display.index, columns=columns)
    return Table("table2", "Table 2", display, bold, pd.DataFrame({"x": [1]}), "method")


def test_markdown_has_title_header_rows_bold_best_and_notes():
    text = to_markdown(simple())
    lines = text.splitlines()
    assert lines[0] == "**Table 1 — μ_best, 100% | test**"
    assert lines[2] == "| method | CIFAR-10 |"
    assert lines[3] == "| --- | ---: |"
    assert lines[4] == "| MOON | **69.1 ± 0.4** |"
    assert lines[5] == "| FedAvg | 66.3 ± 0.5 |"
    assert "*a note*" in text


def test_markdown_flattens_grouped_headers():
    lines = to_markdown(grouped(), title=False, notes=False).splitlines()
    assert lines[0] == (
        "| method | CIFAR-10, #rounds | CIFAR-10, speed-up | CIFAR-100, #rounds "
        "| CIFAR-100, speed-up |"
    )
    assert lines[3] == "| MOON | 27 | 3.7× | not reached | <1× |"


def test_latex_is_booktabs_with_escapes_math_symbols_and_bold():
    text = to_latex(simple())
    assert r"\begin{tabular}{lr}" in text and r"\toprule" in text and r"\bottomrule" in text
    assert r"\caption{Table 1 --- $\mu$\_best, 100\% | test}" in text
    assert r"\label{tab:table1}" in text
    assert r"MOON & \textbf{69.1 $\pm$ 0.4} \\" in text
    assert r"SOLO & 46.3 $\pm$ 5.1$^\dagger$ \\" in text


def test_latex_grouped_headers_use_multicolumn_and_cmidrule():
    text = to_latex(grouped())
    assert r"& \multicolumn{2}{c}{CIFAR-10} & \multicolumn{2}{c}{CIFAR-100} \\" in text
    assert r"\cmidrule(lr){2-3} \cmidrule(lr){4-5}" in text
    assert r"method & \#rounds & speed-up & \#rounds & speed-up \\" in text
    assert r"MOON & 27 & 3.7$\times$ & not reached & $<$1$\times$ \\" in text


def test_latex_escape_specials():
    assert latex_escape("a_b & 50% #1 {x}") == r"a\_b \& 50\% \#1 \{x\}"


def test_csv_is_the_numbers_and_write_table_writes_three_files(tmp_path):
    table = simple()
    assert pd.read_csv(io.StringIO(to_csv(table)))["mean"].tolist() == [0.691, 0.663, 0.463]
    paths = write_table(table, tmp_path / "tables")
    assert sorted(p.name for p in paths.values()) == ["table1.csv", "table1.md", "table1.tex"]
    assert all(p.stat().st_size > 0 for p in paths.values())
