"""Results on disk -> the MOON paper's tables and figures (``python -m analysis.report``).

Reads what ``study.sweep`` wrote (layout: :mod:`study.sweep_folder`) and never imports Ray.
Folders, lowest first; each imports only the folders above it in this list (and the
top-level modules), never one below:

==========================  ==============================================================
folder or module            job
==========================  ==============================================================
:mod:`analysis.naming`      display names (MOON, CIFAR-10, μ) and percentages
:mod:`analysis.primary_metric`  what a table reports: accuracy, or a score task's primary
                            metric (SRCC, MAE ...): direction, display, caption words
:mod:`analysis.reading`     results folders -> frames: checked files, loading, study
                            groups, mean ± std over seeds
:mod:`analysis.stats`       a trial's statistic, paired intervals, comparisons, the seed
                            plan, convergence, Optuna search, selection
:mod:`analysis.tables`      the Table object, its builders (study shapes, per party,
                            communication, timing) and its Markdown / LaTeX / CSV writers
:mod:`analysis.figures`     figures: curves, sensitivity, partitions, t-SNE, examples
:mod:`analysis.sections`    the report's sections, one module each
:mod:`analysis.report`      the command: assembles the sections into report.md
                            (options: :mod:`analysis.report_options`; ``--track``:
                            :mod:`analysis.tracker_upload`)
==========================  ==============================================================
"""

from analysis.reading.loading import NoResultsError, Results, load_results

__all__ = ["NoResultsError", "Results", "load_results"]
