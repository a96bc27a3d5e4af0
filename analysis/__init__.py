"""Results on disk -> the MOON paper's tables and figures (``python -m analysis.report``).

Reads what ``study.sweep`` wrote (layout: :mod:`study.sweep_folder`) and never imports Ray.

==========================  ==============================================================
module                      job
==========================  ==============================================================
:mod:`~analysis.loading`    results directories -> one tidy frame (a row per trial and
                            round) and a per-trial frame with each trial's status
:mod:`~analysis.summary`    mean ± std over seeds, seed counts, which trials are left out
:mod:`~analysis.primary_metric`  what a table reports: accuracy, or a score task's primary
                            metric (SRCC, MAE ...): direction, display, caption words
:mod:`~analysis.communication`  rounds to reach the baseline's accuracy, speed-up (Table 2)
:mod:`~analysis.paired_stats`  paired / Welch intervals over seeds, resolvable difference
:mod:`~analysis.comparisons`  each cell's Δ to the baseline, the bold rule, no-claim tables
:mod:`~analysis.timing`     time per round (Table 11) on the recorded machine
:mod:`~analysis.grouping`   which trials may be pooled (study groups, split by budget ...)
:mod:`~analysis.tables`     the Table object and the generic table builders
:mod:`~analysis.study_tables`  each study's paper table shape
:mod:`~analysis.figure_layout`    each study's figure layout (lines, panels, varied parameter)
:mod:`~analysis.formats`    Markdown, LaTeX and CSV writers
:mod:`~analysis.figures`    seaborn figures, headless
:mod:`~analysis.search`     Optuna sweeps: search history, parameter importance
:mod:`~analysis.naming`     display names (MOON, CIFAR-10, μ) and percentages
:mod:`~analysis.report`     the command line and report.md
==========================  ==============================================================
"""

from analysis.loading import NoResultsError, Results, load_results

__all__ = ["NoResultsError", "Results", "load_results"]
