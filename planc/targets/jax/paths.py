"""A pytree's leaves with their "/"-joined paths, as `jax.tree_util` names and orders them.

`jax.tree_util.tree_flatten_with_path` builds a tuple of key objects per leaf in Python
and the caller joins their texts: at 100k leaves of a nested tree that was ~3.4 us a
leaf, half of `plan.shardings`. Hand-tuned, as the profile of bench/shardings.py asks:
`leaves_with_paths` walks the plain containers (dict, list, tuple, None) itself, building
each path once from its parent's, and asks JAX to open every other node one level at a
time (`_children`), so a registered node, a namedtuple or an unknown leaf gets exactly
JAX's keys and order. The result is checked against `jax.tree_util.tree_flatten`'s
leaves (same objects, same order) and JAX's own walk answers whenever they differ.
"""

from __future__ import annotations

import jax
import numpy as np

from planc.sources.objects import key_text

# Types JAX always treats as leaves (none of them can be a registered node: JAX owns
# the array types, and registering a builtin number type is refused by nobody but
# done by nobody). Anything else is opened by JAX one level at a time.
_LEAVES = frozenset({np.ndarray, jax.ShapeDtypeStruct, int, float, bool, complex, str})


def leaves_with_paths(tree) -> tuple[list[tuple[str, object]], object]:
    """`([(path, leaf), ...], treedef)` in `jax.tree_util` order, each path the leaf's
    keys' texts (`planc.sources.objects.key_text`) joined by "/"."""
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    out: list[tuple[str, object]] = []
    try:
        _walk(tree, "", out.append)
    except (TypeError, RecursionError):  # keys that do not sort, a very deep tree: JAX's
        out = None  # own walk decides what that means
    if out is None or len(out) != len(leaves) or any(
            a is not b for (_, a), b in zip(out, leaves)):
        flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
        return [("/".join(key_text(k) for k in keys), leaf) for keys, leaf in flat], treedef
    return out, treedef


def _walk(node, path: str, emit) -> None:
    kind = type(node)
    if kind is dict:
        prefix = path + "/" if path else ""
        for k in sorted(node):  # JAX's order for a dict
            child = node[k]
            text = k if type(k) is str else str(k)
            if type(child) in _LEAVES:
                emit((prefix + text, child))
            else:
                _walk(child, prefix + text, emit)
    elif kind is list or kind is tuple:
        prefix = path + "/" if path else ""
        for i, child in enumerate(node):
            if type(child) in _LEAVES:
                emit((prefix + str(i), child))
            else:
                _walk(child, prefix + str(i), emit)
    elif node is None:
        return
    elif kind in _LEAVES or _is_array(node):
        emit((path, node))
    else:
        children = _children(node)
        if children is None:
            emit((path, node))
            return
        prefix = path + "/" if path else ""
        for text, child in children:
            _walk(child, prefix + text, emit)


def _is_array(x) -> bool:
    # jax.Array's concrete classes (and tracers) are leaves; checked after the
    # containers, as `isinstance` against an abstract base is the slower test.
    return isinstance(x, jax.Array)


def _children(node):
    """`[(key text, child), ...]` of a node JAX opens (registered types, namedtuples),
    from JAX itself one level deep; None when JAX takes `node` as a leaf."""
    flat, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda n: n is not node)
    if len(flat) == 1 and flat[0][0] == () and flat[0][1] is node:
        return None
    return [(key_text(keys[0]), child) for keys, child in flat]
