"""The canonical printer: a parsed plan back as text, in its one canonical layout.

The printer prints the AST back in a fixed statement order and spelling, and carries
every comment along (a comment is never lost: the test suite compares the comments before
and after). It does not decide whether the result means what the input meant: that is
`planc.check.formatting`, which checks the printed text before `planc fmt` writes it.

Canonical order: `plan`, `include`, `param`, `mesh`, `slices`, `axis_types`, the distribution,
`match`, `overlap`, `budget`, `check`, `cluster`, `axes`, `stages`, `layout`, `state`, `outputs`, `rename`. The checker groups
statements by kind, so moving statements between kinds is safe, with one exception: an
`include` inlines its statements where it stands, so moving a local statement across an
include can change the order of params and rules. `include_safe_order` keeps every
statement on its side of every include for that case.
"""

from __future__ import annotations

import bisect
import re

from planc.syntax import ast

INDENT = "    "

_ORDER = (
    (ast.PlanStmt,), (ast.ModelStmt,), (ast.IncludeStmt,), (ast.ParamStmt,), (ast.MeshStmt,), (ast.SlicesStmt,),
    (ast.AxisTypesStmt,), (ast.DataParallelStmt, ast.ModelParallelStmt), (ast.MatchStmt,), (ast.OverlapStmt,),
    (ast.BudgetStmt,), (ast.CheckStmt,), (ast.ClusterStmt,), (ast.AxesSection,), (ast.StagesStmt,), (ast.LayoutSection,),
    (ast.StateSection,), (ast.OutputsSection,), (ast.RenameSection,),
)
_RANK = {cls: rank for rank, group in enumerate(_ORDER) for cls in group}
# Statements printed as a braced section of one line per rule or setting.
_SECTIONS = (ast.LayoutSection, ast.StateSection, ast.OutputsSection, ast.ClusterStmt,
             ast.RenameSection, ast.AxesSection, ast.StagesStmt)
_DURATION = r"([0-9_.]+)[ \t]*([a-z]+)"
_SIZE = r"([0-9_]+)[ \t]*([A-Za-z]+)"  # compiled by `re` when a size is first printed


def canonical_text(module: ast.Module, text: str, order) -> str:
    """`module`, parsed from `text`, printed with its statements in `order`.

    `order` holds the module's own statement objects (`canonical_order`,
    `include_safe_order`); `text` gives integers as written and the blank lines.
    """
    return _Printer(text, module).render(order)


def logical_target(axes) -> str:
    """The mesh axes of an `axes` entry as a plan writes them: `_`, `fsdp`, `(data, fsdp)`."""
    names = [a.text if hasattr(a, "text") else a for a in axes]
    if not names:
        return "_"
    return names[0] if len(names) == 1 else "(" + ", ".join(names) + ")"


# -- statement order --------------------------------------------------------------------------

def canonical_order(statements) -> list:
    """The statements in canonical order (by kind; `sorted` keeps each kind's order)."""
    return sorted(statements, key=lambda s: _RANK[type(s)])


def include_safe_order(statements) -> list:
    """Canonical order within the stretches between includes; `plan` always first.

    Every statement stays on its side of every include, so the per-kind statement lists
    the checker builds (and with them the IR) are exactly those of the source.
    """
    keyed, segment = [], 0
    for i, s in enumerate(statements):
        if isinstance(s, ast.IncludeStmt):
            segment += 1
        key = (0, 0) if isinstance(s, ast.PlanStmt) else (segment, _RANK[type(s)])
        keyed.append((key, i, s))
    return [s for _, _, s in sorted(keyed, key=lambda k: (k[0], k[1]))]


# -- comments: where each one goes ------------------------------------------------------------

def _start(node) -> tuple[int, int]:
    return (node.span.line, node.span.column)


def _end(node) -> tuple[int, int]:
    return (node.span.end_line, node.span.end_column)


class _Unit:
    """One printed line (a statement, a rule, a setting) with the comments that travel with it."""

    __slots__ = ("leading", "blank", "trailing")

    def __init__(self, leading: list | None = None, blank: bool = False,
                 trailing: list | None = None) -> None:
        self.leading = [] if leading is None else leading  # [(blank line before it, text)]
        self.blank = blank  # a blank line just before the line itself (after `leading`)
        # Comments inside it or at its line's end.
        self.trailing = [] if trailing is None else trailing

    def pre_lines(self):
        """Own-line comments before the line: its leading comments, then all but the last
        comment from inside it (only one fits at the end of a line)."""
        pre = list(self.leading)
        blank = self.blank
        extras = self.trailing[:-1]
        if extras:
            pre.append((blank, extras[0]))
            pre += [(False, t) for t in extras[1:]]
            blank = False
        return pre, blank

    @property
    def end_comment(self) -> str | None:
        return self.trailing[-1] if self.trailing else None


class _Region:
    __slots__ = ("units", "head", "head_gap", "tail")

    def __init__(self, units: list, head: list, head_gap: bool, tail: list) -> None:
        self.units = units  # one _Unit per item, in source order
        self.head = head  # [(blank, comment)] before the first item
        self.head_gap = head_gap  # a blank line between `head` and the first item
        self.tail = tail  # [(blank, text)] after the last item, on their own lines


def _distribute(items, comments, prev_line: int, blanks: "_BlankLines") -> _Region:
    """Give each comment to the item it belongs to.

    A comment inside an item's span or at the end of its last line trails it; a comment on
    its own line before an item leads it; the rest are the region's head or tail. Blank
    lines are remembered as flags; the element before the region ended on `prev_line`.
    """
    units = [_Unit() for _ in items]
    starts = [_start(i) for i in items]
    head, tail = [], []
    own_line = []  # (line, end_line, kind, target) in source order, for blank-line flags
    for c in comments:
        pos = (c.span.line, c.span.column)
        j = bisect.bisect_right(starts, pos) - 1
        if j >= 0 and (pos < _end(items[j]) or c.span.line == items[j].span.end_line):
            units[j].trailing.append(c.text)
            continue
        if j + 1 < len(items):
            target = head if j < 0 else units[j + 1].leading
        else:
            target = tail
        own_line.append((c.span.line, c.span.line, c, target))
    for k, item in enumerate(items):
        own_line.append((item.span.line, item.span.end_line, None, units[k]))
    own_line.sort(key=lambda e: e[0])
    last = prev_line
    head_gap = False
    for line, end_line, c, target in own_line:
        blank = blanks.between(last, line)
        if c is None:
            target.blank = blank
            if target is units[0] and head:
                head_gap = blank
        else:
            target.append((blank, c.text))
        last = end_line
    return _Region(units, head, head_gap, tail)


class _BlankLines:
    """Which source lines are empty. (A line holding only a comma is not: cluster settings
    may be separated by commas on lines of their own.)"""

    def __init__(self, text: str):
        self.upto = [0]
        for line in text.split("\n"):
            self.upto.append(self.upto[-1] + (not line.strip()))

    def between(self, a: int, b: int) -> bool:
        """Whether an empty line lies strictly between lines `a` and `b`."""
        return b - a >= 2 and self.upto[b - 1] - self.upto[a] > 0


# -- printing -------------------------------------------------------------------------------------

class _Printer:
    def __init__(self, text: str, module: ast.Module):
        self.text = text
        self.module = module
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.blanks = _BlankLines(text)
        self.lines: list[str] = []

    # output helpers
    def blank(self) -> None:
        if self.lines and self.lines[-1] != "":
            self.lines.append("")

    def emit(self, line: str) -> None:
        self.lines.append(line.rstrip())

    def emit_unit(self, unit: _Unit, line: str, indent: str, *, first_blank: bool) -> None:
        pre, blank = unit.pre_lines()
        for k, (b, text) in enumerate(pre):
            if b and (k > 0 or first_blank):
                self.blank()
            self.emit(indent + text)
        if blank and (pre or first_blank):
            self.blank()
        end = unit.end_comment
        self.emit(indent + line + (f"  {end}" if end else ""))

    def source(self, node) -> str:
        s = node.span
        a = self.line_starts[s.line - 1] + s.column - 1
        b = self.line_starts[s.end_line - 1] + s.end_column - 1
        return self.text[a:b]

    # the file
    def render(self, order) -> str:
        statements = list(self.module.statements)
        region = _distribute(statements, self.module.comments, 0, self.blanks)
        unit_of = {id(s): u for s, u in zip(statements, region.units)}
        for k, (b, text) in enumerate(region.head):
            if b and k:
                self.blank()
            self.emit(text)
        if region.head and statements and region.head_gap:
            self.blank()
        previous = None
        for stmt in order:
            if previous is not None and (_RANK[type(stmt)] != _RANK[type(previous)]
                                         or isinstance(stmt, _SECTIONS)):
                self.blank()
            unit = unit_of[id(stmt)]
            if isinstance(stmt, _SECTIONS):
                self.section(stmt, unit)
            else:
                self.emit_unit(unit, self.statement(stmt), "", first_blank=False)
            previous = stmt
        for b, text in region.tail:
            if b:
                self.blank()
            self.emit(text)
        while self.lines and self.lines[-1] == "":
            self.lines.pop()
        return "\n".join(self.lines) + "\n" if self.lines else ""

    # sections
    def section(self, stmt, unit: _Unit) -> None:
        if isinstance(stmt, ast.ClusterStmt) and stmt.auto:
            self.emit_unit(unit, "cluster auto", "", first_blank=False)
            return
        keyword = {ast.LayoutSection: "layout", ast.StateSection: "state",
                   ast.OutputsSection: "outputs", ast.ClusterStmt: "cluster",
                   ast.RenameSection: "rename", ast.AxesSection: "axes",
                   ast.StagesStmt: "stages"}[type(stmt)]
        if isinstance(stmt, ast.StagesStmt):
            keyword = f"stages({', '.join([stmt.axis.text] + [self.kwargs((a,)) for a in stmt.args])})"
        items = list(stmt.rules if not isinstance(stmt, ast.ClusterStmt) else stmt.args)
        brace_line = self.brace_line(stmt)
        inside = [c for c in self.module.comments
                  if _start(stmt) <= (c.span.line, c.span.column) < _end(stmt)]
        first = _start(items[0]) if items else _end(stmt)
        opening = [c for c in inside
                   if c.span.line <= brace_line and (c.span.line, c.span.column) < first]
        body = [c for c in inside if c not in opening]
        region = _distribute(items, body, brace_line, self.blanks)
        if items:
            units = region.units
            units[0].leading = region.head  # inside a section, the head leads the first item
            tail = region.tail
        else:
            units, tail = [], region.head + region.tail

        # The statement's own line carries the opening comments; what follows `}` on its
        # line ends the closing line.
        head_unit = _Unit(unit.leading, unit.blank, [c.text for c in opening])
        closing = unit.trailing[len(inside):]  # the comments inside come first
        if len(closing) > 1:  # cannot happen (a comment runs to the end of its line)
            head_unit.leading = head_unit.leading + [(False, t) for t in closing[:-1]]
            closing = closing[-1:]

        if not items and not tail and not opening:
            end = f"  {closing[0]}" if closing else ""
            self.emit_unit(_Unit(unit.leading, unit.blank, []), keyword + " {}" + end, "",
                           first_blank=False)
            return
        self.emit_unit(head_unit, keyword + " {", "", first_blank=False)
        if isinstance(stmt, ast.ClusterStmt):
            lines = [f"{kw.name.text} = {self.value(kw.value)}" for kw in items]
        elif isinstance(stmt, ast.RenameSection):
            heads = [self.string(r.pattern) for r in items]
            width = max((len(h) for h in heads), default=0)
            lines = [" ".join([f"{h.ljust(width)} -> {self.string(r.template)}",
                               *(o.text for o in r.options)])
                     for h, r in zip(heads, items)]
        elif isinstance(stmt, ast.StagesStmt):
            heads = [self.string(r.pattern) for r in items]
            width = max((len(h) for h in heads), default=0)
            lines = [f"{h.ljust(width)} -> {self.expr(r.stage)}" for h, r in zip(heads, items)]
        elif isinstance(stmt, ast.AxesSection):
            width = max((len(r.name.text) for r in items), default=0)
            lines = [f"{r.name.text.ljust(width)} -> {logical_target(r.axes)}" for r in items]
        else:
            heads = [self.rule_head(r) for r in items]
            width = max((len(h) for h in heads), default=0)
            lines = [f"{h.ljust(width)} -> {self.layout(r.layout)}"
                     for h, r in zip(heads, items)]
        for k, (u, line) in enumerate(zip(units, lines)):
            self.emit_unit(u, line, INDENT, first_blank=k > 0)
        for k, (b, text) in enumerate(tail):
            if b and (k > 0 or items):
                self.blank()
            self.emit(INDENT + text)
        self.emit("}" + (f"  {closing[0]}" if closing else ""))

    def brace_line(self, stmt) -> int:
        """The line of the section's `{` (comments may sit between the keyword and it)."""
        i = self.line_starts[stmt.span.line - 1] + stmt.span.column - 1
        t = self.text
        while i < len(t) and t[i] != "{":
            if t[i] == "#":
                nl = t.find("\n", i)
                i = len(t) if nl < 0 else nl
                continue
            i += 1
        return bisect.bisect_right(self.line_starts, i)

    def rule_head(self, rule) -> str:
        if isinstance(rule, ast.DefaultRule):
            return "default"
        return self.string(rule.pattern)

    # statements
    def statement(self, s) -> str:
        if isinstance(s, ast.PlanStmt):
            return f"plan {s.name.text}"
        if isinstance(s, ast.IncludeStmt):
            return f"include {self.string(s.path)}"
        if isinstance(s, ast.ModelStmt):
            return f"model {self.string(s.path)}"
        if isinstance(s, ast.ParamStmt):
            return f"param {s.name.text} = {self.value(s.value)}"
        if isinstance(s, ast.MeshStmt):
            axes = ", ".join(f"{a.name.text} = {self.axis_size(a.size)}" for a in s.axes)
            return f"mesh({axes})"
        if isinstance(s, ast.SlicesStmt):
            return f"slices({self.kwargs(s.items)})"
        if isinstance(s, ast.AxisTypesStmt):
            if s.every is not None:
                return f"axis_types {self.axis_size(s.every)}"
            types = ", ".join(f"{d.name.text} = {self.axis_size(d.type)}" for d in s.axes)
            return f"axis_types({types})"
        if isinstance(s, ast.DataParallelStmt):
            return "data_parallel"
        if isinstance(s, ast.ModelParallelStmt):
            if s.key is None:
                return "model_parallel"
            names = ", ".join(n.text for n in s.axes)
            return f"model_parallel({s.key.text} = {f'({names})' if s.grouped else names})"
        if isinstance(s, ast.MatchStmt):
            return f"match {s.mode.text}"
        if isinstance(s, ast.OverlapStmt):
            return f"overlap {s.mode.text}"
        if isinstance(s, ast.BudgetStmt):
            return f"budget({self.kwargs(s.args)})"
        if isinstance(s, ast.CheckStmt):
            return f"check {self.expr(s.expr)}, {self.string(s.message)}"
        raise TypeError(f"no printer for {type(s).__name__}")

    def kwargs(self, items) -> str:
        return ", ".join(f"{kw.name.text} = {self.value(kw.value)}" for kw in items)

    def axis_size(self, node) -> str:
        if isinstance(node, ast.Auto):
            return "auto"
        return self.value(node)

    # values
    @staticmethod
    def string(s: ast.StrLit) -> str:
        return f'"{s.raw}"'

    def value(self, v) -> str:
        if isinstance(v, ast.IntLit):
            return self.source(v)  # as written, `_` separators included
        if isinstance(v, ast.SizeLit):
            digits, unit = re.fullmatch(_SIZE, v.text).groups()
            return f"{digits} {unit}"
        if isinstance(v, ast.DurationLit):
            number, unit = re.fullmatch(_DURATION, v.text).groups()
            return f"{number} {unit}"
        if isinstance(v, ast.StrLit):
            return self.string(v)
        if isinstance(v, ast.Name):
            return v.text
        if isinstance(v, ast.PercentLit):
            return v.text.replace(" ", "").replace("\t", "")
        if isinstance(v, ast.CallValue):
            return f"{v.name.text}({self.source(v.arg)})"
        if isinstance(v, ast.EnvCall):
            if v.default is None:
                return f"env({self.string(v.var)})"
            return f"env({self.string(v.var)}, {self.value(v.default)})"
        raise TypeError(f"no printer for {type(v).__name__}")

    # layouts
    def layout(self, node: ast.LayoutExpr) -> str:
        text = " | ".join(self.alternative(a) for a in node.alternatives)
        if node.memory is not None:
            text += f" on {node.memory.word.text}"
        return text

    def alternative(self, a) -> str:
        if isinstance(a, ast.Replicated):
            return "replicated"
        return "(" + ", ".join(self.entry(e) for e in a.entries) + ")"

    def entry(self, e) -> str:
        if isinstance(e, ast.Unsplit):
            return "_"
        if isinstance(e, ast.Ellipsis):
            return "..."
        names = ", ".join(n.text for n in e.axes)
        body = f"({names})" if e.grouped else names
        return body + (f"[{self.source(e.block)}]" if e.block is not None else "")

    # expressions: the tree already follows precedence, and written parentheses are nodes
    def expr(self, e) -> str:
        if isinstance(e, ast.IntLit):
            return self.source(e)
        if isinstance(e, ast.Name):
            return e.text
        if isinstance(e, ast.GroupRef):
            return f"\\{e.number}"
        if isinstance(e, ast.Paren):
            return f"({self.expr(e.inner)})"
        if isinstance(e, ast.UnaryOp):
            return f"not {self.expr(e.operand)}" if e.op == "not" else f"-{self.expr(e.operand)}"
        return f"{self.expr(e.left)} {e.op} {self.expr(e.right)}"
