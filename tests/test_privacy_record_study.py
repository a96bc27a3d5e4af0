"""examples/privacy_record_level.toml, the cross-silo record-level study of
docs/results/privacy.md: it plans what the page states (five party folders, natural
partition, record-level DP-SGD at sigma = 1, C = 1, PLD, delta = 1e-5, beside the same
runs without DP, seeds 0-2), and the worst party's epsilon the page states is the
accountant's for the exported tree's party sizes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from federated.config.privacy_fields import run_accountant
from federated.config.run_config import RunConfig
from federated.export_tree import export_parties
from federated.heterogeneity.partition import partition_for_run
from federated.privacy_accountant import record_epsilon, sampling_rate
from search_spaces import BUDGETS
from search_spaces.study_file import load_study_file
from study.plan import SweepPlan

STUDY = Path(__file__).resolve().parent.parent / "examples" / "privacy_record_level.toml"
#: the export the study file names: 5 parties, 30% of the training set, Dirichlet(5)
EXPORT = dict(n_parties=5, data_fraction=0.3, beta=5.0)
#: the worst party's epsilon after round 20 that docs/results/privacy.md states
PAGE_EPSILON = 3.94


def test_the_study_plans_record_level_dp_beside_the_same_runs_without(fmnist, tmp_path):
    tree = tmp_path / "tree"
    export_parties(fmnist, tree, n_parties=5, data_fraction=0.01, n_test=100)
    plan = SweepPlan.build(load_study_file(STUDY), BUDGETS["as-written"], dataset=f"folder:{tree}")
    trials = plan.trials()
    assert len(trials) == 6 and sorted({t.seed for t in trials}) == [0, 1, 2]
    by_seed: dict[int, dict[str, RunConfig]] = {}
    for trial in trials:
        config = trial.run_config
        assert (config.partition, config.n_parties, config.algorithm) == ("natural", 5, "fedavg")
        by_seed.setdefault(trial.seed, {})[config.dp_level] = config
    for cells in by_seed.values():
        record, plain = cells["record"], cells["party"]
        assert (record.dp_noise_multiplier, record.dp_clip_norm, record.dp_delta) == (
            1.0,
            1.0,
            1e-5,
        )
        assert run_accountant(record) == "pld"
        assert plain.dp_noise_multiplier == 0.0 and plain.dp_clip_norm is None
        differing = {k for k, v in record.to_dict().items() if plain.to_dict().get(k) != v}
        assert differing == {"dp_level", "dp_noise_multiplier", "dp_clip_norm", "dp_delta"}


def test_the_worst_partys_epsilon_is_the_one_the_page_states(fmnist):
    config = RunConfig(dataset="fmnist", partition="dirichlet", seed=0, **EXPORT)
    sizes = [len(p) for p in partition_for_run(fmnist.train_y.numpy(), config)]
    assert sizes == [3109, 3319, 3813, 3537, 4222]  # the export's "images per party"
    study = load_study_file(STUDY)
    rounds, batch = study.fixed["rounds"], study.fixed["batch_size"]
    epsilons = [
        record_epsilon(rounds * (n // batch), sampling_rate(batch, n), 1.0, 1e-5, "pld")
        for n in sizes
    ]
    assert int(np.argmax(epsilons)) == 0  # the smallest party: the largest q
    assert round(max(epsilons), 2) == PAGE_EPSILON < 10
