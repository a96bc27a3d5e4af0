"""Score tasks (image assessment): a score per image, and named attribute scores.

Targets are float (N, T): the score, then the attributes (an image folder with a scores
file, :mod:`federated.tasks.score.scores_file`); the head outputs T values.  The loss
(``score_loss``) is the mean over the T targets of the squared error (``mse``, the
default), the absolute error (``l1``) or the Huber loss (``huber``, quadratic within
:data:`HUBER_DELTA` score units: a tenth of a 0..1 scale, linear beyond).  The metrics
are the field's, on the *score* (column 0): ``mae`` and ``rmse`` (score units), ``srcc``
(Spearman's rank correlation, average ranks for ties), ``plcc`` (Pearson's linear
correlation) and ``bin_acc``, the binary accuracy at ``score_threshold``: the share
of images whose prediction and score fall on the same side of it (both >= it, or both
below).  Its columns say so (``test_bin_acc``, ``val_bin_acc``): ``acc`` is
classification's top-1 accuracy; score runs written before recorded it as ``acc``
(:data:`federated.tasks.written_before.RENAMED_STEMS` reads them).

A score task has no classes: partitions group all samples as one (natural, IID and
quantity partitions apply), and per-party outcomes come from the parties' own local
test splits (``party_test_fraction``).

One pass per evaluation: the accumulator keeps the predicted and true scores (N
floats) with the losses, and computes every metric from them at the end.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from federated.contract.metrics import LOSS
from federated.data.folder_layout import folder_path, is_folder_dataset
from federated.params import ConfigError, MethodParams, describe, one_of
from federated.tasks.base import Scores, Task, per_party_mean
from federated.tasks.score.scores_file import SCORES_FILE, has_scores_file, read_scores
from federated.tasks.score.spec import BINARY_ACCURACY, SPEC

SCORE_LOSSES = ("mse", "l1", "huber")
HUBER_DELTA = 0.1  # score units: a tenth of a 0..1 scale
#: the correlation and error metrics, beside the binary accuracy and the loss
SCORE_METRICS = ("mae", "rmse", "srcc", "plcc")
NAN = float("nan")


@dataclass(frozen=True)
class ScoreParams(MethodParams):
    score_loss: str = field(
        default="mse",
        metadata=describe("score tasks: the loss on the score and attributes: mse, l1 or huber"),
    )
    score_threshold: float = field(
        default=0.5,
        metadata=describe(
            "score tasks: test_bin_acc is the share of images whose prediction and score "
            "are on the same side of this threshold (score units; 0.5 on a 0..1 scale)"
        ),
    )

    def check(self) -> None:
        one_of("score_loss", self.score_loss, SCORE_LOSSES)
        if not math.isfinite(self.score_threshold):
            raise ConfigError(
                "score_threshold", self.score_threshold, "a finite number (score units)"
            )


class ScoreTask(Task):
    name = "score"
    targets = "score"
    Params = ScoreParams
    contract = SPEC
    metrics = SPEC.metrics
    folder_reader = "federated.tasks.score.reader:READER"
    hub_column = "federated.tasks.score.hub_column:HUB_COLUMN"
    params: ScoreParams

    @classmethod
    def check_data(cls, params: MethodParams, dataset: str) -> None:
        """The threshold must split the data's scores: at or below the lowest score (or
        above the highest) every image falls on one side, and ``test_bin_acc`` would be 1.0
        by construction."""
        if not is_folder_dataset(dataset) or not has_scores_file(folder_path(dataset)):
            return
        low, high = _score_range(folder_path(dataset))
        threshold = params.score_threshold
        if not low < threshold <= high:
            raise ConfigError(
                "score_threshold",
                threshold,
                f"a score in ({low:g}, {high:g}], the range of {dataset}'s scores (outside "
                "it every image is on one side and test_bin_acc is 1.0 by construction)",
            )

    @classmethod
    def recorded_stems(cls) -> tuple[str, ...]:
        # the rows' order since score tasks began: the binary accuracy, loss, then the
        # field's metrics (the binary accuracy first: it is the per-party metric)
        return (BINARY_ACCURACY, LOSS, *SCORE_METRICS)

    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self._elementwise(outputs, targets).mean(dim=1)

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return self._elementwise(outputs, targets).mean()

    def _elementwise(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        outputs = outputs.float()
        kind = self.params.score_loss
        if kind == "mse":
            return F.mse_loss(outputs, targets, reduction="none")
        if kind == "l1":
            return F.l1_loss(outputs, targets, reduction="none")
        return F.huber_loss(outputs, targets, reduction="none", delta=HUBER_DELTA)

    def accumulator(self, n_parties: int | None = None):
        return ScoreAccumulator(self, n_parties)


def _score_range(root: Path) -> tuple[float, float]:
    """The lowest and highest score of the folder at ``root`` (train and test), read
    once per version of its scores file: a config is resolved several times per trial."""
    stamp = (root / SCORES_FILE).stat().st_mtime_ns
    return _score_range_of(str(root), stamp)


@functools.lru_cache(maxsize=16)
def _score_range_of(root: str, stamp: int) -> tuple[float, float]:
    scores = read_scores(root)
    values = np.concatenate([scores.train.scores, scores.test.scores])
    return float(values.min()), float(values.max())


class ScoreAccumulator:
    """The predicted and true scores of one evaluation, its losses (pooled: one float64
    sum; per party: float64 sums per party) and, per party, the binary agreements."""

    def __init__(self, task: ScoreTask, n_parties: int | None) -> None:
        self.task = task
        self.threshold = task.params.score_threshold
        self.n = n_parties
        self.predicted: list[torch.Tensor] = []
        self.truth: list[torch.Tensor] = []
        self.owners: list[torch.Tensor] = []
        self.loss_sum: torch.Tensor | float = 0.0
        self.party_loss: torch.Tensor | None = None
        self.party_agree: torch.Tensor | None = None

    def update(
        self, outputs: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor | None
    ) -> None:
        per_sample = self.task.per_sample_loss(outputs, targets).double()
        self.predicted.append(outputs[:, 0].float())
        self.truth.append(targets[:, 0])
        if owner is None:
            self.loss_sum = self.loss_sum + per_sample.sum()
            return
        if self.party_loss is None:
            self.party_loss = torch.zeros(self.n, dtype=torch.float64, device=targets.device)
            self.party_agree = torch.zeros_like(self.party_loss)
        agree = ((outputs[:, 0] >= self.threshold) == (targets[:, 0] >= self.threshold)).double()
        self.party_loss.index_add_(0, owner, per_sample)
        self.party_agree.index_add_(0, owner, agree)
        self.owners.append(owner)

    def _arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.predicted:
            return np.zeros(0), np.zeros(0)
        return torch.cat(self.predicted).cpu().numpy(), torch.cat(self.truth).cpu().numpy()

    def compute(self) -> Scores:
        predicted, truth = self._arrays()
        if self.n is None:
            return Scores(score_metrics(predicted, truth, float(self.loss_sum), self.threshold))
        owner = torch.cat(self.owners).cpu().numpy() if self.owners else np.zeros(0, np.int64)
        if self.party_loss is None:
            nan = np.full(self.n, NAN)
            stems = ScoreTask.recorded_stems()
            return Scores(dict.fromkeys(stems, NAN), {k: nan.copy() for k in stems})
        agree, loss = torch.stack([self.party_agree, self.party_loss]).cpu().numpy()
        samples = np.bincount(owner, minlength=self.n).astype(np.float64)
        total = samples.sum()
        pooled = score_metrics(predicted, truth, 0.0, self.threshold)
        party = {
            BINARY_ACCURACY: per_party_mean(agree, samples),
            LOSS: per_party_mean(loss, samples),
        }
        party.update({k: np.full(self.n, NAN) for k in SCORE_METRICS})
        for p in np.unique(owner):
            mine = owner == p
            own = score_metrics(predicted[mine], truth[mine], 0.0, self.threshold)
            for k in SCORE_METRICS:
                party[k][p] = own[k]
        values = {
            BINARY_ACCURACY: float(agree.sum() / total),
            LOSS: float(loss.sum() / total),
            **{k: pooled[k] for k in SCORE_METRICS},
        }
        return Scores(values, party, parties=int((samples > 0).sum()))


def score_metrics(
    predicted: np.ndarray, truth: np.ndarray, loss_sum: float, threshold: float
) -> dict[str, float]:
    """The score metrics of predictions against scores (1-D arrays of one length):
    ``bin_acc`` (binary, at ``threshold``), ``loss`` (``loss_sum`` / n), ``mae``, ``rmse``,
    ``srcc``, ``plcc``.  A correlation is NaN where it is undefined (fewer than two
    images, or a constant prediction or score)."""
    n = len(truth)
    if n == 0:
        return dict.fromkeys((BINARY_ACCURACY, LOSS, *SCORE_METRICS), NAN)
    predicted = np.asarray(predicted, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    error = predicted - truth
    # scipy.stats takes about a second to import: only score trials pay it, not every worker
    from scipy import stats

    return {
        BINARY_ACCURACY: float(np.mean((predicted >= threshold) == (truth >= threshold))),
        LOSS: float(loss_sum) / n,
        "mae": float(np.mean(np.abs(error))),
        "rmse": float(math.sqrt(np.mean(error**2))),
        "srcc": _correlation(stats.spearmanr, predicted, truth),
        "plcc": _correlation(stats.pearsonr, predicted, truth),
    }


def _correlation(kind, a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return NAN
    return float(kind(a, b)[0])
