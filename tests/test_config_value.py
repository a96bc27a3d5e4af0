"""A config is a value: resolving it reads no file and builds no model; what needs the data
or the model is checked once, after loading (federated/config/data_checks.py), before any
training and with nothing written; its fields are grouped behind their flat names."""

from __future__ import annotations

import builtins
import io

import pytest
import torch

import federated.config.data_checks as data_checks
import federated.data.loading as loading
from federated.config.data_checks import checked_against, with_data_checked
from federated.config.run_config import FIELD_GROUPS, RunConfig, field_types
from federated.engine.round_loop import FederatedRun
from federated.params import ConfigError
from federated.run import main as run_main
from tests.conftest import tiny
from tests.test_image_folder_errors import grey_tree


def _refuse(*_args, **_kwargs):
    raise AssertionError("resolving a config read a file or built a model")


@pytest.fixture
def no_io(monkeypatch):
    """Every way resolution could read a file or build a model raises."""
    for target, name in (
        (builtins, "open"),
        (io, "open"),
        (torch, "load"),
        (data_checks, "build_model"),
        (data_checks, "check_model"),
        (data_checks, "load_run_data"),
        (loading, "load_dataset"),
    ):
        monkeypatch.setattr(target, name, _refuse)


def test_resolving_reads_no_file_and_builds_no_model(no_io):
    # a folder that is not there, a layer rule naming no layer, a model factory that does
    # not import: all are the data step's to judge, none is read or built here
    pending = RunConfig.from_dict(
        dict(
            dataset="folder:/no/such/fedsweep-folder",
            partition="natural",
            algorithm="fedper",
            personal_layers="clasifier",
            model="no.such:factory",
            rounds=2,
        )
    ).resolved()
    assert not pending.is_resolved
    assert (pending.n_parties, pending.task, pending.algorithm_params) == (None, None, None)
    assert pending.method_options == {"personal_layers": "clasifier"}
    # a built-in data set's spec is a table: complete at once, its model not yet built
    done = RunConfig(algorithm="fedbn", rounds=2).resolved()
    assert done.is_resolved and (done.model, done.n_parties, done.task) == (
        "simple-cnn",
        10,
        "classification",
    )
    # values are still refused at once, naming the field and what is allowed
    with pytest.raises(ConfigError, match=r"invalid config: lr=0.0 \(allowed: a number > 0\)"):
        RunConfig(dataset="folder:/no/such/fedsweep-folder", lr=0.0).resolved()


def test_the_model_checks_run_in_the_data_step():
    config = tiny(algorithm="fedbn")  # resolved: simple-cnn has no BatchNorm layer
    with pytest.raises(ConfigError) as caught:
        with_data_checked(config)
    assert caught.value.field == "model" and "BatchNorm" in caught.value.allowed
    with pytest.raises(ConfigError) as caught:
        with_data_checked(tiny(algorithm="fedper", personal_layers="clasifier"))
    assert caught.value.field == "personal_layers" and "'clasifier' names none" in str(caught.value)
    # an inert value is still one its declarers allow: the same typo under FedAvg
    with pytest.raises(ConfigError, match="personal_layers='clasifier'"):
        with_data_checked(tiny(personal_layers="clasifier"))


def test_a_folder_is_loaded_once_and_completes_its_config(fmnist, tmp_path, monkeypatch):
    root = tmp_path / "images"
    grey_tree(fmnist, root, parties=3)
    loads = []
    real = data_checks.load_run_data
    monkeypatch.setattr(data_checks, "load_run_data", lambda c: loads.append(c) or real(c))
    given = RunConfig(
        dataset=f"folder:{root}",
        partition="natural",
        data_root=str(tmp_path / "d"),
        rounds=1,
        local_epochs=1,
        device="cpu",
        threads=1,
    )
    checked = with_data_checked(given)
    assert len(loads) == 1
    assert checked.is_resolved and (checked.n_parties, checked.model, checked.task) == (
        3,
        "simple-cnn",
        "classification",
    )
    # the complete value's flat form resolves to itself, without the data (a trial's dict)
    again = RunConfig.from_dict(checked.to_dict()).resolved()
    assert not again.is_resolved and again.n_parties == 3
    data = real(checked)
    assert checked_against(again, data.spec) == checked
    # a run given its data checks its config against them and loads nothing
    run = FederatedRun(again, data)
    assert run.config == checked and len(loads) == 1


def test_a_count_the_folder_refuses_is_named_after_loading_and_nothing_is_written(
    fmnist, tmp_path, monkeypatch, capsys
):
    root = tmp_path / "images"
    grey_tree(fmnist, root, parties=3)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rows.csv"
    argv = [
        "--dataset", f"folder:{root}", "--partition", "natural", "--n-parties", "4",
        "--data-root", str(tmp_path / "d"), "--rounds", "1", "--out", str(out),
    ]  # fmt: skip
    assert run_main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        "error: invalid config: n_parties=4 (allowed: 3 (the folder's parties) or unset, "
        "under natural)\n"
    )
    assert not out.exists()


def test_the_fields_are_grouped_behind_their_flat_names():
    grouped = [name for names in FIELD_GROUPS.values() for name in names]
    assert sorted(grouped) == sorted(field_types())  # every field in exactly one group
    assert len(grouped) == len(set(grouped)) == 59
    config = tiny(dp_clip_norm=1.0)
    privacy = config.group("privacy")
    assert privacy.dp_clip_norm == 1.0 == privacy["dp_clip_norm"]
    assert dict(config.group("data")) == {f: getattr(config, f) for f in FIELD_GROUPS["data"]}
    with pytest.raises(AttributeError):
        privacy.dp_clip_norm = 2.0  # a view: the config is changed only by replace
    with pytest.raises(KeyError, match="no field group 'dp'"):
        config.group("dp")
    # the flat form, which checkpoints, manifests and resume digests hold, is unchanged
    assert list(config.to_dict())[: len(field_types())] == list(field_types())
