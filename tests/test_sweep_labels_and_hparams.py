"""One real, quiet Optuna sweep (six trials of FedProx's mu and lr under ASHA, some
diverging; the session's, tests/conftest_analysis.py, which tests/test_study_file_sweep.py
and tests/test_sweep_ray.py read too), read back as a user would:

* ``--quiet`` lets no library line through: not Optuna's "A new study created in RDB";
* its points are labelled at 4 significant digits in the summary and the trial folder
  names, while params.json and Optuna keep the full values;
* TensorBoard's HPARAMS data, read from the event files with TensorBoard's own reader:
  the varied fields (``mu``, ``lr``) and ``seed`` as numbers, and the final validation
  and test metrics (the task's declared summary columns) as the metric list, whose
  scalars hold the trial's last values.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from federated.contract.columns import summary_column_names
from federated.tasks.classification.spec import SPEC as CLASSIFICATION_TASK
from search_spaces.study import point_label
from tests.conftest_analysis import OPTUNA_SEARCH_TRIALS

pytestmark = pytest.mark.slow


def hparams_of(trial_dir: Path) -> tuple[dict, list[str], dict[str, float]]:
    """(hyperparameters, metric names, each scalar's last value) of a trial's events,
    read with TensorBoard's event reader and its HPARAMS plugin's own parsers."""
    from google.protobuf.json_format import MessageToDict
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import metadata

    events = EventAccumulator(str(trial_dir))
    events.Reload()
    content = events.PluginTagToContent(metadata.PLUGIN_NAME)
    start = metadata.parse_session_start_info_plugin_data(content[metadata.SESSION_START_INFO_TAG])
    experiment = metadata.parse_experiment_plugin_data(content[metadata.EXPERIMENT_TAG])
    # a number is a protobuf number_value: MessageToDict gives it back as a float
    values = {name: MessageToDict(value) for name, value in start.hparams.items()}
    metrics = [info.name.tag for info in experiment.metric_infos]
    # a diverged trial's NaN values are not in the events (TensorBoard gets finite ones)
    last = {tag: events.Scalars(tag)[-1].value for tag in events.Tags()["scalars"]}
    return values, metrics, last


def test_a_quiet_optuna_sweep_labels_points_briefly_and_tables_typed_hparams(optuna_search):
    # the session's Optuna search (tests/conftest_analysis.py): 6 trials of mu and lr
    proc = optuna_search
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "A new study created" not in output and "[I " not in output, output
    # nor numpy's warning from ASHA's cutoff over diverged trials alone (study/tune/tuners.py)
    assert "Warning" not in output, output

    sweep_dir = optuna_search.sweep_dir
    assert sweep_dir.name == "labelled"
    trials = sorted(p for p in sweep_dir.iterdir() if (p / "params.json").is_file())
    assert len(trials) == OPTUNA_SEARCH_TRIALS
    manifest = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert manifest["label_digits"] == 4
    for trial in trials:
        params = json.loads((trial / "params.json").read_text())
        mu, lr = params["mu"], params["lr"]
        label = point_label({"mu": mu, "lr": lr})
        assert params["point"] == label
        assert label == f"mu={mu:.4g}, lr={lr:.4g}"  # e.g. mu=0.02055, lr=0.1342
        assert len(repr(mu)) > len(f"{mu:.4g}")  # the file keeps the full value
        assert trial.name.endswith(f"_mu={mu:.4g}_lr={lr:.4g}_seed0")
        # the search's summary (the rerun of the chosen point prints its own after it)
        search_summary = proc.stdout.split("re-running the configuration")[0]
        summary = [line for line in search_summary.splitlines() if f" {label} " in line]
        assert len(summary) == 1, proc.stdout
        assert any(f" {o} " in summary[0] for o in ("completed", "stopped", "diverged"))

        values, metrics, last = hparams_of(trial)
        assert values == {"mu": mu, "lr": lr, "seed": 0}
        assert all(isinstance(v, float) for v in values.values())  # numbers, not text
        if manifest["trials"][trial.name]["outcome"] != "diverged":
            # a diverged trial's last row holds NaN scores: not in its HPARAMS metrics
            scores = {"ray/tune/val_acc", "ray/tune/test_acc", "ray/tune/test_loss"}
            assert scores <= set(metrics)
        # the metrics are the summary columns the task declares (the results contract)
        declared = {"ray/tune/" + c for c in summary_column_names(CLASSIFICATION_TASK)}
        assert set(metrics) <= declared, set(metrics) - declared
        assert "ray/tune/val_parties" not in metrics  # a count of parties, not a score
        # each metric's last scalar is its last finite value in the rows (a diverged
        # trial's NaN round is not drawn)
        rows = [json.loads(x) for x in (trial / "result.json").read_text().splitlines()]
        for key in ("test_acc", "val_acc"):
            finite = [r[key] for r in rows if math.isfinite(r[key])]
            if finite:
                assert last[f"ray/tune/{key}"] == pytest.approx(finite[-1], abs=1e-6)
            else:
                assert f"ray/tune/{key}" not in last
