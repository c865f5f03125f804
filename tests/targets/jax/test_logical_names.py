"""The JAX target with logical names: a Flax model's own names lay out its state
(`plan.shardings` of an NNX state or Linen variables), and activations are constrained by
names through the same table (`plan.logical_constraint`, `plan.logical_spec`)."""

import flax.linen as nn
import jax
import jax.numpy as jnp
import pytest
from flax import nnx

import planc
from planc.diagnostics import PlanError

PLAN = ("mesh(fsdp = 4, tp = 2)\nmodel_parallel(batch = fsdp)\n"
        "axes {\n  batch -> fsdp\n  embed -> fsdp\n  mlp -> tp\n  vocab -> tp\n"
        "  q_heads -> tp\n  heads -> tp\n  kv -> _\n  norm -> _\n}\n")


@pytest.fixture
def plan():
    return planc.loads(PLAN)


def test_an_nnx_state_is_laid_out_by_its_own_names(plan):
    import models_flax

    with nnx.use_eager_sharding(False):
        module = nnx.eval_shape(models_flax.nnx_decoder)
    shardings = plan.shardings(nnx.state(module))
    specs = {"/".join(map(str, p)): v.get_value().spec
             for p, v in nnx.to_flat_state(shardings)}
    assert specs["layers/0/wi/kernel"] == jax.P("fsdp", "tp")
    assert specs["embedding/embedding"] == jax.P("tp", "fsdp")
    assert specs["layers/1/norm/scale"] == jax.P(None)


def test_an_nnx_model_is_born_sharded_by_its_names(plan):
    import models_flax

    with nnx.use_eager_sharding(False):
        abstract = nnx.eval_shape(models_flax.nnx_decoder)
    graph, state = nnx.split(abstract)
    shardings = plan.shardings(state)

    @jax.jit
    def init():
        with nnx.use_eager_sharding(False):
            return nnx.state(models_flax.nnx_decoder())
    placed = jax.jit(init, out_shardings=shardings)()
    kernel = placed["layers"][0]["wi"]["kernel"].get_value()
    assert kernel.sharding.spec == jax.P("fsdp", "tp")
    assert kernel.addressable_shards[0].data.shape == (8, 32)


def test_linen_variables_are_laid_out_as_flax_would(plan):
    import models_flax

    variables = jax.eval_shape(models_flax.linen_variables)
    ours = plan.shardings(variables)
    rules = (("embed", "fsdp"), ("mlp", "tp"), ("norm", None))
    theirs = nn.logical_to_mesh_sharding(nn.get_partition_spec(variables), plan.mesh(), rules)
    got = jax.tree.leaves(ours, is_leaf=lambda x: isinstance(x, jax.sharding.NamedSharding))
    want = jax.tree.leaves(theirs, is_leaf=lambda x: isinstance(x, jax.sharding.NamedSharding))
    # Equal as shardings: Flax writes an unnamed bias `P()`, planc `P(None)`.
    assert [a.is_equivalent_to(b, len(a.spec) or 1) for a, b in zip(got, want)] == \
        [True] * len(want) and len(got) == len(want) == 4


def test_an_activation_is_constrained_by_names_inside_jit(plan):
    @jax.jit
    def f(x):
        return plan.logical_constraint(x * 2, ("batch", "mlp"))

    out = f(jnp.ones((8, 4)))
    assert out.sharding.spec == jax.P("fsdp", "tp")


def test_logical_spec_is_flaxs_answer(plan):
    rules = tuple((e.name, e.axes[0] if e.axes else None) for e in plan.ir.logical_axes)
    for names in (("batch", "embed"), ("embed", "q_heads", "kv"), ("vocab", None)):
        assert tuple(plan.logical_spec(names)) == tuple(nn.logical_to_mesh_axes(names, rules))


def test_a_name_without_an_entry_is_an_error_not_a_replicated_activation(plan):
    with pytest.raises(PlanError) as caught:
        plan.logical_constraint(jnp.ones((8, 4)), ("batch", "mpl"))
    [d] = caught.value.diagnostics
    assert d.code == "P101" and "did you mean `mlp`?" in d.help[0]


def test_names_that_do_not_fit_the_rank_are_P344(plan):
    with pytest.raises(PlanError) as caught:
        plan.logical_constraint(jnp.ones((8, 4)), ("batch",))
    assert [d.code for d in caught.value.diagnostics] == ["P344"]


def test_axes_that_do_not_divide_the_activation_are_P317(plan):
    with pytest.raises(PlanError) as caught:
        plan.logical_constraint(jnp.ones((6, 4)), ("batch", "mlp"))
    [d] = caught.value.diagnostics
    assert d.code == "P317" and "not divisible by `fsdp` (size 4)" in d.message


def test_a_plan_without_a_table_says_so():
    plain = planc.loads("mesh(batch = 8)\ndata_parallel\n")
    with pytest.raises(PlanError) as caught:
        plain.logical_spec(("batch",))
    assert "no `axes` table" in caught.value.diagnostics[0].message
