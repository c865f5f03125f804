"""Resharding a checkpoint into a plan's layout, a few tensors at a time (`planc reshard`).

Every tensor is bound to its variable and every variable resolved to its sharding before
a byte of data is read (the caller does that: `bind_checkpoint`, then `shardings`). Then
`parts` builds the arrays in checkpoint order, each device's shard read straight from the
source (`Checkpoint.read` for safetensors and index files, Orbax's own restore for Orbax
directories), and hands them over in parts of at most `PART_BYTES` device bytes (a
larger tensor is a part alone); `orbax_save_restore.save_parts` writes each part as an
Orbax partial save and frees it before the next is read. Peak memory is therefore a small
multiple of one part (or of the largest tensor's device bytes, replicas included), not
the model.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from planc.progress import with_progress
from planc.checkpoints.sharded.load import build_array
from planc.variables import itemsize

__all__ = ["PART_BYTES", "device_bytes", "parts"]

# Device bytes per Orbax partial save. While Orbax writes a part, the host holds the
# part's arrays and Orbax's own copies of them (about 2.4x the part, measured on a 512 MiB
# checkpoint); each partial save also costs a commit, and finalize merges one directory
# per save. 64 MiB parts were as fast as 256 MiB ones there and peaked 480 MiB lower.
PART_BYTES = 64 * 2**20


def device_bytes(shape, dtype: str, sharding) -> int:
    """The bytes `sharding` places on all its devices together for one array."""
    shard = math.prod(sharding.shard_shape(tuple(shape)))
    return int(shard * itemsize(dtype)) * len(sharding.device_set)


def _build(ir, checkpoint, batch) -> dict:
    if getattr(checkpoint, "kind", None) == "orbax":
        from planc.checkpoints.sharded.orbax_save_restore import restore

        return restore(ir, checkpoint, [s for s, _ in batch], [h for _, h in batch])
    arrays = {}
    for source, sharding in batch:
        arrays[source.variable.path] = build_array(checkpoint, source, sharding)
        checkpoint.close()  # drop the memory map of the pages just read
    return arrays


def parts(ir, checkpoint, sources, shardings, *, budget: int | None = None,
          progress: bool = False) -> Iterator[dict]:
    """`{variable path: jax.Array}` parts of at most `budget` device bytes (default
    `PART_BYTES`; one tensor
    may exceed it alone), read from `checkpoint` into `shardings` (by variable path).

    Orbax sources are restored a part at a time, so each part is one Orbax restore;
    others are read a tensor at a time. `progress` draws a bar on a terminal.
    """
    budget = PART_BYTES if budget is None else budget
    batch, size = [], 0
    for source in with_progress(list(sources), progress, "resharding", step=1):
        sharding = shardings[source.variable.path]
        nbytes = device_bytes(source.variable.shape, source.variable.dtype, sharding)
        if batch and size + nbytes > budget:
            yield _build(ir, checkpoint, batch)
            batch, size = [], 0
        batch.append((source, sharding))
        size += nbytes
    if batch:
        yield _build(ir, checkpoint, batch)
