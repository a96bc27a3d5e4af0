"""The modules of ``study`` that import Ray: starting or joining Ray, building and
running the Tuner, the trial actor, the Optuna searcher, the live view and the trackers'
callbacks.  Nothing outside ``study.sweep``'s run path imports them, so a dry run, a
plan or a report never loads Ray."""
