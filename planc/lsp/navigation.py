"""What is under the cursor, and what the editor shows for it: hover text, where a name
is declared, completions, and the edits a diagnostic's help suggests.

Positions here are planc's: lines and columns from 1, columns in characters (code
points). `planc.lsp.positions` converts to and from the protocol's UTF-16 units.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from planc.diagnostics import CODES, Diagnostic, Span
from planc.diagnostics.text import counted
from planc.ir import PlanIR, Rule, named_layout_text
from planc.syntax import Statements
from planc.syntax.keywords import CONTEXTUAL, RESERVED

# The grammar's keywords (`_` is among the layout words), those that are keywords only
# in context (`model "PATH"`, `state {`), and the axis type that is not `auto`; and the
# words a layout may use (`host`, after `on`).
KEYWORDS = (tuple(w for w in RESERVED if w != "_") + tuple(w for w, _ in CONTEXTUAL)
            + ("explicit",))
LAYOUT_WORDS = ("_", "...", "replicated", "host")

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CODE = re.compile(r"P[0-9]{3}")
_INCLUDE = re.compile(r'\binclude\s+"((?:[^"\\\n]|\\.)*)"')
_DID_YOU_MEAN = re.compile(r"did you mean `([^`]+)`\?")
_REPLACE = re.compile(r"replace `([^`]*)` with `([^`]*)`")
_WRITE_HERE = re.compile(r"write `([^`]+)` here")
_WRITE_STRING = re.compile(r'write ("(?:[^"\\\n]|\\.)*")')


@dataclass(frozen=True)
class Word:
    text: str
    line: int
    start: int  # first column
    end: int  # column after the last


def word_at(text: str, line: int, column: int) -> Word | None:
    """The identifier (or diagnostic code) touching `line`:`column`.

    >>> word_at("mesh(batch = 2)", 1, 8)
    Word(text='batch', line=1, start=6, end=11)
    """
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    src = lines[line - 1]
    for m in _WORD.finditer(src):
        if m.start() + 1 <= column <= m.end() + 1:
            return Word(m.group(), line, m.start() + 1, m.end() + 1)
    return None


def _inside(span: Span | None, file: str, line: int, column: int) -> bool:
    if span is None or span.file != file:
        return False
    return (span.line, span.column) <= (line, column) < (span.end_line, span.end_column)


def rule_at(ir: PlanIR, file: str, line: int, column: int) -> Rule | None:
    """The `layout` rule whose pattern (or `default` keyword) is under the cursor."""
    for rule in ir.rules + ((ir.default,) if ir.default else ()):
        if _inside(rule.pattern_span or rule.span, file, line, column):
            if rule.pattern_span is None and rule.span.line != line:
                continue
            return rule
    return None


def declarations(statements: Statements) -> dict[str, tuple[str, Span]]:
    """Each axis, param and logical name: ("axis" | "param" | "logical", where it is
    declared; a logical name, at its first `axes` entry)."""
    out: dict[str, tuple[str, Span]] = {}
    for stmt in statements.params:
        out.setdefault(stmt.name.text, ("param", stmt.name.span))
    for mesh in statements.mesh:
        for decl in mesh.axes:
            out.setdefault(decl.name.text, ("axis", decl.name.span))
    for section in statements.axes:
        for rule in section.rules:
            out.setdefault(rule.name.text, ("logical", rule.name.span))
    return out


def include_at(text: str, file: str, line: int, column: int) -> str | None:
    """The file an `include "PATH"` under the cursor names, resolved beside `file`."""
    lines = text.split("\n")
    if not 1 <= line <= len(lines):
        return None
    for m in _INCLUDE.finditer(lines[line - 1]):
        if m.start(1) <= column <= m.end(1) + 1:
            return os.path.normpath(os.path.join(os.path.dirname(file), m.group(1)))
    return None


def name_hover(word: str, kind: str, span: Span, ir: PlanIR | None) -> str:
    """`**axis** `model` = 4 (declared at p.kd:2)` and its kin."""
    where = f"{span.file}:{span.line}:{span.column}"
    if kind == "axis":
        size = None
        if ir is not None:
            try:
                size = ir.mesh.size_of(word)
            except KeyError:
                pass
        if ir is None:
            return (f"**mesh axis** `{word}` (its size once the plan's errors are fixed)"
                    f"\n\ndeclared at {where}")
        shown = "auto (sized by the device count)" if size is None else str(size)
        devices = "device" if shown == "1" else "devices"
        return f"**mesh axis** `{word}`: {shown} {devices}\n\ndeclared at {where}"
    if kind == "logical":
        entries = [e for e in ir.logical_axes if e.name == word] if ir is not None else []
        if not entries:
            return f"**logical name** `{word}`\n\ndeclared at {where}"
        sizes = {a.name: a.global_size for a in ir.mesh.axes}
        shown = []
        for k, e in enumerate(entries):
            axes = " x ".join(f"`{a}` ({sizes.get(a) or 'auto'})" for a in e.axes) or "not split"
            shown.append(("- " if len(entries) > 1 else "") + axes
                         + (" (a fallback, when the axes before are taken)" if k else ""))
        return (f"**logical name** `{word}` maps to\n\n" + "\n".join(shown)
                + f"\n\ndeclared at {where}")
    value = ir.param_dict.get(word) if ir is not None else None
    shown = "" if value is None else f" = {value!r}"
    return f"**param** `{word}`{shown}\n\ndeclared at {where}"


def code_hover(code: str) -> str | None:
    """The documentation of a diagnostic code: its registry entry
    (`planc.diagnostics.docs`, as `planc code CODE` prints it), else its title.

    >>> code_hover("P111").splitlines()[0]
    '**P111** (error): duplicate rule'
    """
    from planc.diagnostics.docs import DOCS

    doc = DOCS.get(code)
    if doc is not None:
        return (f"**{code}** ({doc.severity}): {doc.what}\n\n**Why it matters**: {doc.why}"
                f"\n\n**Example**: {doc.example}\n\n**Fix**: {doc.fix}")
    title = CODES.get(code)
    return None if title is None else f"**{code}**: {title}"


def is_code(word: str) -> bool:
    return bool(_CODE.fullmatch(word))


def rule_hover(rule: Rule, report=None, limit: int = 20) -> str:
    """What a rule lays out: with a validation `report` (`planc.resolve.validate`), how
    many and which variables it takes, with their layout, shard shape and bytes per
    device; without one, the rule alone and how to name a model."""
    from planc.resolve import human_bytes

    head = f"**rule** {rule.label} -> `{rule.layout.text}`"
    if report is None:
        return (head + "\n\nno model known: add a `model` statement to the plan or set "
                "`planc.model` in the editor's settings to see the variables it matches")
    rows = [(a, shape, nbytes) for a, shape, nbytes in
            zip(report.assignments, report.shard_shapes, report.bytes_per_device)
            if a.rule == rule]
    lines = [head, "", f"lays out {len(rows)} variable{'s' if len(rows) != 1 else ''}"
             + (f" on {counted(report.devices, 'device')}" if report.devices else ""), ""]
    if rows:
        lines += ["| variable | shape | layout | shard | per device |", "|---|---|---|---|---|"]
    for a, shape, nbytes in rows[:limit]:
        shard = "?" if shape is None else "(" + ", ".join(map(str, shape)) + ")"
        full = "(" + ", ".join(map(str, a.variable.shape)) + ")"
        lines.append(f"| `{a.variable.path}` | {full} {a.variable.dtype} | `{_layout(a)}` "
                     f"| {shard} | {human_bytes(nbytes)} |")
    if len(rows) > limit:
        lines.append(f"\n... and {len(rows) - limit} more")
    return "\n".join(lines)


def _layout(a) -> str:
    """The layout of an assignment, each logical name beside its mesh axes
    (`(embed:fsdp, mlp:tp)`), as `planc explain` shows it."""
    from planc.resolve.report import logical_names

    names = logical_names(a) if a.rule is not None else None
    return a.layout.text if names is None else named_layout_text(a.layout.dims, names)


def completions(ir: PlanIR | None, statements: Statements | None) -> list[tuple[str, str]]:
    """(label, kind) of everything a plan may write next: keywords, the layout words,
    the axes, params and logical names declared (kind "keyword", "layout", "axis",
    "param", "logical")."""
    items = [(k, "keyword") for k in KEYWORDS if k != "replicated"]
    items += [(w, "layout") for w in LAYOUT_WORDS]
    names = declarations(statements) if statements is not None else {}
    if ir is not None:
        for axis in ir.mesh.names:
            names.setdefault(axis, ("axis", None))
        for entry in ir.logical_axes:
            names.setdefault(entry.name, ("logical", None))
    items += [(name, kind) for name, (kind, _) in sorted(names.items())]
    return items


def fixes(diag: Diagnostic, text: str) -> list[tuple[str, str]]:
    """(title, replacement for the diagnostic's primary span) for each edit its help or
    label suggests: every did-you-mean, `replace `A` with `B``, `write `X` here` (a `:`
    for `->`, `None` for `_`), the double-quoted form of a single-quoted string, and the
    `_` an empty layout entry (P005) is missing.

    >>> from planc.diagnostics import error
    >>> d = error("P101", "unknown mesh axis `modle`", Span("p", 1, 2, 1, 7),
    ...           help="did you mean `model`?")
    >>> fixes(d, "(modle)")
    [('replace `modle` with `model`', 'model')]
    """
    if diag.span is None or diag.span.line != diag.span.end_line:
        return []
    lines = text.split("\n")
    if diag.span.line > len(lines):
        return []
    old = lines[diag.span.line - 1][diag.span.column - 1:diag.span.end_column - 1]
    out = []
    for h in diag.help:
        for m in _DID_YOU_MEAN.finditer(h):
            out.append((f"replace `{old}` with `{m.group(1)}`", m.group(1)))
        for m in _REPLACE.finditer(h):
            if m.group(1) == old:
                out.append((f"replace `{old}` with `{m.group(2)}`", m.group(2)))
        m = _WRITE_STRING.fullmatch(h)
        if m and diag.code == "P003":
            out.append((f"write {m.group(1)}", m.group(1)))
        if diag.code == "P005" and old == ",":
            out.append(("write `_` for the missing dimension", "_,"))
    m = _WRITE_HERE.fullmatch(diag.label)
    if m and old:
        out.append((f"replace `{old}` with `{m.group(1)}`", m.group(1)))
    return list(dict.fromkeys(out))
