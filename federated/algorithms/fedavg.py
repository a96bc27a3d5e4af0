"""FedAvg (McMahan et al. 2017): parties minimise cross-entropy; the server averages."""

from __future__ import annotations

from federated.algorithms.base import Algorithm


class FedAvg(Algorithm):
    """Plain local SGD on cross-entropy: every hook keeps :class:`Algorithm`'s default."""

    name = "fedavg"
    packable = True
    dp_obstacle = None  # sends its weights only
    per_sample_objective = True  # the supervised loss alone: DP-SGD's per-sample gradient
