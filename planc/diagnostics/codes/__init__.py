"""The catalogue of diagnostic codes: every code once, with its title and its documentation.

A code never changes meaning; retired codes are not reused. The entries live in one module
per family, the hundreds of the code: `syntax` (P0xx), `declarations` (P1xx), `devices`
(P2xx), `model` (P3xx), `checkpoints` (P4xx), `writing` (P5xx: `planc suggest` and
`planc import`), `multihost` (P6xx), `editor` (P7xx: `planc lsp`), `aot` (P8xx:
`planc aot`). `CODES` (code -> title, what `planc code` lists and SARIF's short
description) and `DOCS` (code -> `Doc`, the form of ruff's rule pages: `planc code CODE`, docs/diagnostics.md's code table, LSP hovers,
SARIF's rule help; see `planc.diagnostics.docs`) are both read from them.

To add a code: an entry in its family's module, in code order:

    "P999": dict(
        severity="error",            # the table's severity cell ("warning / error", ...)
        title="a one-line title",    # `planc code` lists it
        what="what the diagnostic reports",   # the table's "problem" cell (markdown)
        why="why that is a problem, one or two sentences",
        example="a plan line that triggers it",  # the table's "example" cell
        fix="what to change"),

Write `|` plainly: the table escapes it. Then regenerate docs/diagnostics.md's table with
`.venv/bin/python -m planc.diagnostics.docs --write-docs` (it rewrites only the table).

>>> CODES["P111"], DOCS["P111"].what
('duplicate rule', 'duplicate rule')
"""

from __future__ import annotations

from dataclasses import dataclass

from planc.diagnostics.codes import (aot, checkpoints, declarations, devices, editor, model,
                                     multihost, syntax, writing)

FAMILIES = (syntax, declarations, devices, model, checkpoints, writing, multihost, editor, aot)


@dataclass(frozen=True)
class Doc:
    """One code's entry: its severity, title, what it reports, why, an example, the fix."""

    severity: str
    title: str
    what: str
    why: str
    example: str
    fix: str


# Code order, family by family (each family's module is in code order).
DOCS: dict[str, Doc] = {code: Doc(**entry) for family in FAMILIES
                        for code, entry in family.ENTRIES.items()}
CODES: dict[str, str] = {code: doc.title for code, doc in DOCS.items()}

__all__ = ["CODES", "DOCS", "Doc", "FAMILIES"]
