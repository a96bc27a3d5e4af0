"""The torch-free contract every side reads alike: file names and status words of a
sweep's results (:mod:`~federated.contract.results`) and each task's metric specs
(:mod:`~federated.contract.metrics`).  ``analysis`` imports it without loading torch."""
