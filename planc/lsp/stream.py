"""The server's standard input, framed here, whatever a client sends.

pygls reads `Content-Length: N` headers line by line, then N bytes, and trusts both: a
header line with no newline is buffered whole, a length of 10**20 is read (and thrown
away) until the input ends, and a length larger than its body eats the next message.
`Input` reads the frames itself, with every size capped, and hands pygls only
well-formed ones (`Content-Length: N`, a blank line, N bytes):

- A header line longer than `MAX_HEADER_LINE`, more than `MAX_HEADER_LINES` header
  lines, a `Content-Length` that is not a byte count, or one over `MAX_MESSAGE_BYTES`
  (or 0) refuses the frame: the input is skipped, a chunk at a time, to the next
  `Content-Length:`, and pygls gets a body that is not JSON, carrying the reason
  (`refused_reason`), which the server answers with a parse error and logs in one line.
- A body in which the next frame's header begins (its length was larger than what was
  sent) ends there: the next message is kept, and one line is logged.
- Text before a header on its line (what is left of a frame shorter than its length)
  and blank lines between frames are skipped.

Memory is bounded by one body of at most `MAX_MESSAGE_BYTES`, plus a chunk.
"""

from __future__ import annotations

import json
import logging
import re
import secrets

MAX_MESSAGE_BYTES = 64 << 20  # a 10 MB document and then some
MAX_HEADER_LINE = 4096  # `Content-Length: N` is 20-odd bytes; `Content-Type` about 50
MAX_HEADER_LINES = 16
_HEADER = b"Content-Length:"
# A frame's header inside a body: raw line breaks never occur in a JSON string, and a
# `Content-Length:` outside one is not JSON, so this is the next frame.
_NEXT_FRAME = re.compile(rb"Content-Length:[ \t]*\d+\r?\n")
_OVERLAP = 256  # bytes of a body scanned again after each read, for a header cut in two
_CHUNK = 1 << 20
# The body pygls gets for a refused frame: not JSON, and marked with a token no client
# can know, so a body a client sends is never taken for one (and echoed).
_REFUSED = f"planc-{secrets.token_hex(8)}: "

log = logging.getLogger("planc.lsp")


def refused_reason(error: BaseException) -> str | None:
    """Why `Input` refused a frame, when `error` is pygls's failure to read the body it
    handed over in its place; else None.

    >>> try:
    ...     json.loads(_REFUSED + "too long")
    ... except ValueError as e:
    ...     print(refused_reason(e))
    too long
    """
    doc = getattr(error, "doc", None)
    if isinstance(error, json.JSONDecodeError) and isinstance(doc, str) \
            and doc.startswith(_REFUSED):
        return doc[len(_REFUSED):]
    return None


class Input:
    """A binary stream's `readline` and `read`, as pygls's stdio reader calls them.

    >>> import io
    >>> s = Input(io.BytesIO(b'{"junk"}Content-Length: 2\\r\\n\\r\\n{}'))
    >>> s.readline(), s.readline(), s.read(2)
    (b'Content-Length: 2\\r\\n', b'\\r\\n', b'{}')
    >>> s = Input(io.BytesIO(b'Content-Length: 99999999999999999999\\r\\n\\r\\n...'
    ...                      b'Content-Length: 2\\r\\n\\r\\n{}'))
    >>> n = int(s.readline()[15:]); _ = s.readline(); s.read(n)[len(_REFUSED):]
    b'Content-Length 99999999999999999999 is over the 67108864 bytes the server reads'
    >>> s.readline(), s.readline(), s.read(2), s.readline()
    (b'Content-Length: 2\\r\\n', b'\\r\\n', b'{}', b'')
    """

    def __init__(self, raw) -> None:
        self.raw = raw
        # `read1`: what has arrived, without waiting for more (a frame shorter than its
        # length must not wait for bytes that will never come).
        self._read = raw.read1 if hasattr(raw, "read1") else raw.read
        self._buf = bytearray()
        self._eof = False
        self._frame: list[bytes] = []  # what pygls reads next: two header lines, a body

    def readline(self) -> bytes:
        if not self._frame:
            body = self._next_body()
            if body is None:
                return b""  # the end of input: pygls stops
            self._frame = [b"Content-Length: %d\r\n" % len(body), b"\r\n", body]
        return self._frame.pop(0)

    def read(self, n: int) -> bytes:
        return self._frame.pop(0) if self._frame else b""

    # -- reading the raw stream ----------------------------------------------------------

    def _fill(self) -> None:
        chunk = self._read(_CHUNK)
        if chunk:
            self._buf += chunk
        else:
            self._eof = True

    def _line(self) -> bytes | None:
        """The next line, at most `MAX_HEADER_LINE` bytes; b"" for a longer one (left
        in the buffer); None at the end of input."""
        while True:
            at = self._buf.find(b"\n", 0, MAX_HEADER_LINE)
            if at >= 0:
                line = bytes(self._buf[:at + 1])
                del self._buf[:at + 1]
                return line
            if len(self._buf) >= MAX_HEADER_LINE:
                return b""
            if self._eof:
                if not self._buf:
                    return None
                line = bytes(self._buf)
                self._buf.clear()
                return line
            self._fill()

    def _skip_to_header(self, unread_line: bool) -> None:
        """Drop input up to the next `Content-Length:`, a chunk at a time; with
        `unread_line`, the refused line is still in the buffer, its own header too."""
        if unread_line:
            del self._buf[:1]
        keep = len(_HEADER) - 1
        while True:
            at = self._buf.find(_HEADER)
            if at >= 0:
                del self._buf[:at]
                return
            if len(self._buf) > keep:
                del self._buf[:len(self._buf) - keep]
            if self._eof:
                self._buf.clear()
                return
            self._fill()

    def _refuse(self, why: str, unread_line: bool = False) -> bytes:
        self._skip_to_header(unread_line)
        return (_REFUSED + why).encode()

    # -- frames --------------------------------------------------------------------------

    def _next_body(self) -> bytes | None:
        length = None
        lines = 0
        while True:
            line = self._line()
            if line is None:
                return None
            if line == b"":
                return self._refuse(f"a header line longer than {MAX_HEADER_LINE} bytes",
                                    unread_line=True)
            at = line.find(_HEADER)
            if at >= 0:
                value = line[at + len(_HEADER):].strip()
                if not value.isdigit():
                    return self._refuse("Content-Length is not a byte count")
                length = int(value)
                if length > MAX_MESSAGE_BYTES:
                    said = value.decode() if len(value) <= 24 else f"of {len(value)} digits"
                    return self._refuse(f"Content-Length {said} is over the "
                                        f"{MAX_MESSAGE_BYTES} bytes the server reads")
                if length == 0:
                    return self._refuse("Content-Length 0: an empty message")
            elif not line.strip():
                if length is not None:
                    return self._body(length)
                continue  # a blank line between frames
            lines += 1
            if lines > MAX_HEADER_LINES:
                return self._refuse(f"more than {MAX_HEADER_LINES} header lines")

    def _body(self, length: int) -> bytes | None:
        scanned = 0
        while True:
            found = _NEXT_FRAME.search(self._buf, scanned, length + _OVERLAP)
            if found is not None and found.start() < length:
                at = found.start()
                body = bytes(self._buf[:at])
                del self._buf[:at]
                if not body:
                    return (_REFUSED + f"Content-Length {length}, and the next message "
                            f"right after the header").encode()
                log.warning("a message of %d bytes said it had %d (Content-Length): read "
                            "up to the next message's header", at, length)
                return body
            if len(self._buf) >= length:
                body = bytes(self._buf[:length])
                del self._buf[:length]
                return body
            if self._eof:
                return None  # the client went away mid-message
            scanned = max(0, len(self._buf) - _OVERLAP)
            self._fill()
