"""What a DP run's numbers cost: the client-level (ε, δ) every table of DP trials states.

A DP-FedAvg trial's rows carry ``dp_epsilon`` (the ε spent so far, by
:mod:`federated.privacy_accountant`: ``dp-accounting``'s Rényi-DP accountant for
fixed-size cohorts drawn without replacement, replace-one neighbours; ∞ without noise);
its config carries ``dp_delta``.  Loading gives each trial its last round's ε
(``final_dp_epsilon``).  A table of such trials says ε and δ in its caption where one
value holds for all its cells, else gives each cell's ε (mean over seeds) in its CSV
(``dp_epsilon``) and the range in a note (docs/privacy.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from analysis.reading.loading import COMPLETED

#: the trial column loading fills from the last round's ``dp_epsilon``
EPSILON = "final_dp_epsilon"
#: the trial column naming what computed it (accountant, neighbours, sampling)
ACCOUNTING = "dp_accounting"
#: what a sweep recorded before its rows named the accountant: the only one there was
ACCOUNTANT = (
    "dp-accounting's Rényi-DP accountant, fixed-size cohorts drawn without replacement, "
    "replace-one neighbours; docs/privacy.md"
)


def accountant_words(trials: pd.DataFrame) -> str:
    """What computed the ε of ``trials``: each recorded accounting (dp-accounting's
    ``rdp``/``pld``, the neighbouring relation, the sampling), else :data:`ACCOUNTANT`."""
    recorded = trials[ACCOUNTING].dropna().unique() if ACCOUNTING in trials else []
    if len(recorded) == 0:
        return ACCOUNTANT
    return "dp-accounting: " + "; ".join(sorted(str(r) for r in recorded)) + "; docs/privacy.md"


def _shown(value: float) -> str:
    return "∞ (no noise: no guarantee)" if math.isinf(value) else f"{value:.3g}"


def privacy_words(
    trials: pd.DataFrame, by: Sequence[str], statuses: Sequence[str] = (COMPLETED,)
) -> tuple[str, list[str], pd.DataFrame]:
    """(the caption's tail, the notes, per cell of ``by`` the mean ε over its counted
    trials as ``dp_epsilon``) for the DP trials among ``trials``; empty where none
    recorded an ε."""
    if EPSILON not in trials:
        return "", [], pd.DataFrame()
    counted = trials[trials["status"].isin(list(statuses))]
    eps = pd.to_numeric(counted[EPSILON], errors="coerce")
    counted = counted[eps.notna()].assign(dp_epsilon=eps[eps.notna()])
    if counted.empty:
        return "", [], pd.DataFrame()
    deltas = pd.to_numeric(counted.get("dp_delta"), errors="coerce").dropna().unique()
    delta = ", ".join(f"{d:g}" for d in sorted(deltas)) or "not recorded"
    keys = [k for k in by if k in counted]
    per_cell = (
        counted.groupby(keys, dropna=False, sort=False)["dp_epsilon"].mean().reset_index()
        if keys
        else pd.DataFrame()
    )
    values = counted["dp_epsilon"]
    accountant = accountant_words(counted)
    levels = set(counted["dp_level"].dropna()) if "dp_level" in counted else set()
    # each record protected (DP-SGD in each party) or each party (DP-FedAvg)
    level = "record-level" if levels == {"record"} else "client-level"
    if values.round(2).nunique() == 1:
        epsilon = _shown(float(values.iloc[0]))
        tail = f"{level} DP: ε = {epsilon}, δ = {delta}"
        note = (
            f"Privacy: every cell's trials are {level} (ε, δ)-DP by their last round, "
            f"ε = {epsilon}, δ = {delta} ({accountant})."
        )
        return tail, [note], per_cell
    low, high = float(values.min()), float(values.max())
    tail = f"{level} DP: ε {_shown(low)}–{_shown(high)}, δ = {delta}"
    note = (
        f"Privacy: ε differs between cells, from {_shown(low)} to {_shown(high)} by the last "
        f"round, δ = {delta} ({accountant}); each cell's ε (mean over its seeds) is the "
        "CSV's dp_epsilon column."
    )
    return tail, [note], per_cell
