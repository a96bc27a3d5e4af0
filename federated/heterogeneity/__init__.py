"""The kinds of heterogeneity a study sweeps: label and quantity skew (partitions),
feature skew, and system heterogeneity (stragglers, dropouts)."""
