"""One party's local training through the engine's sequential trainer, for tests that
build a job by hand (linear models, hand computations)."""

from __future__ import annotations

import torch

from federated.algorithms.base import Algorithm, LocalJob
from federated.config.run_config import RunConfig
from federated.execution.batch_plan import draw_party_batches
from federated.execution.sequential import SequentialTrainer
from federated.execution.trainer import PartyResult, TrainingSetup
from federated.sgd_rule import SgdRule


def train_party(
    job: LocalJob,
    algorithm: Algorithm,
    images: torch.Tensor,
    labels: torch.Tensor,
    augmenter,
    config: RunConfig,
    generator: torch.Generator,
) -> PartyResult:
    """Train ``job.model`` (already started: ``begin_local`` called) on the party's
    ``images``/``labels`` with the plan the engine would draw from ``generator``."""
    plan = draw_party_batches(
        job.party, len(labels), 0, augmenter, config.batch_size, config.local_epochs, generator
    )
    rule = SgdRule(config.lr, config.momentum, config.weight_decay)
    own = algorithm.own_state.for_run(job.global_model, algorithm.params, config)
    setup = TrainingSetup(algorithm, own, job.global_model, augmenter, rule, images, labels)
    trainer = SequentialTrainer(setup, job.model)
    return trainer.train_one(job, plan)
