"""Keras weights saved in parts: a ``*.weights.json`` and the ``.weights.h5`` files it names.

Keras's ``save_weights(path, max_shard_size=...)`` (and keras-hub's ``save_to_preset``
for a large model) writes ``model.weights.json``, whose ``weight_map`` gives each
saveable's group (``/layers/dense/vars``) the file or files holding its datasets, and
the files ``model_00000.weights.h5``, ... beside it. Every dataset keeps the name it has
in a single ``.weights.h5``, so the model pairs with the parts as with one file.

Files are confined as a safetensors index's shards are (`planc.sources.headers.
shard_inside`): a name outside the index's directory is refused (P411) before anything
is opened, one that does not exist is P412. Each file is read by `H5Checkpoint`, with
every refusal it makes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from planc.checkpoints.h5_file import H5Checkpoint
from planc.checkpoints.tensors import Checkpoint, CheckpointError, from_source_error
from planc.sources.model import SourceError
from planc.sources.headers import read_json_file, shard_inside, shown

if TYPE_CHECKING:
    import numpy as np

__all__ = ["H5IndexCheckpoint"]


class H5IndexCheckpoint(Checkpoint):
    """Keras's sharded weights, opened from the index and every part's metadata.

    >>> import h5py, json, numpy as np, tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> with h5py.File(os.path.join(d, "model_00000.weights.h5"), "w") as f:
    ...     _ = f.create_dataset("layers/dense/vars/0", data=np.ones((2, 3)))
    >>> with open(os.path.join(d, "model.weights.json"), "w") as f:
    ...     json.dump({"weight_map": {"/layers/dense/vars": "model_00000.weights.h5"}}, f)
    >>> with H5IndexCheckpoint(os.path.join(d, "model.weights.json")) as ckpt:
    ...     [t.name for t in ckpt.tensors]
    ['layers/dense/vars/0']
    """

    kind = "h5_index"

    def __init__(self, path):
        self.path = os.fspath(path)
        self._parts: list[H5Checkpoint] = []
        try:
            for file in self._files():
                self._parts.append(H5Checkpoint(file))
        except SourceError as e:
            self.close()
            raise from_source_error(e) from None
        except CheckpointError:
            self.close()
            raise
        self._where: dict[str, H5Checkpoint] = {}
        tensors = []
        for part in self._parts:
            for t in part.tensors:
                if t.name in self._where:
                    self.close()
                    raise CheckpointError(f"{self.path}: dataset `{shown(t.name)}` is in "
                                          f"both {self._where[t.name].path} and {part.path}")
                self._where[t.name] = part
                tensors.append(t)
        self.tensors = tuple(tensors)

    def _files(self) -> list[str]:
        """The parts the index names, each once, in the order it first names them."""
        data = read_json_file(self.path)
        weight_map = data.get("weight_map") if isinstance(data, dict) else None
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{self.path}: not a Keras weights index: no "
                                  f"'weight_map' object")
        base = os.path.dirname(os.path.abspath(self.path))
        files: dict[str, str] = {}
        for group, names in weight_map.items():
            names = names if isinstance(names, list) else [names]
            for name in names:
                if not isinstance(name, str) or not name:
                    raise CheckpointError(f"{self.path}: weight_map gives `{shown(group)}` "
                                          f"a part that is not a file name")
                if name not in files:
                    files[name] = shard_inside(base, name, group, self.path)
        return list(files.values())

    @property
    def bytes_read(self) -> int:
        return sum(p.bytes_read for p in self._parts)

    def read(self, name: str, index: tuple[slice, ...]) -> np.ndarray:
        self.tensor(name)  # P413 for a name this checkpoint does not hold
        return self._where[name].read(name, index)

    def close(self) -> None:
        for part in self._parts:
            part.close()
