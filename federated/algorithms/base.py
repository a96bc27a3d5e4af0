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
  packed network.  A method that only reaches the model through ``parameters()``,
  ``named_parameters()``, ``state_dict()`` and ``load_state_dict()`` (and their
  gradients in :meth:`~Algorithm.after_backward`), reads frozen models through
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

from federated.algorithms.batchnorm_rule import BatchNormRule
from federated.algorithms.frozen_reader import FrozenModels, FrozenReader
from federated.config.checks import BATCHNORM_RULES
from federated.contract.task_needs import TaskNeed
from federated.models import FedConModel, ModelOutput
from federated.params import MethodParams, NoParams
from federated.server.aggregation import Aggregator, WeightedMean
from federated.server.contribution import Contribution as Contribution  # re-exported
from federated.tasks.base import Task, build_task

if TYPE_CHECKING:
    from federated.config.run_config import RunConfig


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

    def __post_init__(self) -> None:
        if self.frozen is None:
            self.frozen = FrozenModels(self.global_model)


#: a personalised method's default ``personal_test_every``: its own models on the pooled
#: test set (N passes where FedAvg makes one: the cost of a round for LG-FedAvg and FedBN,
#: whose parties share no leading stage with the global model) are for the report's
#: global-vs-personal trade-off, read at the last round, which is always scored; its
#: protocol's numbers, each party's model on its own test and validation splits, are
#: scored every round whatever this is (docs/methods.md, "How personal models are scored")
PERSONALISED_POOLED_TEST_EVERY = 5


class Algorithm:
    """FedAvg's behaviour; subclasses override what their method changes."""

    name: ClassVar[str] = "fedavg"
    #: the method's typed parameters (a frozen :class:`~federated.params.MethodParams`)
    Params: ClassVar[type[MethodParams]] = NoParams
    # SOLO-style methods: every party trains its own model every round (whatever the
    # sample fraction), continuing from its own weights (its evaluation: party_model)
    personal_models: ClassVar[bool] = False
    # Whether the engine may train this method's parties together (see the module
    # docstring for what that asks of the hooks); False for a method that has not said.
    packable: ClassVar[bool] = False
    # party_model gives a model the party trains whole (Ditto's, APFL's, SOLO's): its
    # BatchNorm statistics are already the party's own under any ``batchnorm`` rule
    whole_personal_model: ClassVar[bool] = False
    # the ``batchnorm`` rule a run of this method takes when nobody set one
    # (federated/algorithms/batchnorm_rule.py)
    batchnorm_default: ClassVar[str] = "averaged"
    # the ``personal_test_every`` a run of this method takes when nobody set one: SOLO's
    # rows have scored its own models on the pooled test set every round since the
    # MOON reproduction, and keep doing so; the personalised methods take
    # PERSONALISED_POOLED_TEST_EVERY (each party's own split is still scored every round)
    personal_test_every_default: ClassVar[int] = 1
    # copies of the model's state each party keeps between rounds (its own model, its
    # optimiser state, the entries it keeps local): N times this is checked against the
    # machine's memory before work (federated/models/party_memory.py)
    party_state_copies: ClassVar[float] = 0.0
    # what the method needs of the run's task (federated/contract/task_needs.py): a
    # task that lacks one is refused in one line before any data loads; every built-in
    # method trains through the task's forward pass and loss, so needs nothing more
    task_needs: ClassVar[tuple[TaskNeed, ...]] = ()
    # the ``batchnorm`` rules the method allows
    batchnorm_rules: ClassVar[tuple[str, ...]] = BATCHNORM_RULES
    # client-level differential privacy (federated/server/privacy.py, docs/privacy.md):
    # DP-FedAvg's clipped, noised mean of the parties' updates replaces the method's
    # aggregation, which protects a party only if its model's shared entries are all it
    # sends the server.  None says so; otherwise the reason it does not, which the config
    # refuses in one line ("<name> <reason>").  A method that has not said is refused.
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
        #: what happens to BatchNorm statistics (the engine applies it around every
        #: method's hooks, so no method handles them itself)
        self.batchnorm = BatchNormRule(config.batchnorm or self.batchnorm_default)

    def packing_obstacle(self) -> str | None:
        """Why this method's parties cannot train packed (one line), or None."""
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
        as ``ce`` (``train_loss``) whichever it is."""
        return self.task.loss(out.logits, y)

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
        """Whether the method evaluates a party with a model of the party's own (it
        overrides :meth:`party_model`), not always the global model."""
        return cls.party_model is not Algorithm.party_model

    def party_model(
        self, party: int, global_model: FedConModel, state: dict[str, Any]
    ) -> FedConModel | None:
        """The model party ``party`` is evaluated with, from its ``state``; None: the
        global model (every method that trains one).  A personal-model method returns
        the party's own (:mod:`federated.evaluation.round_evaluation`)."""
        return None

    # ------------------------------------------------------------------ server side
    def init_server_state(self, global_model: FedConModel) -> dict[str, Any]:
        """Server-side state besides the global weights, on the global model's device."""
        return {}

    def aggregator(self, server: dict[str, Any], global_model: FedConModel) -> Aggregator:
        """The round's combiner of contributions (default: the weighted mean of the
        parties' weights).  It may update ``server`` when it finishes."""
        return WeightedMean(global_model.state_dict())

    def local_entries(self, global_model: FedConModel) -> frozenset[str]:
        """The model state entries a party keeps and never sends the server (the server
        keeps the global model's values of them): none by default; the partly personal
        methods' local layers.  DP-FedAvg clips and noises every other floating-point
        entry the server reads."""
        return frozenset()

    # -------------------------------------------------------------------- reporting
    def bytes_per_party(self, model_bytes: int, param_bytes: int) -> tuple[int, int]:
        """Bytes sent (down, up) per drawn party: the model's state each way, plus the
        method's extras."""
        return model_bytes, model_bytes

    def round_metrics(self, jobs: list[LocalJob], server: dict[str, Any]) -> dict[str, float]:
        """Method-specific per-round metrics (e.g. tau, control-variate norms)."""
        return {}


def tensors_to_cpu(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """Detached CPU copies: party state leaves the accelerator between rounds."""
    return [t.detach().to("cpu", copy=True) for t in tensors]


def model_state_to_cpu(model: FedConModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
