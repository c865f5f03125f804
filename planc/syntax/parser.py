"""Plan text -> `planc.ast.Module`, with syntax errors a person can act on.

The grammar is `grammar/planc.lark` (shipped in the wheel as `planc.grammar`). The LALR
tables are cached on disk by lark between processes and loaded once per thread, and the
AST is built as the parser reduces, without a parse tree.
"""

from __future__ import annotations

import functools
import re
import threading
from importlib import resources

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from planc.syntax import ast
from planc import limits
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.diagnostics.did_you_mean import closest

# How each terminal reads in an error message.
_WORDS = {
    "ARROW": "`->`", "ELLIPSIS": "`...`", "LPAR": "`(`", "RPAR": "`)`", "LBRACE": "`{`",
    "RBRACE": "`}`", "LSQB": "`[`", "RSQB": "`]`", "COMMA": "`,`", "EQUAL": "`=`",
    "VBAR": "`|`", "MINUS": "`-`", "ADD_OP": "`+`", "MUL_OP": "`*`, `//` or `%`",
    "COMPARE": "a comparison (`==`, `<`, ...)", "NAME": "a name", "INT": "an integer",
    "SIZE": "a size such as `16 GiB`", "STRING": 'a string in double quotes',
    "UNSPLIT": "`_`", "$END": "the end of the file",
}
STATEMENT_KEYWORDS = (
    "plan", "param", "mesh", "slices", "data_parallel", "model_parallel", "match",
    "overlap", "layout", "outputs", "budget", "check", "include", "cluster",
)
KEYWORDS = STATEMENT_KEYWORDS + ("default", "replicated", "auto", "env", "and", "or", "not")
_STATEMENT_TERMINALS = {k.upper() for k in STATEMENT_KEYWORDS}

MAX_INT_DIGITS = 30  # far above any real size; keeps int() away from huge literals
_UNITS = {
    "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
    "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40,
}


@functools.lru_cache(maxsize=1)
def _lark() -> Lark:
    grammar = resources.files("planc.grammar").joinpath("planc.lark").read_text("utf-8")
    # The basic lexer reads the text the same way in every parser state. lark's default
    # contextual lexer leaves NAME out where no name can follow, so `planner` was read as
    # `plan ner` and `overlapfirst` as `overlap first`.
    return Lark(grammar, parser="lalr", lexer="basic", propagate_positions=True,
                maybe_placeholders=True, cache=True)


_THREAD = threading.local()


def _building_parser() -> tuple[Lark, "_Builder"]:
    """This thread's LALR parser that builds the AST as it parses, and its builder.

    Building inside the parse skips lark's parse tree and a second walk over it (about
    half the time of a parse). The builder is bound into the parser, so each thread has
    its own pair and `parse` resets the builder for every text.
    """
    pair = getattr(_THREAD, "pair", None)
    if pair is None:
        grammar = resources.files("planc.grammar").joinpath("planc.lark").read_text("utf-8")
        builder = _Builder("<string>")
        # As `_lark`, less the positions on tree nodes: the builder computes spans itself.
        pair = _THREAD.pair = (Lark(grammar, parser="lalr", lexer="basic",
                                    maybe_placeholders=True, cache=True,
                                    transformer=builder), builder)
    return pair


def parse(text: str, file: str = "<string>") -> ast.Module:
    """Parse plan text into a `Module`, or raise `PlanError` with one located diagnostic.

    >>> m = parse('mesh(batch = auto)\\ndata_parallel', "demo.kd")
    >>> type(m.statements[0]).__name__, m.statements[0].span.line
    ('MeshStmt', 1)
    """
    comments: list[ast.Comment] = []
    # Text handed to `loads` or `format_text` is held to the limit of a file read from disk.
    if (len(text) * 4 > limits.MAX_PLAN_BYTES
            and len(text.encode("utf-8", "surrogatepass")) > limits.MAX_PLAN_BYTES):
        raise PlanError((error("P125", f"plan is larger than {limits.MAX_PLAN_BYTES} bytes",
                               Span(file, 1, 1, 1, 2), label="plan starts here"),), {file: ""})
    deep = _too_deep(text)
    if deep is not None:
        line, col = _line_col(text, deep)
        raise PlanError((error(
            "P125", f"brackets nested more than {limits.MAX_NESTING} deep "
            f"(limit {limits.MAX_NESTING})", Span(file, line, col, line, col + 1),
            label="too deeply nested"),), {file: text})
    parser, builder = _building_parser()
    builder.begin(file)
    try:
        module = parser.parse(text)
    except UnexpectedInput as exc:
        raise PlanError((_syntax_diagnostic(exc, text, file),), {file: text}) from None
    finally:
        problems = builder.problems
        builder.begin(file)  # the builder outlives the parse: let go of this text's nodes
    if problems:
        raise PlanError(tuple(problems), {file: text})
    comments = _comments(text, file)
    end = _span_of_text(text, file)
    return ast.Module(end, file, module, tuple(comments))


# -- tree -> AST ------------------------------------------------------------------------

def _tok_span(file: str, t: Token) -> Span:
    return Span(file, t.line, t.column, t.end_line, t.end_column)


def _join(a: Span, b: Span) -> Span:
    return Span(a.file, a.line, a.column, b.end_line, b.end_column)


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
        got = self._depths.get(id(node))
        return got[1] if got is not None and got[0] is node else 0

    # terminals
    def NAME(self, t):
        return ast.Name(_tok_span(self.file, t), str(t))

    def INT(self, t):
        return ast.IntLit(_tok_span(self.file, t), self._int(t, str(t)))

    def SIZE(self, t):
        text = str(t)
        digits = text.rstrip("KMGTiB \t")
        unit = text[len(digits):].strip()
        return ast.SizeLit(_tok_span(self.file, t), self._int(t, digits.strip()) * _UNITS[unit],
                           text)

    def STRING(self, t):
        raw = str(t)[1:-1]
        return ast.StrLit(_tok_span(self.file, t), _unescape(raw), raw)

    def AUTO(self, t):
        return ast.Auto(_tok_span(self.file, t))

    def _int(self, t: Token, digits: str) -> int:
        digits = digits.replace("_", "")
        if len(digits) > MAX_INT_DIGITS:
            self.problems.append(error(
                "P125", f"integer literal has {len(digits)} digits (limit {MAX_INT_DIGITS})",
                _tok_span(self.file, t), label="too large"))
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
        return ast.LayoutBlock(self._span_of(items), tuple(items[2:-1]))

    def outputs_stmt(self, items):
        return ast.OutputsBlock(self._span_of(items), tuple(items[2:-1]))

    def budget_stmt(self, items):
        return ast.BudgetStmt(self._span_of(items),
                              tuple(i for i in items if isinstance(i, ast.KwArg)))

    def check_stmt(self, items):
        return ast.CheckStmt(self._span_of(items), items[1], items[3])

    def include_stmt(self, items):
        return ast.IncludeStmt(self._span_of(items), items[1])

    def cluster_stmt(self, items):
        return ast.ClusterStmt(self._span_of(items),
                               tuple(i for i in items if isinstance(i, ast.KwArg)))

    def kwarg(self, items):
        return ast.KwArg(self._span_of(items), items[0], items[2])

    def env_call(self, items):
        return ast.EnvCall(self._span_of(items), items[2], items[4] if len(items) > 4 else None)

    # rules and layouts
    def pattern_rule(self, items):
        return ast.PatternRule(self._span_of(items), items[0], items[2])

    def default_rule(self, items):
        return ast.DefaultRule(self._span_of(items), _tok_span(self.file, items[0]), items[2])

    def layout(self, items):
        alts = []
        for i in items:
            if isinstance(i, Token) and i.type == "REPLICATED":
                alts.append(ast.Replicated(_tok_span(self.file, i)))
            elif isinstance(i, ast.TupleLayout):
                alts.append(i)
        return ast.LayoutExpr(self._span_of(items), tuple(alts))

    def tuple_layout(self, items):
        return ast.TupleLayout(self._span_of(items),
                               tuple(i for i in items if isinstance(i, ast.Node)))

    def unsplit(self, items):
        return ast.Unsplit(_tok_span(self.file, items[0]))

    def ellipsis(self, items):
        return ast.Ellipsis(_tok_span(self.file, items[0]))

    def split_one(self, items):
        return ast.Split(self._span_of(items), (items[0],),
                         items[1].value if len(items) > 1 else None)

    def split_many(self, items):
        names = tuple(i for i in items if isinstance(i, ast.Name))
        block = items[-1].value if isinstance(items[-1], _Block) else None
        return ast.Split(self._span_of(items), names, block, grouped=True)

    def block(self, items):
        return _Block(items[1], _join(_tok_span(self.file, items[0]),
                                      _tok_span(self.file, items[2])))

    # expressions
    def _binary(self, items):
        node = items[0]
        for i in range(1, len(items), 2):
            op, right = items[i], items[i + 1]
            node = self._nested(ast.BinOp(_join(node.span, right.span), str(op), node, right),
                                node, right)
        return node

    or_expr = and_expr = sum = term = _binary

    def comparison(self, items):
        return self._binary(items)

    def not_op(self, items):
        return self._nested(ast.UnaryOp(_join(_tok_span(self.file, items[0]), items[1].span),
                                        "not", items[1]), items[1])

    def neg(self, items):
        return self._nested(ast.UnaryOp(_join(_tok_span(self.file, items[0]), items[1].span),
                                        "-", items[1]), items[1])

    def atom(self, items):  # only reached for `( expr )`
        return self._nested(ast.Paren(_join(_tok_span(self.file, items[0]),
                                            _tok_span(self.file, items[2])), items[1]), items[1])

    def __default_token__(self, token):
        return token


class _Block:
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


# -- syntax errors ------------------------------------------------------------------------

def _describe(expected: set[str]) -> str:
    names = set(expected)
    parts = []
    if names & _STATEMENT_TERMINALS and len(names & _STATEMENT_TERMINALS) > 3:
        parts.append("a statement (`mesh`, `layout`, `param`, ...)")
        names -= _STATEMENT_TERMINALS
    for n in sorted(names, key=lambda n: (n not in _WORDS, n)):
        parts.append(_WORDS.get(n, f"`{n.lower()}`"))
    if not parts:
        return "nothing more"
    if len(parts) == 1:
        return parts[0]
    return ", ".join(parts[:-1]) + " or " + parts[-1]


def _found(tok: Token) -> str:
    if tok.type == "$END":
        return "the end of the file"
    return f"`{tok}`"


def _unclosed(text: str, upto: int) -> tuple[int, str] | None:
    """The offset of the innermost bracket still open at `upto`, skipping strings and comments."""
    stack, i, pairs = [], 0, {")": "(", "]": "[", "}": "{"}
    while i < upto:
        c = text[i]
        if c == "#":
            nl = text.find("\n", i)
            i = upto if nl < 0 else nl
            continue
        if c == '"':
            i += 1
            while i < upto and text[i] not in '"\n':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            stack.append((i, c))
        elif c in ")]}" and stack and stack[-1][1] == pairs[c]:
            stack.pop()
        i += 1
    return stack[-1] if stack else None


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


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, col


def _syntax_diagnostic(exc: UnexpectedInput, text: str, file: str) -> Diagnostic:
    if isinstance(exc, UnexpectedCharacters):
        return _bad_character(exc, text, file)
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    expected = set(exc.expected)
    if tok.type == "$END":
        line, col = _line_col(text, len(text))
        span = Span(file, line, col, line, col + 1)
    else:
        span = _tok_span(file, tok)
    found = _found(tok)
    helps: list[str] = []
    secondary = ()

    if expected & _STATEMENT_TERMINALS and tok.type == "NAME":
        close = closest(str(tok), STATEMENT_KEYWORDS)
        helps.append(f"did you mean `{close}`?" if close else
                     "statements start with one of: " + ", ".join(f"`{k}`" for k in STATEMENT_KEYWORDS))
        return error("P006", f"unknown statement `{tok}`", span, label="not a statement",
                     help=tuple(helps))
    if "ELLIPSIS" in expected and tok.type == "COMMA":
        return error("P005", "empty layout entry", span, label="a dimension is missing here",
                     help="write `_` for a dimension that is not split")
    if tok.type == "NAME":
        words = [n.lower() for n in expected if n.lower() in KEYWORDS]
        close = closest(str(tok), words)
        if close:
            helps.append(f"did you mean `{close}`?")
    if expected == {"ARROW"}:
        helps.append('a rule is written `"REGEX" -> LAYOUT`')
    opened = _unclosed(text, tok.start_pos if tok.type != "$END" else len(text))
    if opened and ({"RPAR", "RBRACE", "RSQB"} & expected):
        oline, ocol = _line_col(text, opened[0])
        secondary = (_label(file, oline, ocol, f"`{opened[1]}` opened here is not closed"),)
    message = f"expected {_describe(expected)}, found {found}"
    return error("P001", message, span, label="unexpected here", help=tuple(helps),
                 secondary=secondary)


def _label(file, line, col, message):
    from planc.diagnostics import Label

    return Label(Span(file, line, col, line, col + 1), message)


def _bad_character(exc: UnexpectedCharacters, text: str, file: str) -> Diagnostic:
    pos = exc.pos_in_stream
    ch = text[pos]
    line, col = exc.line, exc.column
    eol = text.find("\n", pos)
    eol = len(text) if eol < 0 else eol
    if ch == '"':
        span = Span(file, line, col, line, col + max(eol - pos, 1))
        return error("P002", "unterminated string", span, label="this string is never closed",
                     help='close it with `"` on the same line; strings cannot span lines')
    if ch == "'":
        close = text.find("'", pos + 1, eol)
        end = (close + 1) if close >= 0 else eol
        span = Span(file, line, col, line, col + (end - pos))
        inner = text[pos + 1:close] if close >= 0 else text[pos + 1:eol]
        return error("P003", "strings are written in double quotes", span,
                     label="single-quoted", help=f'write "{inner}"')
    span = Span(file, line, col, line, col + 1)
    if ch == ":":
        before = text[:pos].rstrip()
        if before.endswith('"') or before.endswith("default"):
            return error("P007", "`:` between a pattern and its layout", span,
                         label="write `->` here", help='a rule is written `"REGEX" -> LAYOUT`')
        return error("P004", "unexpected character `:`", span, label="not planc syntax",
                     help="settings are written `name = value`")
    shown = ch if ch.isprintable() else repr(ch)
    expected = _expected_at(text, pos)
    return error("P004", f"unexpected character `{shown}`", span, label="not planc syntax",
                 help=f"expected {_describe(expected)}" if expected else None)


def _expected_at(text: str, pos: int) -> set[str]:
    """The terminals the parser could take at `pos` (the basic lexer does not know)."""
    try:
        state = _lark().parse_interactive(text[:pos])
        state.exhaust_lexer()
        return set(state.accepts()) - {"$END"}
    except UnexpectedInput:
        return set()
