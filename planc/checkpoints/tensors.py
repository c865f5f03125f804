"""What every checkpoint reader shares: `Tensor`, `CheckpointError`, `Checkpoint` and
`open_checkpoint`, which picks the reader for a path.

A `Checkpoint` lists its tensors from headers alone (nothing of the data is read to
open one) and reads one slice of one tensor at a time with `read(name, index)`: the
loader asks for each device's shard, never for a whole tensor the layout splits.

=====================================  ==============================================
path                                   reader
=====================================  ==============================================
``x.safetensors``                      `planc.checkpoints.safetensors_file`
``x.safetensors.index.json`` (any      `planc.checkpoints.index_file` (shards beside
``.json`` with a ``weight_map``)       the index, never outside its directory)
``x.npz``                              `planc.checkpoints.npz_file`
``x.h5`` / ``x.weights.h5``            `planc.checkpoints.h5_file` (HDF5 datasets)
``x.weights.json`` (Keras's weights    `planc.checkpoints.h5_index` (parts beside the
saved in parts)                        index, never outside its directory)
a directory Orbax wrote                `planc.checkpoints.orbax_dir` (Orbax's own API)
a directory with ``model.safetensors.  that file, as `planc.sources` reads it
index.json`` or ``model.safetensors``
a Keras preset directory (with a       its ``model.weights.h5`` or ``model.weights.json``
``config.json``)                       (`planc.sources.preset`; none: P421)
=====================================  ==============================================

Every failure is a `CheckpointError`: one line naming the file (and tensor), with a
stable code, never quoting the file's bytes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from planc.diagnostics.input_error import InputError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Tensor", "CheckpointError", "Checkpoint", "open_checkpoint", "reader"]

# Files whose presence makes a directory Orbax's, itself or in an item directory.
_ORBAX_MARKERS = ("_CHECKPOINT_METADATA", "_METADATA")


@dataclass(frozen=True)
class Tensor:
    """One tensor of a checkpoint, as its header describes it.

    >>> Tensor("model.norm.weight", (4096,), "bfloat16", "model.safetensors").shape
    (4096,)
    """

    name: str                   # the checkpoint's own name
    shape: tuple[int, ...]
    dtype: str                  # numpy-style name, as planc.variables uses
    file: str                   # the file that holds it, for messages


_CODE = re.compile(r"^(P\d{3}) ")


def whole(shape) -> tuple[slice, ...]:
    """The index of every element of an array of `shape`.

    >>> whole((2, 3))
    (slice(0, 2, None), slice(0, 3, None))
    """
    return tuple(slice(0, n) for n in shape)


class CheckpointError(InputError):
    """A checkpoint cannot be opened or read (an `InputError`).

    The message is one line naming the file (and tensor) and saying why; it never
    quotes bytes of the file. `code` is the diagnostic code (P410 unless the raiser
    says otherwise; a message may also begin with its code, ``"P416 path: ..."``).
    `unreadable` is True when the path cannot be read at all (the CLI exits 2), else
    the file was read and found wrong (exit 1).

    >>> e = CheckpointError("P412 ckpt.json: shard 'a.safetensors' does not exist")
    >>> e.code, str(e)
    ('P412', "ckpt.json: shard 'a.safetensors' does not exist")
    """

    def __init__(self, message: str, *, code: str | None = None, unreadable: bool = False):
        found = _CODE.match(message)
        if found:
            message = message[found.end():]
        super().__init__(message)
        self.code = code or (found.group(1) if found else "P410")
        self.unreadable = unreadable

    @property
    def message(self) -> str:
        return str(self)

    def diagnostic(self):
        """This error as a `planc.diagnostics.Diagnostic` (no plan location), with a
        line of help for its code."""
        from planc.diagnostics import error

        fix = _HELP.get(self.code)
        if self.unreadable:
            fix = "check the path and its permissions"
        return error(self.code, str(self), None, help=(fix,) if fix else ())


_HELP = {
    "P410": "the file is damaged or not in the format its name says: download or save it "
            "again",
    "P411": "keep every tensor inside the checkpoint: shards beside the index, named "
            "relative to its directory; HDF5 datasets in the file itself",
    "P412": "download the missing shard, or correct the index's weight_map",
    "P413": "do not change the checkpoint while it loads; load it again once it is whole",
    "P429": "do not write, replace or touch the checkpoint while it loads; load it again "
            "once its writer has finished",
    "P430": "set PLANC_LOAD_STAGING to auto (the default: staged where the devices are not "
            "the CPU), always or never, or unset it",
}


class Checkpoint:
    """A checkpoint opened from its headers: `.path`, `.kind`, `.tensors`.

    Subclasses implement `read`. `bytes_read` counts the tensor bytes `read` has
    returned, so a test or benchmark can check that each process read only its shards.
    A checkpoint holds open files until `close()` (or the end of a ``with`` block).
    """

    kind: str = ""
    path: str = ""
    tensors: tuple[Tensor, ...] = ()
    bytes_read: int = 0
    # Whether `read_into` may run on several threads at once (the staged loader's
    # parallel reads): a reader with one file position (a zip member, an HDF5 dataset)
    # may not.
    concurrent_reads: bool = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.kind:
            _READERS.setdefault(cls.kind, cls)

    def read(self, name: str, index: tuple[slice, ...]) -> "np.ndarray":
        """`name[index]` as a new numpy array; only that slice is read from the file."""
        raise NotImplementedError

    def read_into(self, name: str, index: tuple[slice, ...], out) -> None:
        """`name[index]` written into `out` (an array of the slice's shape, cast to its
        dtype as numpy casts): the staged loader's read into its reused buffers. Readers
        that can read straight into `out` override it."""
        out[...] = self.read(name, index)

    def read_whole(self, names) -> list:
        """Each tensor of `names` whole, as `read` gives it. Readers whose tensors lie
        back to back in a file read a run of them at once."""
        return [self.read(n, whole(self.tensor(n).shape)) for n in names]

    def tensor(self, name: str) -> Tensor:
        """The `Tensor` called `name`; CheckpointError when there is none."""
        table = self.__dict__.get("_by_name")
        if table is None:
            table = {t.name: t for t in self.tensors}
            self.__dict__["_by_name"] = table
        try:
            return table[name]
        except KeyError:
            raise CheckpointError(f"{self.path}: no tensor `{name}` in this checkpoint",
                                  code="P413") from None

    def close(self) -> None:
        """Release open files (reading again reopens them)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path!r}: {len(self.tensors)} tensors>"


_READERS: dict[str, type] = {}


def reader(kind: str) -> type:
    """The `Checkpoint` subclass registered for `kind` ("safetensors", "orbax", ...).

    Every reader registers itself when its module is imported, and the package's
    ``__init__`` imports them all, so this module needs none of them: they import it.
    """
    return _READERS[kind]


# XLA:CPU adopts a host buffer aligned to this many bytes as a device buffer as it is;
# any other buffer it copies, which would double the memory a shard takes in flight.
ALIGN = 64


# From this size up a buffer is a private anonymous mapping of its own (see aligned_empty).
_MAPPED_FROM = 4 << 20


def aligned_empty(shape, dtype) -> "np.ndarray":
    """An uninitialised C-contiguous array whose data starts on an `ALIGN`-byte boundary.

    From 4 MiB up the array is a private anonymous mapping of its own (page-aligned), not
    numpy's memory: numpy asks for transparent huge pages on its allocations of that size
    (`MADV_HUGEPAGE`), and where the kernel compacts memory for those on the fault
    (`defrag` of `madvise`, its default) the first write of a fresh buffer waits for
    compaction whenever memory is fragmented. Filling 1 GiB of shards took 0.4-2.3 s of
    system time from one run to the next that way, against a steady 0.6-0.9 s in mappings
    that take the system's default page policy (bench/load_checkpoint.py; a load's
    buffers are filled once and handed to the devices, where huge pages buy nothing).

    >>> aligned_empty((3, 5), "float32").ctypes.data % ALIGN
    0
    >>> aligned_empty((1024, 1024, 2), "float32").ctypes.data % ALIGN
    0
    """
    import numpy as np

    dtype = np.dtype(dtype)
    n = 1
    for d in shape:
        n *= int(d)
    nbytes = n * dtype.itemsize
    if nbytes >= _MAPPED_FROM:
        import mmap

        if hasattr(mmap, "MAP_PRIVATE"):  # POSIX; elsewhere numpy's memory, as below
            mapped = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            return np.frombuffer(mapped, dtype, count=n).reshape(tuple(shape))
    raw = np.empty(nbytes + ALIGN, np.uint8)
    start = -raw.ctypes.data % ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(tuple(shape))


# Threads reading one variable's shards: the copies are memory-bound, so a few are enough.
_MAX_READERS = 8


def readers() -> int:
    """Threads for this load: one per core this process may run on, up to `_MAX_READERS`.

    The count follows the cores, not how busy they are. The scheduler gives every
    runnable thread its share of a core, so beside other work a load with one thread
    got about one share and took longer than the `get_slice` loop, while two threads on
    a 2-core machine with a CPU hog per core took 0.5x its wall time
    (bench/load_checkpoint.py, the busy-machine rows). Extra threads cost little CPU:
    beside the hogs, 1, 2 and 8 threads on 2 cores each took 0.9-1.3 s CPU for 1 GiB,
    in interleaved fresh processes. (An earlier figure, 8 threads at 2.7x one thread's
    CPU, was taken while seven other jobs shared the machine and did not reproduce.)
    The count decides only how fast the load is, never what it loads.
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(_MAX_READERS, cores))


def index_bounds(shape, index) -> tuple[tuple[int, int], ...]:
    """A device's index (slices, None meaning "all"; as `addressable_devices_indices_map`
    gives it) as concrete (start, stop) bounds per dimension of `shape`.

    >>> index_bounds((4, 6), (slice(None), slice(2, 4)))
    ((0, 4), (2, 4))
    """
    index = tuple(index) + (slice(None),) * (len(shape) - len(tuple(index)))
    return tuple(s.indices(n)[:2] for s, n in zip(index, shape))


def checked_index(tensor: Tensor, index) -> tuple[slice, ...]:
    """`index` as one ``slice(start, stop)`` per dimension of `tensor`, bounds checked.

    `jax.make_array_from_callback` hands callbacks slices with None for "all"; readers
    want concrete bounds.

    >>> checked_index(Tensor("w", (4, 6), "float32", "f"), (slice(None), slice(2, 4)))
    (slice(0, 4, None), slice(2, 4, None))
    """
    index = tuple(index)
    if len(index) > len(tensor.shape):
        raise CheckpointError(f"{tensor.file}: tensor `{tensor.name}` has rank "
                              f"{len(tensor.shape)}, but {len(index)} dimensions were "
                              f"asked for", code="P413")
    out = []
    for axis, n in enumerate(tensor.shape):
        part = index[axis] if axis < len(index) else slice(None)
        if not isinstance(part, slice):
            raise CheckpointError(f"{tensor.file}: tensor `{tensor.name}`: dimension "
                                  f"{axis} must be read with a slice", code="P413")
        start, stop, step = part.indices(n)
        if step != 1:
            raise CheckpointError(f"{tensor.file}: tensor `{tensor.name}`: strided reads "
                                  f"are not supported", code="P413")
        out.append(slice(start, max(start, stop)))
    return tuple(out)


def from_source_error(exc: Exception) -> CheckpointError:
    """A `planc.sources` header error as the CheckpointError the loaders raise."""
    from planc.sources.headers import MissingShard, ShardOutsideIndex, UnreadableSource

    if isinstance(exc, ShardOutsideIndex):
        return CheckpointError(str(exc), code="P411")
    if isinstance(exc, MissingShard):
        return CheckpointError(str(exc), code="P412")
    if getattr(exc, "code", None):  # a preset's own refusals (P420-P422)
        return CheckpointError(str(exc), code=exc.code)
    return CheckpointError(str(exc), unreadable=isinstance(exc, UnreadableSource))


def open_checkpoint(path) -> Checkpoint:
    """Open the checkpoint at `path` from its headers; see the module docstring.

    >>> open_checkpoint("no/such/model.safetensors")
    Traceback (most recent call last):
    ...
    planc.checkpoints.tensors.CheckpointError: no/such/model.safetensors: cannot read: no such file or directory
    """
    if isinstance(path, Checkpoint):
        return path
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"a checkpoint is a path, not {type(path).__name__}")
    path = os.fspath(path)
    if os.path.isdir(path):
        return _open_directory(path)
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: cannot read: no such file or directory",
                              unreadable=True)
    lower = path.lower()
    for suffixes, kind in _BY_SUFFIX:
        if lower.endswith(suffixes):
            return reader(kind)(path)
    ext = os.path.splitext(path)[1] or "(no extension)"
    raise CheckpointError(f"{path}: unsupported checkpoint type {ext}; planc loads "
                          f".safetensors, .safetensors.index.json, .npz, Keras .weights.h5 "
                          f"and Orbax checkpoint directories")


_BY_SUFFIX = ((".safetensors", "safetensors"), (".weights.json", "h5_index"),
              (".json", "index"), (".npz", "npz"), ((".h5", ".hdf5"), "h5"))


def _open_directory(path: str) -> Checkpoint:
    from planc.sources.preset import PresetError, is_preset, preset_weights

    if not _has_orbax_marker(path) and is_preset(path):
        try:
            return open_checkpoint(preset_weights(path))
        except PresetError as e:
            raise CheckpointError(str(e), code=e.code) from None
    if not _has_orbax_marker(path):
        for name in ("model.safetensors.index.json", "model.safetensors"):
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return open_checkpoint(candidate)
    # Anything else is taken for Orbax's: its reader says what is missing (P415).
    return reader("orbax")(path)


def _has_orbax_marker(path: str) -> bool:
    """An Orbax marker file in `path` or in one of its item directories (`state/`)."""
    try:
        places = [path] + [os.path.join(path, n) for n in sorted(os.listdir(path))]
    except OSError:
        return False
    return any(os.path.isfile(os.path.join(p, m)) for p in places for m in _ORBAX_MARKERS)
