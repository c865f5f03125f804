"""Diagnostics as people and machines read them.

Text is rendered as rustc does: a header, the `-->` location, the source line with a
caret under the span, secondary labels, `= help:` lines. Plain text needs no import of
rich; colour goes through rich only when asked for.
"""

from __future__ import annotations

import json
import os

from .diagnostics import Diagnostic, Label, Severity, Span

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.NOTE: "bold cyan"}
_WINDOW = 120  # longest source excerpt shown for one line


def render_text(diags, sources: dict[str, str], color: bool = False) -> str:
    """Render diagnostics with source excerpts; `color` styles them through rich."""
    lines = _Lines(sources)
    chunks = [_render_one(d, lines) for d in diags]
    summary = _summary(diags)
    if summary:
        chunks.append([(summary, "bold")])
    if not color:
        return "\n".join("".join(t for t, _ in c) for c in chunks)
    from rich.text import Text

    out = Text()
    for i, chunk in enumerate(chunks):
        if i:
            out.append("\n")
        for text, style in chunk:
            out.append(text, style=style or None)
    from io import StringIO

    from rich.console import Console

    buf = StringIO()
    Console(file=buf, force_terminal=True, color_system="standard", width=10_000,
            highlight=False, soft_wrap=True).print(out, end="")
    return buf.getvalue()


def _summary(diags) -> str:
    counts = {s: sum(1 for d in diags if d.severity is s) for s in Severity}
    parts = [f"{n} {s.value}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    return ("found " + ", ".join(parts)) if parts else ""


def _render_one(d: Diagnostic, sources) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    head = f"{d.severity.value}[{d.code}]"
    out.append((head, _STYLE[d.severity]))
    out.append((f": {_visible(d.message)}\n", "bold"))
    spans = ([Label(d.span, d.label)] if d.span else []) + list(d.secondary)
    gutter = max((len(str(l.span.line)) for l in spans), default=1)
    pad = " " * gutter
    if d.span:
        out.append((f"{pad}--> ", "blue"))
        out.append((f"{_visible(d.span.file)}:{d.span.line}:{d.span.column}\n", ""))
    elif d.devices is None and not spans:
        pass
    shown_file = d.span.file if d.span else None
    for i, label in enumerate(spans):
        s = label.span
        if s.file != shown_file:
            out.append((f"{pad}::: ", "blue"))
            out.append((f"{_visible(s.file)}:{s.line}:{s.column}\n", ""))
            shown_file = s.file
        out += _excerpt(s, _visible(label.message), sources.get(s.file), gutter,
                        primary=(i == 0 and d.span is not None), severity=d.severity)
    if d.devices is not None:
        out.append((f"{pad} = ", "blue"))
        out.append((f"with {d.devices} devices\n", ""))
    for h in d.help:
        out.append((f"{pad} = ", "blue"))
        out.append(("help", "bold"))
        out.append((f": {_visible(h)}\n", ""))
    return out


def _visible(text: str) -> str:
    """`text` with control and format characters written as escapes (`\\x1b`, `\\u202e`).

    Messages quote plan text (strings, include paths); without this a plan could move
    the cursor, recolour or erase a terminal or CI log, or reorder a line with bidi
    controls.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\n" else c.encode("unicode_escape").decode()
                   for c in text)


class _Lines:
    """Each source split into lines once, however many diagnostics quote it."""

    def __init__(self, sources: dict[str, str]):
        self._sources, self._split = sources, {}

    def get(self, file: str) -> list[str] | None:
        if file not in self._split:
            text = self._sources.get(file)
            self._split[file] = None if text is None else text.split("\n")
        return self._split[file]


def _excerpt(s: Span, message: str, lines: list[str] | None, gutter: int, primary: bool,
             severity: Severity) -> list[tuple[str, str]]:
    if lines is None:
        return []
    if not 1 <= s.line <= len(lines):
        return []
    line = lines[s.line - 1].rstrip("\r")
    start = s.column - 1
    end = s.end_column - 1 if s.end_line == s.line else len(line)
    end = max(end, start + 1)
    # Long lines are cut to a window around the span so a 10 MB line prints a few columns.
    offset = 0
    if len(line) > _WINDOW:
        offset = max(0, min(start - 20, len(line) - _WINDOW))
        line = line[offset:offset + _WINDOW]
        start, end = start - offset, min(end - offset, _WINDOW)
    shown = "".join(c if c.isprintable() else " " for c in line)
    pad = " " * gutter
    mark = "^" if primary else "-"
    style = _STYLE[severity] if primary else "blue"
    num = str(s.line).rjust(gutter)
    return [
        (f"{pad} |\n", "blue"),
        (f"{num} | ", "blue"), (shown + "\n", ""),
        (f"{pad} | ", "blue"),
        (" " * start + mark * max(1, end - start) + (f" {message}" if message else "") + "\n",
         style),
    ]


def diagnostic_dict(d: Diagnostic) -> dict:
    """The JSON form of one diagnostic (schema in the README, `planc.diagnostics/1`)."""
    s = d.span
    return {
        "code": d.code,
        "severity": d.severity.value,
        "message": d.message,
        "file": s.file if s else None,
        "line": s.line if s else None,
        "column": s.column if s else None,
        "end_line": s.end_line if s else None,
        "end_column": s.end_column if s else None,
        "label": d.label or None,
        "help": list(d.help),
        "related": [{"file": l.span.file, "line": l.span.line, "column": l.span.column,
                     "end_line": l.span.end_line, "end_column": l.span.end_column,
                     "message": l.message} for l in d.secondary],
        "variable": d.variable,
        "rule": d.rule,
        "devices": d.devices,
    }


def render_json(diags, **extra) -> str:
    doc = {"schema": "planc.diagnostics/1",
           "diagnostics": [diagnostic_dict(d) for d in diags],
           "summary": {s.value + "s": sum(1 for d in diags if d.severity is s) for s in Severity}}
    doc.update(extra)
    return json.dumps(doc, indent=2, sort_keys=False, ensure_ascii=False) + "\n"


def _escape_github(text: str, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        text = text.replace(":", "%3A").replace(",", "%2C")
    return text


def render_github(diags) -> str:
    """GitHub Actions workflow commands: one `::error file=...,line=...,col=...::` per problem."""
    kind = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}
    lines = []
    for d in diags:
        props = []
        if d.span:
            props += [f"file={_escape_github(_visible(d.span.file), True)}", f"line={d.span.line}",
                      f"col={d.span.column}", f"endLine={d.span.end_line}",
                      f"endColumn={d.span.end_column}"]
        props.append(f"title={_escape_github(d.code, True)}")
        message = d.message + "".join(f"\nhelp: {h}" for h in d.help)
        lines.append(f"::{kind[d.severity]} {','.join(props)}::{_escape_github(_visible(message))}")
    return "".join(line + "\n" for line in lines)


def render_sarif(diags) -> str:
    """SARIF 2.1.0: one run, the rules catalogue from `CODES`, one result per diagnostic."""
    from . import __version__
    from .diagnostics import CODES

    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "note"}
    used = sorted({d.code for d in diags})
    results = []
    for d in diags:
        result = {"ruleId": d.code, "ruleIndex": used.index(d.code), "level": level[d.severity],
                  "message": {"text": d.message + "".join(f"\nhelp: {h}" for h in d.help)}}
        if d.span:
            result["locations"] = [{"physicalLocation": {
                "artifactLocation": {"uri": d.span.file.replace(os.sep, "/")},
                "region": {"startLine": d.span.line, "startColumn": d.span.column,
                           "endLine": d.span.end_line, "endColumn": d.span.end_column}}}]
        props = {k: v for k, v in (("variable", d.variable), ("rule", d.rule),
                                   ("devices", d.devices)) if v is not None}
        if props:
            result["properties"] = props
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "planc", "version": __version__,
                "informationUri": "https://pypi.org/project/planc/",
                "rules": [{"id": c, "shortDescription": {"text": CODES.get(c, c)}} for c in used],
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
