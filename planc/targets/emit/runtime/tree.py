"""A pytree's leaves with their "/"-joined paths, and which parameter an optimizer slot
mirrors: the one walk of planc's JAX target (`planc.targets.jax.paths`, which imports these
functions) and of the module `planc compile --target jax` writes (which copies the section
below verbatim, so it uses only jax and numpy).

`_paths` is hand-tuned, as the profile of bench/shardings.py asks:
`jax.tree_util.tree_flatten_with_path` builds a tuple of key objects per leaf in Python
and the caller joins their texts, ~3.4 us a leaf of a nested tree at 100k leaves, half of
`plan.shardings`. So dicts, lists, tuples and None are walked here, each path built once
from its parent's, and every other node (a namedtuple, a registered class) is opened by
JAX one level at a time, so it gets JAX's own keys and order. Whenever the walk's leaves
are not `tree_flatten`'s (same objects, same order), JAX's own walk answers.
"""

from __future__ import annotations

import jax
import numpy as np

# -- copied into emitted modules: tree ----------------------------------------------------

def _key_text(key):
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def _leaf_shape(leaf):
    shape = getattr(leaf, "shape", None)
    return tuple(np.shape(leaf)) if shape is None else tuple(int(d) for d in shape)


def _shape_once(leaf, seen):
    """`_leaf_shape(leaf)`, converted once per distinct `.shape` tuple (`seen` is kept
    across the leaves of one call): a model has a handful of distinct shapes."""
    raw = getattr(leaf, "shape", None)
    if type(raw) is not tuple:
        return _leaf_shape(leaf)
    try:
        shape = seen.get(raw)
    except TypeError:  # something unhashable in it: `_leaf_shape` says what
        return _leaf_shape(leaf)
    if shape is None:
        shape = seen[raw] = _leaf_shape(leaf)
    return shape


# Types JAX always takes as leaves; `_walk` emits them without asking JAX.
_LEAF_TYPES = frozenset({np.ndarray, jax.ShapeDtypeStruct, int, float, bool, complex, str})


class _Unusual(Exception):
    """`_mapped` met a node it does not open itself: take the general walk."""


# Array types `_mapped` takes as leaves: JAX's own array classes join on first sight
# (`jax.Array` is abstract), tracers never (their shapes may hold symbols).
_ARRAY_TYPES = {np.ndarray, jax.ShapeDtypeStruct}


def _is_array_type(kind):
    if issubclass(kind, jax.Array) and not issubclass(kind, jax.core.Tracer):
        _ARRAY_TYPES.add(kind)
        return True
    return False


def _mapped(tree, answer):
    """`tree` with each array leaf `x` at path P replaced by `answer(P, x.shape)`, in one
    walk of the tree: `plan.shardings` and the emitted module's `shardings` without a
    list of leaves, a list of answers and JAX's flatten and unflatten between them. Dicts
    (with str keys, kept in their order), lists, tuples and None are opened; any other
    node, a leaf that is not an array, or an answer of None raises `_Unusual`, and the
    caller takes its general walk (`_paths`). Hand-tuned, as the profile of bench/shardings.py
    asks: a tree of 100k leaves costs ~1 us a leaf here, about what a recursive dict
    walk written by hand costs."""
    arrays = _ARRAY_TYPES

    def walk(node, prefix):
        kind = type(node)
        if kind is dict:
            out = {}
            for key, child in node.items():
                if type(key) is not str:
                    raise _Unusual
                if type(child) in arrays:
                    value = answer(prefix + key, child.shape)
                    if value is None:
                        raise _Unusual
                    out[key] = value
                elif child is None:
                    out[key] = None
                else:
                    out[key] = walk(child, prefix + key + "/")
            return out
        if kind is list or kind is tuple:
            out = []
            for i, child in enumerate(node):
                if type(child) in arrays:
                    value = answer(prefix + str(i), child.shape)
                    if value is None:
                        raise _Unusual
                    out.append(value)
                elif child is None:
                    out.append(None)
                else:
                    out.append(walk(child, prefix + str(i) + "/"))
            return out if kind is list else tuple(out)
        if node is not None and _is_array_type(kind):
            return one(prefix[:-1], node)
        raise _Unusual

    def one(path, x):
        value = answer(path, x.shape)
        if value is None:
            raise _Unusual
        return value

    if tree is None:
        return None
    if type(tree) in arrays or _is_array_type(type(tree)):
        return one("", tree)
    try:
        return walk(tree, "")
    except RecursionError:
        raise _Unusual from None


def _paths(tree):
    """([(path, leaf), ...], treedef) in jax.tree_util's order, each path the leaf's keys
    joined by "/".

    jax.tree_util.tree_flatten_with_path builds a tuple of key objects per leaf, and
    joining their texts was half the cost of `shardings` on a nested tree. So dicts,
    lists, tuples and None are walked here, each path built once from its parent's, and
    every other node (a namedtuple, a registered class) is opened by JAX one level at a
    time, so it gets JAX's own keys and order. Whenever the walk's leaves are not
    tree_flatten's (same objects, same order), JAX's own walk answers."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    out = []
    try:
        _walk(tree, "", out.append)
    except (TypeError, RecursionError):  # keys that do not sort, a very deep tree
        out = None
    if out is None or len(out) != len(leaves) or any(
            a is not b for (_, a), b in zip(out, leaves)):
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        return [("/".join(_key_text(k) for k in keys), leaf) for keys, leaf in flat], treedef
    return out, treedef


def _walk(node, path, emit):
    kind = type(node)
    if kind is dict:
        prefix = path + "/" if path else ""
        for key in sorted(node):  # JAX's order for a dict
            child = node[key]
            text = prefix + (key if type(key) is str else str(key))
            if type(child) in _LEAF_TYPES:
                emit((text, child))
            else:
                _walk(child, text, emit)
    elif kind is list or kind is tuple:
        prefix = path + "/" if path else ""
        for i, child in enumerate(node):
            if type(child) in _LEAF_TYPES:
                emit((prefix + str(i), child))
            else:
                _walk(child, prefix + str(i), emit)
    elif node is None:
        return
    elif kind in _LEAF_TYPES or isinstance(node, jax.Array):
        emit((path, node))
    else:
        children = _children(node)
        if children is None:
            emit((path, node))
            return
        prefix = path + "/" if path else ""
        for text, child in children:
            _walk(child, prefix + text if text is not None else path, emit)


def _children(node):
    """[(key text, child), ...] of a node JAX opens, from JAX one level deep; None when
    JAX takes `node` as a leaf. A Flax box (an NNX variable, a Linen `Partitioned`),
    which holds its array as `.value`, gives it the key None: the array takes the box's
    own path, as Flax names it (`nnx.to_flat_state`, `nn.unbox`)."""
    flat, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda n: n is not node)
    if len(flat) == 1 and flat[0][0] == () and flat[0][1] is node:
        return None
    if len(flat) == 1 and _is_flax_box(node, flat[0][0]):
        return [(None, flat[0][1])]
    return [(_key_text(keys[0]), child) for keys, child in flat]


def _is_flax_box(node, keys):
    return (type(node).__module__.startswith("flax.") and len(keys) == 1
            and getattr(keys[0], "name", None) == "value")


def _owners(tree, params, leaves, param_leaves):
    """(owners, ambiguous): for each `(path, leaf)` of `leaves` (optimizer state `tree`'s),
    the index in `param_leaves` (`params`') of the parameter it mirrors, or None; and
    `(leaf path, [parameter paths])` for each leaf two parameters could own alike.

    A subtree of `tree` with the structure of `params` (optax's `mu`, `nu`, ...) mirrors
    it leaf for leaf, where the shapes agree. Any other leaf belongs to the one parameter
    whose path is a "/"-suffix of its path and whose shape is its shape; with several
    such parameters (`kernel` and `mu/kernel` for a leaf `0/mu/kernel`) it is ambiguous,
    never decided by length; with none (a step count) it is nobody's."""
    structure = jax.tree_util.tree_structure(params)
    owners = [None] * len(leaves)
    shapes = [_leaf_shape(leaf) for _, leaf in param_leaves]
    if param_leaves:
        whole = structure.num_leaves

        matched = set()  # ids of the subtrees found shaped like the parameters

        def mirrors_params(node):
            if whole != 1 and getattr(node, "shape", None) is not None:
                return False  # an array: a leaf, not a tree of parameters
            if jax.tree_util.tree_structure(node) != structure:
                return False
            matched.add(id(node))
            return True

        position = 0
        for part in jax.tree_util.tree_flatten(tree, is_leaf=mirrors_params)[0]:
            if id(part) in matched:
                for k in range(whole):
                    if position + k < len(leaves) and \
                            _leaf_shape(leaves[position + k][1]) == shapes[k]:
                        owners[position + k] = k
                position += whole
            else:
                position += 1
    by_path = {path: i for i, (path, _) in enumerate(param_leaves)}
    ambiguous = []
    for j, (path, leaf) in enumerate(leaves):
        if owners[j] is not None:
            continue
        shape = _leaf_shape(leaf)
        parts = path.split("/")
        found = [by_path[s] for s in ("/".join(parts[i:]) for i in range(len(parts)))
                 if s in by_path and shapes[by_path[s]] == shape]
        if len(found) == 1:
            owners[j] = found[0]
        elif len(found) > 1:
            ambiguous.append((path, [param_leaves[i][0] for i in found]))
    return owners, ambiguous


def _stray(owners, leaves, param_leaves):
    """The path of the first array leaf shaped like a parameter, when no array leaf
    mirrors one (the tree is not optimizer state of these parameters, and its layout
    rules would be ignored); else None. A state whose arrays are shaped like no parameter
    (a factored second moment only) and scalars (a step count) belong to nobody anyway."""
    arrays = [(i, path, _leaf_shape(leaf)) for i, (path, leaf) in enumerate(leaves)]
    arrays = [(i, path, shape) for i, path, shape in arrays if shape]
    if not arrays or any(owners[i] is not None for i, _, _ in arrays):
        return None
    shapes = {_leaf_shape(leaf) for _, leaf in param_leaves}
    return next((path for _, path, shape in arrays if shape in shapes), None)
