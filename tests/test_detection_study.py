"""The built-in ``street`` study: it plans on a Street-like tree the builder writes (a small
one here), keeps every camera's images at the laptop budget, and its pretrained start is
shipped and fits the default detector."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from federated.models import build_model
from federated.models.pretrained_start import check_start, shipped_starts
from search_spaces import BUDGETS, STUDIES
from study.plan import SweepPlan

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def small_tree(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("street") / "tree"
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "build_street_task.py"),
            str(out),
            "--size", "32",
            "--cameras", "10",
            "--unseen-cameras", "1",
            "--train-images", "120",
            "--test-images", "10",
        ],
        check=True,
        capture_output=True,
    )
    return out


def test_the_street_study_plans_the_papers_axes_at_the_laptop_budget(small_tree):
    study = STUDIES["street"]
    plan = SweepPlan.build(study, BUDGETS["laptop"], overrides={"dataset": f"folder:{small_tree}"})
    trials = plan.trials()
    assert plan.n_trials == 2 * 3 * 2 * 3  # parties x local work x start, 3 seeds
    configs = [t.config for t in trials]
    assert {c["partition_by"] for c in configs} == {"device1_id", "device2_id"}
    assert {(c["local_epochs"], c["batch_size"]) for c in configs} == {(1, 8), (5, 8), (1, 2)}
    assert {c["init"] for c in configs} == {None, "fedsweep:street-fcos-tiny"}
    for c in configs:  # a tenth of the rounds; every camera's images, the whole test set
        assert c["rounds"] == 10 and c["data_fraction"] == 1.0 and c["test_fraction"] == 1.0
        assert c["algorithm"] == "fedavg" and c["partition"] == "natural"


def test_the_pretrained_start_is_shipped_and_fits_the_default_detector(small_tree):
    from federated.data import load_dataset

    assert "street-fcos-tiny" in shipped_starts()
    spec = load_dataset(f"folder:{small_tree}").spec
    assert spec.default_model == "fcos-tiny"
    check_start(build_model("fcos-tiny", spec), "fedsweep:street-fcos-tiny", "fcos-tiny")


def test_the_plans_partitions_read_each_trials_camera_field(small_tree):
    """Street-5 and Street-20 are two image fields of one folder: the plan's check draws
    each trial's parties from its own field (5 groups, 10 cameras here)."""
    from study.preflight import partitions, trial_configs

    plan = SweepPlan.build(
        STUDIES["street"], BUDGETS["smoke"], overrides={"dataset": f"folder:{small_tree}"}
    )
    rows = partitions(plan, trial_configs(plan))
    parties = {r["partition_by"]: len(r["party_names"]) for r in rows}
    assert parties == {"device1_id": 5, "device2_id": 10}
