#!/usr/bin/env bash
# The test command: sets up .venv if needed, lints, then runs the whole suite
# (slow end-to-end tests included).  Extra arguments go to pytest, e.g.
#   scripts/test.sh -m "not slow"      # the fast part only
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$FEDSWEEP_ROOT"
ruff check .
exec python -m pytest "$@"
