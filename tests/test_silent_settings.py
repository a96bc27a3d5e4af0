"""Settings that train nothing are refused in one line, settings and study axes that have
no effect are named in one ``warning:`` line, every count that sizes memory is bounded
(the bound in the error), a dry run checks this machine as the real run does, and
failures reach the terminal as one line (issue 31, items 2, 3 and 5)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time

import pytest
import torch

from federated import run as run_cli
from federated.cli.input_checks import InputError, check_plain_name
from federated.config.checks import MAX_LOCAL_EPOCHS, MAX_PLAN_ROWS
from federated.config.inert_settings import inert_settings
from federated.config.run_config import ConfigError, RunConfig
from search_spaces import BUDGETS, STUDIES
from study import sweep as sweep_cli


def run_argv(tmp_path, *extra: str) -> list[str]:
    return [
        "--dataset",
        "synthetic",
        "--rounds",
        "1",
        "--local-epochs",
        "1",
        "--out",
        str(tmp_path / "rows.csv"),
        "--quiet",
        *extra,
    ]


def checked(**fields) -> RunConfig:
    """A config with its checks run (resolution runs them; construction does not)."""
    return RunConfig(**fields).resolved()


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    return err


# ----------------------------------------------------------- settings that train nothing
def test_dropping_every_straggler_every_round_is_refused(tmp_path, capsys):
    argv = run_argv(tmp_path, "--straggler-fraction", "1", "--straggler-policy", "drop")
    assert run_cli.main(argv) == 2
    err = one_error_line(capsys)
    assert "straggler_fraction=1.0 (allowed: with straggler_policy=drop" in err, err
    assert "nothing would train" in err and not (tmp_path / "rows.csv").exists()


def test_a_straggler_fraction_that_leaves_someone_to_report_is_accepted():
    drop = checked(dataset="synthetic", straggler_fraction=0.5, straggler_policy="drop")
    partial = checked(dataset="synthetic", straggler_fraction=1.0, straggler_policy="partial")
    assert (drop.straggler_fraction, drop.straggler_policy) == (0.5, "drop")
    assert (partial.straggler_fraction, partial.straggler_policy) == (1.0, "partial")


# ------------------------------------------------------------------- no effect: warnings
def test_stragglers_among_one_party_are_named_as_without_effect():
    config = RunConfig(dataset="synthetic", n_parties=1, straggler_fraction=0.4)
    lines = inert_settings(config)
    assert lines == [
        "warning: straggler_fraction=0.4 has no effect: round(1 parties drawn per round x "
        "straggler_fraction=0.4) = 0: no party is ever a straggler"
    ]
    assert inert_settings(RunConfig(dataset="synthetic", n_parties=4, straggler_fraction=0.4)) == []


def test_local_epochs_min_equal_to_local_epochs_is_named():
    config = RunConfig(dataset="synthetic", local_epochs=3, local_epochs_min=3)
    assert any(
        line.startswith("warning: local_epochs_min=3 has no effect")
        for line in (inert_settings(config))
    )


@pytest.mark.parametrize(
    "vary, fixed, words",
    [
        (
            "feature_skew_level=0.1,0.5",
            [],
            "warning: axis feature_skew_level (0.1, 0.5) has no effect: feature_skew=none",
        ),
        (
            "straggler_policy=partial,drop",
            [],
            "warning: axis straggler_policy (partial, drop) has no effect: straggler_fraction=0",
        ),
    ],
)
def test_a_study_axis_without_effect_is_named_in_the_dry_run(tmp_path, capsys, vary, fixed, words):
    argv = ["--vary", vary, *fixed, "--dry-run", "--storage-path", str(tmp_path / "results")]
    assert sweep_cli.main(argv) == 0
    captured = capsys.readouterr()
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning: axis")]
    assert len(warnings) == 1 and warnings[0].startswith(words), captured.err
    assert "train alike" in warnings[0]
    assert not (tmp_path / "results").exists()


def test_an_axis_with_effect_is_not_warned_about(tmp_path, capsys):
    argv = [
        "--vary",
        "feature_skew_level=0.1,0.5",
        "--set",
        "feature_skew=noise",
        "--dry-run",
    ]
    assert sweep_cli.main(argv) == 0
    assert "warning: axis" not in capsys.readouterr().err


def test_fail_at_round_is_no_flag_of_the_run_command(tmp_path, capsys):
    assert "fail-at-round" not in run_cli.build_parser([]).format_help()
    with pytest.raises(SystemExit) as stopped:
        run_cli.main(run_argv(tmp_path, "--fail-at-round", "1"))
    assert stopped.value.code == 2
    err = one_error_line(capsys)
    assert "--fail-at-round" in err
    # the test hook itself stays: Python (and a sweep's --set) reach it
    assert RunConfig(dataset="synthetic", fail_at_round=2).fail_at_round == 2


# ------------------------------------------------------------------------------ bounds
def test_local_epochs_is_bounded_with_the_bound_in_the_error(tmp_path, capsys):
    started = time.perf_counter()
    assert run_cli.main(run_argv(tmp_path, "--local-epochs", "1000000")) == 2
    err = one_error_line(capsys)
    assert f"local_epochs=1000000 (allowed: an integer <= {MAX_LOCAL_EPOCHS:,}" in err, err
    assert time.perf_counter() - started < 30  # refused, not drawn
    assert not (tmp_path / "rows.csv").exists()


def test_a_round_plan_beyond_its_bound_is_refused_naming_local_epochs():
    # Tiny-ImageNet: 100,000 samples drawn each round x 1,000 epochs > 2**26 plan rows
    most = MAX_PLAN_ROWS // 100_000
    with pytest.raises(ConfigError) as refused:
        checked(dataset="tinyimagenet", local_epochs=MAX_LOCAL_EPOCHS, n_parties=10)
    message = str(refused.value)
    assert f"local_epochs=1000 (allowed: at most {most} for the 100000 samples" in message
    assert "\n" not in message
    # fewer parties drawn each round: a plan that fits
    checked(dataset="tinyimagenet", local_epochs=MAX_LOCAL_EPOCHS, sample_fraction=0.5)


def test_out_dim_is_bounded():
    with pytest.raises(ConfigError, match=r"out_dim=1000000 \(allowed: an integer <= 65,536"):
        checked(dataset="synthetic", out_dim=1_000_000)


# ------------------------------------------------------------ dry run: machine checks
def test_the_dry_run_refuses_more_cpus_than_this_machine_has(tmp_path, capsys):
    cpus = (os.cpu_count() or 1) + 6
    argv = ["--vary", "mu=0,1", "--cpus-per-trial", str(cpus), "--dry-run"]
    assert sweep_cli.main(argv) == 2
    err = one_error_line(capsys)
    assert f"--cpus-per-trial={cpus} (allowed: at most {os.cpu_count()}" in err, err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_the_dry_run_refuses_cuda_on_a_machine_without_it(capsys):
    argv = ["--vary", "mu=0,1", "--set", "device=cuda", "--cpus-per-trial", "1", "--dry-run"]
    assert sweep_cli.main(argv) == 2
    err = one_error_line(capsys)
    assert "cuda" in err.lower(), err


# ------------------------------------------------------- failures as one line, names
def test_a_failed_trial_is_one_line_on_the_terminal():
    from study.terminal_errors import OneLineTrialErrors

    try:
        raise RuntimeError("Traceback (most recent call last):\n  ...\nValueError: refused")
    except RuntimeError:
        record = logging.LogRecord(
            "ray.tune.execution.tune_controller",
            logging.ERROR,
            __file__,
            1,
            "Trial task failed for trial %s",
            ("train_abc_00001",),
            sys.exc_info(),
        )
    assert OneLineTrialErrors().filter(record)
    text = logging.Formatter().format(record)
    assert text == (
        "Trial task failed for trial train_abc_00001: ValueError: refused "
        "(full traceback in its error.txt)"
    )


def test_a_failed_resume_leaves_the_manifest_as_it_was(tmp_path, capsys):
    from study.resources import Execution, TrialResources

    sweep_dir = tmp_path / "results" / "done"
    sweep_dir.mkdir(parents=True)
    before = {"status": "finished", "search": "grid", "driver": {"host": "h", "pid": 1}}
    (sweep_dir / "fedsweep_sweep.json").write_text(json.dumps(before))
    execution = Execution(
        resources=TrialResources(1, 0), max_concurrent=None, scheduler=None, max_failures=0
    )
    with pytest.raises(sweep_cli.SweepStopError) as stopped:
        sweep_cli.restored_tuner(sweep_dir, execution)  # a grid without its plan: fails
    assert stopped.value.code == 2
    after = json.loads((sweep_dir / "fedsweep_sweep.json").read_text())
    assert after["status"] == "finished" and after["driver"] == before["driver"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: could not resume {sweep_dir}"), err


def test_the_name_message_says_ascii():
    with pytest.raises(InputError) as refused:
        check_plain_name("héllo", "--name")
    assert "ASCII letters and digits (A-Z, a-z, 0-9)" in str(refused.value)


def test_a_tiny_imagenet_cache_the_safe_load_refuses_is_one_line(tmp_path):
    from federated.data import DatasetUnavailableError, load_dataset

    folder = tmp_path / "tiny-imagenet-200"
    folder.mkdir()
    torch.save({"train_x": InputError("a pickled object")}, folder / "fedsweep-uint8.pt")
    with pytest.raises(DatasetUnavailableError) as refused:
        load_dataset("tinyimagenet", tmp_path)
    message = str(refused.value)
    assert "\n" not in message and "fedsweep-uint8.pt cannot be loaded safely" in message
    assert "remove it" in message


def test_a_fixed_value_without_effect_is_named_in_the_study_dry_run(tmp_path, capsys):
    """A study file's ``[fixed]`` ``personal_layers`` in a study of FedAvg only: the
    single run warns of it, and so does the study's dry run (it used to pass silently)."""
    study = tmp_path / "heads.toml"
    study.write_text(
        'name = "heads"\n[fixed]\nalgorithm = "fedavg"\npersonal_layers = "classifier"\n'
        '[[axes]]\nname = "lr"\nvalues = [0.01, 0.05]\n'
    )
    argv = [str(study), "--dry-run", "--storage-path", str(tmp_path / "results")]
    assert sweep_cli.main(argv) == 0
    err = capsys.readouterr().err
    fixed = [line for line in err.splitlines() if line.startswith("warning: [fixed] ")]
    assert fixed == [
        "warning: [fixed] personal_layers='classifier' has no effect: algorithm=fedavg and "
        "server_optimizer=avg declare no parameter personal_layers"
    ], err
    assert not (tmp_path / "results").exists()


# the studies whose data this machine holds (the others' resolve their hf: source)
LOCAL_STUDIES = sorted(name for name, study in STUDIES.items() if study.dataset == "fmnist")


@pytest.mark.parametrize("study", LOCAL_STUDIES)
def test_no_built_in_study_fixes_a_value_without_effect(study):
    from study.plan import SweepPlan
    from study.plan_description import fixed_warnings

    plan = SweepPlan.build(STUDIES[study], BUDGETS["smoke"])
    assert fixed_warnings(plan) == []
