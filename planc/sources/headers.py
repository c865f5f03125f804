"""Checkpoint files, read from their headers alone.

- ``.safetensors``: an 8-byte little-endian header length, a JSON header, then tensor
  bytes. Only the header is read, and it is checked as the safetensors library checks
  it (`read_safetensors_header`: every file the library refuses is refused here), so a
  truncated or corrupt download is caught without reading a single tensor byte.
- ``*.safetensors.index.json`` (sharded Hugging Face checkpoints): the index's
  ``weight_map`` names the tensors and their shards; each shard's header is read, with
  shard names relative to the index file, and a shard outside the index's directory is
  refused before it is opened (`shard_inside`). Tensors a shard holds but the index
  does not name are ignored, as the loaders that read these indexes ignore them.
- ``.npz``: a zip archive of ``.npy`` files; each member's ``.npy`` header (magic,
  version, a dict with ``descr``, ``fortran_order``, ``shape``) is read through
  ``zipfile`` and the array data is never touched. The path is the member name without
  ``.npy``.

Every file is opened with `planc.fileio.open_counted`, so `planc.fileio.track_reads`
shows how little is read.
"""

from __future__ import annotations

import json
import os
import re

from planc.fileio import open_counted, os_error_text
from planc.frozen import Frozen
from planc.variables import Variable, itemsize
from planc.sources.model import (MAX_ARRAY_BYTES, SAFETENSORS_DTYPES, SourceError,
                                   array_problem, make_variable, one_line, require_fields)

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# A header this large is not a checkpoint header: the largest real ones (tens of
# thousands of tensors) are a few MB. Refusing early stops a garbage length from
# turning into a huge allocation.
MAX_HEADER_BYTES = 100_000_000
_CODE_LIKE = re.compile(r"[A-Za-z0-9_]{1,16}")
_NPY_MAGIC = b"\x93NUMPY"
_MAX_NPY_HEADER = 1 << 16


def _no_duplicate_keys(origin: str):
    def hook(pairs: list[tuple[str, Any]]) -> dict:
        # The dict is built in C; only an object that lost a key to a duplicate is walked.
        out = dict(pairs)
        if len(out) != len(pairs):
            seen: set = set()
            for key, _ in pairs:
                if key in seen:
                    raise SourceError(f"{origin}: the JSON names `{shown(key)}` twice")
                seen.add(key)
        return out
    return hook


def parse_json(text: bytes | str, origin: str, what: str = "file") -> Any:
    """JSON with duplicate keys, NaN and Infinity refused; a SourceError on bad JSON.

    Bytes must be UTF-8 without a byte-order mark, as serde (the safetensors library)
    reads them. Messages give the position, never the text.
    """
    try:
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8")
        return json.loads(text, object_pairs_hook=_no_duplicate_keys(origin),
                          parse_constant=_no_constant, parse_int=_integer)
    except UnicodeDecodeError as e:
        raise SourceError(f"{origin}: {what} is not UTF-8 text ({e.reason} at byte "
                          f"{e.start})") from None
    except json.JSONDecodeError as e:
        raise SourceError(f"{origin}: {what} is not valid JSON: {e.msg} at line "
                          f"{e.lineno} column {e.colno}") from None
    except _Constant as e:
        raise SourceError(f"{origin}: {what} is not valid JSON: {e} is not a JSON "
                          f"value") from None
    except _TooLong as e:
        raise SourceError(f"{origin}: {what} holds an integer of {e.args[0]:,} digits, "
                          "far larger than any size or offset") from None
    except RecursionError:
        raise SourceError(f"{origin}: {what} is nested too deeply") from None


class _Constant(Exception):
    pass


class _TooLong(Exception):
    pass


def _integer(text: str) -> int:
    # Python refuses to convert an integer of more than 4,300 digits (a guard against
    # quadratic time); said here as what it is, not as Python's own advice.
    try:
        return int(text)
    except ValueError:
        raise _TooLong(len(text.lstrip("-"))) from None


def _no_constant(name: str) -> Any:
    # NaN and Infinity are Python's extension, not JSON; serde refuses them.
    raise _Constant(name)


class UnreadableSource(SourceError):
    """The path could not be opened or read at all (missing, a directory, no permission)."""


class ShardOutsideIndex(SourceError):
    """An index's ``weight_map`` names a shard outside the index's own directory."""


class MissingShard(SourceError):
    """An index's ``weight_map`` names a shard file that does not exist."""


class SafetensorsEntry(Frozen):
    """One tensor of a safetensors header, checked: where its bytes lie in the file."""

    # `dtype`: numpy-style name ("bfloat16"); `code`: the header's own ("BF16"); `begin`,
    # `end`: absolute file offsets of the tensor's bytes.
    name: str
    dtype: str
    code: str
    shape: tuple[int, ...]
    begin: int
    end: int


def shown(text: str, limit: int = 120) -> str:
    """A header string as messages show it: control characters escaped, long text cut.

    Names come from the file, so a hostile one must not drive the terminal.

    >>> shown("a\\x1b[2Jb")
    'a\\\\x1b[2Jb'
    """
    out = "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def read_safetensors(path: str | os.PathLike, origin: str | None = None) -> tuple[Variable, ...]:
    """The variables of one ``.safetensors`` file, in header order, from its header."""
    entries = read_safetensors_header(path, origin)
    return tuple(Variable(e.name, e.shape, e.dtype) for e in entries)


def read_safetensors_header(path: str | os.PathLike,
                            origin: str | None = None) -> tuple[SafetensorsEntry, ...]:
    """Every tensor of a ``.safetensors`` file, in header order, checked as the
    safetensors library checks them before it reads a byte of data.

    Refused, as the library refuses them: a header length past the end of the file or
    over 100 MB, a header that is not UTF-8 JSON (a byte-order mark included), a
    ``__metadata__`` that is not an object of strings, a dtype that is not one of the
    format's codes (``"u8"`` is not ``"U8"``), a shape that is not a list of
    non-negative integers, a byte count that does not fit dtype and shape, and data
    offsets that leave a gap, overlap, run past the end or leave bytes after the last
    tensor. Also refused, though the library keeps the last of them: a name given
    twice. Messages name the file and tensor and never quote other bytes of the file.
    """
    origin = origin or os.fspath(path)
    try:
        with open_counted(path) as f:
            size = os.fstat(f.fileno()).st_size
            if size < 8:
                raise SourceError(f"{origin}: not a safetensors file: {size} bytes is too "
                                  f"short to hold the 8-byte header length")
            n = int.from_bytes(f.read(8), "little")  # a u64: no `struct` at start-up
            if n > MAX_HEADER_BYTES:
                raise SourceError(f"{origin}: not a safetensors file: header length {n} "
                                  f"is over the {MAX_HEADER_BYTES // 1_000_000} MB limit")
            if 8 + n > size:
                raise SourceError(f"{origin}: truncated safetensors header: it claims {n} "
                                  f"bytes but only {size - 8} follow")
            raw = f.read(n)
    except SourceError:
        raise
    except OSError as e:
        raise UnreadableSource(f"{origin}: cannot read: {os_error_text(e)}") from None

    header = parse_json(raw, origin, "safetensors header")
    if not isinstance(header, dict):
        raise SourceError(f"{origin}: safetensors header is a JSON "
                          f"{type(header).__name__}, not an object")
    data_start = 8 + n
    data_bytes = size - data_start
    out = []
    for name, entry in header.items():
        if name == "__metadata__":
            _check_metadata(entry, origin)
            continue
        out.append(_safetensors_entry(name, entry, data_bytes, data_start, origin))
    _check_coverage(out, data_start, data_bytes, origin)
    return tuple(out)


def _check_metadata(meta: Any, origin: str) -> None:
    if not isinstance(meta, dict):
        raise SourceError(f"{origin}: safetensors `__metadata__` is a JSON "
                          f"{type(meta).__name__}, not an object of strings")
    for key, value in meta.items():
        if not isinstance(value, str):
            raise SourceError(f"{origin}: safetensors `__metadata__` entry `{shown(key)}` "
                              f"is a JSON {type(value).__name__}, not a string")


def _safetensors_entry(name: str, entry: Any, data_bytes: int, data_start: int,
                       origin: str) -> SafetensorsEntry:
    # Only a message quotes the name (`_who`): escaping every name up front was a fifth
    # of opening a checkpoint of 10,000 tensors (bench 15).
    require_fields(entry, ("dtype", "shape", "data_offsets"), origin,
                   lambda: f"header entry {_who(name)}")
    code = entry["dtype"]
    if not isinstance(code, str) or code not in SAFETENSORS_DTYPES:
        # Only a short code-like name is quoted: a header's free text is not echoed.
        what = (f" '{code}'" if isinstance(code, str) and _CODE_LIKE.fullmatch(code)
                else "")
        raise SourceError(f"{origin}: {_who(name)} has an unknown dtype{what}; safetensors "
                          f"dtypes are " + ", ".join(SAFETENSORS_DTYPES))
    if not isinstance(entry["shape"], list):
        raise SourceError(f"{origin}: {_who(name)} has a shape that is not a list")
    try:
        var = make_variable(name, entry["shape"], code)
    except ValueError as e:
        raise SourceError(f"{origin}: {shown(str(e), 300)}") from None
    problem = array_problem(var.shape, var.dtype)
    if problem:
        raise SourceError(f"{origin}: {_who(name)}: {problem}")
    offsets = entry["data_offsets"]
    if (not isinstance(offsets, list) or len(offsets) != 2
            or not all(type(o) is int and o >= 0 for o in offsets)
            or offsets[0] > offsets[1]):
        raise SourceError(f"{origin}: {_who(name)} has data_offsets that are not [begin, end] "
                          f"with 0 <= begin <= end")
    begin, end = offsets
    if end > MAX_ARRAY_BYTES:  # a number this long is not quoted back
        raise SourceError(f"{origin}: {_who(name)} has data_offsets past 2**63, beyond any file")
    if end > data_bytes:
        raise SourceError(f"{origin}: truncated file: {_who(name)} ends at data byte {end} but "
                          f"the file holds only {data_bytes} data bytes (offsets out of "
                          f"bounds)")
    bits = var.size * int(itemsize(var.dtype) * 8)
    if bits % 8 or end - begin != bits // 8:
        raise SourceError(f"{origin}: {_who(name)} has {end - begin} data bytes but {code} "
                          f"{list(var.shape)} needs {bits / 8:g}")
    return SafetensorsEntry(name, var.dtype, code, var.shape, data_start + begin,
                            data_start + end)


def _who(name: str) -> str:
    return f"`{shown(name)}`"


def _check_coverage(entries: list[SafetensorsEntry], data_start: int, data_bytes: int,
                    origin: str) -> None:
    # The format packs tensors back to back from data byte 0 to the end of the file;
    # the library refuses anything else, since a gap or an overlap means a writer bug
    # or a file spliced from two others.
    at = data_start
    for e in sorted(entries, key=lambda e: (e.begin, e.end)):
        if e.begin != at:
            kind = "overlaps the tensor before it" if e.begin < at else "leaves a gap"
            before = ("the data begins at byte 0" if at == data_start else
                      f"the previous tensor ends at {at - data_start}")
            raise SourceError(f"{origin}: tensor `{shown(e.name)}`: invalid data_offsets: "
                              f"it starts at data byte {e.begin - data_start} where "
                              f"{before} ({kind})")
        at = e.end
    if at != data_start + data_bytes:
        raise SourceError(f"{origin}: {data_start + data_bytes - at} bytes follow the last "
                          f"tensor; a safetensors file ends where its last tensor does")


def read_safetensors_index(path: str | os.PathLike) -> tuple[Variable, ...]:
    """The variables of a sharded checkpoint, in ``weight_map`` order."""
    origin = os.fspath(path)
    index = read_json_file(path)
    return variables_from_index(index, os.path.dirname(os.path.abspath(origin)), origin)


def variables_from_index(index: Any, base_dir: str, origin: str) -> tuple[Variable, ...]:
    """Resolve an already-parsed index file against the shards next to it."""
    return tuple(Variable(e.name, e.shape, e.dtype)
                 for _, e in index_entries(index, base_dir, origin))


def index_entries(index: Any, base_dir: str,
                  origin: str) -> list[tuple[str, SafetensorsEntry]]:
    """``[(shard path, entry)]`` for each tensor of a parsed index, in ``weight_map``
    order, every shard's header checked (`read_safetensors_header`).

    A shard must lie inside `base_dir` (the index's directory): an absolute name, a
    ``..`` that climbs out, or a symbolic link that resolves outside is refused
    (`ShardOutsideIndex`) before the file is opened; a shard that does not exist is a
    `MissingShard`.
    """
    if not isinstance(index, dict) or not isinstance(index.get("weight_map"), dict):
        raise SourceError(f"{origin}: not a safetensors index: no 'weight_map' object")
    weight_map = index["weight_map"]
    shards: dict[str, tuple[str, dict[str, SafetensorsEntry]]] = {}
    out = []
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or not shard:
            raise SourceError(f"{origin}: weight_map gives `{shown(name)}` a shard that is "
                              f"not a file name")
        if shard not in shards:
            shard_path = shard_inside(base_dir, shard, name, origin)
            entries = read_safetensors_header(shard_path,
                                              origin=f"{origin}: shard '{shown(shard)}'")
            shards[shard] = (shard_path, {e.name: e for e in entries})
        shard_path, held = shards[shard]
        entry = held.get(name)
        if entry is None:
            raise SourceError(f"{origin}: weight_map puts `{shown(name)}` in shard "
                              f"'{shown(shard)}', but that shard has no such tensor")
        out.append((shard_path, entry))
    return out


def shard_inside(base_dir: str, shard: str, tensor: str, origin: str) -> str:
    """The path of `shard` under `base_dir`, refused unless it stays inside it."""
    where = f"{origin}: shard '{shown(shard)}' (holding `{shown(tensor)}`)"
    if "\0" in shard:
        raise SourceError(f"{where} is named with a NUL byte, which no file name holds")
    if os.path.isabs(shard) or os.path.splitdrive(shard)[0]:
        raise ShardOutsideIndex(f"{where} is an absolute path; shards are named relative to "
                                f"the index's directory, and planc does not open it")
    parts = shard.replace("\\", "/").split("/")
    if ".." in parts:
        raise ShardOutsideIndex(f"{where} is outside the index's directory ('..'); shards "
                                f"must lie beside the index, and planc does not open it")
    path = os.path.join(base_dir, shard)
    real_base = os.path.realpath(base_dir)
    real = os.path.realpath(path)
    if os.path.commonpath([real_base, real]) != real_base:
        raise ShardOutsideIndex(f"{where} is a link that leads outside the index's "
                                f"directory; shards must lie beside the index, and planc "
                                f"does not open it")
    if not os.path.isfile(real):
        if os.path.exists(real):
            raise MissingShard(f"{where} is not a regular file")
        raise MissingShard(f"{where} does not exist next to the index (missing shard)")
    return path


def read_json_file(path: str | os.PathLike) -> Any:
    """A JSON file's parsed content; SourceError if it cannot be read or parsed."""
    origin = os.fspath(path)
    try:
        with open_counted(path) as f:
            raw = f.readall()
    except OSError as e:
        raise UnreadableSource(f"{origin}: cannot read: {os_error_text(e)}") from None
    return parse_json(raw, origin)


class NpzMember(Frozen):
    """One array of an ``.npz`` archive, from its zip entry and ``.npy`` header."""

    # `name`: the member's name without ".npy"; `member`: the zip member's name;
    # `descr`: the .npy dtype text, byte order included ("<f4"); `data_offset`: the
    # absolute file offset of the array bytes (stored members), None when compressed.
    name: str
    member: str
    variable: Variable
    fortran_order: bool
    descr: str
    data_offset: int | None


def read_npz(path: str | os.PathLike) -> tuple[Variable, ...]:
    """The variables of an ``.npz`` archive, in member order, from the ``.npy`` headers."""
    return tuple(m.variable for m in read_npz_members(path))


def read_npz_members(path: str | os.PathLike) -> tuple[NpzMember, ...]:
    """Every member of an ``.npz`` archive, from the zip directory and ``.npy`` headers."""
    import zipfile  # only an .npz source needs it, not every start-up

    origin = os.fspath(path)
    out = []
    try:
        with open_counted(path) as raw, zipfile.ZipFile(raw) as archive:
            size = os.fstat(raw.fileno()).st_size
            for info in archive.infolist():
                if info.is_dir():
                    continue
                if not info.filename.endswith(".npy"):
                    raise SourceError(f"{origin}: member '{shown(info.filename)}' is not a "
                                      f".npy array")
                name = info.filename[: -len(".npy")]
                where = f"{origin}: member '{shown(info.filename)}'"
                with archive.open(info) as member:
                    descr, shape, fortran, used = _npy_header(member, where)
                var = _npz_variable(name, descr, shape, origin)
                offset = None
                if info.compress_type == zipfile.ZIP_STORED:
                    offset = _stored_data_offset(raw, info, where) + used
                # A compressed member's size is the central directory's, as unpacked:
                # a header that asks for more is a truncated member, not a read error.
                if ((offset is not None and offset + var.nbytes > size)
                        or used + var.nbytes > info.file_size):
                    raise SourceError(f"{where}: truncated: `{shown(name)}` needs "
                                      f"{var.nbytes} data bytes but the member holds "
                                      f"{max(0, info.file_size - used)}")
                out.append(NpzMember(name, info.filename, var, fortran, descr, offset))
    except SourceError:
        raise
    except zipfile.BadZipFile as e:
        raise SourceError(f"{origin}: not an npz archive ({e})") from None
    except OSError as e:
        raise UnreadableSource(f"{origin}: cannot read: {os_error_text(e)}") from None
    except Exception as e:  # zlib errors, bad CRCs and the like in a damaged archive
        raise SourceError(f"{origin}: damaged npz archive: {one_line(e)}") from None
    return tuple(out)


def _stored_data_offset(raw, info, where: str) -> int:
    """Where an uncompressed member's bytes begin: after its local file header, whose
    name and extra field lengths may differ from the central directory's."""
    raw.seek(info.header_offset)
    local = raw.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        raise SourceError(f"{where}: damaged zip entry (no local file header)")
    if info.flag_bits & 0x1:
        raise SourceError(f"{where}: encrypted zip members cannot be read")
    name_len = int.from_bytes(local[26:28], "little")  # little-endian u16s
    extra_len = int.from_bytes(local[28:30], "little")
    return info.header_offset + 30 + name_len + extra_len


def _read_exact(f, n: int, where: str) -> bytes:
    data = f.read(n)
    if len(data) != n:
        raise SourceError(f"{where}: truncated .npy header")
    return data


def _npy_header(f, where: str) -> tuple[Any, Any, bool, int]:
    magic = _read_exact(f, 8, where)
    if magic[:6] != _NPY_MAGIC:
        raise SourceError(f"{where}: not a .npy array (bad magic)")
    major = magic[6]
    if major == 1:
        hlen = int.from_bytes(_read_exact(f, 2, where), "little")
    elif major in (2, 3):
        hlen = int.from_bytes(_read_exact(f, 4, where), "little")
    else:
        raise SourceError(f"{where}: unknown .npy format version {major}.{magic[7]}")
    if hlen > _MAX_NPY_HEADER:
        raise SourceError(f"{where}: .npy header of {hlen} bytes is too large")
    text = _read_exact(f, hlen, where).decode("utf-8" if major == 3 else "latin-1")
    import ast  # for .npy headers alone: not imported by every start-up

    try:
        header = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise SourceError(f"{where}: unreadable .npy header") from None
    if not isinstance(header, dict) or not {"descr", "shape", "fortran_order"} <= set(header):
        raise SourceError(f"{where}: .npy header lacks descr, shape or fortran_order")
    used = 8 + (2 if major == 1 else 4) + hlen
    return header["descr"], header["shape"], bool(header["fortran_order"]), used


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
        raise SourceError(f"{origin}: `{shown(name)}` has shape {shown(repr(shape), 80)}, "
                          f"not a tuple")
    try:
        var = make_variable(name, shape, descr)
    except ValueError as e:
        raise SourceError(f"{origin}: {shown(str(e), 300)}") from None
    problem = array_problem(var.shape, var.dtype)
    if problem:
        raise SourceError(f"{origin}: `{shown(name)}`: {problem}")
    return var
