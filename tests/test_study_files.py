"""Study files and ``--vary``: the built-in studies read from their files plan exactly
what they planned before, a user's file plans the same trials as its ``--vary`` form,
and every bad file is refused with one line before anything is written."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from search_spaces import BUDGETS, STUDIES
from search_spaces.adhoc import adhoc_study
from search_spaces.study_file import (
    StudyFileError,
    load_study_file,
    study_from_dict,
    study_to_dict,
)
from study.plan import SweepPlan
from study.sweep import main
from tests.catalogue_snapshot import (
    PLANS,
    TABLES,
    offline_studies,
    plan_snapshot,
    report_snapshot,
)

HERE = Path(__file__).resolve().parent
MU_BY_BETA = HERE.parent / "examples" / "mu_by_beta.toml"


def test_every_builtin_plan_is_unchanged():
    """Each study's trials, configs and seeds, per budget and search, equal the snapshot
    taken from the Python catalogue before the studies became files."""
    before = json.loads(PLANS.read_text())
    now = plan_snapshot()
    assert list(now) == offline_studies()  # a Hub study is planned on its stand-in
    assert set(now) == set(before)
    for name in before:
        assert now[name] == before[name], name


def test_every_builtin_report_table_is_unchanged():
    """Every table of every built-in study, read from the manifest's definition (new sweeps)."""
    before = json.loads(TABLES.read_text())
    assert report_snapshot() == before


def test_a_sweep_from_before_manifests_carried_the_definition_reports_the_same():
    """A manifest without ``definition`` is read through the shipped file's [report]: the
    same tables.  One study shows it (the path does not depend on which); the snapshot
    above holds every study's tables."""
    before = json.loads(TABLES.read_text())
    assert report_snapshot(with_definition=False, studies=["parties"]) == {
        "parties": before["parties"]
    }


def test_builtin_files_round_trip_through_the_manifest_form():
    for study in STUDIES.values():
        again = study_from_dict(json.loads(json.dumps(study_to_dict(study))), "manifest")
        assert dataclasses.replace(again, source=study.source, paper_settings=True) == study
        assert again.grid() == study.grid()


def test_vary_form_plans_the_same_trials_as_the_file():
    from_file = SweepPlan.build(load_study_file(MU_BY_BETA), BUDGETS["smoke"], seeds="2")
    adhoc = adhoc_study(["mu=0.1,5", "beta=0.1,0.5"], "mu_by_beta")
    from_vary = SweepPlan.build(adhoc, BUDGETS["smoke"], seeds="2", overrides={"algorithm": "moon"})
    file_trials = [(t.label, t.seed, t.config) for t in from_file.trials()]
    vary_trials = [(t.label, t.seed, t.config) for t in from_vary.trials()]
    assert len(file_trials) == 2 * 2 * 2
    assert file_trials == vary_trials


def test_vary_dry_run_prints_the_trials(capsys):
    argv = ["--vary", "mu=0.1,5", "--vary", "beta=0.1,0.5", "--set", "algorithm=moon"]
    assert main([*argv, "--name", "mu_by_beta", "--budget", "smoke", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "study mu_by_beta on fmnist, budget smoke, grid search: 4 trials" in out
    for label in ("mu=0.1, beta=0.1", "mu=0.1, beta=0.5", "mu=5.0, beta=0.1", "mu=5.0, beta=0.5"):
        assert label in out


def test_vary_values_are_checked_beside_what_set_gives_every_trial(capsys):
    """Noise needs a clip norm: ``--vary dp_noise_multiplier=0,1`` alone is refused, with
    ``--set dp_clip_norm=1`` (which every trial takes) it is a study."""
    argv = ["--vary", "dp_noise_multiplier=0,1", "--budget", "smoke", "--dry-run"]
    assert main([*argv, "--set", "dp_clip_norm=1"]) == 0
    assert "2 trials" in capsys.readouterr().out
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: --vary dp_noise_multiplier=0,1: values[1] = 1.0 (allowed: 0")


def test_an_optuna_range_from_the_command_line(capsys):
    argv = ["--vary", "mu=loguniform:0.01:10", "--set", "algorithm=moon", "--dry-run"]
    assert main([*argv, "--search", "optuna", "--num-samples", "5"]) == 0
    out = capsys.readouterr().out
    assert "optuna search: 5 trials" in out and "mu: loguniform[0.01, 10]" in out
    assert main(argv) == 2  # a range alone cannot be a grid
    assert "use --search optuna" in capsys.readouterr().err


def test_study_file_dry_run_with_the_usual_flags(capsys):
    argv = [str(MU_BY_BETA), "--dry-run", "--budget", "laptop", "--seeds", "0,4"]
    assert main([*argv, "--dataset", "mnist", "--set", "n_parties=5"]) == 0
    out = capsys.readouterr().out
    assert "study mu_by_beta (Table 4 x Table 9) on mnist, budget laptop" in out
    assert "8 trials (4 grid points x 2 seeds)" in out and "N=5" in out


GOOD = """name = "bad"
[fixed]
algorithm = "moon"
[[axes]]
name = "mu"
values = [0.1, 1.0]
"""

BAD_FILES = [
    ("unknown_field", GOOD.replace('name = "mu"', 'name = "muu"'), "axes[0].name = 'muu'"),
    (
        "unknown_fixed_field",
        GOOD.replace('algorithm = "moon"', 'algoritm = "moon"'),
        "fixed.algoritm = 'moon' (allowed: a RunConfig field",
    ),
    (
        "unknown_distribution",
        GOOD + 'optuna = { kind = "lognormal", low = 0.1, high = 1.0 }\n',
        "axes[0].optuna.kind = 'lognormal' (allowed: uniform, loguniform, int, logint",
    ),
    (
        "empty_axis",
        GOOD.replace("values = [0.1, 1.0]", "values = []"),
        "axes[0].values = [] (allowed: a non-empty list of mu values)",
    ),
    (
        "axis_also_fixed",
        GOOD.replace('algorithm = "moon"', 'algorithm = "moon"\nmu = 1.0'),
        "axes[0] = 'mu' (allowed: a field not also in [fixed]",
    ),
    (
        "value_fails_validation",
        GOOD.replace("values = [0.1, 1.0]", "values = [0.1, -1.0]"),
        "axes[0].values[1] = -1.0 (allowed:",
    ),
    (
        "fixed_fails_validation",
        GOOD.replace('algorithm = "moon"', 'algorithm = "moonn"'),
        "fixed.algorithm = 'moonn' (allowed: one of",
    ),
    ("no_axes", 'name = "bad"\n', "axes = None (allowed: at least one [[axes]] table)"),
    ("not_toml", "name = \n", "toml = "),
    ("unknown_key", GOOD + "[report]\ntabel = 1\n", "report.tabel = 1 (allowed: one of the keys"),
]


@pytest.mark.parametrize(("case", "text", "message"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_bad_study_files_are_refused_with_one_line(case, text, message, tmp_path, capsys):
    path = tmp_path / f"{case}.toml"
    path.write_text(text)
    storage = tmp_path / "results"
    assert main([str(path), "--budget", "smoke", "--storage-path", str(storage), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {path}: ") and "\n" not in err, err
    assert message in err, err
    assert not storage.exists()  # refused before anything was written or Ray started


def test_a_missing_study_file_is_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.toml"
    assert main([str(missing), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"error: {missing}: file = '{missing}' (allowed: an existing .toml study file)"


def test_load_errors_carry_file_key_value_and_allowed(tmp_path):
    path = tmp_path / "x.toml"
    path.write_text(GOOD.replace("values = [0.1, 1.0]", 'values = [0.1, "a lot"]'))
    with pytest.raises(StudyFileError) as info:
        load_study_file(path)
    assert (info.value.source, info.value.key, info.value.value) == (
        str(path),
        "axes[0].values[1]",
        "a lot",
    )


def test_the_study_files_ship_as_package_data():
    """A non-editable install carries search_spaces/studies/*.toml (pyproject)."""
    import tomllib

    pyproject = tomllib.loads((HERE.parent / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["search_spaces"]
    shipped = {p.name for p in (HERE.parent / "search_spaces" / "studies").glob("*.toml")}
    assert "studies/*.toml" in globs and shipped == {f"{name}.toml" for name in STUDIES}
