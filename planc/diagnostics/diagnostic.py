"""A diagnostic as plain data: what planc says about a plan, located in its source.

Every problem planc finds is a `Diagnostic` with a stable code (listed in `CODES` and in
docs/diagnostics.md), a severity, a message, a primary `Span` and optional secondary spans and
help. Rendering lives beside it (`text`, `formats`); `PlanError` carries a plan's
diagnostics; nothing stops at the first problem.
"""

from __future__ import annotations

from enum import Enum

from planc.diagnostics.span import Span
from planc.frozen import Frozen

class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"


class Label(Frozen):
    span: Span
    message: str = ""


class Diagnostic(Frozen):
    """One problem: `code`, `severity`, `message`, where it is, and how to fix it.

    `variable` and `rule` are set when the problem concerns a model variable or a rule,
    so machine-readable output can carry them as fields. `devices` is the device count
    the problem holds at, a tuple of counts when it holds at several of those checked
    (`planc lint --devices 8,64,512`), or None when it does not depend on the count.
    `file` names the plan a problem with no span is about (a `-D` given for it).

    >>> d = error("P201", "4 devices do not fit", None, devices=(64, 512))
    >>> d.device_counts, d.devices_text
    ((64, 512), '64, 512')
    """

    # `variables`: every variable a diagnostic grouped over many stands for (`variable`
    # is the first): `explain` marks each one's row.
    code: str
    severity: Severity
    message: str
    span: Span | None = None
    label: str = ""
    secondary: tuple[Label, ...] = ()
    help: tuple[str, ...] = ()
    variable: str | None = None
    rule: str | None = None
    devices: int | tuple[int, ...] | None = None
    file: str | None = None
    variables: tuple[str, ...] = ()

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    @property
    def device_counts(self) -> tuple[int, ...]:
        """The device counts the problem holds at; () when it does not depend on one."""
        d = self.devices
        return () if d is None else (d,) if isinstance(d, int) else tuple(d)

    @property
    def devices_text(self) -> str:
        """The counts as a person reads them: `8` or `64, 512`."""
        return ", ".join(map(str, self.device_counts))

    @property
    def with_devices(self) -> str:
        """`with 8 devices`, `with 1 device`, `with 64, 512 devices`."""
        plural = self.device_counts != (1,)
        return f"with {self.devices_text} device{'s' if plural else ''}"

    @property
    def where(self) -> str | None:
        """The file the problem is in or about, if any."""
        return self.span.file if self.span else self.file

    def sort_key(self) -> tuple:
        s = self.span
        where = (s.file, s.line, s.column) if s else (self.file or "", 0, 0)
        return (self.device_counts or (0,), *where, self.code, self.variable or "",
                self.message)


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


def severity_counts(diags) -> dict[str, int]:
    """How many errors, warnings and notes `diags` holds: `{"errors": 1, ...}`."""
    counts = {s: 0 for s in Severity}
    for d in diags:
        counts[d.severity] += 1
    return {s.value + "s": n for s, n in counts.items()}
