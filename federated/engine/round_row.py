"""The per-round metrics row: typed while it is built, a flat dict when reported.

Keys of :meth:`RoundRow.as_dict`, in this order (stable across rounds of a run):

==================== ========================================================
``round``            1-based round number (equals Tune's training_iteration)
``test_<metric>``    the task's test values (federated/tasks/): ``test_acc``, top-1
                     accuracy, a fraction in [0, 1], and ``test_loss``, the mean
                     cross-entropy, for classification (global model; a personal-model
                     method such as SOLO: the mean over the parties' own models, NaN
                     on rounds ``personal_test_every`` skips)
``train_loss``       mean over drawn parties of their mean batch cross-entropy
``con_loss``         same for MOON's contrastive term (NaN where not computed)
``<part>_loss``      any other loss part a method logs (``prox``, ``l2``)
``parties_this_round``, ``samples_this_round`` (samples trained, per epoch counted)
``train_seconds``    local training + aggregation; ``eval_seconds``; ``round_seconds``
``samples_per_second`` samples_this_round / train_seconds
``bytes_up``, ``bytes_down``, ``cum_bytes``  payload bytes (model state + method extras)
``diverged``         True on the round whose loss became NaN/inf; the run stops there
``execution_path``   the path the parties trained on (packed, sequential, reference)
``precision``        the run's arithmetic: fp32 or bf16-mixed (federated/runtime/precision.py)
==================== ========================================================

then the round's work (:func:`work_columns`, :mod:`federated.heterogeneity.system`):
``reporting_parties`` (drawn parties whose work was aggregated), ``straggler_parties``,
``dropped_parties`` (never reported), ``local_steps_min`` / ``_mean`` / ``_max`` (SGD
steps of the reporting parties); with natural parties (``partition_by``)
``left_out_parties``, the field's values left out under the 10-image floor (in no
round of the run); ``spare_core_seconds`` (core-seconds the round's packs
ran on idle cores beyond its wall time, :meth:`FederatedRun.use_idle_cores`; 0.0 on one
thread; an execution column like the seconds above); then ``extra``: what the
evaluation adds (SOLO's ``test_acc_std``, ``party_acc/<i>``) and what the method reports
(``tau_end``, ``c_global_norm``, ...); with ``finetune_epochs``,
``finetuned_parties``: the parties whose own-split scores in this row are a fine-tuned
copy's (0 on rounds that score no party's own splits).

Per-party outcomes (:mod:`federated.evaluation.party_scores`; absent when ``party_scores_every``
is 0, NaN on rounds it skips): the global model (SOLO: each party's own model) scored on
each of the N parties' training class mix, fractions in [0, 1] —
``party_acc_mean`` (mean over parties), ``party_acc_std`` (population std),
``party_acc_min`` (the worst party), ``party_acc_worst10`` (mean of the ceil(N/10)
worst parties).  They are named by the task's per-party metric
(:meth:`federated.tasks.base.Task.party_stem`): ``acc`` for classification, a score
task's binary accuracy ``bin_acc`` (``party_bin_acc_mean`` ..., ``test_bin_acc_std``).
The per-party numbers go to the run's ``parties.csv`` (:mod:`federated.engine.run_files`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from federated.execution.trainer import PartyResult
from federated.heterogeneity.system import RoundWork

NAN = float("nan")


def work_columns(work: RoundWork, results: list[PartyResult]) -> dict[str, float]:
    """The round's work: who reported, how many straggled or dropped out, and the
    reporting parties' local SGD steps (min / mean / max; NaN when nobody reported)."""
    steps = [r.steps for r in results]
    return {
        "reporting_parties": len(work.reporting),
        "straggler_parties": len(work.stragglers),
        "dropped_parties": len(work.dropped),
        "local_steps_min": min(steps) if steps else NAN,
        "local_steps_mean": float(np.mean(steps)) if steps else NAN,
        "local_steps_max": max(steps) if steps else NAN,
    }


def loss_columns(results: list[PartyResult]) -> dict[str, float]:
    """Mean over parties of each loss part, named as in the row (``train_loss`` ...)."""
    keys = {"ce", "con"} | {k for r in results for k in r.losses}
    out = {}
    for key in sorted(keys):
        values = [r.losses[key] for r in results if key in r.losses]
        name = {"ce": "train_loss", "con": "con_loss"}.get(key, f"{key}_loss")
        out[name] = float(np.mean(values)) if values else NAN
    return out


@dataclass
class RoundRow:
    """One round's results (seconds, bytes, fractions as documented above)."""

    round: int
    parties: int  # parties drawn
    results: list[PartyResult]  # of the parties trained (a diverged round may stop early)
    # the task's test values by stem, in its recorded order (``acc``, ``loss`` for
    # classification; a score task's ``mae``, ``rmse``, ``srcc``, ``plcc`` too)
    test: dict[str, float] = field(default_factory=dict)
    train_seconds: float = NAN
    eval_seconds: float = NAN
    round_seconds: float = NAN
    bytes_up: int = 0
    bytes_down: int = 0
    cum_bytes: int = 0
    diverged: bool = False
    extra: dict[str, float] = field(default_factory=dict)
    # the path the parties trained on (packed, sequential, reference): what ran, which a
    # method or model that cannot pack makes sequential whatever ``execution`` asked
    execution_path: str = ""
    # the run's arithmetic (fp32, bf16-mixed): it changes results, so every row says it
    precision: str = ""

    @property
    def samples(self) -> int:
        return sum(r.samples for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        seconds = self.train_seconds
        return {
            "round": self.round,
            **{f"test_{k}": v for k, v in self.test.items()},
            **loss_columns(self.results),
            "parties_this_round": self.parties,
            "samples_this_round": self.samples,
            "train_seconds": seconds,
            "eval_seconds": self.eval_seconds,
            "round_seconds": self.round_seconds,
            "samples_per_second": self.samples / seconds if seconds > 0 else NAN,
            "bytes_up": self.bytes_up,
            "bytes_down": self.bytes_down,
            "cum_bytes": self.cum_bytes,
            "diverged": self.diverged,
            "execution_path": self.execution_path,
            "precision": self.precision,
            **self.extra,
        }
