"""What machine a sweep ran on, for its manifest (the report's time-per-round table names
it: timings mean nothing without it).

It describes the machine of the sweep's driver, where a local sweep's trials run too; on
a Ray cluster the trials may run on other nodes (the manifest's ``resources`` and the
trials' ``device`` say what each asked for).  Reading it never starts CUDA in the driver:
GPUs are listed by ``nvidia-smi``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from typing import Any

from federated.runtime.cpu_name import cpu_model


def gpu_names() -> list[str]:
    """The names of the GPUs ``nvidia-smi`` lists (empty without one)."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        proc = subprocess.run(
            [smi, "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    if proc.returncode != 0:
        return []
    return [line.strip() for line in proc.stdout.splitlines() if line.strip()]


def machine_description() -> dict[str, Any]:
    """``{"cpu": model, "threads": logical CPUs, "gpus": [names], "system": OS}``."""
    return {
        "cpu": cpu_model(),
        "threads": os.cpu_count() or 0,
        "gpus": gpu_names(),
        "system": f"{platform.system()} {platform.release()}".strip(),
    }
