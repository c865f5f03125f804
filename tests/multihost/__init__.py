"""Clusters: where a process sits, launchers, and real multi-process runs (scripts in workers/)."""
