"""A run's configuration: the typed :class:`~federated.config.run_config.RunConfig`,
its checks, its dataset and model fields, and the settings that are inert for a run."""
