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
#: the trial column naming what computed it (accountant, neighbours, sampling)
ACCOUNTING = "dp_accounting"
#: what a sweep recorded before its rows named the accountant: the only one there was
ACCOUNTANT = (
    "dp-accounting's Rényi-DP accountant, fixed-size cohorts drawn without replacement, "
    "replace-one neighbours; docs/privacy.md"
)


def accountant_words(trials: pd.DataFrame) -> str:
    """What computed the ε of ``trials``: each accounting their rows recorded
    (dp-accounting's ``rdp``/``pld``, the neighbouring relation, the sampling), else the
    accountant and party sampling their configs name, else :data:`ACCOUNTANT` (the one
    fedsweep used before it recorded either)."""
    recorded = trials[ACCOUNTING].dropna().unique() if ACCOUNTING in trials else []
    if len(recorded):
        words = "; ".join(sorted(str(r) for r in recorded))
        return f"dp-accounting: {words}; docs/privacy.md"
    named = trials.get("dp_accountant")
    names = sorted({str(n) for n in named.dropna()}) if named is not None else []
    if not names:
        return ACCOUNTANT
    drawn = trials.get("party_sampling")
    draws = sorted({str(n) for n in drawn.dropna()}) if drawn is not None else []
    sampling = f", parties drawn by {', '.join(draws)} sampling" if draws else ""
    return f"accountant: {', '.join(names)}{sampling}; docs/privacy.md"


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
    """A caption's short name of the accountant: the accounting the rows recorded
    (``dp_accounting``: ``rdp`` or ``pld`` first), else the runs' ``dp_accountant``,
    else the Rényi-DP accountant fedsweep used before it recorded one."""
    words = {"rdp": "Rényi-DP", "pld": "PLD"}
    recorded = trials[ACCOUNTING].dropna() if ACCOUNTING in trials else pd.Series(dtype=str)
    named = trials.get("dp_accountant")
    kinds = {str(r).split(",")[0].strip() for r in recorded}
    if not kinds and named is not None:
        kinds = {str(n) for n in named.dropna()}
    if not kinds:
        return "Rényi-DP accountant"
    return ", ".join(words.get(k, k) for k in sorted(kinds)) + " accountant"


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
    accountant = accountant_words(counted)
    levels = set(counted["dp_level"].dropna()) if "dp_level" in counted else set()
    # each record protected (DP-SGD in each party) or each party (DP-FedAvg)
    level = "record-level" if levels == {"record"} else "client-level"
    if values.round(2).nunique() == 1:
        epsilon = _shown(float(values.iloc[0]))
        tail = f"{level} DP: ε = {epsilon}, δ = {delta}, {short}"
        note = (
            f"Privacy: every cell's trials are {level} (ε, δ)-DP by their last round, "
            f"ε = {epsilon}, δ = {delta} ({accountant})."
        )
        return tail, [note], per_cell
    low, high = float(values.min()), float(values.max())
    tail = f"{level} DP: ε per cell ({_shown(low)}–{_shown(high)}), δ = {delta}, {short}"
    note = (
        f"Privacy: ε differs between cells, from {_shown(low)} to {_shown(high)} by the last "
        f"round, δ = {delta} ({accountant}); each cell gives its ε (mean over its seeds), "
        "as does the CSV's dp_epsilon column."
    )
    return tail, [note], per_cell
