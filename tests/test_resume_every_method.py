"""Checkpoint/resume equality for every method, packed and sequential: a run saved after
round 1 (through the trainable's file format, its parties' states in an archive as a
trial's are) and restored into a fresh run continues with exactly the rows of an
uninterrupted run on the same path (CPU, seeded)."""

from __future__ import annotations

import pytest

from federated.engine.party_store import PartyArchive
from federated.engine.round_loop import FederatedRun
from federated.registry import load_method
from federated.trainable import load_run_state, save_run_state
from tests.conftest import tiny
from tests.test_round_loop import results

METHODS = {
    "fedavg": dict(algorithm="fedavg"),
    "fedprox": dict(algorithm="fedprox", mu=0.1),
    "moon_k2": dict(algorithm="moon", prev_models=2),
    "moon_annealed_run_scope": dict(algorithm="moon", tau_schedule="annealed", tau_scope="run"),
    "scaffold": dict(algorithm="scaffold"),
    "solo": dict(algorithm="solo"),
    "l2rep": dict(algorithm="l2rep"),
    "fednova": dict(algorithm="fednova"),
    "feddyn": dict(algorithm="feddyn", method_options={"alpha": 0.1}),
    "fedavgm": dict(algorithm="moon", server_optimizer="fedavgm"),
    "fedadam": dict(algorithm="fedavg", server_optimizer="fedadam"),
    "fedyogi": dict(algorithm="feddyn", server_optimizer="fedyogi"),
    "fedper": dict(algorithm="fedper"),
    "fedrep": dict(algorithm="fedrep", local_epochs=2),
    "lg-fedavg": dict(algorithm="lg-fedavg"),
    "ditto": dict(algorithm="ditto"),
    "apfl": dict(algorithm="apfl"),
    "fedbn": dict(algorithm="fedbn", model="simple-cnn-bn"),
    "fedavg_batchnorm_local": dict(model="simple-cnn-bn", batchnorm="local"),
    "fedper_batchnorm_local": dict(algorithm="fedper", model="simple-cnn-bn", batchnorm="local"),
}


def _cases() -> list[tuple[str, str]]:
    """Each method on each path it can take: a method that cannot pack trains sequentially
    whatever ``execution`` says, so its packed case would repeat its sequential one."""
    return [
        (method, execution)
        for method in sorted(METHODS)
        for execution in ("packed", "sequential")
        if execution == "sequential"
        or load_method("algorithm", METHODS[method].get("algorithm", "fedavg")).packable
    ]


@pytest.mark.parametrize(("method", "execution"), _cases())
def test_a_restored_run_continues_exactly(method, execution, synthetic, tmp_path):
    """Saved after round 1 mid-run, as a trial checkpoints: the run goes on to round 3
    (the uninterrupted trial), and a fresh run restored from the file gives rounds 2-3."""
    # parties of 214 to 290 samples: 3 or 4 batches of 64 each round
    config = tiny(rounds=3, sample_fraction=0.75, execution=execution, **METHODS[method])
    run = FederatedRun(config, synthetic)
    head = results([run.run_round()])
    archive = PartyArchive(tmp_path / "party_states")
    save_run_state(run, tmp_path, archive)
    straight = head + results([run.run_round() for _ in range(2)])
    restored = FederatedRun(config, synthetic)
    restored.load_state_dict(load_run_state(tmp_path), archive)
    tail = results([restored.run_round() for _ in range(2)])
    assert head + tail == straight


def test_only_execution_fields_may_differ_at_restore(synthetic, tmp_path):
    """Fields marked execution_only (threads, eval batch size ...) may change; a method
    parameter may not, and the refusal names it."""
    config = tiny(algorithm="feddyn", method_options={"alpha": 0.1})
    run = FederatedRun(config, synthetic)
    run.run_round()
    save_run_state(run, tmp_path)
    state = load_run_state(tmp_path)
    FederatedRun(config.replace(eval_batch_size=64, checkpoint_every=1), synthetic).load_state_dict(
        state
    )
    other = FederatedRun(config.replace(alpha=0.2), synthetic)
    with pytest.raises(
        ValueError, match=r"checkpoint was made with alpha=0.1, this run has alpha=0.2"
    ):
        other.load_state_dict(state)
