"""The checker: declaration diagnostics, each statement, `planc fmt`, overlapping rules."""
