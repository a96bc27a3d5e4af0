"""Every bad value is rejected before any data loads, with one line naming the field."""

from __future__ import annotations

import pytest

from federated.config import ConfigError, RunConfig, coerce, paper_mu

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
    ("model", "vgg16", "one of simple-cnn, resnet50, cnn-transformer"),
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
    with pytest.raises(ConfigError) as info:
        RunConfig(**{field: value})
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"invalid config: {field}=")
    assert allowed in message
    assert info.value.field == field


def test_more_parties_than_samples_counts_the_data_fraction():
    # the fraction of the data, not the party count, is what makes it impossible here
    with pytest.raises(ConfigError, match=r"data_fraction=0.1 .*at least 0.1167 for n_parties=700"):
        RunConfig(dataset="fmnist", data_fraction=0.1, n_parties=700)
    with pytest.raises(ConfigError, match=r"n_parties=7000 .*at most 6000 for 60000 fmnist"):
        RunConfig(dataset="fmnist", n_parties=7000)
    # IID needs only one sample per party
    assert (
        RunConfig(dataset="fmnist", data_fraction=0.1, n_parties=700, partition="iid").n_parties
        == 700
    )


def test_unknown_field_is_rejected():
    with pytest.raises(ConfigError, match="invalid config: muu=1"):
        RunConfig.from_dict({"muu": 1})


def test_defaults_resolve_to_the_paper_settings():
    moon = RunConfig(algorithm="moon", dataset="cifar10")
    assert (moon.mu, moon.tau, moon.model, moon.out_dim) == (5.0, 0.5, "simple-cnn", 256)
    assert RunConfig(algorithm="fedprox", dataset="cifar100").mu == 0.001
    assert RunConfig(dataset="cifar100").model == "resnet50"
    assert RunConfig(algorithm="moon", tau_schedule="annealed").tau == 1.0
    assert paper_mu("fedavg", "cifar10") == 0.0
    assert RunConfig(algorithm="moon", dataset="cifar10", mu=0.1).mu == 0.1


def test_strings_are_coerced_by_field_type():
    config = RunConfig.from_dict(
        {"rounds": "20", "mu": "0.5", "projection_head": "false", "threads": "none"}
    )
    assert (config.rounds, config.mu, config.projection_head, config.threads) == (
        20,
        0.5,
        False,
        None,
    )
    assert coerce("beta", 1) == 1.0
    with pytest.raises(ConfigError, match="rounds='x'"):
        coerce("rounds", "x")


def test_replace_validates_again():
    config = RunConfig()
    assert config.replace(rounds=3).rounds == 3
    with pytest.raises(ConfigError, match="beta=0"):
        config.replace(beta=0)
