"""An Orbax checkpoint's tree metadata, read in one batch: the tuned path of `orbax_dir`.

`orbax.checkpoint.experimental.v1.metadata` opens every array through tensorstore to
learn its shape and dtype: 0.55 s of CPU for 1,000 tensors, a fifth of restoring them
(bench 15), and then Orbax's restore opens each again. The same facts are the zarr
header of each array (`.zarray`, or `zarr.json` for zarr3) inside the checkpoint's OCDBT
database: tensorstore reads all of them in one batch in 0.03 s. So for the layouts
Orbax writes by default (OCDBT, zarr 2 or 3, trees of dicts and lists whose leaves are
arrays, scalars and strings) the tree is read here, and for anything else (`None`)
`orbax_dir` asks Orbax: every unusual or damaged checkpoint still gets Orbax's reading
and planc's diagnostics of it. tests/checkpoints/test_orbax_headers.py checks that both
readings agree, leaf by leaf, on the trees planc and Orbax write. Where the arrays are
(`ArrayStore`) is kept for `orbax_tensorstore`, which restores them.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

__all__ = ["read_tree", "ArrayStore"]

_ARRAYS = ("jax.Array", "np.ndarray")
_SEQUENCE, _DICT = 1, 2  # Orbax's key types (KeyType.SEQUENCE, KeyType.DICT)


class ArrayHeader:
    """What Orbax's metadata says of an array leaf, as `orbax_dir` reads it."""

    __slots__ = ("shape", "dtype", "storage_metadata")

    def __init__(self, shape, dtype, chunk_shape):
        self.shape = shape
        self.dtype = dtype
        self.storage_metadata = _Storage(chunk_shape)


class _Storage:
    __slots__ = ("chunk_shape",)

    def __init__(self, chunk_shape):
        self.chunk_shape = chunk_shape


@dataclass(frozen=True)
class ArrayStore:
    """Where and how the arrays of a checkpoint this reader knows are stored, as Orbax's
    restore opens them (`planc.checkpoints.sharded.orbax_tensorstore`)."""

    item: str  # the directory of the OCDBT database, absolute
    zarr3: bool  # zarr 3, else 2
    # Whether a chunk missing from the database reads as the fill value. A writer that
    # recorded `store_array_data_equal_to_fill_value` stored every chunk: one missing is
    # damage, and Orbax's restore refuses it.
    fill_missing: bool
    arrays: dict[str, str]  # {tensor name as planc names it: the array's name in the database}


def read_tree(path: str, item: str):
    """(tree, custom metadata, `ArrayStore`) of the Orbax checkpoint at `path` whose tree
    metadata is in the directory `item` (`path` itself in Orbax's v0 layout, `path/state`
    in v1), the tree and custom metadata as `orbax.checkpoint.experimental.v1.metadata`
    gives them, or None when the checkpoint is not one this reader knows (the caller then
    asks Orbax).

    >>> read_tree("no/such/dir", "no/such/dir") is None
    True
    """
    try:
        return _read(path, item)
    except Exception:  # any surprise is Orbax's to read and to diagnose
        return None


def _read(path: str, item: str):
    with open(os.path.join(item, "_METADATA"), "rb") as f:
        record = json.load(f)
    zarr3 = record.get("use_zarr3")
    # Orbax reads an absent flag as False (tree.py, InternalTreeMetadata.from_json).
    complete = record.get("store_array_data_equal_to_fill_value", False)
    if record.get("use_ocdbt") is not True or type(zarr3) is not bool or type(complete) is not bool:
        return None
    leaves = {}  # keys -> (value type, param name)
    for entry in record["tree_metadata"].values():
        keys = _keys(entry["key_metadata"])
        kind = _value_type(entry["value_metadata"])
        if keys is None or kind is None:
            return None
        leaves[keys] = (kind, ".".join(k for k, _ in keys))
    headers = _zarr_headers(item, [name for kind, name in leaves.values() if kind != "string"],
                            zarr3)
    if headers is None:
        return None
    flat = {}
    for keys, (kind, name) in leaves.items():
        if kind == "string":
            flat[keys] = "string"
            continue
        shape, dtype, chunks = headers[name]
        if kind == "scalar":
            # Orbax reads back only these (not a bool: "Unsupported dtype").
            if shape != () or dtype.name not in ("int64", "float64"):
                return None
            flat[keys] = dtype.type(0).item()
        else:
            flat[keys] = ArrayHeader(shape, dtype, chunks)
    # planc names a leaf by its keys joined with "/", Orbax its array with ".".
    arrays = {"/".join(k for k, _ in keys): name for keys, (kind, name) in leaves.items()
              if kind != "string"}
    store = ArrayStore(os.path.abspath(item), zarr3, fill_missing=not complete, arrays=arrays)
    return _nest(flat), _custom_metadata(path), store


def _keys(entries) -> tuple | None:
    """((key, key type), ...) of a leaf's `key_metadata`, or None unless every entry is
    exactly what Orbax writes for a dict key or a list index."""
    out = []
    for entry in entries:
        if type(entry) is not dict or set(entry) != {"key", "key_type"} \
                or type(entry["key"]) is not str or entry["key_type"] not in (_SEQUENCE, _DICT) \
                or type(entry["key_type"]) is not int:
            return None
        out.append((entry["key"], entry["key_type"]))
    return tuple(out) or None


def _value_type(value) -> str | None:
    """A leaf's value type from its `value_metadata`, or None unless it is exactly what
    Orbax writes for an array, a scalar or a string it will read back."""
    if type(value) is not dict or not {"value_type", "skip_deserialize"} <= set(value) \
            or not set(value) <= {"value_type", "skip_deserialize", "write_shape"}:
        return None
    shape = value.get("write_shape", [])
    if value["skip_deserialize"] is not False or type(shape) is not list \
            or any(type(d) is not int or d < 0 for d in shape):
        return None
    kind = value["value_type"]
    return kind if kind in _ARRAYS or kind in ("scalar", "string") else None


def _custom_metadata(path: str):
    """What the saver recorded: Orbax keeps it in the checkpoint's `_CHECKPOINT_METADATA`
    in both layouts."""
    try:
        with open(os.path.join(path, "_CHECKPOINT_METADATA"), "rb") as f:
            return json.load(f).get("custom_metadata")
    except FileNotFoundError:
        return None


def _zarr_headers(item: str, names: list[str], zarr3: bool):
    """{param name: (shape, numpy dtype, chunk shape)} from each array's zarr header,
    all read in one batch; None when one is missing or not what Orbax writes."""
    import ml_dtypes  # noqa: F401  (bfloat16 and float8 dtype names)
    import numpy as np
    import tensorstore as ts

    store = ts.KvStore.open({"driver": "ocdbt",
                             "base": {"driver": "file", "path": os.path.abspath(item)}}).result()
    header = "zarr.json" if zarr3 else ".zarray"
    reads = [store.read(f"{name}/{header}") for name in names]
    out = {}
    for name, read in zip(names, reads):
        result = read.result()
        if result.state != "value":
            return None
        meta = json.loads(result.value)
        if zarr3:
            if meta.get("zarr_format") != 3 or meta.get("node_type") != "array":
                return None
            dtype = np.dtype(meta["data_type"])
            chunks = meta["chunk_grid"]["configuration"]["chunk_shape"]
            for codec in meta.get("codecs") or ():
                if codec.get("name") == "sharding_indexed":  # reads are of the inner chunks
                    chunks = codec["configuration"]["chunk_shape"]
        else:
            if meta.get("zarr_format") != 2 or meta.get("filters"):
                return None
            dtype = np.dtype(meta["dtype"])
            chunks = meta["chunks"]
        shape = tuple(int(d) for d in meta["shape"])
        chunks = tuple(int(c) for c in chunks)
        if len(chunks) != len(shape):
            return None
        out[name] = (shape, dtype, chunks)
    return out


def _nest(flat: dict):
    """The nested dicts and lists whose leaves `flat` keys by (key, key type) paths, as
    Orbax nests its metadata. Raises ValueError when a list's indices are not 0..n-1 or
    a node is both a leaf and a container (the caller then asks Orbax)."""
    root: dict = {}
    kinds: dict = {}  # path -> the key type of its children
    for keys, leaf in flat.items():
        node = root
        for depth, (key, kind) in enumerate(keys):
            if kinds.setdefault(keys[:depth], kind) != kind:
                raise ValueError("mixed key types")
            if depth == len(keys) - 1:
                if key in node:
                    raise ValueError("a leaf and a container")
                node[key] = leaf
            else:
                node = node.setdefault(key, {})
                if not isinstance(node, dict):
                    raise ValueError("a leaf and a container")
    return _lists(root, (), kinds)


def _lists(node, path: tuple, kinds: dict):
    if not isinstance(node, dict):
        return node
    kind = kinds[path]
    children = {k: _lists(v, path + ((k, kind),), kinds) for k, v in node.items()}
    if kind != _SEQUENCE:
        return children
    if set(children) != {str(i) for i in range(len(children))}:
        raise ValueError("a list with missing indices")
    return [children[str(i)] for i in range(len(children))]
