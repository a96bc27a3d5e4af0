"""Cross-cutting features as hooks on the round (federated/engine/round_hooks.py): a
hook added to a run's list is called at each point in order, adds its row columns and
crosses a checkpoint; the built-in list follows the config; the round loop holds no
feature's branch."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from federated.engine.round_hooks import (
    PinTrainingParties,
    PrivateAggregation,
    ProbeFirstParty,
    RoundHook,
)
from federated.engine.round_loop import FederatedRun
from tests.conftest import tiny


class Recorder(RoundHook):
    """Writes down every point it is called at; counts rounds in its state."""

    state_key = "recorder"

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.rounds = 0

    def before_round(self, parties: list[int]) -> None:
        self.calls.append(f"before {parties}")

    def after_local(self, job: Any, round_number: int, index: int) -> float:
        self.calls.append(f"local {job.party}#{index}")
        return 0.0

    def after_server_step(self, model: Any) -> None:
        self.calls.append("server step")

    def row_fields(self) -> dict[str, Any]:
        self.rounds += 1
        return {"recorded_rounds": self.rounds}

    def after_round(self, parties: list[int]) -> None:
        self.calls.append("after")

    def state_for_checkpoint(self) -> int:
        return self.rounds

    def restore(self, state: Any) -> None:
        self.rounds = int(state)


def test_a_hook_is_called_at_each_point_in_order_and_crosses_a_checkpoint(synthetic):
    run = FederatedRun(tiny(rounds=2, sample_fraction=0.5), synthetic)
    recorder = Recorder()
    run.hooks.hooks.append(recorder)
    row = run.run_round()
    parties = recorder.calls[0]
    assert parties.startswith("before [")
    drawn = [int(p) for p in re.findall(r"\d+", parties)]
    assert len(drawn) == 2
    assert recorder.calls == [
        f"before {drawn}",
        f"local {drawn[0]}#0",
        f"local {drawn[1]}#1",
        "server step",
        "after",
    ]
    assert row["recorded_rounds"] == 1
    state = run.state_dict()
    assert state["recorder"] == 1
    again = FederatedRun(tiny(rounds=2, sample_fraction=0.5), synthetic)
    fresh = Recorder()
    again.hooks.hooks.append(fresh)
    again.load_state_dict(state)
    assert fresh.rounds == 1 and again.run_round()["recorded_rounds"] == 2


def test_the_hook_list_follows_the_config(synthetic):
    def kinds(**values):
        return [type(h) for h in FederatedRun(tiny(rounds=1, **values), synthetic).hooks.hooks]

    assert kinds() == [PinTrainingParties]
    assert kinds(representations_at="1") == [PinTrainingParties, ProbeFirstParty]
    private = dict(dp_noise_multiplier=0.5, dp_clip_norm=0.05)
    assert kinds(**private) == [PinTrainingParties, PrivateAggregation]


def test_the_round_loop_reads_no_features_fields():
    source = (Path(__file__).parents[1] / "federated/engine/round_loop.py").read_text()
    assert not re.search(r"\bdp_|\.privacy\b|ClientPrivacy|\.pin\(|\.capture\(", source)
