"""Every bad value is rejected before any data loads, with one line naming the field; a
config is a value, resolved in one explicit step; each method parameter is declared once,
by its method's Params, and that declaration is what a run takes."""

from __future__ import annotations

import dataclasses

import pytest

from federated.algorithms.fedprox import FedProxParams
from federated.algorithms.moon import MoonParams
from federated.config.data_checks import with_data_checked
from federated.config.run_config import ConfigError, RunConfig, coerce, flat_names
from federated.engine.round_loop import run_rounds
from tests.conftest import tiny

# a method parameter is checked with a method that declares it
DECLARER = {
    "mu": "moon",
    "tau": "moon",
    "prev_models": "moon",
    "tau_schedule": "moon",
    "tau_min": "moon",
    "server_momentum": "fedavgm",
    "server_lr": "fedavgm",
}

BAD_VALUES = [
    ("mu", -1.0, "a number >= 0"),
    ("beta", 0.0, "a number > 0"),
    ("beta", -0.5, "a number > 0"),
    ("sample_fraction", 0.0, "(0, 1]"),
    ("sample_fraction", 1.5, "(0, 1]"),
    ("tau", 0.0, "a number > 0"),
    ("tau", -1.0, "a number > 0"),
    ("algorithm", "fedsgd", "one of fedavg, fedprox, moon"),
    ("dataset", "imagenet", "one of cifar10, cifar100, tinyimagenet, fmnist, mnist"),
    ("model", "vgg16", "one of simple-cnn, simple-cnn-bn, resnet50, cnn-transformer"),
    ("out_dim", 0, "an integer >= 1"),
    ("rounds", 0, "an integer >= 1"),
    ("local_epochs", 0, "an integer >= 1"),
    ("n_parties", 0, "an integer >= 1"),
    ("n_parties", 7000, "at most 6000"),
    ("partition", "pathological", "one of dirichlet, iid, labels, quantity"),
    ("labels_per_party", 11, "[1, 10]"),
    ("lr", 0.0, "a number > 0"),
    ("momentum", 1.0, "[0, 1)"),
    ("weight_decay", -1e-5, "a number >= 0"),
    ("batch_size", 0, "an integer >= 1"),
    ("prev_models", 0, "an integer >= 1"),
    ("server_optimizer", "adam", "one of avg, fedavgm"),
    ("server_momentum", 1.0, "[0, 1)"),
    ("server_lr", -1.0, "a number > 0"),
    ("tau_schedule", "cosine", "one of fixed, annealed"),
    ("tau_min", 0.0, "a number > 0"),
    ("data_fraction", 0.0, "(0, 1]"),
    ("test_fraction", 2.0, "(0, 1]"),
    ("device", "tpu", "auto, cpu, cuda or cuda:N"),
    ("threads", 0, "an integer >= 1"),
    ("seed", -1, "an integer >= 0"),
    ("rounds", 2.5, "a value of type int"),
    ("mu", float("nan"), "a finite number"),
    ("projection_head", "yes", "a value of type bool"),
]


@pytest.mark.parametrize(("field", "value", "allowed"), BAD_VALUES)
def test_bad_value_is_rejected_naming_the_field(field, value, allowed):
    values = {field: value}
    if field in DECLARER:
        kind = "server_optimizer" if DECLARER[field] == "fedavgm" else "algorithm"
        values[kind] = DECLARER[field]
    if field == "labels_per_party":
        values["partition"] = "labels"  # checked only where it acts
    config = RunConfig.from_dict(values) if field in DECLARER else RunConfig(**values)
    with pytest.raises(ConfigError) as info:
        config.resolved()
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"invalid config: {field}=")
    assert allowed in message
    assert info.value.field == field


def test_more_parties_than_samples_counts_the_data_fraction():
    # the fraction of the data, not the party count, is what makes it impossible here
    with pytest.raises(ConfigError, match=r"data_fraction=0.1 .*at least 0.1167 for n_parties=700"):
        RunConfig(dataset="fmnist", data_fraction=0.1, n_parties=700).resolved()
    with pytest.raises(ConfigError, match=r"n_parties=7000 .*at most 6000 for 60000 fmnist"):
        RunConfig(dataset="fmnist", n_parties=7000).resolved()
    # IID needs only one sample per party
    iid = RunConfig(dataset="fmnist", data_fraction=0.1, n_parties=700, partition="iid")
    assert iid.resolved().n_parties == 700


def test_unknown_field_is_rejected():
    with pytest.raises(ConfigError, match="invalid config: muu=1"):
        RunConfig.from_dict({"muu": 1}).resolved()


def resolved(**values) -> RunConfig:
    return RunConfig.from_dict(values).resolved()


def test_defaults_resolve_to_the_paper_settings():
    moon = resolved(algorithm="moon", dataset="cifar10")
    assert (moon.algorithm_params.mu, moon.algorithm_params.tau) == (5.0, 0.5)
    assert (moon.model, moon.out_dim, moon.n_parties) == ("simple-cnn", 256, 10)
    assert resolved(algorithm="fedprox", dataset="cifar100").algorithm_params.mu == 0.001
    assert resolved(dataset="cifar100").model == "resnet50"
    assert resolved(algorithm="moon", tau_schedule="annealed").algorithm_params.tau == 1.0
    assert resolved(algorithm="moon", dataset="cifar10", mu=0.1).algorithm_params.mu == 0.1


def test_a_row_holds_the_parameters_of_its_chosen_methods_only():
    # FedAvg declares no mu: its rows have no mu column (MOON's and FedProx's do)
    assert "mu" not in resolved(algorithm="fedavg").to_dict()
    assert resolved(algorithm="fedprox").to_dict()["mu"] == 0.01
    fedavgm = resolved(algorithm="moon", server_optimizer="fedavgm").to_dict()
    assert (fedavgm["mu"], fedavgm["tau"], fedavgm["server_lr"]) == (1.0, 0.5, 1.0)
    # a parameter no chosen method declares is kept as written (inert; warned about)
    inert = resolved(algorithm="fedavg", mu=0.5)
    assert inert.method_options == {"mu": 0.5} and inert.to_dict()["mu"] == 0.5


def test_the_flat_names_table_is_every_field_and_every_declared_parameter():
    table = flat_names()
    assert table["rounds"] == ("run",)
    assert set(table["mu"]) == {"algorithm fedprox", "algorithm moon", "algorithm l2rep"}
    assert table["server_lr"] == ("server_optimizer fedavgm",)
    assert table["alpha"] == ("algorithm feddyn",)
    # no run-level field repeats a method's parameter: each has one declaration
    assert not any(len(owners) > 1 and "run" in owners for owners in table.values())


def test_constructing_a_config_does_no_io_and_changes_nothing():
    # a folder that does not exist, a model that does not import, an impossible count:
    # constructing is taking the values; resolving is what checks them
    config = RunConfig(dataset="folder:/no/such/folder", model="no.such:model", n_parties=0)
    assert (config.dataset, config.model, config.n_parties) == (
        "folder:/no/such/folder",
        "no.such:model",
        0,
    )
    # resolving checks the values (the count first; the folder is the data step's)
    with pytest.raises(ConfigError, match="invalid config: n_parties=0"):
        config.resolved()
    pending = dataclasses.replace(config, n_parties=2).resolved()
    assert not pending.is_resolved and pending.model == "no.such:model"
    with pytest.raises(ConfigError, match="invalid config: dataset="):
        with_data_checked(pending)
    plain = RunConfig.from_dict({"algorithm": "moon", "execution": "fast", "mu": "2"})
    assert (plain.model, plain.n_parties, plain.algorithm_params) == (None, None, None)
    assert plain.method_options == {"mu": 2.0} and not plain.is_resolved


def test_resolving_returns_a_new_complete_value_once():
    plain = RunConfig.from_dict({"algorithm": "moon", "execution": "fast"})
    done = plain.resolved()
    assert done is not plain and plain.execution == "fast" and plain.model is None
    assert (done.execution, done.model, done.n_parties) == ("sequential", "simple-cnn", 10)
    assert isinstance(done.algorithm_params, MoonParams) and done.method_options == {}
    assert done.resolved() is done
    # its flat form builds the same config again (sweeps and checkpoints store it)
    assert RunConfig.from_dict(done.to_dict()).resolved() == done


def patched_default(monkeypatch, params: type, name: str, value) -> None:
    """Change the default a Params class declares for ``name`` (its one declaration)."""
    monkeypatch.setattr(params.__dataclass_fields__[name], "default", value)


def test_a_params_default_is_what_a_config_takes(monkeypatch):
    assert resolved(algorithm="moon", tau_schedule="annealed").algorithm_params.tau_min == 0.001
    patched_default(monkeypatch, MoonParams, "tau_min", 0.25)
    patched_default(monkeypatch, MoonParams, "tau", 0.7)
    moon = resolved(algorithm="moon", tau_schedule="annealed")
    assert (moon.algorithm_params.tau_min, moon.to_dict()["tau_min"]) == (0.25, 0.25)
    assert resolved(algorithm="moon").algorithm_params.tau == 0.7


def test_a_params_default_is_what_a_run_takes(monkeypatch):
    """FedProx's declared mu (no paper value on the synthetic data) changes the run."""

    def first_round():
        config = tiny(algorithm="fedprox", rounds=1, execution="sequential")
        return config.algorithm_params.mu, next(run_rounds(config))

    mu, before = first_round()
    patched_default(monkeypatch, FedProxParams, "mu", 5.0)
    patched_mu, after = first_round()
    assert (mu, patched_mu) == (0.01, 5.0)
    assert after["prox_loss"] != before["prox_loss"]
    assert after["test_loss"] != before["test_loss"]


def test_strings_are_coerced_by_field_type():
    config = RunConfig.from_dict(
        {"rounds": "20", "mu": "0.5", "projection_head": "false", "threads": "none"}
    )
    assert (config.rounds, config.method_options["mu"], config.projection_head) == (
        20,
        0.5,
        False,
    )
    assert config.threads is None
    assert coerce("beta", 1) == 1.0
    with pytest.raises(ConfigError, match="rounds='x'"):
        coerce("rounds", "x")


def test_replace_validates_again():
    config = RunConfig().resolved()
    assert config.replace(rounds=3).rounds == 3
    with pytest.raises(ConfigError, match="beta=0"):
        config.replace(beta=0)
    moon = resolved(algorithm="moon", mu=2.0)
    assert moon.replace(rounds=3).algorithm_params.mu == 2.0
    # swapping the method drops the parameters of the one swapped out
    assert "mu" not in moon.replace(algorithm="fedavg").to_dict()
