"""Issue 20: a budget never changes what a user wrote, ``--resume`` unpickles only a
folder the user alone could have written, and the end of a sweep tells interrupted and
never-started trials apart.  None of these starts Ray."""

from __future__ import annotations

import json
import logging
import os
import pickle
import re
from pathlib import Path

import pytest

from search_spaces import BUDGETS, STUDIES
from search_spaces.study_file import StudyFileError, load_study_file
from study import resume_trust
from study.plan import SweepPlan
from study.resume_plan import plan_difference, resume_command
from study.resume_trust import UntrustedFolderError, check_resume_trust
from study.sweep import main
from study.sweep_args import build_parser

MINE = """name = "mine"
[fixed]
algorithm = "moon"
rounds = 8
[[axes]]
name = "mu"
values = [0.1, 1.0]
"""


@pytest.fixture
def mine(tmp_path) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(MINE)
    return path


def configs(plan: SweepPlan) -> list[dict]:
    return [t.config for t in plan.trials()]


# ------------------------------------------------------------------------ budget rule
def test_a_user_study_runs_as_written_by_default(mine, capsys):
    assert main([str(mine), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "budget as-written, grid search" in out
    assert "budget as-written: changes nothing" in out
    plan = SweepPlan.build(load_study_file(mine), BUDGETS["as-written"])
    assert {(c["rounds"], c["local_epochs"], c["data_fraction"]) for c in configs(plan)} == {
        (8, 10, 1.0)
    }
    assert plan.budget_changes() == {}


def test_a_budget_that_would_change_a_written_value_is_refused(mine, capsys):
    with pytest.raises(StudyFileError, match=r"fixed.rounds = 8 .*budget laptop.*rounds=5"):
        SweepPlan.build(load_study_file(mine), BUDGETS["laptop"])
    assert main([str(mine), "--budget", "laptop", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {mine}: fixed.rounds = 8") and "\n" not in err


def test_set_stands_and_the_budget_fills_only_the_rest(mine):
    plan = SweepPlan.build(load_study_file(mine), BUDGETS["laptop"], overrides={"rounds": 3})
    assert {(c["rounds"], c["local_epochs"], c["data_fraction"]) for c in configs(plan)} == {
        (3, 2, 0.2)
    }
    assert "rounds" not in plan.budget_changes()
    assert plan.budget_changes()["local_epochs"] == [(10, 2)]
    # on a built-in study too: --set is applied after the budget
    moon = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides={"rounds": 4})
    assert {c["rounds"] for c in configs(moon)} == {4} and "rounds" not in moon.budget_changes()


def test_the_plan_and_the_manifest_list_what_the_budget_changed(capsys):
    plan = SweepPlan.build(STUDIES["parties"], BUDGETS["laptop"])
    assert plan.budget_changes() == {
        "rounds": [(100, 10), (200, 20), (500, 50)],
        "local_epochs": [(10, 2)],
        "data_fraction": [(1.0, 0.2)],
        "test_fraction": [(1.0, 0.5)],
        "batch_size": [(64, 16)],
    }
    assert main(["moon_mu", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == (
        "budget laptop changed: rounds 100 -> 10; local_epochs 10 -> 2; "
        "data_fraction 1 -> 0.2; test_fraction 1 -> 0.5; batch_size 64 -> 16"
    )
    from study.manifest_content import manifest_for
    from study.resources import Execution, TrialResources

    manifest = json.loads(
        json.dumps(manifest_for(plan, "x", Execution(TrialResources(1, 0))), default=str)
    )
    assert manifest["paper_settings"] is True
    assert manifest["budget_changes"]["rounds"] == [
        {"from": 100, "to": 10},
        {"from": 200, "to": 20},
        {"from": 500, "to": 50},
    ]


def test_resume_rebuilds_a_user_study_under_the_same_rule(mine):
    from search_spaces.study_file import study_to_dict

    plan = SweepPlan.build(load_study_file(mine), BUDGETS["as-written"], seeds="1")
    manifest = {
        "definition": study_to_dict(plan.study),
        "paper_settings": False,
        "budget": "as-written",
        "dataset": plan.dataset,
        "search": "grid",
        "seeds": plan.seeds,
        "overrides": {},
    }
    assert configs(SweepPlan.from_manifest(manifest)) == configs(plan)
    # a manifest from before the rule: every value was the budget's to scale
    old = {**manifest, "budget": "smoke"}
    del old["paper_settings"]
    assert {c["rounds"] for c in configs(SweepPlan.from_manifest(old))} == {2}


# ------------------------------------------------------------------- resume trust check
PAYLOAD_MARK = "unpickled.txt"


class _Payload:
    """A pickle that writes a file when loaded: what a crafted tuner.pkl could do."""

    def __init__(self, mark: str) -> None:
        self.mark = mark

    def __reduce__(self):
        return (Path.write_text, (Path(self.mark), "ran"))


def crafted_sweep(storage: Path) -> Path:
    sweep_dir = storage / "shared"
    sweep_dir.mkdir(parents=True)
    (sweep_dir / "fedsweep_sweep.json").write_text(
        json.dumps({"study": "moon_mu", "status": "interrupted", "trials": {}})
    )
    (sweep_dir / "tuner.pkl").write_bytes(pickle.dumps(_Payload(str(storage / PAYLOAD_MARK))))
    return sweep_dir


def resume(storage: Path) -> int:
    return main(["moon_mu", "--resume", "--name", "shared", "--storage-path", str(storage)])


@pytest.mark.parametrize(("target", "mode"), [("folder", 0o777), ("tuner.pkl", 0o666)])
def test_resume_refuses_a_world_writable_folder_or_pickle(tmp_path, capsys, target, mode):
    sweep_dir = crafted_sweep(tmp_path)
    path = sweep_dir if target == "folder" else sweep_dir / target
    os.chmod(path, mode)
    assert resume(tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --resume: {path} is writable by every user") and "\n" not in err
    assert not (tmp_path / PAYLOAD_MARK).exists()  # nothing was unpickled


def test_resume_refuses_a_group_writable_folder_of_a_shared_group(tmp_path, capsys, monkeypatch):
    sweep_dir = crafted_sweep(tmp_path)
    os.chmod(sweep_dir, 0o775)
    monkeypatch.setattr(resume_trust, "_private_group", lambda gid, uid: False)
    assert resume(tmp_path) == 2
    err = capsys.readouterr().err.strip()
    assert "is writable by its group" in err and "\n" not in err
    # the user's own private group (umask 002) writes nothing anyone else could
    monkeypatch.setattr(resume_trust, "_private_group", lambda gid, uid: True)
    check_resume_trust(sweep_dir)


def test_resume_refuses_a_folder_someone_else_owns(tmp_path, monkeypatch):
    sweep_dir = crafted_sweep(tmp_path)
    monkeypatch.setattr(resume_trust.os, "getuid", lambda: os.stat(sweep_dir).st_uid + 1)
    with pytest.raises(UntrustedFolderError, match="not to you"):
        check_resume_trust(sweep_dir)


def test_the_users_own_folder_passes(tmp_path):
    sweep_dir = crafted_sweep(tmp_path)
    for path in (sweep_dir, *sweep_dir.iterdir()):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    check_resume_trust(sweep_dir)


def test_the_report_never_unpickles():
    """analysis/ reads JSON, CSV and numpy arrays without pickled objects: no pickle
    module, no torch.load, numpy only with allow_pickle=False (README, --resume)."""
    source = Path(__file__).resolve().parent.parent / "analysis"
    forbidden = re.compile(r"import pickle|pickle\.load|torch\.load|read_pickle|allow_pickle=True")
    for path in source.glob("*.py"):
        text = path.read_text()
        assert not forbidden.search(text), path
        for call in re.findall(r"np\.load\([^)]*\)", text):
            assert "allow_pickle=False" in call, (path, call)


# ---------------------------------------------------------------------- the summary
def test_the_summary_marks_interrupted_and_never_started_trials():
    from federated.contract.results import trial_status
    from study.summary_table import format_summary

    def status(last_round, sweep_status, failed=False):
        return trial_status(
            last_round=last_round,
            planned_rounds=3,
            diverged=False,
            failed=failed,
            sweep_status=sweep_status,
        )

    assert status(2, "interrupted") == "interrupted"
    assert status(0, "interrupted") == "not started"
    assert status(3, "finished") == "completed"
    assert status(2, "finished", failed=True) == "error"
    assert status(2, "finished") == "stopped"
    row = {"trial": "a", "point": "mu=1", "seed": 0, "rounds": 2, "test_acc": 0.5}
    text = format_summary([{**row, "status": "interrupted"}], not_started=3)
    assert "interrupted" in text and " completed " not in text
    assert text.splitlines()[-1] == "(3 more trial(s) not started)"


def test_tunes_own_restore_hint_is_dropped():
    import study.tune.ray_session  # noqa: F401  (installs the filter)

    logger = logging.getLogger("ray.tune.tune")
    hint = logger.makeRecord(
        logger.name,
        logging.WARNING,
        __file__,
        1,
        "Experiment has been interrupted, but the most recent state was saved.\n"
        'Resume experiment with: Tuner.restore(path="/x", trainable=...)',
        (),
        None,
    )
    assert not logger.filter(hint)
    other = logger.makeRecord(logger.name, logging.WARNING, __file__, 1, "else", (), None)
    assert logger.filter(other)


def test_the_laptop_batch_yields_to_a_study_that_fixes_its_own_and_to_set():
    """The laptop budget lowers the paper's batch of 64 to 16 (docs/results/budget.md);
    the built-in pretraining study fixes 32 and keeps it; --set batch_size stands."""
    laptop = BUDGETS["laptop"]
    moon = SweepPlan.build(STUDIES["moon_mu"], laptop).trials()[0].config
    assert moon["batch_size"] == 16
    pretraining = SweepPlan.build(STUDIES["pretraining"], laptop).trials()[0].config
    assert pretraining["batch_size"] == 32
    paper = SweepPlan.build(STUDIES["moon_mu"], laptop, overrides={"batch_size": 64})
    assert paper.trials()[0].config["batch_size"] == 64
    assert (
        SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"]).trials()[0].config["batch_size"] == 64
    )


def test_the_end_table_shows_a_dash_and_why_for_a_round_that_scored_no_test_value():
    """A personalised trial interrupted at round 7 scores the pooled test every 5th
    round: its last row's value is NaN, shown "-" with a line saying why, never "nan"."""
    from study.summary_table import format_summary

    row = {"trial": "t1", "point": "algorithm=fedper", "seed": 0, "rounds": 7}
    scored = {**row, "trial": "t0", "status": "completed", "reported_value": 0.5123}
    text = format_summary(
        [scored, {**row, "status": "interrupted", "reported_value": float("nan"), "test_acc": None}]
    )
    lines = text.splitlines()
    assert "nan" not in text
    assert lines[1].endswith(" 0.5123") and lines[2].endswith(" -")
    assert lines[-1] == (
        "(-: test_acc not scored at the trial's last round; the report reads the rounds that were)"
    )


# ------------------------------------------------------------------- the short resume form
def test_the_resume_command_is_the_short_form_with_the_execution_flags_given():
    args = build_parser().parse_args(
        ["--vary", "mu=0.1,1", "--set", "rounds=3", "--cpus-per-trial", "2", "--quiet"]
    )
    assert resume_command(args, "my sweep", Path("/r")) == (
        "python -m study.sweep --resume --name 'my sweep' --storage-path /r "
        "--cpus-per-trial 2.0 --quiet"
    )


def test_plan_flags_given_with_resume_must_plan_the_recorded_trials():
    recorded = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides={"threads": 1})
    # the same plan, with other torch threads (they follow --cpus-per-trial)
    same = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides={"threads": 2})
    assert plan_difference(same, recorded) is None
    other_budget = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["laptop"])
    assert plan_difference(other_budget, recorded) == "budget laptop vs smoke"
    other_rounds = SweepPlan.build(STUDIES["moon_mu"], BUDGETS["smoke"], overrides={"rounds": 3})
    assert plan_difference(other_rounds, recorded) == "rounds=3 vs 2"
