"""What a DP run's numbers cost: the client-level (ε, δ) every table of DP trials states.

A DP-FedAvg trial's rows carry ``dp_epsilon`` (the ε spent so far, by
:mod:`federated.privacy_accountant`: ``dp-accounting``'s Rényi-DP accountant for
fixed-size cohorts drawn without replacement, replace-one neighbours; ∞ without noise);
its config carries ``dp_delta``.  Loading gives each trial its last round's ε
(``final_dp_epsilon``).  A table of such trials says ε and δ in its caption where one
value holds for all its cells, else gives each cell's ε (mean over seeds) in the cell
itself and its CSV (``dp_epsilon``), the range in the caption; δ and the accountant are
in the caption and notes (docs/privacy.md).  A table of per-party scores states no ε:
evaluating a party is outside the guarantee, which covers the updates it sends.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from analysis.reading.loading import COMPLETED

#: the trial column loading fills from the last round's ``dp_epsilon``
EPSILON = "final_dp_epsilon"
ACCOUNTANT = (
    "dp-accounting's Rényi-DP accountant, fixed-size cohorts drawn without replacement, "
    "replace-one neighbours; docs/privacy.md"
)


def _shown(value: float) -> str:
    return "∞ (no noise: no guarantee)" if math.isinf(value) else f"{value:.3g}"


def epsilon_text(value: float) -> str:
    """One cell's ε as a table cell shows it: ``ε 4.2``, ``ε ∞``."""
    return "ε ∞" if math.isinf(value) else f"ε {value:.3g}"


def delta_words(trials: pd.DataFrame) -> str:
    """The δ of ``trials``' DP runs (their ``dp_delta``): ``1e-05``, several joined, or
    ``not recorded``."""
    deltas = pd.to_numeric(trials.get("dp_delta"), errors="coerce").dropna().unique()
    return ", ".join(f"{d:g}" for d in sorted(deltas)) or "not recorded"


def accountant_name(trials: pd.DataFrame) -> str:
    """A caption's short name of the accountant: the runs' ``dp_accountant`` where
    recorded, else the Rényi-DP accountant fedsweep used before it recorded one."""
    named = trials.get("dp_accountant")
    names = sorted({str(n) for n in named.dropna()}) if named is not None else []
    return f"{', '.join(names)} accountant" if names else "Rényi-DP accountant"


def accountant_words(trials: pd.DataFrame) -> str:
    """The accountant that turned ``trials``' noise into ε: the one their rows or config
    name (``dp_accountant``, where the run recorded it), else the one fedsweep used
    before it recorded a name (:data:`ACCOUNTANT`)."""
    named = trials.get("dp_accountant")
    names = sorted({str(n) for n in named.dropna()}) if named is not None else []
    if not names:
        return ACCOUNTANT
    drawn = trials.get("party_sampling")
    draws = sorted({str(n) for n in drawn.dropna()}) if drawn is not None else []
    sampling = f", parties drawn by {', '.join(draws)} sampling" if draws else ""
    return f"accountant: {', '.join(names)}{sampling}; docs/privacy.md"


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
    delta, accountant = delta_words(counted), accountant_words(counted)
    short = accountant_name(counted)
    keys = [k for k in by if k in counted]
    per_cell = (
        counted.groupby(keys, dropna=False, sort=False)["dp_epsilon"].mean().reset_index()
        if keys
        else pd.DataFrame()
    )
    values = counted["dp_epsilon"]
    if values.round(2).nunique() == 1:
        epsilon = _shown(float(values.iloc[0]))
        tail = f"client-level DP: ε = {epsilon}, δ = {delta}, {short}"
        note = (
            f"Privacy: every cell's trials are client-level (ε, δ)-DP by their last round, "
            f"ε = {epsilon}, δ = {delta} ({accountant})."
        )
        return tail, [note], per_cell
    low, high = float(values.min()), float(values.max())
    tail = f"client-level DP: ε per cell ({_shown(low)}–{_shown(high)}), δ = {delta}, {short}"
    note = (
        f"Privacy: ε differs between cells, from {_shown(low)} to {_shown(high)} by the last "
        f"round, δ = {delta} ({accountant}); each cell gives its ε (mean over its seeds), "
        "as does the CSV's dp_epsilon column."
    )
    return tail, [note], per_cell
