"""Checkpoint files, read from their headers alone.

- ``.safetensors``: an 8-byte little-endian header length, a JSON header, then tensor
  bytes. Only the header is read; each entry's byte range is checked against the file
  size and against its dtype and shape, so a truncated download is caught without
  reading a single tensor byte.
- ``*.safetensors.index.json`` (sharded Hugging Face checkpoints): the index's
  ``weight_map`` names the tensors and their shards; each shard's header is read, with
  shard names relative to the index file. Tensors a shard holds but the index does not
  name are ignored, as the loaders that read these indexes ignore them.
- ``.npz``: a zip archive of ``.npy`` files; each member's ``.npy`` header (magic,
  version, a dict with ``descr``, ``fortran_order``, ``shape``) is read through
  ``zipfile`` and the array data is never touched. The path is the member name without
  ``.npy``.

Every file is opened with `planc.fileio.open_counted`, so `planc.fileio.track_reads`
shows how little is read.
"""

from __future__ import annotations

import ast
import json
import os
import struct
import zipfile
from typing import Any

from planc.fileio import open_counted
from planc.variables import Variable, itemsize
from planc.sources._common import SourceError, make_variable, one_line

# A header this large is not a checkpoint header: the largest real ones (tens of
# thousands of tensors) are a few MB. Refusing early stops a garbage length from
# turning into a huge allocation.
MAX_HEADER_BYTES = 100 * 1024 * 1024
_NPY_MAGIC = b"\x93NUMPY"
_MAX_NPY_HEADER = 1 << 16


def _no_duplicate_keys(origin: str):
    def hook(pairs: list[tuple[str, Any]]) -> dict:
        out: dict = {}
        for key, value in pairs:
            if key in out:
                raise SourceError(f"{origin}: the JSON names `{key}` twice")
            out[key] = value
        return out
    return hook


def parse_json(text: bytes | str, origin: str, what: str = "file") -> Any:
    """JSON with duplicate keys refused; a SourceError on bad JSON."""
    try:
        return json.loads(text, object_pairs_hook=_no_duplicate_keys(origin))
    except SourceError:
        raise
    except UnicodeDecodeError as e:
        raise SourceError(f"{origin}: {what} is not UTF-8 text ({e.reason} at byte "
                          f"{e.start})") from None
    except json.JSONDecodeError as e:
        raise SourceError(f"{origin}: {what} is not valid JSON: {e.msg} at line "
                          f"{e.lineno} column {e.colno}") from None


def read_safetensors(path: str | os.PathLike, origin: str | None = None) -> tuple[Variable, ...]:
    """The variables of one ``.safetensors`` file, in header order, from its header."""
    origin = origin or os.fspath(path)
    try:
        with open_counted(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise SourceError(f"{origin}: not a safetensors file: {size} bytes is too "
                                  f"short to hold the 8-byte header length")
            (n,) = struct.unpack("<Q", f.read(8))
            if n > MAX_HEADER_BYTES:
                raise SourceError(f"{origin}: not a safetensors file: header length {n} "
                                  f"is over the {MAX_HEADER_BYTES // (1024 * 1024)} MB limit")
            if 8 + n > size:
                raise SourceError(f"{origin}: truncated safetensors header: it claims {n} "
                                  f"bytes but only {size - 8} follow")
            raw = f.read(n)
    except SourceError:
        raise
    except OSError as e:
        raise SourceError(f"{origin}: cannot read: {e.strerror or e}") from None

    header = parse_json(raw, origin, "safetensors header")
    if not isinstance(header, dict):
        raise SourceError(f"{origin}: safetensors header is a JSON "
                          f"{type(header).__name__}, not an object")
    data_bytes = size - 8 - n
    out = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out.append(_safetensors_entry(name, entry, data_bytes, origin))
    return tuple(out)


def _safetensors_entry(name: str, entry: Any, data_bytes: int, origin: str) -> Variable:
    if not isinstance(entry, dict):
        raise SourceError(f"{origin}: header entry `{name}` is not an object")
    missing = [k for k in ("dtype", "shape", "data_offsets") if k not in entry]
    if missing:
        raise SourceError(f"{origin}: header entry `{name}` lacks "
                          + ", ".join(f"'{k}'" for k in missing))
    if not isinstance(entry["dtype"], str):
        raise SourceError(f"{origin}: `{name}` has dtype {entry['dtype']!r}, not a string")
    if not isinstance(entry["shape"], list):
        raise SourceError(f"{origin}: `{name}` has shape {entry['shape']!r}, not a list")
    try:
        var = make_variable(name, entry["shape"], entry["dtype"])
    except ValueError as e:
        raise SourceError(f"{origin}: {e}") from None

    offsets = entry["data_offsets"]
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets)
            or offsets[0] > offsets[1]):
        raise SourceError(f"{origin}: `{name}` has data_offsets {offsets!r}; expected "
                          f"[begin, end] with 0 <= begin <= end")
    begin, end = offsets
    if end > data_bytes:
        raise SourceError(f"{origin}: truncated file: `{name}` ends at data byte {end} but "
                          f"the file holds only {data_bytes} data bytes")
    expected = var.size * itemsize(var.dtype)
    if end - begin != expected:
        raise SourceError(f"{origin}: `{name}` has {end - begin} data bytes but "
                          f"{entry['dtype']} {list(var.shape)} needs {expected:g}")
    return var


def read_safetensors_index(path: str | os.PathLike) -> tuple[Variable, ...]:
    """The variables of a sharded checkpoint, in ``weight_map`` order."""
    origin = os.fspath(path)
    index = read_json_file(path)
    return variables_from_index(index, os.path.dirname(os.path.abspath(origin)), origin)


def variables_from_index(index: Any, base_dir: str, origin: str) -> tuple[Variable, ...]:
    """Resolve an already-parsed index file against the shards next to it."""
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise SourceError(f"{origin}: not a safetensors index: no 'weight_map' object")
    weight_map = index["weight_map"]
    shards: dict[str, dict[str, Variable]] = {}
    out = []
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise SourceError(f"{origin}: weight_map gives `{name}` the shard {shard!r}, "
                              f"not a file name")
        if shard not in shards:
            shard_path = os.path.join(base_dir, shard)
            if not os.path.isfile(shard_path):
                raise SourceError(f"{origin}: shard '{shard}' (holding `{name}`) does not "
                                  f"exist next to the index")
            shard_vars = read_safetensors(shard_path, origin=f"{origin}: shard '{shard}'")
            shards[shard] = {v.path: v for v in shard_vars}
        var = shards[shard].get(name)
        if var is None:
            raise SourceError(f"{origin}: weight_map puts `{name}` in shard '{shard}', "
                              f"but that shard has no such tensor")
        out.append(var)
    return tuple(out)


def read_json_file(path: str | os.PathLike) -> Any:
    """A JSON file's parsed content; SourceError if it cannot be read or parsed."""
    origin = os.fspath(path)
    try:
        with open_counted(path) as f:
            raw = f.readall()
    except OSError as e:
        raise SourceError(f"{origin}: cannot read: {e.strerror or e}") from None
    return parse_json(raw, origin)


def read_npz(path: str | os.PathLike) -> tuple[Variable, ...]:
    """The variables of an ``.npz`` archive, in member order, from the ``.npy`` headers."""
    origin = os.fspath(path)
    out = []
    try:
        with open_counted(path) as raw, zipfile.ZipFile(raw) as archive:
            for info in archive.infolist():
                if info.is_dir():
                    continue
                if not info.filename.endswith(".npy"):
                    raise SourceError(f"{origin}: member '{info.filename}' is not a .npy "
                                      f"array")
                name = info.filename[: -len(".npy")]
                with archive.open(info) as member:
                    descr, shape = _npy_header(member, f"{origin}: member '{info.filename}'")
                out.append(_npz_variable(name, descr, shape, origin))
    except SourceError:
        raise
    except zipfile.BadZipFile as e:
        raise SourceError(f"{origin}: not an npz archive ({e})") from None
    except OSError as e:
        raise SourceError(f"{origin}: cannot read: {e.strerror or e}") from None
    except Exception as e:  # zlib errors, bad CRCs and the like in a damaged archive
        raise SourceError(f"{origin}: damaged npz archive: {one_line(e)}") from None
    return tuple(out)


def _read_exact(f, n: int, where: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise SourceError(f"{where}: truncated .npy header")
    return data


def _npy_header(f, where: str) -> tuple[Any, Any]:
    magic = _read_exact(f, 8, where)
    if magic[:6] != _NPY_MAGIC:
        raise SourceError(f"{where}: not a .npy array (bad magic)")
    major = magic[6]
    if major == 1:
        (hlen,) = struct.unpack("<H", _read_exact(f, 2, where))
    elif major in (2, 3):
        (hlen,) = struct.unpack("<I", _read_exact(f, 4, where))
    else:
        raise SourceError(f"{where}: unknown .npy format version {major}.{magic[7]}")
    if hlen > _MAX_NPY_HEADER:
        raise SourceError(f"{where}: .npy header of {hlen} bytes is too large")
    text = _read_exact(f, hlen, where).decode("utf-8" if major == 3 else "latin-1")
    try:
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SourceError(f"{where}: unreadable .npy header") from None
    if not isinstance(header, dict) or not {"descr", "shape", "fortran_order"} <= set(header):
        raise SourceError(f"{where}: .npy header lacks descr, shape or fortran_order")
    return header["descr"], header["shape"]


def _npz_variable(name: str, descr: Any, shape: Any, origin: str) -> Variable:
    if not isinstance(descr, str):
        raise SourceError(f"{origin}: `{name}` has a structured dtype, which is not a "
                          f"model variable")
    if descr.lstrip("<>|=").startswith("V"):
        # numpy has no name for ml_dtypes types in a .npy header and stores them as
        # raw bytes, so a bfloat16 array comes back as V2 and its real dtype is lost.
        raise SourceError(f"{origin}: `{name}` has raw-bytes dtype '{descr}' (numpy stores "
                          f"bfloat16 and float8 this way and loses the type); save to "
                          f"safetensors or a planc manifest instead")
    if not isinstance(shape, tuple):
        raise SourceError(f"{origin}: `{name}` has shape {shape!r}, not a tuple")
    try:
        return make_variable(name, shape, descr)
    except ValueError as e:
        raise SourceError(f"{origin}: {e}") from None
