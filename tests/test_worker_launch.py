"""How a local sweep's raylet starts a trial's process (study/tune/worker_launch.py): a
context of environment variables only is applied here, as Ray applies it, and the worker
is exec'd with the other arguments unchanged; any other context goes to Ray's own
``setup_worker.py``.  Run for real: the launcher execs a small script that prints what it
was given."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from study.tune.ray_head import WORKER_LAUNCH
from study.tune.worker_launch import variables_only

SHOW = """
import json, os, sys
print(json.dumps({"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
                                                 if k.startswith("FEDSWEEP_LAUNCH_")}}))
"""


def context(**fields) -> str:
    """A runtime-environment context as the raylet serialises Ray's RuntimeEnvContext."""
    base = {
        "command_prefix": [],
        "env_vars": {},
        "py_executable": sys.executable,
        "override_worker_entrypoint": None,
        "java_jars": [],
    }
    return json.dumps(base | fields)


def launch(tmp_path: Path, serialized: str | None, *extra: str) -> dict:
    """What the worker the launcher execs is given; ``serialized`` None: no context
    argument at all, as the raylet starts a worker for an actor without a runtime
    environment."""
    script = tmp_path / "show.py"
    script.write_text(SHOW)
    given = [] if serialized is None else [f"--serialized-runtime-env-context={serialized}"]
    proc = subprocess.run(
        [sys.executable, str(WORKER_LAUNCH), str(script), "--worker-id=abc", *extra,
         *given, "--language=PYTHON"],
        capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "FEDSWEEP_LAUNCH_SET": "here"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_context_of_variables_only_is_applied_as_ray_applies_it(tmp_path):
    variables = {
        "FEDSWEEP_LAUNCH_PLAIN": "1",
        "FEDSWEEP_LAUNCH_EXPANDED": "${FEDSWEEP_LAUNCH_SET}/x",
        "FEDSWEEP_LAUNCH_UNSET": "a${FEDSWEEP_LAUNCH_NOT_SET}b",
    }
    shown = launch(tmp_path, context(env_vars=variables), "--runtime-env-hash=7")
    # the context and the language are the launcher's; every other argument is the worker's
    assert shown["argv"] == ["--worker-id=abc", "--runtime-env-hash=7"]
    assert shown["env"] == {
        "FEDSWEEP_LAUNCH_SET": "here",
        "FEDSWEEP_LAUNCH_PLAIN": "1",
        "FEDSWEEP_LAUNCH_EXPANDED": "here/x",
        "FEDSWEEP_LAUNCH_UNSET": "ab",
    }


def test_no_context_runs_the_worker_as_ray_would_with_nothing_set(tmp_path):
    shown = launch(tmp_path, None, "--runtime-env-hash=0")
    assert shown == {"argv": ["--worker-id=abc", "--runtime-env-hash=0"],
                     "env": {"FEDSWEEP_LAUNCH_SET": "here"}}  # fmt: skip


def test_a_context_that_asks_for_more_goes_to_rays_own_setup(tmp_path):
    """A command prefix is Ray's to run (its setup_worker.py execs the worker through
    bash after it): the variable the prefix exports reaches the worker."""
    prefix = ["export", "FEDSWEEP_LAUNCH_PREFIX=1", "&&"]
    shown = launch(tmp_path, context(command_prefix=prefix))
    assert shown["argv"] == ["--worker-id=abc"]
    assert shown["env"]["FEDSWEEP_LAUNCH_PREFIX"] == "1"


@pytest.mark.parametrize(
    ("serialized", "language"),
    [
        (context(command_prefix=["conda", "activate", "x", "&&"]), "PYTHON"),
        (context(py_executable="/opt/other/python"), "PYTHON"),
        (context(override_worker_entrypoint="/other/default_worker.py"), "PYTHON"),
        (context(), "JAVA"),
        ("{not json", "PYTHON"),
        ("[]", "PYTHON"),
        (None, None),
    ],
)
def test_what_only_ray_can_set_up_is_left_to_ray(serialized, language):
    assert variables_only(serialized, language) is None


def test_an_empty_context_sets_nothing():
    assert variables_only(context(), "PYTHON") == {}
    assert variables_only(context(py_executable=None), "PYTHON") == {}
    # no context: Ray's setup_worker.py reads it as "{}" (the driver's own actors)
    assert variables_only(None, "PYTHON") == {}
