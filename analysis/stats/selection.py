"""How a sweep chose, and how far to trust the choice: the numbers behind the report's
selection section (docs/validation.md).

For a sweep that selects (an Optuna search, ASHA, a grid rerun with ``--rerun-best``):

- :func:`trial_outcomes`: per trial, its final ranking metric (validation), its final
  test accuracy and what it cost (rounds, party updates — drawn parties that reported,
  summed over rounds — and CPU/GPU seconds of training and evaluation);
- :func:`best_so_far`: the best ranking value after each trial, in proposal order,
  over the trials :func:`compared` keeps;
- :func:`point_choice`: the point the metric chooses (the mean of its compared trials),
  the best test accuracy in hindsight and the chosen point's regret against it
  (labelled hindsight: no tool could have chosen on it without selecting on test);
- :func:`rank_correlation`: Spearman's ρ of validation vs test over completed trials;
- :func:`rerun_outcome`: the chosen configuration's test accuracy over the rerun's
  fresh seeds (mean, t-interval) and the optimism: the search-time test accuracy of the
  chosen trials minus the rerun's mean;
- :func:`evaluation_noise`: the selection re-simulated with k of the N parties
  evaluating (seeded draws, each trial drawing its own k, as each trial of a real
  cross-device sweep would), from the per-party validation values each trial logged at
  its last round: how often the chosen point changes and the expected test regret
  against the full-evaluation choice.  Kuo et al. (2023) show this noise can make good
  tuners no better than random search; here it is measured on the sweep's own trials.

Like with like: a trial ASHA stopped early ran fewer rounds than its config's, so its
ranking value is from an earlier round than the others'; a diverged trial's is from no
trained model.  Neither counts as a best-so-far value nor in a point's mean (the
engine's rule, ``study.selection.best_point``, so the report's choice is the sweep's):
:func:`trial_outcomes` records why a trial is left out (``left_out_why``,
:func:`analysis.stats.search.best_exclusions`), :func:`compared` reads it.

"Test accuracy" above is the sweep's primary metric on test (``test``, a
:class:`~analysis.primary_metric.Metric`: ``test_acc`` for classification, a score task's
``test_srcc``, ``test_mae`` ...), and every "best" and regret is taken in its direction
(a regret is how much worse the choice is: positive, whatever the direction).  The
ranking metric's direction is :func:`~analysis.primary_metric.higher_is_better`'s.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from analysis.primary_metric import ACCURACY, Metric, higher_is_better
from analysis.stats.paired_stats import t_quantile
from analysis.stats.search import best_exclusions

NOISE_DRAWS = 200


def _sign(metric: str, test: Metric) -> float:
    """+1 when a larger value of the ranking ``metric`` (a column of ``test``'s task) is
    better, else -1."""
    return 1.0 if higher_is_better(metric, test) else -1.0


def party_column(metric: str) -> str | None:
    """The parties.csv column holding each party's value of a validation ranking metric
    (``val_acc`` -> ``party_val_acc``); None for any other."""
    return f"party_{metric}" if metric.startswith("val_") else None


def trial_outcomes(
    rounds: pd.DataFrame, trials: pd.DataFrame, metric: str, test: Metric = ACCURACY
) -> pd.DataFrame:
    """One row per trial of ``trials`` (a sweep's, in proposal order): ``trial``,
    ``point``, ``seed``, ``status``, ``value`` (final ``metric``), ``test_acc`` (final;
    ``test``'s column, e.g. ``test_srcc``, for a score sweep), ``rounds`` (run),
    ``party_updates``, ``seconds`` and ``left_out_why`` (why its value is not compared,
    ``""`` when it is: :func:`analysis.stats.search.best_exclusions`)."""
    out = []
    ordered = trials.sort_values(["sweep_started", "order"], kind="stable")
    for _, trial in ordered.iterrows():
        own = rounds[rounds["trial"] == trial["trial"]].sort_values("round")
        last = own.iloc[-1] if len(own) else {}
        seconds = sum(
            float(own[c].fillna(0).sum()) for c in ("train_seconds", "eval_seconds") if c in own
        )
        updates = own["reporting_parties"] if "reporting_parties" in own else own.get("parties")
        out.append(
            {
                "trial": trial["trial"],
                "point": trial.get("point", trial["trial"]),
                "seed": trial.get("seed"),
                "status": trial["status"],
                "value": _number(last.get(metric) if len(own) else math.nan),
                test.column: _number(last.get(test.column) if len(own) else math.nan),
                "rounds": int(last.get("round", 0)) if len(own) else 0,
                "party_updates": float(updates.fillna(0).sum()) if updates is not None else 0.0,
                "seconds": seconds,
            }
        )
    frame = pd.DataFrame(out)
    if frame.empty:
        return frame
    # the rule reads the planned rounds (the config's) against the rounds run
    planned = ordered["rounds"].to_numpy() if "rounds" in ordered else np.nan
    rule = pd.DataFrame(
        {
            "status": frame["status"],
            "value": frame["value"],
            "last_round": frame["rounds"],
            "rounds": planned,
        }
    )
    frame["left_out_why"] = best_exclusions(rule)
    return frame


def compared(outcomes: pd.DataFrame) -> pd.Series:
    """Per trial, whether its ranking value is compared (module docstring): no
    ``left_out_why``; for a frame made without that column, completed with a finite
    value."""
    if "left_out_why" in outcomes:
        return outcomes["left_out_why"] == ""
    return (outcomes["status"] == "completed") & np.isfinite(outcomes["value"])


def left_out(outcomes: pd.DataFrame) -> dict[str, int]:
    """``{reason: trials}`` not compared (``stopped early``, ``diverged`` ...), most
    common first; empty when every trial is compared."""
    if "left_out_why" not in outcomes:
        return {}
    reasons = outcomes["left_out_why"]
    return {str(r): int(n) for r, n in reasons[reasons != ""].value_counts().items()}


def _number(value: object) -> float:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return math.nan


def best_so_far(outcomes: pd.DataFrame, metric: str, test: Metric = ACCURACY) -> pd.Series:
    """The best ranking value after each trial over the :func:`compared` ones (NaN
    before the first; a trial left out carries the best before it); ``metric`` a column
    of ``test``'s task."""
    sign = _sign(metric, test)
    values = outcomes["value"].where(compared(outcomes))
    return ((values * sign).cummax() * sign).ffill()


def point_means(outcomes: pd.DataFrame, test: Metric = ACCURACY) -> pd.DataFrame:
    """Per point: mean ranking value and mean test value (``test``'s column) over its
    :func:`compared` trials with a finite test value."""
    finite = outcomes[compared(outcomes) & np.isfinite(outcomes[test.column])]
    return finite.groupby("point", sort=True)[["value", test.column]].mean()


def point_choice(
    outcomes: pd.DataFrame, metric: str, test: Metric = ACCURACY
) -> dict[str, float | str]:
    """The chosen point (best mean ranking value), its mean test value (``test``), the
    best test value of any point in hindsight, and the regret (how much worse the chosen
    point's test value is than the hindsight one: ≥ 0 in ``test``'s direction)."""
    means = point_means(outcomes, test)
    if means.empty:
        return {}
    chosen = (means["value"] * _sign(metric, test)).idxmax()
    tests = means[test.column]
    best = (tests * test.sign).idxmax()
    return {
        "point": str(chosen),
        "value": float(means.loc[chosen, "value"]),
        "test": float(tests[chosen]),
        "hindsight_point": str(best),
        "hindsight_test": float(tests[best]),
        "regret": float(test.sign * (tests[best] - tests[chosen])),
    }


def ranked_trials(
    outcomes: pd.DataFrame, completed: str = "completed", test: Metric = ACCURACY
) -> pd.DataFrame:
    """The completed trials with a finite ranking value and test value (``test``'s
    column): those a rank correlation is taken over."""
    done = outcomes[(outcomes["status"] == completed) & np.isfinite(outcomes["value"])]
    return done[np.isfinite(done[test.column])]


def rank_correlation(
    outcomes: pd.DataFrame, completed: str = "completed", test: Metric = ACCURACY
) -> float:
    """Spearman's ρ of the ranking value vs the test value (``test``'s column) over
    completed trials (NaN with fewer than 3, or when either is constant)."""
    done = ranked_trials(outcomes, completed, test)
    if len(done) < 3:
        return math.nan
    a, b = done["value"].rank(), done[test.column].rank()
    if a.std() == 0 or b.std() == 0:
        return math.nan
    return float(np.corrcoef(a, b)[0, 1])


def rerun_outcome(
    rerun_tests: Sequence[float],
    search_tests: Sequence[float],
    level: float = 0.95,
    test: Metric = ACCURACY,
) -> dict[str, float]:
    """The rerun's test value (mean, t-interval over its seeds) and the optimism: how
    much better the search-time test value of the chosen trials (their mean) is than
    the rerun's, in ``test``'s direction (search − rerun for accuracy)."""
    values = np.asarray([v for v in rerun_tests if math.isfinite(v)], dtype=float)
    seen = np.asarray([v for v in search_tests if v is not None and math.isfinite(v)])
    if values.size == 0:
        return {}
    mean = float(values.mean())
    half = math.nan
    if values.size > 1:
        half = (
            t_quantile(values.size - 1, level) * float(values.std(ddof=1)) / math.sqrt(values.size)
        )
    search = float(seen.mean()) if seen.size else math.nan
    return {
        "n": float(values.size),
        "mean": mean,
        "low": mean - half,
        "high": mean + half,
        "search_test": search,
        "optimism": test.sign * (search - mean),
    }


def evaluation_noise(
    outcomes: pd.DataFrame,
    party_values: dict[str, tuple[np.ndarray, np.ndarray]],
    metric: str,
    ks: Sequence[int],
    draws: int = NOISE_DRAWS,
    seed: int = 0,
    test: Metric = ACCURACY,
) -> pd.DataFrame:
    """The selection re-simulated with ``k`` evaluating parties, for each k in ``ks``.

    ``party_values``: per trial, (values, samples) of the parties that evaluated at its
    last round.  For each of ``draws`` seeded draws every trial draws its own k parties
    (without replacement; all of them when it has fewer) and scores the size-weighted
    mean; the point with the best mean score is chosen.  The reference, "the full
    evaluation", is the same estimator with every party (:func:`full_evaluation_choice`),
    so k = N reads 0 changed and 0 regret.  Returns one row per k:
    ``changed`` (share of draws choosing another point than the full evaluation),
    ``regret`` (mean test loss against the full-evaluation choice, in ``test``'s
    direction: a fraction for accuracy) and ``regret_hindsight`` (against the best test
    value in hindsight)."""
    # the trials the selection compares (like with like: complete ones), as point_choice
    usable = outcomes[outcomes["trial"].isin(party_values) & compared(outcomes)]
    usable = usable[np.isfinite(usable[test.column])]
    # the reference is the same estimator with every party evaluating (k = N), not the
    # rows' pooled value: for a metric that is no mean over samples (mAP, mIoU) the two
    # can choose differently, and k = N must then read 0 changed, 0 regret
    full = full_evaluation_choice(outcomes, party_values, metric, test)
    if not full:
        return pd.DataFrame(columns=["k", "changed", "regret", "regret_hindsight"])
    tests = point_means(usable, test)[test.column]
    sign = _sign(metric, test)
    rng = np.random.default_rng(seed)
    rows = []
    for k in ks:
        changed = regret = hindsight = 0.0
        for _ in range(draws):
            scores: dict[str, list[float]] = {}
            for _, trial in usable.iterrows():
                values, samples = party_values[trial["trial"]]
                take = min(k, len(values))
                pick = rng.choice(len(values), size=take, replace=False)
                score = float((values[pick] * samples[pick]).sum() / samples[pick].sum())
                scores.setdefault(trial["point"], []).append(score)
            chosen = max(sorted(scores), key=lambda p: sign * float(np.mean(scores[p])))
            changed += chosen != full["point"]
            regret += test.sign * (full["test"] - tests[chosen])
            hindsight += test.sign * (full["hindsight_test"] - tests[chosen])
        rows.append(
            {
                "k": int(k),
                "changed": changed / draws,
                "regret": regret / draws,
                "regret_hindsight": hindsight / draws,
            }
        )
    return pd.DataFrame(rows)


def _all_parties(party_values: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Per trial, the size-weighted mean of every evaluating party's value."""
    return {
        trial: float((values * samples).sum() / samples.sum())
        for trial, (values, samples) in party_values.items()
    }


def full_evaluation_choice(
    outcomes: pd.DataFrame,
    party_values: dict[str, tuple[np.ndarray, np.ndarray]],
    metric: str,
    test: Metric = ACCURACY,
) -> dict[str, float | str]:
    """The point the size-weighted mean over every party's value chooses (the noise
    simulation's reference, k = N), as :func:`point_choice` gives it."""
    usable = outcomes[outcomes["trial"].isin(party_values) & compared(outcomes)]
    usable = usable[np.isfinite(usable[test.column])]
    return point_choice(
        usable.assign(value=usable["trial"].map(_all_parties(party_values))), metric, test
    )


def final_party_values(
    parties: pd.DataFrame, metric: str
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per trial, (values, samples) of the parties with a finite ``metric`` value at
    the trial's last validated round in ``parties`` (parties.csv rows with a ``trial``
    column); trials without per-party validation are left out."""
    column = party_column(metric)
    if column is None or column not in parties or "party_val_samples" not in parties:
        return {}
    out = {}
    for trial, rows in parties.groupby("trial"):
        finite = rows[np.isfinite(rows[column].astype(float))]
        if finite.empty:
            continue
        last = finite[finite["round"] == finite["round"].max()]
        out[str(trial)] = (
            last[column].to_numpy(dtype=float),
            last["party_val_samples"].to_numpy(dtype=float),
        )
    return out
