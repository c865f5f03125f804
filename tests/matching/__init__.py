"""Rule patterns: Python-regex meaning matched by RE2, backtracking, agreement of every matcher."""
