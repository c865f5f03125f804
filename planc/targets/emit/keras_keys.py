"""The keys of a Keras `LayoutMap` that mean what a plan's rules mean.

Keras looks a path up in a `LayoutMap` by trying every key as a regex (`re.search` in
Keras <= 3.13, `re.fullmatch` in >= 3.14) and raises on two matches. The keys written
here answer as planc does under both:

- **Anchoring.** Every key is `^(?a:...\\Z)`: under `re.search` it must then match the
  whole path, which is what `re.fullmatch` asks, and it reads `\\w`, `\\d`, `\\s`, `\\b`
  and case as ASCII, as planc does. A `match search` plan's pattern P
  becomes `^.*(?:P).*$`. Leading inline flags (`(?i)`) become a scoped group, and named
  groups lose their names (they would clash once patterns are combined).
- **Precedence** (which Keras lacks) is written into the keys with negative lookaheads,
  which Python's `re` has: under `overlap first`, rule i excludes what rules 0..i-1
  match; a rule whose pattern text is itself a path (`"dense/kernel"`, and as much
  `"dense[0]/kernel"`, which as a regex does not match its own text: planc's literal
  rule) wins that path, so the other keys exclude it and its own key takes it;
  `default -> LAYOUT` is a catch-all that excludes every rule and every such path.
  Under `overlap error` two matching rules stay an error in Keras as in planc.
"""

from __future__ import annotations

import re

from planc.ir import PlanIR, Rule
from planc.matching.scan import without_named_groups
from planc.targets.emit.runtime.keras_support import OUTPUT_SUFFIX

__all__ = ["anchored_key", "SectionKeys"]

_FLAGS = re.compile(r"\(\?([aiLmsux]+)\)")
_OPERATORS = re.compile(r"[\\^$*+?{}\[\]()|]")


def _group(pattern: str) -> str:
    """`pattern` as one group that can sit inside a larger expression."""
    flags = ""
    rest = pattern
    while True:
        m = _FLAGS.match(rest)
        if not m:
            break
        flags += m.group(1)
        rest = rest[m.end():]
    rest = without_named_groups(rest)
    if not flags:
        return f"(?:{rest})"
    flags = "".join(sorted(set(flags), key=flags.index))
    # In verbose mode a `#` comment runs to the end of the line: end it before `)`.
    return f"(?{flags}:{rest}\n)" if "x" in flags else f"(?{flags}:{rest})"


def _wrapped(pattern: str, mode: str) -> str:
    """A group that matches exactly the whole paths `pattern` matches in `mode`."""
    if mode == "search":
        return f".*{_group(pattern)}.*"
    return _group(pattern)


def anchored_key(pattern: str, mode: str = "full", *, exclude=(), exact=None,
                 suffix: str = "", exclude_mode: str | None = None) -> str:
    """The Keras key for `pattern`: under both `re.search` and `re.fullmatch` it matches
    a path (followed by `suffix`) exactly when planc's `mode` matches it, minus the
    paths matched by `exclude` (pairs `("pattern", P)` in `mode`, or `("literal", PATH)`),
    plus the path `exact`. `exclude_mode` is the mode of the `exclude` patterns when it
    is not `mode`.

    >>> anchored_key(".*kernel")
    '^(?a:(?:.*kernel)\\\\Z)'
    >>> anchored_key("dense", "search")
    '^(?a:.*(?:dense).*\\\\Z)'
    >>> anchored_key(".*", exclude=[("pattern", "dense/.*"), ("literal", "head/kernel")])
    '^(?a:(?!(?:(?:dense/.*)|head/kernel)\\\\Z)(?:.*)\\\\Z)'
    >>> anchored_key("dense/kernel", exclude=[("literal", "dense/kernel")], suffix="/output")
    '^(?a:(?!dense/kernel/output\\\\Z)(?:dense/kernel)/output\\\\Z)'
    """
    # `\Z`, not `$`: Python's `$` also matches before a final newline.
    end = re.escape(suffix) + r"\Z"
    body = _wrapped(pattern, mode)
    if exclude:
        other = exclude_mode or mode
        parts = [_wrapped(p, other) if kind == "pattern" else re.escape(p) for kind, p in exclude]
        alternatives = parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"
        body = f"(?!{alternatives}{end}){body}"
    if exact is not None:
        body = f"(?:{body}|{re.escape(exact)})"
    # ASCII (`(?a:`): `\w`, `\d`, `\s`, `\b` and case folding as planc reads them,
    # whatever flags Keras compiles the key with.
    return f"^(?a:{body}{end})"


def _matches_own_text(pattern: str, mode: str) -> bool:
    """Whether `pattern` as a regex matches its own text (`dense/kernel` does,
    `dense[0]/kernel` does not)."""
    try:
        return re.search(anchored_key(pattern, mode), pattern) is not None
    except re.error:
        return False


class SectionKeys:
    """The keys of one section of a plan: its `layout{}` rules (variable paths) or its
    `outputs{}` rules (layer paths, looked up as `"<layer path>/output"`)."""

    def __init__(self, ir: PlanIR, section: str):
        self.ir = ir
        self.rules = ir.rules if section == "layout" else ir.outputs
        self.suffix = OUTPUT_SUFFIX if section == "outputs" else ""
        # Every pattern text is a path its rule wins (planc's literal rule).
        self.literals = [r for r in self.rules if not r.is_default]

    def key(self, rule: Rule) -> str:
        """The anchored key of `rule` (or of the section's `default`)."""
        mode = self.ir.match
        if rule.is_default:
            # Every path a rule matches, literal paths included, is not the default's.
            exclude = [("pattern", r.pattern) for r in self.rules]
            exclude += [("literal", r.pattern) for r in self.literals
                        if not _matches_own_text(r.pattern, mode)]
            return anchored_key(".*", "full", exclude=_dedupe(exclude), suffix=self.suffix,
                                exclude_mode=mode)
        if mode == "full" and _pure_literal(rule.pattern):
            # Its one path, which it wins as a literal whatever else matches it.
            return anchored_key(rule.pattern, suffix=self.suffix)
        plain = re.compile(anchored_key(rule.pattern, mode))

        def matches(text: str) -> bool:
            return plain.search(text) is not None

        exclude = []
        if self.ir.overlap == "first":
            for earlier in self.rules[:rule.index]:
                if mode == "full" and _pure_literal(earlier.pattern):
                    # It matches its own text alone: exclude that only if this rule matches it.
                    if matches(earlier.pattern):
                        exclude.append(("literal", earlier.pattern))
                else:
                    exclude.append(("pattern", earlier.pattern))
        for other in self.literals:
            text = other.pattern
            if other is rule or not matches(text):
                continue
            if _excludes(exclude, text, mode):
                continue
            exclude.append(("literal", text))
        exclude = _dedupe(exclude)
        key = anchored_key(rule.pattern, mode, exclude=exclude, suffix=self.suffix)
        if re.search(key, rule.pattern + self.suffix) is None:
            key = anchored_key(rule.pattern, mode, exclude=exclude, exact=rule.pattern,
                               suffix=self.suffix)
        return key


def _pure_literal(pattern: str) -> bool:
    """A pattern without any regex operator: under `match full` it matches itself only."""
    return _OPERATORS.search(pattern) is None and "." not in pattern


def _excludes(exclude, text: str, mode: str) -> bool:
    """Whether one of `exclude` already takes `text` away."""
    for kind, p in exclude:
        if kind == "literal" and p == text:
            return True
        if kind == "pattern" and re.search(anchored_key(p, mode), text):
            return True
    return False


def _dedupe(items):
    seen = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out
