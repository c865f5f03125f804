"""Diagnostics: the ground floor of planc.

A `Diagnostic` is plain data (`diagnostic`, `span`); `text` renders it as a compiler
does, `formats` for machines; `PlanError` carries a plan's diagnostics; `InputError` is
the base of every error planc raises about its input; `codes` is the catalogue of every
code, `CODES` its titles.
"""

from planc.diagnostics.diagnostic import (Diagnostic, Label, Severity, error, note,
                                          severity_counts, unique, warning)
from planc.diagnostics.input_error import InputError
from planc.diagnostics.plan_error import PlanError
from planc.diagnostics.span import Span
from planc.lazy import lazy_face

__all__ = ["CODES", "Diagnostic", "InputError", "Label", "PlanError", "Severity", "Span",
           "error", "note", "severity_counts", "unique", "warning"]


# The catalogue (every code's documentation) loads on first use: a `planc lint` that
# prints its diagnostics never reads it.
__getattr__ = lazy_face(__name__, {"CODES": "planc.diagnostics.codes"})
