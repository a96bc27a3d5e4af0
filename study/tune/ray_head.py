"""A sweep's local head node, held by this process, which :class:`study.local_ray.LocalRay`
launches (and says why a child process holds it) from the code the driver runs.

What ``ray start --head --block`` does for a loopback-only node, without its command
line: ``ray start`` imports Ray's whole CLI (Ray Serve's among it), about 1.8 s before
the first Ray process starts on a 2-core machine, and cannot leave out Ray's client
server.  Here the node is Ray's own :class:`ray._private.node.Node`, as ``ray.init`` and
``ray start`` build it, with:

* every port on 127.0.0.1: the GCS's and the API server's given (free ports the driver
  picked), the dashboard agent's chosen by Ray;
* no client server (nothing connects through it), no log monitor (the driver takes no
  worker output), the autoscaler's monitor only with ``--dashboard`` (its cluster view
  is the monitor's only reader on a fixed-size node), no prestarted idle workers, no
  usage stats, no drain when it is stopped;
* trials at the sweep's own priority (:data:`TRIALS_AT_THE_SWEEPS_PRIORITY`), not Ray's
  niceness 15 for its workers;
* token authentication as the environment sets it (the driver made the token first).

It prints :data:`study.local_ray.READY_LINE` once the node is up, then blocks: a SIGTERM
stops the node (Ray's handler, as ``ray start --block`` has, without its drain), and a Ray
process that dies unexpectedly stops the others and this process with status 1.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from study.local_ray import LOOPBACK, READY_LINE

# A Ray process's exit statuses that mean it was stopped, not that it failed (as
# `ray start --block` counts them).
STOPPED_STATUSES = frozenset({0, signal.SIGTERM, -signal.SIGTERM, 128 + signal.SIGTERM})
# The raylet starts one idle Python worker per CPU ahead of any task (`ray::IDLE`), about
# 0.4 CPU-s each; a sweep's trials are actors with workers of their own, so the idle ones
# were paid for and never used.  Read by the raylet from its environment; a value the
# user exported stands.
NO_PRESTARTED_WORKERS = {"RAY_enable_worker_prestart": "0", "RAY_prestart_worker_first_driver": "0"}
# On SIGTERM Ray first drains the node for Ray Serve (up to 30 s), polling every 0.5 s
# for the raylet to exit; a sweep's node has no Serve and, when it is stopped, no job
# left (the driver has disconnected), so the drain only added about half a second to
# every sweep's end.  0 turns it off (Ray's setting); a value the user exported stands.
NO_DRAIN = {"RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
# The raylet starts its workers, a sweep's trials among them, 15 niceness levels below
# itself.  Beside any other work at the user's priority that starved them: on a 2-core
# machine beside three busy loops a smoke round took 18 s instead of 0.25 (the trial
# had 3% of a core), and the suite's lost-node drill did not end within 600 s.  The
# trials are the sweep's work, so they run at the priority the user started the sweep
# with (0: the raylet's own, which it has from the driver; `nice python -m study.sweep`
# lowers all of it); a value the user exported stands.
TRIALS_AT_THE_SWEEPS_PRIORITY = {"RAY_worker_niceness": "0"}
# What the raylet runs to start a worker: Ray's setup_worker.py without its Ray import
# where the worker's context holds only environment variables, as every trial's does
# (study/tune/worker_launch.py).
WORKER_LAUNCH = Path(__file__).with_name("worker_launch.py")


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="study.tune.ray_head")
    parser.add_argument("--port", type=int, required=True, help="the GCS's port")
    parser.add_argument("--dashboard-port", type=int, required=True, help="the API server's")
    parser.add_argument("--dashboard", action="store_true", help="serve Ray's dashboard")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    settings = {**NO_PRESTARTED_WORKERS, **NO_DRAIN, **TRIALS_AT_THE_SWEEPS_PRIORITY}
    for name, value in settings.items():
        os.environ.setdefault(name, value)
    # imported here: the arguments are read before the second it takes
    from ray._private.authentication.authentication_token_setup import (
        ensure_token_if_auth_enabled,
        maybe_enable_token_auth_if_token_available,
    )
    from ray._private.node import Node
    from ray._private.parameter import RayParams

    params = RayParams(
        node_ip_address=LOOPBACK,
        node_name=LOOPBACK,
        include_dashboard=args.dashboard,
        dashboard_host=LOOPBACK,
        dashboard_port=args.dashboard_port,
        dashboard_agent_listen_port=0,
        include_log_monitor=False,
        no_monitor=not args.dashboard,
        setup_worker_path=str(WORKER_LAUNCH),
    )
    params.gcs_server_port = args.port
    maybe_enable_token_auth_if_token_available()
    ensure_token_if_auth_enabled(None, create_token_if_missing=False)
    # shutdown_at_exit: Ray's SIGTERM handler stops the node's processes (each gets 1 s)
    node = Node(params, head=True, shutdown_at_exit=True, spawn_reaper=True)
    print(f"{READY_LINE} at {node.address}", flush=True)
    while True:
        time.sleep(1)
        failed = [
            (kind, process.returncode)
            for kind, process in node.dead_processes()
            if process.returncode not in STOPPED_STATUSES
        ]
        if failed:
            print(f"Ray processes exited: {failed}; stopping the node", flush=True)
            node.kill_all_processes(check_alive=False, allow_graceful=False)
            return 1


if __name__ == "__main__":
    sys.exit(main())
