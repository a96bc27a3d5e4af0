"""One federated run in memory: the data laid out by party, the round loop, its row,
its saved state and its files."""
