"""Diagnostics: the ground floor of planc.

A `Diagnostic` is plain data (`diagnostic`, `span`, `codes`); `text` renders it as a
compiler does, `formats` for machines; `PlanError` carries a plan's diagnostics;
`InputError` is the base of every error planc raises about its input.
"""

from planc.diagnostics.codes import CODES
from planc.diagnostics.diagnostic import (Diagnostic, Label, Severity, error, note,
                                          severity_counts, unique, warning)
from planc.diagnostics.input_error import InputError
from planc.diagnostics.plan_error import PlanError
from planc.diagnostics.span import Span

__all__ = ["CODES", "Diagnostic", "InputError", "Label", "PlanError", "Severity", "Span", "error", "note",
           "severity_counts", "unique", "warning"]
