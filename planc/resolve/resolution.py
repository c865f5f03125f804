"""What resolution answers: the layout a variable gets (`ResolvedLayout`), the rule and
alternative that gave it (`Assignment`), why that rule (`Reason`), why an alternative
does not fit (`Misfit`), and what `Resolver.resolve_all` returns (`Resolution`).

`planc.resolve.resolver` computes them; the reports, the tracer and the targets read them.
"""

from __future__ import annotations

import enum
from collections import namedtuple

from planc.diagnostics import Diagnostic
from planc.frozen import Frozen
from planc.ir import AxisEntry, Dim, Rule, layout_text


class ResolvedLayout(Frozen):
    """The layout one variable gets.

    `axes` has one entry per dimension, as Keras's `TensorLayout.axes`: None (not split),
    an axis name, or a tuple of axis names (split over several axes, major to minor).
    `host`: in pinned host memory (the rule said `on host`), else in device memory.

    >>> ResolvedLayout((None, "model"), (1, 1)).text
    '(_, model)'
    >>> ResolvedLayout((None, "model"), (1, 1), host=True).text
    '(_, model) on host'
    """

    axes: tuple[AxisEntry, ...]
    blocks: tuple[int, ...]
    host: bool = False

    @property
    def dims(self) -> tuple[Dim, ...]:
        """One `Dim` per dimension."""
        return tuple(Dim.of(e, b) for e, b in zip(self.axes, self.blocks))

    @property
    def text(self) -> str:
        """The layout as a plan writes it, `_` for every dimension not split."""
        text = layout_text(self.dims)
        return text + " on host" if self.host else text

    @property
    def memory_kind(self) -> str | None:
        """JAX's memory kind of the layout: `"pinned_host"`, or None for the devices' own."""
        return "pinned_host" if self.host else None

    @property
    def is_replicated(self) -> bool:
        return all(e is None for e in self.axes)

    def mesh_axes(self) -> tuple[str, ...]:
        out = []
        for e in self.axes:
            if isinstance(e, str):
                out.append(e)
            elif e:
                out.extend(e)
        return tuple(out)

    def split_factor(self, sizes: dict[str, int | None]) -> int | None:
        """Shards per dimension multiplied out (None while an `auto` size is unknown)."""
        n = 1
        for name in self.mesh_axes():
            s = sizes.get(name)
            if s is None:
                return None
            n *= s
        return n

    def shard_shape(self, shape, sizes) -> tuple[int, ...] | None:
        out = []
        for d, e in zip(shape, self.axes):
            names = (e,) if isinstance(e, str) else (e or ())
            k = 1
            for name in names:
                if sizes.get(name) is None:
                    return None
                k *= sizes[name]
            out.append(d // k)
        return tuple(out)


def replicated(rank: int) -> ResolvedLayout:
    """The layout that splits none of `rank` dimensions."""
    return ResolvedLayout((None,) * rank, (1,) * rank)


class Assignment(namedtuple("Assignment", ("variable", "layout", "rule", "alternative"),
                            defaults=(0,))):
    """What one `variable` (a `Variable`) gets: its `layout` (a `ResolvedLayout`), the
    `rule` that gave it (a `Rule`, None: no rule), and which `alternative` of that rule's
    layout was taken (an int, 0 unless given).

    A named tuple, not a dataclass: a resolution builds one per variable, and a tuple is
    one allocation where a frozen dataclass is an object, its dict and four checked
    attribute writes (half of resolve_all's time, at 100k variables, went there). Made by
    `collections.namedtuple`, not `typing.NamedTuple` (see `planc.variables.Variable`).
    """

    __slots__ = ()

    @property
    def rule_where(self) -> str:
        return self.rule.where if self.rule else "-"


def slot_assignments(params, state) -> tuple[Assignment, ...]:
    """Each parameter's optimizer slots: their `state` rule's assignment, or, where no
    state rule matched, the parameter's own (the slots mirror it). `params` and `state`
    are the two sections' assignments of the same variables, in the same order."""
    return tuple(s if s.rule is not None else p for p, s in zip(params, state))


class Resolution(Frozen):
    # `matched`, per rule: variables whose path it matched; `won`, per rule: variables it
    # laid out; `unchecked`: auto axes whose unknown size skipped divisibility checks.
    assignments: tuple[Assignment, ...]
    diagnostics: tuple[Diagnostic, ...]
    matched: tuple[int, ...]
    won: tuple[int, ...]
    unchecked: tuple[str, ...] = ()


class Reason(enum.Enum):
    """Why a rule, or none, lays out a path: what `Resolver.decide` found.

    The values are the `reason` of `planc explain --var`'s trace; `sentence` says it in
    words, and is built only when asked.
    """

    LITERAL = "literal"  # a rule's pattern is exactly the path: it wins, as a Keras exact key
    ONLY = "only"  # exactly one rule matches
    FIRST = "first"  # several match; `overlap first` takes the first
    AMBIGUOUS = "ambiguous"  # several match under `overlap error`: P302, the first is used
    OWN_NAMES = "own_names"  # none matches; the variable's own logical names, through `axes`
    DEFAULT = "default"  # none matches; `default` applies
    DATA_PARALLEL = "data_parallel"  # none matches; data_parallel replicates every variable
    LEFT_TO_XLA = "left_to_xla"  # no `outputs` rule names the activation
    MIRRORED = "mirrored"  # no `state` rule names the parameter: its slots take its layout
    UNMATCHED = "none"  # none matches and there is no `default`: replicated, P301

    def sentence(self, winner: Rule | None, hits: tuple[int, ...], rank: int) -> str:
        """This reason in words, for a variable of `rank` whose path the rules `hits` match."""
        if self is Reason.LITERAL:
            others = len([i for i in hits if i != winner.index])
            extra = (f"; it wins over the {others} other matching rule"
                     f"{'s' if others > 1 else ''}, as a Keras exact key does") if others else ""
            return f"the pattern is exactly the path{extra}"
        if self is Reason.ONLY:
            return "the only rule that matches"
        if self is Reason.FIRST:
            return f"the first of {len(hits)} matching rules (`overlap first`)"
        if self is Reason.AMBIGUOUS:
            return (f"{len(hits)} rules match under `overlap error`: an error (P302); the first "
                    "is used so the checks can go on")
        if self is Reason.OWN_NAMES:
            return ("no rule matches: the variable's own logical names, read through the "
                    "`axes` table")
        if self is Reason.DEFAULT:
            return "no rule matches: `default` applies"
        if self is Reason.DATA_PARALLEL:
            return "`data_parallel` replicates every variable"
        if self is Reason.LEFT_TO_XLA:
            return "no output rule matches: XLA lays the activation out"
        if self is Reason.MIRRORED:
            return "no state rule matches: the optimizer slots take the parameter's layout"
        severity = "an error (P301)" if unmatched_is_error(rank) else "a note (P301)"
        return ("no rule matches and there is no `default`: the variable stays replicated, "
                f"reported as {severity}")


class Misfit(namedtuple("Misfit", ("alternative", "dim", "product", "block"),
                        defaults=(None, 1, 1))):
    """Why alternative `alternative` of a layout does not fit a variable: its rank, when
    `dim` is None (the default); else dimension `dim`, which `product` devices (default 1)
    in blocks of `block` (default 1) do not divide. All ints. A `collections.namedtuple`,
    not a `typing.NamedTuple` (see `planc.variables.Variable`)."""

    __slots__ = ()





def unmatched_is_error(rank: int) -> bool:
    # A matrix no rule names is a weight the plan forgot; a vector or scalar (a bias, a
    # norm scale) costs little replicated, so it is only a note.
    return rank >= 2
