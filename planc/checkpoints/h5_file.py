"""HDF5 files (Keras ``.weights.h5``), read by h5py dataset slicing.

A tensor is a dataset; its name is the dataset's path in the file without the leading
"/" (``layers/dense/vars/0``), in the order h5py visits them. A slice is read with
``dataset.read_direct(out, source_sel=index)``: HDF5 reads that hyperslab alone (for
chunked datasets, the chunks it touches) straight into an aligned buffer.
Keras stores bfloat16 as raw 2-byte values with a ``dtype="bfloat16"`` attribute; such
datasets are read as bfloat16.
A tensor's values must lie in the file itself, as an index's shards must lie beside it
(P411): an external link, a virtual dataset mapped from another file and a dataset with
external storage (raw bytes of any file of the host) are refused when the file is
opened, from the file's metadata, before anything outside it is opened. How a Keras
model's variables map onto these names is Keras's own traversal
(`planc.sources.keras_weights`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from planc.checkpoints.tensors import (
    Checkpoint, CheckpointError, Tensor, aligned_empty, checked_index,
)
from planc.sources.model import array_problem, normalize_dtype, one_line
from planc.sources.headers import shown

if TYPE_CHECKING:
    import numpy as np

__all__ = ["H5Checkpoint"]


class H5Checkpoint(Checkpoint):
    """An HDF5 file of datasets, opened from its metadata (no dataset is read).

    >>> import h5py, numpy as np, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "m.weights.h5")
    >>> with h5py.File(path, "w") as f:
    ...     _ = f.create_dataset("layers/dense/vars/0", data=np.arange(6.0).reshape(2, 3))
    >>> with H5Checkpoint(path) as ckpt:
    ...     [t.name for t in ckpt.tensors], ckpt.read("layers/dense/vars/0", (slice(0, 1),)).tolist()
    (['layers/dense/vars/0'], [[0.0, 1.0, 2.0]])
    """

    kind = "h5"

    def __init__(self, path):
        self.path = os.fspath(path)
        self.bytes_read = 0
        self._file = None
        found: list[Tensor] = []
        self._raw: dict[str, bool] = {}
        f = self._open()
        try:
            import h5py

            def visit(name, obj):
                if isinstance(obj, h5py.Dataset):
                    self._inside(name, obj)
                    found.append(self._tensor(name, obj))
                else:
                    self._links_inside(name, obj)

            self._links_inside("", f)
            f.visititems(visit)
        except CheckpointError:
            self.close()
            raise
        except Exception as e:  # a damaged object table
            self.close()
            raise CheckpointError(f"{self.path}: damaged HDF5 file: {one_line(e)}") from None
        self.tensors = tuple(found)

    def _open(self):
        if self._file is None:
            try:
                import h5py
            except ImportError:
                raise CheckpointError(f"{self.path}: reading .h5 checkpoints needs h5py "
                                      f"(pip install h5py)", unreadable=True) from None
            try:
                self._file = h5py.File(self.path, "r")
            except PermissionError as e:
                why = e.strerror or "permission denied"
                raise CheckpointError(f"{self.path}: cannot read: {why}",
                                      unreadable=True) from None
            except (OSError, ValueError):
                # h5py's message quotes library internals, never the file; ours says
                # what the user can act on.
                raise CheckpointError(f"{self.path}: not an HDF5 file, or a truncated "
                                      f"or damaged one") from None
        return self._file

    def _links_inside(self, name: str, group) -> None:
        """Refuse a link of `group` to another file (an external or user-defined link).

        `visititems` follows hard links only, so such a link's tensor would otherwise be
        left out without a word.
        """
        import h5py

        for link in group.keys():
            kind = group.id.links.get_info(link.encode()).type
            if kind in (h5py.h5l.TYPE_HARD, h5py.h5l.TYPE_SOFT):
                continue
            path = f"{name}/{link}" if name else link
            target = group.get(link, getlink=True)
            where = (f" to '{shown(target.filename)}'" if isinstance(target, h5py.ExternalLink)
                     else "")
            raise CheckpointError(f"{self.path}: `{shown(path)}` is a link{where} outside "
                                  f"this file; a checkpoint's tensors must lie inside it, "
                                  f"and planc does not follow it", code="P411")

    def _inside(self, name: str, ds) -> None:
        """Refuse a dataset whose values lie in another file, from its creation properties
        alone: virtual datasets mapped from other files, external storage (any file of
        the host, read as raw bytes)."""
        where = f"{self.path}: dataset `{shown(name)}`"
        external = ds.external
        if external:
            raise CheckpointError(f"{where} keeps its values in another file "
                                  f"('{shown(os.fsdecode(external[0][0]))}', external "
                                  f"storage); a checkpoint's tensors must lie inside it, and "
                                  f"planc does not read it", code="P411")
        if ds.is_virtual:
            others = sorted({os.fsdecode(v.file_name) for v in ds.virtual_sources()} - {"."})
            if others:
                raise CheckpointError(f"{where} is a virtual dataset mapped from another "
                                      f"file ('{shown(others[0])}'); a checkpoint's tensors "
                                      f"must lie inside it, and planc does not read it",
                                      code="P411")

    def _tensor(self, name: str, ds) -> Tensor:
        where = f"{self.path}: dataset `{shown(name)}`"
        raw_bf16 = ds.attrs.get("dtype") == "bfloat16" if "dtype" in ds.attrs else False
        if raw_bf16:
            if ds.dtype.itemsize != 2:
                raise CheckpointError(f"{where} says bfloat16 but holds {ds.dtype.itemsize}"
                                      f"-byte values")
            dtype = "bfloat16"
        else:
            try:
                dtype = normalize_dtype(ds.dtype)
            except ValueError:
                raise CheckpointError(f"{where} holds {ds.dtype.kind!r}-kind values, not "
                                      f"numbers; it is not a tensor") from None
            if ds.dtype.kind not in "biufc":
                raise CheckpointError(f"{where} holds {ds.dtype.kind!r}-kind values, not "
                                      f"numbers; it is not a tensor")
        self._raw[name] = raw_bf16
        shape = tuple(int(d) for d in ds.shape) if ds.shape is not None else ()
        problem = array_problem(shape, dtype)
        if problem:
            raise CheckpointError(f"{where}: {problem}")
        return Tensor(name, shape, dtype, self.path)

    def read(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
        import numpy as np

        tensor = self.tensor(name)
        index = checked_index(tensor, index)
        try:
            ds = self._open()[name]
            want = tuple(s.stop - s.start for s in index)
            if any(n == 0 for n in want):
                out = np.zeros(want, ds.dtype)
            elif not index:
                out = np.asarray(ds[()])
            else:
                # Straight into the aligned buffer the loader hands to XLA: one copy.
                out = aligned_empty(want, ds.dtype)
                ds.read_direct(out, source_sel=index)
        except CheckpointError:
            raise
        except Exception as e:  # HDF5 read errors: a truncated or changed file
            raise CheckpointError(f"{self.path}: dataset `{shown(name)}`: cannot read: "
                                  f"{one_line(e)}", code="P413") from None
        if self._raw[name]:
            import ml_dtypes

            out = out.view(ml_dtypes.bfloat16)
        self.bytes_read += out.nbytes
        return out

    def close(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                f.close()
            except Exception:
                pass
