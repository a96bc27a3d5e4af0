"""The execution path chosen by measurement (issue 42 item 3): the mechanism, never a
timing outcome.  Both outcomes come from injected timing tables; one real measurement
checks that each path's real trainer is timed.  No Ray: the choice is the driver's,
before Ray starts."""

from __future__ import annotations

import json

import pytest

from federated.engine.path_calibration import (
    CACHE_FORMAT,
    PathCache,
    PathChoice,
    calibration_key,
    choose_path,
    key_text,
    measure_paths,
)
from search_spaces import BUDGETS, STUDIES
from study.path_choice import sweep_path_choice, user_chose_execution
from study.plan import SweepPlan
from study.resources import TrialResources
from tests.conftest import tiny

CPU = TrialResources(1, 0)


class Table:
    """An injected measurement: a fixed timing table, and the configs it was asked for."""

    def __init__(self, packed: float, sequential: float) -> None:
        self.timings = {"packed": packed, "sequential": sequential}
        self.asked: list = []

    def __call__(self, config):
        self.asked.append(config)
        return dict(self.timings)


def refuse(config):
    raise AssertionError("nothing may be measured here")


def smoke_plan(budget: str = "smoke", **overrides) -> SweepPlan:
    return SweepPlan.build(
        STUDIES["moon_mu"],
        BUDGETS[budget],
        dataset="synthetic",
        search="grid",
        seeds=[0],
        overrides={"threads": 1, **overrides},
    )


def laptop_plan(**overrides) -> SweepPlan:
    """A sweep long enough to time: 5 trials of 12,600 local steps each."""
    return smoke_plan("laptop", **overrides)


@pytest.mark.parametrize(
    ("packed", "sequential", "chosen"),
    [(1.0, 2.0, "packed"), (2.0, 1.0, "sequential"), (1.0, 1.0, "packed")],
)
def test_the_faster_path_of_the_timing_table_is_chosen_and_cached(
    tmp_path, packed, sequential, chosen
):
    cache = PathCache(tmp_path / "paths.json")
    config = tiny(algorithm="moon")
    first = choose_path(config, cache=cache, measure=Table(packed, sequential))
    assert (first.path, first.source) == (chosen, "measured")
    assert first.timings_s == {"packed": packed, "sequential": sequential}
    # the second time: the cache answers, nothing is measured
    again = choose_path(config, cache=cache, measure=refuse)
    assert (again.path, again.source, again.timings_s) == (chosen, "cache", first.timings_s)
    assert again.measured_at == first.measured_at


def test_the_cache_key_holds_machine_and_shape_and_a_new_shape_is_measured(tmp_path):
    cache = PathCache(tmp_path / "paths.json")
    table = Table(2.0, 1.0)
    config = tiny(algorithm="moon")
    choose_path(config, cache=cache, measure=table)
    choose_path(config.replace(batch_size=32), cache=cache, measure=table)
    choose_path(config.replace(threads=2), cache=cache, measure=table)
    choose_path(config.replace(algorithm="fedavg"), cache=cache, measure=table)
    # the party sizes set how many parties a pack holds: another partition is measured
    choose_path(config.replace(beta=0.1), cache=cache, measure=table)
    choose_path(config.replace(n_parties=config.n_parties * 2), cache=cache, measure=table)
    # the seed draws other parties of the same sizes' law: the cache answers
    choose_path(config.replace(seed=config.seed + 1), cache=cache, measure=table)
    assert len(table.asked) == 6
    key = calibration_key(config)
    assert {"cpu", "cpu_identity", "torch", "threads", "model", "input_shape"} <= set(key)
    assert {"batch_size", "algorithm", "party_sizes"} <= set(key)
    assert key["input_shape"] == [3, 32, 32] and key["threads"] == 1
    assert key["party_sizes"]["n_parties"] == config.n_parties
    saved = json.loads((tmp_path / "paths.json").read_text())
    assert len(saved["entries"]) == 6


def test_the_cpu_identity_tells_apart_processors_of_one_marketing_name(tmp_path, monkeypatch):
    """Two virtual machines both named "AMD EPYC": a Zen 3 (family 25, model 1) and a
    Zen 4 (family 25, model 17, AVX-512) get different keys."""
    from federated.runtime import cpu_name

    def identity(model: int, flags: str) -> str:
        info = tmp_path / f"cpuinfo-{model}"
        info.write_text(
            f"processor\t: 0\nmodel name\t: AMD EPYC\ncpu family\t: 25\nmodel\t\t: {model}\n"
            f"stepping\t: 1\nflags\t\t: fpu sse2 {flags}\n\nprocessor\t: 1\nmodel\t\t: 99\n"
        )
        monkeypatch.setattr(cpu_name, "CPUINFO", info)
        return cpu_name.cpu_identity()

    assert identity(1, "avx2") == "25/1/1 avx2"
    assert identity(17, "avx2 avx512f avx512_bf16") == "25/17/1 avx2 avx512f avx512_bf16"
    monkeypatch.setattr(cpu_name, "CPUINFO", tmp_path / "missing")
    assert cpu_name.cpu_identity() == ""


def test_a_damaged_cache_file_is_measured_again_and_rewritten(tmp_path):
    file = tmp_path / "paths.json"
    file.write_text("{not json")
    choice = choose_path(tiny(), cache=PathCache(file), measure=Table(1.0, 3.0))
    assert choice.source == "measured"
    assert json.loads(file.read_text())["format"] == CACHE_FORMAT


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-1.0", "0", "true", '"1.5"'])
def test_a_cached_timing_that_is_no_duration_is_measured_again(tmp_path, bad):
    """A NaN (JSON's ``NaN``) compares false with everything and would keep packed
    whatever the other path's time: such an entry is measured again and replaced."""
    file = tmp_path / "paths.json"
    config = tiny(algorithm="moon")
    choose_path(config, cache=PathCache(file), measure=Table(2.0, 1.0))
    text = file.read_text()
    file.write_text(text.replace('"packed": 2.0', f'"packed": {bad}', 1))
    table = Table(2.0, 1.0)
    choice = choose_path(config, cache=PathCache(file), measure=table)
    assert (choice.path, choice.source) == ("sequential", "measured")
    assert len(table.asked) == 1
    assert json.loads(file.read_text())["entries"][key_text(calibration_key(config))][
        "timings_s"
    ] == {"packed": 2.0, "sequential": 1.0}


def test_the_sweep_sets_the_measured_path_on_every_trial_and_says_it_in_one_line(tmp_path):
    plan = laptop_plan()
    assert not user_chose_execution(plan)
    table = Table(packed=2.0, sequential=1.5)
    choice = sweep_path_choice(
        plan, CPU, remote=False, cache=PathCache(tmp_path / "c.json"), measure=table
    )
    assert len(table.asked) == 1  # the five mu values share one shape: timed once
    assert choice.path == "sequential" and plan.overrides["execution"] == "sequential"
    assert {t.config["execution"] for t in plan.trials()} == {"sequential"}
    # every trial's config carries it into the Tune param space, so --resume keeps it
    assert plan.param_space()["execution"] == "sequential"
    line = choice.line()
    assert "\n" not in line and line.startswith("execution: sequential (measured now")
    assert "packed 2.00 s" in line and "--set execution=packed" in line
    entry = choice.to_manifest()
    assert entry["path"] == "sequential" and entry["source"] == "measured"
    assert entry["timings_s"] == {"packed": 2.0, "sequential": 1.5}
    assert entry["key"]["algorithm"] == "moon"


def test_a_path_the_user_wrote_is_honoured_and_nothing_is_timed(tmp_path):
    for written in ("packed", "sequential"):
        plan = smoke_plan(execution=written)
        assert user_chose_execution(plan)
        choice = sweep_path_choice(plan, CPU, remote=False, measure=refuse)
        assert (choice.path, choice.source) == (written, "user")
        assert plan.overrides["execution"] == written
        assert choice.line() == f"execution: {written} (as written)"


def test_gpu_and_cluster_trials_keep_packed_and_say_it_was_not_measured():
    for resources, remote, why in ((TrialResources(1, 0.5), False, "GPU"), (CPU, True, "cluster")):
        plan = smoke_plan()
        choice = sweep_path_choice(plan, resources, remote=remote, measure=refuse)
        assert (choice.path, choice.source) == ("packed", "not measured")
        assert why in choice.line()
        assert "execution" not in plan.overrides


def test_trials_of_several_shapes_are_timed_once_each_and_weighted_by_their_trials(tmp_path):
    plan = SweepPlan.build(
        STUDIES["comparison"],
        BUDGETS["laptop"],
        dataset="synthetic",
        search="grid",
        seeds=[0],
        overrides={"threads": 1, "algorithm": "fedavg,moon"},
    )
    by_method = {"fedavg": (1.0, 3.0), "moon": (4.0, 1.0)}  # FedAvg packs faster, MOON not
    asked = []

    def table(config):
        asked.append(config.algorithm)
        packed, sequential = by_method[config.algorithm]
        return {"packed": packed, "sequential": sequential}

    choice = sweep_path_choice(
        plan, CPU, remote=False, cache=PathCache(tmp_path / "c.json"), measure=table
    )
    assert sorted(asked) == ["fedavg", "moon"]
    # one trial each: packed 1 + 4 = 5 s, sequential 3 + 1 = 4 s
    assert choice.timings_s == {"packed": 5.0, "sequential": 4.0}
    assert choice.path == "sequential" and len(choice.key["shapes"]) == 2


def test_a_method_that_cannot_pack_is_not_measured_and_not_overridden(tmp_path):
    plan = laptop_plan(algorithm="fedrep")
    choice = sweep_path_choice(
        plan, CPU, remote=False, cache=PathCache(tmp_path / "c.json"), measure=lambda c: None
    )
    assert choice.source == "not packable" and "execution" not in plan.overrides


def test_a_sweep_shorter_than_ten_measurements_keeps_packed_and_says_why(tmp_path):
    """The smoke budget's moon_mu (5 trials x 2 rounds x 10 parties x 1 epoch x 4
    batches) trains fewer steps than ten measurements would: nothing is timed, the trials
    keep packed, and the line gives both counts; the same shape cached is read."""
    plan = smoke_plan()
    cache = PathCache(tmp_path / "c.json")
    choice = sweep_path_choice(plan, CPU, remote=False, cache=cache, measure=refuse)
    assert (choice.path, choice.source) == ("packed", "not measured")
    assert "execution" not in plan.overrides
    assert choice.line() == (
        "execution: packed (not measured: the sweep trains about 400 local steps; timing "
        "both paths takes up to 500, which pays from 5,000)"
    )
    cache.put(calibration_key(plan.trials()[0].run_config), Table(2.0, 1.0).timings, "t")
    choice = sweep_path_choice(plan, CPU, remote=False, cache=cache, measure=refuse)
    assert (choice.path, choice.source) == ("sequential", "cache")


def test_a_real_measurement_times_both_paths_real_trainers():
    timings = measure_paths(tiny(algorithm="moon", n_parties=4), steps=1, repeats=1, budget_s=0)
    assert set(timings) == {"packed", "sequential"}
    assert all(0 < t < 60 for t in timings.values())
    # a method that trains one party at a time is not packable: nothing to compare
    assert (
        measure_paths(tiny(algorithm="fedrep", local_epochs=2), steps=1, repeats=1, budget_s=0)
        is None
    )


def test_a_choice_reads_the_same_from_its_manifest_entry():
    choice = PathChoice("packed", "cache", {"packed": 1.0, "sequential": 1.2}, {"cpu": "x"}, "t")
    entry = choice.to_manifest()
    assert entry["speedup_packed"] == pytest.approx(1.2)
    assert json.loads(json.dumps(entry)) == entry


def test_the_sweep_command_says_the_cached_choice_in_one_line_for_its_manifest(
    tmp_path, monkeypatch, capsys
):
    from study.sweep import SweepTarget, choose_execution

    monkeypatch.setenv("HOME", str(tmp_path))  # the per-machine cache under ~/.cache
    plan = smoke_plan()
    key = calibration_key(plan.trials()[0].run_config)
    PathCache().put(key, {"packed": 3.0, "sequential": 2.0}, "2026-01-02T03:04:05")
    target = SweepTarget(tmp_path, None, tmp_path / "sweep", [], "")
    entry = choose_execution(plan, CPU, target)
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [
        "execution: sequential (cached from 2026-01-02T03:04:05: sequential 2.00 s, "
        "packed 3.00 s for the same steps; --set execution=packed overrides)"
    ]
    assert entry["path"] == "sequential" and entry["source"] == "cache"
    assert entry["timings_s"] == {"packed": 3.0, "sequential": 2.0}
    assert plan.overrides["execution"] == "sequential"


def test_a_task_that_cannot_pack_trains_sequentially_and_says_the_tasks_reason(monkeypatch):
    """Detection (generated box data): the sweep's line and manifest say sequential with
    the task's own reason, on a CPU, a GPU or a cluster alike, and nothing is timed."""
    from tests.detection_synthetic import NAME, boxes_data, register

    register(monkeypatch, boxes_data(train=40, test=6))
    for resources, remote in ((CPU, False), (TrialResources(1, 0.5), False), (CPU, True)):
        plan = SweepPlan.build(
            STUDIES["moon_mu"],
            BUDGETS["smoke"],
            dataset=NAME,
            search="grid",
            seeds=[0],
            overrides={"threads": 1, "partition": "iid", "data_fraction": 1.0},
        )
        choice = sweep_path_choice(plan, resources, remote=remote, measure=refuse)
        assert (choice.path, choice.source) == ("sequential", "not packable")
        assert choice.line() == (
            "execution: sequential (not measured: detection trains one party at a time "
            "(a detector's boxes and loss do not pack))"
        )
        assert choice.to_manifest()["reason"].startswith("detection trains one party")
        assert {t.config["execution"] for t in plan.trials()} == {"sequential"}
