"""The staged loader: a checkpoint streamed onto an accelerator through a few reused host
buffers, several reads in flight while the pieces already read are moved to the device.

On a TPU v5e (benchmark 18, 2026-12-07) reading a checkpoint into fresh host arrays was
what cost: `safetensors.numpy.load_file` read a cached 4 GiB file at 0.83 GB/s, paid in
first-touch page faults of new memory, while `jax.device_put` of resident host arrays ran
at 6.1-9.3 GB/s and a reused 16 MiB buffer, read then put one after the other, already
reached 2.5 GB/s. The first staged loader (three 64 MiB buffers, one reader thread, each
transfer waited for) reached 2.36 GB/s for safetensors, 27% of that chip's 8.73 GB/s
floor, the reads waiting on one another. So here:

- every read lands in one of `STAGING_BUFFERS` buffers of `STAGING_BYTES`, allocated once
  per load and reused (their pages are faulted in once, not once per tensor): the load
  holds at most `STAGING_BUFFERS` x `STAGING_BYTES` (192 MiB) of host memory above what
  the readers hold themselves;
- up to `READS` buffers are filled at once (`place(concurrent=True)`, for readers that
  may be called from several threads: memory-mapped safetensors, tensorstore), on at
  most one thread per core; the pieces are moved to the devices in the order they were
  cut, whichever read ends first;
- a buffer is handed to `jax.device_put`, which returns before its copy is done: up to
  `TRANSFERS` copies are in flight, and a buffer is refilled only once the copy reading
  it is done (the load waits on that copy, not on every one);
- a shard larger than a buffer is read in pieces (`tiles`) and assembled on its device:
  each piece is written into the shard's device buffer by a jitted `dynamic_update_slice`
  that donates it, so the host never holds a whole shard; small tensors share a buffer
  and go to the devices in one `jax.device_put`;
- a transposed tensor is read as stored and transposed on the device.

The answers are the host path's: the same bytes read by the same readers
(`Checkpoint.read_into`), casts made by numpy on the host as that path makes them, and the
device only moves and transposes them (tests/checkpoints/test_staging.py compares every
shard). On the CPU the host path is already fast (its buffers are adopted as the devices'
memory, no copy at all), so it stays the default there; `PLANC_LOAD_STAGING` chooses:
``auto`` (staged where the devices are not the CPU), ``always`` or ``never``.

A load that fails or is interrupted (Ctrl-C) stops its readers (the reads in flight end
first), waits for the copies still reading its buffers, lets the buffers go and deletes
every array it had placed: nothing is left half-placed on the devices.
"""

from __future__ import annotations

import itertools
import os
import queue
import threading
import traceback
import weakref
from collections import deque
from collections.abc import Callable, Iterable

from planc.checkpoints.tensors import (ALIGN, CheckpointError, aligned_empty, index_bounds,
                                       readers)

__all__ = ["Request", "STAGING_BYTES", "STAGING_BUFFERS", "READS", "TRANSFERS", "ENV",
           "staging_wanted", "place", "tiles", "live_buffers"]

# Six buffers of 32 MiB (192 MiB of host memory, as the first loader's three of 64 MiB):
# up to `READS` being filled at once, up to `TRANSFERS` being moved to the devices, the
# rest read and waiting their turn. A read or a transfer of 32 MiB runs at the file's or
# the link's rate (16 MiB already reached 2.5 GB/s read-then-put with no overlap, on the
# v5e), and the six stay far below a quarter of any checkpoint worth staging.
STAGING_BYTES = 32 << 20
STAGING_BUFFERS = 6
# One reader thread reached 27% of the v5e's host-to-HBM rate (2.36 GB/s of 8.73, 4 GiB of
# safetensors, 2026-12-07): reads (preads and numpy copies out of the page cache, which
# release the GIL; tensorstore's futures) are what waited. At most this many at once, and
# no more than the cores (`readers`).
READS = 4
# `jax.device_put` returns before its copy is done: the next copy starts while the last
# one runs, and a buffer waits only for the transfer that reads it.
TRANSFERS = 2
ENV = "PLANC_LOAD_STAGING"
_MODES = ("auto", "always", "never")

_LIVE: list = []  # a weak reference to each staging buffer allocated


def live_buffers() -> int:
    """How many staging buffers are allocated now (0 once every load has ended, however
    it ended).

    >>> live_buffers()
    0
    """
    _LIVE[:] = [ref for ref in _LIVE if ref() is not None]
    return len(_LIVE)


def staging_wanted(shardings: Iterable) -> bool:
    """Whether a load into `shardings` goes through the staging buffers:
    `PLANC_LOAD_STAGING` ``always`` or ``never``, else (``auto``, or unset) where a
    sharding's devices are not the CPU. Another value is refused (P430).

    >>> class Cpu: platform = "cpu"
    >>> class Tpu: platform = "tpu"
    >>> class On:
    ...     def __init__(self, device): self.addressable_devices = {device}
    >>> staging_wanted([On(Cpu())]), staging_wanted([On(Cpu()), On(Tpu())])
    (False, True)
    """
    mode = os.environ.get(ENV, "").strip().lower() or "auto"
    if mode not in _MODES:
        raise CheckpointError(f"{ENV}={os.environ[ENV]!r} is not one of "
                              f"{', '.join(_MODES)}", code="P430")
    if mode != "auto":
        return mode == "always"
    # A mesh is one platform: the first device of each sharding says which.
    return any(d.platform != "cpu" for sharding in shardings
               for d in itertools.islice(sharding.addressable_devices, 1))


class Request:
    """One array to build: `key` in the result, its global `shape`, numpy `dtype` and
    `sharding`; `read(box, out)` fills `out` with the stored tensor's `box` (one
    ``slice`` per dimension, in the stored tensor's coordinates), cast to `dtype`.
    `transpose`: the tensor is stored as the transpose of the array (a 2-D PyTorch
    ``[out, in]`` weight); `align`: the stored chunk shape, where pieces cut at a
    chunk's edge read fewer bytes (Orbax's zarr chunks)."""

    __slots__ = ("key", "shape", "dtype", "sharding", "read", "transpose", "align")

    def __init__(self, key, shape, dtype, sharding, read: Callable, *, transpose=False,
                 align=None):
        self.key, self.shape, self.dtype, self.sharding = key, tuple(shape), dtype, sharding
        self.read, self.transpose, self.align = read, transpose, align


def tiles(shape, itemsize: int, budget: int, align=None) -> list[tuple]:
    """The boxes ((start, stop) per dimension) that cut an array of `shape` into pieces
    of at most `budget` bytes, in C order: the trailing dimensions whole, the one before
    them in runs (a multiple of `align`'s extent along it, when one fits), the leading
    ones an index at a time. Each piece of a C-order array is one run of its bytes.

    >>> tiles((4, 6), 4, 48)
    [((0, 2), (0, 6)), ((2, 4), (0, 6))]
    >>> tiles((2, 3), 4, 8)
    [((0, 1), (0, 2)), ((0, 1), (2, 3)), ((1, 2), (0, 2)), ((1, 2), (2, 3))]
    """
    shape = tuple(int(n) for n in shape)
    k, inner = len(shape), itemsize
    while k and inner * shape[k - 1] <= budget:
        k -= 1
        inner *= shape[k]
    if k == 0:
        return [tuple((0, n) for n in shape)]
    step = max(1, budget // inner)
    along = align[k - 1] if align is not None and len(align) == len(shape) else 0
    if along and step >= along:
        step -= step % along
    whole = tuple((0, n) for n in shape[k:])
    return [tuple((i, i + 1) for i in outer) + ((start, min(start + step, shape[k - 1])),)
            + whole
            for outer in itertools.product(*(range(n) for n in shape[:k - 1]))
            for start in range(0, shape[k - 1], step)]


class _Shard:
    """One distinct shard of a request: the devices that hold it, and its device
    buffers while its pieces arrive."""

    __slots__ = ("request", "bounds", "devices", "pieces", "landed", "targets")

    def __init__(self, request, bounds, devices, pieces):
        self.request, self.bounds, self.devices = request, bounds, devices
        self.pieces, self.landed, self.targets = pieces, 0, None


class _Piece:
    __slots__ = ("shard", "box", "shape", "nbytes", "offset")

    def __init__(self, shard, box, nbytes):
        self.shard, self.box, self.nbytes, self.offset = shard, box, nbytes, 0
        self.shape = tuple(b - a for a, b in box)


class _Failed:
    __slots__ = ("error",)

    def __init__(self, error):
        self.error = error


_DONE = object()


def place(requests: Iterable[Request], *, concurrent: bool = False,
          buffers: int | None = None, nbytes: int | None = None) -> dict:
    """`{key: jax.Array}` of every request, each read through the staging buffers and
    placed in its sharding (only this process's devices' shards are read). A read that
    fails raises its `CheckpointError`; any failure or interrupt deletes what was placed.
    `concurrent`: the requests' reads may run on several threads at once (`READS`).

    >>> import jax, numpy as np
    >>> data = np.arange(12, dtype=np.float32).reshape(3, 4)
    >>> sharding = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    >>> def read(box, out): out[...] = data[box]
    >>> placed = place([Request("w", (3, 4), np.dtype("float32"), sharding, read)], nbytes=16)
    >>> np.asarray(placed["w"]).tolist() == data.tolist()
    True
    """
    from concurrent.futures import ThreadPoolExecutor

    import jax

    buffers = STAGING_BUFFERS if buffers is None else buffers
    nbytes = STAGING_BYTES if nbytes is None else nbytes
    # A transfer in flight holds its buffer: fewer than `buffers`, so that the reads
    # always have one to fill and the loop below cannot wait on itself.
    transfers = max(1, min(TRANSFERS, buffers - 1))
    requests = list(requests)
    out: dict = {}
    started: dict = {}  # key -> [single-device arrays of its finished shards]
    shards_left: dict = {}
    open_shards: list[_Shard] = []
    free: queue.Queue = queue.Queue()
    ready: queue.Queue = queue.Queue()
    moving: deque = deque()  # (buffer, its arrays on the devices), oldest first
    stop = threading.Event()
    pool = []
    for _ in range(buffers):
        buf = aligned_empty((nbytes,), "uint8")
        _LIVE.append(weakref.ref(buf))
        pool.append(buf)
        free.put(buf)
    del buf
    reading = ThreadPoolExecutor(max_workers=min(READS, readers()) if concurrent else 1,
                                 thread_name_prefix="planc-staging-read")

    def pieces():
        for request in requests:
            size = _size((0, n) for n in request.shape) * request.dtype.itemsize
            if (0 < size <= nbytes and not request.transpose
                    and request.sharding.is_fully_addressable):
                # Whole, in one piece: put on its devices in its sharding by one call,
                # which cuts it there (the host path's batch of small tensors).
                whole = tuple((0, n) for n in request.shape)
                yield _Piece(_Shard(request, whole, None, 1), whole, size), None
                continue
            held: dict = {}
            for device, index in request.sharding.addressable_devices_indices_map(
                    request.shape).items():
                held.setdefault(index_bounds(request.shape, index), []).append(device)
            shards_left[request.key] = len(held)
            started[request.key] = []
            if not held:
                yield None, request
            for bounds, devices in held.items():
                stored = bounds[::-1] if request.transpose else bounds
                shape = tuple(b - a for a, b in stored)
                if 0 in shape:
                    yield _Shard(request, bounds, devices, 0), None
                    continue
                boxes = tiles(shape, request.dtype.itemsize, nbytes, request.align)
                shard = _Shard(request, bounds, devices, len(boxes))
                for box in boxes:
                    absolute = tuple((s + a, s + b) for (s, _), (a, b) in zip(stored, box))
                    yield _Piece(shard, absolute, _size(box) * request.dtype.itemsize), None

    def fill(job, buf):
        try:
            for piece in job:
                if stop.is_set():
                    return
                request = piece.shard.request
                request.read(tuple(slice(a, b) for a, b in piece.box),
                             _view(buf, piece, request.dtype))
        except BaseException as e:  # raised again by the caller's thread
            _forget_buffers(e)
            raise

    def hand_on(job, buf):
        # In order: the caller lands the pieces as the reads were started, whichever
        # read ends first.
        ready.put((job, buf, reading.submit(fill, job, buf)))

    def packer():
        try:
            buf, used, job = None, 0, []
            for piece, lone in pieces():
                if stop.is_set():
                    return
                if not isinstance(piece, _Piece):  # nothing to read: landed in order
                    if job:
                        hand_on(job, buf)
                        buf, used, job = None, 0, []
                    ready.put(([piece if piece is not None else lone], None, None))
                    continue
                start = -(-used // ALIGN) * ALIGN
                if job and start + piece.nbytes > nbytes:
                    hand_on(job, buf)
                    buf, used, job, start = None, 0, [], 0
                if buf is None:
                    buf = free.get()
                    if buf is None:
                        return
                piece.offset = start
                job.append(piece)
                used = start + piece.nbytes
            if job:
                hand_on(job, buf)
            ready.put(_DONE)
        except BaseException as e:  # handed to the caller's thread, which raises it
            _forget_buffers(e)
            ready.put(_Failed(e))

    def settle(keep: int):
        # A buffer is refilled only once the transfer reading it is done.
        while len(moving) > keep:
            buf, singles = moving.popleft()
            jax.block_until_ready(singles)
            free.put(buf)

    thread = threading.Thread(target=packer, name="planc-staging", daemon=True)
    thread.start()
    finished = False
    try:
        while True:
            if ready.empty():
                settle(0)  # nothing to move meanwhile: let the reads have the buffers
            item = ready.get()
            if item is _DONE:
                break
            if isinstance(item, _Failed):
                raise item.error
            job, buf, future = item
            if buf is None:
                _land_empty(job[0], out, started, shards_left)
                continue
            future.result()
            singles = _to_devices(job, buf)
            moving.append((buf, singles))
            del buf
            at = 0
            for piece in job:
                n = len(piece.shard.devices or (None,))
                _land(piece, singles[at:at + n], out, started, shards_left, open_shards)
                at += n
            del singles
            settle(transfers - 1)
        settle(0)
        finished = True
        return out
    except BaseException as e:
        _forget_buffers(e)
        raise
    finally:
        stop.set()
        for _ in range(buffers):
            free.put(None)  # wakes a packer waiting for a buffer
        thread.join()
        reading.shutdown(wait=True, cancel_futures=True)
        for _, singles in moving:  # the transfers still reading the buffers
            try:
                jax.block_until_ready(singles)
            except Exception:  # a failed transfer reads nothing more
                pass
        moving.clear()
        for waiting in (free, ready):  # the buffers go with their last reference
            while not waiting.empty():
                waiting.get_nowait()
        pool.clear()
        # A traceback keeps this frame's locals: none of them may hold a buffer (`_` is
        # the last buffer the loop over `moving` bound).
        item = job = buf = singles = future = _ = None  # noqa: F841
        if not finished:  # failed or interrupted: nothing stays half-placed
            _delete(out, started, open_shards)


def _forget_buffers(error: BaseException) -> None:
    # A traceback keeps its frames' locals, and the readers' frames hold views of the
    # buffers: the caller may keep the error long after the load has ended.
    traceback.clear_frames(error.__traceback__)
    for linked in (error.__context__, error.__cause__):
        if linked is not None:
            traceback.clear_frames(linked.__traceback__)


def _size(box) -> int:
    """The elements in `box` ((start, stop) per dimension)."""
    n = 1
    for a, b in box:
        n *= b - a
    return n


def _view(buf, piece: _Piece, dtype):
    return buf[piece.offset:piece.offset + piece.nbytes].view(dtype).reshape(piece.shape)


def _to_devices(job, buf) -> list:
    """Each piece of `job` on each of its shard's devices, copied out of `buf`, which is
    free to refill once these arrays are ready (`jax.block_until_ready`)."""
    import jax

    views, places = [], []
    for piece in job:
        view = _view(buf, piece, piece.shard.request.dtype)
        for where in piece.shard.devices or (piece.shard.request.sharding,):
            views.append(view)
            places.append(where)
    singles = jax.device_put(views, places)
    if any(d.platform == "cpu" for s in singles for d in s.sharding.device_set):
        # XLA:CPU adopts an aligned host buffer as the device's memory instead of copying
        # it: copy those into memory of their own before the buffer is filled again.
        singles = jax.device_put(singles, places, may_alias=False)
    return singles


def _land(piece: _Piece, singles, out, started, shards_left, open_shards) -> None:
    shard = piece.shard
    request = shard.request
    if shard.devices is None:  # the whole array, in its sharding
        out[request.key] = singles[0]
        return
    if shard.pieces == 1:
        arrays = [_transposed(s) for s in singles] if request.transpose else singles
    else:
        if shard.targets is None:
            shape = tuple(b - a for a, b in shard.bounds)
            shard.targets = [_zeros(shape, request.dtype, d) for d in shard.devices]
            open_shards.append(shard)
        stored = shard.bounds[::-1] if request.transpose else shard.bounds
        start = [a - s for (a, _), (s, _) in zip(piece.box, stored)]
        if request.transpose:
            start.reverse()
        shard.targets = [_update(t, s, start, request.transpose)
                         for t, s in zip(shard.targets, singles)]
        arrays = shard.targets
    shard.landed += 1
    if shard.landed < shard.pieces:
        return
    if shard.targets is not None:
        open_shards.remove(shard)
        shard.targets = None
    _shard_done(request, list(arrays), out, started, shards_left)


def _land_empty(item, out, started, shards_left) -> None:
    import jax
    import numpy as np

    if isinstance(item, Request):  # no device of this process holds any of it
        _finish(item, out, started)
        return
    shape = tuple(b - a for a, b in item.bounds)
    arrays = jax.device_put([np.zeros(shape, item.request.dtype)] * len(item.devices),
                            item.devices)
    _shard_done(item.request, arrays, out, started, shards_left)


def _shard_done(request, arrays, out, started, shards_left) -> None:
    started[request.key].extend(arrays)
    shards_left[request.key] -= 1
    if not shards_left[request.key]:
        _finish(request, out, started)


def _finish(request, out, started) -> None:
    import jax

    out[request.key] = jax.make_array_from_single_device_arrays(
        request.shape, request.sharding, started.pop(request.key))


def _delete(out, started, open_shards) -> None:
    """Free on the devices every array of a load that did not finish."""
    arrays = list(out.values())
    for singles in started.values():
        arrays.extend(singles)
    for shard in open_shards:
        arrays.extend(shard.targets or ())
    out.clear()
    started.clear()
    open_shards.clear()
    for array in arrays:
        try:
            if not array.is_deleted():
                array.delete()
        except Exception:  # already donated or freed: nothing left to free
            pass


_JITTED: dict = {}


def _jitted(name: str):
    """The few device functions of a load, jitted once per process."""
    found = _JITTED.get(name)
    if found is None:
        import jax
        from jax import lax

        if name == "update":
            def update(target, piece, start, transpose):
                return lax.dynamic_update_slice(target, piece.T if transpose else piece,
                                                start)
            # The target is donated: each piece is written into the shard's one buffer.
            found = jax.jit(update, donate_argnums=0, static_argnums=3)
        else:
            found = jax.jit(lambda piece: piece.T)
        _JITTED[name] = found
    return found


def _update(target, piece, start, transpose: bool):
    import numpy as np

    return _jitted("update")(target, piece, [np.int32(i) for i in start], transpose)


def _transposed(single):
    return _jitted("transpose")(single)


def _zeros(shape, dtype, device):
    import jax.numpy as jnp

    return jnp.zeros(shape, dtype, device=device)
