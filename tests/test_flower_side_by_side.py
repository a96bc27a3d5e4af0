"""benchmarks/flower_side_by_side.py without Flower: it stops in one line when ``flwr`` is
not importable (nothing measured), and its table and weight check are plain arithmetic.
No test imports ``flwr`` (benchmarks/flower_round.py and flower_client.py do)."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from benchmarks import flower_side_by_side as bench


def test_without_flwr_it_stops_in_one_line_before_any_work(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "flwr" else real(name, *a)
    )
    monkeypatch.setattr(bench, "write_plan", lambda *a: pytest.fail("work started"))
    with pytest.raises(SystemExit) as stop:
        bench.main(["--rounds", "1"])
    message = str(stop.value)
    assert message.startswith("error: flwr is not importable: install it")
    assert "\n" not in message


def test_the_table_gives_medians_spreads_and_flowers_over_each_row():
    seconds = {(bench.FLOWER, 1): [4.0, 6.0, 5.0], ("fedsweep fp32 packed", 1): [2.0, 3.0, 2.5]}
    cpu = {(bench.FLOWER, 1): [3.0, 3.0, 3.0], ("fedsweep fp32 packed", 1): [2.0, 2.0, 2.0]}
    lines = bench.describe(seconds, cpu).splitlines()
    assert lines[2] == (
        "| Flower (simulation, Ray) | 1 | 3 | 5.00 | 4.00–6.00 | 1.00× | 3.00 | 3.00–3.00 | 1.00× |"
    )
    assert lines[3] == (
        "| fedsweep fp32 packed | 1 | 3 | 2.50 | 2.00–3.00 | 2.00× | 2.00 | 2.00–2.00 | 1.50× |"
    )


def test_the_weight_check_is_the_largest_difference_over_entries():
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.5])}
    b = {"w": torch.tensor([1.0, 2.25]), "b": torch.tensor([0.0])}
    assert bench.max_difference(a, b) == 0.5
    with pytest.raises(SystemExit, match=r"the models' entries differ: \['b'\]"):
        bench.max_difference(a, {"w": b["w"]})
