"""`plan.shardings(tree, mesh)` walks a tree of dicts, lists and tuples once, resolving
each array leaf as it meets it; its answers, its errors and the trees it cannot open
are those of the general path (`leaves_with_paths`, `resolve_all`, `tree_unflatten`)."""

import collections

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding, PartitionSpec

import planc
from planc.diagnostics import PlanError
from planc.targets.jax.paths import leaves_with_paths

PLAN = """\
plan walk
mesh(data = 2, model = 4)
model_parallel(batch = data)
layout {
    "blocks/[0-9]+/attn/kernel" -> (data, model)
    "blocks/[0-9]+/mlp/kernel"  -> (model, data)
    "embed"                     -> (model, _)
    default                     -> replicated
}
"""

State = collections.namedtuple("State", "count mu")


def sds(*shape):
    return jax.ShapeDtypeStruct(shape, np.float32)


@pytest.fixture(scope="module")
def plan():
    return planc.loads(PLAN)


@pytest.fixture(scope="module")
def mesh(plan):
    return plan.mesh()


def leaf_by_leaf(plan, mesh, tree):
    """Each leaf's sharding from its own path and shape: what the walk must agree with."""
    leaves, treedef = leaves_with_paths(tree)
    return jax.tree_util.tree_unflatten(treedef, [
        NamedSharding(mesh, plan.partition_spec(path, np.shape(leaf)))
        for path, leaf in leaves])


TREE = {
    "embed": sds(64, 16),
    "blocks": [{"attn": {"kernel": sds(16, 16), "bias": np.zeros(16, np.float32)},
                "mlp": {"kernel": sds(16, 32), "gates": (sds(4), None)}} for _ in range(3)],
    "norm": jnp.ones(16),
}


def test_each_leaf_gets_the_sharding_of_its_path_and_shape(plan, mesh):
    assert plan.shardings(TREE, mesh) == leaf_by_leaf(plan, mesh, TREE)


def test_the_tree_keeps_its_structure(plan, mesh):
    out = plan.shardings(TREE, mesh)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(TREE)
    assert type(out["blocks"]) is list and type(out["blocks"][0]["mlp"]["gates"]) is tuple
    assert out["blocks"][0]["mlp"]["gates"][1] is None


def test_dicts_keep_their_key_order(plan, mesh):
    tree = {"z": sds(4), "embed": sds(64, 16), "a": sds(2)}
    assert list(plan.shardings(tree, mesh)) == ["z", "embed", "a"]


def test_leaves_of_one_layout_share_one_sharding(plan, mesh):
    out = plan.shardings(TREE, mesh)
    kernels = [block["attn"]["kernel"] for block in out["blocks"]]
    assert all(k is kernels[0] for k in kernels)


def test_a_bare_array_is_its_own_tree(plan, mesh):
    assert plan.shardings(sds(4, 4), mesh) == NamedSharding(mesh, plan.partition_spec("", (4, 4)))


@pytest.mark.parametrize("tree", [
    {"opt": State(count=np.zeros(()), mu={"embed": sds(64, 16)})},
    {"embed": sds(64, 16), "step": 3, "lr": 0.1},
    {1: sds(4), 2: {"embed": sds(64, 16)}},
    collections.OrderedDict([("embed", sds(64, 16)), ("a", sds(2))]),
], ids=["namedtuple", "python scalars", "int keys", "ordered dict"])
def test_a_tree_the_walk_does_not_open_gets_the_same_answers(plan, mesh, tree):
    assert plan.shardings(tree, mesh) == leaf_by_leaf(plan, mesh, tree)


def test_a_literal_rule_wins_its_path_in_the_walk(plan, mesh):
    out = plan.shardings({"embed": sds(64, 16), "x": {"embed": sds(64, 16)}}, mesh)
    assert out["embed"].spec == PartitionSpec("model", None)
    assert out["x"]["embed"].spec == PartitionSpec(None, None)


def test_every_error_of_the_tree_is_raised_together_even_when_warm(plan, mesh):
    plan.shardings(TREE, mesh)  # the layouts of the good leaves are known now
    bad = dict(TREE, extra={"blocks": None},
               blocks=TREE["blocks"] + [{"attn": {"kernel": sds(15, 16)},
                                         "mlp": {"kernel": sds(16, 31)}}])
    with pytest.raises(PlanError) as err:
        plan.shardings(bad, mesh)
    assert [d.variable for d in err.value.diagnostics] == [
        "blocks/3/attn/kernel", "blocks/3/mlp/kernel"]


def test_a_path_over_the_length_limit_is_refused(plan, mesh):
    tree = {"blocks": [{"attn": {"kernel": sds(16, 16)}}], "x" * 70_000: sds(4)}
    with pytest.raises(PlanError) as err:
        plan.shardings(tree, mesh)
    assert [d.code for d in err.value.diagnostics] == ["P125"]


def test_a_path_with_a_line_break_is_refused(plan, mesh):
    plan.shardings({"a": sds(4)}, mesh)
    with pytest.raises(PlanError) as err:
        plan.shardings({"a\nb": sds(4)}, mesh)
    assert [d.code for d in err.value.diagnostics] == ["P125"]


def test_without_default_an_unmatched_vector_stays_replicated_and_a_matrix_is_an_error():
    plan = planc.loads(PLAN.replace("    default                     -> replicated\n", ""))
    mesh = plan.mesh()
    assert plan.shardings({"norm": sds(16)}, mesh)["norm"].spec == PartitionSpec(None)
    with pytest.raises(PlanError) as err:
        plan.shardings({"norm": sds(16), "proj": sds(16, 16)}, mesh)
    assert [d.code for d in err.value.diagnostics] == ["P301"]


def test_the_emitted_module_walks_the_same_way(plan, mesh, tmp_path):
    import importlib.util

    from planc.targets.emit.jax_module import module_text

    path = tmp_path / "walk_sharding.py"
    path.write_text(module_text(plan.ir))
    spec = importlib.util.spec_from_file_location("walk_sharding", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.shardings(TREE, mesh) == plan.shardings(TREE, mesh)
    assert list(module.shardings({"z": sds(4), "a": sds(2)}, mesh)) == ["z", "a"]
    with pytest.raises(ValueError, match="2 variable"):
        module.shardings({"embed": sds(63, 16), "blocks": [{"attn": {"kernel": sds(15, 16)}}]},
                         mesh)
