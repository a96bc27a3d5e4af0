"""The report's *Feature skew* section: example training images per party of every
feature-skewed sweep."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from analysis.reading.loading import Sweep
from analysis.sections.markdown import figure_block, unique_stem


def feature_examples_section(
    sweeps: Sequence[Sweep],
    out: Path,
    used: set[str],
    formats: Sequence[str],
    not_counted: list[str],
) -> list[str]:
    """Example training images per party of every feature-skewed sweep (a damaged
    examples file is named in ``not_counted``)."""
    from analysis.figures import plots as figures
    from analysis.figures.feature_examples import feature_examples_figure, read_feature_examples

    lines: list[str] = []
    for sweep in sweeps:
        arrays = read_feature_examples(sweep.path, not_counted)
        if arrays is None:
            continue
        if not lines:
            lines = ["## Feature skew: what the parties see", ""]
        stem = "feature_examples_" + re.sub(r"[^A-Za-z0-9._=-]+", "_", sweep.name)
        name = unique_stem(stem, used)
        figure = feature_examples_figure(arrays)
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        settings = ", ".join(str(s) for s in arrays["settings"])
        lines += figure_block(paths, out, f"{sweep.name}: example training images ({settings})")
    return lines
