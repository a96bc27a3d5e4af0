"""The console's end-of-sweep table, the live view and TensorBoard's HPARAMS metrics name
a trial's metric from the results contract (its task's declaration and the declared
column families, federated/contract/columns.py), never from a guess: a detection config
recorded without ``primary_metric`` is reported by mAP@0.5, a personalised trial by its
own-split mean, and HPARAMS tables the declared summary columns."""

from __future__ import annotations

import math
from types import SimpleNamespace

from federated.contract.columns import OWN_TEST_MEAN, TEST_VALUE, summary_column_names
from federated.tasks.classification.spec import SPEC as CLASSIFICATION_TASK
from study.selection import primary_stem
from study.summary_table import format_summary, summary_rows
from study.tune.tracking_callbacks import SCALAR_PREFIX, hparam_metrics


def result(path: str, config: dict, metrics: dict) -> SimpleNamespace:
    return SimpleNamespace(path=path, config=config, metrics=metrics, error=None)


def test_a_detection_config_without_a_primary_metric_is_reported_by_map50():
    # before: ``config.get("primary_metric") or "acc"`` named test_acc, which a detector
    # never records: every row read "-"
    config = {"task": "detection", "rounds": 8, "point": "lr=0.02", "seed": 0}
    assert primary_stem(config) == "map50"
    assert primary_stem({"primary_metric": "srcc", "task": "score"}) == "srcc"
    assert primary_stem({}) == "acc"  # a config recorded before tasks: classification
    rows = summary_rows([result("/s/abc_0", config, {"round": 8, "test_map50": 0.1875})])
    assert rows[0]["reported"] == "test_map50" and rows[0]["reported_value"] == 0.1875
    assert format_summary(rows).splitlines()[1].endswith("  0.1875")


def test_a_personalised_trial_ends_on_its_own_split_mean_beside_the_pooled_value():
    config = {"task": "classification", "primary_metric": "acc", "rounds": 10, "seed": 1}
    rows = summary_rows(
        [
            result(
                "/s/t0",
                {**config, "point": "method=FedPer"},
                {"round": 10, "test_acc": 0.105, "party_test_acc_mean": 0.8125},
            ),
            result("/s/t1", {**config, "point": "method=FedAvg"}, {"round": 10, "test_acc": 0.5}),
        ]
    )
    lines = format_summary(rows).splitlines()
    assert lines[0] == "party_test_acc_mean: the mean over parties of each one's own test split"
    assert lines[1].split()[-2:] == ["party_test_acc_mean", "test_acc"]
    assert lines[2].split()[-2:] == ["0.8125", "0.1050"]
    assert lines[3].split()[-2:] == ["-", "0.5000"]  # FedAvg scored no own split here


def test_the_live_view_and_the_end_table_name_columns_by_the_declared_families():
    assert TEST_VALUE.column("map50") == "test_map50"
    assert OWN_TEST_MEAN.column("acc") == "party_test_acc_mean"
    assert OWN_TEST_MEAN.split == "each party's own test split"


def test_hparams_metrics_are_the_declared_summary_columns():
    declared = summary_column_names(CLASSIFICATION_TASK)
    assert {"test_acc", "test_loss", "val_acc", "party_test_acc_mean"} <= declared
    assert not any("/" in name for name in declared)  # per-party values are not summaries
    last = {
        "ray/tune/test_acc": 0.5,
        "ray/tune/party_test_acc_mean": 0.8,
        "ray/tune/party_acc/p0": 0.7,
        "ray/tune/val_parties": 8,
        "ray/tune/round": 10,
        "ray/tune/diverged": False,
    }
    # before: prefixes val_/test_ chose them, leaving out the own-split mean a
    # personalised method is judged by
    assert hparam_metrics(last, declared) == {
        SCALAR_PREFIX + "test_acc": 0.5,
        SCALAR_PREFIX + "party_test_acc_mean": 0.8,
    }
    # a callback pickled before it knew the declaration keeps the old rule
    assert hparam_metrics(last, frozenset()) == {SCALAR_PREFIX + "test_acc": 0.5}


def test_tensorboard_gets_no_infinite_value(tmp_path, caplog):
    """A DP run without noise spends an infinite epsilon: the row keeps it, while
    TensorBoard's logger is handed finite numbers only (tensorboardX warned "NaN or Inf
    found in input tensor." on the sweep's terminal at every round), and HPARAMS too."""
    from tensorboardX import SummaryWriter

    from study.tune.tracking_callbacks import finite_values

    row = {"test_acc": 0.5, "dp_epsilon": math.inf, "val_acc": math.nan, "point": "x"}
    assert finite_values(row) == {"test_acc": 0.5, "point": "x"}
    with SummaryWriter(str(tmp_path)) as writer:
        writer.add_scalar("dp_epsilon", row["dp_epsilon"], 1)  # what Tune's logger did
        assert "NaN or Inf found in input tensor." in caplog.text
        caplog.clear()
        for key, value in finite_values(row).items():
            if isinstance(value, float):
                writer.add_scalar(key, value, 1)
    assert "NaN or Inf" not in caplog.text
    last = {SCALAR_PREFIX + "test_acc": 0.5, SCALAR_PREFIX + "test_loss": math.inf}
    assert hparam_metrics(last, frozenset({"test_acc", "test_loss"})) == {
        SCALAR_PREFIX + "test_acc": 0.5
    }


def test_a_round_that_scored_no_party_prints_no_spread_over_parties():
    """A personal-model method's own models are scored every personal_test_every-th
    round; between them test_acc_std is NaN, and the line once read "(std over parties
    nan)" (issue 68, point 8): it now says the spread only where it was measured."""
    from federated.run import format_row

    nan = float("nan")
    unscored = {"round": 3, "test_acc": nan, "test_acc_std": nan, "train_loss": 0.5}
    scored = {"round": 4, "test_acc": 0.7, "test_acc_std": 0.125, "train_loss": 0.5}
    assert "std over parties" not in format_row(unscored, 4)
    assert "(std over parties 0.1250)" in format_row(scored, 4)


def test_the_help_and_the_docs_say_what_the_code_does():
    """Issue 68, point 12: --task names every registered kind, --primary-metric names
    each built-in kind's metrics (mIoU among them), --holdout-fraction speaks of the
    task's hold-out groups; docs/runs.md gives the data root the code uses and
    docs/sweeps-and-studies.md no stale count of built-in studies."""
    import re
    from pathlib import Path

    from federated.data.image_data import default_data_root
    from federated.registry import TASK_PATHS
    from federated.run import build_parser

    text = " ".join(build_parser().format_help().split())
    start = text.rindex("--task TASK")  # its help, after the usage lines
    task = text[start : text.index("--primary-metric", start)]
    assert all(name in task for name in TASK_PATHS)
    assert "miou" in text and "map50" in text and "each class" not in text
    docs = Path(__file__).resolve().parents[1] / "docs"
    home = default_data_root().relative_to(Path.home()).as_posix()
    assert f"`~/{home}`" in (docs / "runs.md").read_text()
    assert not re.search(r"the \d+ built-in ones", (docs / "sweeps-and-studies.md").read_text())


def test_a_dp_rounds_line_shows_the_epsilon_spent_so_far_and_a_plain_one_none():
    """Issue 68, point 9: the epsilon a DP run has spent is on its round's console line
    (a run's and a sweep's live view), read from the declared columns (``on_console``)
    the row carries; a run without DP prints none."""
    from types import SimpleNamespace

    import torch

    from federated.run import format_row
    from federated.server.privacy import ClientPrivacy, PrivacySettings
    from study.tune.live_view import LiveView

    settings = PrivacySettings(1.1, 0.5, False, 0.5, 20, 5, 1e-5)
    privacy = ClientPrivacy(settings, torch.Generator().manual_seed(0))
    privacy.end_round()
    dp_row = {"round": 2, "test_acc": 0.5, "train_loss": 0.4, **privacy.end_round()}
    spent = f"dp_epsilon {settings.epsilon_after(2):.4g}"
    assert 0 < settings.epsilon_after(2) < settings.epsilon_after(3) < math.inf
    plain = {"round": 2, "test_acc": 0.5, "train_loss": 0.4}
    assert spent in format_row(dp_row, 10) and "epsilon" not in format_row(plain, 10)
    view = LiveView("s", 2, 10, ["seed"])
    for row, shown in ((dp_row, True), (plain, False)):
        trial = SimpleNamespace(trial_id="t", status="RUNNING", config={}, last_result=row)
        assert (spent in view._trial_line(trial)) is shown
