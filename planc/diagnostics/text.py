"""Diagnostics as people and machines read them.

Text is rendered as rustc does: a header, the `-->` location, the source line with a
caret under the span, secondary labels, `= help:` lines. Plain text needs no import of
rich; colour goes through rich only when asked for.
"""

from __future__ import annotations

from planc.diagnostics.diagnostic import Diagnostic, Label, Severity, severity_counts
from planc.diagnostics.span import Span

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


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, in the plural unless `n` is 1.

    >>> counted(1, "device"), counted(8, "device"), counted(0, "stage")
    ('1 device', '8 devices', '0 stages')
    """
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _summary(diags) -> str:
    counts = severity_counts(diags)
    parts = [f"{n} {s.value}{'s' if n != 1 else ''}" for s in Severity
             if (n := counts[s.value + "s"])]
    return ("found " + ", ".join(parts)) if parts else ""


def _render_one(d: Diagnostic, sources) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    head = f"{d.severity.value}[{d.code}]"
    out.append((head, _STYLE[d.severity]))
    out.append((f": {visible(d.message)}\n", "bold"))
    # Secondary spans in source order, as a reader scans the file; the primary first.
    secondary = sorted(d.secondary, key=lambda l: (l.span.file, l.span.line, l.span.column))
    spans = ([Label(d.span, d.label)] if d.span else []) + secondary
    gutter = max((len(str(l.span.line)) for l in spans), default=1)
    pad = " " * gutter
    if d.span:
        out.append((f"{pad}--> ", "blue"))
        out.append((f"{visible(d.span.file)}:{d.span.line}:{d.span.column}\n", ""))
    elif d.file:
        out.append((f"{pad}--> ", "blue"))
        out.append((f"{visible(d.file)}\n", ""))
    shown_file = d.span.file if d.span else None
    for i, label in enumerate(spans):
        s = label.span
        if s.file != shown_file:
            out.append((f"{pad}::: ", "blue"))
            out.append((f"{visible(s.file)}:{s.line}:{s.column}\n", ""))
            shown_file = s.file
        out += _excerpt(s, visible(label.message), sources.get(s.file), gutter,
                        primary=(i == 0 and d.span is not None), severity=d.severity)
    if d.devices is not None:
        out.append((f"{pad} = ", "blue"))
        out.append((f"{d.with_devices}\n", ""))
    for h in d.help:
        out.append((f"{pad} = ", "blue"))
        out.append(("help", "bold"))
        out.append((f": {visible(h)}\n", ""))
    return out


# Printable by Python's rules, yet drawn as nothing: the Hangul fillers, the braille
# blank, and variation selectors (which only change the glyph before them).
_BLANK = frozenset("\u115f\u1160\u3164\uffa0\u2800"
                   + "".join(map(chr, range(0xFE00, 0xFE10)))
                   + "".join(map(chr, range(0xE0100, 0xE01F0))))
_BLANK_RE = None  # compiled by `re` when `has_hidden` first needs it


def hidden(ch: str) -> bool:
    """Whether the character `ch` is not plainly visible where it is shown: a control or
    format character (bidi controls such as U+202E, zero-width ones), a space other than
    " ", a line or paragraph separator, a private-use, surrogate or unassigned code
    point, or a printable one drawn as nothing. The one test every output that shows or
    writes untrusted text escapes by.

    >>> [hidden(c) for c in ("a", " ", "\\t", "\\u202e", "\\u200b", "\\u00a0", "\\u3164", "é")]
    [False, False, True, True, True, True, True, False]
    """
    return not ch.isprintable() or ch in _BLANK


def has_hidden(text: str, allowed: str = "") -> bool:
    """Whether `text` holds a `hidden` character other than those in `allowed`, found at
    C speed: a megabyte of plain text is two scans.

    >>> has_hidden("a\\tb\\n"), has_hidden("a\\tb\\n", allowed="\\t\\n"), has_hidden("a\\u3164")
    (True, False, True)
    """
    global _BLANK_RE
    for ch in allowed:
        text = text.replace(ch, "")
    if not text.isprintable():
        return True
    if text.isascii():  # every `_BLANK` character is past ASCII; and no regex compiled
        return False
    if _BLANK_RE is None:
        import re

        _BLANK_RE = re.compile("[" + "".join(sorted(_BLANK)) + "]")
    return _BLANK_RE.search(text) is not None


def visible(text: str) -> str:
    """`text` with every `hidden` character but the line break written as an escape
    (`\\x1b`, `\\u202e`).

    Messages quote plan text (strings, include paths); without this a plan could move
    the cursor, recolour or erase a terminal or CI log, or reorder a line with bidi
    controls.
    """
    if not has_hidden(text):
        return text
    return "".join(c if c == "\n" or not hidden(c) else c.encode("unicode_escape").decode()
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
