"""Resolution: the layout of every variable, model-level diagnostics, its fast paths."""
