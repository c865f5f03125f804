"""YAML read with the place of every value: the same `Node` tree as `jsonpos` gives for
JSON, so the importers read both alike and a bad entry gets a file:line:col diagnostic.

PyYAML composes the document (its safe loader: no Python objects are built from tags;
libyaml's `CSafeLoader` where PyYAML was built with it, several times faster) and
constructs each node's value; marks become spans. A key written twice in one mapping is
`DuplicateKey` at the second, where PyYAML would keep the last silently.

>>> root = parse("rules:\\n  - [embed, fsdp]\\n", "c.yml")
>>> root.get("rules").items[0].value, root.get("rules").items[0].span.line
(['embed', 'fsdp'], 2)
"""

from __future__ import annotations

from planc.diagnostics import Span
from planc.importing.jsonpos import JsonSyntax, Node

__all__ = ["parse", "YamlSyntax", "DuplicateKey"]


class YamlSyntax(JsonSyntax):
    """Text that is not YAML, or a YAML document planc does not read: `message`, `span`."""


class DuplicateKey(YamlSyntax):
    """A mapping that writes one key twice: `span` is the second."""


def parse(text: str, file: str) -> Node:
    """The tree of the one YAML document in `text`; raises `YamlSyntax` at a fault."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise YamlSyntax("the document is empty", Span.start_of(file))
        return _node(loader, node, file, 0, set())
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise YamlSyntax(" ".join(str(p) for p in (exc.context, exc.problem) if p),
                         Span(file, line, col, line, col + 1)) from None
    except yaml.YAMLError as exc:
        raise YamlSyntax(str(exc).splitlines()[0], Span.start_of(file)) from None
    finally:
        loader.dispose()


def _node(loader, node, file: str, depth: int, seen: set) -> Node:
    import yaml

    if depth > 64:
        raise YamlSyntax("nested more than 64 deep", _span(node, file))
    if id(node) in seen:
        # An alias (`*name`): the same node again. Refused, not followed: a few lines of
        # aliases of aliases stand for exponentially many values (a "billion laughs").
        raise YamlSyntax("anchors and aliases (`&name`, `*name`) are not read: write the "
                         "value out", _span(node, file))
    seen.add(id(node))
    span = _span(node, file)
    if isinstance(node, yaml.ScalarNode):
        return Node(loader.construct_object(node), span)
    value = loader.construct_object(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return Node(value, span, tuple(_node(loader, n, file, depth + 1, seen)
                                       for n in node.value))
    if isinstance(node, yaml.MappingNode):
        pairs = tuple((_node(loader, k, file, depth + 1, seen),
                       _node(loader, v, file, depth + 1, seen)) for k, v in node.value)
        keys: set = set()
        for key, _ in pairs:
            if isinstance(key.value, (str, int, float, bool)) or key.value is None:
                if key.value in keys:
                    raise DuplicateKey(f"the key `{key.value}` is written twice in one "
                                       "mapping", key.span)
                keys.add(key.value)
        return Node(value, span, (), pairs)
    return Node(value, span)


def _span(node, file: str) -> Span:
    s, e = node.start_mark, node.end_mark
    end_line, end_col = e.line + 1, e.column + 1
    if (end_line, end_col) <= (s.line + 1, s.column + 1):
        end_line, end_col = s.line + 1, s.column + 2
    return Span(file, s.line + 1, s.column + 1, end_line, end_col)
