"""`planc.targets.jax.paths.leaves_with_paths` names and orders leaves exactly as JAX's
own `tree_flatten_with_path` does, on every kind of node JAX knows."""

import collections
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from planc.sources.objects import key_text
from planc.targets.jax.paths import leaves_with_paths

State = collections.namedtuple("State", "count mu nu")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Block:
    kernel: object
    bias: object


class Opaque:  # not a pytree node: a leaf
    shape = (3,)


def jax_walk(tree):
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    return [("/".join(key_text(k) for k in keys), leaf) for keys, leaf in flat], treedef


TREES = {
    "nested dicts": {"b": {"y": np.zeros(2), "x": np.zeros(3)}, "a": [np.zeros(1), (1.0, 2)]},
    "optax-like": (State(count=jnp.zeros(()), mu={"w": np.zeros(4)}, nu={"w": np.zeros(4)}),
                   None, ()),
    "registered dataclass": {"blocks": [Block(np.zeros(2), None), Block(np.ones(2), 3)]},
    "ordered dict": collections.OrderedDict([("z", np.zeros(1)), ("a", np.zeros(2))]),
    "int keys": {2: np.zeros(1), 10: {0: np.zeros(2)}, 1: "text"},
    "a bare leaf": np.zeros((2, 3)),
    "a shape struct": {"p": jax.ShapeDtypeStruct((4, 4), np.float32)},
    "unknown leaves": {"o": Opaque(), "n": None, "f": 1.5},
    "empty": {},
}


@pytest.mark.parametrize("name", TREES)
def test_paths_and_leaves_are_jaxs(name):
    tree = TREES[name]
    mine, treedef = leaves_with_paths(tree)
    theirs, their_def = jax_walk(tree)
    assert [p for p, _ in mine] == [p for p, _ in theirs]
    assert all(a is b for (_, a), (_, b) in zip(mine, theirs)) and len(mine) == len(theirs)
    assert treedef == their_def


def test_unsortable_keys_fail_as_jax_does():
    tree = {1: np.zeros(1), "a": np.zeros(1)}
    with pytest.raises(Exception) as mine:
        leaves_with_paths(tree)
    with pytest.raises(Exception) as theirs:
        jax.tree_util.tree_flatten_with_path(tree)
    assert type(mine.value) is type(theirs.value)
