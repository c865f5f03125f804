"""Orbax checkpoint directories as planc checkpoints, described by Orbax's metadata alone.

Orbax is the engine for these checkpoints: the tensors' names, shapes and dtypes are what
`orbax.checkpoint.experimental.v1.metadata` says (the tree metadata `_METADATA` and each
array's zarr header), and no array data is read to list them. For the layouts Orbax
writes by default, `orbax_headers` reads the same headers in one batch (Orbax opens each
array to read its own, a fifth of a restore of 1,000 tensors); anything else is
Orbax's to read. A tensor's name is its tree path joined by "/" (`params/dense/kernel`), as
planc names pytree leaves. A Python scalar (a step count) is a 0-d tensor; a string is
not a tensor.

Orbax imports jax, so it is imported only when a directory must be read or restored
through it; `import planc` and the front end stay free of it, and so does listing a
checkpoint of Orbax's default layout.

Both layouts Orbax writes are read: the v1 layout (`DIR/state/_METADATA`, which
`plan.save` and `planc reshard` write) and the v0 layout (`DIR/_METADATA`, as
`StandardCheckpointer` writes it).
"""

from __future__ import annotations

import logging
import math
import os
from contextlib import contextmanager

from planc.checkpoints.orbax_headers import read_tree
from planc.checkpoints.tensors import Checkpoint, CheckpointError, Tensor, index_bounds
from planc.sources.model import array_problem
from planc.sources.headers import shown

__all__ = ["OrbaxCheckpoint", "is_orbax_dir", "saved_plan", "PLAN_KEY"]

# The key of planc's record inside Orbax's custom metadata (see `saved_plan`).
PLAN_KEY = "planc"
_TREE_METADATA = "_METADATA"
_MARKERS = ("_CHECKPOINT_METADATA", _TREE_METADATA, "orbax.checkpoint", "commit_success.txt",
            "manifest.ocdbt")


def is_orbax_dir(path) -> bool:
    """True when `path` is a directory that Orbax wrote (or began to write): it holds
    one of Orbax's marker files, itself or in an item directory such as `state/`.

    >>> is_orbax_dir(".")
    False
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        return False
    if any(os.path.exists(os.path.join(path, m)) for m in _MARKERS):
        return True
    return bool(_item_dirs(path))


def _item_dirs(path: str) -> list[str]:
    """The subdirectories of `path` that hold Orbax tree metadata, sorted."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    return [n for n in names
            if os.path.isfile(os.path.join(path, n, _TREE_METADATA))]


def _step_dirs(path: str) -> list[str]:
    """Numbered subdirectories that are checkpoints themselves (a CheckpointManager's
    root holds one per step)."""
    try:
        names = sorted((n for n in os.listdir(path) if n.isdigit()), key=int)
    except OSError:
        return []
    return [n for n in names if is_orbax_dir(os.path.join(path, n))]


def _missing_metadata(path: str) -> CheckpointError:
    steps = _step_dirs(path)
    if steps:
        hint = (f"it looks like a CheckpointManager directory: pass one step's checkpoint, "
                f"e.g. {os.path.join(path, steps[-1])}")
    else:
        hint = ("the tree metadata is written last: the save that made this directory "
                "probably did not finish; save the checkpoint again")
    return CheckpointError(f"P415 {path}: an Orbax checkpoint directory without its tree "
                           f"metadata ({_TREE_METADATA}, in it or in an item directory such "
                           f"as state/); {hint}")


def first_line(exc: BaseException) -> str:
    # Orbax's messages can run to pages (tensorstore specs); one line, bounded, is enough
    # to say what went wrong without echoing a file's bytes back.
    text = str(exc).strip().splitlines()
    line = text[0] if text else ""
    return f"{type(exc).__name__}: {line[:200]}"


@contextmanager
def orbax_logs():
    """Orbax's log records of warnings and errors, kept off stderr: it logs some
    failures as warnings and returns None, and its threads log each failure of a write
    with a traceback. What is kept can become the diagnostic's one line.

    Orbax logs through absl's logger; a record its threads log with
    `absl.logging.exception` names absl's own file, not Orbax's, so every absl record
    of the block is kept, and so is every asyncio record (the failed reads of its
    tasks).
    """
    caught: list[str] = []

    def keep(record) -> bool:
        if record.levelno >= logging.WARNING:
            caught.append(record.getMessage())
            return False
        return True

    # asyncio logs "Task exception was never retrieved", with a traceback, for each of
    # Orbax's reads that failed after another had already failed: on a damaged
    # checkpoint, three to nine of them around the one line planc says. They are logged
    # when the task is collected, so the block ends with a collection.
    # Orbax also warns through the root logger itself ("TensorStore data files not found"
    # on every zarr3 checkpoint written without OCDBT); a filter there sees only those.
    loggers = [logging.getLogger("absl"), logging.getLogger("asyncio"), logging.getLogger()]
    for logger in loggers:
        logger.addFilter(keep)
    try:
        yield caught
    finally:
        import gc

        gc.collect()
        for logger in loggers:
            logger.removeFilter(keep)


def _detail(caught: list[str]) -> str:
    for message in caught:
        for line in message.splitlines():
            if line.startswith("Error details:"):
                return line[len("Error details:"):].strip()[:200]
    return "no tree metadata found"


def _read_metadata(path: str):
    """(tree of Orbax leaf metadata, custom metadata, `ArrayStore` or None) of the
    checkpoint at `path`: the store when `orbax_headers` read it (Orbax's default
    layout), None when Orbax did."""
    if not os.path.exists(path):
        raise CheckpointError(f"{path}: cannot read: no such file or directory",
                              unreadable=True)
    items = [""] if os.path.isfile(os.path.join(path, _TREE_METADATA)) else _item_dirs(path)
    if not items:
        raise _missing_metadata(path)
    # With two item directories Orbax chooses which to read; planc leaves it to Orbax.
    known = read_tree(path, os.path.join(path, items[0])) if len(items) == 1 else None
    if known is not None:
        return known
    try:
        import orbax.checkpoint.experimental.v1 as ocp

        with orbax_logs() as caught:
            meta = ocp.metadata(os.path.abspath(path))  # Orbax takes absolute paths only
    except PermissionError as exc:
        raise CheckpointError(f"{path}: cannot read: {exc.strerror or 'permission denied'}",
                              unreadable=True) from None
    except Exception as exc:  # Orbax raises many types; each is one diagnostic here
        raise CheckpointError(f"P416 {path}: Orbax cannot read this checkpoint's metadata "
                              f"({first_line(exc)}); the directory is damaged or was not "
                              "written by Orbax") from None
    if meta.metadata is None:
        raise CheckpointError(f"P416 {path}: Orbax cannot read this checkpoint's tree "
                              f"metadata ({_detail(caught)}); the directory is damaged or "
                              "was not written by Orbax")
    return meta.metadata, meta.custom_metadata, None


_SCALARS = {bool: "bool", int: "int64", float: "float64"}


def _flatten(tree):
    """[(name, (shape, dtype))] of every array and scalar leaf of an Orbax metadata tree,
    in tree order (strings are not tensors)."""
    out = []
    for name, leaf in _leaves(tree):
        if isinstance(leaf, (bool, int, float)):
            # Orbax describes a Python scalar (a step count) by a value of its type; it
            # restores into a 0-d array like any other leaf.
            out.append((name, ((), _SCALARS[type(leaf)])))
        elif getattr(leaf, "shape", None) is not None and getattr(leaf, "dtype", None) is not None:
            out.append((name, (tuple(int(d) for d in leaf.shape), _dtype_name(leaf.dtype))))
    return out


def _chunk_shapes(tree) -> dict[str, tuple[int, ...]]:
    """{name: the chunk shape Orbax stored it in} for each array whose metadata records
    one (the unit Orbax's reads are aligned to)."""
    out = {}
    for name, leaf in _leaves(tree):
        chunks = getattr(getattr(leaf, "storage_metadata", None), "chunk_shape", None)
        if chunks is not None:
            out[name] = tuple(int(c) for c in chunks)
    return out


def _is_leaf(x) -> bool:
    return x is None or hasattr(x, "shape")


class _OtherNode(Exception):
    pass


def _leaves(tree) -> list[tuple[str, object]]:
    """[(name, leaf)] of an Orbax metadata tree in JAX's order (a dict's keys sorted, a
    list's items in turn), a name being the tree path joined by "/". A tree of dicts and
    lists, what Orbax's default layout holds, is walked here without importing JAX (so
    `planc lint --checkpoint` of such a checkpoint never imports it); a tree with any
    other node is JAX's to flatten."""
    out: list = []
    try:
        _walk(tree, "", out)
        return out
    except _OtherNode:
        import jax

        from planc.sources.objects import key_text

        flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=_is_leaf)
        return [("/".join(key_text(k) for k in keys), leaf) for keys, leaf in flat]


def _walk(node, prefix: str, out: list) -> None:
    kind = type(node)
    if kind is dict:
        if any(type(key) is not str for key in node):
            raise _OtherNode
        for key in sorted(node):
            _walk(node[key], f"{prefix}{key}/", out)
    elif kind is list:
        for i, child in enumerate(node):
            _walk(child, f"{prefix}{i}/", out)
    elif _is_leaf(node) or kind in (bool, int, float, str):
        out.append((prefix[:-1], node))
    else:
        raise _OtherNode


def _dtype_name(dtype) -> str:
    import numpy as np

    return np.dtype(dtype).name


class OrbaxCheckpoint(Checkpoint):
    """An Orbax checkpoint directory: `.tensors` from its metadata, no array data read.

    `.custom_metadata` is what the saver recorded (`plan.save` records the plan there;
    see `saved_plan`). `.store` is where the arrays are (`orbax_headers.ArrayStore`)
    when planc read the metadata itself, else None. Loading goes through
    `planc.checkpoints.sharded.orbax_save_restore.restore`, which restores each device's
    shard straight into the plan's shardings.

    >>> OrbaxCheckpoint("no/such/dir")
    Traceback (most recent call last):
    ...
    planc.checkpoints.tensors.CheckpointError: no/such/dir: cannot read: no such file or directory
    """

    kind = "orbax"

    def __init__(self, path):
        self.path = os.fspath(path)
        self._tree, custom, self.store = _read_metadata(self.path)
        self.custom_metadata = custom if isinstance(custom, dict) else {}
        self.tensors = tuple(Tensor(name, shape, dtype, self.path)
                             for name, (shape, dtype) in _flatten(self._tree))
        self.chunk_shapes = _chunk_shapes(self._tree)
        for t in self.tensors:
            problem = array_problem(t.shape, t.dtype)
            if problem:
                raise CheckpointError(f"{self.path}: tensor `{shown(t.name)}`: {problem}",
                                      code="P416")
        self._refuse_missing()

    def _refuse_missing(self) -> None:
        """P424 when the tensors planc's writer recorded (`tensors` in the plan record)
        are not all here: a checkpoint two writers mixed, or that lost files. Never fewer
        arrays than were written."""
        record = self.custom_metadata.get(PLAN_KEY)
        recorded = record.get("tensors") if isinstance(record, dict) else None
        if not isinstance(recorded, list):
            return
        present = {t.name for t in self.tensors}
        missing = [n for n in recorded if isinstance(n, str) and n not in present]
        if missing:
            shown_names = ", ".join(f"`{shown(n)}`" for n in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            raise CheckpointError(
                f"{self.path}: the checkpoint lacks {len(missing)} of the {len(recorded)} "
                f"tensors planc wrote into it: {shown_names}{more}", code="P424")

    @property
    def tree(self):
        """Orbax's metadata tree (the checkpoint's structure, one metadata object per leaf)."""
        return self._tree

    def restore(self, abstract: dict) -> dict:
        """Restore the tensors named in `abstract` through Orbax, each into its abstract
        leaf (`jax.ShapeDtypeStruct` with the dtype and sharding wanted); every other
        leaf is skipped (Orbax's PLACEHOLDER), so its bytes are never read. Returns
        `{name: jax.Array}`; Orbax failures raise `CheckpointError`."""
        import jax
        import orbax.checkpoint.experimental.v1 as ocp

        from planc.sources.objects import key_text

        for name in sorted(abstract):
            self.tensor(name)  # an unknown name raises CheckpointError

        def target(keys, leaf):
            return abstract.get("/".join(key_text(k) for k in keys), ocp.PLACEHOLDER)

        want = jax.tree_util.tree_map_with_path(
            target, self._tree, is_leaf=_is_leaf)
        try:
            restored = ocp.load(os.path.abspath(self.path), want)
        except Exception as exc:  # Orbax raises many types; each is one diagnostic here
            raise CheckpointError(f"P416 {self.path}: Orbax cannot restore this checkpoint "
                                  f"({first_line(exc)})") from None
        flat, _ = jax.tree_util.tree_flatten_with_path(restored)
        out = {}
        for keys, leaf in flat:
            name = "/".join(key_text(k) for k in keys)
            if name in abstract:
                out[name] = leaf
                # What this process read: each distinct shard its own devices hold, sized
                # from its index (a shard's `.data` builds an array per device: a
                # quarter of restoring 1,000 small tensors, bench 15).
                indices = leaf.sharding.addressable_devices_indices_map(leaf.shape)
                self.bytes_read += leaf.dtype.itemsize * sum(
                    math.prod(stop - start for start, stop in shard)
                    for shard in {index_bounds(leaf.shape, index)
                                  for index in indices.values()})
        return out

    def read(self, name: str, index: tuple[slice, ...]):
        """`name[index]` as a numpy array.

        Orbax restores whole arrays or whole shards, so this restores the tensor onto one
        device and slices it there: `planc.checkpoints.sharded.orbax_save_restore.restore`
        (what `plan.load` uses) restores straight into a sharding instead, each device
        reading its shard.
        """
        import jax
        import numpy as np

        tensor = self.tensor(name)
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        leaf = jax.ShapeDtypeStruct(tensor.shape, np.dtype(tensor.dtype), sharding=device)
        return np.asarray(self.restore({name: leaf})[name])[tuple(index)]


def saved_plan(checkpoint) -> dict | None:
    """The plan `checkpoint` was saved under, as `plan.save` recorded it, or None.

    The record (`planc.checkpoints.sharded.orbax_save_restore.plan_record`) holds
    `schema`, `plan` (the name), `fingerprint`, `fingerprint_bound`, `devices`, `file`,
    `text` (the plan verbatim) and `planc_version`. A checkpoint Orbax wrote without planc (or whose record is not one
    planc wrote) has none.

    >>> class Saved: custom_metadata = {"planc": {"plan": "a", "fingerprint": "ab", "text": ""}}
    >>> saved_plan(Saved())["plan"]
    'a'
    >>> saved_plan(type("Plain", (), {"custom_metadata": {}})()) is None
    True
    """
    record = (getattr(checkpoint, "custom_metadata", None) or {}).get(PLAN_KEY)
    if not isinstance(record, dict):
        return None
    if not isinstance(record.get("plan"), str) or not isinstance(record.get("fingerprint"), str):
        return None
    return dict(record)
