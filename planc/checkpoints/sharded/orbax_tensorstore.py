"""Orbax checkpoints of Orbax's default layout restored by tensorstore, each shard read
straight into a buffer its device adopts: the tuned path of `orbax_save_restore.restore`.

Orbax's restore reads each shard into tensorstore's memory and hands that to the device.
For a 1 GiB checkpoint on 8 CPU devices that took 1.5-1.6x the placed bytes in anonymous
memory, and still 1.10x with planc bounding its reads to 16 MiB at once: the rest was heap
that tensorstore's threads had freed and glibc kept (bench 7). Here tensorstore copies
each shard into a buffer planc allocated for it (`aligned_empty`, which XLA:CPU adopts as
it is, and which the accelerators copy from), with at most `_READ_BYTES_PER_CORE` bytes
of chunks a core read at once: 1.04x the placed bytes, in 0.6x the CPU of Orbax's restore.

That is the path onto CPU devices. Onto an accelerator the shards are not adopted but
copied, so fresh buffers only cost page faults: there tensorstore copies each piece into
one of the staging loader's reused buffers instead (`_staged`, `staging.place`).

Each array is opened as Orbax opens it to restore (`ArrayReadSpec` in Orbax's
`tensorstore_utils`): the zarr driver over the checkpoint's OCDBT database, a `cast` to
the dtype wanted, and a missing chunk an error unless the checkpoint's writer skipped the
chunks equal to the fill value. Only checkpoints whose metadata `orbax_headers` read come
here (`OrbaxCheckpoint.store`); Orbax restores every other. tests/checkpoints/
test_orbax_tensorstore.py checks that the two restores build the same arrays.
"""

from __future__ import annotations

import math
import threading
from collections import deque

from planc.checkpoints.orbax_dir import first_line
from planc.checkpoints.sharded import staging
from planc.checkpoints.tensors import CheckpointError, aligned_empty, index_bounds, readers
from planc.sources.headers import shown

__all__ = ["restore", "chunk_read_bytes", "chunks_ahead", "CHUNKS_AHEAD"]

# The chunk bytes read at once, per core the load may use (`readers`). tensorstore holds a
# read's chunks (as read from the file, and decoded) until they are copied into the buffer,
# so this bounds what the load holds above the arrays. For 1 GiB in 4 MiB shards on 2 cores
# (fresh processes, 2026-12-07): 8 MiB at once took 1.03-1.04x the placed bytes and 1.2 s
# of wall time; 16 MiB 1.045-1.05x and 1.1 s; 4 MiB, one read at a time, 1.02-1.04x and 2 s.
_READ_BYTES_PER_CORE = 4 << 20


# Orbax writes each array as one chunk of its whole shape, and a chunk larger than a
# staging buffer is read a piece after another: such chunks alone decode one at a time,
# a core each (0.84 s a 256 MiB chunk on the v5e's host, 2026-12-07; Orbax's own restore
# decodes them all at once, and held 4.0 GB more for a 2.7 GB checkpoint). One chunk
# decoding ahead of the one being read makes two at once; each more would hold another
# decoded chunk in the cache (two ahead: 1008 MiB of cache and buffers for benchmark
# 18's 4 GiB, the quarter it may add, before tensorstore's reads of compressed chunks).
CHUNKS_AHEAD = 1


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
    stored = {name: checkpoint.tensor(name).dtype for name in names}  # unknown: raises
    staged = staging.staging_wanted(leaf.sharding for leaf in abstract.values())
    pools = {"cache_pool#ocdbt": {"total_bytes_limit": 100_000_000}}
    if staged:
        # A chunk larger than a staging buffer is read in several pieces, in order:
        # decoded once into this cache, not once per piece. Sized to exactly one chunk,
        # tensorstore evicted the chunk it had just decoded (its entry is charged a little
        # more than the chunk's bytes), so every piece decoded it again: 1 GiB in four
        # 256 MiB chunks took 7.5 s staged against 2.5 s unstaged (CPU, 2026-12-07); with
        # a sixteenth more, 2.9 s. Orbax writes each array as one chunk of its shape;
        # the decoded chunks are counted in tests/checkpoints/test_staging.py.
        largest = max((math.prod(checkpoint.chunk_shapes.get(n) or abstract[n].shape)
                       * np.dtype(stored[n]).itemsize for n in names), default=0)
        ahead = 0
        if largest > staging.STAGING_BYTES:
            total = sum(math.prod(abstract[n].shape) * np.dtype(stored[n]).itemsize
                        for n in names)
            ahead = chunks_ahead(total, largest)
            pools["cache_pool"] = {"total_bytes_limit": (1 + ahead)
                                   * _chunk_cache_bytes(largest)}
    context = ts.Context(pools)
    opening = []
    for name in names:
        try:
            opening.append(ts.open(_spec(checkpoint.store, name, stored[name],
                                         abstract[name].dtype), read=True, context=context))
        except Exception as exc:  # a dtype tensorstore does not know
            raise _damaged(checkpoint, name, "opened", exc) from None
    if staged:
        return _staged(checkpoint, abstract, names, opening, context, ahead)
    window = _READ_BYTES_PER_CORE * readers()
    # (name, write future, buffer, buffers to copy it to, bytes, the tensor's last read)
    in_flight: deque = deque()
    reading = 0
    arrays = {}

    def place(name, shards):
        # On an accelerator the host buffers go as soon as their tensor is on the devices.
        leaf = abstract[name]
        placed = [(device, buf) for held_by in shards.values() for device, buf in held_by]
        singles = jax.device_put([buf for _, buf in placed], [d for d, _ in placed])
        arrays[name] = jax.make_array_from_single_device_arrays(leaf.shape, leaf.sharding,
                                                                singles)

    def finish():
        nonlocal reading
        name, future, buf, copies, size, shards = in_flight.popleft()
        try:
            future.result()
        except Exception as exc:  # tensorstore raises ValueError and others
            raise _damaged(checkpoint, name, "read", exc) from None
        for other in copies:
            np.copyto(other, buf)
        reading -= size
        if shards is not None:  # reads finish in order: the tensor is whole
            place(name, shards)

    for name, opened in zip(names, opening):
        leaf = abstract[name]
        try:
            array = opened.result()
        except Exception as exc:
            raise _damaged(checkpoint, name, "opened", exc) from None
        want = np.dtype(leaf.dtype)
        chunks = checkpoint.chunk_shapes.get(name) or leaf.shape
        itemsize = np.dtype(stored[name]).itemsize
        shards: dict[tuple, list] = {}  # distinct bounds -> [(device, buffer)]
        for device, index in leaf.sharding.addressable_devices_indices_map(leaf.shape).items():
            bounds = index_bounds(leaf.shape, index)
            shape = tuple(stop - start for start, stop in bounds)
            shards.setdefault(bounds, []).append((device, aligned_empty(shape, want)))
        checkpoint.bytes_read += sum(held_by[0][1].nbytes for held_by in shards.values())
        reads = [(bounds, held_by) for bounds, held_by in shards.items()
                 if held_by[0][1].size]
        if not reads:
            place(name, shards)
        for i, (bounds, held_by) in enumerate(reads):
            buf = held_by[0][1]
            size = chunk_read_bytes(bounds, chunks, itemsize)
            while in_flight and reading + size > window:
                finish()
            region = array[tuple(slice(a, b) for a, b in bounds)].translate_to[0]
            future = ts.array(buf, copy=False, write=True, context=context).write(region)
            in_flight.append((name, future, buf, [b for _, b in held_by[1:]], size,
                              shards if i == len(reads) - 1 else None))
            reading += size
    while in_flight:
        finish()
    return arrays


def _staged(checkpoint, abstract, names, opening, context, ahead: int) -> dict:
    """`restore` through the staging buffers (`staging.place`): tensorstore copies each
    piece of a shard into a reused buffer instead of a fresh one per shard, several
    pieces at once. Pieces are cut at the chunks' edges where a chunk fits a buffer; a
    larger chunk is decoded once into tensorstore's chunk cache (`restore` sizes it) and
    each piece copied out of it. A chunk larger than a buffer is read a piece after
    another, so such chunks alone would decode one at a time: as the first piece of a
    tensor is read, the first chunks of the `ahead` tensors after it start decoding into
    the cache."""
    import numpy as np
    import tensorstore as ts

    arrays: dict = {}
    decoding: dict = {}  # tensor index -> the future of its first chunk's decode
    lock = threading.Lock()

    def array_of(i):
        name = names[i]
        array = arrays.get(name)
        if array is None:  # two readers may both open it: the same array
            try:
                array = arrays[name] = opening[i].result()
            except Exception as exc:
                raise _damaged(checkpoint, name, "opened", exc) from None
        return array

    def decode_ahead(i):
        # One element of the chunk tensor i is read from first: tensorstore decodes that
        # whole chunk into the cache. A failure here is the real read's to report (P416).
        with lock:
            if i >= len(names) or i in decoding:
                return
            decoding[i] = None
        leaf = abstract[names[i]]
        first = next(iter(leaf.sharding.addressable_devices_indices_map(
            leaf.shape).values()), None)
        if first is None or 0 in leaf.shape:
            return
        try:
            at = tuple(a for a, _ in index_bounds(leaf.shape, first))
            # Kept until the load ends: a dropped tensorstore future cancels its read.
            decoding[i] = array_of(i)[at].read()
        except Exception:  # cannot be opened: its own read says so
            pass

    def reader(i):
        name = names[i]

        def read(box, out):
            array = array_of(i)
            for k in range(i + 1, i + 1 + ahead):
                decode_ahead(k)
            region = array[box].translate_to[0]
            try:
                ts.array(out, copy=False, write=True, context=context).write(region).result()
            except Exception as exc:  # tensorstore raises ValueError and others
                raise _damaged(checkpoint, name, "read", exc) from None
            checkpoint.bytes_read += out.nbytes
        return read

    requests = [staging.Request(name, abstract[name].shape, np.dtype(abstract[name].dtype),
                                abstract[name].sharding, reader(i),
                                align=checkpoint.chunk_shapes.get(name))
                for i, name in enumerate(names)]
    try:
        return staging.place(requests, concurrent=True)
    finally:
        decoding.clear()


def chunks_ahead(total: int, largest: int) -> int:
    """How many chunks of `largest` bytes (each larger than a staging buffer) decode
    ahead of the one being read, for a load of `total` bytes: as many as the chunk cache
    holds (`_chunk_cache_bytes` each) beside the one being read and the staging buffers
    within a quarter of the load, at most `CHUNKS_AHEAD`.

    >>> chunks_ahead(4 << 30, 256 << 20)  # benchmark 18's 4 GiB in 256 MiB chunks
    1
    >>> chunks_ahead(1 << 30, 256 << 20)  # a quarter of it holds no second chunk
    0
    """
    room = total // 4 - staging.STAGING_BUFFERS * staging.STAGING_BYTES
    return max(0, min(CHUNKS_AHEAD, room // _chunk_cache_bytes(largest) - 1))


def _chunk_cache_bytes(largest: int) -> int:
    """The chunk cache that keeps one decoded chunk of `largest` bytes while its pieces
    are copied out: the chunk, and a sixteenth (at least 1 MiB) for what tensorstore
    charges an entry beyond its bytes.

    >>> _chunk_cache_bytes(256 << 20) >> 20
    272
    """
    return largest + max(largest >> 4, 1 << 20)


def chunk_read_bytes(bounds, chunks, itemsize: int) -> int:
    """The bytes read for the region `bounds` ((start, stop) per dimension) of an array
    stored in chunks of shape `chunks`: every chunk it touches, whole.

    >>> chunk_read_bytes(((2, 6), (0, 4)), (4, 4), 4)  # two chunks of 4x4 float32
    128
    """
    size = itemsize
    for (start, stop), chunk in zip(bounds, chunks):
        size *= -(-stop // chunk) * chunk - start // chunk * chunk
    return size


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
