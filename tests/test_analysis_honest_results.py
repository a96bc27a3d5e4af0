"""What a report may claim (issue 22): a sweep where nothing learns names no winner and
no speed-up; one seed makes no claim; Table 11 names the machine.  Hand-made results."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from analysis.reading.loading import load_results
from analysis.report import write_report
from analysis.tables.timing import NOT_RECORDED, machine_text
from study.machine import machine_description
from tests.analysis_fakes import curve, plan_configs, result_row, write_sweep, write_trial

MACHINE = {"cpu": "AMD EPYC 7763", "threads": 16, "gpus": ["NVIDIA H100"], "system": "Linux"}


def near_chance_sweep(root: Path) -> Path:
    """The comparison study, 3 seeds, every trial within half a point of 10% (chance on
    Fashion-MNIST) in every round: a learning rate too small to learn anything."""
    rng = np.random.default_rng(22)
    trials = []
    for config in plan_configs("comparison", seeds=3):
        accuracies = list(0.10 + rng.uniform(-0.005, 0.005, size=config["rounds"]))
        trials.append((config, accuracies))
    return write_sweep(root, "comparison-chance", "comparison", trials, seeds=[0, 1, 2])


def test_nothing_learns_no_winner_and_no_speedup(tmp_path):
    near_chance_sweep(tmp_path / "results")
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "results"), out, formats=("png",))
    t1 = (out / "tables" / "table1_comparison.md").read_text()
    rows = [line for line in t1.splitlines() if line.startswith("| ")]
    assert rows and not any("**" in line for line in rows)  # no cell is bold
    assert "No bold in Fashion-MNIST" in t1
    cells = list(csv.DictReader((out / "tables" / "table1_comparison.csv").open()))
    assert not any(c["best"] == "True" for c in cells)
    t2 = (out / "tables" / "table2_communication.md").read_text()
    assert "×" not in t2.split("\n\n")[1]  # no speed-up in any cell
    assert t2.count("none (baseline not learned)") == 4  # FedAvg, FedProx, MOON, SCAFFOLD
    assert "no target: FedAvg" in t2 and "near chance" in t2
    per_seed = list(csv.DictReader((out / "tables" / "table2_communication.csv").open()))
    assert all(r["speedup"] == "" and r["baseline_learned"] == "False" for r in per_seed)


def test_a_learning_baseline_gives_speedups_with_their_spread(tmp_path):
    trials = []
    for config in plan_configs("comparison", seeds=2):
        # 2 rounds; FedAvg ends at 0.5, the others reach it at round 1 in seed 0 only
        first = 0.5 if config["seed"] == 0 else 0.3
        accs = [0.1, 0.5] if config["algorithm"] == "fedavg" else [first, 0.6]
        trials.append((config, accs))
    write_sweep(tmp_path / "results", "comparison-ok", "comparison", trials)
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "results"), out, formats=("png",))
    t2 = (out / "tables" / "table2_communication.md").read_text()
    # seed 0: 2/1 = 2×, seed 1: 2/2 = 1×: mean rounds 1.5 (shown whole) -> 2/1.5 = 1.3×,
    # and the per-seed speed-ups' sd, 0.7
    assert "| MOON | 2 ± 0.7 | 1.3× ± 0.7 |" in t2
    assert "| FedAvg | 2 | 1.0× |" in t2


def test_one_seed_report_says_it_makes_no_claim(tmp_path):
    configs = plan_configs("moon_mu", seeds=1)
    trials = [(c, curve(0.3 + 0.1 * i, c["rounds"])) for i, c in enumerate(configs)]
    write_sweep(tmp_path / "results", "moon_mu-one", "moon_mu", trials, seeds=[0])
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "results"), out, formats=("png",))
    table = (out / "tables" / "table9_moon_mu.md").read_text()
    assert "one seed: no claim" in table.splitlines()[0]
    assert "One seed: this table makes no claim" in table
    assert "**" not in "".join(line for line in table.splitlines() if line.startswith("| "))
    assert "Δ" not in table.split("\n\n")[1]


def timed_sweep(root: Path, **manifest) -> Path:
    configs = [c for c in plan_configs("comparison", seeds=2) if c["algorithm"] != "solo"]
    sweep = write_sweep(root, "comparison-timed", "comparison", [], **manifest)
    for i, config in enumerate(configs):
        train = 2.0 if config["algorithm"] == "moon" else 1.0
        rows = [
            result_row(
                config,
                r,
                curve(0.5, config["rounds"])[r - 1],
                # round 1 pays the warm-up: left out of the table
                train_seconds=train * (10 if r == 1 else 1) + 0.1 * config["seed"],
                eval_seconds=0.25,
                round_seconds=train + 0.25 + 0.1 * config["seed"],
            )
            for r in range(1, config["rounds"] + 1)
        ]
        write_trial(sweep, i, config, [], rows=rows)
    return sweep


def test_table11_time_per_round_names_the_machine(tmp_path):
    timed_sweep(tmp_path / "results", machine=MACHINE)
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "results"), out, formats=("png",))
    table = (out / "tables" / "table11_time_per_round_comparison.md").read_text()
    assert "AMD EPYC 7763 (16 threads), GPU: NVIDIA H100" in table.splitlines()[0]
    # seeds 0 and 1 of round 2: 2.0 and 2.1 s -> 2.05 ± 0.071
    assert "| MOON | 2.05 ± 0.071 | 0.25 ± 0 | 2.3 ± 0.071 |" in table
    rows = list(csv.DictReader((out / "tables" / "table11_time_per_round_comparison.csv").open()))
    assert {r["row"] for r in rows} == {"FedAvg", "FedProx", "MOON", "SCAFFOLD"}
    assert "Table 11 (time per round" not in (out / "report.md").read_text().split("never")[-1]


def test_old_manifests_say_the_machine_was_not_recorded(tmp_path):
    timed_sweep(tmp_path / "results")
    out = tmp_path / "report"
    write_report(load_results(tmp_path / "results"), out, formats=("png",))
    table = (out / "tables" / "table11_time_per_round_comparison.md").read_text()
    assert NOT_RECORDED in table.splitlines()[0]


def test_the_manifest_machine_description():
    machine = machine_description()
    assert machine["cpu"] and machine["threads"] >= 1 and isinstance(machine["gpus"], list)
    json.dumps(machine)  # goes into the manifest as is
    assert machine_text({"machine": machine}).startswith(machine["cpu"])
    assert machine_text({"machine": {**MACHINE, "gpus": ["A", "A"]}}).endswith("GPU: 2× A")
