"""Diagnostics: the code registry, text rendering, SARIF and JUnit, escaping."""
