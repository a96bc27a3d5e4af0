"""Reading results folders: the bottom of ``analysis`` (it imports no other folder).

==========================  ==============================================================
module                      job
==========================  ==============================================================
``trial_files.py``          every file of a results folder through one checker per kind
                            (a damaged file is named, never averaged)
``loading.py``              results folders -> :class:`~analysis.reading.loading.Results`:
                            a row per (trial, round) and a row per trial with its status
``study_spec.py``           what the report knows of a study, from the sweep's manifest
``grouping.py``             which trials may be pooled into one table (study groups)
``summary.py``              mean ± std over seeds, seed counts, the trials left out
==========================  ==============================================================
"""
