"""planc's diagnostics, spans and paths in the protocol's terms, and back.

LSP counts lines from 0 and columns in the client's units (UTF-16 by default; pygls
negotiates the encoding and gives its `PositionCodec`); planc counts both from 1, columns
in characters. A diagnostic's help becomes lines of its message, its secondary spans
related locations, and the edits its help suggests (`navigation.fixes`) its `data`,
which the client hands back with a code-action request.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlparse

from lsprotocol import types as t

from planc.diagnostics import Diagnostic, Severity, Span
from planc.lsp import navigation as nav
from planc.syntax.files import one_line_ending

_SEVERITY = {Severity.ERROR: t.DiagnosticSeverity.Error,
             Severity.WARNING: t.DiagnosticSeverity.Warning,
             Severity.NOTE: t.DiagnosticSeverity.Information}


def lines(text: str) -> list[str]:
    """`text`'s lines as planc and LSP count them (`\\n`, `\\r\\n` and `\\r` end a line;
    form feeds and Unicode line separators do not)."""
    return [line + "\n" for line in one_line_ending(text).split("\n")]


def lsp_range(span: Span | None, sources: dict, codec) -> t.Range:
    if span is None:
        zero = t.Position(line=0, character=0)
        return t.Range(start=zero, end=zero)
    raw = t.Range(start=t.Position(line=span.line - 1, character=span.column - 1),
                  end=t.Position(line=span.end_line - 1, character=span.end_column - 1))
    return codec.range_to_client_units(lines(sources.get(span.file, "")), raw)


def from_client(text: str, pos: t.Position, codec) -> tuple[int, int]:
    """planc's (line, column) of the client's `pos` in `text`."""
    p = codec.position_from_client_units(lines(text), pos)
    return p.line + 1, p.character + 1


def lsp_diagnostic(d: Diagnostic, sources: dict, codec) -> t.Diagnostic:
    text = sources.get(d.span.file, "") if d.span else ""
    message = d.message + "".join(f"\nhelp: {h}" for h in d.help)
    related = [t.DiagnosticRelatedInformation(
        location=t.Location(uri=uri_of(lab.span.file), range=lsp_range(lab.span, sources,
                                                                        codec)),
        message=lab.message or "here") for lab in d.secondary]
    fixes = nav.fixes(d, text) if d.span else []
    return t.Diagnostic(
        range=lsp_range(d.span, sources, codec), message=message,
        severity=_SEVERITY[d.severity], code=d.code, source="planc",
        related_information=related or None,
        data={"fixes": [[title, new] for title, new in fixes]} if fixes else None)


def path_of(uri: str) -> str:
    """The file a `file:` URI names; any other URI (`untitled:...`) stands for itself.

    >>> path_of("file:///tmp/a%20b.kd"), path_of("untitled:Untitled-1")
    ('/tmp/a b.kd', 'untitled:Untitled-1')
    """
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def uri_of(path: str) -> str:
    """The URI of a plan file; a name that is a URI already (`untitled:...`) is kept.

    >>> uri_of("/tmp/a b.kd"), uri_of("untitled:Untitled-1")
    ('file:///tmp/a%20b.kd', 'untitled:Untitled-1')
    """
    scheme = urlparse(path).scheme
    if len(scheme) > 1 and not path.startswith("/"):
        return path
    try:
        return Path(path).absolute().as_uri()
    except ValueError:
        return path
