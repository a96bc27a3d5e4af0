"""Display names: how methods, datasets, parameters and accuracies read in tables and figures.

Results hold machine names (``moon``, ``fmnist``, ``mu``) and fractions in [0, 1]; the
paper writes "MOON", "CIFAR-10", "μ" and percentages.  Everything a reader sees goes
through here, so a table and a figure of the same study use the same words.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from federated.contract.task_spec import TaskSpec

METHODS: dict[str, str] = {
    "fedavg": "FedAvg",
    "fedprox": "FedProx",
    "moon": "MOON",
    "scaffold": "SCAFFOLD",
    "solo": "SOLO",
    "l2rep": "ℓ2 on representations",
    "fednova": "FedNova",
    "feddyn": "FedDyn",
    "fedper": "FedPer",
    "fedrep": "FedRep",
    "lg-fedavg": "LG-FedAvg",
    "ditto": "Ditto",
    "apfl": "APFL",
    "fedbn": "FedBN",
}

DATASETS: dict[str, str] = {
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "tinyimagenet": "Tiny-ImageNet",
    "fmnist": "Fashion-MNIST",
    "mnist": "MNIST",
    "synthetic": "synthetic",
}

# Config fields as the paper names them (symbols where it uses one).
PARAMETERS: dict[str, str] = {
    "algorithm": "method",
    "dataset": "dataset",
    "mu": "μ",
    "tau": "τ",
    "beta": "β",
    "out_dim": "output dimension",
    "local_epochs": "local epochs E",
    "n_parties": "parties N",
    "sample_fraction": "sample fraction",
    "prev_models": "negatives k",
    "projection_head": "projection head",
    "server_optimizer": "server",
    "server_momentum": "server momentum β",
    "tau_schedule": "τ schedule",
    "partition": "partition",
    "second_term": "second term",
    "setting": "setting",
    "method": "method",
    "server": "server",
    "point": "grid point",
    "seed": "seed",
    "at_round": "rounds",
    "term": "second term",
    "combo": "method",
    # DP-FedAvg's fields by the symbols docs/privacy.md and the notes use
    "dp_noise_multiplier": "σ (noise multiplier)",
    "dp_clip_norm": "C (clip norm)",
    "dp_target_epsilon": "target ε",
    "dp_delta": "δ",
    "dp_clip_quantile": "clip quantile",
}

# Values with a name of their own (shown instead of the raw value).
VALUES: dict[str, dict[str, str]] = {
    "tau_schedule": {"fixed": "MOON (fixed τ)", "annealed": "NEW-MOON (annealed τ)"},
    "server_optimizer": {"avg": "average", "fedavgm": "FedAvgM"},
    "partition": {
        "dirichlet": "Dirichlet",
        "iid": "IID",
        "labels": "#C labels",
        "quantity": "quantity skew",
        "natural": "natural (one folder per party)",
    },
}

# Parameters shown as "symbol=value" when a label needs the name (a single short symbol).
_SYMBOLIC = {"mu", "tau", "beta", "prev_models"}
_SYMBOL_OVERRIDE = {
    "prev_models": "k",
    "local_epochs": "E",
    "n_parties": "N",
    "server_momentum": "β",
    "dp_noise_multiplier": "σ",
    "dp_clip_norm": "C",
    "dp_target_epsilon": "target ε",
    "dp_delta": "δ",
}
# Columns whose values already read as labels ("N=50", "MOON (mu=1)"): never prefixed.
_SELF_DESCRIBING = {
    "algorithm",
    "party_metric",
    "dataset",
    "projection_head",
    "at_round",
    "tau_schedule",
    "server_optimizer",
    "partition",
    "setting",
    "method",
    "server",
    "second_term",
    "point",
    "term",
    "combo",
}


def method_name(algorithm: Any) -> str:
    """``"moon"`` -> ``"MOON"``; a fine-tuned variant ``"fedavg+ft1"`` ->
    ``"FedAvg+FT (1 epoch)"`` (analysis/reading/grouping.py); unknown names are shown as
    they are."""
    base, tuned, epochs = str(algorithm).rpartition("+ft")
    if tuned and base and _is_number(epochs):
        unit = "epoch" if float(epochs) == 1 else "epochs"
        return f"{method_name(base)}+FT ({epochs} {unit})"
    return METHODS.get(str(algorithm), str(algorithm))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def dataset_name(dataset: Any, task: TaskSpec | None = None) -> str:
    """``"cifar10"`` -> ``"CIFAR-10"``; a folder ``"folder:/data/seg"`` -> its own name
    and what it holds, by the task its trials declared: ``"seg (segmentation folder)"``
    (:func:`folder_kind`); a saved Hugging Face folder ``"hf:/data/writers"`` (an
    absolute path, as a sweep records it) -> ``"writers (Hugging Face folder)"``, a hub
    name (``"hf:flwrlabs/femnist"``) as it is (the manifest keeps the full path)."""
    text = str(dataset)
    last = text.rstrip("/").rsplit("/", 1)[-1]
    if text.startswith("folder:"):
        return f"{last} ({folder_kind(task)})"
    if text.startswith("hf:/"):
        return f"{last} (Hugging Face folder)"
    return DATASETS.get(text, text)


def folder_kind(task: TaskSpec | None) -> str:
    """What a ``folder:`` data set is, by the declaration of the task its trials ran:
    ``"<task> folder"`` for every kind alike (``segmentation``, ``detection``,
    ``classification``; a plug-in task's class name, ``pkg.mod:SiteTask`` ->
    ``"SiteTask folder"``); ``"image folder"`` where no task is known (every kind's
    folder holds images)."""
    if task is None:
        return "image folder"
    return f"{task.name.rsplit(':', 1)[-1].rsplit('.', 1)[-1]} folder"


def parameter_name(column: str) -> str:
    """A config column as a header: ``"mu"`` -> ``"μ"``."""
    return PARAMETERS.get(column, column.replace("_", " "))


def format_value(value: Any) -> str:
    """A config value in a label: 0.1 -> ``"0.1"``, 5.0 -> ``"5"``, True -> ``"yes"``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isnan(value):
            return "–"
        return f"{value:g}"
    return str(value)


def value_label(column: str, value: Any, *, with_name: bool = False) -> str:
    """How one value of ``column`` reads in a row or column label.

    Methods and datasets get their display names; the projection head reads "with" /
    "without"; other values are formatted numbers, prefixed with the parameter's symbol
    (``"μ=5"``) when ``with_name`` (a label that stands alone, e.g. a legend entry).
    """
    if column == "algorithm":
        return method_name(value)
    if column == "dataset":
        return dataset_name(value)
    if column == "projection_head":
        return "with projection head" if bool(value) else "without projection head"
    if column == "at_round":
        return f"{format_value(value)} rounds"
    if str(value) in VALUES.get(column, {}):
        return VALUES[column][str(value)]
    text = format_value(value)
    if not with_name or column in _SELF_DESCRIBING:
        return text
    symbol = _SYMBOL_OVERRIDE.get(column, parameter_name(column) if column in _SYMBOLIC else column)
    return f"{symbol}={text}"


def partition_label(partition: Any, partition_by: Any = None) -> str:
    """A partition scheme as a reader sees it: ``"natural", "writer_id"`` -> ``"natural (by
    writer_id)"`` (an ``hf:`` data set's parties are a column's values); a natural
    partition without a column is an image folder's (one folder per party)."""
    if str(partition) == "natural" and partition_by is not None and str(partition_by):
        return f"natural (by {partition_by})"
    return value_label("partition", partition)


def percent(fraction: float, digits: int = 1) -> str:
    """An accuracy fraction in [0, 1] as a percentage without the sign: 0.691 -> ``"69.1"``."""
    if fraction is None or (isinstance(fraction, float) and math.isnan(fraction)):
        return "–"
    return f"{100.0 * fraction:.{digits}f}"
