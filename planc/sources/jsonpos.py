"""JSON read with the place of every value, so a bad entry gets a file:line:col diagnostic.

`parse(text, file)` returns a `Node` tree: each node holds the Python value (exactly what
`json.loads` gives) and the `Span` it covers. Scalars are decoded by the standard
library's own scanner, so strings and numbers mean what `json` says they mean; this
module only walks the brackets. A syntax error is `JsonSyntax` with a span.

>>> root = parse('{"a": [1, null]}', "c.json")
>>> root.get("a").items[1].value is None, root.get("a").span.column
(True, 7)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from planc import limits
from planc.diagnostics import Span

_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


@dataclass(frozen=True)
class Node:
    """One JSON value: `value` (plain Python), its `span`, and for containers the
    children: `items` of a list, `pairs` (key node, value node) of an object."""

    value: object
    span: Span
    items: tuple[Node, ...] = ()
    pairs: tuple[tuple[Node, Node], ...] = field(default=())

    def get(self, key: str) -> Node | None:
        """The value node of `key` in an object (the last one, as `json.loads` keeps)."""
        found = None
        for k, v in self.pairs:
            if k.value == key:
                found = v
        return found


class JsonSyntax(Exception):
    """Text that is not JSON: `message` and where (`span`)."""

    def __init__(self, message: str, span: Span):
        super().__init__(message)
        self.message = message
        self.span = span


def parse(text: str, file: str) -> Node:
    """The tree of `text`; raises `JsonSyntax` at the first fault."""
    return _Reader(text, file).document()


class _Reader:
    def __init__(self, text: str, file: str):
        self.text = text
        self.file = file
        # Line starts, to turn offsets into line and column.
        self.starts = [0] + [i + 1 for i, c in enumerate(text) if c == "\n"]

    def span(self, start: int, end: int) -> Span:
        line, col = self.where(start)
        end_line, end_col = self.where(max(end, start + 1))
        return Span(self.file, line, col, end_line, end_col)

    def where(self, offset: int) -> tuple[int, int]:
        lo, hi = 0, len(self.starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, offset - self.starts[lo] + 1

    def fail(self, message: str, at: int):
        raise JsonSyntax(message, self.span(at, at + 1))

    def skip(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in _WS:
            i += 1
        return i

    def document(self) -> Node:
        i = self.skip(0)
        if i == len(self.text):
            self.fail("the file is empty; expected a JSON value", 0)
        node, i = self.value(i, 0)
        i = self.skip(i)
        if i != len(self.text):
            self.fail("unexpected text after the JSON value", i)
        return node

    def value(self, i: int, depth: int) -> tuple[Node, int]:
        if depth > limits.MAX_NESTING:
            self.fail(f"nested deeper than {limits.MAX_NESTING} brackets", i)
        c = self.text[i] if i < len(self.text) else ""
        if c == "[":
            return self.array(i, depth)
        if c == "{":
            return self.object(i, depth)
        try:
            value, end = _DECODER.raw_decode(self.text, i)
        except json.JSONDecodeError as exc:
            self.fail(f"not JSON: {exc.msg}", exc.pos)
        except ValueError:  # an integer past the digits Python converts (4,300)
            self.fail("a number with too many digits to be one", i)
        return Node(value, self.span(i, end)), end

    def array(self, start: int, depth: int) -> tuple[Node, int]:
        items = []
        i = self.skip(start + 1)
        if i < len(self.text) and self.text[i] == "]":
            return Node([], self.span(start, i + 1)), i + 1
        while True:
            node, i = self.value(self.skip(i), depth + 1)
            items.append(node)
            i = self.skip(i)
            if i < len(self.text) and self.text[i] == ",":
                i += 1
            elif i < len(self.text) and self.text[i] == "]":
                return (Node([n.value for n in items], self.span(start, i + 1), tuple(items)),
                        i + 1)
            else:
                self.fail("expected `,` or `]` in a list", i)

    def object(self, start: int, depth: int) -> tuple[Node, int]:
        pairs = []
        i = self.skip(start + 1)
        if i < len(self.text) and self.text[i] == "}":
            return Node({}, self.span(start, i + 1)), i + 1
        while True:
            i = self.skip(i)
            if i >= len(self.text) or self.text[i] != '"':
                self.fail("expected a quoted key in an object", i)
            key, i = self.value(i, depth + 1)
            i = self.skip(i)
            if i >= len(self.text) or self.text[i] != ":":
                self.fail("expected `:` after a key", i)
            node, i = self.value(self.skip(i + 1), depth + 1)
            pairs.append((key, node))
            i = self.skip(i)
            if i < len(self.text) and self.text[i] == ",":
                i += 1
            elif i < len(self.text) and self.text[i] == "}":
                value = {k.value: v.value for k, v in pairs}
                return Node(value, self.span(start, i + 1), (), tuple(pairs)), i + 1
            else:
                self.fail("expected `,` or `}` in an object", i)
