#!/usr/bin/env bash
# The test command: sets up .venv if needed, lints and checks formatting, then runs the whole suite
# (slow end-to-end tests included) on two pytest-xdist workers: the slow tests that run
# real Ray sweeps form two groups, each run one test after another on one worker (at most
# two local Ray clusters at a time), and the rest fill in (docs/results/test-suite.md);
# the 25 slowest tests are listed at the end.  Extra arguments go to pytest, e.g.
#   scripts/test.sh -m "not slow"      # the fast part only
#   scripts/test.sh -n 0               # one process (no workers)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$FEDSWEEP_ROOT"
# Every process the suite starts (a sweep's driver and its trial workers, a command-line
# run, a benchmark) imports fedsweep's modules; where PYTHONDONTWRITEBYTECODE is set (this
# project's machines and CI) none keeps what it compiled, so each compiled them again
# (about 0.4 CPU-s a process, some 150 processes).  Compiled once here instead; a file
# that does not compile is left to ruff and pytest, which name it.
python -m compileall -q -j 0 federated study search_spaces analysis benchmarks examples >/dev/null || true
ruff check .
ruff format --check .
exec python -m pytest -n "${FEDSWEEP_TEST_WORKERS:-2}" --dist loadgroup --durations=25 "$@"
