"""Diagnostics: what planc says about a plan, located in its source.

Every problem planc finds is a `Diagnostic` with a stable code (listed in `CODES` and in
the README), a severity, a message, a primary `Span` and optional secondary spans and
help. `PlanError` carries all of them; nothing stops at the first problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


@dataclass(frozen=True, slots=True)
class Span:
    """A region of a source file; lines and columns count from 1, the end is exclusive."""

    file: str
    line: int
    column: int
    end_line: int
    end_column: int

    def shifted(self, start: int, length: int) -> "Span":
        """A sub-span `length` characters long, `start` characters into a one-line span."""
        col = self.column + start
        return Span(self.file, self.line, col, self.line, col + max(length, 1))


@dataclass(frozen=True, slots=True)
class Label:
    span: Span
    message: str = ""


@dataclass(frozen=True)
class Diagnostic:
    """One problem: `code`, `severity`, `message`, where it is, and how to fix it.

    `variable` and `rule` are set when the problem concerns a model variable or a rule,
    so machine-readable output can carry them as fields.
    """

    code: str
    severity: Severity
    message: str
    span: Span | None = None
    label: str = ""
    secondary: tuple[Label, ...] = ()
    help: tuple[str, ...] = ()
    variable: str | None = None
    rule: str | None = None
    devices: int | None = None

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def sort_key(self) -> tuple:
        s = self.span
        where = (s.file, s.line, s.column) if s else ("", 0, 0)
        return (self.devices or 0, *where, self.code, self.variable or "", self.message)


def error(code: str, message: str, span: Span | None, **kw) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, message, span, **_norm(kw))


def warning(code: str, message: str, span: Span | None, **kw) -> Diagnostic:
    return Diagnostic(code, Severity.WARNING, message, span, **_norm(kw))


def note(code: str, message: str, span: Span | None, **kw) -> Diagnostic:
    return Diagnostic(code, Severity.NOTE, message, span, **_norm(kw))


def unique(diags) -> list[Diagnostic]:
    """`diags` without repeats, in first-seen order."""
    return list(dict.fromkeys(diags))


def _norm(kw: dict) -> dict:
    h = kw.get("help")
    if isinstance(h, str):
        kw["help"] = (h,)
    elif h is None:
        kw.pop("help", None)
    return kw


@dataclass
class PlanError(Exception):
    """Raised by `load_plan`, `loads` and validation when a plan has errors.

    It carries every diagnostic found (errors, and the warnings and notes beside them);
    `str()` renders them as the CLI does, without colour.

    >>> import planc
    >>> try:
    ...     planc.loads("mesh(batch = auto)\\ndata_parallel\\ndata_parallel")
    ... except planc.PlanError as e:
    ...     print(e.diagnostics[0].code)
    P114
    """

    diagnostics: tuple[Diagnostic, ...]
    sources: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        from .render import render_text

        return render_text(self.diagnostics, self.sources, color=False)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)


# The stable catalogue. A code never changes meaning; retired codes are not reused.
CODES: dict[str, str] = {
    # syntax
    "P001": "syntax error: unexpected token",
    "P002": "unterminated string",
    "P003": "single-quoted string",
    "P004": "unexpected character",
    "P005": "empty layout entry",
    "P006": "unknown statement",
    "P007": "`:` written for `->`",
    "P008": "`None` written for `_`",
    "P009": "plan file cannot be read (not UTF-8, too large)",
    # declarations
    "P101": "unknown mesh axis",
    "P102": "duplicate mesh axis",
    "P103": "more than one `auto` axis",
    "P104": "axis used twice in one layout",
    "P105": "`...` used twice in one layout",
    "P106": "invalid regular expression",
    "P107": "unsupported regular expression feature",
    "P108": "unknown parameter",
    "P109": "override of an undeclared parameter",
    "P110": "bad parameter value",
    "P111": "duplicate rule",
    "P112": "size is not a positive integer",
    "P113": "unknown batch axis",
    "P114": "missing or repeated statement",
    "P115": "`layout` block under `data_parallel`",
    "P116": "include cycle",
    "P117": "include not found",
    "P118": "`check` failed",
    "P119": "unknown option or setting",
    "P120": "duplicate parameter",
    "P121": "name is both a parameter and a mesh axis",
    "P122": "type error in expression",
    "P123": "duplicate `default` rule",
    "P124": "include outside the plan's directory",
    "P125": "resource limit exceeded",
    # devices
    "P201": "device count does not fit the mesh",
    "P202": "check skipped: depends on the device count",
    # against a model
    "P301": "variable matched by no rule",
    "P302": "ambiguous match",
    "P303": "dimension not divisible by its mesh axes",
    "P304": "rank mismatch",
    "P305": "no fitting alternative",
    "P306": "rule matches no variable",
    "P307": "rule shadowed by earlier rules",
    "P308": "literal rule overrides regex rules",
    "P309": "memory budget exceeded",
    "P310": "large replicated variable",
    "P311": "layout the target cannot express",
    "P312": "batch not divisible by the batch axes",
    "P313": "compiled module refused: plan has errors against the model",
}
