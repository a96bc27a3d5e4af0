"""The sweep front door: ``python -m study.sweep NAME`` runs a study on Ray Tune."""
