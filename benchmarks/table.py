"""Plain-text tables for the terminal, and the same rows as CSV and JSON files."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from federated.runtime.atomic_file import atomic_open


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: str = "{}"  # str.format spec for the value; NaN and missing print as "-"

    def cell(self, row: dict[str, Any]) -> str:
        value = row.get(self.key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "-"
        return self.fmt.format(value)


def format_table(rows: Sequence[dict[str, Any]], columns: Sequence[Column]) -> str:
    """Columns right-aligned (text left-aligned), one header line and a rule."""
    cells = [[c.cell(r) for c in columns] for r in rows]
    widths = [
        max([len(c.header)] + [len(line[i]) for line in cells]) for i, c in enumerate(columns)
    ]
    text = [not any(isinstance(r.get(c.key), (int, float)) for r in rows) for c in columns]

    def line(values: Sequence[str]) -> str:
        parts = [v.ljust(w) if left else v.rjust(w) for v, w, left in zip(values, widths, text)]
        return "  ".join(parts).rstrip()

    out = [line([c.header for c in columns]), line(["-" * w for w in widths])]
    out += [line(values) for values in cells]
    return "\n".join(out)


def _atomic_write(path: Path, write) -> None:
    with atomic_open(path, "w", newline="") as fh:
        write(fh)


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Every key of every row as a column (first-seen order)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))

    def write(fh) -> None:
        writer = csv.DictWriter(fh, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)

    _atomic_write(path, write)


def write_json(path: Path, payload: Any) -> None:
    """JSON with NaN written as null (strict JSON readers reject NaN)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        return value

    _atomic_write(path, lambda fh: json.dump(clean(payload), fh, indent=2, default=str))
