"""Sharded Hugging Face checkpoints: a ``*.safetensors.index.json`` and its shards.

Shards are named in ``weight_map`` relative to the index's own directory and must stay
inside it: an absolute name, a ``..`` or a symbolic link leading out is refused (P411)
before anything is opened, and a shard that does not exist is P412. Every shard's
header is checked as a single file's is; tensors a shard holds but the index does not
name are ignored, as the loaders that read these indexes ignore them.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from planc.checkpoints.safetensors_file import (TensorMap, ThreadMaps, fill_entry, identity,
                                                read_entries, read_entry)
from planc.checkpoints.tensors import (
    Checkpoint, CheckpointError, Tensor, checked_index, from_source_error,
)
from planc.sources.model import SourceError
from planc.sources.headers import index_entries, read_json_file

if TYPE_CHECKING:
    import numpy as np

__all__ = ["IndexCheckpoint"]


class IndexCheckpoint(Checkpoint):
    """A sharded safetensors checkpoint, read through its index.

    >>> import json, numpy as np, safetensors.numpy, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> safetensors.numpy.save_file({"a": np.ones(2, np.float32)}, os.path.join(d, "s1.safetensors"))
    >>> with open(os.path.join(d, "m.safetensors.index.json"), "w") as f:
    ...     json.dump({"weight_map": {"a": "s1.safetensors"}}, f)
    >>> [t.name for t in IndexCheckpoint(os.path.join(d, "m.safetensors.index.json")).tensors]
    ['a']
    """

    kind = "index"
    concurrent_reads = True

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            data = read_json_file(self.path)
            if not isinstance(data, dict) or "weight_map" not in data:
                raise CheckpointError(f"{self.path}: not a safetensors index: no "
                                      f"'weight_map' object")
            pairs = index_entries(data, os.path.dirname(os.path.abspath(self.path)),
                                  self.path)
        except SourceError as e:
            raise from_source_error(e) from None
        self._where = {e.name: (shard, e) for shard, e in pairs}
        self.tensors = tuple(Tensor(e.name, e.shape, e.dtype, shard) for shard, e in pairs)
        self.bytes_read = 0
        # Each shard as its header was read (just read: a change from here on is seen).
        self._maps = TensorMap({shard: identity(shard) for shard in
                                dict.fromkeys(shard for shard, _ in pairs)})
        self._thread_maps = ThreadMaps(self._maps.opened)

    def read(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
        tensor = self.tensor(name)
        index = checked_index(tensor, index)
        shard, entry = self._where[name]
        out = read_entry(shard, entry, index, self._maps)
        self.bytes_read += out.nbytes
        return out

    def read_into(self, name: str, index: tuple[slice, ...], out) -> None:
        index = checked_index(self.tensor(name), index)
        shard, entry = self._where[name]
        fill_entry(shard, entry, index, self._thread_maps.here(), out)
        self.bytes_read += out.nbytes

    def read_whole(self, names) -> list:
        for n in names:
            self.tensor(n)  # an unknown name raises CheckpointError
        found = read_entries([self._where[n] for n in names], self._maps)
        self.bytes_read += sum(a.nbytes for a in found)
        return found

    def close(self) -> None:
        self._maps.clear()
        self._thread_maps.clear()
