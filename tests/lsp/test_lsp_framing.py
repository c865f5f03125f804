"""`planc lsp`'s framing on what a hostile or broken client sends: header lines and
lengths are capped, a malformed frame is answered (a parse error, id null) and logged in
one line, and the server finds the next frame: the request after it is answered."""

from __future__ import annotations

import io
import tracemalloc

import pytest

pytest.importorskip("pygls")

from lsp_session import Raw  # noqa: E402

from planc.lsp.stream import MAX_HEADER_LINE, MAX_MESSAGE_BYTES, Input  # noqa: E402


def _hover(raw: Raw) -> bytes:
    import json

    raw.next_id += 1
    body = json.dumps({"jsonrpc": "2.0", "id": raw.next_id, "method": "textDocument/hover",
                       "params": {"textDocument": {"uri": "file:///nowhere/p.kd"},
                                  "position": {"line": 0, "character": 0}}}).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _answered_after(raw: Raw, *writes: bytes) -> list[dict]:
    """Write `writes` then a request; its answer must come. The errors with id null."""
    for w in writes:
        raw.proc.stdin.write(w)
    raw.proc.stdin.write(_hover(raw))
    raw.proc.stdin.flush()
    reply = raw.reply_to(raw.next_id)
    assert "result" in reply or "error" in reply
    return [m["error"] for m in raw.seen if "error" in m and m.get("id") is None]


def test_a_header_line_with_no_end_is_refused_not_buffered(server):
    line = b"X" * (1 << 20)
    [err] = _answered_after(server, *[line] * 64)  # 64 MB, no newline
    assert err == {"code": -32700, "message": "Parse error: a header line longer than "
                                              f"{MAX_HEADER_LINE} bytes"}
    code, log = server.finish()
    assert code == 0
    assert log == [f"planc lsp: error: refused a message: a header line longer than "
                   f"{MAX_HEADER_LINE} bytes"]


def test_a_length_of_twenty_digits_is_refused_and_the_next_request_read(server):
    [err] = _answered_after(server, b"Content-Length: 99999999999999999999\r\n\r\n")
    assert err["code"] == -32700
    assert err["message"] == ("Parse error: Content-Length 99999999999999999999 is over the "
                              f"{MAX_MESSAGE_BYTES} bytes the server reads")
    code, log = server.finish()
    assert code == 0 and len(log) == 1 and "refused a message" in log[0]


def test_a_length_larger_than_its_body_does_not_eat_the_next_request(server):
    first = _hover(server)
    head, body = first.split(b"\r\n\r\n")
    longer = b"Content-Length: %d\r\n\r\n" % (len(body) + 1000) + body
    assert _answered_after(server, longer) == []
    # the short message itself was read, and answered
    assert any(m.get("id") == server.next_id - 1 for m in server.seen)
    code, log = server.finish()
    assert code == 0
    assert log == [f"planc lsp: warning: a message of {len(body)} bytes said it had "
                   f"{len(body) + 1000} (Content-Length): read up to the next message's "
                   f"header"]


@pytest.mark.parametrize("header,why", [
    (b"Content-Length: twelve\r\n\r\n", "Content-Length is not a byte count"),
    (b"Content-Length: 0\r\n\r\n", "Content-Length 0: an empty message"),
    (b"X-A: 1\r\n" * 17, "more than 16 header lines"),
])
def test_other_malformed_headers_are_answered_and_logged(server, header, why):
    [err] = _answered_after(server, header)
    assert err == {"code": -32700, "message": f"Parse error: {why}"}
    code, log = server.finish()
    assert code == 0 and log == [f"planc lsp: error: refused a message: {why}"]


# -- the reader alone: what it keeps in memory -------------------------------------------


class _Endless(io.RawIOBase):
    """`size` bytes of `fill` (no newline), then `tail`."""

    def __init__(self, size: int, tail: bytes, fill: bytes = b"x"):
        self.left, self.tail, self.fill = size, tail, fill

    def readable(self):
        return True

    def readinto(self, b):
        if self.left > 0:
            n = min(len(b), self.left)
            b[:n] = self.fill * n
            self.left -= n
            return n
        n = min(len(b), len(self.tail))
        b[:n] = self.tail[:n]
        self.tail = self.tail[n:]
        return n


@pytest.mark.parametrize("before", [
    b"",  # a header line 200 MB long
    b"Content-Length: 999999999999\r\n\r\n",  # a body over the limit, sent in full
])
def test_the_reader_holds_little_of_what_it_skips(before):
    size = 200 << 20
    stream = io.BufferedReader(_Endless(size, b"Content-Length: 2\r\n\r\n{}"))
    reader = Input(_Prefixed(before, stream))
    tracemalloc.start()
    try:
        first = [reader.readline(), reader.readline()]
        refused = reader.read(int(first[0][15:]))
        assert [reader.readline(), reader.readline(), reader.read(2)] == \
            [b"Content-Length: 2\r\n", b"\r\n", b"{}"]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert b"over the" in refused or b"longer than" in refused
    assert peak < 8 << 20  # a few chunks, not the 200 MB


class _Prefixed:
    """`head`, then `rest`'s bytes."""

    def __init__(self, head: bytes, rest):
        self.head, self.rest = head, rest

    def read1(self, n):
        if self.head:
            out, self.head = self.head[:n], self.head[n:]
            return out
        return self.rest.read1(n)


def test_a_length_too_long_to_read_as_a_line_is_skipped_once():
    # the refused line begins with the header the reader skips to: it must not find it
    # again (found by tests/fuzzing_io.py)
    stream = (b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n"
              b"Content-Length: 2\r\n\r\n{}")
    reader = Input(io.BytesIO(stream))
    n = int(reader.readline()[len(b"Content-Length: "):])
    assert reader.readline() == b"\r\n"
    assert reader.read(n).endswith(f"a header line longer than {MAX_HEADER_LINE} "
                                   f"bytes".encode())
    assert [reader.readline(), reader.readline(), reader.read(2), reader.readline()] == \
        [b"Content-Length: 2\r\n", b"\r\n", b"{}", b""]


def test_a_refused_header_line_keeps_the_header_on_the_next_line():
    # found by tests/fuzzing_io.py: the skip must start after the refused line
    reader = Input(io.BytesIO(b"Content-Length:\r\nContent-Length: 2\r\n\r\n{}"))
    n = int(reader.readline()[len(b"Content-Length: "):])
    reader.readline()
    assert reader.read(n).endswith(b"Content-Length is not a byte count")
    assert [reader.readline(), reader.readline(), reader.read(2)] == \
        [b"Content-Length: 2\r\n", b"\r\n", b"{}"]
