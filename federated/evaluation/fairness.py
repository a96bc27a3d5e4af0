"""The fairness block: one metric of every party on its own split, summarised.

FederatedScope reports a personalised run's per-client results as a weighted average,
a plain average and a "fairness" block (spread, deciles); fedsweep reports, for the
parties' own local test splits (``party_test_<stem>``) and validation splits
(``party_val_<stem>``), each party's value of the model it is evaluated with:

* ``<prefix>`` — the sample-weighted mean: sum_i n_i v_i / sum_i n_i (n_i: the party's
  split size), the value of one pass over all the parties' samples;
* ``<prefix>_mean`` — the mean over parties, each party counting once;
* ``<prefix>_worst10`` — the worst decile: the mean of the ceil(k / 10) lowest of the
  k parties' values (:func:`federated.evaluation.party_scores.worst_decile`, the same
  definition as ``party_acc_worst10``; for a metric where lower is better, the highest);
* ``<prefix>_std`` — the spread: the population standard deviation (ddof 0).

Only parties with a value count (a party not evaluated, or with an empty split, is
NaN).  Fractions for accuracies; the metric's own units otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from federated.evaluation.party_scores import worst_decile

NAN = float("nan")
SUFFIXES = ("", "_mean", "_worst10", "_std")


def fairness_block(
    values: Sequence[float], sizes: Sequence[int], prefix: str, lower_is_better: bool = False
) -> dict[str, float]:
    """The block's four columns (module docstring) named ``<prefix><suffix>``."""
    v = np.asarray(values, dtype=np.float64)
    n = np.asarray(sizes, dtype=np.float64)
    kept = np.isfinite(v) & (n > 0)
    if not kept.any():
        return {prefix + s: NAN for s in SUFFIXES}
    v, n = v[kept], n[kept]
    worst = -worst_decile(-v) if lower_is_better else worst_decile(v)
    return {
        prefix: float((v * n).sum() / n.sum()),
        prefix + "_mean": float(v.mean()),
        prefix + "_worst10": float(worst),
        prefix + "_std": float(v.std()),
    }


def no_fairness_block(prefix: str) -> dict[str, float]:
    """The block's columns without values (rounds that do not measure them)."""
    return {prefix + s: NAN for s in SUFFIXES}
