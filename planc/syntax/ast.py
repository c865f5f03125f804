"""The typed, frozen syntax tree of a plan file. Every node knows its source span.

The tree is what the text says, nothing more: names are not resolved and sizes are not
checked. `planc.check` turns it into the plan's IR (`planc.ir.PlanIR`).

Nodes are `planc.frozen.Frozen` records: each declares its fields, which follow the
`span` of `Node`, and is built from them in that order; they compare and hash by every
field.
"""

from __future__ import annotations

from planc.diagnostics import Span
from planc.frozen import Frozen

class Node(Frozen):
    span: Span


# -- atoms ----------------------------------------------------------------------------

class Name(Node):
    text: str


class IntLit(Node):
    value: int


class SizeLit(Node):
    """A byte size such as `16 GiB`; `value` is in bytes."""

    value: int
    text: str


class DurationLit(Node):
    """A time such as `120 ms`; `value` is in seconds."""

    value: float
    text: str


class PercentLit(Node):
    """A share such as `10%`; `value` is the fraction (0.1)."""

    value: float
    text: str


class GroupRef(Node):
    """`\\1` in a stage expression: the pattern's group `number`, read as an integer."""

    number: int


class CallValue(Node):
    """A setting's value with an argument, as `interleaved(2)`."""

    name: Name
    arg: IntLit


class StrLit(Node):
    """A raw string: `value` has `\\"` unescaped and every other backslash kept; `raw`
    is the characters between the quotes, exactly as written."""

    value: str
    raw: str

    @property
    def value_offset(self) -> int:
        return 1  # the opening quote


class Auto(Node):
    pass


class EnvCall(Node):
    """`env("NAME", default)`: read at start-up, not at compile time."""

    var: StrLit
    default: Value | None


Value = IntLit | SizeLit | StrLit | Name | EnvCall


# -- layouts --------------------------------------------------------------------------

class Unsplit(Node):
    pass


class Ellipsis(Node):
    pass


class Split(Node):
    """A dimension split over one or more axes (major to minor), optionally in blocks;
    `grouped` when written as `(a, b)`."""

    axes: tuple[Name, ...]
    block: IntLit | None = None
    grouped: bool = False


Entry = Unsplit | Ellipsis | Split


class TupleLayout(Node):
    entries: tuple[Entry, ...]


class Replicated(Node):
    pass


class Memory(Node):
    """`on WORD` after a layout: the memory the layout is placed in (`on host`); the
    checker says which words it knows."""

    word: Name


class LayoutExpr(Node):
    """A rule's layout: its alternatives, and the memory written after them (None: the
    devices' own memory)."""

    alternatives: tuple[TupleLayout | Replicated, ...]
    memory: Memory | None = None


class PatternRule(Node):
    pattern: StrLit
    layout: LayoutExpr


class DefaultRule(Node):
    keyword: Span
    layout: LayoutExpr


Rule = PatternRule | DefaultRule


# -- expressions (for `check`) ----------------------------------------------------------

class BinOp(Node):
    """`op` is one of + - * // % == != < <= > >= and or."""

    op: str
    left: Expr
    right: Expr


class UnaryOp(Node):
    """`op` is - or not."""

    op: str
    operand: Expr


class Paren(Node):
    """Kept so the formatter can print the parentheses the author wrote."""

    inner: Expr


Expr = IntLit | Name | BinOp | UnaryOp | Paren


# -- statements -----------------------------------------------------------------------

class KwArg(Node):
    name: Name
    value: Value


class PlanStmt(Node):
    name: Name


class ParamStmt(Node):
    name: Name
    value: Value


class AxisDecl(Node):
    name: Name
    size: IntLit | Name | Auto


class MeshStmt(Node):
    axes: tuple[AxisDecl, ...]


class SlicesStmt(Node):
    items: tuple[KwArg, ...]


class AxisTypeDecl(Node):
    name: Name
    type: Name | Auto


class AxisTypesStmt(Node):
    """`axis_types TYPE` (`every` is the type of every axis) or `axis_types(AXIS = TYPE,
    ...)` (`every` is None; axes not named are `auto`)."""

    every: Name | Auto | None
    axes: tuple[AxisTypeDecl, ...] = ()


class DataParallelStmt(Node):
    pass


class ModelParallelStmt(Node):
    """`key` must be `batch`; no `axes` is Keras's default, the first mesh axis."""

    key: Name | None
    axes: tuple[Name, ...]
    grouped: bool = False


class MatchStmt(Node):
    mode: Name


class OverlapStmt(Node):
    mode: Name


class LayoutSection(Node):
    """`layout { RULES }`: how variables are laid out."""

    rules: tuple[Rule, ...]


class OutputsSection(Node):
    """`outputs { RULES }`: how layer outputs are laid out."""

    rules: tuple[Rule, ...]


class StateSection(Node):
    """`state { RULES }`: how the optimizer slots of the parameters they match are laid out."""

    rules: tuple[Rule, ...]


class BudgetStmt(Node):
    args: tuple[KwArg, ...]


class CheckStmt(Node):
    expr: Expr
    message: StrLit


class IncludeStmt(Node):
    path: StrLit


class ModelStmt(Node):
    """`model "PATH"`: the model source the plan is for, relative to the plan's file."""

    path: StrLit


class ClusterStmt(Node):
    """`auto` for `cluster auto`, which has no block."""

    args: tuple[KwArg, ...]
    auto: bool = False


class RenameRule(Node):
    """`"REGEX" -> "TEMPLATE" OPTION...`: a checkpoint name pattern and the path it becomes.

    `options` are the names written after the template (`transpose`); the checker says
    which it knows.
    """

    pattern: StrLit
    template: StrLit
    options: tuple[Name, ...] = ()


class RenameSection(Node):
    """`rename { RULES }`: checkpoint tensor names -> model variable paths."""

    rules: tuple[RenameRule, ...]


class StageRule(Node):
    """`"REGEX" -> STAGE` of a `stages` block: STAGE is `first`, `last` (names) or an
    integer expression over the pattern's groups, params and axis sizes."""

    pattern: StrLit
    stage: Expr


class StagesStmt(Node):
    """`stages(AXIS, microbatches = N, schedule = S) { RULES }`: pipeline stages."""

    axis: Name
    args: tuple[KwArg, ...]
    rules: tuple[StageRule, ...]


class LogicalRule(Node):
    """`NAME -> AXES` of an `axes` table: the logical dimension `name` maps to the mesh
    axes `axes` (major to minor; `()` for `_`, not split)."""

    name: Name
    axes: tuple[Name, ...] = ()


class AxesSection(Node):
    """`axes { NAME -> AXES ... }`: logical dimension names -> mesh axes, in table order."""

    rules: tuple[LogicalRule, ...]


Statement = (
    PlanStmt | ParamStmt | MeshStmt | SlicesStmt | AxisTypesStmt | DataParallelStmt
    | ModelParallelStmt | MatchStmt | OverlapStmt | LayoutSection | OutputsSection
    | StateSection | BudgetStmt
    | CheckStmt | IncludeStmt | ClusterStmt | RenameSection | ModelStmt | AxesSection
    | StagesStmt
)


class Comment(Node):
    """`text` includes the leading `#`."""

    text: str


class Module(Node):
    """One parsed file."""

    file: str
    statements: tuple[Statement, ...]
    comments: tuple[Comment, ...] = ()
