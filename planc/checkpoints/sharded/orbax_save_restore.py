"""Orbax checkpoints on the plan's mesh: restore into the plan's shardings, save with the
plan recorded, save in parts.

Orbax is the distributed engine here: `save` lets every process write its own shards
into Orbax's atomic commit, `restore` reads each process's own shards into the plan's
shardings (by tensorstore, as Orbax opens the arrays, for Orbax's default layout:
`orbax_tensorstore`; else Orbax restores abstract arrays carrying the shardings), and
`save_parts` uses Orbax's partial saves so a checkpoint larger than memory can be
written a few tensors at a time.

What planc records (`plan_record`) goes into Orbax's own custom metadata, which Orbax
writes as plain JSON in `DIR/_CHECKPOINT_METADATA` inside the same atomic commit as the
arrays, from the primary process only: a checkpoint can never exist without its plan
record (a file written after Orbax finalizes could), and no extra multi-host barrier is
needed. `cat DIR/_CHECKPOINT_METADATA` shows it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
from collections.abc import Iterable, Mapping

from planc._version import __version__
from planc.check.binding import bind_devices
from planc.checkpoints.orbax_dir import PLAN_KEY, saved_plan
from planc.checkpoints.sharded.orbax_tensorstore import chunk_read_bytes
from planc.checkpoints.sharded.orbax_tensorstore import restore as read_shards
from planc.checkpoints.tensors import index_bounds
from planc.diagnostics import Diagnostic, PlanError, Span, note
from planc.ir import PlanIR
from planc.fingerprint import bound_fingerprint, fingerprint

__all__ = ["restore", "save", "save_parts", "plan_record", "reshard_note", "nest", "busy",
           "DestinationBusy"]

SCHEMA = "planc.checkpoint/1"
_PARTIAL_SUFFIX = ".partial_save"  # where Orbax's partial saves gather before finalize
_TMP_MARK = ".orbax-checkpoint-tmp"


# -- the plan's record -------------------------------------------------------------------

def _bound_fingerprint(ir: PlanIR, devices: int | None) -> str | None:
    if devices is None:
        return None
    try:
        return bound_fingerprint(bind_devices(ir, devices))
    except PlanError:
        return None


def plan_record(ir: PlanIR, devices: int | None = None, tensors=None) -> dict:
    """What `save` stores beside the arrays: the plan's name, fingerprint and full text,
    and the names of the tensors it writes (`tensors`, sorted), so that a reader can
    refuse a checkpoint that lacks one (P424) instead of loading fewer arrays.

    `fingerprint_bound` is the fingerprint with `auto` resolved for the `devices` the
    checkpoint was written from (None when not known), so a plan is recognised whether
    it is compared bound or not.

    >>> import planc
    >>> record = plan_record(planc.loads("mesh(a = 2)\\ndata_parallel").ir)
    >>> record["schema"], record["plan"], len(record["fingerprint"])
    ('planc.checkpoint/1', 'plan', 64)
    """
    return {
        "schema": SCHEMA,
        "plan": ir.name,
        "fingerprint": fingerprint(ir),
        "fingerprint_bound": _bound_fingerprint(ir, devices),
        "devices": devices,
        "file": os.path.basename(ir.file),
        "text": ir.source_dict.get(ir.file, ""),
        "planc_version": __version__,
        **({"tensors": sorted(tensors)} if tensors is not None else {}),
    }


def _same_plan(ir: PlanIR, saved: dict) -> bool:
    theirs = {saved.get("fingerprint"), saved.get("fingerprint_bound")} - {None}
    devices = saved.get("devices")
    ours = {fingerprint(ir),
            _bound_fingerprint(ir, devices if isinstance(devices, int) else None)} - {None}
    return bool(theirs & ours)


def reshard_note(ir: PlanIR, checkpoint) -> Diagnostic | None:
    """The one note (P417) that loading `checkpoint` under `ir` reshards it, when it was
    saved under another plan; None for the same plan or a checkpoint planc did not save.

    >>> import planc
    >>> a = planc.loads("mesh(a = 2)\\ndata_parallel", file="a.kd")
    >>> b = planc.loads("mesh(b = 2)\\ndata_parallel", file="b.kd")
    >>> saved = type("C", (), {"path": "ckpt", "custom_metadata": {"planc": plan_record(a.ir)}})
    >>> reshard_note(a.ir, saved) is None
    True
    >>> reshard_note(b.ir, saved).code
    'P417'
    """
    saved = saved_plan(checkpoint)
    if saved is None or _same_plan(ir, saved):
        return None
    span = ir.mesh.span or Span.start_of(ir.file)
    return note("P417", f"{checkpoint.path} was saved under plan `{saved['plan']}` "
                f"(fingerprint {saved['fingerprint']}); it is resharded into the layout of "
                f"plan `{ir.name}` (fingerprint {fingerprint(ir)})", span,
                label="loaded into this plan's mesh",
                help="nothing to fix: the values are the same; save it again under this "
                     "plan (`plan.save`, `planc reshard`) to skip the resharding next time")


# -- restore ------------------------------------------------------------------------------

def _transposed(sharding):
    from jax.sharding import NamedSharding, PartitionSpec

    spec = tuple(sharding.spec) + (None,) * (2 - len(sharding.spec))
    return NamedSharding(sharding.mesh, PartitionSpec(spec[1], spec[0]))


def _transpose(array, sharding):
    import jax

    # The stored [out, in] array was restored with the transposed spec, so each device
    # already holds the block it needs: the transpose is local, nothing moves.
    return jax.jit(lambda a: a.T, out_shardings=sharding)(array)


def restore(ir: PlanIR, checkpoint, sources, shardings, *, dtype=None) -> dict:
    """`{variable path: jax.Array}` for `sources` (from `bind_checkpoint`), restored from
    the Orbax `checkpoint` straight into `shardings`: by tensorstore for Orbax's default
    layout (`orbax_tensorstore`), through Orbax for any other.

    `shardings` maps each variable's path to its `jax.sharding.Sharding` (or is a
    sequence in the order of `sources`). Each process reads only the shards its devices
    hold; tensors no source takes are not read at all. A `transpose` source is restored
    with the transposed sharding and transposed in place on each device. Arrays get
    `dtype` when given, else the variable's dtype (which `bind_checkpoint` checked),
    cast as they are read. Failed reads raise `CheckpointError`. `ir` is the plan
    being loaded into (for the reshard note, see `reshard_note`).
    """
    import jax
    import numpy as np

    sources = tuple(sources)
    if isinstance(shardings, Mapping):
        targets = [shardings[s.variable.path] for s in sources]
    else:
        targets = list(shardings)
        if len(targets) != len(sources):
            raise ValueError(f"{len(sources)} sources but {len(targets)} shardings")
    abstract = {}
    for source, sharding in zip(sources, targets):
        want = np.dtype(dtype if dtype is not None else source.variable.dtype)
        stored = _transposed(sharding) if source.transpose else sharding
        abstract[source.tensor.name] = jax.ShapeDtypeStruct(
            tuple(source.tensor.shape), want, sharding=stored)
    if checkpoint.store is not None:  # Orbax's default layout: read by tensorstore
        restored = read_shards(checkpoint, abstract)
    else:
        restored = {}
        for part, limit in _read_batches(checkpoint, abstract):
            with _bounded_reads(limit):
                restored.update(checkpoint.restore(part))
    out = {}
    for source, sharding in zip(sources, targets):
        array = restored[source.tensor.name]
        out[source.variable.path] = _transpose(array, sharding) if source.transpose else array
    return out


# Orbax's restore holds buffers of its own beside the arrays it builds (tensorstore's
# reads in flight): unbounded, a 1 GiB checkpoint took 1.45-1.6x the placed bytes in
# anonymous memory. With at most 16 MiB in flight it took 1.08-1.11x, and no more CPU
# (bench/load_checkpoint.py).
_READ_BYTES = 16 << 20
# Small reads are not bounded. Orbax's bound wakes every waiting read each time one
# finishes, so a thousand small tensors queued behind it cost ~1 s of CPU (bench 15), and
# bounding them saved no memory: tensorstore's own concurrency keeps few in flight.
_SMALL_READ = 1 << 20


def _read_batches(checkpoint, abstract: dict) -> list[tuple[dict, int | None]]:
    """`abstract` as Orbax restores are made of it: [(part, read bound or None)]. Tensors
    whose every read is small come first and unbounded; the others with at most
    `_READ_BYTES` read at once, or twice the largest single read when that is more,
    since Orbax refuses a read that does not fit its bound. A read spans the chunks one
    shard of this process touches (as Orbax estimates it). All in one unbounded restore
    when a tensor's chunk shape is not recorded."""
    sizes = _largest_reads(checkpoint, abstract)
    if sizes is None:
        return [(abstract, None)]
    small = {n: leaf for n, leaf in abstract.items() if sizes[n] <= _SMALL_READ}
    large = {n: leaf for n, leaf in abstract.items() if sizes[n] > _SMALL_READ}
    batches = [(small, None)] if small else []
    if large:
        biggest = max(sizes[n] for n in large)
        batches.append((large, max(_READ_BYTES, 2 * biggest + 1)))
    return batches


def _largest_reads(checkpoint, abstract: dict) -> dict[str, int] | None:
    """{name: bytes of the largest read one shard of this process makes}, or None when
    a tensor's chunk shape is not recorded."""
    import ml_dtypes  # noqa: F401  (bfloat16 and float8 names)
    import numpy as np

    out = {}
    chunk_shapes = getattr(checkpoint, "chunk_shapes", {})
    for name, leaf in abstract.items():
        chunks = chunk_shapes.get(name)
        if chunks is None or len(chunks) != len(leaf.shape) or 0 in chunks:
            return None
        itemsize = np.dtype(checkpoint.tensor(name).dtype).itemsize
        indices = leaf.sharding.addressable_devices_indices_map(leaf.shape).values()
        out[name] = max((chunk_read_bytes(index_bounds(leaf.shape, index), chunks, itemsize)
                         for index in indices), default=0)
    return out


@contextlib.contextmanager
def _bounded_reads(limit: int | None):
    """Orbax's active context with at most `limit` bytes read at once, unless the
    caller's context bounds its reads already (or `limit` is None)."""
    import orbax.checkpoint.experimental.v1 as ocp

    try:  # the caller's active context, so that its other options still apply
        from orbax.checkpoint.experimental.v1._src.context.context import get_context
        active = get_context()
    except ImportError:
        active = None
    if limit is None or (active is not None
                         and active.memory_options.read_concurrent_bytes is not None):
        yield
        return
    bounded = ocp.Context(active)
    bounded.memory_options.read_concurrent_bytes = limit
    with bounded:
        yield


# -- save ---------------------------------------------------------------------------------

def nest(flat: Mapping[str, object]) -> dict:
    """`{"a/b": x}` as `{"a": {"b": x}}`: the tree whose "/"-joined paths are the names,
    so an Orbax checkpoint written from names lists the same names back.

    >>> nest({"dense/kernel": 1, "dense/bias": 2, "head": 3})
    {'dense': {'kernel': 1, 'bias': 2}, 'head': 3}
    >>> nest({"a": 1, "a/b": 2})
    Traceback (most recent call last):
    ...
    ValueError: `a` is both a tensor and a prefix of `a/b`: such names cannot be one tree
    """
    tree: dict = {}
    for name, leaf in flat.items():
        node = tree
        parts = name.split("/")
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ValueError(f"`{'/'.join(parts[:i + 1])}` is both a tensor and a prefix "
                                 f"of `{name}`: such names cannot be one tree")
            node = child
        if parts[-1] in node:
            raise ValueError(f"`{name}` is both a tensor and a prefix of another name: such "
                             "names cannot be one tree")
        node[parts[-1]] = leaf
    return tree


_CLAIM_SUFFIX = ".planc-writing"  # held by the one planc writing a destination


class DestinationBusy(FileExistsError):
    """A destination another writer holds (P427), or a partial save no planc claims
    (P428): refused, never touched. A `FileExistsError`; `diagnostic` is the coded
    refusal."""

    def __init__(self, code: str, message: str, fix: str):
        super().__init__(message)
        from planc.diagnostics import error

        self.diagnostic = error(code, message, None, help=fix)


def busy(directory: str) -> DestinationBusy | None:
    """Why `directory` cannot be written now, or None: another writer's claim on it
    (P427: alive, on another host, or unreadable), or a `DIRECTORY.partial_save` that no
    planc claims (P428). A claim whose writer is gone is no obstacle: `claimed` takes it
    over, with what that writer left.

        >>> busy("/nonexistent/ckpt") is None
        True
    """
    claim = directory + _CLAIM_SUFFIX
    if os.path.lexists(claim):
        holder = _claim_holder(claim)
        if holder is not None and _gone(*holder):
            return None
        who = (f" (pid {holder[1]} on {holder[0]}, still running or on another host)"
               if holder else " (its claim cannot be read)")
        return DestinationBusy(
            "P427", f"{directory} is being written by another planc{who}: a checkpoint has "
                    "one writer",
            f"wait for it to end; if no planc is writing {directory}, remove {claim}")
    return _unclaimed_partial(directory)


def _unclaimed_partial(directory: str) -> DestinationBusy | None:
    partial = directory + _PARTIAL_SUFFIX
    if not os.path.lexists(partial):
        return None
    return DestinationBusy(
        "P428", f"{partial} exists (an interrupted save left it) and no planc claims it: "
                "it is not planc's to remove",
        f"remove {partial} if no program is writing it, or choose another directory")


@contextlib.contextmanager
def claimed(directory: str):
    """`directory` held for this writer while the block runs: a second planc writing it
    at the same time is refused (`DestinationBusy`, P427) instead of mixing its tensors
    into this one's. The claim is a file created exclusively beside the destination,
    holding the writer's host, pid and start time; a claim whose writer is gone (killed:
    no such process on this host, or the pid now another process's) is taken over, and
    what that writer left (its partial save, Orbax's temporary directories) is removed
    first. Only the primary process claims: the others write under its claim."""
    import jax

    if jax.process_index() != 0:
        yield
        return
    claim = directory + _CLAIM_SUFFIX
    os.makedirs(os.path.dirname(directory) or ".", exist_ok=True)  # as Orbax makes it
    for attempt in (0, 1):
        try:
            fd = os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            refusal = busy(directory)
            if refusal is None and attempt:  # another run took the dead writer's claim first
                refusal = DestinationBusy("P427", f"{directory} is being written by another "
                                          "planc: a checkpoint has one writer",
                                          "wait for it to end")
            if refusal is not None:
                raise refusal from None
            # A killed writer's claim: what it left is its own, and nobody else's.
            _clean(_leftovers(directory))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(claim)
    try:
        pid = os.getpid()
        os.write(fd, f"{_host()} {pid} {_started(pid) or 0}\n".encode())
        os.close(fd)
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(claim)


def _host() -> str:
    return os.uname().nodename if hasattr(os, "uname") else "localhost"


def _claim_holder(claim: str) -> tuple[str, int, int] | None:
    """(host, pid, start time) of a claim; the start time is 0 where unknown (a claim
    written without one, or off Linux)."""
    try:
        with open(claim, encoding="utf-8") as f:
            fields = f.read(4096).split()
        if len(fields) not in (2, 3) or not all(f.isdigit() for f in fields[1:]):
            return None
        return fields[0], int(fields[1]), int(fields[2]) if len(fields) == 3 else 0
    except (OSError, ValueError):
        return None


def _started(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot, from /proc), or None where
    unknown: with the pid, it names one process even after the pid is reused."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            # the command name, in parentheses, may hold spaces: the fields follow it
            return int(f.read().rpartition(")")[2].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _gone(host: str, pid: int, start: int = 0) -> bool:
    """Whether the claim's writer no longer runs: no process `pid` on this host, or one
    that started at another time (the pid reused). Another host's is never known gone."""
    if host != _host():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass
    now = _started(pid)
    return bool(start) and now is not None and now != start


def _refuse_existing(directory: str) -> None:
    """Under this writer's claim: an existing checkpoint, or a partial save that was
    there before the claim (a dead writer's was removed when its claim was taken)."""
    if os.path.lexists(directory):
        raise FileExistsError(f"{directory} exists (a checkpoint is never overwritten): "
                              "remove it or choose another directory")
    refusal = _unclaimed_partial(directory)
    if refusal is not None:
        raise refusal


def _leftovers(directory: str) -> set[str]:
    parent = os.path.dirname(directory) or "."
    base = os.path.basename(directory)
    try:
        names = os.listdir(parent)
    except OSError:
        return set()
    return {os.path.join(parent, n) for n in names
            if n.startswith(base + _TMP_MARK) or n.startswith(base + _PARTIAL_SUFFIX)}


def _clean(paths: set[str]) -> None:
    import jax

    # Only the primary process removes: the others may still be inside Orbax's barrier.
    if jax.process_index() != 0:
        return
    for path in sorted(paths):
        shutil.rmtree(path, ignore_errors=True)


def save(ir: PlanIR, tree, directory) -> None:
    """Write `tree` (a pytree of sharded `jax.Array`s) as an Orbax checkpoint at
    `directory`, with the plan recorded (`plan_record`) in its metadata.

    Call it on every process: each writes the shards its devices hold, and Orbax commits
    the directory atomically (it appears whole or not at all). An existing `directory`
    raises `FileExistsError`: a checkpoint is never overwritten; so does a destination
    another planc is writing (`claimed`).
    """
    import jax
    import orbax.checkpoint.experimental.v1 as ocp

    from planc.targets.jax.sharding import tree_paths

    directory = os.path.abspath(os.fspath(directory))
    with claimed(directory):
        _refuse_existing(directory)
        before = _leftovers(directory)
        # A string (a run's name) is saved, but it is not a tensor: the record lists
        # what loading must find.
        leaves = tree_paths(tree)[0]
        flags = [path for path, leaf in leaves if type(leaf) is bool]
        if flags:
            raise ValueError(
                f"`{flags[0]}` is a Python bool: Orbax saves one but cannot read its "
                "metadata back (\"Unsupported dtype: bool\"), so neither planc nor Orbax's "
                "metadata could list the checkpoint; save it as an array "
                "(jnp.asarray(flag)) instead")
        names = [path for path, leaf in leaves if not isinstance(leaf, str)]
        record = plan_record(ir, jax.device_count(), names)
        try:
            ocp.save(directory, tree, custom_metadata={PLAN_KEY: record})
        except BaseException:
            _clean(_leftovers(directory) - before)
            raise


def _give_back_freed_memory() -> None:
    # Orbax's tensorstore threads free into glibc arenas, which keep the pages: without
    # handing them back, RSS grew by every part (to 650 MiB on a 512 MiB checkpoint) while
    # nothing was alive; with it, it stays at about one part. A no-op off glibc.
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):
        pass


def save_parts(ir: PlanIR, parts: Iterable[Mapping[str, object]], directory, *,
               devices: int | None = None, held=contextlib.nullcontext,
               names=None, whole=None) -> None:
    """Write a checkpoint at `directory` from `parts`, each `{name: jax.Array}` with
    names disjoint from the other parts', one Orbax partial save per part, then finalize.

    Only one part is alive at a time (pass a generator), so memory is bounded by the
    largest part, not by the checkpoint. The directory appears only when Orbax finalizes;
    on any failure what was written is removed and nothing is left at `directory`.
    Each Orbax call runs inside `held()`: `planc.stopping.StopSignals.held` keeps a
    signal from cutting one short, since Orbax's own threads would go on writing into
    what the cleanup removes. `whole()`, if given, is called inside that same `held()`
    as soon as the finalize returns: from then on the checkpoint is whole, and a caller
    that stops taking signals there has no instant at which a signal could end the run
    with the checkpoint written.
    """
    import jax
    import orbax.checkpoint.experimental.v1 as ocp

    directory = os.path.abspath(os.fspath(directory))
    with claimed(directory):
        _refuse_existing(directory)
        before = _leftovers(directory)
        record = plan_record(ir, devices if devices is not None else jax.device_count(),
                             names)
        try:
            wrote = False
            for part in parts:
                if part:
                    with held():
                        ocp.partial.save(directory, nest(part), custom_metadata=(
                            None if wrote else {PLAN_KEY: record}))
                    wrote = True
                del part  # the next part is built while this one is already freed
                _give_back_freed_memory()
            if not wrote:
                raise ValueError("nothing to save: the checkpoint has no tensors")
            finalized = []
            try:
                with held():
                    ocp.partial.finalize(directory)
                    finalized.append(True)
                    if whole is not None:
                        whole()
            except KeyboardInterrupt:
                # A stop signal held through the finalize arrives once the checkpoint is
                # whole: the work is done, and what is done stays (the caller's exit
                # says so), rather than a complete checkpoint deleted on a Ctrl-C.
                if not finalized:
                    raise
        except BaseException:
            # `directory` did not exist (`_refuse_existing`): nothing half-written stays.
            _clean(_leftovers(directory) - before | {directory})
            raise
