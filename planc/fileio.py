"""Small file helpers shared by planc: atomic writes and byte-counted reads.

`atomic_write` is how planc writes every file it produces (manifests, emitted modules,
formatted plans): a reader never sees a half-written file, and a failed write leaves the
previous file untouched.

`open_counted` and `track_reads` exist so that "reads headers only" is a checkable claim:
every checkpoint reader in `planc.sources` opens files through `open_counted`, and
`track_reads()` reports how many bytes those reads returned.
"""

from __future__ import annotations

import _thread
import errno
import io
import os
import stat
from contextlib import contextmanager

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

PathLike = str | os.PathLike[str]  # a `types.UnionType`, made without typing

__all__ = ["atomic_write", "open_counted", "os_error_text", "track_reads", "ReadLog"]


def _default_mode() -> int:
    # mkstemp creates files 0600; a new file should get the permissions any other
    # new file would get, which is 0666 minus the umask. The umask can only be read by
    # setting it, so set it back at once.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: PathLike, data: bytes | bytearray | memoryview | str) -> None:
    """Replace the file at `path` with `data` (str is written as UTF-8), atomically.

    The data goes to a temporary file in the same directory, is flushed to disk, and
    then renamed over `path` with `os.replace`, so readers see either the old file or
    the new one, never a mix. On any failure the temporary file is removed, the old
    file (if any) is left as it was, and the exception propagates. An existing file
    keeps its permission bits. A symbolic link at `path` is replaced by the new file and
    its target is left alone (as `sed -i` does): a link planted in a checkout, such as
    `results.sarif -> ~/.ssh/authorized_keys`, cannot redirect what planc writes.

    What is not a regular file is never replaced. A character device, a FIFO or a
    socket at `path` (`/dev/null`, a named pipe, `/dev/stdout` and the links to a stream
    it stands for) is written to as a stream, as a shell redirection would; a directory,
    or a link to one, raises `IsADirectoryError`; a block device raises `OSError`.
    """
    if isinstance(data, str):
        payload = data.encode("utf-8")
    elif isinstance(data, (bytes, bytearray, memoryview)):
        payload = bytes(data)
    else:
        raise TypeError(f"atomic_write needs bytes or str, not {type(data).__name__}")

    target = os.path.abspath(os.fspath(path))
    kind = _kind_of(target)
    if kind == "stream":
        _write_stream(target, payload)
        return
    mode = kind if isinstance(kind, int) else _default_mode()
    directory = os.path.dirname(target) or "."
    import tempfile  # only writers pay for it (~4 ms of every start-up otherwise)

    # A short temporary name: the target's own name may already be at the length limit.
    fd, tmp = tempfile.mkstemp(prefix=".planc-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_dir(directory)


def _kind_of(target: str) -> int | str | None:
    """The permission bits of a regular file to replace, None for a new file or a link
    to replace, or "stream"; raises for what must not be written at all."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return None
    if stat.S_ISREG(st.st_mode):
        return st.st_mode & 0o7777
    if stat.S_ISLNK(st.st_mode):
        try:
            st = os.stat(target)
        except OSError:
            return None  # a dangling link is replaced like any other link
        if stat.S_ISREG(st.st_mode):
            return None
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", target)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISSOCK(st.st_mode):
        return "stream"
    raise OSError(errno.EINVAL, "not a regular file, a character device or a pipe", target)


def _write_stream(target: str, payload: bytes) -> None:
    # No temporary file and no rename: a device or a pipe has no old contents to keep.
    fd = os.open(target, os.O_WRONLY | getattr(os, "O_NOCTTY", 0))
    try:
        view = memoryview(payload)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _fsync_dir(directory: str) -> None:
    # Makes the rename itself durable. Not every platform lets a directory be opened.
    try:
        dfd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)


class ReadLog:
    """What was read through `open_counted` while a `track_reads()` block was open."""

    def __init__(self):
        self.bytes_read = 0
        self.files: list[str] = []


_active_logs: list[ReadLog] = []
# `_thread`'s lock is `threading.Lock`: importing threading costs ~1 ms of a start-up.
_logs_lock = _thread.allocate_lock()


@contextmanager
def track_reads() -> Iterator[ReadLog]:
    """Count the bytes returned by reads of files opened with `open_counted`.

    >>> with track_reads() as log:
    ...     pass
    >>> log.bytes_read
    0
    """
    log = ReadLog()
    with _logs_lock:
        _active_logs.append(log)
    try:
        yield log
    finally:
        with _logs_lock:
            _active_logs.remove(log)


def _count(n: int) -> None:
    if n and _active_logs:
        with _logs_lock:
            for log in _active_logs:
                log.bytes_read += n


class _CountingFile(io.FileIO):
    # Unbuffered on purpose: a buffered reader would pull in a whole buffer (8 KiB or
    # more) per read, so counting at this level counts what really left the disk cache.
    def read(self, size: int = -1) -> bytes:
        data = super().read(size)
        _count(len(data) if data else 0)
        return data

    def readall(self) -> bytes:
        data = super().readall()
        _count(len(data))
        return data

    def readinto(self, buffer) -> int:
        n = super().readinto(buffer)
        _count(n or 0)
        return n


def open_counted(path: PathLike) -> io.FileIO:
    """Open `path` for binary reading, unbuffered, with its reads counted by `track_reads`."""
    f = _CountingFile(os.fspath(path), "rb")
    if _active_logs:
        with _logs_lock:
            for log in _active_logs:
                log.files.append(os.fspath(path))
    return f


def os_error_text(exc: OSError) -> str:
    """Why a file operation failed, in the words messages use after `cannot read PATH: `.

    >>> os_error_text(IsADirectoryError(21, "Is a directory"))
    'is a directory'
    """
    if isinstance(exc, IsADirectoryError):
        return "is a directory"
    return exc.strerror or str(exc)
