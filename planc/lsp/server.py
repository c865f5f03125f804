"""`planc lsp`: the language server, on pygls 2, over stdio.

Each open `*.kd` document is checked as `planc lint` checks the file (`analysis`), on
open, change and save; changes that arrive while a check runs are coalesced into one
more check of the latest text (`checking`), so typing never queues up checks. When the
plan's model is known (its `model` statement, its `[tool.planc]` entry, else the
client's `planc.model` setting) it is then validated against it in a worker thread, the
model read once and kept (`models`), and the diagnostics are published again. Hover,
definition, completion and code actions read the last version that checked
(`navigation`).

Bad input never stops the server: a message that is not JSON-RPC gets a parse error
(id null), an unknown request MethodNotFound, a request that fails an error response;
each logs one line on stderr (`stream` keeps a broken frame from losing what follows).
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest, JsonRpcParseError
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol

from planc._version import __version__
from planc.lsp import navigation as nav
from planc.lsp import protocol
from planc.lsp.checking import Doc, check, one_line
from planc.lsp.model_cache import ModelCache
from planc.lsp.protocol import path_of, uri_of
from planc.lsp.stream import Input, refused_reason

log = logging.getLogger("planc.lsp")


class RequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was understood, and cannot be done."""

    CODE = -32803
    MESSAGE = "Request failed"


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, remembering which request a message it cannot read was: a
    request whose params do not fit LSP's types (a position on line 2^31, a negative
    character) is answered under its own id (-32602), not under id null, which no client
    waits for."""

    def structure_message(self, data):
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "method" in data and \
                    isinstance(data.get("id"), (int, str)) and not isinstance(data["id"], bool):
                exc.request_id = data["id"]
            raise


class PlancServer(LanguageServer):
    """The server: pygls's, with the open documents (`checking.Doc`), the models read so
    far and the client's `planc.*` settings."""

    def __init__(self) -> None:
        super().__init__("planc", __version__, protocol_cls=_Protocol)
        self.docs: dict[str, Doc] = {}
        self.models = ModelCache()
        self.settings: dict = {}
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="planc-check")

    def report_server_error(self, error, source):
        # pygls has logged the failure (one line, see `_OneLine`). A message it could not
        # read at all (not JSON, not UTF-8, not a JSON-RPC shape) has no id to answer:
        # JSON-RPC answers it with id null; a request whose params do not fit is answered
        # under its id (`_Protocol`). Everything else pygls answers itself.
        if source is not JsonRpcException:
            return
        refused = refused_reason(error)
        if refused is not None:  # a frame `stream.Input` would not read
            code, message = JsonRpcParseError.CODE, f"Parse error: {refused}"
        elif isinstance(error, JsonRpcException):
            code, message = error.code, error.message
        elif isinstance(error, ValueError):  # not JSON, or not UTF-8
            code, message = JsonRpcParseError.CODE, f"Parse error: {one_line(error)}"
        else:  # JSON, but not a JSON-RPC message object
            code, message = JsonRpcInvalidRequest.CODE, "Invalid Request: not a JSON-RPC message"
        body = json.dumps({"jsonrpc": "2.0", "id": getattr(error, "request_id", None),
                           "error": {"code": code, "message": message}})
        try:
            self.protocol.writer.write(f"Content-Length: {len(body)}\r\n\r\n{body}".encode())
        except Exception as exc:  # the client went away: nothing left to answer
            log.error("cannot answer a bad message: %s", one_line(exc))


server = PlancServer()


# -- settings -----------------------------------------------------------------------------

def _apply_settings(raw) -> None:
    if isinstance(raw, dict):
        raw = raw.get("planc", raw)
        if isinstance(raw, dict):
            server.settings = {k: v for k, v in raw.items() if k in ("model", "devices")}


@server.feature(t.INITIALIZE)
def _initialize(ls: PlancServer, params: t.InitializeParams) -> None:
    # A client passes its `planc.*` settings here too (the VS Code extension does).
    _apply_settings(params.initialization_options)


@server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
async def _configuration(ls: PlancServer, params: t.DidChangeConfigurationParams) -> None:
    _apply_settings(params.settings)
    for uri in list(ls.docs):
        await check(ls, uri)


# -- diagnostics --------------------------------------------------------------------------

@server.feature(t.TEXT_DOCUMENT_DID_OPEN)
async def _did_open(ls: PlancServer, params: t.DidOpenTextDocumentParams) -> None:
    await check(ls, params.text_document.uri)


@server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
async def _did_change(ls: PlancServer, params: t.DidChangeTextDocumentParams) -> None:
    await check(ls, params.text_document.uri)


@server.feature(t.TEXT_DOCUMENT_DID_SAVE)
async def _did_save(ls: PlancServer, params: t.DidSaveTextDocumentParams) -> None:
    await check(ls, params.text_document.uri)


@server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
def _did_close(ls: PlancServer, params: t.DidCloseTextDocumentParams) -> None:
    doc = ls.docs.pop(params.text_document.uri, None)
    for uri in doc.published if doc else ():
        ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# -- formatting ---------------------------------------------------------------------------

@server.feature(t.TEXT_DOCUMENT_FORMATTING)
async def _formatting(ls: PlancServer, params: t.DocumentFormattingParams):
    from planc.check import FormatterBug, format_text
    from planc.diagnostics import PlanError

    text = _open_text(params.text_document.uri)
    if text is None:
        return None
    try:
        new = await asyncio.get_running_loop().run_in_executor(
            ls.worker, format_text, text, path_of(params.text_document.uri))
    except PlanError as exc:
        first = exc.diagnostics[0]
        where = f"{first.span.line}:{first.span.column}" if first.span else "?"
        log.error("not formatted: %s does not parse", params.text_document.uri)
        raise RequestFailed(f"not formatted: the plan does not parse "
                            f"({first.code} at {where}: {first.message})") from None
    except FormatterBug as exc:
        log.error("not formatted: %s", one_line(exc))
        raise RequestFailed(f"not formatted: internal error: {exc}") from None
    if new == text:
        return []
    lines = protocol.lines(text)  # the edit replaces the whole text
    end = ls.workspace.position_codec.position_to_client_units(
        lines, t.Position(line=len(lines) - 1, character=len(lines[-1]) - 1))
    return [t.TextEdit(range=t.Range(start=t.Position(line=0, character=0), end=end),
                       new_text=new)]


# -- hover, definition, completion, code actions ------------------------------------------

def _open_text(uri: str) -> str | None:
    """The text of `uri` if the client has it open (a request about any other document
    is answered with nothing, never by reading the disk)."""
    document = server.workspace.text_documents.get(unquote(uri))
    return None if document is None else document.source


def _context(params: t.TextDocumentPositionParams):
    """(the document's state, its open text, its file, line, column) at a request's
    position; the text is None where the document is not open."""
    uri = params.text_document.uri
    text = _open_text(uri)
    if text is None:
        return None, None, None, 0, 0
    line, col = protocol.from_client(text, params.position, server.workspace.position_codec)
    return server.docs.get(uri), text, path_of(uri), line, col


@server.feature(t.TEXT_DOCUMENT_HOVER)
def _hover(ls: PlancServer, params: t.HoverParams):
    doc, text, file, line, col = _context(params)
    if text is None:
        return None
    good = doc.good if doc else None
    if good is not None and good.text == text:
        rule = nav.rule_at(good.ir, file, line, col)
        if rule is not None:
            return _markdown(nav.rule_hover(rule, doc.report))
    word = nav.word_at(text, line, col)
    if word is None:
        return None
    if nav.is_code(word.text):
        shown = nav.code_hover(word.text)
        return _markdown(shown) if shown else None
    # The declarations of this very text where it parses, checker errors or not; else
    # those of the last version that checked.
    latest = doc.latest if doc else None
    current = latest if latest is not None and latest.text == text and \
        latest.statements is not None else good
    if current is not None and current.statements is not None:
        found = nav.declarations(current.statements).get(word.text)
        if found is not None:
            ir = current.ir if current is good or current.ir is not None else None
            return _markdown(nav.name_hover(word.text, found[0], found[1], ir))
    return None


def _markdown(text: str) -> t.Hover:
    return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value=text))


@server.feature(t.TEXT_DOCUMENT_DEFINITION)
def _definition(ls: PlancServer, params: t.DefinitionParams):
    doc, text, file, line, col = _context(params)
    if text is None:
        return None
    target = nav.include_at(text, file, line, col)
    if target is not None:
        zero = t.Position(line=0, character=0)
        return t.Location(uri=uri_of(target), range=t.Range(start=zero, end=zero))
    word = nav.word_at(text, line, col)
    good = (doc.good or doc.latest) if doc else None
    if word is None or good is None or good.statements is None:
        return None
    found = nav.declarations(good.statements).get(word.text)
    if found is None:
        return None
    span = found[1]
    return t.Location(uri=uri_of(span.file), range=protocol.lsp_range(
        span, good.sources, ls.workspace.position_codec))


_KINDS = {"keyword": t.CompletionItemKind.Keyword, "layout": t.CompletionItemKind.Constant,
          "axis": t.CompletionItemKind.EnumMember, "param": t.CompletionItemKind.Variable,
          "logical": t.CompletionItemKind.Field}


@server.feature(t.TEXT_DOCUMENT_COMPLETION)
def _completion(ls: PlancServer, params: t.CompletionParams):
    doc = ls.docs.get(params.text_document.uri)
    good = (doc.good or doc.latest) if doc else None
    items = nav.completions(good.ir if good else None, good.statements if good else None)
    return t.CompletionList(is_incomplete=False, items=[
        t.CompletionItem(label=label, kind=_KINDS[kind], detail=kind) for label, kind in items])


@server.feature(t.TEXT_DOCUMENT_CODE_ACTION)
def _code_action(ls: PlancServer, params: t.CodeActionParams):
    uri = params.text_document.uri
    actions = []
    for diag in params.context.diagnostics:
        data = diag.data if isinstance(diag.data, dict) else {}
        for fix in data.get("fixes", ()):
            if not (isinstance(fix, list) and len(fix) == 2 and all(isinstance(x, str)
                                                                    for x in fix)):
                continue
            title, new = fix
            actions.append(t.CodeAction(
                title=title, kind=t.CodeActionKind.QuickFix, diagnostics=[diag],
                is_preferred=True,
                edit=t.WorkspaceEdit(changes={uri: [t.TextEdit(range=diag.range,
                                                               new_text=new)]})))
    return actions


# -- running ------------------------------------------------------------------------------

class _OneLine(logging.Formatter):
    """Every record on one line: a traceback is cut to its last line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage().splitlines()
        first = message[0] if message else ""
        error = record.exc_info[1] if record.exc_info else None
        if error is not None and refused_reason(error) is not None:
            first = f"refused a message: {refused_reason(error)}"
        elif error is not None:
            first += f": {type(error).__name__}: {one_line(error)}"
        return f"planc lsp: {record.levelname.lower()}: {first}"


class _Once(logging.Filter):
    """Drops pygls's second record of a message it could not read (its reader logs the
    same failure), so each bad message is one line."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Unable to deserialize message")


def serve(stdin=None, stdout=None) -> None:
    """Serve over stdio until the client sends `exit` or closes the stream."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_OneLine())
    handler.addFilter(_Once())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    server.start_io(Input(stdin or sys.stdin.buffer), stdout)


__all__ = ["PlancServer", "serve", "server"]
