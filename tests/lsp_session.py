"""A real editor's side of `planc lsp`: pygls's own client driving the server as a
subprocess over stdio, as VS Code or Neovim would. Used by tests/lsp/ and
bench/lsp_latency.py."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from lsprotocol import types as t
from pygls.lsp.client import BaseLanguageClient

ROOT = Path(__file__).resolve().parent.parent


class Session:
    """One server process and the client talking to it."""

    def __init__(self) -> None:
        self.client = BaseLanguageClient("planc-tests", "1")
        self.diagnostics: dict[str, list[t.PublishDiagnosticsParams]] = {}
        self.arrived = asyncio.Condition()
        self.stderr = b""

        @self.client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        async def _published(params: t.PublishDiagnosticsParams) -> None:
            async with self.arrived:
                self.diagnostics.setdefault(params.uri, []).append(params)
                self.arrived.notify_all()

    async def start(self, settings: dict | None = None) -> t.InitializeResult:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        await self.client.start_io(sys.executable, "-m", "planc", "lsp", env=env, cwd=str(ROOT))
        result = await self.client.initialize_async(t.InitializeParams(
            capabilities=t.ClientCapabilities(), root_uri=ROOT.as_uri(),
            initialization_options=settings))
        self.client.initialized(t.InitializedParams())
        self.init_result = result
        return result

    def open(self, path: Path, text: str, version: int = 1) -> str:
        uri = path.absolute().as_uri()
        self.client.text_document_did_open(t.DidOpenTextDocumentParams(
            text_document=t.TextDocumentItem(uri=uri, language_id="planc", version=version,
                                             text=text)))
        return uri

    def change(self, uri: str, text: str, version: int) -> None:
        self.client.text_document_did_change(t.DidChangeTextDocumentParams(
            text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[t.TextDocumentContentChangeWholeDocument(text=text)]))

    async def next_diagnostics(self, uri: str, seen: int = 0, *, where=None,
                               timeout: float = 60) -> list[t.Diagnostic]:
        """The first diagnostics published for `uri` after the first `seen` (and, with
        `where`, the first for which `where(diagnostics)` holds)."""
        async def wait():
            async with self.arrived:
                while True:
                    got = self.diagnostics.get(uri, [])[seen:]
                    for p in got:
                        if where is None or where(p.diagnostics):
                            return list(p.diagnostics)
                    await self.arrived.wait()
        return await asyncio.wait_for(wait(), timeout)

    def count(self, uri: str) -> int:
        return len(self.diagnostics.get(uri, []))

    async def send_raw(self, body: bytes) -> None:
        """Bytes on the server's stdin as one framed message, whatever they hold."""
        stdin = self.client._server.stdin
        stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await stdin.drain()

    async def close(self) -> None:
        """End the server unless a scenario already stopped it, and the client with it."""
        if not self.client.stopped:
            self.client._server.kill()
            await self.client.stop()

    async def stop(self) -> int:
        """shutdown, exit, and the server's exit status."""
        await self.client.shutdown_async(None)
        self.client.exit(None)
        server = self.client._server
        code = await asyncio.wait_for(server.wait(), 30)
        self.stderr = await server.stderr.read()
        await self.client.stop()
        return code


def run(scenario, settings: dict | None = None):
    """Run `scenario(session)` against a fresh server; returns what it returns."""
    async def main():
        s = Session()
        await s.start(settings)
        try:
            return await scenario(s)
        finally:
            await s.close()
    return asyncio.run(main())


class Shared:
    """One server that several scenarios run against in turn, on one event loop that runs
    only while a scenario does (what the server sends in between waits in the pipe)."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.session = Session()
        self.loop.run_until_complete(self.session.start())

    def run(self, scenario):
        """Run `scenario(session)`; returns what it returns."""
        return self.loop.run_until_complete(scenario(self.session))

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.session.close())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()


class Raw:
    """The server driven byte by byte, for what no well-behaved client sends: framed
    messages written as given, and every message the server writes back, read in order."""

    def __init__(self) -> None:
        import subprocess

        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "planc", "lsp"], cwd=str(ROOT),
                                     env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.next_id = 0

    def send_bytes(self, body: bytes) -> None:
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def send(self, method: str, params=None, *, request: bool = True):
        import json

        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        if request:
            self.next_id += 1
            msg["id"] = self.next_id
        self.send_bytes(json.dumps(msg).encode())
        return msg.get("id")

    def read(self) -> dict:
        """The next message from the server (blocks; the tests bound it with a timeout)."""
        import json

        length = None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError("the server closed its output")
            if line in (b"\r\n", b"\n"):
                if length is not None:
                    break
                continue
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        return json.loads(self.proc.stdout.read(length))

    def reply_to(self, msg_id) -> dict:
        """The response with `msg_id` (notifications before it are kept in `seen`)."""
        while True:
            msg = self.read()
            self.seen.append(msg)
            if "method" not in msg and msg.get("id") == msg_id:
                return msg

    def initialize(self, settings=None) -> dict:
        self.seen: list[dict] = []
        r = self.reply_to(self.send("initialize", {"processId": None, "rootUri": ROOT.as_uri(),
                                                   "capabilities": {},
                                                   "initializationOptions": settings}))
        self.send("initialized", {}, request=False)
        return r

    def diagnostics_for(self, uri: str) -> list[dict]:
        """The next diagnostics published for `uri`."""
        for i, msg in enumerate(self.seen):
            if msg.get("method") == "textDocument/publishDiagnostics" and \
                    msg["params"]["uri"] == uri:
                del self.seen[i]
                return msg["params"]["diagnostics"]
        while True:
            msg = self.read()
            if msg.get("method") == "textDocument/publishDiagnostics" and \
                    msg["params"]["uri"] == uri:
                return msg["params"]["diagnostics"]
            self.seen.append(msg)

    def finish(self) -> tuple[int, list[str]]:
        """shutdown and exit: the exit status and the lines the server logged."""
        self.reply_to(self.send("shutdown"))
        self.send("exit", request=False)
        self.proc.stdin.close()
        code = self.proc.wait(30)
        lines = self.proc.stderr.read().decode("utf-8", "replace").splitlines()
        self.proc.stdout.close()
        self.proc.stderr.close()
        return code, lines
