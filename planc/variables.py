"""The model side of validation: a variable is a path, a shape and a dtype.

Every model source (pytree, Keras model, checkpoint header, manifest) is reduced to a
tuple of `Variable`s before the resolver sees it, so the resolver never needs jax or
keras.
"""

from __future__ import annotations

from collections import namedtuple
from operator import attrgetter

# Bytes per element of the dtypes planc meets in checkpoints and pytrees. Sub-byte types
# count as fractions so a 4-bit checkpoint's memory figures stay honest.
_ITEMSIZE = {
    "bool": 1, "int4": 0.5, "uint4": 0.5, "int8": 1, "uint8": 1,
    "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
    "float8_e4m3b11fnuz": 1, "float8_e8m0fnu": 1, "float4_e2m1fn": 0.5,
    "float6_e2m3fn": 0.75, "float6_e3m2fn": 0.75,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex64": 8, "complex128": 16,
}


path_of = attrgetter("path")  # a variable's path, read at C speed over many


def any_line_break(paths) -> bool:
    """Whether any of `paths` holds a line break: one scan of them all, not two a path.

    >>> any_line_break(["a/kernel", "b/bias"]), any_line_break(["a", "b\\n"])
    (False, True)
    """
    joined = "\0".join(paths)
    return "\n" in joined or "\r" in joined


def itemsize(dtype: str) -> float:
    """Bytes per element of `dtype` (a numpy-style name); unknown names count as 4."""
    return _ITEMSIZE.get(dtype, 4)


class Variable(namedtuple("Variable", ("path", "shape", "dtype", "names"),
                          defaults=("float32", None))):
    """One model variable as planc sees it: its `path` (str), `shape` (a tuple of ints),
    `dtype` (a numpy-style name, "float32" unless given) and `names`, the logical names of
    its dimensions where the model carries them (a tuple of str or None per dimension, as
    Flax's `nnx.with_partitioning` sets them; None when it carries none).

    A named tuple: every source builds one per variable, a hundred thousand for a large
    model, and a tuple is built in one step where a frozen dataclass writes each field
    through `object.__setattr__`. Made by `collections.namedtuple`, as planc's other named
    tuples: `typing.NamedTuple` imports typing (~16 M instructions of a lint's start-up,
    which needs it nowhere else) and compiles each field's annotation, and the first
    `compile()` of a process builds Python's AST types (~10 M more).

    >>> Variable("dense/kernel", (784, 128), "float32").nbytes
    401408
    """

    __slots__ = ()

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return int(self.size * itemsize(self.dtype))
