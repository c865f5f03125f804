"""Orbax checkpoints of Orbax's default layout restored by tensorstore, each shard read
straight into a buffer its device adopts: the tuned path of `orbax_save_restore.restore`.

Orbax's restore reads each shard into tensorstore's memory and hands that to the device.
For a 1 GiB checkpoint on 8 CPU devices that took 1.5-1.6x the placed bytes in anonymous
memory, and still 1.10x with planc bounding its reads to 16 MiB at once: the rest was heap
that tensorstore's threads had freed and glibc kept (bench 7). Here tensorstore copies
each shard into a buffer planc allocated for it (`aligned_empty`, which XLA:CPU adopts as
it is, and which the accelerators copy from), with at most `_READ_BYTES_PER_CORE` bytes
of chunks a core read at once: 1.04x the placed bytes, in 0.6x the CPU of Orbax's restore.

Each array is opened as Orbax opens it to restore (`ArrayReadSpec` in Orbax's
`tensorstore_utils`): the zarr driver over the checkpoint's OCDBT database, a `cast` to
the dtype wanted, and a missing chunk an error unless the checkpoint's writer skipped the
chunks equal to the fill value. Only checkpoints whose metadata `orbax_headers` read come
here (`OrbaxCheckpoint.store`); Orbax restores every other. tests/checkpoints/
test_orbax_tensorstore.py checks that the two restores build the same arrays.
"""

from __future__ import annotations

import math
from collections import deque

from planc.checkpoints.orbax_dir import first_line
from planc.checkpoints.tensors import CheckpointError, aligned_empty, readers
from planc.sources.headers import shown

__all__ = ["restore"]

# The chunk bytes read at once, per core the load may use (`readers`). tensorstore holds a
# read's chunks (as read from the file, and decoded) until they are copied into the buffer,
# so this bounds what the load holds above the arrays. For 1 GiB in 4 MiB shards on 2 cores
# (fresh processes, 2026-12-07): 8 MiB at once took 1.03-1.04x the placed bytes and 1.2 s
# of wall time; 16 MiB 1.045-1.05x and 1.1 s; 4 MiB, one read at a time, 1.02-1.04x and 2 s.
_READ_BYTES_PER_CORE = 4 << 20


def restore(checkpoint, abstract: dict) -> dict:
    """`{name: jax.Array}` of each tensor `abstract` names, each into its leaf's dtype and
    sharding (`jax.ShapeDtypeStruct`), from `checkpoint` (an `OrbaxCheckpoint` whose
    `.store` is set). Each distinct shard of this process's devices is read once, and
    copied to the other devices that hold it. A failed read raises CheckpointError P416
    naming the tensor.
    """
    import jax
    import numpy as np
    import tensorstore as ts

    names = list(abstract)
    context = ts.Context({"cache_pool#ocdbt": {"total_bytes_limit": 100_000_000}})
    opening = []
    for name in names:
        spec = _spec(checkpoint.store, name, checkpoint.tensor(name).dtype,
                     abstract[name].dtype)  # an unknown name raises CheckpointError
        try:
            opening.append(ts.open(spec, read=True, context=context))
        except Exception as exc:  # a dtype tensorstore does not know
            raise _damaged(checkpoint, name, "opened", exc) from None
    window = _READ_BYTES_PER_CORE * readers()
    in_flight: deque = deque()  # (name, write future, buffer, buffers to copy it to, bytes)
    reading = 0
    unread: dict[str, int] = {}  # name -> its shards in flight
    shards_of: dict[str, dict] = {}
    arrays = {}

    def place(name):
        # On an accelerator the host buffers go as soon as their tensor is on the devices.
        leaf, shards = abstract[name], shards_of.pop(name)
        placed = [(device, buf) for held_by in shards.values() for device, buf in held_by]
        singles = jax.device_put([buf for _, buf in placed], [d for d, _ in placed])
        arrays[name] = jax.make_array_from_single_device_arrays(leaf.shape, leaf.sharding,
                                                                singles)

    def finish():
        nonlocal reading
        name, future, buf, copies, size = in_flight.popleft()
        try:
            future.result()
        except Exception as exc:  # tensorstore raises ValueError and others
            raise _damaged(checkpoint, name, "read", exc) from None
        for other in copies:
            np.copyto(other, buf)
        reading -= size
        unread[name] -= 1
        if not unread[name]:
            place(name)

    for name, opened in zip(names, opening):
        leaf = abstract[name]
        try:
            array = opened.result()
        except Exception as exc:
            raise _damaged(checkpoint, name, "opened", exc) from None
        want = np.dtype(leaf.dtype)
        chunks = checkpoint.chunk_shapes.get(name) or leaf.shape
        itemsize = np.dtype(checkpoint.tensor(name).dtype).itemsize
        shards: dict[tuple, list] = {}  # distinct bounds -> [(device, buffer)]
        for device, index in leaf.sharding.addressable_devices_indices_map(leaf.shape).items():
            bounds = tuple(s.indices(n)[:2] for s, n in zip(index, leaf.shape))
            shape = tuple(stop - start for start, stop in bounds)
            shards.setdefault(bounds, []).append((device, aligned_empty(shape, want)))
        shards_of[name] = shards
        unread[name] = 1  # until every shard is asked for
        for bounds, held_by in shards.items():
            buf = held_by[0][1]
            checkpoint.bytes_read += buf.nbytes
            if buf.size == 0:
                continue
            size = itemsize * math.prod(
                -(-stop // c) * c - start // c * c for (start, stop), c in zip(bounds, chunks))
            while in_flight and reading + size > window:
                finish()
            region = array[tuple(slice(a, b) for a, b in bounds)].translate_to[0]
            future = ts.array(buf, copy=False, write=True, context=context).write(region)
            in_flight.append((name, future, buf, [b for _, b in held_by[1:]], size))
            reading += size
            unread[name] += 1
        unread[name] -= 1
        if not unread[name]:
            place(name)
    while in_flight:
        finish()
    return arrays


def _damaged(checkpoint, name: str, what: str, exc: Exception) -> CheckpointError:
    return CheckpointError(f"{checkpoint.path}: tensor `{shown(name)}` cannot be {what} "
                           f"({first_line(exc)})", code="P416")


def _spec(store, name: str, stored: str, want) -> dict:
    """The tensorstore spec Orbax opens the array `name` with to restore it as `want`."""
    import numpy as np

    spec = {"driver": "zarr3" if store.zarr3 else "zarr",
            "kvstore": {"driver": "ocdbt", "base": {"driver": "file", "path": store.item},
                        "path": store.arrays[name], "cache_pool": "cache_pool#ocdbt"},
            "recheck_cached_data": False, "recheck_cached_metadata": False,
            "fill_missing_data_reads": store.fill_missing}
    want = np.dtype(want).name
    return spec if want == stored else {"driver": "cast", "base": spec, "dtype": want}
