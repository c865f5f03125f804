"""The emitted JAX module's `shardings` on nested pytrees: the same leaves, paths and
NamedShardings as `plan.shardings`, whichever runtime the module carries (plain, or
with `state` rules), and JAX's own answer where its tree walk cannot go."""

import collections
import dataclasses
import types

import jax
import numpy as np
import pytest

import planc
from planc.targets.emit.jax_module import module_text
from planc.targets.jax.sharding import tree_paths
from targets.jax.test_tree_paths import TREES  # every kind of node planc's own walk is tested on

Opt = collections.namedtuple("Opt", "count mu nu")


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Block:
    kernel: object
    bias: object


LAYOUT = """
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
    "((params|opt/mu)/)?dense_.*/kernel" -> (data, model)
    "blocks/0/kernel"                    -> (model, data)
    "blocks/1/0"                         -> (model, _)
    "blocks/2/kernel"                    -> (_, model)
    "ints/10/0"                          -> (model)
    ".*bias"                             -> (model)
    default                              -> replicated
}
"""
STATE = LAYOUT + """
state {
    ".*kernel" -> (model, data)
}
"""


def emitted(text: str, name: str):
    plan = planc.loads(text)
    module = types.ModuleType(name)
    exec(compile(module_text(plan.ir), name, "exec"), module.__dict__)
    return plan, module


def params():
    return {"dense_1": {"kernel": np.zeros((8, 4)), "bias": np.zeros(4)},
            "dense_0": {"kernel": np.zeros((16, 8)), "bias": np.zeros(2)}}


def nested_tree():
    p = params()
    return {
        "params": p,
        "blocks": [{"kernel": np.zeros((4, 4)), "bias": None},
                   (np.zeros((2, 2)), None, 3.0),
                   Block(jax.ShapeDtypeStruct((8, 8), np.float32), np.zeros(8))],
        "opt": Opt(count=np.zeros((), np.int32), mu=jax.tree_util.tree_map(np.zeros_like, p),
                   nu=None),
        "none": None,
        "empty": {},
        "ints": {10: [np.zeros(4)], 2: jax.numpy.zeros((8, 2))},
    }


def same(a, b) -> None:
    """`a` and `b`, pytrees of NamedSharding: the same structure, paths and shardings."""
    mine, mine_def = tree_paths(a)
    theirs, their_def = tree_paths(b)
    assert mine_def == their_def
    assert [p for p, _ in mine] == [p for p, _ in theirs]
    for (path, x), (_, y) in zip(mine, theirs):
        assert x == y, path


@pytest.mark.parametrize("text", [LAYOUT, STATE], ids=["layout", "state"])
def test_module_shardings_equal_plan_shardings_on_a_nested_tree(text):
    plan, module = emitted(text, "nested_module")
    tree = nested_tree()
    mesh = plan.mesh()
    same(module.shardings(tree, mesh), plan.shardings(tree, mesh))
    assert len(jax.tree_util.tree_leaves(tree)) == 16  # None holds no leaf


def test_module_lays_out_optimizer_state_of_a_nested_tree_as_planc_does():
    plan, module = emitted(STATE, "nested_state_module")
    p = params()
    state = (Opt(count=np.zeros((), np.int32), mu=jax.tree_util.tree_map(np.zeros_like, p),
                 nu=[jax.tree_util.tree_map(np.zeros_like, p), None]), None)
    mesh = plan.mesh()
    same(module.shardings(state, mesh, params=p), plan.shardings(state, mesh, params=p))
    assert module.shardings(state, mesh, params=p)[0].mu["dense_1"]["kernel"].spec == \
        jax.sharding.PartitionSpec("model", "data")


@pytest.mark.parametrize("name", ["nested", *TREES])
def test_module_paths_are_jaxs_own(name):
    _, module = emitted(LAYOUT, "paths_module")
    tree = nested_tree() if name == "nested" else TREES[name]
    flat, treedef = jax.tree_util.tree_flatten_with_path(tree)
    mine, mine_def = module._paths(tree)
    assert mine_def == treedef
    assert [p for p, _ in mine] == ["/".join(module._key_text(k) for k in keys)
                                    for keys, _ in flat]
    assert all(a is b for (_, a), (_, b) in zip(mine, flat))


def test_module_errors_name_a_nested_leaf_by_its_path():
    plan, module = emitted(LAYOUT, "misfit_module")
    tree = {"opt": Opt(count=0, mu={"dense_9": {"kernel": np.zeros((3, 4))}}, nu=None)}
    with pytest.raises(ValueError, match=r"`opt/mu/dense_9/kernel` \[3, 4\]: its layout"):
        module.shardings(tree)
    with pytest.raises(planc.PlanError, match="opt/mu/dense_9/kernel"):
        plan.shardings(tree)


def test_module_fails_on_unsortable_keys_as_jax_does():
    _, module = emitted(LAYOUT, "unsortable_module")
    tree = {1: np.zeros(1), "a": np.zeros(1)}
    with pytest.raises(Exception) as mine:
        module.shardings(tree)
    with pytest.raises(Exception) as theirs:
        jax.tree_util.tree_flatten_with_path(tree)
    assert type(mine.value) is type(theirs.value)
