"""Syntax: plan text -> AST, and the AST back to canonical text.

`parse` reads one file's text into a `planc.syntax.ast.Module` (comments kept) or raises
`PlanError` with one located syntax error; `collect` parses a plan with the files it
includes, into its statements grouped by kind; `read_plan_text` reads a plan file. The
printer (`planc.syntax.printer`) writes a module back in its one canonical layout.
"""

from planc.syntax.files import read_plan_text
from planc.syntax.includes import Collected, Statements, collect
from planc.syntax.parser import parse

__all__ = ["Collected", "Statements", "collect", "parse", "read_plan_text"]
