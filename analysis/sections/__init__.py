"""The report's sections, one module each, in report.md's order; :mod:`analysis.report`
assembles them.  Each returns its lines of markdown and writes its tables and figures into
the report folder.  The top of ``analysis``: nothing but :mod:`analysis.report` imports it.

==========================  ==============================================================
module                      section
==========================  ==============================================================
``opening.py``              the title, the command, what a trial's accuracy is
``runs.py``                 *Runs*: one line per sweep, how to read the numbers
``study_group.py``          one study group: heading, then the four below
``group_tables.py``         its tables, with Table 11 (time per round)
``group_figures.py``        a grid group's curves, sensitivity and heatmap
``per_party.py``            a grid group's per-party table and figure, Fig. 2's t-SNE
``optuna_search.py``        an Optuna group's search history and parameter importance
``selection.py``            *Selection*: what a selecting sweep chose and its worth on test
``partitions.py``           *Data partitions* (Fig. 5)
``feature_skew.py``         *Feature skew*: example images per party
``trials_not_counted.py``   *Trials not counted*: errored, diverged, unfinished trials
``files_not_counted.py``    *Files not counted*: damaged files of counted trials
``reading_problems.py``     *Problems while reading*
``reproduction.py``         *What of the paper this reproduces*
``data_files.py``           data/*.csv and the closing paragraph naming them
``markdown.py``             shared: unique file stems, table links, figure blocks
==========================  ==============================================================
"""
