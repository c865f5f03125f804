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
"""

from __future__ import annotations

import re
from operator import itemgetter
from typing import Any, Callable

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


class Engine:
    """One `Lark` parser's tables, ready for `parse`; built by `Engine.of`."""

    def __init__(self, regex, ignore: frozenset, keywords: dict, table: list | dict,
                 start: int, end: int, leaves: dict[str, Leaf]) -> None:
        self._regex = regex
        self._ignore = ignore
        self._keywords = keywords
        self._table = table
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
    def _read(cls, lark, leaves) -> Engine | None:
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
                words[t.pattern.value] = t.name
            keywords[kind] = words
        parser = lark.parser.parser.parser
        callbacks = parser.callbacks
        if {k for k in callbacks if isinstance(k, str)} != set(leaves):
            return None
        states = parser.parse_table.states
        # A reduction's argument is its rule; a shift's (or goto's) the next state, an int
        # in the tables lark loads. Where a reduction goes next is the goto of its rule's
        # symbol from the state it uncovers: `gotos[symbol][state]`.
        gotos: dict[str, dict] = {}
        for state, actions in states.items():
            for symbol, (_action, arg) in actions.items():
                if arg.__class__ is int or not hasattr(arg, "expansion"):
                    gotos.setdefault(symbol, {})[state] = arg
        reductions: dict[int, tuple] = {}  # by the rule's id: a rule hashes slowly
        rows = {}
        for state, actions in states.items():
            row = rows[state] = {}
            for symbol, (_action, arg) in actions.items():
                if arg.__class__ is int or not hasattr(arg, "expansion"):
                    row[symbol] = arg
                    continue
                reduction = reductions.get(id(arg))
                if reduction is None:
                    reduction = reductions[id(arg)] = (len(arg.expansion), callbacks[arg],
                                                       gotos[arg.origin.name])
                row[symbol] = reduction
        # Rows in a list when the states are 0..n-1, as in the tables lark loads.
        table = [rows[i] for i in range(len(rows))] if set(rows) == set(range(len(rows))) else rows
        start = lark.options.start[0]
        # lark's alternation, then any one character: where lark would find no terminal,
        # the scan finds `_UNLEXABLE`, which no state takes, so it never skips text.
        regex = re.compile(f"{scanner._mres[0].pattern}|(?P<{_UNLEXABLE}>(?s:.))")
        return cls(regex, lexer.ignore_types, keywords, table,
                   parser.parse_table.start_states[start],
                   parser.parse_table.end_states[start], dict(leaves))

    def parse(self, text: str):
        """What the transformer's `start` callback returns for `text`, or None when lark
        would raise (the caller then asks lark why)."""
        table, keywords, ignore, leaves = self._table, self._keywords, self._ignore, self._leaves
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
            act = table[state].get(kind)
            while act.__class__ is tuple:  # reduce, as many times as the token asks
                size, callback, goto = act
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
                act = table[state].get(kind)
            if act is None:
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
            act = table[state].get("$END")
            if act.__class__ is not tuple:
                return None  # the text stops before its last statement does
            size, callback, goto = act
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
