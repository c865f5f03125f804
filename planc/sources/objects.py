"""Python objects as model sources: pytrees, Keras models and ``module:attr`` strings.

Pytrees are walked here, without jax, in their natural order:

- a Mapping (dict, flax FrozenDict, ...): its keys, in iteration order (insertion
  order for a dict; unlike `jax.tree_util`, keys are not sorted);
- a list or tuple: the index in decimal; a NamedTuple: the field name;
- a dataclass instance: the field names in declaration order; fields marked static
  (``metadata={"pytree_node": False}`` as flax.struct does, or ``{"static": True}`` as
  equinox does) are skipped;
- any other object, when jax is already imported: one level of `jax.tree_util`, for
  custom registered pytree nodes.

The path of a leaf is its keys joined by "/". A leaf is anything with ``.shape`` and
``.dtype``: numpy and jax arrays, `jax.ShapeDtypeStruct`, tracers, torch tensors. A
typed PRNG key array (`jax.random.key`) is read as its key data (``uint32``, shape plus
the key's own trailing dimension, e.g. ``(2,)`` for threefry), as checkpoints store it.
Leaves that cannot be variables are static data and are skipped: None (an empty
subtree to JAX), Python numbers (bool, int, float, complex: hyperparameters such as a
step size, with no memory to lay out), strings, bytes, functions and classes. Any other
leaf is a SourceError naming its path; so is a bare array at the top, which has no path.

A function (or partial) given directly is evaluated as for ``module:attr`` below.

A Keras model (any object whose ``.variables`` hold objects with ``.path``, ``.shape``
and ``.dtype``) gives each variable's ``path``, e.g. ``dense/kernel``. Asked for
(`model_of_object(..., weights_names=True)`), a Keras 3 model also gives the datasets
its ``save_weights`` writes (`planc.sources.keras_weights`), found while the model is at
hand: inside the abstract evaluation of a ``module:attr`` builder.
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Mapping
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from planc.lazy import import_module
from planc.sources.module_attr import split_module_attr
from planc.variables import Variable
from planc.sources.model import DTYPE_NAMES, Model, SourceError, finish, make_variable, one_line



def _is_function(obj: Any) -> bool:
    # Plain functions, methods, partials, and jax.jit-wrapped functions (which are C
    # objects, not routines, but carry .lower and .trace).
    import inspect  # (here, not at start-up: ~3.5 ms that a manifest's lint never needs)

    return (inspect.isroutine(obj) or isinstance(obj, functools.partial)
            or (callable(obj) and not isinstance(obj, type)
                and hasattr(obj, "lower") and hasattr(obj, "trace")))


def describe(obj: Any) -> str:
    """How an object source is named in messages."""
    if _is_function(obj):
        name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
        return f"function {name}" if name else "function"
    if _is_keras_like(obj):
        name = getattr(obj, "name", None)
        return f"Keras model '{name}'" if isinstance(name, str) else f"{type(obj).__name__} model"
    return f"{type(obj).__name__} pytree"


def variables_of_object(obj: Any, origin: str | None = None) -> tuple[Variable, ...]:
    """The variables of a Keras model or pytree; see the module docstring."""
    return model_of_object(obj, origin).variables


def model_of_object(obj: Any, origin: str | None = None, *,
                    weights_names: bool = False) -> Model:
    """The variables of a Keras model or pytree and, with `weights_names`, a Keras
    model's ``save_weights`` datasets; see the module docstring."""
    origin = origin or describe(obj)
    if _is_function(obj):
        # A function handed over directly is read like `module:attr` naming it.
        return _call_abstractly(obj, origin, weights_names)
    if _is_variable_list(obj):
        return Model(finish(_checked_variables(obj, origin), origin))
    if "flax" in sys.modules:
        from planc.sources import flax

        if flax.is_nnx(obj):
            return Model(finish(_nnx_variables(flax.nnx_leaves(obj), origin), origin))
    if _is_keras_like(obj):
        variables = finish(_keras_variables(obj, origin), origin)
        return Model(variables, _weights_names(obj, origin) if weights_names else None)
    out: list[Variable] = []
    _walk(obj, None, out, origin, set())
    return Model(finish(out, origin))


def _nnx_variables(leaves, origin: str) -> list[Variable]:
    out = []
    for path, value, names in leaves:
        try:
            shape, dtype = key_data_shape(value)
            out.append(make_variable(path, shape, dtype)._replace(names=names))
        except ValueError as e:
            raise SourceError(f"{origin}: {e}") from None
    return out


def _weights_names(model: Any, origin: str):
    from planc.sources.keras_weights import is_keras_layer, weights_names

    if not is_keras_layer(model):
        return None  # Keras-like but not Keras 3 (no `save_weights` walk to run)
    try:
        return weights_names(model)
    except Exception as e:
        raise SourceError(f"{origin}: Keras's saving walk, which names the datasets of its "
                          f".weights.h5, raised {one_line(e)}") from None


def _is_variable_list(obj: Any) -> bool:
    return (isinstance(obj, (list, tuple)) and not hasattr(type(obj), "_fields")
            and len(obj) > 0 and all(isinstance(v, Variable) for v in obj))


def _checked_variables(variables, origin: str) -> list[Variable]:
    try:
        out = [make_variable(v.path, v.shape, v.dtype) for v in variables]
    except ValueError as e:
        raise SourceError(f"{origin}: {e}") from None
    for i, v in enumerate(variables):
        names = v.names
        if names is None:
            continue
        if not isinstance(names, tuple) or not all(n is None or isinstance(n, str)
                                                   for n in names):
            raise SourceError(f"{origin}: `{v.path}` has names {names!r}: a tuple of logical "
                              "names (str) or None, one per dimension")
        out[i] = out[i]._replace(names=names)
    return out


def _is_keras_like(obj: Any) -> bool:
    if isinstance(obj, (type, Mapping, list, tuple, str, bytes)) or _is_leaf(obj):
        return False
    if _is_dataclass(obj):
        return False
    # Static lookup: detection must not run a property that builds or computes.
    import inspect

    return inspect.getattr_static(obj, "variables", None) is not None


def _keras_variables(model: Any, origin: str) -> list[Variable]:
    try:
        variables = list(model.variables)
    except Exception as e:
        raise SourceError(f"{origin}: reading .variables raised {one_line(e)}") from None
    if not variables:
        raise SourceError(f"{origin}: the model has no variables yet; build it first "
                          f"(call it on an input, or model.build(input_shape))")
    out = []
    for i, v in enumerate(variables):
        path = getattr(v, "path", None)
        if isinstance(path, str) and path.endswith("/seed_generator_state"):
            continue  # RNG state, not a weight: Keras keeps it replicated whatever the plan says
        if path is None or not hasattr(v, "shape") or not hasattr(v, "dtype"):
            raise SourceError(f"{origin}: variables[{i}] ({type(v).__name__}) has no "
                              f".path, .shape and .dtype; planc reads Keras 3 variables")
        try:
            out.append(make_variable(path, v.shape, v.dtype))
        except ValueError as e:
            raise SourceError(f"{origin}: {e}") from None
    return out


# Types whose instances are always leaves (numpy and jax arrays, ShapeDtypeStruct): their
# `shape` and `dtype` are class attributes. Looked up by type, not tested per leaf.
_LEAF_TYPES: set = set()
_KEY_DTYPES: dict = {}  # dtype -> whether it is a typed PRNG key's


def _is_leaf(obj: Any) -> bool:
    t = type(obj)
    if t in _LEAF_TYPES:
        return True
    if t is dict or t is list or t is tuple or isinstance(obj, (Mapping, list, tuple)):
        return False
    try:
        leaf = hasattr(obj, "shape") and hasattr(obj, "dtype")
    except Exception:
        return False
    if leaf and hasattr(t, "shape") and hasattr(t, "dtype") and len(_LEAF_TYPES) < 64:
        _LEAF_TYPES.add(t)
    return leaf


def _is_key_dtype(dtype: Any) -> bool:
    try:
        return _KEY_DTYPES[dtype]
    except KeyError:
        found = _KEY_DTYPES[dtype] = str(dtype).startswith("key<")
        return found
    except TypeError:  # an unhashable dtype-like object
        return str(dtype).startswith("key<")


def key_data_shape(leaf: Any) -> tuple[Any, Any]:
    # A typed PRNG key array (jax.random.key) has a dtype such as key<fry> that has no
    # byte size of its own; it is read as its key data, as jax.random.key_data gives it
    # and checkpoints store it: uint32 with the key's trailing dimension(s).
    if _is_key_dtype(leaf.dtype) and "jax" in sys.modules:
        import jax

        try:
            data = jax.eval_shape(jax.random.key_data,
                                  jax.ShapeDtypeStruct(leaf.shape, leaf.dtype))
            return data.shape, data.dtype
        except Exception:
            pass
    return leaf.shape, leaf.dtype


def _is_static(obj: Any) -> bool:
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes, type)):
        return True
    # Functions of every kind (plain, ufunc, jitted, partial) are static; a callable
    # that may hold variables (a Keras model, an equinox module) must not vanish.
    return (callable(obj) and not isinstance(obj, (Mapping, list, tuple))
            and not _is_dataclass(obj) and not _is_keras_like(obj))


def _walk(obj: Any, path: str | None, out: list[Variable], origin: str,
          active: set[int]) -> None:
    """Append the variables under `obj`, whose path is `path` (None: the root)."""
    if _is_leaf(obj):
        if path is None:
            raise SourceError(f"{origin}: a single array has no path; put it in a dict "
                              f"to name it")
        try:
            shape, dtype = key_data_shape(obj)
            out.append(make_variable(path, shape, dtype))
        except ValueError as e:
            raise SourceError(f"{origin}: {e}") from None
        return
    if _is_static(obj):
        return
    if _is_box(obj):
        _walk_box(obj, path, out, origin, active)
        return

    children = _children(obj, path, origin)
    if id(obj) in active:
        raise SourceError(f"{origin}: the pytree contains itself at `{path or ''}`")
    active.add(id(obj))
    append = out.append
    new_variable = tuple.__new__  # Variable is a named tuple: its fields, checked above
    prefix = None if path is None else path + "/"
    try:
        for key, child in children:
            child_path = key if prefix is None else prefix + key
            if type(child) in _LEAF_TYPES:
                # The common leaf, taken here without a call per leaf (a large model
                # has a hundred thousand of them): a dtype already named (never a key
                # dtype, which has no name), a tuple of ints, an ASCII path; what
                # `make_variable` checks first, inlined. A line break in a path is
                # refused by `finish`, in one scan of every path.
                try:
                    name = DTYPE_NAMES.get(child.dtype)
                except TypeError:
                    name = None
                if name is not None and child_path and child_path.isascii():
                    shape = child.shape
                    if type(shape) is tuple:
                        for d in shape:
                            if type(d) is not int or d < 0:
                                break
                        else:
                            append(new_variable(Variable, (child_path, shape, name, None)))
                            continue
                if _is_key_dtype(child.dtype):
                    _walk(child, child_path, out, origin, active)
                    continue
                try:
                    out.append(make_variable(child_path, child.shape, child.dtype))
                except ValueError as e:
                    raise SourceError(f"{origin}: {e}") from None
            else:
                _walk(child, child_path, out, origin, active)
    finally:
        active.discard(id(obj))


def _is_box(obj: Any) -> bool:
    # Asked of every inner node: a dict or a list is answered by its type's module alone.
    if not type(obj).__module__.startswith("flax."):
        return False
    from planc.sources.flax import is_linen_box

    return is_linen_box(obj)


def _walk_box(box: Any, path: str | None, out: list[Variable], origin: str,
              active: set[int]) -> None:
    """A Linen box is the variable it holds, at its own path, with the logical names a
    `LogicallyPartitioned` gives it."""
    from planc.sources.flax import logical_names_of_box

    start = len(out)
    _walk(box.value, path, out, origin, active)
    names = logical_names_of_box(box)
    if names is not None and len(out) == start + 1:
        out[start] = out[start]._replace(names=names)


def _is_dataclass(obj: Any) -> bool:
    # What `dataclasses.is_dataclass` tests, without importing `dataclasses` at start-up:
    # a dataclass instance's module has imported it, for `_children` to read its fields.
    cls = obj if isinstance(obj, type) else type(obj)
    return hasattr(cls, "__dataclass_fields__")


def _children(obj: Any, path: str | None, origin: str) -> list[tuple[str, Any]]:
    if isinstance(obj, Mapping):
        if type(obj) is dict and set(map(type, obj)) <= {str}:
            return obj.items()  # the common case, read as it is
        return [(str(k), v) for k, v in obj.items()]
    if isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        return list(zip(type(obj)._fields, obj))
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)]
    if _is_dataclass(obj) and not isinstance(obj, type):
        import dataclasses

        return [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.metadata.get("pytree_node", True) and not f.metadata.get("static", False)]
    if "jax" in sys.modules:
        children = _jax_children(obj)
        if children is not None:
            return children
    where = f" at `{path}`" if path is not None else ""
    if path is not None and _is_keras_like(obj):
        raise SourceError(f"{origin}: the leaf{where} is a Keras model; pass the model "
                          f"itself as the source")
    raise SourceError(f"{origin}: the leaf{where} is a {type(obj).__name__}, not an array "
                      f"(it has no .shape and .dtype)")


def _jax_children(obj: Any) -> list[tuple[str, Any]] | None:
    # Only reached for objects that are neither arrays nor plain containers, so a
    # custom pytree node registered with jax is the only thing left it could be.
    import jax

    try:
        flat, _ = jax.tree_util.tree_flatten_with_path(obj, is_leaf=lambda x: x is not obj)
    except Exception:
        return None
    if len(flat) == 1 and flat[0][0] == () and flat[0][1] is obj:
        return None
    return [(key_text(path[0]), child) for path, child in flat]


def key_text(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


# ---------------------------------------------------------------------------------------
# module:attr

@contextmanager
def cwd_on_path() -> Iterator[None]:
    # A user runs `planc lint plan.kd --model mymodel:build` from the directory that
    # holds mymodel.py, as with `python -m`. Kept for the call too: a builder may import
    # a sibling module lazily.
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        yield
    finally:
        if added:
            try:
                sys.path.remove(cwd)
            except ValueError:
                pass


def variables_of_module_attr(spec: str) -> tuple[Variable, ...]:
    """The variables of ``module:attr``; see `model_of_module_attr`."""
    return model_of_module_attr(spec).variables


def model_of_module_attr(spec: str, *, weights_names: bool = False) -> Model:
    """Import ``module:attr``, read it; a zero-argument callable is called abstractly.

    The attribute may be a Keras model, a pytree, or a zero-argument callable that
    returns one of those. A callable is run under `jax.eval_shape`, so a pure-JAX init
    function allocates nothing, and a Keras builder creates its variables as tracers
    and never fills them. Only if that fails and the callable was building Keras
    objects is it called plainly (some Keras code needs concrete values); Keras's
    automatic layer-name counters are restored first, so the names match a fresh run.
    """
    with cwd_on_path():
        obj = import_attr(spec)
        if _readable(obj) or not callable(obj):
            return model_of_object(obj, spec, weights_names=weights_names)
        return _call_abstractly(obj, spec, weights_names)


def import_attr(spec: str) -> Any:
    """The object ``module:attr`` names: the module imported (the current directory on
    the path, as for `python -m`), then the attribute read; `SourceError` when either
    fails. Importing a module runs its code."""
    parts = split_module_attr(spec)
    if parts is None:
        raise SourceError(f"{spec}: not of the form module:attr")
    module_name, attr_path = parts
    with cwd_on_path():
        obj = _import(module_name, spec)
        for part in attr_path.split("."):
            try:
                obj = getattr(obj, part)
            except AttributeError:
                raise SourceError(f"{spec}: module '{module_name}' has no attribute "
                                  f"'{attr_path}'") from None
            except Exception as e:
                raise SourceError(f"{spec}: getting '{attr_path}' raised {one_line(e)}") from None
    return obj


def _import(module_name: str, spec: str):
    importlib.invalidate_caches()
    try:
        return import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise SourceError(f"{spec}: cannot import module '{module_name}': no module "
                              f"named '{e.name}' (searched the current directory and "
                              f"sys.path)") from None
        raise SourceError(f"{spec}: importing '{module_name}' raised {one_line(e)}") from None
    except (Exception, SystemExit) as e:
        raise SourceError(f"{spec}: importing '{module_name}' raised {one_line(e)}") from None


def _readable(obj: Any) -> bool:
    if isinstance(obj, type):
        return False
    return (isinstance(obj, (Mapping, list, tuple)) or _is_leaf(obj) or _is_keras_like(obj)
            or (_is_dataclass(obj)))


def _call_abstractly(fn: Callable[[], Any], spec: str, weights_names: bool) -> Model:
    import inspect

    try:
        inspect.signature(fn).bind()
    except TypeError:
        raise SourceError(f"{spec}: a callable that needs arguments "
                          f"{inspect.signature(fn)}; planc calls it with none") from None
    except ValueError:
        pass  # no signature to inspect (some builtins): just try the call

    try:
        import jax
    except ImportError:
        return _call_plainly(fn, spec, weights_names)

    captured: dict[str, Model] = {}

    def traced() -> None:
        # The result is read inside the trace, so a Keras model or a Flax module (not
        # JAX types) can come back too, and nothing but shapes, dtypes and names ever
        # leaves it.
        if "flax" in sys.modules:
            from planc.sources.flax import building

            with building():
                built = fn()
        else:
            built = fn()
        captured["model"] = model_of_object(built, spec, weights_names=weights_names)

    uids = keras_uids()
    try:
        jax.eval_shape(traced)
    except SourceError:
        raise
    except (Exception, SystemExit) as e:
        if uids is None or keras_uids() == uids:
            raise SourceError(f"{spec}: calling it under jax.eval_shape (so that nothing "
                              f"is allocated) raised {one_line(e)}") from None
        restore_keras_uids(uids)
        return _call_plainly(fn, spec, weights_names)
    return captured["model"]


def _call_plainly(fn: Callable[[], Any], spec: str, weights_names: bool) -> Model:
    try:
        result = fn()
    except (Exception, SystemExit) as e:
        raise SourceError(f"{spec}: calling it raised {one_line(e)}") from None
    return model_of_object(result, spec, weights_names=weights_names)


def keras_uids() -> dict | None:
    """A snapshot of Keras's automatic layer-name counters (None: unreadable), for
    `restore_keras_uids` after an abstract attempt at building that failed."""
    # Keras names layers `dense`, `dense_1`, ... from a global counter. A failed
    # abstract attempt must not shift the names the plain call then gets. The counter
    # lives in keras.src (no public reader); without it, just don't fall back.
    if "keras" not in sys.modules:
        return {}
    try:
        from keras.src.backend.common import global_state
    except Exception:
        return None
    uids = global_state.get_global_attribute("object_name_uids")
    return dict(uids) if uids is not None else {}


def restore_keras_uids(snapshot: dict) -> None:
    """Keras's layer-name counters set back to `snapshot` (`keras_uids`)."""
    try:
        from keras.src.backend.common import global_state
    except Exception:
        return
    uids = global_state.get_global_attribute("object_name_uids")
    if uids is not None:
        uids.clear()
        uids.update(snapshot)
