"""``.npz`` archives (a zip of ``.npy`` files), one member at a time.

``np.savez`` stores members uncompressed: such a member's bytes lie at a known offset
of the archive, so a slice is read through a memory map of that member alone, as
``np.load(mmap_mode="r")`` reads a ``.npy``. A compressed member (``np.savez_compressed``)
cannot be sliced without inflating it, so it is read whole, once, when its first slice
is asked for, and dropped at `close()` (the loader closes after each variable): memory
then holds one tensor beyond the shards, never the archive.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
import zipfile

from planc.checkpoints.tensors import (
    Checkpoint, CheckpointError, Tensor, aligned_empty, checked_index, from_source_error,
)
from planc.sources.model import SourceError, one_line
from planc.sources.headers import NpzMember, read_npz_members

if TYPE_CHECKING:
    import numpy as np

__all__ = ["NpzCheckpoint"]


class NpzCheckpoint(Checkpoint):
    """An ``.npz`` archive; tensor names are member names without ``.npy``.

    >>> import numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.npz")
    >>> np.savez(path, w=np.arange(6, dtype=np.float32).reshape(2, 3))
    >>> with NpzCheckpoint(path) as ckpt:
    ...     ckpt.read("w", (slice(1, 2), slice(0, 2))).tolist()
    [[3.0, 4.0]]
    """

    kind = "npz"

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            members = read_npz_members(self.path)
        except SourceError as e:
            raise from_source_error(e) from None
        self.members = {m.name: m for m in members}
        self.tensors = tuple(Tensor(m.name, m.variable.shape, m.variable.dtype, self.path)
                             for m in members)
        self.bytes_read = 0
        self._whole: tuple[str, np.ndarray] | None = None

    def read(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
        import numpy as np

        tensor = self.tensor(name)
        index = checked_index(tensor, index)
        member = self.members[name]
        try:
            if member.data_offset is not None:
                out = self._read_stored(member, index)
            else:
                out = self._read_whole(member)[index].astype(_dtype(member.variable.dtype))
        except CheckpointError:
            raise
        except OSError as e:
            raise CheckpointError(f"{self.path}: tensor `{name}`: cannot read: "
                                  f"{e.strerror or one_line(e)}", code="P413",
                                  unreadable=True) from None
        except Exception as e:  # zlib, CRC or format errors in a file that changed
            raise CheckpointError(f"{self.path}: tensor `{name}`: cannot read: "
                                  f"{one_line(e)}", code="P413") from None
        # `np.require`, not `np.ascontiguousarray`: that one makes a scalar (an optimizer's
        # step count) an array of shape (1,).
        out = np.require(out, requirements="C")
        self.bytes_read += out.nbytes
        return out

    def _read_stored(self, member: NpzMember, index) -> np.ndarray:
        import numpy as np

        var = member.variable
        dtype = _dtype(var.dtype)
        if var.nbytes == 0:
            return np.zeros(tuple(s.stop - s.start for s in index), dtype)
        mapped = np.memmap(self.path, dtype=np.dtype(member.descr), mode="r",
                           offset=member.data_offset, shape=var.shape,
                           order="F" if member.fortran_order else "C")
        try:
            # One copy, into the buffer XLA:CPU adopts; a ">f4" member becomes native.
            part = mapped[index]
            out = aligned_empty(part.shape, dtype)
            out[...] = part
            return out
        finally:
            del mapped

    def _read_whole(self, member: NpzMember) -> np.ndarray:
        import numpy as np

        if self._whole is None or self._whole[0] != member.name:
            self._whole = None
            with zipfile.ZipFile(self.path) as archive, archive.open(member.member) as f:
                self._whole = (member.name, np.lib.format.read_array(f, allow_pickle=False))
        return self._whole[1]

    def close(self) -> None:
        self._whole = None


def _dtype(name: str) -> np.dtype:
    import numpy as np

    import ml_dtypes  # noqa: F401  (registers bfloat16 and float8 names with numpy)

    return np.dtype(name)
