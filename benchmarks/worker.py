"""Runs one measurement and prints its result as the last line of stdout (JSON).

    python -m benchmarks.worker '{"kind": "fedsweep", "params": {...}}'

Kinds: ``fedsweep``, ``executions`` (packed and sequential, rounds alternating) and
``straightforward`` (params: a :class:`~benchmarks.cases.Case`),
``bare_step`` (algorithm, dataset, device, threads, seconds) and ``matmul_peak``
(device, threads, size, repeats).  :mod:`benchmarks.isolation` starts one of these per
measurement; :func:`run_job` is also called in-process by ``--isolation inline``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

RESULT_PREFIX = "BENCHMARK-RESULT "


def run_job(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result dict of one measurement (numbers in seconds, bytes, per second)."""
    from benchmarks.cases import Case

    if kind == "fedsweep":
        from benchmarks.fedsweep_rounds import measure_fedsweep

        return measure_fedsweep(Case.from_dict(params))
    if kind == "executions":
        from benchmarks.fedsweep_rounds import measure_executions

        return measure_executions(Case.from_dict(params))
    if kind == "straightforward":
        from benchmarks.straightforward import measure_straightforward

        return measure_straightforward(Case.from_dict(params))
    if kind == "bare_step":
        from benchmarks.bare_step import measure_bare_step

        return measure_bare_step(**params)
    if kind == "matmul_peak":
        from benchmarks.flops import matmul_peak_gflops

        torch.set_num_threads(params["threads"])
        gflops = matmul_peak_gflops(params["device"], params["size"], params["repeats"])
        return {"gflops": gflops}
    raise ValueError(f"unknown measurement kind {kind!r}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = json.loads(argv[0])
    result = run_job(job["kind"], job["params"])
    print(RESULT_PREFIX + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    from federated.runtime.process_exit import exit_process

    exit_process(main())
