"""The interface every federated method implements.

A method is a small class over three concerns kept apart (as Flower's strategies and
pfl-research's algorithms keep the party's work apart from the server's):

* **party side** — what a party optimises and keeps: :meth:`Algorithm.loss` (plus the
  gradient-level hooks :meth:`~Algorithm.after_backward` and
  :meth:`~Algorithm.after_step`), :meth:`~Algorithm.init_party_state`,
  :meth:`~Algorithm.begin_local` and :meth:`~Algorithm.end_local`.  Every hook gets the
  :class:`LocalJob` of one party's local training: the party's persistent state
  (``job.state``, on the CPU between rounds), the server state it may read
  (``job.server``) and a scratch dict for values that live only during this local
  training (``job.scratch``: FedProx's anchor, SCAFFOLD's correction) and the frozen
  models its objective reads (``job.frozen``: the global model's and registered
  models' representations of the batch, :mod:`federated.algorithms.frozen_reader`).  The
  algorithm object itself holds only its parameters, so parties can train together:
  packed execution (:mod:`federated.execution.packed`) runs the drawn parties' hooks
  side by side, each on a ``job.model`` whose weights are that party's slice of one
  packed network.  What stays with a party between rounds beyond its hooks' own state
  (entries of the model it keeps, a personal model) is one declaration,
  :attr:`Algorithm.own_state` (:mod:`federated.algorithms.party_own_state`), which the
  engine applies: no hook loads or saves it.  A method that only reaches the model
  through ``parameters()``, ``named_parameters()``, ``state_dict()`` and
  ``load_state_dict()`` (and their gradients in :meth:`~Algorithm.after_backward`),
  reads frozen models through
  ``job.frozen`` and draws no random numbers while parties train, declares
  ``packable = True``.
* **contribution** — a party's local training ends in a :class:`Contribution`: its
  trained weights, its aggregation weight |D_i| / sum of the drawn |D_j|, its step
  count and whatever :meth:`~Algorithm.end_local` returns (SCAFFOLD's delta c).
* **server side** — :meth:`~Algorithm.aggregator` gives the object that combines the
  round's contributions into one model state (default: the |D_i|-weighted mean, streamed
  one party at a time; FedNova normalises by step counts, FedDyn corrects with its
  server state h, SOLO combines nothing).  A server optimizer
  (:mod:`federated.server`: plain average, FedAvgM, FedAdam ...) then turns the combined
  state into the next global model, so any party rule combines with any server rule.
  Server state (SCAFFOLD's c, FedDyn's h) is a dict made by
  :meth:`~Algorithm.init_server_state`, held and checkpointed by the run.

Adding a method means one new file with a subclass (and its ``Params`` dataclass) and
one line in :data:`federated.registry.ALGORITHM_PATHS`; a method outside fedsweep is
``--algorithm package.module:Class``.  Every hook has a working default (FedAvg's), so a
subclass overrides only what differs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

import torch

from federated.algorithms.frozen_reader import FrozenModels, FrozenReader
from federated.algorithms.party_own_state import OwnState
from federated.algorithms.personal_model import PersonalModel
from federated.algorithms.personal_model import model_state_to_cpu as model_state_to_cpu
from federated.algorithms.personal_model import tensors_to_cpu as tensors_to_cpu
from federated.contract.task_needs import TaskNeed
from federated.models import FedConModel, ModelOutput
from federated.params import MethodParams, NoParams
from federated.runtime.precision import float32
from federated.server.aggregation import Aggregator, WeightedMean
from federated.server.contribution import Contribution as Contribution  # re-exported
from federated.tasks.base import Task, build_task

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig

#: the class attributes own_state replaced: a method setting one is refused at once (its
#: value would otherwise be silently ignored)
REPLACED_BY_OWN_STATE = (
    "personal_models",
    "whole_personal_model",
    "batchnorm_default",
    "batchnorm_rules",
    "personal_test_every_default",
    "party_state_copies",
    "local_entries",
)


class LossTerms(NamedTuple):
    """A party's objective on one batch.

    ``total`` is back-propagated; ``parts`` are detached scalars logged per round, keyed
    by short names: ``ce`` becomes ``train_loss``, ``con`` ``con_loss``, any other key
    ``<key>_loss``.
    """

    total: torch.Tensor
    parts: dict[str, torch.Tensor]


@dataclass
class LocalJob:
    """One party's local training in one round: the context every party hook gets."""

    party: int
    round_index: int  # 0-based index of the round being run
    model: FedConModel  # the working model: starts as the global model, trained in place
    global_model: FedConModel  # this round's global model, frozen (eval mode, no grad)
    state: dict[str, Any]  # the party's persistent state (checkpointed, CPU between rounds)
    num_samples: int
    device: torch.device
    steps: int = 0  # SGD steps taken so far in this local training
    info: dict[str, float] = field(default_factory=dict)  # per-party values to report
    server: dict[str, Any] = field(default_factory=dict)  # server state, read-only here
    scratch: dict[str, Any] = field(default_factory=dict)  # lives for this job only
    # the frozen models the objective reads (the global model's by default)
    frozen: FrozenReader | None = None
    # the party's personal model, where the method declares one (Ditto, APFL): the
    # engine loads, steps and saves it; the method reads it
    personal: PersonalModel | None = None

    def __post_init__(self) -> None:
        if self.frozen is None:
            self.frozen = FrozenModels(self.global_model)


class Algorithm:
    """FedAvg's behaviour; subclasses override what their method changes."""

    name: ClassVar[str] = "fedavg"
    #: the method's typed parameters (a frozen :class:`~federated.params.MethodParams`)
    Params: ClassVar[type[MethodParams]] = NoParams
    #: what stays with each party between rounds, and how it is trained and evaluated
    #: (:mod:`federated.algorithms.party_own_state`): kept entries of the shared model,
    #: a personal model, the model-sized state the method keeps itself, its BatchNorm
    #: rules and its scoring period; FedAvg keeps nothing
    own_state: ClassVar[OwnState] = OwnState()
    # Whether the engine may train this method's parties together (see the module
    # docstring for what that asks of the hooks); False for a method that has not said.
    packable: ClassVar[bool] = False
    # what the method needs of the run's task (federated/contract/task_needs.py): a
    # task that lacks one is refused in one line before any data loads; every built-in
    # method trains through the task's forward pass and loss, so needs nothing more
    task_needs: ClassVar[tuple[TaskNeed, ...]] = ()
    # client-level differential privacy (federated/server/privacy.py, docs/privacy.md):
    # DP-FedAvg's clipped, noised mean of the parties' updates replaces the method's
    # aggregation, which protects a party only if its model's shared entries are all it
    # sends the server.  None says so; otherwise the reason it does not, which the config
    # refuses in one line ("<name> <reason>").  A method that has not said is refused.
    # Record-level DP-SGD (dp_level=record) replaces the local step's gradient by the
    # clipped, noised mean of per-sample gradients of the supervised loss: right only for
    # a method whose local objective is that loss and nothing else
    per_sample_objective: ClassVar[bool] = False
    dp_obstacle: ClassVar[str | None] = (
        "does not declare dp_obstacle = None (that it sends the server its model's shared "
        "entries and nothing else)"
    )

    def __init__(self, config: RunConfig, generator: torch.Generator) -> None:
        self.config = config  # run-level settings (lr, momentum, n_parties) the method reads
        # built once, with the config (RunConfig.algorithm_params); a config made for
        # another method (a test wiring a method by hand) builds them here
        built = config.algorithm_params
        self.params = built if type(built) is self.Params else self.Params.build(config.to_dict())
        self.generator = generator  # the run's "algorithm" random stream (CPU)
        #: what the parties learn: the supervised part of every method's loss
        task = config.task or config.spec.task
        self.task: Task = build_task(task, config.task_params, config.spec)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name in REPLACED_BY_OWN_STATE:
            if name in vars(cls):
                raise TypeError(
                    f"{cls.__name__} sets {name}, which own_state = OwnState(...) "
                    "replaces (federated/algorithms/party_own_state.py, "
                    "docs/writing-a-method.md)"
                )

    def packing_obstacle(self) -> str | None:
        """Why this method's parties cannot train packed (one line), or None."""
        if self.own_state.personal_model:
            return f"{self.name} trains each party's personal model beside the global one"
        if self.packable:
            return None
        return f"algorithm {self.name} does not declare packable = True"

    # ------------------------------------------------------------------ party side
    def init_party_state(self, party: int) -> dict[str, Any]:
        """State a party starts with (before its first round)."""
        return {}

    def begin_local(self, job: LocalJob) -> None:
        """Prepare the party's local training (move state to the device, ...)."""
        return None

    def loss(self, job: LocalJob, out: ModelOutput, x: torch.Tensor, y: torch.Tensor) -> LossTerms:
        """The objective on one batch; FedAvg: the supervised loss alone."""
        ce = self.supervised_loss(out, y)
        return LossTerms(ce, {"ce": ce.detach()})

    def supervised_loss(self, out: ModelOutput, y: torch.Tensor) -> torch.Tensor:
        """The task's loss on the head (:meth:`federated.tasks.base.Task.loss`):
        cross-entropy on class labels, the run's ``score_loss`` on score targets.  Logged
        as ``ce`` (``train_loss``) whichever it is; on float32 outputs (a bf16-mixed
        run's head computes in bfloat16: federated/runtime/precision.py)."""
        return self.task.loss(float32(out.logits), y)

    def after_backward(self, job: LocalJob) -> dict[str, torch.Tensor]:
        """Adjust gradients before the SGD step; returns extra loss parts to log."""
        return {}

    def after_step(self, job: LocalJob) -> None:
        """Adjust weights after the SGD step."""
        return None

    def end_local(self, job: LocalJob) -> dict[str, list[torch.Tensor]]:
        """Finish local training: update the party's state (kept on the CPU) and return
        the contribution's extras (what the party sends besides its weights)."""
        return {}

    # ------------------------------------------------------------------ evaluation
    @classmethod
    def evaluates_own_models(cls) -> bool:
        """Whether the method evaluates a party with a model of the party's own (its
        ``own_state`` keeps some, or it overrides :meth:`party_model`), not always the
        global model."""
        return cls.own_state.evaluates_own_models or cls.party_model is not Algorithm.party_model

    def party_model(
        self, party: int, global_model: FedConModel, state: dict[str, Any]
    ) -> FedConModel | None:
        """A model of the method's own making that party ``party`` is evaluated with,
        from its ``state``, taken as it is (APFL's mix); None: the one its ``own_state``
        gives (its personal model, or the global model with its kept entries; the global
        model for a party that keeps nothing)."""
        return None

    # ------------------------------------------------------------------ server side
    def init_server_state(self, global_model: FedConModel) -> dict[str, Any]:
        """Server-side state besides the global weights, on the global model's device."""
        return {}

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> Aggregator:
        """The round's combiner of contributions (default: the weighted mean of the
        parties' weights).  It may update ``server`` when it finishes."""
        return WeightedMean(global_model.state_dict())

    # -------------------------------------------------------------------- reporting
    def bytes_per_party(self, model_bytes: int, param_bytes: int) -> tuple[int, int]:
        """Bytes sent (down, up) per drawn party: ``model_bytes``, the model's state less
        the entries the method keeps at the party, each way, plus the method's extras."""
        return model_bytes, model_bytes

    def round_metrics(self, jobs: list[LocalJob], server: dict[str, Any]) -> dict[str, float]:
        """Method-specific per-round metrics (e.g. tau, control-variate norms)."""
        return {}
