#!/usr/bin/env bash
# The main job: sets up .venv if needed, then runs a real federated run on
# Fashion-MNIST (offline via Debian's dataset-fashion-mnist).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bootstrap.sh"
cd "$FEDSWEEP_ROOT"
exec python -m federated.run --algorithm moon --dataset fmnist --rounds 5 --local-epochs 1 "$@"
