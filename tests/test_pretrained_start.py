"""Pretrained starts (``init``): files matched by name and shape, the head rule, shipped
and torchvision starts, bad input refused in one line, the manifest's hash, and a real
Fashion-MNIST run that a start measurably changes (same seed, with vs without)."""

from __future__ import annotations

import hashlib
import os
import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from federated.config.data_checks import with_data_checked
from federated.config.run_config import ConfigError, RunConfig
from federated.data import load_dataset
from federated.data.catalog import dataset_spec
from federated.engine.round_loop import FederatedRun
from federated.models import build_model
from federated.models.pretrained_start import (
    SHIPPED_FOLDER,
    StartNotice,
    apply_start,
    start_hashes,
    torchvision_cache_file,
)
from federated.models.simple_cnn import SimpleCNN
from tests.short_runs import short_run

SHIPPED = "fedsweep:fmnist-0to4-simple-cnn"
FMNIST = dataset_spec("fmnist")


def resolved(**fields) -> RunConfig:
    """Resolved and checked against the data and the model: a start is read then."""
    return with_data_checked(RunConfig(**fields))


def seeded_model(seed: int, n_classes: int = 10, **kwargs) -> nn.Module:
    torch.manual_seed(seed)
    return build_model("simple-cnn", replace(FMNIST, n_classes=n_classes), **kwargs)


def save(tmp_path: Path, obj, name: str = "start.pt") -> str:
    path = tmp_path / name
    torch.save(obj, path)
    return str(path)


def refusal(**fields) -> str:
    with pytest.raises(ConfigError) as caught:
        resolved(**fields)
    line = str(caught.value)
    assert "\n" not in line and caught.value.field == "init"
    return line


# ------------------------------------------------------------------------ matching
def test_a_state_dict_file_sets_every_layer(tmp_path):
    start = seeded_model(1).state_dict()
    model = seeded_model(0)
    assert apply_start(model, save(tmp_path, start), "simple-cnn") is None
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, start[name]), name


def test_a_head_of_another_shape_starts_fresh_and_is_named_in_one_notice(tmp_path):
    five_classes = seeded_model(1, n_classes=5).state_dict()
    fresh = seeded_model(0).state_dict()
    model = seeded_model(0)
    notice = apply_start(model, save(tmp_path, five_classes), "simple-cnn")
    assert notice is not None and "\n" not in notice
    assert "classifier" in notice and "encoder" not in notice
    state = model.state_dict()
    for name in ("classifier.weight", "classifier.bias"):  # the run's own fresh draw
        assert torch.equal(state[name], fresh[name])
    for name in ("encoder.conv1.weight", "encoder.fc2.bias", "head.2.weight"):
        assert torch.equal(state[name], five_classes[name])


def test_an_encoder_only_file_sets_the_encoder(tmp_path):
    torch.manual_seed(3)
    encoder = SimpleCNN(1, 28, 28).state_dict()  # the bare encoder's own names
    model = seeded_model(0)
    notice = apply_start(model, save(tmp_path, encoder), "simple-cnn")
    assert "head.0" in notice and "classifier" in notice
    assert torch.equal(model.state_dict()["encoder.conv2.weight"], encoder["conv2.weight"])


def test_a_start_changes_no_other_random_draw(tmp_path):
    """Applying a start draws nothing: torch's generator is where a run without one
    leaves it."""
    path = save(tmp_path, seeded_model(1).state_dict())
    seeded_model(0)
    after_plain = torch.rand(3)
    apply_start(seeded_model(0), path, "simple-cnn")
    assert torch.equal(torch.rand(3), after_plain)


# ---------------------------------------------------------------------- bad input
def test_a_missing_file_is_one_line(tmp_path):
    assert "not found" in refusal(init=str(tmp_path / "absent.pt"))


def test_a_folder_is_one_line(tmp_path):
    assert "not a file" in refusal(init=str(tmp_path))


def test_a_path_the_os_refuses_is_one_line(tmp_path):
    loop = tmp_path / "loop.pt"
    loop.symlink_to(loop)
    refusal(init=str(loop))
    assert "cannot be read" in refusal(init=str(tmp_path / ("x" * 300)))


@pytest.mark.parametrize(
    "content, words",
    [
        (torch.zeros(3), "not a state dict"),
        ([torch.zeros(3)], "not a state dict"),
        ({}, "not a state dict"),
        ({"encoder.conv1.weight": 1.0}, "not a name -> tensor"),
    ],
    ids=["tensor", "list", "empty", "number"],
)
def test_what_is_not_a_state_dict_is_one_line(tmp_path, content, words):
    assert words in refusal(init=save(tmp_path, content))


def test_a_pickle_that_needs_code_is_refused_and_not_run(tmp_path):
    line = refusal(init=save(tmp_path, nn.Linear(2, 2)))  # a whole module, not a state dict
    assert "needs code to load" in line


def test_a_file_that_is_no_torch_file_is_one_line(tmp_path):
    path = tmp_path / "start.pt"
    path.write_bytes(b"not a torch file")
    assert "refused" in refusal(init=str(path))


def test_an_encoder_layer_of_another_shape_is_refused_naming_it(tmp_path):
    torch.manual_seed(0)
    colour = build_model("simple-cnn", dataset_spec("cifar10")).state_dict()
    line = refusal(init=save(tmp_path, colour))  # 3-channel conv1 (and flatten) on fmnist
    assert "encoder.conv1.weight" in line and "(6, 3, 5, 5)" in line


def test_a_tensor_without_a_layer_is_refused_naming_it(tmp_path):
    start = seeded_model(1).state_dict()
    start["encoder.conv9.weight"] = torch.zeros(2)
    assert "encoder.conv9.weight" in refusal(init=save(tmp_path, start))


def test_a_missing_encoder_layer_is_refused_naming_it(tmp_path):
    start = seeded_model(1).state_dict()
    del start["encoder.fc1.weight"]
    assert "encoder.fc1.weight" in refusal(init=save(tmp_path, start))


def test_unknown_shipped_and_torchvision_names_are_one_line():
    assert SHIPPED in refusal(init="fedsweep:nothing")  # lists what is shipped
    assert "model=torchvision:ARCH" in refusal(init="torchvision:DEFAULT")
    line = refusal(model="torchvision:resnet18", init="torchvision:NOPE")
    assert "IMAGENET1K_V1" in line


# ------------------------------------------------------------------ torchvision
def test_named_torchvision_weights_come_from_the_torch_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    import torchvision.models

    cached = torchvision_cache_file("torchvision:IMAGENET1K_V1", "torchvision:resnet18")
    assert cached.parent == tmp_path / "hub" / "checkpoints"
    torch.manual_seed(7)  # a stand-in file with the real file's names and shapes
    imagenet = torchvision.models.get_model("resnet18", weights=None).state_dict()
    cached.parent.mkdir(parents=True)
    torch.save(imagenet, cached)
    config = resolved(model="torchvision:resnet18", init="torchvision:DEFAULT", n_parties=2)
    torch.manual_seed(0)
    model = build_model(config.model, FMNIST)
    notice = apply_start(model, config.init, config.model)
    state = model.state_dict()
    assert torch.equal(state["encoder.layer1.0.conv1.weight"], imagenet["layer1.0.conv1.weight"])
    # 28-pixel images take the CIFAR stem: fedsweep's own first convolution stays fresh
    assert "encoder.conv1" in notice and "classifier" in notice and "\n" not in notice
    assert not torch.equal(state["encoder.conv1.weight"][:, :, :3, :3], imagenet["conv1.weight"])


def test_named_torchvision_weights_offline_and_not_cached_say_where_and_how(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    cached = torchvision_cache_file("torchvision:DEFAULT", "torchvision:mobilenet_v3_small")
    try:
        line = refusal(
            model="torchvision:mobilenet_v3_small", init="torchvision:DEFAULT", n_parties=2
        )
    except pytest.fail.Exception:  # the machine is online: the download filled the cache
        assert cached.is_file()
        return
    assert str(cached) in line and "get_state_dict" in line and "TORCH_HOME" in line
    assert not cached.exists()  # nothing half-written


# -------------------------------------------------------------------- records
def test_the_manifest_records_each_start_file_by_its_hash(tmp_path):
    shipped = SHIPPED_FOLDER / "fmnist-0to4-simple-cnn.pt"
    own = save(tmp_path, seeded_model(1).state_dict())
    configs = [
        {"init": None, "model": "simple-cnn"},
        {"init": "none", "model": "simple-cnn"},
        {"init": SHIPPED, "model": "simple-cnn"},
        {"init": own, "model": "simple-cnn"},
        {"init": own, "model": "simple-cnn"},
    ]
    hashes = start_hashes(configs)
    assert set(hashes) == {SHIPPED, own}
    assert hashes[SHIPPED]["sha256"] == hashlib.sha256(shipped.read_bytes()).hexdigest()
    assert hashes[own] == {
        "file": own,
        "sha256": hashlib.sha256(Path(own).read_bytes()).hexdigest(),
    }


def test_the_pretraining_sweeps_manifest_names_its_start_and_hash():
    """The built-in study's plan: random and pretrained trials; the manifest records the
    one start file they read, with its sha256 (what ``fedsweep_sweep.json`` holds)."""
    from search_spaces import BUDGETS, STUDIES
    from study.manifest_content import manifest_for
    from study.plan import SweepPlan
    from study.resources import Execution, TrialResources

    plan = SweepPlan.build(STUDIES["pretraining"], BUDGETS["smoke"])
    assert {t.config["init"] for t in plan.trials()} == {None, SHIPPED}
    manifest = manifest_for(plan, "x", Execution(TrialResources(1, 0)))
    shipped = SHIPPED_FOLDER / "fmnist-0to4-simple-cnn.pt"
    assert manifest["starts"] == {
        SHIPPED: {"file": str(shipped), "sha256": hashlib.sha256(shipped.read_bytes()).hexdigest()}
    }


def test_a_relative_path_is_made_absolute(tmp_path, monkeypatch):
    save(tmp_path, seeded_model(1).state_dict())
    monkeypatch.chdir(tmp_path)
    assert resolved(init="start.pt").init == os.path.join(str(tmp_path), "start.pt")


# --------------------------------------------------------------- a real run
def test_a_start_changes_early_rounds_on_real_fashion_mnist_and_resume_keeps_its_weights():
    """Same seed, with and without the shipped start (trained on classes 0-4): the
    start's first rounds are clearly better.  A run restored from round 1 continues from
    the saved weights, not from the start again: its round 2 equals the uninterrupted one."""
    data = load_dataset("fmnist")
    base = short_run(
        "fmnist", parties=5, rounds=2, fractions=(0.02, 0.1), seed=0, execution="sequential"
    )
    plain = FederatedRun(resolved(**base), data)
    plain_rows = [plain.run_round() for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = FederatedRun(resolved(**base, init=SHIPPED), data)
    notices = [w for w in caught if issubclass(w.category, StartNotice)]
    assert len(notices) == 1 and "classifier" in str(notices[0].message)
    first = started.run_round()
    saved = started.state_dict()
    second = started.run_round()
    for with_start, without in zip((first, second), plain_rows):
        assert with_start["test_acc"] >= without["test_acc"] + 0.05

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StartNotice)
        restored = FederatedRun(resolved(**base, init=SHIPPED), data)
    restored.load_state_dict(saved)
    again = restored.run_round()
    assert again["test_acc"] == second["test_acc"]
    assert again["test_loss"] == second["test_loss"]
