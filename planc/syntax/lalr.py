"""lark's LALR(1) parser of a plan, run over one regex scan of the text.

`Lark.parse` takes each token through several Python calls (its scanner, its line
counter, a `Token`) and every token and reduction through `ParserState.feed_token`:
most of the time of a parse. `Engine` reads from a built `Lark` (lark's own or the
standalone module's, which are the same classes) what those calls decide: the basic
lexer's one alternation of every terminal, in its order; the keywords it retypes a
matched name into; the parse table; and the rule callbacks that shape each rule's
children (placeholders for an absent `[...]`, inlined `_rule`s and `?rule`s) before they
reach the transformer. It scans the text with `finditer`, at C speed, and runs the table
in one loop, so it builds what lark would build, in the same order of callbacks.

It takes only text it can read whole: at a character no terminal matches, or a token
no state accepts, `parse` returns None, and the caller parses with lark, whose exception
says what is wrong. `Engine.of` returns None for a parser whose lexing it cannot
reproduce (a postlexer, lexer callbacks of the user's, regex flags, terminals past one
regex's group limit).

The same tables can also be read once, at build time, into plain data (`tables_of`):
`planc.syntax.generate_parser` writes them as a module, and `Engine.of_tables` runs them
with a transformer's callbacks shaped as lark's parse-tree builder would shape them, so
that a text that parses needs no `import` of lark's runtime at all.
"""

from __future__ import annotations

import re
import sys
from operator import itemgetter

import _sre

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # What `parse` hands a leaf for one token: its text, start and end offsets.
    Leaf = Callable[[str, int, int], Any]
# The group of a character no terminal matches; lark's terminal names are upper case.
_UNLEXABLE = "unlexable"


class Tok(tuple):
    """A token shifted without a leaf, with the attributes of lark's `Token` that a
    transformer of planc reads (`type`, `value` and the offsets), so that lark's tokens
    and these are read alike. A tuple, so that making one is a single C call."""

    __slots__ = ()
    type = property(itemgetter(0))
    value = property(itemgetter(1))
    start_pos = property(itemgetter(2))
    end_pos = property(itemgetter(3))

    def __repr__(self) -> str:
        return f"Tok({self.type!r}, {self.value!r})"


class _Refused(Exception):
    """A rule reached lark's default callback (a tree of lark's class): lark must parse."""


# The shape of `tables_of`'s data; `Engine.of_tables` runs no other.
TABLES_FORMAT = 3


def tables_of(lark) -> dict | None:
    """`lark`'s lexer and LALR tables as plain data (str, int, tuple, dict and None only),
    for `Engine.of_tables`; None for a parser `Engine.of` would refuse too.

    `lark` is built without a transformer: the rules' callbacks are recorded as what lark's
    parse-tree builder wraps around a transformer's method (the method's name; whether a
    single child stands for the rule, a `?rule`; which children it keeps, which it splices
    in, and where it adds a None for an absent `[...]`), not as the callbacks themselves.
    """
    from lark.parse_tree_builder import (ChildFilterLALR, ChildFilterLALR_NoPlaceholders,
                                         ExpandSingleChild)
    from lark.parsers.lalr_analysis import IntParseTable

    lexing = _lexing(lark)
    if lexing is None:
        return None
    lexer, scanner, keywords = lexing
    rules, index = [], {}
    for rule, chain in lark._parse_tree_builder.rule_builders:
        expand1, include = False, None
        for wrapper in chain:  # innermost first, as lark applies them
            func = getattr(wrapper, "func", None)
            if wrapper is ExpandSingleChild and include is None:
                expand1 = True
            elif func is ChildFilterLALR:
                to_include, append_none = wrapper.args
                include = (tuple((i, bool(e), n) for i, e, n in to_include), append_none)
            elif func is ChildFilterLALR_NoPlaceholders:
                include = (tuple((i, bool(e), 0) for i, e in wrapper.args[0]), 0)
            else:
                return None  # positions, ambiguity, another order: not planc's parsers
        name = rule.alias or rule.options.template_source or rule.origin.name
        index[rule] = len(rules)
        rules.append((str(name), str(rule.origin.name), len(rule.expansion), expand1, include))
    table = IntParseTable.from_ParseTable(lark.parser.parser.parser.parse_table)
    gotos, rows = _gotos_and_rows(table.states)
    for row in rows:
        for symbol, arg in row.items():
            if arg.__class__ is not int:
                row[symbol] = ~index[arg]
    rows = [{str(symbol): arg for symbol, arg in row.items()} for row in rows]
    gotos = {str(symbol): by_state for symbol, by_state in gotos.items()}
    start = lark.options.start[0]
    return {
        "format": TABLES_FORMAT,
        "pattern": str(scanner._mres[0].pattern),
        "ignore": tuple(sorted(map(str, lexer.ignore_types))),
        "keywords": keywords,
        "terminals": tuple(str(t.name) for t in lark.terminals),
        "rules": tuple(rules),
        "table": tuple(rows),
        "gotos": gotos,
        "start": table.start_states[start],
        "end": table.end_states[start],
        "scanner": scanner_code(str(scanner._mres[0].pattern)),
    }


def _lexing(lark):
    """(lexer, scanner, keywords) of `lark`'s basic lexer: what `Engine` reads of it, the
    keywords by the terminal a name is matched as; None for lexing `Engine` cannot
    reproduce (a postlexer, several start symbols, regex flags or callbacks of the
    user's, the `regex` module, terminals past one regex's group limit)."""
    if lark.options.postlex is not None or len(lark.options.start) != 1:
        return None
    lexer = lark.parser.lexer
    scanner = lexer.scanner  # built on first use: builds `lexer.callback` too
    if (len(scanner._mres) != 1 or lexer.g_regex_flags or lexer.user_callbacks
            or lexer.re is not re):
        return None
    keywords = {}
    for kind, callback in lexer.callback.items():
        # Only lark's "unless" callbacks: a name that spells a keyword is that keyword.
        words = {}
        for t in callback.scanner.terminals:
            if t.pattern.type != "str" or t.pattern.flags:
                return None
            words[str(t.pattern.value)] = str(t.name)
        keywords[str(kind)] = words
    return lexer, scanner, keywords


def _shaped(name: str, expand1: bool, include, transformer) -> Callable:
    """The callback lark's parse-tree builder makes of `transformer`'s method `name`, with
    a `?rule`'s single child and the child filter `include` (see `tables_of`)."""
    try:
        method = getattr(transformer, name)
        wrapped = getattr(method, "visit_wrapper", None) is not None
    except AttributeError:
        method, wrapped = None, True
    if wrapped:
        def method(children):  # lark would build its own tree, or wrap the method
            raise _Refused
    f = method
    if expand1:
        def f(children, method=method):
            return children[0] if len(children) == 1 else method(children)
    if include is not None:
        to_include, append_none = include
        inner = f

        def f(children):
            filtered = []
            for i, expand, nones in to_include:
                if nones:
                    filtered += [None] * nones
                if expand:
                    if filtered:
                        filtered += children[i].children
                    else:  # lark hands the spliced list on as it is
                        filtered = children[i].children
                else:
                    filtered.append(children[i])
            if append_none:
                filtered += [None] * append_none
            return inner(filtered)
    return f


class Engine:
    """One parser's tables, ready for `parse`; built by `Engine.of` or `Engine.of_tables`.

    `table[state]` maps a terminal's (or rule's) name to the next state, a number >= 0, or
    to `~r` (< 0) for a reduction by rule `r`: `reductions[r]` is its length, its callback
    and its gotos (the state it goes to, by the state it uncovers).
    """

    def __init__(self, regex, ignore: frozenset, keywords: dict, table, reductions: list,
                 start: int, end: int, leaves: dict[str, Leaf]) -> None:
        self._regex = regex
        self._ignore = ignore
        self._keywords = keywords
        self._table = table
        self._reductions = reductions
        self._start = start
        self._end = end
        self._leaves = leaves

    @classmethod
    def of(cls, lark, leaves: dict[str, Leaf]) -> Engine | None:
        """The engine of `lark`, a built LALR parser with the basic lexer whose transformer
        has a callback for exactly the terminals `leaves` names; `leaves[T](text, start,
        end)` must return what that callback returns for such a token. None when `lark`
        is not a parser this module can run as lark would.
        """
        try:
            return cls._read(lark, leaves)
        except (AttributeError, KeyError, TypeError, IndexError, re.error):
            return None  # lark's internals moved: lark parses alone, as before

    @classmethod
    def of_tables(cls, tables, transformer, leaves: dict[str, Leaf]) -> Engine | None:
        """The engine of `tables` (as `tables_of` returns them, or a module with those
        names in upper case) with `transformer`'s callbacks, whose terminal callbacks
        `leaves` stands for as in `of`; None where lark would call what the engine
        would not.
        """
        get = tables.get if isinstance(tables, dict) else (
            lambda key: getattr(tables, key.upper()))
        if get("format") != TABLES_FORMAT:
            return None
        terminals = {t for t in get("terminals") if getattr(transformer, t, None)}
        if terminals != set(leaves):
            return None
        gotos = get("gotos")
        reductions = [(size, _shaped(name, expand1, include, transformer), gotos[origin])
                      for name, origin, size, expand1, include in get("rules")]
        code = tables.get("scanner") if isinstance(tables, dict) else getattr(
            tables, "SCANNER", None)
        return cls(_scanner(get("pattern"), code), frozenset(get("ignore")),
                   get("keywords"), get("table"), reductions, get("start"), get("end"),
                   dict(leaves))

    @classmethod
    def _read(cls, lark, leaves) -> Engine | None:
        lexing = _lexing(lark)
        if lexing is None:
            return None
        lexer, scanner, keywords = lexing
        parser = lark.parser.parser.parser
        callbacks = parser.callbacks
        if {k for k in callbacks if isinstance(k, str)} != set(leaves):
            return None
        states = parser.parse_table.states
        if set(states) != set(range(len(states))):
            return None  # states lark numbers as the tables it loads: 0..n-1
        # A reduction's argument is its rule; a shift's (or goto's) the next state, an int.
        gotos, table = _gotos_and_rows(states)
        reductions: list[tuple] = []
        numbers: dict[int, int] = {}  # a rule's number, by its id: a rule hashes slowly
        for row in table:
            for symbol, arg in row.items():
                if arg.__class__ is int:
                    continue
                number = numbers.get(id(arg))
                if number is None:
                    number = numbers[id(arg)] = len(reductions)
                    reductions.append((len(arg.expansion), callbacks[arg],
                                       gotos[arg.origin.name]))
                row[symbol] = ~number
        start = lark.options.start[0]
        return cls(_scanner(scanner._mres[0].pattern), lexer.ignore_types, keywords, table,
                   reductions, parser.parse_table.start_states[start],
                   parser.parse_table.end_states[start], dict(leaves))

    def parse(self, text: str):
        """What the transformer's `start` callback returns for `text`, or None when lark
        would raise (the caller then asks lark why) or would build a tree of its own."""
        try:
            return self._parse(text)
        except _Refused:
            return None

    def _parse(self, text: str):
        table, keywords, ignore, leaves = self._table, self._keywords, self._ignore, self._leaves
        reductions = self._reductions
        state = self._start
        states = [state]
        values: list = []
        new = tuple.__new__
        for m in self._regex.finditer(text):
            kind = m.lastgroup
            if kind in ignore:
                continue
            start, end = m.span()
            value = m.group()
            words = keywords.get(kind)
            if words is not None:
                kind = words.get(value, kind)
            act = table[state].get(kind, _NONE)
            while act < 0:  # reduce, as many times as the token asks
                size, callback, goto = reductions[~act]
                if size:
                    children = values[-size:]
                    del values[-size:]
                    del states[-size:]
                else:
                    children = []
                reduced = callback(children)
                state = goto[states[-1]]
                states.append(state)
                values.append(reduced)
                act = table[state].get(kind, _NONE)
            if act is _NONE:
                return None  # a token this state does not take, or no token at all
            state = act
            states.append(state)
            leaf = leaves.get(kind)
            values.append(new(Tok, (kind, value, start, end)) if leaf is None
                          else leaf(value, start, end))
        end_state = self._end
        # The reduce step is written out here and in the token loop above, not called:
        # a parse reduces a dozen times a rule, and a call each would cost what the
        # rest of the step does.
        while True:
            act = table[state].get("$END", _NONE)
            if act >= 0:
                return None  # the text stops before its last statement does
            size, callback, goto = reductions[~act]
            if size:
                children = values[-size:]
                del values[-size:]
                del states[-size:]
            else:
                children = []
            reduced = callback(children)
            state = goto[states[-1]]
            states.append(state)
            values.append(reduced)
            if state == end_state:
                return values[-1]


# What a row holds for a symbol it does not take: a number, so the loop compares it as it
# compares an action, and no state's.
_NONE = 1 << 62


def _scanner(pattern: str, code: tuple | None = None):
    """lark's alternation, then any one character: where lark would find no terminal,
    the scan finds `_UNLEXABLE`, which no state takes, so it never skips text.

    With `code` (`scanner_code` of `pattern`, from the generated tables) made by this
    very Python, the regex is built from it as `re.compile` would build it from its own
    compilation, without compiling it again: `re` compiles in Python, ~1.5 ms of every
    start-up for this alternation. Anything else is compiled by `re`.
    """
    full = f"{pattern}|(?P<{_UNLEXABLE}>(?s:.))"
    if code is not None and tuple(code[:3]) == _SRE_STAMP:
        flags, program, groups, groupindex, indexgroup = code[3:]
        try:
            return _sre.compile(full, flags, list(program), groups, dict(groupindex),
                                tuple(indexgroup))
        except (TypeError, ValueError, RuntimeError):  # not what this `_sre` runs
            pass
    return re.compile(full)


# What a compiled regex program is read by: this Python's version and its regex engine's.
_SRE_STAMP = ((sys.version_info[0], sys.version_info[1]), _sre.MAGIC, _sre.CODESIZE)


def scanner_code(pattern: str) -> tuple:
    """What `re.compile` makes of `_scanner(pattern)`'s regex, as plain data for
    `_scanner`: this Python's stamp, then the arguments `re` hands `_sre.compile` but the
    pattern's text (its flags, program, group count and group names)."""
    from re import _compiler, _parser

    parsed = _parser.parse(f"{pattern}|(?P<{_UNLEXABLE}>(?s:.))", 0)
    program = _compiler._code(parsed, 0)
    groupindex = dict(parsed.state.groupdict)
    indexgroup = [None] * parsed.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    return (*_SRE_STAMP, int(parsed.state.flags), tuple(map(int, program)),  # opcodes
            parsed.state.groups - 1, groupindex, tuple(indexgroup))  # as plain ints


def _gotos_and_rows(states: dict) -> tuple[dict, list]:
    """From lark's `states` (state -> symbol -> (action, argument)): the shifts and gotos by
    symbol (`gotos[symbol][state]`, where a reduction to `symbol` goes from the state it
    uncovers) and each state's row of arguments, in state order."""
    gotos: dict[str, dict] = {}
    rows = []
    for state in range(len(states)):
        row = {}
        for symbol, (_action, arg) in states[state].items():
            row[symbol] = arg
            if arg.__class__ is int:
                gotos.setdefault(symbol, {})[state] = arg
        rows.append(row)
    return gotos, rows
