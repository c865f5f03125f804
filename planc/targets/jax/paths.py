"""A pytree's leaves with their "/"-joined paths, as `jax.tree_util` names and orders them.

The walk is the emitted JAX module's own (`planc.targets.emit.runtime.tree`): planc's JAX
target and the module `planc compile --target jax` writes run the same code.
"""

from __future__ import annotations

import jax

from planc.targets.emit.runtime.tree import _is_flax_box, _key_text, _paths

__all__ = ["leaves_with_paths", "own_names"]


def leaves_with_paths(tree) -> tuple[list[tuple[str, object]], object]:
    """`([(path, leaf), ...], treedef)` in `jax.tree_util` order, each path the leaf's
    keys' texts joined by "/" (a dict key, a sequence index, an attribute's name)."""
    return _paths(tree)


def own_names(tree) -> dict[str, tuple]:
    """The logical names the Flax boxes of `tree` give their arrays, by the arrays'
    paths (as `leaves_with_paths` gives them): an NNX variable's partitioning metadata, a
    Linen `LogicallyPartitioned`'s `names`. Empty for a tree without such boxes."""
    from planc.sources.flax import box_names

    def is_box(node):
        if not type(node).__module__.startswith("flax."):
            return False
        flat, _ = jax.tree_util.tree_flatten_with_path(node, is_leaf=lambda n: n is not node)
        return len(flat) == 1 and _is_flax_box(node, flat[0][0])

    flat, _ = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_box)
    out = {}
    for keys, leaf in flat:
        if is_box(leaf):
            names = box_names(leaf)
            if names is not None:
                out["/".join(_key_text(k) for k in keys)] = names
    return out
