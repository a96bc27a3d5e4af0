"""Benchmarks of fedsweep's round loop (issue 6).

``python -m benchmarks.round_time`` measures seconds per round, training samples per
second, evaluation seconds and peak memory of FedAvg, FedProx and MOON, and sets them
beside three yardsticks: the same math written the plain way (:mod:`.straightforward`),
the bare model step on a batch already in memory (:mod:`.bare_step`), and the machine's
matmul peak (:mod:`.flops`).  A second table scales parties and local epochs
(:mod:`.scaling`); a third runs real ``study.sweep`` sweeps with one and with several
trials at once (:mod:`.side_by_side`).  Every issue-6 target is printed as a row
"target / measured / met or missed" (:mod:`.targets`).

Each measurement runs in a fresh Python process (:mod:`.isolation`, :mod:`.worker`) so
that its peak memory is its own and its torch thread count is set before torch starts.
"""
