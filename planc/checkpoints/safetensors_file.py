"""``.safetensors`` files, read one slice at a time.

The header is read and checked by `planc.sources.headers.read_safetensors_header`
(the same checks `planc lint --model` makes, refusing what the safetensors library
refuses: see tests/checkpoints/test_load_bad_input.py). A slice that is one run of the
file's bytes (a block of rows, or the whole tensor) is read with `pread` straight into a
64-byte aligned buffer that XLA:CPU adopts as the device buffer
(`planc.checkpoints.tensors.aligned_empty`); any other slice is copied once into such a
buffer out of a memory map of that tensor's own bytes (its offsets from the checked
header), viewed with its dtype and shape. This is the
library's own layout and what its ``get_slice(name)[index]`` does; planc does not call
``get_slice`` because it copies the slice two more times on the way (into a Rust
vector, then into a Python bytearray), which made loading a 1 GiB checkpoint take
about twice as long as ``load_file`` reading it whole, against one copy here. The
float8 dtypes, which safetensors' numpy path cannot build, are read the same way as
ml_dtypes types; packed sub-byte dtypes (F4, F6) cannot be sliced into numpy and are
refused when read (P413).

Every read is checked against the file as its header was read (`TensorMap.check`: device,
inode, size, modification time): a file written to or replaced while it loads is P429, one
that shrank P413, so a load never mixes two versions of a checkpoint.

One tensor is mapped at a time and unmapped at `close()` (the loader closes after each
variable), so the pages of the file it touched leave the process's resident memory.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from planc.checkpoints.tensors import (
    Checkpoint, CheckpointError, Tensor, aligned_empty, checked_index, from_source_error, whole,
)
from planc.sources.model import SourceError, one_line
from planc.sources.headers import SafetensorsEntry, read_safetensors_header

if TYPE_CHECKING:
    import numpy as np

__all__ = ["SafetensorsCheckpoint", "read_entry", "read_entries", "fill_entry", "identity"]

_PACKED = {"F4", "F6_E2M3", "F6_E3M2"}


class SafetensorsCheckpoint(Checkpoint):
    """One ``.safetensors`` file.

    >>> import numpy as np, safetensors.numpy, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.safetensors")
    >>> safetensors.numpy.save_file({"w": np.arange(6, dtype=np.float32).reshape(2, 3)}, path)
    >>> with SafetensorsCheckpoint(path) as ckpt:
    ...     ckpt.read("w", (slice(0, 2), slice(1, 3))).tolist()
    [[1.0, 2.0], [4.0, 5.0]]
    """

    kind = "safetensors"
    concurrent_reads = True

    def __init__(self, path, origin: str | None = None):
        self.path = os.fspath(path)
        opened = identity(self.path)  # before the header: a change after it is seen
        try:
            entries = read_safetensors_header(self.path, origin)
        except SourceError as e:
            raise from_source_error(e) from None
        self.entries = {e.name: e for e in entries}
        self.tensors = tuple(Tensor(e.name, e.shape, e.dtype, self.path) for e in entries)
        self.bytes_read = 0
        self._maps = TensorMap({self.path: opened})
        self._thread_maps = ThreadMaps(self._maps.opened)

    def read(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
        tensor = self.tensor(name)
        index = checked_index(tensor, index)
        out = read_entry(self.path, self.entries[name], index, self._maps)
        self.bytes_read += out.nbytes
        return out

    def read_into(self, name: str, index: tuple[slice, ...], out) -> None:
        index = checked_index(self.tensor(name), index)
        fill_entry(self.path, self.entries[name], index, self._thread_maps.here(), out)
        self.bytes_read += out.nbytes

    def read_whole(self, names) -> list:
        found = read_entries([(self.path, self.entries[self.tensor(n).name]) for n in names],
                             self._maps)
        self.bytes_read += sum(a.nbytes for a in found)
        return found

    def close(self) -> None:
        self._maps.clear()
        self._thread_maps.clear()


def identity(path: str) -> tuple | None:
    """What tells one version of the file at `path` from another: its device, inode, size
    and modification time (None when it cannot be read: opening it says why)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class TensorMap:
    """The memory map of one tensor at a time: every slice of a variable is copied out
    of one mapping (a page two shards share is faulted in once), and the mapping is
    dropped when another tensor is asked for or at `clear()`.

    `opened` is each file's `identity` when its header was read: `check` refuses a file
    that has changed since (P429; P413 when it has shrunk, as a truncated file is)."""

    def __init__(self, opened: dict | None = None):
        self.opened = dict(opened or {})
        self._key: tuple[str, str] | None = None
        self._view = None
        self._fd: int | None = None
        self._fd_path: str | None = None

    def view(self, path: str, entry: SafetensorsEntry):
        import numpy as np

        import ml_dtypes  # noqa: F401  (registers float8 names with numpy)

        if self._key != (path, entry.name):
            self.clear()
            mapped = np.memmap(path, dtype=np.uint8, mode="r", offset=entry.begin,
                               shape=(entry.end - entry.begin,))
            self._view = mapped.view(np.dtype(entry.dtype)).reshape(entry.shape)
            self._key = (path, entry.name)
        return self._view

    def descriptor(self, path: str) -> int:
        """A file descriptor of `path`, kept until `clear()` (pread is positional, so the
        threads reading a variable's shards share it)."""
        if self._fd is None or self._fd_path != path:
            self._close_fd()
            self._fd, self._fd_path = os.open(path, os.O_RDONLY), path
        return self._fd

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = self._fd_path = None

    def clear(self) -> None:
        self._key = self._view = None
        self._close_fd()

    def check(self, path: str, where: str) -> None:
        """Refuse `path` when it is no longer the file whose header was read: the bytes
        just read could belong to another version of the checkpoint."""
        known = self.opened.get(path)
        if known is None:
            return
        now = identity(path)
        if now == known:
            return
        self.clear()
        if now is None:
            raise CheckpointError(f"{where}: the file disappeared while it was read",
                                  code="P413", unreadable=True)
        if now[2] < known[2]:
            raise CheckpointError(f"{where}: the file shrank from {known[2]} to {now[2]} "
                                  f"bytes while it was read; it may have been truncated",
                                  code="P413")
        what = ("it was replaced by another file" if now[:2] != known[:2] else
                f"its size went from {known[2]} to {now[2]} bytes" if now[2] != known[2]
                else "it was written to (its modification time moved)")
        raise CheckpointError(f"{where}: the file changed while it was read ({what}); the "
                              f"values read could mix two versions of the checkpoint",
                              code="P429")


class ThreadMaps:
    """A `TensorMap` per thread, for `read_into`: the staged loader reads different
    tensors (of different files) on several threads at once, and a `TensorMap` holds one
    tensor's mapping and one file descriptor, dropped when another is asked for."""

    def __init__(self, opened: dict):
        self.opened = opened
        self._lock = threading.Lock()
        self._local = threading.local()
        self._all: list[TensorMap] = []

    def here(self) -> TensorMap:
        """This thread's `TensorMap`."""
        maps = getattr(self._local, "maps", None)
        if maps is None:
            maps = self._local.maps = TensorMap(self.opened)
            with self._lock:
                self._all.append(maps)
        return maps

    def clear(self) -> None:
        """Drop every thread's mappings and descriptors (a thread reading again gets a
        fresh `TensorMap`)."""
        with self._lock:
            found, self._all = self._all, []
            self._local = threading.local()
        for maps in found:
            maps.clear()


def read_entry(path: str, entry: SafetensorsEntry, index: tuple[slice, ...],
               maps: TensorMap) -> np.ndarray:
    """`entry[index]` of the safetensors file at `path`, in an aligned buffer."""
    import numpy as np

    import ml_dtypes  # noqa: F401  (bfloat16 and float8 names)

    _refuse_packed(path, entry)
    want = tuple(s.stop - s.start for s in index)
    out = (np.zeros if 0 in want else aligned_empty)(want, np.dtype(entry.dtype))
    fill_entry(path, entry, index, maps, out)
    return out


def _refuse_packed(path: str, entry: SafetensorsEntry) -> None:
    if entry.code in _PACKED:
        raise CheckpointError(f"{path}: tensor `{entry.name}` has the packed {entry.code} "
                              f"dtype, which numpy cannot slice; convert it to a "
                              f"byte-sized dtype first", code="P413")


def fill_entry(path: str, entry: SafetensorsEntry, index: tuple[slice, ...],
               maps: TensorMap, out) -> None:
    """`entry[index]` of the safetensors file at `path` written into `out` (an array of
    the slice's shape), cast to `out`'s dtype as numpy casts."""
    import numpy as np

    import ml_dtypes  # noqa: F401

    where = f"{path}: tensor `{entry.name}`"
    _refuse_packed(path, entry)
    if not out.size:
        return
    try:
        run = _contiguous_run(entry.shape, index)
        if run is not None and out.dtype == np.dtype(entry.dtype):
            # One run of the file's bytes (a row block, or the whole tensor): read it
            # straight into the buffer, as `load_file` reads, with no page faults on a
            # mapping of the file.
            _read_into(maps.descriptor(path), out, entry.begin + run * out.itemsize, where)
        else:
            out[...] = maps.view(path, entry)[index]
    except CheckpointError:
        raise
    except OSError as e:
        maps.clear()
        raise CheckpointError(f"{where}: cannot read: {e.strerror or one_line(e)}",
                              code="P413", unreadable=True) from None
    except Exception as e:  # a mapping past the end: the file changed after it was opened
        maps.clear()
        raise CheckpointError(f"{where}: cannot read the slice: {one_line(e)}; the file "
                              f"may have changed since it was opened", code="P413") from None
    maps.check(path, where)


def read_entries(entries: list[tuple[str, SafetensorsEntry]], maps: TensorMap) -> list:
    """Each `(path, entry)` whole, in order, each in an aligned buffer of its own (as
    `read_entry` gives it). Tensors that lie back to back in a file are read by one
    `preadv` into their buffers: a checkpoint of thousands of small tensors is a few
    reads, not thousands (bench 15). A run that cannot be read is read again tensor by
    tensor, so the error names its tensor."""
    import numpy as np

    out: list = [None] * len(entries)
    where = [(path, entry.begin) for path, entry in entries]
    order = sorted(range(len(entries)), key=where.__getitem__)  # by file, then offset
    run: list[int] = []

    def read_run():
        path, first = entries[run[0]]
        buffers = [aligned_empty(entries[i][1].shape, np.dtype(entries[i][1].dtype))
                   for i in run]
        try:
            _read_all_into(maps.descriptor(path), buffers, first.begin, path)
        except (CheckpointError, OSError):
            maps.clear()
            for i in run:  # raises, naming the tensor that cannot be read
                out[i] = read_entry(*entries[i], whole(entries[i][1].shape), maps)
            return
        maps.check(path, f"{path}: tensor `{first.name}`")
        for i, buffer in zip(run, buffers):
            out[i] = buffer

    for i in order:
        path, entry = entries[i]
        if entry.code in _PACKED:
            out[i] = read_entry(path, entry, whole(entry.shape), maps)  # refused there (P413)
            continue
        if run:
            last_path, last = entries[run[-1]]
            if last_path != path or last.end != entry.begin:
                read_run()
                run = []
        run.append(i)
    if run:
        read_run()
    return out


def _read_all_into(fd: int, buffers: list, offset: int, where: str) -> None:
    """Fill `buffers` (arrays, in order) from the file's bytes at `offset` on, as few
    `preadv` calls as the system's limit on buffers per call allows."""
    views = [memoryview(b.reshape(-1).view("uint8")) for b in buffers if b.size]
    done = 0  # bytes of views[0] already read
    while views:
        n = os.preadv(fd, [views[0][done:], *views[1:_IOV_MAX]], offset)
        if n == 0:
            raise CheckpointError(f"{where}: the file ends before the tensors' data; it may "
                                  f"have changed since it was opened", code="P413")
        offset += n
        n += done
        while views and n >= len(views[0]):
            n -= len(views.pop(0))
        done = n


# Buffers per `preadv` (IOV_MAX: 1024 on Linux).
_IOV_MAX = min(1024, os.sysconf("SC_IOV_MAX")) if hasattr(os, "sysconf") else 16


def _contiguous_run(shape, index) -> int | None:
    """The first element of `index` when it selects one contiguous run of a C-order
    array of `shape` (every dimension after some j whole, every one before j of length
    1), else None.

    >>> _contiguous_run((4, 6), (slice(2, 4), slice(0, 6))), _contiguous_run((4, 6), (slice(0, 4), slice(0, 3)))
    (12, None)
    """
    j = len(shape) - 1
    while j >= 0 and index[j].start == 0 and index[j].stop == shape[j]:
        j -= 1
    if any(index[d].stop - index[d].start != 1 for d in range(j)):
        return None
    first, stride = 0, 1
    for d in range(len(shape) - 1, -1, -1):
        first += index[d].start * stride
        stride *= shape[d]
    return first


def _read_into(fd: int, out, offset: int, where: str) -> None:
    view = memoryview(out.reshape(-1).view("uint8"))
    done = 0
    while done < len(view):
        n = os.preadv(fd, [view[done:]], offset + done)
        if n == 0:
            raise CheckpointError(f"{where}: the file ends before the tensor's data; it may "
                                  f"have changed since it was opened", code="P413")
        done += n
