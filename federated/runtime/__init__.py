"""The process a run lives in: its device and threads, memory, random streams, and
files written atomically.  Foundations: imports nothing else of fedsweep but
:mod:`federated.params`."""
