"""Flax models as model sources: NNX modules and states, and Linen's boxed variables,
with the logical names each variable gives its dimensions.

- An NNX `Module` (or `State`): every variable of `nnx.state(module)`, its path the
  keys joined by "/" (as `nnx.to_flat_state` gives them); its names from the metadata
  `nnx.with_partitioning` sets: `out_sharding` (Flax 0.12), `sharding_names` or
  `sharding` (earlier releases).
- Linen: a `LogicallyPartitioned` box (what `nn.with_logical_partitioning` wraps a
  parameter in) is the variable at the box's path, its `names` the logical names; any
  other box (`nn.Partitioned`, whose names are mesh axes, not logical names) is read as
  the value it holds.

A zero-argument callable that builds an NNX module is run by `planc.sources.objects`
under `jax.eval_shape` with Flax's eager sharding off (`building`), so nothing is
allocated and no mesh is needed to build it.

Nothing here imports flax unless the object handed over is already one of its types.
"""

from __future__ import annotations

import contextlib
import sys

# The metadata keys `nnx.with_partitioning` has stored its names under, newest first.
_NNX_NAME_KEYS = ("out_sharding", "sharding_names", "sharding")


def _nnx():
    if "flax" not in sys.modules:
        return None
    try:
        from flax import nnx
    except Exception:  # a broken or partial flax: not a Flax object, then
        return None
    return nnx


def is_nnx(obj) -> bool:
    """Whether `obj` is an NNX `Module` or `State` (False without flax imported)."""
    nnx = _nnx()
    return nnx is not None and isinstance(obj, (nnx.Module, nnx.State))


def is_linen_box(obj) -> bool:
    """Whether `obj` is one of Linen's partitioning boxes (`nn.Partitioned` and its
    `LogicallyPartitioned`)."""
    if "flax" not in sys.modules:
        return False
    try:
        from flax.core import meta
    except Exception:
        return False
    return isinstance(obj, meta.Partitioned)


def logical_names_of_box(box) -> tuple | None:
    """The logical names of a Linen box: a `LogicallyPartitioned`'s `names`; None for a
    `Partitioned`, whose names are mesh axes."""
    try:
        from flax.linen.spmd import LogicallyPartitioned
    except Exception:  # pragma: no cover - every Flax with Linen has it
        LogicallyPartitioned = ()
    return _names_tuple(box.names) if isinstance(box, LogicallyPartitioned) else None


def nnx_leaves(obj):
    """`(path, array, names)` for each variable of an NNX module or state that holds an
    array, in `nnx.to_flat_state`'s order; `names` as `nnx_names` reads them."""
    nnx = _nnx()
    state = obj if isinstance(obj, nnx.State) else nnx.state(obj)
    for keys, var in nnx.to_flat_state(state):
        value = var.get_value() if hasattr(var, "get_value") else var.value
        if hasattr(value, "shape") and hasattr(value, "dtype"):  # not a Python counter
            yield "/".join(str(k) for k in keys), value, nnx_names(var)


def box_names(box) -> tuple | None:
    """The logical names of a Flax box found in a pytree: an NNX variable's, or a Linen
    `LogicallyPartitioned`'s; None for any other box."""
    if is_linen_box(box):
        return logical_names_of_box(box)
    return nnx_names(box)


def nnx_names(var) -> tuple | None:
    """The logical names an NNX variable's metadata gives its dimensions, or None."""
    metadata = var.get_metadata() if hasattr(var, "get_metadata") else {}
    for key in _NNX_NAME_KEYS:
        names = metadata.get(key)
        if names is not None:
            return _names_tuple(names)
    return None


def _names_tuple(names) -> tuple | None:
    """`names` as a tuple of str or None; None where they are not names (a
    `NamedSharding` or `PartitionSpec` already bound to a mesh's axes)."""
    if isinstance(names, str):
        names = (names,)
    try:
        out = tuple(names)
    except TypeError:
        return None
    if not all(n is None or isinstance(n, str) for n in out):
        return None
    return out


@contextlib.contextmanager
def building():
    """Flax's eager sharding off while a model is built abstractly: with it on (Flax
    0.12's default), a variable that names its dimensions needs a mesh to be made."""
    nnx = _nnx()
    if nnx is None or not hasattr(nnx, "use_eager_sharding"):
        yield
        return
    with nnx.use_eager_sharding(False):
        yield
