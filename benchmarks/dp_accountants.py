"""``python -m benchmarks.dp_accountants``: the epsilon each party sampling and accountant
gives for the same noise, rounds and delta (issue 69, item 2), as a Markdown table.

    python -m benchmarks.dp_accountants

Three ways to account the same sigma (noise std over the clip norm C on the sum of
clipped updates): fixed-size cohorts drawn without replacement under replace-one
neighbours by the Rényi accountant (``party_sampling=fixed``, fedsweep's default);
Poisson sampling at q = m/N under add-or-remove neighbours by the Rényi accountant
(``party_sampling=poisson dp_accountant=rdp``) and by the PLD accountant (``poisson``,
``pld``, the default under Poisson).  All through :func:`federated.privacy_accountant.
epsilon_after`, which the tests hold equal to ``dp_accounting`` called directly.  Cases:
the issue's (100 parties, 10 a round, sigma = 1, delta = 1e-5, rounds 1 and 5) and the
cross-device study of docs/results/privacy.md (600 parties, 60 a round, 30 rounds,
sigma 0.5 / 1 / 2, at its delta 1/N^1.1 = 0.00088 and at the default 1e-5).  Units:
epsilon (unitless), seconds per value.
"""

from __future__ import annotations

import time

from federated.privacy_accountant import epsilon_after

#: (parties N, per round m, sigma, rounds, delta)
CASES = [
    (100, 10, 1.0, 1, 1e-5),
    (100, 10, 1.0, 5, 1e-5),
    *[(600, 60, sigma, 30, 600**-1.1) for sigma in (0.5, 1.0, 2.0)],
    *[(600, 60, sigma, 30, 1e-5) for sigma in (0.5, 1.0, 2.0)],
]
WAYS = [("fixed", "rdp"), ("poisson", "rdp"), ("poisson", "pld")]


def main() -> None:
    print(
        "| N | m | σ | rounds | δ | fixed, RDP, replace-one | Poisson, RDP, add/remove "
        "| Poisson, PLD, add/remove | RDP fixed / PLD Poisson |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, m, sigma, rounds, delta in CASES:
        values, seconds = [], 0.0
        for sampling, accountant in WAYS:
            start = time.perf_counter()
            values.append(epsilon_after(rounds, n, m, sigma, delta, sampling, accountant))
            seconds += time.perf_counter() - start
        cells = " | ".join(f"{v:.3g}" for v in values)
        print(
            f"| {n} | {m} | {sigma:g} | {rounds} | {delta:.2g} | {cells} "
            f"| {values[0] / values[2]:.1f}× |"
        )


if __name__ == "__main__":
    main()
