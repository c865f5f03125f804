"""The server's standard input, made safe against a client that breaks the framing.

pygls reads `Content-Length: N` headers line by line, then N bytes. Two kinds of bad
framing would otherwise stop the server for good: a frame whose body is not what its
header says leaves the next header glued to the end of a line, where it is never found
again (every later message is lost); and a header claiming more bytes than memory holds
fails the read. `Input` finds a header wherever it starts in a line, and reads an
oversized body in pieces, throws it away and hands pygls a body that is not JSON, which
it answers with a parse error.
"""

from __future__ import annotations

MAX_MESSAGE_BYTES = 64 << 20  # a 10 MB document and then some
_HEADER = b"Content-Length:"
_CHUNK = 1 << 20


class Input:
    """A binary stream's `readline` and `read`, as pygls's stdio reader calls them.

    >>> import io
    >>> s = Input(io.BytesIO(b'{"junk"}Content-Length: 2\\r\\n\\r\\n{}'))
    >>> s.readline(), s.readline(), s.read(2)
    (b'Content-Length: 2\\r\\n', b'\\r\\n', b'{}')
    """

    def __init__(self, raw) -> None:
        self.raw = raw

    def readline(self) -> bytes:
        line = self.raw.readline()
        at = line.find(_HEADER)
        return line[at:] if at > 0 else line

    def read(self, n: int) -> bytes:
        if n <= MAX_MESSAGE_BYTES:
            return self.raw.read(n)
        left = n
        while left > 0:
            got = self.raw.read(min(left, _CHUNK))
            if not got:
                return b""  # the client went away mid-message: the end of input
            left -= len(got)
        return b"\x00 message larger than the server reads"
