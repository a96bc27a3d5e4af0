"""A checkpoint is data, never code: a crafted run state is refused without running
anything it holds (loaded with weights_only=True)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from federated.trainable import STATE_FILE, CheckpointError, load_run_state


class RunsCode:
    """A pickle that would create a file when unpickled without weights_only."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


def test_a_crafted_run_state_is_refused_without_running_its_code(tmp_path):
    marker = tmp_path / "code-ran"
    with open(tmp_path / STATE_FILE, "wb") as fh:
        pickle.dump({"model": RunsCode(str(marker))}, fh)
    with pytest.raises(CheckpointError) as caught:
        load_run_state(tmp_path)
    assert not marker.exists()
    assert "\n" not in str(caught.value) and STATE_FILE in str(caught.value)
