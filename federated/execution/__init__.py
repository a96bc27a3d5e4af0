"""How a party trains: the local trainers of the three execution paths and what they share.

One interface, :class:`~federated.execution.trainer.LocalTrainer` (``train(jobs, plan)``
yields each drawn party's finished local training in the drawn order), three
implementations chosen once per run by :func:`~federated.execution.choice.local_trainer`:

* :mod:`~federated.execution.sequential` — one party after another on one working model;
* :class:`~federated.execution.sequential.ReferenceTrainer` — the same, with per-sample
  torchvision augmentation (the plain-math check);
* :mod:`~federated.execution.packed` — the drawn parties as one packed network
  (:mod:`~federated.execution.packed_model`), frozen models once per step for all parties
  (:mod:`~federated.execution.frozen_models`).

What every path shares, each defined once: the batch plan (which rows each party sees at
each step, :mod:`~federated.execution.batch_plan`), the SGD update rule
(:mod:`~federated.sgd_rule`, also the personal models' and fine-tuning's rule), the loss read-out
(:mod:`~federated.execution.loss_sums`) and the start of a local training — global
weights into the party's model, the party's own state over them
(:class:`~federated.algorithms.party_own_state.PartyOwnState`), then the method's
``begin_local``
(:func:`~federated.execution.trainer.start_local`).

The execution layer sits above the methods: it imports :mod:`federated.algorithms`,
never the other way (a method reads frozen models through
:class:`~federated.algorithms.frozen_reader.FrozenReader`).
"""
