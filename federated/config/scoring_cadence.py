"""The default per-party scoring cadence (``party_scores_every`` left unset).

Scoring per-party outcomes touches every one of the N parties on a scored round (each
party's class mix, or one pass over every party's local test split: about 0.45 s a round
at N = 1,000 parties with ``party_test_fraction`` set, one thread), whichever parties
were drawn.  Left unset, the period is chosen so that scoring averages at most
:data:`PARTIES_SCORED_PER_ROUND` party scorings a round: every round up to that many
parties (every run of 100 parties or fewer scores as it always did), every
``ceil(N / 100)``-th round above it (N = 1,000: every 10th; N = 50,000: every 500th),
and always the last.  An explicit value (0: off, k: every k-th round) is kept as given.
"""

from __future__ import annotations

import math

#: the most party scorings a round averages under the default cadence
PARTIES_SCORED_PER_ROUND = 100


def default_party_scores_every(n_parties: int) -> int:
    """The scoring period in rounds (>= 1) for a run of ``n_parties`` parties."""
    return max(1, math.ceil(n_parties / PARTIES_SCORED_PER_ROUND))


def party_scores_every_for(given: int | None, n_parties: int | None) -> int | None:
    """``party_scores_every`` once ``n_parties`` is known: ``given`` where set, else
    :func:`default_party_scores_every` (None while the data have not counted the
    parties)."""
    if given is not None or n_parties is None:
        return given
    return default_party_scores_every(n_parties)
