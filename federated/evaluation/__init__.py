"""Measuring models: the held-out splits, scoring on a set, federated validation,
per-party outcomes and the representation probe (Fig. 2)."""
