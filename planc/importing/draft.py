"""The plan an importer builds, before it is text: `Draft`, and `write(draft)` that turns it
into a formatted, checked plan.

Every importer (Keras, Hugging Face, rule list) reduces its source to a `Draft`: a mesh,
the batch axis, the `match` and `overlap` modes, and rules whose layouts are already
plan text. `write` prints it, formats it with `planc fmt`'s own printer, checks it, and
holds it to its word: each rule's pattern, read back from the text, must be the pattern
the source gave, or a diagnostic (P524) says which one cannot be written.

>>> d = Draft("demo", ("an example",), (("model", 2),), "model", "full", "error",
...           (DraftRule("dense/kernel", "(_, model)"),), default_replicated=True)
>>> print(write(d).text, end="")
# an example
plan demo
<BLANKLINE>
mesh(model = 2)
<BLANKLINE>
model_parallel(batch = model)
<BLANKLINE>
match full
<BLANKLINE>
overlap error
<BLANKLINE>
layout {
    "dense/kernel" -> (_, model)
    default        -> replicated
}
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from planc.check.checker import check
from planc.check.formatting import format_text
from planc.diagnostics import Diagnostic, PlanError, Span, error
from planc.ir import PlanIR
from planc.syntax.keywords import RESERVED

# Where the imported plan's own diagnostics point when it has no file yet.
PLAN_NAME = "<imported plan>"

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_STRING = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"')  # the grammar's STRING token
_RESERVED = frozenset(RESERVED)


@dataclass(frozen=True)
class DraftRule:
    """One rule: a pattern, its layout as plan text, a comment, and where in the source
    it came from (`origin`, for diagnostics) and what the source called it (`what`)."""

    pattern: str
    layout: str
    comment: str = ""
    origin: Span | None = field(default=None, compare=False)
    what: str = ""


@dataclass(frozen=True)
class DraftAxis:
    """One entry of the `axes` table: a logical `name`, the mesh `axes` it maps to, and
    where in the source it came from."""

    name: str
    axes: tuple[str, ...]
    origin: Span | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Draft:
    """`batch` is the plan text after `batch =` (an axis, or `(a, b)`); `slices` the
    axes that span several slices, and how many; `logical` the `axes` table."""

    name: str
    header: tuple[str, ...]
    mesh: tuple[tuple[str, int | None], ...]
    batch: str
    match: str
    overlap: str
    rules: tuple[DraftRule, ...]
    outputs: tuple[DraftRule, ...] = ()
    default_replicated: bool = False
    logical: tuple[DraftAxis, ...] = ()
    slices: tuple[tuple[str, int], ...] = ()
    params: tuple[tuple[str, int | str], ...] = ()
    stages: str | None = None  # the `stages(...)` head, as plan text
    stage_rules: tuple[DraftRule, ...] = ()  # their layouts: each rule's stage, as text


@dataclass(frozen=True)
class Written:
    """The formatted plan `text`, its checked `ir`, and the sources for rendering
    diagnostics that point into it."""

    text: str
    ir: PlanIR
    sources: dict


def plan_name(text: str) -> str:
    """`text` made into a plan name: snake case, only identifier characters.

    >>> plan_name("Qwen3MoeBackbone"), plan_name("my-rules.v2")
    ('qwen3_moe_backbone', 'my_rules_v2')
    """
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text).lower()
    snake = re.sub(r"[^a-z0-9_]+", "_", snake).strip("_") or "imported"
    if snake[0].isdigit() or snake in _RESERVED:
        snake = "plan_" + snake
    return snake


def axis_problem(name) -> str | None:
    """Why `name` cannot be a mesh axis of a plan, or None."""
    if not isinstance(name, str) or not _NAME.match(name):
        return f"`{name!r}` is not a name (letters, digits and `_`, not starting with a digit)"
    if name in _RESERVED:
        return f"`{name}` is a keyword of the plan language"
    return None


def axes_text(axes) -> str:
    """A layout's plan text from its axes: None `_`, a name, or a tuple of names.

    >>> axes_text((None, "model", ("batch", "model")))
    '(_, model, (batch, model))'
    """
    parts = []
    for entry in axes:
        if entry is None:
            parts.append("_")
        elif isinstance(entry, str):
            parts.append(entry)
        else:
            parts.append("(" + ", ".join(entry) + ")")
    return "(" + ", ".join(parts) + ")"


def quoted(pattern: str) -> str | None:
    r"""`pattern` as a plan string literal, or None when no literal can hold it.

    >>> quoted('say "hi"'), quoted('a\\"b'), quoted(r"a\nb"), quoted("a\nb")
    ('"say \\"hi\\""', None, '"a\\nb"', None)
    """
    literal = '"' + pattern.replace('"', '\\"') + '"'
    # A plan string is raw, `\"` its only escape: a backslash already before a quote
    # would pair with the escape's backslash and end the string.
    if not _STRING.fullmatch(literal) or literal[1:-1].replace('\\"', '"') != pattern:
        return None
    return literal


def _comment(text: str) -> str:
    # Comments hold source text (names, keys): nothing in them may end the line early.
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def text_of(draft: Draft) -> tuple[str, list[Diagnostic]]:
    """The unformatted plan text, and a P524 for each pattern no literal can hold."""
    problems = []
    lines = [f"# {_comment(h)}" if h else "#" for h in draft.header]
    lines.append(f"plan {draft.name}")
    for name, value in draft.params:
        shown = f'"{value}"' if isinstance(value, str) else str(value)
        lines.append(f"param {name} = {shown}")
    sizes = ", ".join(f"{n} = {'auto' if s is None else s}" for n, s in draft.mesh)
    lines.append(f"mesh({sizes})")
    if draft.slices:
        lines.append("slices(" + ", ".join(f"{n} = {k}" for n, k in draft.slices) + ")")
    lines.append(f"model_parallel(batch = {draft.batch})")
    lines.append(f"match {draft.match}")
    lines.append(f"overlap {draft.overlap}")
    if draft.logical:
        from planc.syntax.printer import logical_target

        lines.append("axes {")
        lines += [f"    {e.name} -> {logical_target(e.axes)}" for e in draft.logical]
        lines.append("}")
    if draft.stages is not None:
        lines += [draft.stages + " {", *_rule_lines(draft.stage_rules, problems), "}"]
    for block, rules, default in (("layout", draft.rules, draft.default_replicated),
                                  ("outputs", draft.outputs, False)):
        if not rules and not (default and block == "layout"):
            continue
        lines.append(f"{block} {{")
        lines += _rule_lines(rules, problems)
        if default:
            lines.append("    default -> replicated")
        lines.append("}")
    return "\n".join(lines) + "\n", problems


def _rule_lines(rules, problems: list) -> list[str]:
    """A block's rule lines (a rule's `layout` is its right-hand side as text); a P524 in
    `problems` for each pattern no literal can hold."""
    lines = []
    for r in rules:
        literal = quoted(r.pattern)
        if literal is None:
            problems.append(_unwritable(r))
            continue
        tail = f"  # {_comment(r.comment)}" if r.comment else ""
        lines.append(f"    {literal} -> {r.layout}{tail}")
    return lines


def write(draft: Draft, file: str = PLAN_NAME) -> Written:
    """The draft as formatted, checked plan text, its diagnostics pointing into `file`
    (where it will be written); raises `PlanError` if it cannot be."""
    raw, problems = text_of(draft)
    if problems:
        raise PlanError(tuple(problems), {})
    text = raw  # what the findings of a plan that does not format point into
    try:
        text = format_text(raw, file)
        ir = check(text, file)
    except PlanError as exc:
        # The plan is not written: its findings point where the source said it.
        moved = _in_source(exc.diagnostics, draft, file, text)
        raise PlanError(moved, {} if moved != exc.diagnostics else exc.sources) from None
    sources = dict(ir.source_dict)
    for ours, theirs in ((draft.rules, ir.rules), (draft.outputs, ir.outputs)):
        if [r.pattern for r in theirs] != [r.pattern for r in ours]:
            bad = [r for r, got in zip(ours, theirs) if got.pattern != r.pattern]
            raise PlanError(tuple(_unwritable(r) for r in (bad or ours[:1])), sources)
    return Written(text, ir, sources)


def _in_source(diagnostics, draft: Draft, file: str, text: str) -> tuple[Diagnostic, ...]:
    """`diagnostics` with each place in the plan text `file` moved to where the source
    wrote what is there (a rule's or an `axes` entry's origin), or to the source's start;
    unchanged where the draft knows no source."""
    lines = text.splitlines()
    by_line: dict[int, Span] = {}
    at = 0
    for item in (*draft.logical, *draft.stage_rules, *draft.rules, *draft.outputs):
        start = f"{item.name} " if isinstance(item, DraftAxis) else f"{quoted(item.pattern)} "
        while at < len(lines) and not lines[at].strip().startswith(start):
            at += 1
        if at == len(lines):
            break
        if item.origin is not None:
            by_line[at + 1] = item.origin
        at += 1
    known = next(iter(by_line.values()), None)
    if known is None:
        return tuple(diagnostics)

    def moved(span):
        if span is None or span.file != file:
            return span
        return by_line.get(span.line) or Span.start_of(known.file)

    return tuple(d._replace(span=moved(d.span), secondary=tuple(
        label._replace(span=moved(label.span)) for label in d.secondary))
        for d in diagnostics)


def _unwritable(rule: DraftRule) -> Diagnostic:
    return error("P524", f"{rule.what or 'pattern'} `{rule.pattern!r}` cannot be written as a "
                 "plan string (a line break, or a backslash just before a quote)",
                 rule.origin, help="write the pattern without a line break; `\\x22` matches "
                 "a quote in a regex")
