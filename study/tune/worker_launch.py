"""How a local sweep's raylet starts a Python worker (a trial's process): Ray's own
``setup_worker.py`` without its Ray import where all it would set up is environment
variables.

The raylet starts every worker as ``python setup_worker.py default_worker.py ARGS
--serialized-runtime-env-context=JSON --language=PYTHON``.  Ray's ``setup_worker.py``
imports Ray (about 0.5 CPU-s on a 2-core machine), applies the runtime environment's
context (a command prefix, environment variables, another interpreter, another entry
point) and execs ``default_worker.py``, which imports Ray again.  A sweep's trials ask
for no runtime environment: their context holds only environment variables (Ray Tune's
``PL_DISABLE_FORK=1``), and an actor the driver makes without one (W&B's logging
actor) gets no context at all, which Ray reads as an empty one.  This script, which
imports nothing of Ray, sets those variables as Ray does and execs the worker itself
with the same arguments.  Any other context goes to
Ray's own ``setup_worker.py`` with the arguments unchanged, so what it sets up is Ray's
to set up.  :mod:`study.tune.ray_head` names this file as the node's
``setup_worker_path``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

# the fields of Ray's RuntimeEnvContext that ask Ray's setup_worker.py to set something up
RAYS_FIELDS = ("command_prefix", "override_worker_entrypoint", "java_jars")
# what ray._private.utils.update_envs removes from a value after expanding it: a ${NAME}
# whose variable is not set
UNSET_VARIABLE = re.compile(r"\$\{[A-Z0-9_]+\}")


def ray_setup_worker() -> str:
    """Ray's own ``setup_worker.py`` (found without importing Ray)."""
    spec = importlib.util.find_spec("ray")
    if spec is None or spec.origin is None:
        raise SystemExit("Ray is not installed for this interpreter")
    return str(Path(spec.origin).parent / "_private" / "workers" / "setup_worker.py")


def variables_only(context_json: str | None, language: str | None) -> dict[str, str] | None:
    """The environment variables of a Python worker's runtime-environment context when
    they are all it asks for; None where it asks for more (or cannot be read here), which
    Ray's ``setup_worker.py`` then sets up."""
    if language != "PYTHON":
        return None
    try:
        # no context at all is Ray's empty one, as its setup_worker.py reads it
        context = json.loads("{}" if context_json is None else context_json)
    except ValueError:
        return None
    if not isinstance(context, dict) or any(context.get(field) for field in RAYS_FIELDS):
        return None
    if context.get("py_executable") not in (None, sys.executable):
        return None
    variables = context.get("env_vars") or {}
    if not isinstance(variables, dict):
        return None
    return {str(name): str(value) for name, value in variables.items()}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--serialized-runtime-env-context")
    parser.add_argument("--language")
    known, worker_argv = parser.parse_known_args(argv)
    variables = variables_only(known.serialized_runtime_env_context, known.language)
    if variables is None:
        os.execv(sys.executable, [sys.executable, ray_setup_worker(), *argv])
    for name, value in variables.items():  # as ray._private.utils.update_envs sets them
        os.environ[name] = UNSET_VARIABLE.sub("", os.path.expandvars(value))
    os.execv(sys.executable, [sys.executable, *worker_argv])


if __name__ == "__main__":
    main(sys.argv[1:])
