"""CUDA paths: every method on the GPU, checkpoint equality on CUDA, data and augmentation on
the device, and no host<->device synchronisation per batch.

Marked ``gpu``: they run where a CUDA device exists (``pytest -m gpu``) and are skipped with
a reason elsewhere (CI has no GPU).  Sizes are small: the whole module takes seconds on an
H100.
"""

from __future__ import annotations

import copy
import math
import warnings

import pytest
import torch

from federated.algorithms import LocalJob
from federated.engine.round_loop import FederatedRun, run_rounds
from federated.execution.packed import PackedTrainer
from tests.conftest import tiny
from tests.party_training import train_party

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

# Every method and switch of the engine, as (name, config overrides).
METHODS = {
    "fedavg": dict(algorithm="fedavg"),
    "fedprox": dict(algorithm="fedprox"),
    "moon_k1": dict(algorithm="moon"),
    "moon_k3": dict(algorithm="moon", prev_models=3),
    "scaffold": dict(algorithm="scaffold"),
    "solo": dict(algorithm="solo"),
    "fedavgm": dict(algorithm="fedavg", server_optimizer="fedavgm"),
    "l2rep": dict(algorithm="l2rep"),
    "annealed_tau": dict(algorithm="moon", tau_schedule="annealed"),
    "fednova": dict(algorithm="fednova"),
    "feddyn": dict(algorithm="feddyn"),
    "fedadam": dict(algorithm="fedavg", server_optimizer="fedadam"),
    "fedyogi": dict(algorithm="moon", server_optimizer="fedyogi"),
}


def cuda(**overrides):
    return tiny(device="cuda", **overrides)


def finite_rows(rows):
    return all(math.isfinite(r["test_acc"]) and math.isfinite(r["train_loss"]) for r in rows)


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_method_trains_two_rounds_on_cuda(synthetic, name):
    rows = list(run_rounds(cuda(rounds=2, **METHODS[name]), synthetic))
    assert [r["round"] for r in rows] == [1, 2]
    assert finite_rows(rows)
    assert not any(r["diverged"] for r in rows)
    assert 0.0 <= rows[-1]["test_acc"] <= 1.0


@pytest.mark.parametrize(
    "name", ["moon_k3", "scaffold", "fedavgm", "annealed_tau", "feddyn", "fedadam"]
)
def test_checkpoint_on_cuda_restores_on_cuda_to_the_same_rounds(synthetic, name):
    """Stop after round 2, save, restore into a fresh run: rounds 3-4 equal an uninterrupted run.

    Equality is exact: the same kernels run on the same device in the same order (cuDNN is
    made deterministic for the comparison).
    """
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    config = cuda(rounds=4, **METHODS[name])
    whole = FederatedRun(config, synthetic)
    expected = [whole.run_round()["test_acc"] for _ in range(4)]

    first = FederatedRun(config, synthetic)
    first.run_round()
    first.run_round()
    state = first.state_dict()
    assert all(v.device.type == "cpu" for v in state["global"].values())  # saved host-side
    second = FederatedRun(config, synthetic)
    second.load_state_dict(state)
    resumed = [second.run_round()["test_acc"] for _ in range(2)]
    assert resumed == expected[2:]
    assert all(p.device.type == "cuda" for p in second.global_model.parameters())


def test_data_and_augmentation_live_on_the_gpu(synthetic):
    run = FederatedRun(cuda(algorithm="fedavg"), synthetic)
    assert run.train_x.device.type == "cuda" and run.train_x.dtype == torch.uint8
    assert run.test_x.device.type == "cuda"
    images, _ = run.party_data(0)
    params = run.augmenter.draw(images.shape[0], torch.Generator().manual_seed(0))
    assert params is not None and params.dy.device.type == "cuda"
    batch = run.augmenter.train_batch(images[:64], params.slice(0, 64))
    assert batch.device.type == "cuda" and batch.dtype == torch.float32
    # the batched GPU augmentation equals the plain one on the CPU, bit for bit
    cpu_run = FederatedRun(tiny(algorithm="fedavg", device="cpu"), synthetic)
    cpu_params = cpu_run.augmenter.draw(images.shape[0], torch.Generator().manual_seed(0))
    cpu_batch = cpu_run.augmenter.train_batch(images[:64].cpu(), cpu_params.slice(0, 64))
    assert torch.equal(batch.cpu(), cpu_batch)


def _synchronisations_in_one_local_training(run: FederatedRun, party: int) -> tuple[int, int]:
    """(synchronising CUDA calls, steps) of one party's local training, counted by torch's
    sync debug mode, which warns on every call that makes the host wait for the device."""
    model = copy.deepcopy(run.global_model).requires_grad_(True)
    images, labels = run.party_data(party)
    job = LocalJob(
        party=party,
        round_index=run.round,
        model=model,
        global_model=run.global_model,
        state=run.party_states[party],
        num_samples=labels.shape[0],
        device=run.device,
        server=run.server_state,
    )
    run.algorithm.begin_local(job)
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            train_party(
                job, run.algorithm, images, labels, run.augmenter, run.config, run.rng.batches
            )
        finally:
            torch.cuda.set_sync_debug_mode("default")
    run.algorithm.end_local(job)
    syncs = sum("synchroniz" in str(w.message).lower() for w in caught)
    return syncs, job.steps


@pytest.mark.parametrize("name", sorted(set(METHODS) - {"annealed_tau"}))
def test_no_host_device_synchronisation_per_batch(synthetic, name):
    """A party's local training waits for the GPU a fixed number of times (reading its loss
    sums once at the end), not once per batch: the count is the same for 1 and 4 epochs."""
    counts = []
    for epochs in (1, 4):
        run = FederatedRun(
            cuda(local_epochs=epochs, data_fraction=0.08, **METHODS[name]), synthetic
        )
        run.run_round()  # MOON's previous models exist from round 2 on
        syncs, steps = _synchronisations_in_one_local_training(run, party=0)
        counts.append((syncs, steps))
    (syncs_1, steps_1), (syncs_4, steps_4) = counts
    assert steps_4 >= 4 * steps_1 > 0
    # A per-batch wait would show as >= steps syncs; reading the loss sums once per party is
    # one, and the caching allocator may add one when it grows.
    assert syncs_4 <= 3, f"{name}: {syncs_1} syncs in {steps_1} steps, {syncs_4} in {steps_4}"
    assert syncs_1 <= 3


@pytest.mark.parametrize("name", ["fedavg", "fedprox", "moon_k3", "scaffold", "feddyn"])
def test_a_packed_round_does_not_synchronise_per_step(synthetic, name):
    """Packed execution: all drawn parties' local trainings wait for the GPU a fixed number
    of times (set-up, the loss sums once per pack), the same for 1 and 4 epochs."""
    counts = []
    for epochs in (1, 4):
        run = FederatedRun(
            cuda(local_epochs=epochs, data_fraction=0.08, **METHODS[name]), synthetic
        )
        assert isinstance(run.trainer, PackedTrainer)
        run.run_round()  # MOON's previous models exist from round 2 on
        drawn = run.draw_parties()
        torch.cuda.synchronize()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                work, plan = run._round_plan(drawn)
                trained = list(run._local_trainings(work.reporting, plan))
            finally:
                torch.cuda.set_sync_debug_mode("default")
        steps = sum(job.steps for job, _ in trained)
        counts.append((sum("synchroniz" in str(w.message).lower() for w in caught), steps))
    (syncs_1, steps_1), (syncs_4, steps_4) = counts
    assert steps_4 >= 4 * steps_1 > 0
    report = f"{name}: {syncs_1} syncs in {steps_1} steps, {syncs_4} in {steps_4}"
    assert syncs_4 <= syncs_1 + 2, report


def test_annealed_tau_reads_the_host_three_times_per_step(synthetic):
    """Annealed tau decides each step's Metropolis acceptance on the host (gradient norm and
    the two candidate losses, with a coin drawn only when the candidate is not better), so
    its syncs grow with the steps — by design, at most three per step (README, Speed)."""
    run = FederatedRun(cuda(data_fraction=0.08, **METHODS["annealed_tau"]), synthetic)
    run.run_round()
    syncs, steps = _synchronisations_in_one_local_training(run, party=0)
    assert steps <= syncs <= 3 * steps + 3


@pytest.mark.parametrize("execution", ["packed", "sequential"])
def test_bf16_mixed_trains_the_cifar_moon_round_on_cuda(synthetic, execution):
    """precision=bf16-mixed on the CIFAR-shaped MOON round, both paths: it runs (the GPU
    has bfloat16), repeats bit for bit, records its precision, keeps the model and MOON's
    previous models float32, and its losses stay within 2% of float32's (cuDNN made
    deterministic for the repeat, as for the checkpoint test)."""
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    config = cuda(algorithm="moon", rounds=2, execution=execution, data_fraction=0.08)
    bf16 = config.replace(precision="bf16-mixed")
    first = list(run_rounds(bf16, synthetic))
    again = list(run_rounds(bf16, synthetic))
    fp32 = list(run_rounds(config, synthetic))
    assert finite_rows(first)
    assert {r["precision"] for r in first} == {"bf16-mixed"}
    assert [r["train_loss"] for r in first] == [r["train_loss"] for r in again]
    for bf, fp in zip(first, fp32):
        assert bf["train_loss"] == pytest.approx(fp["train_loss"], rel=2e-2)
    run = FederatedRun(bf16, synthetic)
    run.run_round()
    run.run_round()
    assert {v.dtype for v in run.global_model.state_dict().values()} <= {
        torch.float32,
        torch.int64,
    }
    prev = [
        t
        for i in range(run.config.n_parties)
        for s in run.party_states[i]["prev"]
        for t in s.values()
    ]
    assert {t.dtype for t in prev} <= {torch.float32, torch.int64}
