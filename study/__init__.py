"""The sweep front door: ``python -m study.sweep NAME`` runs a study on Ray Tune.

Ray reads some settings from the environment when it is imported, so the package sets
them here, before any of its modules imports Ray (:mod:`study.tune.ray_session`,
:mod:`study.tune.tuners`); ``setdefault`` leaves a value the user exported as it is.
"""

import os

# Before Ray is imported: the legacy reporter prints the live table we configure, the
# experiment state is snapshotted every second (resume after a hard kill), and the
# snapshot-duration warning that this frequency triggers is silenced.
os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "1")
os.environ.setdefault("TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S", "0")
# A tracker's callback (MLflow's SQLite inserts) takes up to a second per result on a small
# machine; Tune's warning about it at 0.5 s would fill the terminal.
os.environ.setdefault("TUNE_WARN_THRESHOLD_S", "5")
# The driver handles SIGINT itself (study.interruption) and stops Tune through SIGUSR1.
os.environ.setdefault("TUNE_DISABLE_SIGINT_HANDLER", "1")

# Ctrl-C and SIGTERM stop the sweep command at any moment, its ~2 s of imports included:
# the driver's handler owns both signals from here (study/interruption.py).
from study.interruption import DRIVER_SIGNALS, launched_as_sweep_command

if launched_as_sweep_command():
    DRIVER_SIGNALS.install()
