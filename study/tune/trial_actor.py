"""What a trial is called where a user looks: the Ray dashboard's actor and the trackers.

Tune runs a function trainable as an actor of a class it makes (``ImplicitFunc``) whose
``repr`` is the function's name, so the Ray dashboard's Actors page listed every trial as
``train_federated``.  Ray takes an actor's ``Repr`` from ``repr(actor)`` once the actor is
built (Ray's "Customizing prefixes for Actor logs"), and a Tune trainable holds its
trial's config and id by then: :class:`FederatedTrial` is Tune's own wrapper of
:func:`federated.trainable.train_federated` with a ``__repr__`` that names the trial by
its point and seed, e.g. ``mu=0.1 seed=2 [c1bca_00003]``.  The dashboard shows that next
to the actor's state (ALIVE while the trial runs, DEAD once it ended); Ray's log lines of
the trial carry it as their prefix too.

Ray reads an actor's ``Repr`` once, when the actor is built.  A sweep that asks for the
dashboard (``--dashboard``) or joins a cluster gets a new actor per trial
(``TuneConfig.reuse_actors`` off), so every trial's name there is its own.  A local
sweep without a dashboard reuses a finished trial's actor for the next trial
(study/resources.py: no new process, imports or data load between trials); a reused
actor's log lines then take the new trial's name as their prefix (:meth:`reset_config`
prints Ray's actor-name marker), while Ray's state API (``ray list actors``) keeps the
name of the actor's first trial.

The trainable keeps the name ``train_federated`` (Tune's ``_name``): sweeps started
before this class existed resume with it (``Tuner.restore`` checks the name).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from ray._private.ray_constants import LOG_PREFIX_ACTOR_NAME
from ray.train._internal.session import get_session
from ray.tune.trainable.function_trainable import wrap_function

from federated.trainable import train_federated


def trial_label(config: Mapping[str, Any]) -> str:
    """``"<point> seed=<seed>"``: a trial in words (MLflow run names, actor reprs)."""
    point = config.get("point") or "-"
    return f"{point} seed={config.get('seed')}"


class FederatedTrial(wrap_function(train_federated)):
    """:func:`~federated.trainable.train_federated` as a Tune trainable whose actor is
    named after its trial (see the module docstring)."""

    def __repr__(self) -> str:
        # Ray may ask before the trainable's __init__ has stored its config and id
        config = getattr(self, "config", None) or {}
        trial_id = getattr(getattr(self, "_trial_info", None), "trial_id", None)
        label = trial_label(config) if config else "train_federated"
        return f"{label} [{trial_id}]" if trial_id else label

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Tune's reset of a reused actor for its next trial; the actor's log lines
        from here on carry that trial's name (Ray's actor-name marker, which Ray's log
        monitor reads on both streams)."""
        reset = super().reset_config(new_config)
        if reset:
            # Ray's reset names the trial's working directory (never copied to the sweep
            # folder) as its trial dir, where a new actor's setup names the driver staging
            # folder that is: without this a reused actor's parties.csv and
            # representations/ were lost (tests/test_sweep_ray.py's smoke test)
            get_session().trial_info.logdir = self._storage.trial_driver_staging_path
            marker = f"{LOG_PREFIX_ACTOR_NAME}{self!r}"
            print(marker, flush=True)
            print(marker, file=sys.stderr, flush=True)
        return reset
