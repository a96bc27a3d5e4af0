"""The statistics behind the tables: what one trial's number is and what differences over
seeds may claim.  Imports :mod:`analysis.reading` (and the shared top-level modules), never
the tables, figures or sections.

==========================  ==============================================================
module                      job
==========================  ==============================================================
``trial_statistic.py``      what one trial's accuracy is (``--statistic``: final, last:K,
                            val, best)
``paired_stats.py``         paired / Welch intervals over seeds, the resolvable difference
``seed_plan.py``            how many seeds would resolve a stated difference
``comparisons.py``          each cell's Δ to the baseline, the bold rule, no-claim tables
``convergence.py``          had the trials converged by the reported round (mid-climb check)
``search.py``               an Optuna sweep's search history and parameter importance
``selection.py``            how a sweep chose a configuration and how far to trust it
==========================  ==============================================================
"""
