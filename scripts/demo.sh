#!/usr/bin/env bash
# The main job: sets up .venv if needed, then runs a real, small sweep of the
# moon_mu study (Table 9: MOON's mu, 5 values x 3 seeds) on Fashion-MNIST at
# the laptop budget, and builds its report (tables and figures).
# Fashion-MNIST works offline via Debian's dataset-fashion-mnist.
# Extra arguments go to study.sweep, e.g.  scripts/demo.sh --budget smoke
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$FEDSWEEP_ROOT"
results="${FEDSWEEP_RESULTS:-results}"
name="moon_mu-demo-$(date +%Y%m%d-%H%M%S)"
python -m study.sweep moon_mu --name "$name" --storage-path "$results" "$@"
python -m analysis.report "$results/$name" --out "reports/$name"
