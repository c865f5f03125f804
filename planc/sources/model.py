"""The model record (`Model`) and what every model source and checkpoint reader shares: the
error type, dtype names, the checks of a variable's path, shape and dtype."""

from __future__ import annotations

import operator
from collections import namedtuple

from planc.diagnostics.input_error import InputError
from planc.variables import _ITEMSIZE, Variable, any_line_break, path_of

# No `typing` on lint's path (docs/architecture.md, "Lint's path").
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any


class SourceError(InputError):
    """A model source could not be read or understood (an `InputError`).

    The message is one line, names the source and says why, e.g.
    ``model.safetensors: truncated file: header claims 1048576 bytes but only 10 follow``.
    The CLI prints it and exits with status 2.
    """


class Model(namedtuple("Model", ("variables", "weights_names"), defaults=(None,))):
    """What a model source gives: its `variables` (a tuple of `Variable`s) and, for a
    Keras model read with `weights_names=True`, the datasets its ``save_weights`` writes
    them under (a `planc.sources.keras_weights.WeightsNames`; None for every other
    source). A `collections.namedtuple`, not a `typing.NamedTuple` (see
    `planc.variables.Variable`)."""

    __slots__ = ()


# safetensors dtype codes (the "dtype" field of a header entry). F8_E4M3 is the "fn"
# variant (no infinities) in every library that writes it: torch, paddle, candle.
SAFETENSORS_DTYPES = {
    "BOOL": "bool",
    "U8": "uint8", "I8": "int8",
    "U16": "uint16", "I16": "int16", "F16": "float16", "BF16": "bfloat16",
    "U32": "uint32", "I32": "int32", "F32": "float32",
    "U64": "uint64", "I64": "int64", "F64": "float64",
    "C64": "complex64",
    "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F8_E8M0": "float8_e8m0fnu",
    "F4": "float4_e2m1fn",
    "F6_E2M3": "float6_e2m3fn", "F6_E3M2": "float6_e3m2fn",
}


def require_fields(entry: Any, keys: tuple[str, ...], origin: str, who) -> None:
    """SourceError unless `entry`, one record of a JSON document, is an object with every
    one of `keys`. `who()` names the record in the message; it is called only then, as
    quoting a tensor's name costs."""
    if not isinstance(entry, dict):
        raise SourceError(f"{origin}: {who()} is not an object")
    missing = [k for k in keys if k not in entry]
    if missing:
        raise SourceError(f"{origin}: {who()} lacks " + ", ".join(f"'{k}'" for k in missing))


def normalize_dtype(dtype: Any) -> str:
    """The numpy-style name planc uses for `dtype`, or ValueError if it has none.

    Accepts numpy dtypes and scalar types, jax dtypes, ml_dtypes types (bfloat16,
    float8_*), Keras dtype strings, safetensors codes (``"BF16"``, ``"F8_E4M3"``),
    numpy type strings (``"<f4"``) and torch dtypes. The result is always a key of
    `planc.variables._ITEMSIZE`, so byte counts are exact.

    >>> normalize_dtype("BF16"), normalize_dtype("<f4")
    ('bfloat16', 'float32')
    """
    name = _dtype_name(dtype)
    if name not in _ITEMSIZE:
        raise ValueError(f"unsupported dtype {_show(dtype)}")
    return name


def _show(dtype: Any) -> str:
    return repr(dtype) if isinstance(dtype, str) else f"'{dtype}'"


def _dtype_name(dtype: Any) -> str:
    if isinstance(dtype, str):
        text = dtype.strip()
        if text in _ITEMSIZE:
            return text
        # Exact, case-sensitive: numpy reads "u8" as uint64 and "U8" as an 8-char
        # string, so only the upper-case safetensors spellings are taken as codes.
        if text in SAFETENSORS_DTYPES:
            return SAFETENSORS_DTYPES[text]
        if text.startswith("torch."):
            return _dtype_name(text[len("torch."):])
        return _numpy_name(text, dtype)
    if type(dtype).__module__ == "torch":
        return _dtype_name(str(dtype))
    return _numpy_name(dtype, dtype)


def _numpy_name(value: Any, original: Any) -> str:
    import numpy as np

    try:
        # ml_dtypes registers bfloat16, float8_* and int4 with numpy; jax depends on it.
        import ml_dtypes  # noqa: F401
    except ImportError:
        pass
    try:
        return np.dtype(value).name
    except Exception:
        raise ValueError(f"unknown dtype {_show(original)}") from None


# Dtype objects already named: a model has a handful of dtypes and many variables, and
# numpy's own `dtype.name` costs microseconds each time.
DTYPE_NAMES: dict = {}

# Dimensions are exact integers of any size, but every memory figure (bytes, a device's
# share, a ratio) is also shown as a float, which ends near 1.8e308: a variable of more
# elements than this (times 16 bytes, times a hundred thousand variables, still a float)
# is refused where it is read, rather than overflowing in a report.
MAX_ELEMENTS = 10**300


def make_variable(path: Any, shape: Any, dtype: Any) -> Variable:
    """A checked `Variable`; ValueError says what is wrong with path, shape or dtype."""
    # The common case, checked cheaply: an ASCII path on one line, a tuple of plain
    # non-negative ints (what numpy and jax shapes are) or a list of them (what JSON
    # headers and manifests give), a dtype seen before.
    if (type(path) is str and path and path.isascii() and "\n" not in path
            and "\r" not in path and (type(shape) is tuple or type(shape) is list)):
        try:
            name = DTYPE_NAMES.get(dtype)
        except TypeError:  # an unhashable dtype-like object
            name = None
        if name is not None:
            count = 1
            for d in shape:
                if type(d) is not int or d < 0:
                    break
                count *= d
            else:
                if count <= MAX_ELEMENTS:
                    return Variable(path, shape if type(shape) is tuple else tuple(shape),
                                    name)
    return _checked_variable(path, shape, dtype)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _checked_variable(path: Any, shape: Any, dtype: Any) -> Variable:
    if not isinstance(path, str) or not path:
        raise ValueError(f"variable path must be a non-empty string, not {path!r}")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as e:
        # A lone surrogate: what Python makes of a name whose bytes are not UTF-8. No
        # regex engine, file format or terminal can take it; say where it is.
        shown = path.encode("utf-8", "backslashreplace").decode("utf-8")
        raise ValueError(f"variable path `{shown}` is not valid Unicode text: a lone "
                         f"surrogate U+{ord(path[e.start]):04X} at index {e.start}") from None
    if "\n" in path or "\r" in path:
        raise ValueError(_LINE_BREAK.format(path=path))
    try:
        dims = tuple(shape)
    except TypeError:
        raise ValueError(f"`{path}` has shape {shape!r}, which is not a sequence") from None
    checked = []
    for axis, d in enumerate(dims):
        if isinstance(d, bool):
            raise ValueError(f"`{path}` has shape {_shape_text(dims)}: dimension {axis} "
                             f"is {d!r}, not an integer")
        try:
            n = operator.index(d)
        except TypeError:
            raise ValueError(f"`{path}` has shape {_shape_text(dims)}: dimension {axis} "
                             f"is {d!r}, not an integer") from None
        if n < 0:
            raise ValueError(f"`{path}` has shape {_shape_text(dims)}: dimension {axis} "
                             f"is negative")
        checked.append(n)
    count = 1
    for n in checked:
        count *= n
    if count > MAX_ELEMENTS:
        raise ValueError(f"`{path}` has shape {_shape_text(dims)}: more than 10**300 "
                         "elements, beyond any memory figure planc can show")
    try:
        name = normalize_dtype(dtype)
    except ValueError as e:
        raise ValueError(f"`{path}` has an {e}") from None
    if _hashable(dtype) and len(DTYPE_NAMES) < 1024:
        DTYPE_NAMES[dtype] = name
    return Variable(path, tuple(checked), name)


# What numpy (and so every loader) can build: at most 64 dimensions (NPY_MAXDIMS), and
# a byte count below 2**63 with zero-length dimensions left out (numpy refuses
# (0, 2**62, 2**62) float32 as too big though it holds nothing).
MAX_RANK = 64
MAX_ARRAY_BYTES = (1 << 63) - 1


def array_problem(shape: tuple[int, ...], dtype: str) -> str | None:
    """Why no array of `shape` and `dtype` can exist, or None when one can.

    A checkpoint header describing such a tensor is refused when it is read, by
    `planc lint --checkpoint` and `plan.load` alike, not when the loader builds it.

    >>> array_problem((0, 2**62, 2**62), "float32")
    'shape (0, 2**62, 2**62) of float32 would take more than 2**63 bytes (zero-length dimensions left out), more than any array can hold'
    >>> array_problem((1,) * 65, "float32")
    'rank 65 is more than the 64 dimensions an array can have'
    >>> array_problem((4096, 4096), "bfloat16") is None
    True
    """
    if len(shape) > MAX_RANK:
        return f"rank {len(shape)} is more than the {MAX_RANK} dimensions an array can have"
    n = max(1, int(_ITEMSIZE.get(dtype, 4) + 0.5))
    for d in shape:
        if d:
            n *= d
            if n > MAX_ARRAY_BYTES:
                return (f"shape {_shape_text(shape)} of {dtype} would take more than 2**63 "
                        f"bytes (zero-length dimensions left out), more than any array can "
                        f"hold")
    return None


def _shape_text(dims: tuple) -> str:
    # A hostile header may hold thousands of dimensions: the first few are enough.
    shown = ", ".join(map(_dim_text, dims[:8]))
    if len(dims) > 8:
        return f"({shown}, ... {len(dims)} dimensions)"
    return "(" + shown + ("," if len(dims) == 1 else "") + ")"


def _dim_text(d) -> str:
    """`d` as a message shows it: a large power of two as `2**k`, an integer too long to
    read by its size.

    >>> _dim_text(8), _dim_text(2**62), _dim_text(10**300)
    ('8', '2**62', 'a 997-bit integer')
    """
    if isinstance(d, int) and not isinstance(d, bool):
        if d >= 2**20 and d & (d - 1) == 0:
            return f"2**{d.bit_length() - 1}"
        if abs(d) >= 2**128:
            return f"a {abs(d).bit_length()}-bit integer"
    return str(d)


# Python's `$` matches before a final newline, RE2's does not, and no framework names a
# variable across lines: refused rather than answered two ways.
_LINE_BREAK = ("variable path {path!r} holds a line break, which no rule can match the "
               "same way in every target")


def finish(variables: Iterable[Variable], origin: str) -> tuple[Variable, ...]:
    """The variables as a tuple, after the checks every source shares."""
    out = tuple(variables)
    if not out:
        raise SourceError(f"{origin}: no variables found")
    # A line break refused for every source in one scan of all the paths: the pytree
    # reader's fast path leaves this check to here.
    if any_line_break(map(path_of, out)):
        for v in out:
            if "\n" in v.path or "\r" in v.path:
                raise SourceError(f"{origin}: {_LINE_BREAK.format(path=v.path)}")
    if len(set(map(path_of, out))) == len(out):
        return out
    seen: set[str] = set()
    for v in out:
        if v.path in seen:
            raise SourceError(f"{origin}: two variables have the path `{v.path}`")
        seen.add(v.path)
    return out


def one_line(exc: BaseException, limit: int = 300) -> str:
    """`Type: first line of the message`, short enough for a one-line error."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
