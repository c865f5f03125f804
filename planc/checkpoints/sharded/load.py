"""`plan.load`: a checkpoint put on the plan's mesh, each device reading only its shard.

The order of work is the guarantee:

1. The checkpoint is opened from its headers (`planc.checkpoints.open_checkpoint`);
   a damaged file is a `PlanError` (P410-P413, P415-P416) naming the file.
2. The model's variables come from `like` (none: one per tensor), the tensors are
   renamed and paired with them (`planc.checkpoints.binding.bind_checkpoint`), and
   each variable's sharding is resolved from the plan: a `like` that is a plain 2-tuple
   is `(params, opt_state)`, whose state leaves take their parameters' slot layouts
   (`state` rules, or mirroring), in host memory where a rule says `on host`. Every error found (a variable
   with no tensor, a shape or dtype that differs, a layout that does not fit) raises
   one `PlanError` here, before a byte of tensor data is read.
3. Each array is built from its addressable shards with
   `jax.make_array_from_callback`: the callback reads that device's slice from the
   file (a transposed tensor reads the transposed slice and transposes it), so a
   process reads only the bytes its own devices hold, and a slice several devices
   share is read once. A small variable whose devices are all this process's is read
   whole and put on them with others in one `jax.device_put` (`read_arrays`). The file
   is closed after each large variable and each batch, so host memory holds the
   devices' shards plus at most one variable or batch in flight. Orbax checkpoints are
   restored into the same shardings by `orbax_save_restore`. That is the path onto CPU
   devices; onto an accelerator every read lands in a few reused staging buffers
   instead, a thread reading ahead of the copies to the devices (`staging`).
4. A Keras model is assigned only once every array exists: a load fills every variable
   or changes none. Its optimizer state is not touched.

Warnings and notes (a tensor no variable takes, a checkpoint saved under another plan)
are issued as `CheckpointWarning`s carrying the diagnostics.
"""

from __future__ import annotations

import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
import numpy as np

from planc.checkpoints.binding import bind_checkpoint
from planc.checkpoints.orbax_dir import saved_plan
from planc.checkpoints.sharded import staging
from planc.checkpoints.tensors import (ALIGN, CheckpointError, aligned_empty, index_bounds,
                                      open_checkpoint, readers)
from planc.diagnostics import PlanError, Span, error
from planc.diagnostics.text import render_text
from planc.gc_pause import collector_paused
from planc.ir import PlanIR
from planc.sources.model import normalize_dtype
from planc.sources.objects import describe
from planc.targets.jax import sharding as jax_target
from planc.variables import Variable

__all__ = ["load", "CheckpointWarning"]


class CheckpointWarning(UserWarning):
    """Warnings and notes of a load (P402, P407, P417); `.diagnostics` holds them."""

    def __init__(self, text: str, diagnostics: tuple = ()):
        super().__init__(text)
        self.diagnostics = diagnostics


def load(ir: PlanIR, source, like=None, *, dtype=None, strict: bool = False, mesh=None,
         assign=None):
    """Load the checkpoint `source` into the plan's shardings; see `planc.Plan.load`.
    `assign(model, variables, arrays)` puts the arrays into a Keras model's variables
    (by default each is assigned, and all put back should one fail)."""
    # A checkpoint of thousands of tensors builds a few objects per tensor (its header
    # entry, its source, its array), none in a reference cycle: with the collector
    # running, its passes over every object JAX holds were ~10% of loading 10,000 small
    # tensors (bench 15). Reference counting still frees every buffer as it goes.
    with collector_paused():
        return _load_paused(ir, source, like, dtype, strict, mesh, assign)


def _load_paused(ir: PlanIR, source, like, dtype, strict: bool, mesh, assign):
    checkpoint = _open(ir, source)
    try:
        return _load(ir, checkpoint, like, dtype, strict, mesh, assign or _assign_all)
    except CheckpointError as e:
        raise _plan_error(ir, e) from None
    finally:
        checkpoint.close()


def _open(ir: PlanIR, source):
    try:
        return open_checkpoint(source)
    except CheckpointError as e:
        raise _plan_error(ir, e) from None


def _plan_error(ir: PlanIR, e: CheckpointError) -> PlanError:
    err = PlanError((e.diagnostic(),), ir.source_dict)
    err.unreadable = e.unreadable
    return err


def _load(ir: PlanIR, checkpoint, like, dtype, strict: bool, mesh, assign):
    keras_model = like if _is_keras_model(like) else None
    names = None
    if keras_model is not None:
        owners = list(keras_model.variables)
        variables = [_variable(v.path, v.shape, v.dtype, "Keras variable") for v in owners]
        if checkpoint.kind in ("h5", "h5_index"):
            from planc.sources.keras_weights import weights_names

            names = weights_names(keras_model)
    elif like is not None:
        leaves, treedef = jax_target.tree_paths(like)
        owners = [(path, leaf) for path, leaf in leaves if _is_array_like(leaf)]
        if not owners:
            raise TypeError(f"like= must be a Keras model or a pytree of arrays or "
                            f"jax.ShapeDtypeStruct leaves; the {describe(like)} has none")
        variables = [_variable(p, leaf.shape, leaf.dtype, "leaf") for p, leaf in owners]
    else:
        variables = None

    sources, diags = bind_checkpoint(ir, checkpoint.tensors, variables, strict=strict,
                                     dtype=dtype, names=names,
                                     renamed=saved_plan(checkpoint) is not None)
    diags = tuple(diags) + narrowed_by_jax(ir, sources)
    if any(d.is_error for d in diags):
        raise PlanError(tuple(diags), ir.source_dict)
    if mesh is None:
        mesh = jax_target.make_mesh(ir)
    if keras_model is None and type(like) is tuple and len(like) == 2:
        # `(params, opt_state)`: laid out as a pair, so that the state takes its slot layouts.
        placed, _ = jax_target.tree_paths(jax_target.model_shardings(ir, like, mesh=mesh))
        by_path = dict(placed)
        shardings = {s.variable.path: by_path[s.variable.path] for s in sources}
    else:  # PlanError: nothing read yet
        shardings = jax_target.variable_shardings(ir, (s.variable for s in sources), mesh=mesh)
    diags = tuple(diags) + _reshard_note(ir, checkpoint)
    if diags:
        warnings.warn(CheckpointWarning(render_text(diags, ir.source_dict, color=False),
                                        diags), stacklevel=4)

    if checkpoint.kind == "orbax":
        from planc.checkpoints.sharded.orbax_save_restore import restore

        arrays = restore(ir, checkpoint, sources, shardings, dtype=dtype)
    else:
        arrays = read_arrays(checkpoint, sources, shardings)

    if keras_model is not None:
        assign(keras_model, owners, arrays)
        return keras_model
    if like is not None:
        filled = dict(zip((p for p, _ in owners), (arrays[p] for p, _ in owners)))
        return treedef.unflatten([filled.get(p, leaf) for p, leaf in leaves])
    return {s.variable.path: arrays[s.variable.path] for s in sources}


_NARROW = {"int64": "int32", "uint64": "uint32", "float64": "float32",
           "complex128": "complex64"}


def narrowed_by_jax(ir: PlanIR, sources) -> tuple:
    """P405 for each 64-bit variable while `jax_enable_x64` is off: JAX would store it
    in 32 bits, a cast nobody asked for."""
    if jax.config.jax_enable_x64:
        return ()
    fallback = ir.rename_span or ir.layout_span or Span.start_of(ir.file)
    return tuple(
        error("P405", f"variable `{s.variable.path}` is {s.variable.dtype}, which JAX stores "
              f"as {_NARROW[s.variable.dtype]} while `jax_enable_x64` is off; planc never "
              "converts a dtype silently", s.rule.span if s.rule is not None and
              s.rule.span is not None else fallback, label="loaded as it is named here",
              variable=s.variable.path,
              help="enable 64-bit types before loading: jax.config.update(\"jax_enable_x64\", "
                   f"True); or, if every tensor is to become {_NARROW[s.variable.dtype]}, pass "
                   f"dtype=\"{_NARROW[s.variable.dtype]}\"")
        for s in sources if s.variable.dtype in _NARROW)


def _reshard_note(ir: PlanIR, checkpoint) -> tuple:
    if checkpoint.kind != "orbax":
        return ()
    from planc.checkpoints.sharded.orbax_save_restore import reshard_note

    found = reshard_note(ir, checkpoint)
    return () if found is None else (found,)


# A variable of up to this many bytes is read whole and put on its devices together with
# others, in one `jax.device_put` of a batch of up to `_BATCH_BYTES`: below it the work per
# variable (its index map, a callback per device, a round trip through the readers'
# threads) costs more than its copies. Checkpoints of many small tensors (norms, biases,
# the experts of an MoE) loaded 5.3x slower than a batched loop before (bench 15).
_BATCHED_UP_TO = 4 << 20
_BATCH_BYTES = 32 << 20


def read_arrays(checkpoint, sources, shardings) -> dict:
    """`{path: jax.Array}` of every source, each in `shardings[path]`.

    Onto an accelerator, through the staging buffers (`staging.place`): the file streams
    through a few reused host buffers. Onto CPU devices, small variables batched
    (`_BATCHED_UP_TO`), the others shard by shard (`build_array`), each read into a
    buffer the devices adopt as theirs; the file's memory maps are dropped after each
    batch and each large variable, so host memory holds the devices' arrays plus one
    batch or one variable in flight."""
    sources = list(sources)
    if staging.staging_wanted(shardings[s.variable.path] for s in sources):
        return staging.place(staged_requests(checkpoint, sources, shardings),
                             concurrent=checkpoint.concurrent_reads)
    arrays: dict = {}
    batch: list = []
    held = 0

    def flush():
        nonlocal held
        if batch:
            read = checkpoint.read_whole([s.tensor.name for s, _, _ in batch])
            # Each in an aligned buffer of its own, which its devices adopt (copied only
            # to transpose or cast it).
            values = [_adoptable(v.T if s.transpose else v, want)
                      for v, (s, _, want) in zip(read, batch)]
            del read
            placed = jax.device_put(values, [sharding for _, sharding, _ in batch])
            arrays.update(zip((s.variable.path for s, _, _ in batch), placed))
            batch.clear()
            held = 0
            checkpoint.close()

    # The copies out of the file release the GIL: a large variable's shards are read by
    # several threads at once (`readers`). Only memory-mapped safetensors reads are safe
    # to share between threads (a zip member or an HDF5 dataset has one file position).
    threads = readers() if checkpoint.kind in ("safetensors", "index") else 1
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for s in sources:
            sharding = shardings[s.variable.path]
            want = _np_dtype(s.variable.dtype)
            nbytes = math.prod(s.variable.shape) * want.itemsize
            if nbytes <= _BATCHED_UP_TO and sharding.is_fully_addressable:
                batch.append((s, sharding, want))
                held += nbytes
                if held >= _BATCH_BYTES:
                    flush()
            else:
                arrays[s.variable.path] = build_array(checkpoint, s, sharding,
                                                      pool if threads > 1 else None)
                checkpoint.close()  # drop the memory map of the pages just read
        flush()
    return arrays


def staged_requests(checkpoint, sources, shardings) -> list:
    """A `staging.Request` per source: read as stored (a transposed tensor is transposed
    on its devices), cast on the host as `read_arrays` casts."""
    out = []
    for s in sources:
        def read(box, into, name=s.tensor.name):
            checkpoint.read_into(name, box, into)

        out.append(staging.Request(s.variable.path, s.variable.shape,
                                   _np_dtype(s.variable.dtype), shardings[s.variable.path],
                                   read, transpose=s.transpose))
    return out


def build_array(checkpoint, source, sharding, pool=None) -> jax.Array:
    """One variable as a global array, each addressable shard read from the file (by
    the threads of `pool`, when given)."""
    shape = tuple(source.variable.shape)
    want = _np_dtype(source.variable.dtype)
    name = source.tensor.name
    indices = sharding.addressable_devices_indices_map(shape)
    # A slice several local devices hold (replication) is read once and kept only
    # until the last of them has taken it.
    pending: dict[tuple, int] = {}
    for index in indices.values():
        key = index_bounds(shape, index)
        pending[key] = pending.get(key, 0) + 1

    def read_slice(key) -> np.ndarray:
        bounds = tuple(slice(a, b) for a, b in key)
        if source.transpose:
            return _adoptable(checkpoint.read(name, bounds[::-1]).T, want)
        return _adoptable(checkpoint.read(name, bounds), want)

    keys = list(pending)
    held: dict[tuple, np.ndarray] = {keys[0]: read_slice(keys[0])} if keys else {}
    if pool is not None and len(keys) > 1:
        # The first read opened the tensor's memory map; the others share it.
        held.update(zip(keys[1:], pool.map(read_slice, keys[1:])))

    def read(index) -> np.ndarray:
        key = index_bounds(shape, index)
        value = held.get(key)
        if value is None:
            value = read_slice(key)
        pending[key] -= 1
        if pending[key]:
            held.setdefault(key, value)
        else:
            held.pop(key, None)
        return value

    return jax.make_array_from_callback(shape, sharding, read)


def _adoptable(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`value` as a C-contiguous array of `dtype` aligned as XLA:CPU adopts host buffers
    without a copy (`ALIGN`), copied (transposed or cast on the way) only when it is
    not one already."""
    if (value.dtype == dtype and value.flags.c_contiguous
            and value.ctypes.data % ALIGN == 0):
        return value
    out = aligned_empty(value.shape, dtype)
    out[...] = value
    return out


def _assign_all(model, owners, arrays) -> None:
    """Assign every variable, or, should Keras refuse one, put back the ones done."""
    done = []
    try:
        for v in owners:
            old = v.value
            v.assign(arrays[v.path])
            done.append((v, old))
    except Exception:
        for v, old in reversed(done):
            v.assign(old)
        raise


def _variable(path: str, shape, dtype, what: str) -> Variable:
    try:
        name = normalize_dtype(dtype)
    except ValueError:
        raise TypeError(f"{what} `{path}` has dtype {dtype!r}, which planc cannot "
                        f"load into") from None
    return Variable(path, tuple(int(d) for d in shape), name)


def _np_dtype(name: str) -> np.dtype:
    import ml_dtypes  # noqa: F401  (bfloat16 and float8 names)

    return np.dtype(name)


def _is_array_like(leaf: Any) -> bool:
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype")


def _is_keras_model(obj: Any) -> bool:
    if obj is None or isinstance(obj, (dict, list, tuple, str, os.PathLike)):
        return False
    variables = getattr(obj, "variables", None)
    return (variables is not None and hasattr(obj, "save_own_variables")
            and all(hasattr(v, "path") and hasattr(v, "assign") for v in variables))
