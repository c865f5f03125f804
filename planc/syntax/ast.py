"""The typed, frozen syntax tree of a plan file. Every node knows its source span.

The tree is what the text says, nothing more: names are not resolved and sizes are not
checked. `planc.check` turns it into the plan's IR (`planc.ir.PlanIR`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from planc.diagnostics import Span


@dataclass(frozen=True)
class Node:
    span: Span


# -- atoms ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Name(Node):
    text: str


@dataclass(frozen=True)
class IntLit(Node):
    value: int


@dataclass(frozen=True)
class SizeLit(Node):
    """A byte size such as `16 GiB`; `value` is in bytes."""

    value: int
    text: str


@dataclass(frozen=True)
class StrLit(Node):
    """A raw string: `value` has `\\"` unescaped and every other backslash kept."""

    value: str
    raw: str  # the characters between the quotes, exactly as written

    @property
    def value_offset(self) -> int:
        return 1  # the opening quote


@dataclass(frozen=True)
class Auto(Node):
    pass


@dataclass(frozen=True)
class EnvCall(Node):
    """`env("NAME", default)`: read at start-up, not at compile time."""

    var: StrLit
    default: "Value | None"


Value = Union[IntLit, SizeLit, StrLit, Name, EnvCall]


# -- layouts --------------------------------------------------------------------------

@dataclass(frozen=True)
class Unsplit(Node):
    pass


@dataclass(frozen=True)
class Ellipsis(Node):
    pass


@dataclass(frozen=True)
class Split(Node):
    """A dimension split over one or more axes (major to minor), optionally in blocks."""

    axes: tuple[Name, ...]
    block: IntLit | None = None
    grouped: bool = False  # written as `(a, b)`


Entry = Union[Unsplit, Ellipsis, Split]


@dataclass(frozen=True)
class TupleLayout(Node):
    entries: tuple[Entry, ...]


@dataclass(frozen=True)
class Replicated(Node):
    pass


@dataclass(frozen=True)
class LayoutExpr(Node):
    alternatives: tuple[Union[TupleLayout, Replicated], ...]


@dataclass(frozen=True)
class PatternRule(Node):
    pattern: StrLit
    layout: LayoutExpr


@dataclass(frozen=True)
class DefaultRule(Node):
    keyword: Span
    layout: LayoutExpr


Rule = Union[PatternRule, DefaultRule]


# -- expressions (for `check`) ----------------------------------------------------------

@dataclass(frozen=True)
class BinOp(Node):
    op: str  # + - * // % == != < <= > >= and or
    left: "Expr"
    right: "Expr"


@dataclass(frozen=True)
class UnaryOp(Node):
    op: str  # - not
    operand: "Expr"


@dataclass(frozen=True)
class Paren(Node):
    """Kept so the formatter can print the parentheses the author wrote."""

    inner: "Expr"


Expr = Union[IntLit, Name, BinOp, UnaryOp, Paren]


# -- statements -----------------------------------------------------------------------

@dataclass(frozen=True)
class KwArg(Node):
    name: Name
    value: Value


@dataclass(frozen=True)
class PlanStmt(Node):
    name: Name


@dataclass(frozen=True)
class ParamStmt(Node):
    name: Name
    value: Value


@dataclass(frozen=True)
class AxisDecl(Node):
    name: Name
    size: Union[IntLit, Name, Auto]


@dataclass(frozen=True)
class MeshStmt(Node):
    axes: tuple[AxisDecl, ...]


@dataclass(frozen=True)
class SlicesStmt(Node):
    items: tuple[KwArg, ...]


@dataclass(frozen=True)
class AxisTypeDecl(Node):
    name: Name
    type: Union[Name, Auto]


@dataclass(frozen=True)
class AxisTypesStmt(Node):
    """`axis_types TYPE` (`every` is the type of every axis) or `axis_types(AXIS = TYPE,
    ...)` (`every` is None; axes not named are `auto`)."""

    every: Union[Name, Auto, None]
    axes: tuple[AxisTypeDecl, ...] = ()


@dataclass(frozen=True)
class DataParallelStmt(Node):
    pass


@dataclass(frozen=True)
class ModelParallelStmt(Node):
    key: Name | None  # must be `batch`
    axes: tuple[Name, ...]  # empty: Keras's default, the first mesh axis
    grouped: bool = False


@dataclass(frozen=True)
class MatchStmt(Node):
    mode: Name


@dataclass(frozen=True)
class OverlapStmt(Node):
    mode: Name


@dataclass(frozen=True)
class LayoutSection(Node):
    """`layout { RULES }`: how variables are laid out."""

    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class OutputsSection(Node):
    """`outputs { RULES }`: how layer outputs are laid out."""

    rules: tuple[Rule, ...]


@dataclass(frozen=True)
class BudgetStmt(Node):
    args: tuple[KwArg, ...]


@dataclass(frozen=True)
class CheckStmt(Node):
    expr: Expr
    message: StrLit


@dataclass(frozen=True)
class IncludeStmt(Node):
    path: StrLit


@dataclass(frozen=True)
class ModelStmt(Node):
    """`model "PATH"`: the model source the plan is for, relative to the plan's file."""

    path: StrLit


@dataclass(frozen=True)
class ClusterStmt(Node):
    args: tuple[KwArg, ...]
    auto: bool = False  # `cluster auto`, which has no block


@dataclass(frozen=True)
class RenameRule(Node):
    """`"REGEX" -> "TEMPLATE" OPTION...`: a checkpoint name pattern and the path it becomes.

    `options` are the names written after the template (`transpose`); the checker says
    which it knows.
    """

    pattern: StrLit
    template: StrLit
    options: tuple[Name, ...] = ()


@dataclass(frozen=True)
class RenameSection(Node):
    """`rename { RULES }`: checkpoint tensor names -> model variable paths."""

    rules: tuple[RenameRule, ...]


Statement = Union[
    PlanStmt, ParamStmt, MeshStmt, SlicesStmt, AxisTypesStmt, DataParallelStmt, ModelParallelStmt,
    MatchStmt, OverlapStmt, LayoutSection, OutputsSection, BudgetStmt, CheckStmt,
    IncludeStmt, ClusterStmt, RenameSection, ModelStmt,
]


@dataclass(frozen=True)
class Comment(Node):
    text: str  # including the leading `#`


@dataclass(frozen=True)
class Module(Node):
    """One parsed file."""

    file: str
    statements: tuple[Statement, ...]
    comments: tuple[Comment, ...] = ()
