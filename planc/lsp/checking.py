"""Checking open documents: when, against what model, and publishing what was found.

`check` runs on every open, change and save of a document. It checks at once; changes
that arrive while a check runs only mark the document stale, and the check goes round
once more for the text as it is then, so a burst of keystrokes is checked at most twice
and nothing waits on a timer. The plan's own checks are published first; then, when its
model is known (its `model` statement, its `[tool.planc]` entry, else the client's
`planc.model` setting), it is validated against the model in a worker thread and the
diagnostics are published again. Both run on the server's one worker thread (`ls.worker`):
the event loop stays free to answer hover and completion meanwhile, and the worker's
parser stays warm. `ls` is the `planc.lsp.server.PlancServer`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass, field
from urllib.parse import unquote

from lsprotocol import types as t

from planc.diagnostics import Diagnostic, Span, warning
from planc.lsp.analysis import Analysis, analyse
from planc.lsp.model_cache import ModelError
from planc.lsp.protocol import lsp_diagnostic, path_of, uri_of

log = logging.getLogger("planc.lsp")


@dataclass
class Doc:
    """What the server keeps of one open document."""

    generation: int = 0  # one more for every open, change and save
    checking: bool = False
    latest: Analysis | None = None
    good: Analysis | None = None  # the last version that checked into an IR
    report: object | None = None  # its validation against the model, if any
    published: set = field(default_factory=set)  # URIs given diagnostics for this doc


def one_line(exc) -> str:
    """An exception's text on one line, cut at 300 characters."""
    text = " ".join(str(exc).split())
    return text[:300] + ("..." if len(text) > 300 else "")


async def check(ls, uri: str) -> None:
    """Check `uri` now; while a check of it runs, later changes only mark it stale, and
    the running check goes round once more for the text as it is then. A burst of
    keystrokes is checked at most twice (its first change and its last), and an idle
    document's change is checked at once, with no timer to wait out."""
    doc = ls.docs.setdefault(uri, Doc())
    doc.generation += 1
    if doc.checking:
        return
    doc.checking = True
    try:
        while True:
            mine = doc.generation
            await _check_once(ls, uri, doc, mine)
            if doc.generation == mine or ls.docs.get(uri) is not doc:
                return
    finally:
        doc.checking = False


async def _check_once(ls, uri: str, doc: Doc, mine: int) -> None:
    def stale() -> bool:
        return doc.generation != mine or ls.docs.get(uri) is not doc

    document = ls.workspace.text_documents.get(unquote(uri))
    if document is None:
        return
    text, version = document.source, document.version
    file = path_of(uri)
    loop = asyncio.get_running_loop()
    settings = dict(ls.settings)
    try:
        result = await loop.run_in_executor(ls.worker, _analyse, text, file, settings, doc.latest)
    except Exception as exc:  # a bug of planc's own: say so in the editor, keep serving
        log.error("internal error checking %s: %s", file, one_line(exc))
        result = Analysis(file, text, [warning("P703", f"planc could not check this plan: "
                                                f"{type(exc).__name__}: {one_line(exc)}",
                                                Span.start_of(file),
                                                help="please report this with the plan")],
                          sources={file: text})
    if stale():
        return
    doc.latest = result
    if result.ir is not None:
        doc.good = result
    _publish(ls, uri, doc, result.diagnostics, version)
    source = _model_source(ls, result, settings) if result.ir is not None else None
    if source is None:
        doc.report = None
        return
    found, report = await loop.run_in_executor(ls.worker, _validate, ls, result, source, settings)
    if stale():
        return
    doc.report = report
    _publish(ls, uri, doc, result.diagnostics + found, version)


def _analyse(text: str, file: str, settings: dict, previous: Analysis | None) -> Analysis:
    from planc.sources.project import project_for

    entry = project_for(file)
    out = analyse(text, file, devices=_devices(settings) or list(entry.devices),
                  previous=previous)
    out.diagnostics += entry.problems
    return out


def _devices(settings: dict) -> list[int]:
    raw = settings.get("devices")
    if isinstance(raw, int) and not isinstance(raw, bool) and raw > 0:
        return [raw]
    if isinstance(raw, str) and raw.strip().isdigit() and int(raw) > 0:
        return [int(raw)]
    return []


def _model_source(ls, result: Analysis, settings: dict) -> tuple[str, Span | None] | None:
    """(source, where it is named) for the plan's model, as `planc lint` finds it: the
    plan's `model` statement, else its `[tool.planc]` entry in the nearest
    `pyproject.toml`; then the client's `planc.model` setting."""
    from planc.sources.project import project_for

    if result.ir.model:
        return result.ir.model, result.ir.model_span
    entry = project_for(result.file)
    if entry.model:
        return entry.model, entry.span
    raw = settings.get("model")
    if isinstance(raw, str) and raw.strip():
        raw = raw.strip()
        root = ls.workspace.root_path
        # A relative path is the workspace's, as the editor's settings are.
        if root and not os.path.isabs(raw) and os.path.exists(os.path.join(root, raw)):
            raw = os.path.join(root, raw)
        return raw, None
    return None


def _validate(ls, result: Analysis, source: tuple[str, Span | None], settings: dict):
    from planc.resolve import validate

    name, span = source
    try:
        variables = ls.models.variables(name)
    except ModelError as exc:
        log.error("model not read: %s", one_line(exc))
        where = span or Span.start_of(result.file)
        return [warning("P701", f"the plan's model cannot be read: {exc}", where,
                        label="model named here" if span else "",
                        help="fix the `model` statement or the `planc.model` setting; "
                             "the plan was checked on its own")], None
    from planc.sources.project import project_for

    counts = _devices(settings) or list(project_for(result.file).devices) or [None]
    found: list[Diagnostic] = []
    report = None
    for n in counts:
        r = validate(result.ir, variables, n)
        report = report or r
        found += r.diagnostics
    return found, report


def _publish(ls, uri: str, doc: Doc, diags: list[Diagnostic], version: int | None) -> None:
    by_uri: dict[str, list[t.Diagnostic]] = {uri: []}
    codec = ls.workspace.position_codec
    file = path_of(uri)
    sources = doc.latest.sources if doc.latest else {}
    for d in dict.fromkeys(diags):
        target = uri if d.span is None or d.span.file == file else uri_of(d.span.file)
        by_uri.setdefault(target, []).append(lsp_diagnostic(d, sources, codec))
    for stale in doc.published - set(by_uri):
        ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=stale,
                                                                            diagnostics=[]))
    doc.published = set(by_uri)
    for target, items in by_uri.items():
        ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(
            uri=target, diagnostics=items, version=version if target == uri else None))
