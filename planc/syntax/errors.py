"""What a syntax error says: lark's exception as one located diagnostic a person can act on.

The wording names tokens as they are written (`->`, "a name"), suggests the keyword that
was meant, points at the bracket left open, and says what the parser would have taken
where the lexer met a character that is not planc syntax.
"""

from __future__ import annotations

from planc.diagnostics import Diagnostic, Label, Span, error
from planc.diagnostics.did_you_mean import closest
from planc.syntax.grammar import (Token, UnexpectedCharacters, UnexpectedInput, UnexpectedToken,
                                   positioned_parser)
from planc.syntax.keywords import RESERVED, STATEMENT_KEYWORDS
from planc.syntax.spans import line_col, token_span

# How each terminal reads in an error message.
_WORDS = {
    "ARROW": "`->`", "ELLIPSIS": "`...`", "LPAR": "`(`", "RPAR": "`)`", "LBRACE": "`{`",
    "RBRACE": "`}`", "LSQB": "`[`", "RSQB": "`]`", "COMMA": "`,`", "EQUAL": "`=`",
    "VBAR": "`|`", "MINUS": "`-`", "ADD_OP": "`+`", "MUL_OP": "`*`, `/`, `//` or `%`",
    "COMPARE": "a comparison (`==`, `<`, ...)", "NAME": "a name", "INT": "an integer",
    "SIZE": "a size such as `16 GiB`", "DURATION": "a time such as `120 ms`",
    "STRING": 'a string in double quotes', "PERCENT": "a share such as `10%`",
    "DIGITWORD": "a word such as `1f1b`",
    "GROUP": "a pattern's group such as `\\1`",
    "UNSPLIT": "`_`", "$END": "the end of the file",
}
_STATEMENT_TERMINALS = {k.upper() for k in STATEMENT_KEYWORDS}


def syntax_diagnostic(exc: UnexpectedInput, text: str, file: str) -> Diagnostic:
    """The diagnostic (P001-P007) for lark's `exc`, raised parsing `text` of `file`."""
    if isinstance(exc, UnexpectedCharacters):
        return _bad_character(exc, text, file)
    assert isinstance(exc, UnexpectedToken)
    tok = exc.token
    expected = set(exc.expected)
    if tok.type == "$END":
        line, col = line_col(text, len(text))
        span = Span(file, line, col, line, col + 1)
    else:
        span = token_span(file, tok)
    found = _found(tok)
    helps: list[str] = []
    secondary = ()

    if expected & _STATEMENT_TERMINALS and tok.type == "NAME":
        close = closest(str(tok), STATEMENT_KEYWORDS)
        helps.append(f"did you mean `{close}`?" if close else "statements start with one of: "
                     + ", ".join(f"`{k}`" for k in STATEMENT_KEYWORDS))
        return error("P006", f"unknown statement `{tok}`", span, label="not a statement",
                     help=tuple(helps))
    if "ELLIPSIS" in expected and tok.type == "COMMA":
        return error("P005", "empty layout entry", span, label="a dimension is missing here",
                     help="write `_` for a dimension that is not split")
    if tok.type == "NAME":
        # A keyword's terminal is its word in capitals; `_` (UNSPLIT) is never offered.
        words = [n.lower() for n in expected if n.lower() in RESERVED]
        close = closest(str(tok), words)
        if close:
            helps.append(f"did you mean `{close}`?")
    if expected == {"ARROW"}:
        helps.append('a rule is written `"REGEX" -> LAYOUT`'
                     if not _in_rename(text, tok) else
                     'a rename rule is written `"REGEX" -> "TEMPLATE"`')
    opened = _unclosed(text, tok.start_pos if tok.type != "$END" else len(text))
    if opened and ({"RPAR", "RBRACE", "RSQB"} & expected):
        oline, ocol = line_col(text, opened[0])
        secondary = (_label(file, oline, ocol, f"`{opened[1]}` opened here is not closed"),)
    message = f"expected {_describe(expected)}, found {found}"
    return error("P001", message, span, label="unexpected here", help=tuple(helps),
                 secondary=secondary)


def _in_rename(text: str, tok: Token) -> bool:
    """Whether `tok` stands inside a `rename { ... }` block (for the help's wording)."""
    upto = tok.start_pos if tok.type != "$END" else len(text)
    opened = _unclosed(text, upto)
    if opened is None or opened[1] != "{":
        return False
    return text[:opened[0]].rstrip().endswith("rename")


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


def _label(file, line, col, message):
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
        state = positioned_parser().parse_interactive(text[:pos])
        state.exhaust_lexer()
        return set(state.accepts()) - {"$END"}
    except UnexpectedInput:
        return set()
