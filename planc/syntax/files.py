"""Reading plan files: regular files only, bounded in size, decoded as UTF-8.

A plan that cannot be decoded is a located diagnostic (P009), not an exception from
the codec; a file over the size limit is refused after reading one byte past it.
"""

from __future__ import annotations

import errno
import os
import stat

from planc import limits
from planc.diagnostics import PlanError, Span, error


def read_plan_text(path: str | os.PathLike, *, as_written: bool = False) -> str:
    """A plan file's text. OSError for an unreadable path; PlanError for bad bytes.

    Line breaks are written `\\n` (see `one_line_ending`), unless `as_written`: `fmt`
    compares the file as it is on disk with its canonical form.

    Only a regular file is read: a FIFO or a device (`/dev/zero`, a symlink to
    `/proc/self/fd/0`) would block or never end. Opening does not block on a FIFO.
    """
    fd = os.open(_as_path_reads_it(path), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    with open(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "Is a directory", str(path))
        if not stat.S_ISREG(mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        data = f.read(limits.MAX_PLAN_BYTES + 1)
    name = str(path)
    if len(data) > limits.MAX_PLAN_BYTES:
        raise PlanError((error("P125", f"plan file is larger than {limits.MAX_PLAN_BYTES} bytes",
                               Span.start_of(name), label="file starts here"),), {name: ""})
    text = decode_plan_bytes(data, name)
    return text if as_written else one_line_ending(text)


def _as_path_reads_it(path: str | os.PathLike) -> str | os.PathLike:
    """`path` as `pathlib.Path(path)` names it (no `//`, `.` parts or trailing `/`): the
    file opened is the one it always was. Without importing pathlib (with urllib.parse
    and ipaddress, ~4 ms of a start-up) where `path` is a str it would leave as it is."""
    if (path.__class__ is str and os.sep == "/" and path not in ("", "/") and "//" not in path
            and not path.endswith(("/", "/.")) and "/./" not in path
            and not path.startswith("./")):
        return path
    from pathlib import Path

    return Path(path)


def path_stem(path: str) -> str:
    """`pathlib.Path(path).stem` (a plan's name when it has no `plan` statement), without
    importing pathlib where `path` is a str as pathlib writes it."""
    if path != "." and _as_path_reads_it(path) is path:
        name = path.rpartition("/")[2]
        dot = name.rfind(".")
        return name[:dot] if 0 < dot < len(name) - 1 else name
    from pathlib import Path

    return Path(path).stem


def decode_plan_bytes(data: bytes, name: str) -> str:
    """`data` (the plan `name`) as text: UTF-8, a leading BOM dropped; P009 if not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = one_line_ending(data[:exc.start].decode("utf-8", "replace"))
        line = text.count("\n") + 1
        col = len(text) - (text.rfind("\n") + 1) + 1
        raise PlanError((error("P009", f"plan file is not UTF-8 (byte 0x{data[exc.start]:02x})",
                               Span(name, line, col, line, col + 1), label="invalid byte",
                               help="save the file as UTF-8"),),
                        {name: one_line_ending(data.decode("utf-8", "replace"))}) from None


def one_line_ending(text: str) -> str:
    """`text` with every line break written `\\n`: CRLF and a lone CR are line breaks too,
    as editors, Python's universal newlines and LSP clients count them, so the lexer,
    `fmt` and every diagnostic's line and column agree on what a line is.

    >>> one_line_ending("a\\r\\nb\\rc\\n")
    'a\\nb\\nc\\n'
    """
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")
