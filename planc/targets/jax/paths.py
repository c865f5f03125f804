"""A pytree's leaves with their "/"-joined paths, as `jax.tree_util` names and orders them.

The walk is the emitted JAX module's own (`planc.targets.emit.runtime.tree`): planc's JAX
target and the module `planc compile --target jax` writes run the same code.
"""

from __future__ import annotations

from planc.targets.emit.runtime.tree import _paths

__all__ = ["leaves_with_paths"]


def leaves_with_paths(tree) -> tuple[list[tuple[str, object]], object]:
    """`([(path, leaf), ...], treedef)` in `jax.tree_util` order, each path the leaf's
    keys' texts joined by "/" (a dict key, a sequence index, an attribute's name)."""
    return _paths(tree)
