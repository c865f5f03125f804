"""Plan text -> `planc.syntax.ast.Module`, comments included, or one located syntax error.

The AST is built as the parser reduces (`_Builder`), without a parse tree. The parser
is lark's LALR tables run by `planc.syntax.lalr` over one regex scan of the text (the
tables generated as plain data where they are current with the grammar, else read from
a built lark parser); text that does not parse is parsed again by lark, whose exception
becomes the diagnostic (`planc.syntax.errors`). Lark's runtime is imported for that
only. The grammar is `planc.syntax.grammar`.
"""

from __future__ import annotations

import _thread
import re
from itertools import accumulate

from planc.syntax import ast
from planc import limits
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.syntax import grammar
from planc.syntax.files import one_line_ending
from planc.syntax.lalr import Engine
from planc.syntax.spans import Lines, joined, line_col

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from planc.syntax.grammar import Lark, Token

MAX_INT_DIGITS = 30  # far above any real size; keeps int() away from huge literals
_UNITS = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}

# `threading.local` itself (~1 ms of a start-up to import `threading` for it).
_THREAD = _thread._local()


def _building_parser() -> tuple["_Builder", Engine | None]:
    """This thread's builder of the AST, and the engine that runs the grammar's tables
    with it (None where lark must parse every text).

    Building inside the parse skips lark's parse tree and a second walk over it. The
    builder is bound into the engine (and into `_lark_parser`'s parser), so each thread
    has its own, and `parse` resets the builder for every text. The engine comes from
    the generated tables where they are current, without importing lark's runtime.
    """
    parts = getattr(_THREAD, "parts", None)
    if parts is None:
        builder = _Builder("<string>")
        tables = grammar.tables()
        engine = None if tables is None else Engine.of_tables(tables, builder, builder.leaves())
        if engine is None:
            engine = Engine.of(_lark_parser(builder), builder.leaves())
        parts = _THREAD.parts = (builder, engine)
    return parts


def _lark_parser(builder: "_Builder") -> "Lark":
    """The lark parser that builds the AST with `builder`, made the first time it is
    needed: no text that parses needs it where the generated tables are current."""
    parser = getattr(builder, "lark_parser", None)
    if parser is None:
        # No positions on tree nodes: the builder computes spans itself.
        parser = builder.lark_parser = grammar.new_parser(transformer=builder)
    return parser


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
                               Span.start_of(file), label="plan starts here"),), {file: ""})
    deep = _too_deep(text)
    if deep is not None:
        line, col = line_col(text, deep)
        raise PlanError((error(
            "P125", f"brackets nested more than {limits.MAX_NESTING} deep "
            f"(limit {limits.MAX_NESTING})", Span(file, line, col, line, col + 1),
            label="too deeply nested"),), {file: text})
    builder, engine = _building_parser()
    builder.begin(file, text)
    try:
        statements = engine.parse(text) if engine is not None else None
        if statements is None:
            # The engine takes only text that parses; lark says what is wrong with this.
            statements = _lark_parse(builder, file, text)
    finally:
        problems = builder.problems
        builder.begin(file, "")  # the builder outlives the parse: let go of this text
    if problems:
        raise PlanError(tuple(problems), {file: text})
    return ast.Module(_span_of_text(text, file), file, statements, _comments(text, file))


def _lark_parse(builder: "_Builder", file: str, text: str):
    """What lark's parser with `builder` returns for `text`, or the `PlanError` of lark's
    syntax error, located."""
    parser = _lark_parser(builder)
    builder.begin(file, text)
    try:
        return parser.parse(text)
    except grammar.UnexpectedInput as exc:
        from planc.syntax.errors import syntax_diagnostic

        diagnostic = syntax_diagnostic(exc, text, file)
    raise PlanError((diagnostic,), {file: text})


# -- tokens and reductions -> AST ----------------------------------------------------------

class _Builder:
    """Builds AST nodes bottom-up; every node's span comes from its first and last token.

    lark's LALR parser, or the engine that runs its tables (`planc.syntax.lalr`), calls
    it as it reduces, so no recursion is involved however deeply the text nests, and no
    parse tree is built. A callback gets its children only (lark cannot hand an inline
    transformer `meta`): spans come from the children, tokens by their offsets. The
    terminals that become nodes are `leaves` (text and offsets -> node), which the engine
    calls directly and lark through the terminal callbacks of the same names.
    Expressions deeper than `limits.MAX_NESTING` are refused (P125): `not not ... 1` or
    `1 + 1 + ...` nest without brackets, and the checker, the formatter and node equality
    all recurse over the tree it returns.
    """

    def __init__(self, file: str):
        self.begin(file, "")

    def begin(self, file: str, text: str) -> None:
        """Forget the last text; spans now name `file` and count in `text`."""
        self.file = file
        self._lines = Lines(file, text)
        self._at = self._lines.span
        self.problems: list[Diagnostic] = []
        self._depths: dict[int, tuple[ast.Node, int]] = {}
        self._too_deep = False

    def leaves(self) -> dict:
        """The terminals that become nodes: name -> f(text, start, end) -> node."""
        return {"NAME": self._name, "INT": self._int_lit, "SIZE": self._size,
                "DURATION": self._duration, "PERCENT": self._percent,
                "DIGITWORD": self._name, "GROUP": self._group,
                "STRING": self._string, "AUTO": self._auto, "UNSPLIT": self._unsplit,
                "ELLIPSIS": self._ellipsis, "REPLICATED": self._replicated}

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

    def _token_span(self, t) -> Span:
        return self._at(t.start_pos, t.end_pos)

    # leaves
    def _name(self, text: str, start: int, end: int) -> ast.Name:
        return ast.Name(self._at(start, end), text)

    def _int_lit(self, text: str, start: int, end: int) -> ast.IntLit:
        span = self._at(start, end)
        return ast.IntLit(span, self._int(text, span))

    def _size(self, text: str, start: int, end: int) -> ast.SizeLit:
        span = self._at(start, end)
        digits = text.rstrip("KMGTiB \t")
        unit = text[len(digits):].strip()
        return ast.SizeLit(span, self._int(digits.strip(), span) * _UNITS[unit], text)

    def _duration(self, text: str, start: int, end: int) -> ast.DurationLit:
        span = self._at(start, end)
        number = text.rstrip("musn \t")
        unit = text[len(number):].strip()
        whole, _, fraction = number.strip().partition(".")
        value = (self._int(whole, span) + (int(fraction) / 10 ** len(fraction) if fraction
                                             else 0)) * _SECONDS[unit]
        return ast.DurationLit(span, value, text)

    def _percent(self, text: str, start: int, end: int) -> ast.PercentLit:
        span = self._at(start, end)
        whole, _, fraction = text.rstrip("% \t").partition(".")
        value = self._int(whole, span) + (int(fraction[:12]) / 10 ** len(fraction[:12])
                                          if fraction else 0)
        return ast.PercentLit(span, value / 100, text)

    def _group(self, text: str, start: int, end: int) -> ast.GroupRef:
        span = self._at(start, end)
        return ast.GroupRef(span, self._int(text[1:], span))

    def _string(self, text: str, start: int, end: int) -> ast.StrLit:
        raw = text[1:-1]
        return ast.StrLit(self._at(start, end), _unescape(raw), raw)

    def _auto(self, text: str, start: int, end: int) -> ast.Auto:
        return ast.Auto(self._at(start, end))

    def _unsplit(self, text: str, start: int, end: int) -> ast.Unsplit:
        return ast.Unsplit(self._at(start, end))

    def _ellipsis(self, text: str, start: int, end: int) -> ast.Ellipsis:
        return ast.Ellipsis(self._at(start, end))

    def _replicated(self, text: str, start: int, end: int) -> ast.Replicated:
        return ast.Replicated(self._at(start, end))

    def _int(self, digits: str, span: Span) -> int:
        digits = digits.replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            self.problems.append(error(
                "P125", f"integer literal has {len(digits)} digits (limit {MAX_INT_DIGITS})",
                span, label="too large"))
            return 0
        return int(digits)

    # the leaves as lark's terminal callbacks
    def NAME(self, t: Token):
        return self._name(t.value, t.start_pos, t.end_pos)

    def INT(self, t: Token):
        return self._int_lit(t.value, t.start_pos, t.end_pos)

    def SIZE(self, t: Token):
        return self._size(t.value, t.start_pos, t.end_pos)

    def DURATION(self, t: Token):
        return self._duration(t.value, t.start_pos, t.end_pos)

    def PERCENT(self, t: Token):
        return self._percent(t.value, t.start_pos, t.end_pos)

    def DIGITWORD(self, t: Token):
        return self._name(t.value, t.start_pos, t.end_pos)

    def GROUP(self, t: Token):
        return self._group(t.value, t.start_pos, t.end_pos)

    def STRING(self, t: Token):
        return self._string(t.value, t.start_pos, t.end_pos)

    def AUTO(self, t: Token):
        return self._auto(t.value, t.start_pos, t.end_pos)

    def UNSPLIT(self, t: Token):
        return self._unsplit(t.value, t.start_pos, t.end_pos)

    def ELLIPSIS(self, t: Token):
        return self._ellipsis(t.value, t.start_pos, t.end_pos)

    def REPLICATED(self, t: Token):
        return self._replicated(t.value, t.start_pos, t.end_pos)

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
        span = getattr(first, "span", None)  # a node; a token has only its offsets
        line, col = (span.line, span.column) if span else self._lines.point(first.start_pos)
        span = getattr(last, "span", None)
        end_line, end_col = ((span.end_line, span.end_column) if span
                             else self._lines.point(last.end_pos))
        return Span(self.file, line, col, end_line, end_col)

    def _between(self, first, last) -> Span:
        """From token `first` to token `last`."""
        return self._at(first.start_pos, last.end_pos)

    def plan_stmt(self, items):
        return ast.PlanStmt(self._span_of(items), items[1])

    def param_stmt(self, items):
        return ast.ParamStmt(self._span_of(items), items[1], items[3])

    def mesh_stmt(self, items):
        return ast.MeshStmt(self._between(items[0], items[-1]),
                            tuple(i for i in items if isinstance(i, ast.AxisDecl)))

    def axis_decl(self, items):
        return ast.AxisDecl(joined(items[0].span, items[2].span), items[0], items[2])

    def slices_stmt(self, items):
        return ast.SlicesStmt(self._between(items[0], items[-1]),
                              tuple(i for i in items if isinstance(i, ast.KwArg)))

    def axis_types_stmt(self, items):
        if len(items) == 2:  # `axis_types TYPE`
            return ast.AxisTypesStmt(self._span_of(items), items[1])
        return ast.AxisTypesStmt(self._span_of(items), None,
                                 tuple(i for i in items if isinstance(i, ast.AxisTypeDecl)))

    def axis_type_decl(self, items):
        return ast.AxisTypeDecl(joined(items[0].span, items[2].span), items[0], items[2])

    def data_parallel_stmt(self, items):
        return ast.DataParallelStmt(self._token_span(items[0]))

    def model_parallel_stmt(self, items):
        if items[1] is None:  # bare `model_parallel`
            return ast.ModelParallelStmt(self._token_span(items[0]), None, ())
        axes, grouped = items[4]
        return ast.ModelParallelStmt(self._between(items[0], items[-1]), items[2], axes, grouped)

    def axis_group(self, items):
        names = tuple(i for i in items if isinstance(i, ast.Name))
        return names, len(items) > 1

    def match_stmt(self, items):
        return ast.MatchStmt(self._span_of(items), items[1])

    def overlap_stmt(self, items):
        return ast.OverlapStmt(self._span_of(items), items[1])

    def layout_stmt(self, items):
        return ast.LayoutSection(self._between(items[0], items[-1]), tuple(items[2:-1]))

    def outputs_stmt(self, items):
        return ast.OutputsSection(self._between(items[0], items[-1]), tuple(items[2:-1]))

    def state_stmt(self, items):
        return ast.StateSection(self._between(items[0], items[-1]), tuple(items[2:-1]))

    def budget_stmt(self, items):
        return ast.BudgetStmt(self._between(items[0], items[-1]),
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
        return ast.RenameSection(self._between(items[0], items[-1]), tuple(items[2:-1]))

    def rename_rule(self, items):
        return ast.RenameRule(self._span_of(items), items[0], items[2], tuple(items[3:]))

    def axes_stmt(self, items):
        return ast.AxesSection(self._between(items[0], items[-1]), tuple(items[2:-1]))

    def logical_rule(self, items):
        name, target = items[0], items[2]
        return ast.LogicalRule(joined(name.span, target.span), name, target.axes)

    def logical_one(self, items):
        return _Target((items[0],), items[0].span)

    def logical_none(self, items):
        return _Target((), items[0].span)

    def logical_many(self, items):
        return _Target(tuple(i for i in items if isinstance(i, ast.Name)),
                       self._between(items[0], items[-1]))

    def stages_stmt(self, items):
        # STAGES ( NAME (, kwarg)* ,? ) { stage_rule* }
        axis = items[2]
        args = tuple(i for i in items if isinstance(i, ast.KwArg))
        rules = tuple(i for i in items if isinstance(i, ast.StageRule))
        return ast.StagesStmt(self._between(items[0], items[-1]), axis, args, rules)

    def stage_rule(self, items):
        pattern, stage = items[0], items[2]
        return ast.StageRule(joined(pattern.span, stage.span), pattern, stage)

    def call(self, items):
        return ast.CallValue(joined(items[0].span, self._token_span(items[-1])), items[0],
                             items[2])

    def kwarg(self, items):
        return ast.KwArg(joined(items[0].span, items[2].span), items[0], items[2])

    def env_call(self, items):
        return ast.EnvCall(self._between(items[0], items[-1]), items[2],
                           items[4] if len(items) > 4 else None)

    # rules and layouts: the bulk of a large plan, so each builds only what it must
    def pattern_rule(self, items):
        pattern, layout = items[0], items[2]
        return ast.PatternRule(joined(pattern.span, layout.span), pattern, layout)

    def default_rule(self, items):
        keyword, layout = self._token_span(items[0]), items[2]
        return ast.DefaultRule(joined(keyword, layout.span), keyword, layout)

    def layout(self, items):
        # alternative (VBAR alternative)* memory?: each alternative is a node already, and
        # an absent memory is None at the end.
        memory = items[-1]
        if len(items) == 2 and memory is None:
            return ast.LayoutExpr(items[0].span, (items[0],))
        if memory is None:
            return ast.LayoutExpr(joined(items[0].span, items[-2].span), tuple(items[:-1:2]))
        return ast.LayoutExpr(joined(items[0].span, memory.span), tuple(items[:-1:2]), memory)

    def memory(self, items):
        return ast.Memory(joined(self._token_span(items[0]), items[1].span), items[1])

    def tuple_layout(self, items):
        # ( [entry (COMMA entry)* COMMA?] ): the entries stand at every other place, and
        # an empty `()` holds the placeholders of the absent `[...]`.
        return ast.TupleLayout(self._between(items[0], items[-1]),
                               () if items[1] is None else tuple(items[1:-1:2]))

    def unsplit(self, items):
        return items[0]

    def ellipsis(self, items):
        return items[0]

    def split_one(self, items):
        name = items[0]
        if len(items) == 1:
            return ast.Split(name.span, (name,))
        block = items[1]
        return ast.Split(joined(name.span, block.span), (name,), block.value)

    def split_many(self, items):
        names = tuple(i for i in items if isinstance(i, ast.Name))
        block = items[-1].value if isinstance(items[-1], _BlockSize) else None
        return ast.Split(self._span_of(items), names, block, grouped=True)

    def block(self, items):  # the grammar's `block` is a block size, `[INT]`
        return _BlockSize(items[1], self._between(items[0], items[2]))

    # expressions
    def _binary(self, items):
        node = items[0]
        for i in range(1, len(items), 2):
            op, right = items[i], items[i + 1]
            node = self._nested(ast.BinOp(joined(node.span, right.span), op.value, node, right),
                                node, right)
        return node

    or_expr = and_expr = sum = term = _binary

    def comparison(self, items):
        return self._binary(items)

    def not_op(self, items):
        return self._nested(ast.UnaryOp(joined(self._token_span(items[0]), items[1].span),
                                        "not", items[1]), items[1])

    def neg(self, items):
        return self._nested(ast.UnaryOp(joined(self._token_span(items[0]), items[1].span),
                                        "-", items[1]), items[1])

    def atom(self, items):  # only reached for `( expr )`
        return self._nested(ast.Paren(self._between(items[0], items[2]), items[1]), items[1])

    def __getattr__(self, name):
        # lark asks for a callback by rule name; only its helper rules (`__x_star_0` for an
        # `x*`, ...) have none here. The rule that holds one splices the helper's children
        # into its own, so the helper's callback need only keep them.
        if name.startswith("__") and not name.endswith("__"):
            return _Spliced
        raise AttributeError(name)

    def __default_token__(self, token):
        return token


class _Spliced:
    """The children of a rule lark inlines into the rule that holds it."""

    __slots__ = ("children",)

    def __init__(self, children: list) -> None:
        self.children = children


_SECONDS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}


class _Target:
    """What a logical name maps to, while its rule is built: the mesh axes and their span."""

    __slots__ = ("axes", "span")

    def __init__(self, axes: tuple, span: Span):
        self.axes, self.span = axes, span


class _BlockSize:
    """A split's `[INT]`: the block size, and the brackets' span."""

    __slots__ = ("value", "span")

    def __init__(self, value: ast.IntLit, span: Span) -> None:
        self.value, self.span = value, span


def _unescape(raw: str) -> str:
    # The STRING terminal pairs each backslash with the next character, so every `"` in
    # `raw` is the second half of a `\\"` pair and a plain replace finds exactly those.
    return raw.replace('\\"', '"')


# The grammar's STRING, `"(?:[^"\\\n\r]|\\[^\n\r])*"`, written so that `re` runs through a
# string without trying two branches at every character: the same strings, 4x faster.
_STRING = r'"[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"'
# Once the text has parsed, no token but STRING and COMMENT holds `"` or `#`, so this
# finds exactly the lexer's comments, without building a second lexer per call.
_STRING_OR_COMMENT = re.compile(_STRING + r'|#[^\n\r]*')


def _comments(text: str, file: str) -> tuple[ast.Comment, ...]:
    """Comments with their positions, for the formatter (the parser discards them)."""
    if "#" not in text:
        return ()
    found = []
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
    return tuple(found)


def _span_of_text(text: str, file: str) -> Span:
    lines = text.count("\n") + 1
    return Span(file, 1, 1, lines, len(text) - text.rfind("\n"))


# Strings and comments as the grammar lexes them, so brackets inside them are not counted;
# a lone `"` stops the scan (the lexer reports that string). Compiled by `re` when first
# used: only deeply bracketed text needs it.
_BRACKET_SCAN = _STRING + r'|#[^\n\r]*|[(\[{]|[)\]}]|"'
_NOT_BRACKETS = bytes(range(256)).translate(None, b"()[]{}")
_STEP = {ord(c): 1 if c in "([{" else -1 for c in "()[]{}"}


def _too_deep(text: str) -> int | None:
    """The offset of the first bracket nested deeper than `limits.MAX_NESTING`, or None."""
    if sum(text.count(c) for c in "([{") <= limits.MAX_NESTING:
        return None
    # At C speed first: the brackets outside strings and comments, up to a lone `"`, and
    # their running depth. Without a `)` too many the depth is never clamped at 0, and
    # if it stays within the limit, so does the scan's.
    kept = _STRING_OR_COMMENT.sub("", text)
    quote = kept.find('"')
    if quote >= 0:
        kept = kept[:quote]
    # Brackets are ASCII, so in UTF-8 they are the bytes they are, and no other byte is.
    brackets = kept.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKETS)
    depths = list(accumulate(map(_STEP.__getitem__, brackets)))
    if not depths or (min(depths) >= 0 and max(depths) <= limits.MAX_NESTING):
        return None
    depth = 0
    for m in re.finditer(_BRACKET_SCAN, text):
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
