"""Reports: what the commands (and, later, an editor) present about plans, built from the
resolution: `lint` (every plan x every device count, diagnostics once each) and `explain`
(the table of every variable's layout, and one variable's trace)."""
