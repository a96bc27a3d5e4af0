"""Plug-in methods (tests/plugin_method.py, outside fedsweep's packages) through the
config and ``python -m federated.run``.  A real Ray Tune sweep runs the plug-in on a
reused trial actor, equal to its run in process, in tests/test_sweep_overhead.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from federated.config.run_config import ConfigError, RunConfig
from federated.engine.round_loop import run_rounds
from federated.run import main
from tests.conftest import TINY_VALUES, tiny
from tests.plugin_method import PartialStep
from tests.test_round_loop import results

PLUGIN = "tests.plugin_method:LabelSmoothing"
SERVER = "tests.plugin_method:PartialStep"


def test_a_plugin_with_neutral_parameters_is_exactly_fedavg(synthetic):
    plugin = results(
        run_rounds(tiny(algorithm=PLUGIN, method_options={"smoothing": 0.0}), synthetic)
    )
    fedavg = results(run_rounds(tiny(algorithm="fedavg"), synthetic))
    smoothed = results(run_rounds(tiny(algorithm=PLUGIN), synthetic))
    assert plugin == fedavg
    assert [r["train_loss"] for r in smoothed] != [r["train_loss"] for r in fedavg]


def test_plugin_parameters_are_typed_defaulted_and_checked():
    config = RunConfig.from_dict(
        {"algorithm": PLUGIN, "server_optimizer": SERVER, "smoothing": "0.2"}
    ).resolved()
    assert config.algorithm_params.smoothing == 0.2
    assert config.to_dict()["step_fraction"] == 0.5  # the default, resolved into the config
    with pytest.raises(ConfigError, match=r"smoothing=1\.0 .*\[0, 1\)"):
        RunConfig.from_dict({"algorithm": PLUGIN, "smoothing": 1.0}).resolved()


@pytest.mark.parametrize(
    ("name", "allowed"),
    [
        ("nosuch.module:Thing", "an importable module"),
        ("tests.plugin_method:Missing", "a subclass of Algorithm in tests.plugin_method"),
        ("tests.plugin_method:PartialStep", "a subclass of Algorithm"),
        ("fedsgd", "or package.module:Class"),
    ],
)
def test_a_bad_plugin_is_refused_in_one_line(name, allowed, capsys):
    assert main(["--algorithm", name, "--dataset", "synthetic"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: invalid config: algorithm='{name}'")
    assert allowed in err


def test_partial_step_moves_the_given_share_of_the_way():
    config = RunConfig(server_optimizer=SERVER, method_options={"step_fraction": 0.25}).resolved()
    current, target = [torch.tensor([1.0, 2.0])], [torch.tensor([3.0, 0.0])]
    PartialStep(config).step(current, target)
    assert current[0].tolist() == [1.5, 1.5]


def test_cli_runs_a_plugin_with_its_own_flags_and_writes_them(tmp_path, synthetic):
    out = tmp_path / "rows.jsonl"
    args = [
        "--algorithm",
        PLUGIN,
        "--smoothing",
        "0.2",
        "--server-optimizer",
        SERVER,
        "--step-fraction",
        "0.5",
        "--out",
        str(out),
        "--quiet",
    ]
    for key, value in TINY_VALUES.items():
        args += ["--" + key.replace("_", "-"), str(value)]
    assert main(args) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["smoothing"] for r in rows] == [0.2, 0.2] and rows[0]["algorithm"] == PLUGIN
    config = tiny(algorithm=PLUGIN, server_optimizer=SERVER, method_options={"smoothing": 0.2})
    assert [r["test_acc"] for r in rows] == [r["test_acc"] for r in run_rounds(config, synthetic)]


def test_help_lists_each_method_parameter():
    proc = subprocess.run(
        [sys.executable, "-m", "federated.run", "--help", "--algorithm", PLUGIN],
        capture_output=True,
        text=True,
        check=True,
    )
    for flag in ("--alpha", "--adaptive-lr", "--smoothing", "feddyn: FedDyn's regularisation"):
        assert flag in proc.stdout, flag
