"""The interface every task implements: what a model learns and how it is measured.

A task (FLGo's per-task calculator, Flower's ``evaluate`` returning a loss and a metrics
dict) owns, for one run:

* its typed parameters (:attr:`Task.Params`, a frozen
  :class:`~federated.params.MethodParams`; a score task's ``score_loss`` and
  ``score_threshold``), set by flat name like a method's;
* the head it needs from the data (:meth:`Task.head_size`) and the loss on a batch
  (:meth:`Task.loss`, the per-sample :meth:`Task.per_sample_loss`);
* a **metric accumulator** per evaluation (:meth:`Task.accumulator`): updated once per
  batch, computed once, so one forward pass per split gives every metric; with
  ``n_parties`` it also sums per party (federated validation, local test splits);
* its metrics as data (:attr:`Task.metrics`, :class:`~federated.contract.metrics.MetricSpec`,
  the primary first), which ``analysis`` reads without importing torch;
* how training samples group for partitions, hold-outs and class counts
  (:meth:`Task.partition_groups`) and how a batch's targets are taken
  (:meth:`Task.take_targets`: a tensor's rows by default; ragged targets override it).

Adding a task is one file with a subclass and one line in
:data:`federated.registry.TASK_PATHS` (a task with data of a new kind adds its folder
reader, :attr:`Task.folder_reader`, and its models, :attr:`Task.model_family`, as files
of their own); a task outside fedsweep is ``task=package.module:Class``.  The data say
which task they are (:attr:`~federated.data.catalog.DatasetSpec.task`); nothing outside
this package branches on a task's name or on a target's dtype.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import numpy as np
import torch

from federated.contract.metrics import LOSS, MetricSpec, metric_stems
from federated.contract.task_spec import TaskSpec
from federated.params import MethodParams, NoParams
from federated.registry import load_method

if TYPE_CHECKING:
    from federated.data import DatasetSpec, ImageData
    from federated.data.image_data import Targets

NAN = float("nan")


@dataclass(frozen=True)
class Scores:
    """A model's results on one split, from one pass.

    Attributes:
        values: pooled metric stem -> value (``loss`` included; the task's units:
            fractions for accuracies, score units for errors).
        party_values: stem -> (N,) per party, NaN where a party was not evaluated or
            holds no sample; empty for a pooled evaluation.
        parties: how many parties were evaluated (0 for a pooled evaluation).
        class_correct, class_total: (C,) correct predictions and samples per class, where
            the task has classes and the evaluation was pooled (the per-party
            re-weighting's input, :mod:`federated.evaluation.party_scores`); else None.
    """

    values: dict[str, float]
    party_values: dict[str, np.ndarray] = field(default_factory=dict)
    parties: int = 0
    class_correct: np.ndarray | None = None
    class_total: np.ndarray | None = None


class MetricAccumulator(Protocol):
    """Collects one evaluation's outputs batch by batch; computes its :class:`Scores` once."""

    def update(
        self, outputs: torch.Tensor, targets: torch.Tensor, owner: torch.Tensor | None
    ) -> None:
        """Add a batch: the head's ``outputs``, its ``targets`` and (per-party
        evaluations) each sample's party ``owner`` (int64, on the outputs' device)."""

    def compute(self) -> Scores:
        """The evaluation's scores (call once, after the last batch)."""


class Task(ABC):
    """A task's behaviour for one run (module docstring); built once per run."""

    name: ClassVar[str] = "task"
    #: the task's typed parameters (a frozen :class:`~federated.params.MethodParams`)
    Params: ClassVar[type[MethodParams]] = NoParams
    #: the kind of targets it reads: a data set's ``task`` (``classification``: class
    #: labels, ``score``: float scores); a user's own task on labels says ``classification``
    targets: ClassVar[str] = "classification"
    #: the metrics its rows record besides ``loss``, the default primary first
    metrics: ClassVar[tuple[MetricSpec, ...]] = ()
    #: its declaration for whatever reads its results (the report's words, what its
    #: partitions count), recorded in a sweep's manifest; None: its metrics alone
    #: (:meth:`task_spec`)
    contract: ClassVar[TaskSpec | None] = None
    #: whether its targets are class labels (the class re-weighted per-party outcomes
    #: and label-skew partitions need classes)
    has_classes: ClassVar[bool] = False
    #: whether its targets are pixel positions (boxes), which a rotation of the images
    #: would move: a rotating feature skew is then refused
    targets_in_pixels: ClassVar[bool] = False
    #: whether its evaluation records a loss (a detector's is NaN: it computes its loss
    #: only in training mode); the console line leaves an unrecorded loss out
    evaluates_loss: ClassVar[bool] = True
    #: the family of networks its data train (import path of a
    #: :class:`~federated.models.family.ModelFamily`): an encoder and a head by default,
    #: a detector (boxes and scores out, its own loss) for detection; the model field is
    #: checked against it and :func:`~federated.models.build_model` builds from it
    model_family: ClassVar[str] = "federated.models:ENCODER_HEAD"
    #: the reader of a folder layout of its own (import path of a
    #: :class:`~federated.data.folder_kinds.FolderReader`), asked before the image-folder
    #: reader whether a ``folder:PATH`` is of its kind; None: its data are no folder
    #: layout of their own (class folders, a scores file)
    folder_reader: ClassVar[str | None] = None
    #: how an ``hf:`` target column becomes its targets (import path of a
    #: :class:`~federated.data.hub_column.HubColumn`); None: it reads no Hub data
    hub_column: ClassVar[str | None] = None

    def __init__(self, params: MethodParams, spec: DatasetSpec) -> None:
        self.params = params
        self.spec = spec

    # ------------------------------------------------------------------ the data
    @classmethod
    def head_size(cls, spec: DatasetSpec) -> int:
        """Width of the model's head for the data ``spec``: one value per target."""
        return len(spec.target_names)

    @classmethod
    def target_groups(cls, targets: Targets) -> np.ndarray:
        """What a fixed hold-out of ``targets`` (a data set without a test split) draws
        within, one int per sample: one group by default (a plain seeded draw); the
        class labels where the task has classes (a stratified draw)."""
        return np.zeros(len(targets), dtype=np.int64)

    @classmethod
    def partition_groups(cls, data: ImageData) -> tuple[np.ndarray, int]:
        """What partitions, hold-outs and class counts group the training samples by
        (an int array, one per sample) and how many groups: one group by default, so
        that only natural, IID and quantity partitions apply."""
        return np.zeros(len(data.train_y), dtype=np.int64), 1

    @classmethod
    def party_class_counts(cls, data: ImageData, parts: list[np.ndarray]) -> np.ndarray:
        """int ``(n_parties, n_groups)``: what each party holds of each class, counted as
        its declaration says (``TaskSpec.counted``: images by default, a detection's
        boxes, a segmentation's pixels), for ``partitions.json`` and Fig. 5; ``parts``:
        each party's training sample indices.  By default the images of each
        :meth:`partition_groups` group (one column for a task without classes)."""
        groups, n = cls.partition_groups(data)
        return np.stack([np.bincount(groups[p], minlength=n) for p in parts])

    def take_targets(self, targets: torch.Tensor, index: torch.Tensor | slice) -> torch.Tensor:
        """The targets of the samples ``index`` (rows of a tensor by default)."""
        return targets[index]

    def packing_obstacle(self) -> str | None:
        """Why this task's parties cannot train packed (one line), or None."""
        return None

    @classmethod
    def check_data(cls, params: MethodParams, dataset: str) -> None:
        """Refuse (:class:`~federated.params.ConfigError`, one line) parameter values
        that mean nothing on the run's ``dataset`` (a name or ``folder:PATH``, resolved);
        called once the parameters are built, before any training."""
        return None

    # ------------------------------------------------------------------ training
    def forward(self, model: torch.nn.Module, x: torch.Tensor, targets: torch.Tensor) -> Any:
        """The model's output on training batch ``x`` (a ModelOutput): ``model(x)``; a
        task whose model needs the targets to compute its loss (a detector) passes them."""
        return model(x)

    @abstractmethod
    def per_sample_loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Each sample's loss, (B,)."""

    def loss(self, outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The batch's mean loss (a scalar): what every method's supervised part is."""
        return self.per_sample_loss(outputs, targets).mean()

    # ---------------------------------------------------------------- evaluation
    @abstractmethod
    def accumulator(self, n_parties: int | None = None) -> MetricAccumulator:
        """A fresh accumulator for one evaluation; ``n_parties``: sum per party instead
        of pooled (the pooled values are then the size-weighted means of the parties')."""

    @classmethod
    def task_spec(cls, name: str | None = None) -> TaskSpec:
        """Its declaration (:attr:`contract`, else its :attr:`metrics` alone) under
        ``name``, the name the rows carry (a plug-in's import path; default its own)."""
        spec = cls.contract or TaskSpec.plain(cls.name, cls.metrics, cls.has_classes)
        return spec.named(name or spec.name)

    @classmethod
    def recorded_stems(cls) -> tuple[str, ...]:
        """The stems of a row's ``test_`` and ``val_`` columns, in the rows' order:
        the primary metric, ``loss``, then the other metrics."""
        stems = metric_stems(cls.metrics)
        return (*stems[:1], LOSS, *stems[1:])

    @classmethod
    def party_stem(cls) -> str:
        """The metric per-party outcomes and personal models' spread report (the rows'
        ``party_<stem>_mean`` ..., ``test_<stem>_std``, ``party_<stem>/<i>``; parties.csv's
        ``party_<stem>``): the first recorded stem (classification's ``acc``, a score
        task's ``bin_acc``)."""
        return cls.recorded_stems()[0]

    def no_scores(self) -> dict[str, float]:
        """Every recorded stem without a value (NaN): a diverged round, no validation yet."""
        return dict.fromkeys(self.recorded_stems(), NAN)

    def diverged(self, scores: Scores) -> bool:
        """Whether the global model's test ``scores`` say the run diverged: its loss is
        NaN or infinite."""
        return not math.isfinite(scores.values.get(LOSS, 0.0))


def per_party_mean(sums: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Per-party sums (N,) divided by the parties' samples, NaN where a party has none."""
    return np.divide(sums, samples, out=np.full_like(sums, NAN), where=samples > 0)


def build_task(name: str, params: MethodParams | None, spec: DatasetSpec) -> Task:
    """The task ``name`` (registered or ``package.module:Class``) of a run on data
    ``spec``, with its ``params`` (None: the task's defaults, for a config that was not
    resolved)."""
    cls = load_method("task", name)
    return cls(cls.Params.build({}) if params is None else params, spec)
