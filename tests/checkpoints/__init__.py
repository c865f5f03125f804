"""Checkpoints: read from their headers, bound to a plan, loaded, saved, resharded."""
