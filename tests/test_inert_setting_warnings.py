"""Settings that have no effect are warned about once each."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

from federated.algorithms.fedprox import FedProx
from federated.config.inert_settings import inert_settings
from federated.config.run_config import RunConfig
from federated.engine.round_loop import run_rounds
from federated.params import MethodParams, describe
from federated.registry import load_method
from tests.conftest import tiny


@dataclass(frozen=True)
class ProxPluginParams(MethodParams):
    mu: float = field(default=0.3, metadata=describe("a plug-in's own proximal weight"))


class ProxPlugin(FedProx):
    """A plug-in method declaring ``mu``, as FedProx does, with another default."""

    name = "prox_plugin"
    Params = ProxPluginParams


def test_inert_settings_are_warned_once_each():
    flat = RunConfig.from_dict
    lines = inert_settings(flat({"algorithm": "fedavg", "mu": 0.5, "server_momentum": 0.5}))
    assert len(lines) == 2
    assert lines[0].startswith("warning: mu=0.5 has no effect: algorithm=fedavg")
    assert "server_momentum" in lines[1]
    assert inert_settings(flat({"algorithm": "fedprox", "mu": 0.5})) == []
    # from the declarations: a plug-in method that declares mu gets no warning for it,
    # and its own default when mu is left unset
    plugin = "tests.test_inert_setting_warnings:ProxPlugin"
    assert inert_settings(flat({"algorithm": plugin, "mu": 0.5})) == []
    assert RunConfig(algorithm=plugin).resolved().algorithm_params.mu == 0.3
    assert load_method("algorithm", plugin).Params is ProxPluginParams
    assert "tau" in inert_settings(RunConfig(algorithm="fedprox"), given=["tau"])[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        next(run_rounds(tiny(algorithm="fedavg", mu=0.3, rounds=1)))
    assert [str(w.message) for w in caught if "mu=0.3" in str(w.message)]


def test_personal_test_every_is_inert_where_parties_use_the_global_model():
    flat = RunConfig.from_dict
    (line,) = inert_settings(flat({"algorithm": "fedavg", "personal_test_every": 3}))
    assert line == (
        "warning: personal_test_every=3 has no effect: algorithm=fedavg scores the global "
        "model on the test set, once a round (no party has a model of its own)"
    )
    for method, model in (("fedper", "simple-cnn"), ("fedbn", "simple-cnn-bn"), ("solo", "")):
        assert load_method("algorithm", method).evaluates_own_models()
        chosen = {"model": model} if model else {}
        given = {"algorithm": method, "personal_test_every": 3, **chosen}
        assert inert_settings(flat(given)) == []


def test_personal_test_every_defaults_to_the_methods_own_and_unset_is_never_warned():
    """Unset, a run takes its method's default: every 5th round for the personalised
    methods, every round for SOLO (its rows since the MOON reproduction); an unset field
    whose default is the method's is nobody's choice, so nothing is warned (FedAvg's
    personal_test_every, FedBN's batchnorm=local)."""
    flat = RunConfig.from_dict
    for method, model, every in (
        ("fedper", "simple-cnn", 5),
        ("lg-fedavg", "simple-cnn", 5),
        ("fedrep", "simple-cnn", 5),
        ("fedbn", "simple-cnn-bn", 5),
        ("ditto", "simple-cnn", 5),
        ("apfl", "simple-cnn", 5),
        ("solo", "simple-cnn", 1),
        ("fedavg", "simple-cnn", 1),
    ):
        config = flat({"algorithm": method, "model": model}).resolved()
        assert config.personal_test_every == every, method
        assert inert_settings(config) == [], method
    # a written value is kept, whatever the method's default
    written = flat({"algorithm": "fedper", "personal_test_every": 1}).resolved()
    assert written.personal_test_every == 1


def test_fine_tuning_without_per_party_scoring_is_warned_as_inert():
    """Fine-tuning runs only before a party is scored on its own data: with per-party
    scoring off it never runs, and the run says so instead of running silently."""
    config = RunConfig.from_dict(
        {"finetune_epochs": 1, "party_scores_every": 0, "party_test_fraction": 0.2}
    )
    assert inert_settings(config) == [
        "warning: finetune_epochs=1 has no effect: party_scores_every=0: no party is "
        "scored on its own data, so nothing is fine-tuned"
    ]
    scored = RunConfig.from_dict({"finetune_epochs": 1, "party_test_fraction": 0.2})
    assert inert_settings(scored) == []


def test_batchnorm_local_on_a_model_without_batchnorm_is_named_as_inert():
    """simple-cnn has no BatchNorm layer: ``batchnorm=local`` keeps nothing at a party."""
    line = (
        "warning: batchnorm='local' has no effect: model=simple-cnn has no BatchNorm "
        "statistics for parties to keep"
    )
    config = tiny(model="simple-cnn", batchnorm="local").resolved()
    assert line in inert_settings(config, ["batchnorm"])
    with_bn = tiny(model="simple-cnn-bn", batchnorm="local").resolved()
    assert not any("batchnorm" in w for w in inert_settings(with_bn, ["batchnorm"]))


def test_an_execution_alias_and_a_personalised_method_without_own_splits_are_said():
    from federated.config.protocol_notices import protocol_notices

    config = tiny(execution="fast").resolved()
    assert config.execution == "sequential"
    assert protocol_notices(config, {"execution": "fast"}) == [
        "warning: execution='fast' is the former name of execution=sequential: parties "
        "train one at a time"
    ]
    assert protocol_notices(config, {"execution": "sequential"}) == []
    fedper = tiny(algorithm="fedper").resolved()
    (line,) = protocol_notices(fedper, {})
    assert line.startswith(
        "warning: algorithm=fedper evaluates each party with a model of its own, and "
        "party_test_fraction=0 gives no party a test split of its own"
    )
    assert protocol_notices(tiny(algorithm="fedper", party_test_fraction=0.2).resolved(), {}) == []
    assert protocol_notices(tiny(algorithm="fedavg").resolved(), {}) == []


def test_the_sweep_dry_run_says_a_personalised_cell_has_no_own_split_once(tmp_path, capsys):
    from study import sweep as sweep_cli

    argv = ["--vary", "algorithm=fedavg,fedper", "--set", "execution=fast", "--dry-run"]
    assert sweep_cli.main([*argv, "--storage-path", str(tmp_path / "r")]) == 0
    err = capsys.readouterr().err.splitlines()
    for prefix in (
        "warning: algorithm=fedper evaluates each party",
        "warning: execution='fast' is the former name",
    ):
        assert [line.startswith(prefix) for line in err].count(True) == 1, err
    assert not (tmp_path / "r").exists()
