"""Legal settings whose effect a researcher may not expect: one ``warning:`` line each,
printed before a run or a sweep starts (by ``python -m federated.run`` and by a sweep's
dry run and real run alike), never a refusal.

:mod:`federated.config.inert_settings` names values that change nothing; these change
something other than what their words suggest:

* ``execution=fast``, an earlier name kept so old studies run: it runs ``sequential``,
  and says so rather than rename the user's value silently;
* a noised run's ``dp_delta`` above 1/(10 N): allowed (1/N and above are refused) but
  weaker than a privacy review accepts;
* a personalised method (each party evaluated with a model of its own) without local
  test splits (``party_test_fraction=0``): its per-party scores are its parties' models
  on the pooled test set re-weighted by each party's class mix, not on images of the
  party's own — the protocol the personalisation papers report is the latter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from federated.config.checks import EXECUTION_ALIASES
from federated.config.run_config import RunConfig
from federated.registry import load_method


def protocol_notices(config: RunConfig, written: Mapping[str, Any]) -> list[str]:
    """The ``warning:`` lines of ``config`` (complete), ``written`` the values as the user
    wrote them (flags, ``--set``, a study's ``[fixed]``), which hold an alias the config
    has already resolved."""
    lines = []
    alias = written.get("execution")
    if isinstance(alias, str) and alias in EXECUTION_ALIASES:
        lines.append(
            f"warning: execution={alias!r} is the former name of "
            f"execution={EXECUTION_ALIASES[alias]}: parties train one at a time"
        )
    algorithm = load_method("algorithm", config.algorithm)
    if (
        algorithm.evaluates_own_models()
        and not config.party_test_fraction
        and config.party_scores_every > 0
    ):
        lines.append(
            f"warning: algorithm={config.algorithm} evaluates each party with a model of its "
            "own, and party_test_fraction=0 gives no party a test split of its own: each "
            "party's score is its model on the pooled test set re-weighted by its class mix "
            "(set party_test_fraction, e.g. 0.2, to score each on images of its own)"
        )
    lines.extend(delta_notices(config))
    return lines


def delta_notices(config: RunConfig) -> list[str]:
    """A ``warning:`` line where a noised run's delta is above 1/(10 N): allowed (below
    1/N, which is refused), but weaker than a privacy review accepts (docs/privacy.md,
    "delta")."""
    from federated.config.privacy_fields import noise_on
    from federated.privacy_accountant import DELTA_WARNING_FACTOR

    if config.dp_delta is None or not noise_on(config):
        return []
    bound = 1.0 / (DELTA_WARNING_FACTOR * config.n_parties)
    if config.dp_delta <= bound:
        return []
    return [
        f"warning: dp_delta={config.dp_delta:g} is above 1/(10 x n_parties)={bound:.3g}: "
        "the guarantee may fail outright with probability delta, which a privacy review "
        "expects well below 1/N (the default is min(1e-5, 1/(10 N)))"
    ]
