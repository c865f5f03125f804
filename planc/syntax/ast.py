"""The typed, frozen syntax tree of a plan file. Every node knows its source span.

The tree is what the text says, nothing more: names are not resolved and sizes are not
checked. `planc.check` turns it into the plan's IR (`planc.ir.PlanIR`).

Nodes are `planc.frozen.Frozen` records: each lists its fields in `__slots__`, after the
`span` of `Node`, and its `__new__` takes them in that order; they compare and hash by
every field.
"""

from __future__ import annotations

from planc.diagnostics import Span
from planc.frozen import Frozen

_new = object.__new__


class Node(Frozen):
    __slots__ = ("span",)

    def __new__(cls, span: Span):
        self = _new(cls._open)
        self.span = span
        self.__class__ = cls
        return self


# -- atoms ----------------------------------------------------------------------------

class Name(Node):
    __slots__ = ("text",)

    def __new__(cls, span: Span, text: str):
        self = _new(cls._open)
        self.span = span
        self.text = text
        self.__class__ = cls
        return self


class IntLit(Node):
    __slots__ = ("value",)

    def __new__(cls, span: Span, value: int):
        self = _new(cls._open)
        self.span = span
        self.value = value
        self.__class__ = cls
        return self


class SizeLit(Node):
    """A byte size such as `16 GiB`; `value` is in bytes."""

    __slots__ = ("value", "text")

    def __new__(cls, span: Span, value: int, text: str):
        self = _new(cls._open)
        self.span = span
        self.value = value
        self.text = text
        self.__class__ = cls
        return self


class StrLit(Node):
    """A raw string: `value` has `\\"` unescaped and every other backslash kept; `raw`
    is the characters between the quotes, exactly as written."""

    __slots__ = ("value", "raw")

    def __new__(cls, span: Span, value: str, raw: str):
        self = _new(cls._open)
        self.span = span
        self.value = value
        self.raw = raw
        self.__class__ = cls
        return self

    @property
    def value_offset(self) -> int:
        return 1  # the opening quote


class Auto(Node):
    __slots__ = ()


class EnvCall(Node):
    """`env("NAME", default)`: read at start-up, not at compile time."""

    __slots__ = ("var", "default")

    def __new__(cls, span: Span, var: StrLit, default: Value | None):
        self = _new(cls._open)
        self.span = span
        self.var = var
        self.default = default
        self.__class__ = cls
        return self


Value = IntLit | SizeLit | StrLit | Name | EnvCall


# -- layouts --------------------------------------------------------------------------

class Unsplit(Node):
    __slots__ = ()


class Ellipsis(Node):
    __slots__ = ()


class Split(Node):
    """A dimension split over one or more axes (major to minor), optionally in blocks;
    `grouped` when written as `(a, b)`."""

    __slots__ = ("axes", "block", "grouped")

    def __new__(cls, span: Span, axes: tuple[Name, ...], block: IntLit | None = None,
                 grouped: bool = False):
        self = _new(cls._open)
        self.span = span
        self.axes = axes
        self.block = block
        self.grouped = grouped
        self.__class__ = cls
        return self


Entry = Unsplit | Ellipsis | Split


class TupleLayout(Node):
    __slots__ = ("entries",)

    def __new__(cls, span: Span, entries: tuple[Entry, ...]):
        self = _new(cls._open)
        self.span = span
        self.entries = entries
        self.__class__ = cls
        return self


class Replicated(Node):
    __slots__ = ()


class LayoutExpr(Node):
    __slots__ = ("alternatives",)

    def __new__(cls, span: Span,
                 alternatives: tuple[TupleLayout | Replicated, ...]):
        self = _new(cls._open)
        self.span = span
        self.alternatives = alternatives
        self.__class__ = cls
        return self


class PatternRule(Node):
    __slots__ = ("pattern", "layout")

    def __new__(cls, span: Span, pattern: StrLit, layout: LayoutExpr):
        self = _new(cls._open)
        self.span = span
        self.pattern = pattern
        self.layout = layout
        self.__class__ = cls
        return self


class DefaultRule(Node):
    __slots__ = ("keyword", "layout")

    def __new__(cls, span: Span, keyword: Span, layout: LayoutExpr):
        self = _new(cls._open)
        self.span = span
        self.keyword = keyword
        self.layout = layout
        self.__class__ = cls
        return self


Rule = PatternRule | DefaultRule


# -- expressions (for `check`) ----------------------------------------------------------

class BinOp(Node):
    """`op` is one of + - * // % == != < <= > >= and or."""

    __slots__ = ("op", "left", "right")

    def __new__(cls, span: Span, op: str, left: Expr, right: Expr):
        self = _new(cls._open)
        self.span = span
        self.op = op
        self.left = left
        self.right = right
        self.__class__ = cls
        return self


class UnaryOp(Node):
    """`op` is - or not."""

    __slots__ = ("op", "operand")

    def __new__(cls, span: Span, op: str, operand: Expr):
        self = _new(cls._open)
        self.span = span
        self.op = op
        self.operand = operand
        self.__class__ = cls
        return self


class Paren(Node):
    """Kept so the formatter can print the parentheses the author wrote."""

    __slots__ = ("inner",)

    def __new__(cls, span: Span, inner: Expr):
        self = _new(cls._open)
        self.span = span
        self.inner = inner
        self.__class__ = cls
        return self


Expr = IntLit | Name | BinOp | UnaryOp | Paren


# -- statements -----------------------------------------------------------------------

class KwArg(Node):
    __slots__ = ("name", "value")

    def __new__(cls, span: Span, name: Name, value: Value):
        self = _new(cls._open)
        self.span = span
        self.name = name
        self.value = value
        self.__class__ = cls
        return self


class PlanStmt(Node):
    __slots__ = ("name",)

    def __new__(cls, span: Span, name: Name):
        self = _new(cls._open)
        self.span = span
        self.name = name
        self.__class__ = cls
        return self


class ParamStmt(Node):
    __slots__ = ("name", "value")

    def __new__(cls, span: Span, name: Name, value: Value):
        self = _new(cls._open)
        self.span = span
        self.name = name
        self.value = value
        self.__class__ = cls
        return self


class AxisDecl(Node):
    __slots__ = ("name", "size")

    def __new__(cls, span: Span, name: Name, size: IntLit | Name | Auto):
        self = _new(cls._open)
        self.span = span
        self.name = name
        self.size = size
        self.__class__ = cls
        return self


class MeshStmt(Node):
    __slots__ = ("axes",)

    def __new__(cls, span: Span, axes: tuple[AxisDecl, ...]):
        self = _new(cls._open)
        self.span = span
        self.axes = axes
        self.__class__ = cls
        return self


class SlicesStmt(Node):
    __slots__ = ("items",)

    def __new__(cls, span: Span, items: tuple[KwArg, ...]):
        self = _new(cls._open)
        self.span = span
        self.items = items
        self.__class__ = cls
        return self


class AxisTypeDecl(Node):
    __slots__ = ("name", "type")

    def __new__(cls, span: Span, name: Name, type: Name | Auto):
        self = _new(cls._open)
        self.span = span
        self.name = name
        self.type = type
        self.__class__ = cls
        return self


class AxisTypesStmt(Node):
    """`axis_types TYPE` (`every` is the type of every axis) or `axis_types(AXIS = TYPE,
    ...)` (`every` is None; axes not named are `auto`)."""

    __slots__ = ("every", "axes")

    def __new__(cls, span: Span, every: Name | Auto | None,
                 axes: tuple[AxisTypeDecl, ...] = ()):
        self = _new(cls._open)
        self.span = span
        self.every = every
        self.axes = axes
        self.__class__ = cls
        return self


class DataParallelStmt(Node):
    __slots__ = ()


class ModelParallelStmt(Node):
    """`key` must be `batch`; no `axes` is Keras's default, the first mesh axis."""

    __slots__ = ("key", "axes", "grouped")

    def __new__(cls, span: Span, key: Name | None, axes: tuple[Name, ...],
                 grouped: bool = False):
        self = _new(cls._open)
        self.span = span
        self.key = key
        self.axes = axes
        self.grouped = grouped
        self.__class__ = cls
        return self


class MatchStmt(Node):
    __slots__ = ("mode",)

    def __new__(cls, span: Span, mode: Name):
        self = _new(cls._open)
        self.span = span
        self.mode = mode
        self.__class__ = cls
        return self


class OverlapStmt(Node):
    __slots__ = ("mode",)

    def __new__(cls, span: Span, mode: Name):
        self = _new(cls._open)
        self.span = span
        self.mode = mode
        self.__class__ = cls
        return self


class LayoutSection(Node):
    """`layout { RULES }`: how variables are laid out."""

    __slots__ = ("rules",)

    def __new__(cls, span: Span, rules: tuple[Rule, ...]):
        self = _new(cls._open)
        self.span = span
        self.rules = rules
        self.__class__ = cls
        return self


class OutputsSection(Node):
    """`outputs { RULES }`: how layer outputs are laid out."""

    __slots__ = ("rules",)

    def __new__(cls, span: Span, rules: tuple[Rule, ...]):
        self = _new(cls._open)
        self.span = span
        self.rules = rules
        self.__class__ = cls
        return self


class BudgetStmt(Node):
    __slots__ = ("args",)

    def __new__(cls, span: Span, args: tuple[KwArg, ...]):
        self = _new(cls._open)
        self.span = span
        self.args = args
        self.__class__ = cls
        return self


class CheckStmt(Node):
    __slots__ = ("expr", "message")

    def __new__(cls, span: Span, expr: Expr, message: StrLit):
        self = _new(cls._open)
        self.span = span
        self.expr = expr
        self.message = message
        self.__class__ = cls
        return self


class IncludeStmt(Node):
    __slots__ = ("path",)

    def __new__(cls, span: Span, path: StrLit):
        self = _new(cls._open)
        self.span = span
        self.path = path
        self.__class__ = cls
        return self


class ModelStmt(Node):
    """`model "PATH"`: the model source the plan is for, relative to the plan's file."""

    __slots__ = ("path",)

    def __new__(cls, span: Span, path: StrLit):
        self = _new(cls._open)
        self.span = span
        self.path = path
        self.__class__ = cls
        return self


class ClusterStmt(Node):
    """`auto` for `cluster auto`, which has no block."""

    __slots__ = ("args", "auto")

    def __new__(cls, span: Span, args: tuple[KwArg, ...], auto: bool = False):
        self = _new(cls._open)
        self.span = span
        self.args = args
        self.auto = auto
        self.__class__ = cls
        return self


class RenameRule(Node):
    """`"REGEX" -> "TEMPLATE" OPTION...`: a checkpoint name pattern and the path it becomes.

    `options` are the names written after the template (`transpose`); the checker says
    which it knows.
    """

    __slots__ = ("pattern", "template", "options")

    def __new__(cls, span: Span, pattern: StrLit, template: StrLit,
                 options: tuple[Name, ...] = ()):
        self = _new(cls._open)
        self.span = span
        self.pattern = pattern
        self.template = template
        self.options = options
        self.__class__ = cls
        return self


class RenameSection(Node):
    """`rename { RULES }`: checkpoint tensor names -> model variable paths."""

    __slots__ = ("rules",)

    def __new__(cls, span: Span, rules: tuple[RenameRule, ...]):
        self = _new(cls._open)
        self.span = span
        self.rules = rules
        self.__class__ = cls
        return self


Statement = (
    PlanStmt | ParamStmt | MeshStmt | SlicesStmt | AxisTypesStmt | DataParallelStmt
    | ModelParallelStmt | MatchStmt | OverlapStmt | LayoutSection | OutputsSection | BudgetStmt
    | CheckStmt | IncludeStmt | ClusterStmt | RenameSection | ModelStmt
)


class Comment(Node):
    """`text` includes the leading `#`."""

    __slots__ = ("text",)

    def __new__(cls, span: Span, text: str):
        self = _new(cls._open)
        self.span = span
        self.text = text
        self.__class__ = cls
        return self


class Module(Node):
    """One parsed file."""

    __slots__ = ("file", "statements", "comments")

    def __new__(cls, span: Span, file: str, statements: tuple[Statement, ...],
                 comments: tuple[Comment, ...] = ()):
        self = _new(cls._open)
        self.span = span
        self.file = file
        self.statements = statements
        self.comments = comments
        self.__class__ = cls
        return self
