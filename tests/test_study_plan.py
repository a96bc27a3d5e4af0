"""Studies, budgets and sweep plans, resolved before Ray starts (no Ray needed)."""

from __future__ import annotations

import re

import pytest

from federated.config.run_config import ConfigError
from search_spaces import BUDGETS, STUDIES, trial_fields
from study.plan import SweepPlan
from study.resources import TrialResources, choose_resources
from study.sweep import main


def test_the_paper_grids_are_the_papers():
    """The values the paper's tables vary, as the paper gives them (every study's whole
    plan is held by tests/test_study_files.py's snapshot)."""
    assert STUDIES["moon_mu"].axis("mu").values == (0.0, 0.1, 1.0, 5.0, 10.0)
    assert STUDIES["fedprox_mu"].axis("mu").values == (0.001, 0.01, 0.1, 1.0)
    assert STUDIES["heterogeneity"].axis("beta").values == (0.1, 0.5, 5.0)
    assert STUDIES["negatives"].axis("prev_models").values == (1, 2, 5, 100)
    assert all(s.seeds == 3 for s in STUDIES.values())


def test_dry_run_lists_grid_times_seeds_trials(capsys):
    assert main(["moon_mu", "--dry-run", "--budget", "paper"]) == 0
    out = capsys.readouterr().out
    assert "15 trials (5 grid points x 3 seeds)" in out
    assert len(re.findall(r"^\s+\d+\. ", out, flags=re.M)) == 15
    assert "each trial: 1 CPU (1 torch thread)" in out


def test_budgets_scale_rounds_and_data_but_never_the_varied_field():
    study = STUDIES["local_epochs"]
    point = {"local_epochs": 40, "algorithm": "moon"}
    paper = trial_fields(study, point, budget=BUDGETS["paper"], dataset="fmnist", seed=0)
    laptop = trial_fields(study, point, budget=BUDGETS["laptop"], dataset="fmnist", seed=0)
    assert (paper["rounds"], paper["local_epochs"], paper["data_fraction"]) == (100, 40, 1.0)
    assert (laptop["rounds"], laptop["local_epochs"], laptop["data_fraction"]) == (10, 40, 0.2)
    moon = trial_fields(
        STUDIES["moon_mu"], {"mu": 5.0}, budget=BUDGETS["laptop"], dataset="fmnist", seed=2
    )
    assert (moon["local_epochs"], moon["mu"], moon["seed"], moon["algorithm"]) == (
        2,
        5.0,
        2,
        "moon",
    )
    tiny = trial_fields(
        STUDIES["comparison"],
        {"algorithm": "moon"},
        budget=BUDGETS["paper"],
        dataset="tinyimagenet",
        seed=0,
    )
    assert (tiny["rounds"], tiny["model"], tiny["mu"]) == (20, "resnet50", 1.0)


def test_joint_axes_set_several_fields_and_scale_their_rounds():
    study = STUDIES["parties"]
    point = {"setting": "N=100, 20% per round", "method": "MOON (mu=10)"}
    paper = trial_fields(study, point, budget=BUDGETS["paper"], dataset="fmnist", seed=0)
    assert (paper["n_parties"], paper["sample_fraction"], paper["rounds"]) == (100, 0.2, 500)
    assert (paper["algorithm"], paper["mu"]) == ("moon", 10.0)
    laptop = trial_fields(study, point, budget=BUDGETS["laptop"], dataset="fmnist", seed=0)
    assert laptop["rounds"] == 50


def test_grid_param_space_resolves_every_field_per_point():
    plan = SweepPlan.build(STUDIES["parties"], BUDGETS["smoke"], seeds="2")
    space = plan.param_space()
    labels = space["point"]["grid_search"]
    assert len(labels) == 18 and space["seed"]["grid_search"] == [0, 1]
    lookup = space["n_parties"].func
    assert lookup({"point": "setting=N=50, method=FedAvg"}) == 50
    assert space["algorithm"].func({"point": "setting=N=10, method=SOLO"}) == "solo"
    assert space["dataset"] == "fmnist"  # constants stay constants


def test_a_plain_axis_set_to_one_value_is_fixed_and_a_joint_field_is_rejected():
    fixed = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides={"mu": 1.0})
    assert [t.config["mu"] for t in fixed.trials()] == [1.0]
    with pytest.raises(ConfigError, match=r"n_parties=10 .*parties varies it"):
        SweepPlan.build(STUDIES["parties"], BUDGETS["smoke"], overrides={"n_parties": 10})


def test_a_bad_override_value_is_rejected():
    with pytest.raises(ConfigError, match="n_parties=100000"):
        SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides={"n_parties": 100_000})
    with pytest.raises(ConfigError, match="seeds='0,0'"):
        SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], seeds="0,0")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["moonmu"], "error: study='moonmu' (allowed: comparison, moon_mu"),
        (
            ["moon_mu", "--budget", "huge"],
            "error: --budget='huge' (allowed: paper, laptop, smoke, as-written)",
        ),
        (["moon_mu", "--search", "random"], "error: --search='random' (allowed: grid, optuna)"),
        (
            ["moon_mu", "--set", "rounds=x"],
            "error: --set rounds=x: rounds='x' (allowed: an integer)",
        ),
        (["moon_mu", "--set", "rounds"], "error: --set 'rounds': expected FIELD=VALUE"),
        (
            ["moon_mu", "--metric", "test_acc"],
            "error: --metric='test_acc' (allowed: a validation metric, val_<metric> of the "
            "trials' task or val_loss)",
        ),
        (
            ["moon_mu", "--search", "optuna", "--set", "val_fraction=0"],
            "error: --search optuna selects on validation, and val_fraction=0 holds none out",
        ),
        (
            ["moon_mu", "--rerun-best", "2", "--set", "val_fraction=0"],
            "error: --rerun-best selects on validation, and val_fraction=0 holds none out",
        ),
    ],
)
def test_cli_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(message) and "\n" not in err


def test_optuna_dry_run_shows_the_ranges(capsys):
    assert main(["moon_mu", "--search", "optuna", "--num-samples", "12", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "optuna search: 12 trials" in out and "mu: loguniform[0.01, 10]" in out


def test_gpu_request_without_gpus_falls_back_to_cpu():
    resources, warning = choose_resources(1.0, 0.25, cluster_gpus=0.0)
    assert resources == TrialResources(1.0, 0.0)
    assert warning is not None and "no GPU" in warning and "\n" not in warning
    kept, none = choose_resources(2.0, 0.25, cluster_gpus=1.0)
    assert kept == TrialResources(2.0, 0.25) and none is None
    assert kept.threads == 2 and TrialResources(0.5, 0).threads == 1


def test_list_names_every_study_and_its_table(capsys):
    assert main(["--list"]) == 0
    out = capsys.readouterr().out
    for name, study in STUDIES.items():
        assert re.search(rf"^{name}\s+{re.escape(study.paper)}", out, flags=re.M), name
