"""The report's tables: the :class:`~analysis.tables.table.Table` object, its builders and
writers.  Imports :mod:`analysis.reading` and :mod:`analysis.stats`.

==========================  ==============================================================
module                      job
==========================  ==============================================================
``table.py``                the Table every writer renders and the generic builders
                            (accuracy, best-of, communication)
``communication.py``        rounds to reach the baseline's accuracy, speed-up (Table 2)
``study_tables.py``         each study's paper table shape (the study file's ``[report]``)
``party_tables.py``         per-party outcomes: table, distribution figure, parties.csv
``timing.py``               time per round, training vs evaluation (Table 11)
``resolvable_tables.py``    what the tables resolve now (``study.sweep --seeds until:T``)
``formats.py``              Markdown, LaTeX and CSV writers
==========================  ==============================================================
"""
