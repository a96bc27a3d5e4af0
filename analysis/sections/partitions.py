"""The report's *Data partitions* section (Fig. 5): each distinct partition of the runs
drawn once, at its lowest seed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from analysis.naming import format_value
from analysis.reading.loading import Sweep
from analysis.sections.markdown import figure_block, unique_stem
from federated.contract.task_spec import TaskSpec

MAX_PARTITION_FIGURES = 6


def partition_section(
    sweeps: list[Sweep], out: Path, used: set[str], formats: Sequence[str]
) -> list[str]:
    """One heatmap per distinct partition (at most :data:`MAX_PARTITION_FIGURES`)."""
    from analysis.figures import plots as figures

    seen: dict[tuple, dict] = {}
    tasks: dict[tuple, TaskSpec | None] = {}  # the sweep's task: a folder reads as what it holds
    for sweep in sweeps:
        for entry in sweep.partitions:
            fields = ("dataset", "n_parties", "partition", "beta", "labels_per_party")
            key = (*(entry.get(k) for k in fields), entry.get("data_fraction"))
            if key not in seen or entry.get("seed", 0) < seen[key].get("seed", 0):
                seen[key], tasks[key] = entry, sweep.task
    if not seen:
        return []
    lines = [
        "## Data partitions (Fig. 5)",
        "",
        "What each party holds of each class, for each distinct partition of the runs "
        "(the lowest seed of each; other seeds draw other partitions of the same kind), "
        "counted as the task declares: images of each class, a detection's boxes of each "
        "class, a segmentation's pixels of each class (the colour bar says which; each "
        "party's images under its name); a task without classes, or a partition recorded "
        "without per-class counts, as images per party.",
        "",
    ]
    for key, entry in list(seen.items())[:MAX_PARTITION_FIGURES]:
        stem = "fig5_partition_{}_N{}_{}{}_data{}_seed{}".format(
            # an image folder's "folder:/a/b" must not put slashes in a file name
            re.sub(r"[^A-Za-z0-9._=-]+", "_", str(entry.get("dataset"))).strip("_"),
            entry.get("n_parties"),
            entry.get("partition"),
            format_value(entry.get("beta")) if entry.get("partition") == "dirichlet" else "",
            format_value(entry.get("data_fraction")),
            entry.get("seed"),
        )
        name = unique_stem(stem, used)
        figure = figures.partition_heatmap(entry, task=tasks[key])
        paths = figures.save_figure(figure, out / "figures" / name, formats)
        caption = figures.partition_title(entry, tasks[key])
        left_out = left_out_words(entry)
        lines += figure_block(paths, out, f"{caption}; {left_out}" if left_out else caption)
    if len(seen) > MAX_PARTITION_FIGURES:
        lines += [f"({len(seen) - MAX_PARTITION_FIGURES} more partitions not drawn.)", ""]
    return lines


def left_out_words(entry: dict) -> str:
    """The values of the natural parties' field a partition left out, under the floor of
    training images a party needs (``partitions.json``'s ``left_out_parties``, as the
    run and the sweep name them): ``left out, in no party: 'cam-07' (8 images)``; empty
    where none was."""
    left = [v for v in entry.get("left_out_parties") or () if isinstance(v, (list, tuple))]
    if not left:
        return ""
    shown = ", ".join(f"{str(v)!r} ({n} image{'s' if n != 1 else ''})" for v, n in left)
    field = entry.get("partition_by") or "the party field"
    return (
        f"left out of the parties by {field}, under the floor of training images a party "
        f"needs, in no party and not drawn: {shown}"
    )
