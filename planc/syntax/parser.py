"""Plan text -> `planc.syntax.ast.Module`, comments included, or one located syntax error.

The AST is built as lark's LALR parser reduces (`_Builder`), without a parse tree. What
a syntax error says is `planc.syntax.errors`; the grammar is `planc.syntax.grammar`.
"""

from __future__ import annotations

import re
import threading

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedInput

from planc.syntax import ast
from planc import limits
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.syntax.errors import syntax_diagnostic
from planc.syntax.files import one_line_ending
from planc.syntax.grammar import new_parser
from planc.syntax.spans import joined, line_col, token_span

MAX_INT_DIGITS = 30  # far above any real size; keeps int() away from huge literals
_UNITS = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}

_THREAD = threading.local()


def _building_parser() -> tuple[Lark, "_Builder"]:
    """This thread's LALR parser that builds the AST as it parses, and its builder.

    Building inside the parse skips lark's parse tree and a second walk over it (about
    half the time of a parse). The builder is bound into the parser, so each thread has
    its own pair and `parse` resets the builder for every text.
    """
    pair = getattr(_THREAD, "pair", None)
    if pair is None:
        builder = _Builder("<string>")
        # No positions on tree nodes: the builder computes spans itself.
        pair = _THREAD.pair = (new_parser(transformer=builder), builder)
    return pair


def parse(text: str, file: str = "<string>") -> ast.Module:
    """Parse plan text into a `Module`, or raise `PlanError` with one located diagnostic.

    >>> m = parse('mesh(batch = auto)\\ndata_parallel', "demo.kd")
    >>> type(m.statements[0]).__name__, m.statements[0].span.line
    ('MeshStmt', 1)
    """
    text = one_line_ending(text)
    # Text handed to `loads` or `format_text` is held to the limit of a file read from disk.
    if (len(text) * 4 > limits.MAX_PLAN_BYTES
            and len(text.encode("utf-8", "surrogatepass")) > limits.MAX_PLAN_BYTES):
        raise PlanError((error("P125", f"plan is larger than {limits.MAX_PLAN_BYTES} bytes",
                               Span(file, 1, 1, 1, 2), label="plan starts here"),), {file: ""})
    deep = _too_deep(text)
    if deep is not None:
        line, col = line_col(text, deep)
        raise PlanError((error(
            "P125", f"brackets nested more than {limits.MAX_NESTING} deep "
            f"(limit {limits.MAX_NESTING})", Span(file, line, col, line, col + 1),
            label="too deeply nested"),), {file: text})
    parser, builder = _building_parser()
    builder.begin(file)
    try:
        module = parser.parse(text)
    except UnexpectedInput as exc:
        raise PlanError((syntax_diagnostic(exc, text, file),), {file: text}) from None
    finally:
        problems = builder.problems
        builder.begin(file)  # the builder outlives the parse: let go of this text's nodes
    if problems:
        raise PlanError(tuple(problems), {file: text})
    comments = _comments(text, file)
    end = _span_of_text(text, file)
    return ast.Module(end, file, module, tuple(comments))


# -- tree -> AST ------------------------------------------------------------------------

class _Builder(Transformer):
    """Builds AST nodes bottom-up; every node's span comes from its first and last token.

    lark's LALR parser calls it as it reduces (`_building_parser`), so no recursion is
    involved however deeply the text nests, and no parse tree is built. A callback gets
    its children only (lark cannot hand an inline transformer `meta`): `_span_of` reads
    the span from them. Expressions deeper than `limits.MAX_NESTING` are refused (P125):
    `not not ... 1` or `1 + 1 + ...` nest without brackets, and the checker, the
    formatter and dataclass equality all recurse over the tree it returns.
    """

    def __init__(self, file: str):
        super().__init__()
        self.begin(file)

    def begin(self, file: str) -> None:
        """Forget the last text; spans now name `file`."""
        self.file = file
        self.problems: list[Diagnostic] = []
        self._depths: dict[int, tuple[ast.Node, int]] = {}
        self._too_deep = False

    def _nested(self, node, *children):
        """`node`, noting its depth; reports the first expression nested too deeply."""
        depth = 1 + max(self._depth_of(c) for c in children)
        self._depths[id(node)] = (node, depth)
        if depth > limits.MAX_NESTING and not self._too_deep:
            self._too_deep = True
            self.problems.append(error(
                "P125", f"expression nested more than {limits.MAX_NESTING} operations deep "
                f"(limit {limits.MAX_NESTING})", node.span, label="too deeply nested",
                help="split the condition into several `check` statements"))
        return node

    def _depth_of(self, node) -> int:
        noted = self._depths.get(id(node))
        return noted[1] if noted is not None and noted[0] is node else 0

    # terminals
    def NAME(self, t):
        return ast.Name(token_span(self.file, t), str(t))

    def INT(self, t):
        return ast.IntLit(token_span(self.file, t), self._int(t, str(t)))

    def SIZE(self, t):
        text = str(t)
        digits = text.rstrip("KMGTiB \t")
        unit = text[len(digits):].strip()
        return ast.SizeLit(token_span(self.file, t), self._int(t, digits.strip()) * _UNITS[unit],
                           text)

    def STRING(self, t):
        raw = str(t)[1:-1]
        return ast.StrLit(token_span(self.file, t), _unescape(raw), raw)

    def AUTO(self, t):
        return ast.Auto(token_span(self.file, t))

    def _int(self, t: Token, digits: str) -> int:
        digits = digits.replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            self.problems.append(error(
                "P125", f"integer literal has {len(digits)} digits (limit {MAX_INT_DIGITS})",
                token_span(self.file, t), label="too large"))
            return 0
        return int(digits)

    # statements
    def start(self, items):
        return tuple(items)

    def _span_of(self, items) -> Span:
        """From the first token or node among `items` to the last, as lark's positions.

        An absent `[...]` (None, as ending a bare `model_parallel`) and an `axis_group`
        (a tuple) have no position of their own.
        """
        first, last = items[0], items[-1]
        if first is None or last is None or type(first) is tuple or type(last) is tuple:
            placed = [i for i in items if i is not None and type(i) is not tuple]
            first, last = placed[0], placed[-1]
        start = getattr(first, "span", first)  # a Token holds its own positions
        end = getattr(last, "span", last)
        return Span(self.file, start.line, start.column, end.end_line, end.end_column)

    def plan_stmt(self, items):
        return ast.PlanStmt(self._span_of(items), items[1])

    def param_stmt(self, items):
        return ast.ParamStmt(self._span_of(items), items[1], items[3])

    def mesh_stmt(self, items):
        return ast.MeshStmt(self._span_of(items),
                            tuple(i for i in items if isinstance(i, ast.AxisDecl)))

    def axis_decl(self, items):
        return ast.AxisDecl(self._span_of(items), items[0], items[2])

    def slices_stmt(self, items):
        return ast.SlicesStmt(self._span_of(items),
                              tuple(i for i in items if isinstance(i, ast.KwArg)))

    def axis_types_stmt(self, items):
        if len(items) == 2:  # `axis_types TYPE`
            return ast.AxisTypesStmt(self._span_of(items), items[1])
        return ast.AxisTypesStmt(self._span_of(items), None,
                                 tuple(i for i in items if isinstance(i, ast.AxisTypeDecl)))

    def axis_type_decl(self, items):
        return ast.AxisTypeDecl(self._span_of(items), items[0], items[2])

    def data_parallel_stmt(self, items):
        return ast.DataParallelStmt(self._span_of(items))

    def model_parallel_stmt(self, items):
        if items[1] is None:  # bare `model_parallel`
            return ast.ModelParallelStmt(self._span_of(items), None, ())
        axes, grouped = items[4]
        return ast.ModelParallelStmt(self._span_of(items), items[2], axes, grouped)

    def axis_group(self, items):
        names = tuple(i for i in items if isinstance(i, ast.Name))
        return names, len(items) > 1

    def match_stmt(self, items):
        return ast.MatchStmt(self._span_of(items), items[1])

    def overlap_stmt(self, items):
        return ast.OverlapStmt(self._span_of(items), items[1])

    def layout_stmt(self, items):
        return ast.LayoutSection(self._span_of(items), tuple(items[2:-1]))

    def outputs_stmt(self, items):
        return ast.OutputsSection(self._span_of(items), tuple(items[2:-1]))

    def budget_stmt(self, items):
        return ast.BudgetStmt(self._span_of(items),
                              tuple(i for i in items if isinstance(i, ast.KwArg)))

    def check_stmt(self, items):
        return ast.CheckStmt(self._span_of(items), items[1], items[3])

    def include_stmt(self, items):
        return ast.IncludeStmt(self._span_of(items), items[1])

    def model_stmt(self, items):
        return ast.ModelStmt(self._span_of(items), items[1])

    def cluster_stmt(self, items):
        return ast.ClusterStmt(self._span_of(items),
                               tuple(i for i in items if isinstance(i, ast.KwArg)),
                               auto=any(isinstance(i, ast.Auto) for i in items))

    def rename_stmt(self, items):
        return ast.RenameSection(self._span_of(items), tuple(items[2:-1]))

    def rename_rule(self, items):
        return ast.RenameRule(self._span_of(items), items[0], items[2], tuple(items[3:]))

    def kwarg(self, items):
        return ast.KwArg(self._span_of(items), items[0], items[2])

    def env_call(self, items):
        return ast.EnvCall(self._span_of(items), items[2], items[4] if len(items) > 4 else None)

    # rules and layouts
    def pattern_rule(self, items):
        return ast.PatternRule(self._span_of(items), items[0], items[2])

    def default_rule(self, items):
        return ast.DefaultRule(self._span_of(items), token_span(self.file, items[0]), items[2])

    def layout(self, items):
        alts = []
        for i in items:
            if isinstance(i, Token) and i.type == "REPLICATED":
                alts.append(ast.Replicated(token_span(self.file, i)))
            elif isinstance(i, ast.TupleLayout):
                alts.append(i)
        return ast.LayoutExpr(self._span_of(items), tuple(alts))

    def tuple_layout(self, items):
        return ast.TupleLayout(self._span_of(items),
                               tuple(i for i in items if isinstance(i, ast.Node)))

    def unsplit(self, items):
        return ast.Unsplit(token_span(self.file, items[0]))

    def ellipsis(self, items):
        return ast.Ellipsis(token_span(self.file, items[0]))

    def split_one(self, items):
        return ast.Split(self._span_of(items), (items[0],),
                         items[1].value if len(items) > 1 else None)

    def split_many(self, items):
        names = tuple(i for i in items if isinstance(i, ast.Name))
        block = items[-1].value if isinstance(items[-1], _BlockSize) else None
        return ast.Split(self._span_of(items), names, block, grouped=True)

    def block(self, items):  # the grammar's `block` is a block size, `[INT]`
        return _BlockSize(items[1], joined(token_span(self.file, items[0]),
                                           token_span(self.file, items[2])))

    # expressions
    def _binary(self, items):
        node = items[0]
        for i in range(1, len(items), 2):
            op, right = items[i], items[i + 1]
            node = self._nested(ast.BinOp(joined(node.span, right.span), str(op), node, right),
                                node, right)
        return node

    or_expr = and_expr = sum = term = _binary

    def comparison(self, items):
        return self._binary(items)

    def not_op(self, items):
        return self._nested(ast.UnaryOp(joined(token_span(self.file, items[0]), items[1].span),
                                        "not", items[1]), items[1])

    def neg(self, items):
        return self._nested(ast.UnaryOp(joined(token_span(self.file, items[0]), items[1].span),
                                        "-", items[1]), items[1])

    def atom(self, items):  # only reached for `( expr )`
        return self._nested(ast.Paren(joined(token_span(self.file, items[0]),
                                            token_span(self.file, items[2])), items[1]), items[1])

    def __default_token__(self, token):
        return token


class _BlockSize:
    """A split's `[INT]`: the block size, and the brackets' span."""

    __slots__ = ("value", "span")

    def __init__(self, value: ast.IntLit, span: Span) -> None:
        self.value, self.span = value, span


def _unescape(raw: str) -> str:
    # The STRING terminal pairs each backslash with the next character, so every `"` in
    # `raw` is the second half of a `\\"` pair and a plain replace finds exactly those.
    return raw.replace('\\"', '"')


# Once the text has parsed, no token but STRING and COMMENT holds `"` or `#`, so this
# finds exactly the lexer's comments, without building a second lexer per call.
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"|#[^\n\r]*')


def _comments(text: str, file: str) -> list[ast.Comment]:
    """Comments with their positions, for the formatter (the parser discards them)."""
    found = []
    if "#" not in text:
        return found
    line, counted = 1, 0
    for m in _STRING_OR_COMMENT.finditer(text):
        body = m.group()
        if body[0] != "#":
            continue
        start = m.start()
        line += text.count("\n", counted, start)
        counted = start
        col = start - (text.rfind("\n", 0, start) + 1) + 1
        found.append(ast.Comment(Span(file, line, col, line, col + len(body)), body.rstrip()))
    return found


def _span_of_text(text: str, file: str) -> Span:
    lines = text.split("\n")
    return Span(file, 1, 1, len(lines), len(lines[-1]) + 1)


# Strings and comments as the grammar lexes them, so brackets inside them are not counted;
# a lone `"` stops the scan (the lexer reports that string).
_BRACKET_SCAN = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"|#[^\n\r]*|[(\[{]|[)\]}]|"')


def _too_deep(text: str) -> int | None:
    """The offset of the first bracket nested deeper than `limits.MAX_NESTING`, or None."""
    if sum(text.count(c) for c in "([{") <= limits.MAX_NESTING:
        return None
    depth = 0
    for m in _BRACKET_SCAN.finditer(text):
        c = m.group()
        if c in "([{":
            depth += 1
            if depth > limits.MAX_NESTING:
                return m.start()
        elif c in ")]}":
            depth = max(depth - 1, 0)
        elif c == '"':
            return None
    return None
