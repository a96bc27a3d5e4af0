#!/usr/bin/env bash
# Creates the project's virtualenv (.venv) and installs fedsweep into it when it is
# missing, when pyproject.toml changed since the last install, or when it was installed
# from another checkout.  Where apt is
# available and we are root (this machine, CI), also installs Debian's
# dataset-fashion-mnist so that the default dataset is there offline.
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run again.
set -euo pipefail

FEDSWEEP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${FEDSWEEP_VENV:-$FEDSWEEP_ROOT/.venv}"
PYTHON_BIN="${PYTHON:-python3}"

if [ ! -x "$VENV/bin/python" ]; then
    echo "[fedsweep] creating virtualenv $VENV"
    "$PYTHON_BIN" -m venv "$VENV"
fi

stamp="$VENV/.fedsweep-install-stamp"
# the checkout beside pyproject.toml's digest: fedsweep is installed editable, so a venv
# shared by two checkouts (FEDSWEEP_VENV) would otherwise run the first one's code in
# every process that does not start in this checkout (a sweep's Ray head, a trial)
want="$(sha256sum "$FEDSWEEP_ROOT/pyproject.toml" | cut -d' ' -f1) $FEDSWEEP_ROOT"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "[fedsweep] installing fedsweep and its dependencies into $VENV (torch, ray: a few GB the first time)"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    "$VENV/bin/python" -m pip install --quiet -e "$FEDSWEEP_ROOT[test]"
    echo "$want" > "$stamp"
fi

fmnist_dir=/usr/share/datasets/fashion-mnist
if [ ! -f "$fmnist_dir/train-images-idx3-ubyte.gz" ] && command -v apt-get >/dev/null 2>&1 \
        && [ "$(id -u)" = "0" ]; then
    echo "[fedsweep] installing Debian's dataset-fashion-mnist (the offline default dataset)"
    apt-get update -qq >/dev/null 2>&1 || true
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dataset-fashion-mnist >/dev/null 2>&1 \
        || echo "[fedsweep] warning: could not install dataset-fashion-mnist; fmnist will need a download" >&2
fi

export PATH="$VENV/bin:$PATH"
