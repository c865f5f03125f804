"""`PlanError`: the exception that carries every diagnostic of a plan."""

from __future__ import annotations


from planc.diagnostics.diagnostic import Diagnostic
from planc.diagnostics.input_error import InputError
from planc.diagnostics.text import render_text


class PlanError(InputError):
    """Raised by `load_plan`, `loads` and validation when a plan has errors.

    An `InputError`, so a `ValueError`, as Keras raises in the same situations (an
    ambiguous layout lookup, a mesh the devices do not fit), so `except ValueError`
    keeps working under planc.

    It carries every diagnostic found (errors, and the warnings and notes beside them);
    `str()` renders them as the CLI does, without colour.

    >>> import planc
    >>> try:
    ...     planc.loads("mesh(batch = auto)\\ndata_parallel\\ndata_parallel")
    ... except planc.PlanError as e:
    ...     print(e.diagnostics[0].code)
    P114
    """

    def __init__(self, diagnostics: tuple[Diagnostic, ...],
                 sources: dict[str, str] | None = None):
        self.diagnostics = diagnostics
        self.sources = {} if sources is None else sources

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return (self.diagnostics, self.sources) == (other.diagnostics, other.sources)
        return NotImplemented

    __hash__ = None  # as the dataclass it was: equal by value, so not hashable

    def __repr__(self) -> str:
        return f"PlanError(diagnostics={self.diagnostics!r}, sources={self.sources!r})"

    def __str__(self) -> str:
        return render_text(self.diagnostics, self.sources, color=False)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)


class Diagnosed:
    """What a result that carries a plan's `diagnostics` (and the `sources` they quote)
    says of them: the validation, compile and cost reports alike."""

    __slots__ = ()

    @property
    def ok(self) -> bool:
        """True when no diagnostic is an error."""
        return not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> tuple[Diagnostic, ...]:
        return tuple(d for d in self.diagnostics if d.is_error)

    def raise_for_errors(self) -> None:
        """Raise `PlanError` carrying every diagnostic if any of them is an error."""
        if not self.ok:
            raise PlanError(self.diagnostics, dict(self.sources))
