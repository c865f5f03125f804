"""Activation layouts for plain JAX: `plan.constrain`, `plan.shard_map`, `plan.use`, and
placement under explicit, auto and mixed axes."""

import os
import subprocess
import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec as P

import planc
from planc.targets.jax.activations import ConstraintNote

PLAN = """mesh(data = 2, model = 4)
model_parallel(batch = data)
axis_types {types}
layout {{
    ".*kernel" -> (_, model)
}}
outputs {{
    "hidden" -> (data, _, model)
    "flat"   -> (data, model) | replicated
}}
"""


def plan_of(types="explicit"):
    return planc.loads(PLAN.format(types=types), file="act.kd")


def test_constrain_outside_jit_places_the_value_with_the_rule_in_its_type():
    plan = plan_of()
    out = plan.constrain(np.ones((4, 6, 16), np.float32), "hidden")
    assert jax.typeof(out).sharding.spec == P("data", None, "model")


@pytest.mark.parametrize("types", ["explicit", "auto", "(data = explicit)"])
def test_constrain_inside_jit_gives_the_rule_s_layout(types):
    plan = plan_of(types)
    with plan.use():
        out = jax.jit(lambda x: plan.constrain(x * 2, "hidden"))(jnp.ones((4, 6, 16)))
    assert out.sharding.spec == P("data", None, "model")
    np.testing.assert_array_equal(np.asarray(out), 2.0)


def test_under_explicit_axes_the_traced_value_has_the_rule_s_type():
    plan = plan_of()
    seen = []

    def f(x):
        y = plan.constrain(x + 1, "hidden")
        seen.append(jax.typeof(y).sharding.spec)
        return y

    with plan.use():
        jax.jit(f)(plan.shard_batch(np.ones((4, 6, 16), np.float32)))
    assert seen == [P("data", None, "model")]


def test_mixed_axes_reshard_the_explicit_ones_and_constrain_the_auto_ones():
    plan = plan_of("(data = explicit)")
    seen = []

    def f(x):
        y = plan.constrain(x + 1, "hidden")
        seen.append(jax.typeof(y).sharding.spec)  # only explicit axes are in the type
        return y

    with plan.use():
        out = jax.jit(f)(jnp.ones((4, 6, 16)))
    assert seen == [P("data", None, None)]
    assert out.sharding.spec == P("data", None, "model")


def test_a_rank_the_rule_does_not_take_is_p317_at_the_rule_s_line():
    with pytest.raises(planc.PlanError) as info:
        plan_of().constrain(jnp.ones((4, 16)), "hidden")
    (d,) = info.value.diagnostics
    assert (d.code, d.span.file, d.span.line) == ("P317", "act.kd", 8)
    assert "[4, 16]" in d.message and "rank 3" in d.message


def test_an_indivisible_dimension_is_p317_inside_jit_too():
    plan = plan_of("auto")
    with pytest.raises(planc.PlanError) as info:
        jax.jit(lambda x: plan.constrain(x, "hidden"))(jnp.ones((4, 6, 15)))
    (d,) = info.value.diagnostics
    assert d.code == "P317" and d.span.line == 8 and "size 15" in d.message


def test_an_alternative_that_fits_is_taken():
    out = plan_of().constrain(np.ones((3, 5), np.float32), "flat")
    assert jax.typeof(out).sharding.spec == P(None, None)


def test_no_rule_is_a_p318_note_and_the_value_unchanged():
    x = jnp.ones((4, 16))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = plan_of().constrain(x, "unknown_layer")
    assert out is x
    (w,) = [c for c in caught if issubclass(c.category, ConstraintNote)]
    assert w.message.diagnostics[0].code == "P318"


SETTER = """
import jax, planc
plan = planc.loads("mesh(data = 2, model = 4)\\nmodel_parallel(batch = data)\\n"
                   "axis_types explicit")
plan.use()
mesh = jax.sharding.get_abstract_mesh()
print(mesh.axis_names, mesh.axis_types)
"""


def test_use_is_a_setter_as_well_as_a_context_manager():
    # A process of its own: a mesh set globally stays set (jax 0.7.1 cannot unset it).
    out = subprocess.run([sys.executable, "-c", SETTER], capture_output=True, text=True,
                         check=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert out.stdout.strip() == "('data', 'model') (Explicit, Explicit)"


def test_use_as_a_context_manager_sets_the_mesh_for_its_block_only():
    plan = plan_of()
    with plan.use():
        assert jax.sharding.get_abstract_mesh().axis_names == ("data", "model")
    assert jax.sharding.get_abstract_mesh().axis_names == ()


def test_use_on_a_device_count_that_does_not_fit_is_p201_at_the_mesh():
    with pytest.raises(planc.PlanError) as info:
        plan_of().use(devices=jax.devices()[:6])
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line) == ("P201", 1)


def test_shard_inside_jit_places_tracers_as_the_plan_says():
    plan = plan_of()
    seen = []

    def f(params):
        placed = plan.shard(params)
        seen.append(jax.typeof(placed["dense"]["kernel"]).sharding.spec)
        return placed

    with plan.use():
        jax.jit(f)({"dense": {"kernel": jnp.ones((8, 16))}})
    assert seen == [P(None, "model")]


def test_init_gives_arrays_typed_with_the_plan_s_specs():
    plan = plan_of()
    params = plan.init(lambda: {"dense": {"kernel": jnp.zeros((8, 16))}})
    assert jax.typeof(params["dense"]["kernel"]).sharding.spec == P(None, "model")


def test_shard_batch_types_the_batch_over_the_batch_axes():
    batch = plan_of().shard_batch(np.ones((4, 3), np.float32))
    assert jax.typeof(batch).sharding.spec == P("data", None)


def test_activation_spec_uses_the_rank_only():
    plan = plan_of()
    assert plan.activation_spec("hidden", 3) == P("data", None, "model")
    assert plan.activation_spec("unknown", 3) is None


@pytest.mark.parametrize("types", ["explicit", "auto"])
def test_shard_map_takes_its_specs_from_the_outputs_rules(types):
    plan = plan_of(types)
    seen = []

    def body(x):
        seen.append(x.shape)
        return x * 2

    mapped = plan.shard_map(body, in_specs=("hidden",), out_specs="hidden")
    x = plan.constrain(np.arange(4 * 6 * 16, dtype=np.float32).reshape(4, 6, 16), "hidden")
    with plan.use():
        out = jax.jit(mapped)(x)
    assert set(seen) == {(2, 6, 4)}  # each device sees its shard
    assert out.sharding.spec == P("data", None, "model")
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)


def test_shard_map_with_a_name_no_rule_matches_is_an_error():
    plan = plan_of()
    with pytest.raises(planc.PlanError) as info:
        plan.shard_map(lambda x: x, in_specs=("nothing",), out_specs=P())(jnp.ones((4, 4)))
    assert info.value.diagnostics[0].code == "P318"


def test_shard_map_checks_an_input_against_its_rule():
    plan = plan_of()
    mapped = plan.shard_map(lambda x: x, in_specs=("hidden",), out_specs="hidden")
    with pytest.raises(planc.PlanError) as info:
        mapped(jnp.ones((4, 6, 15)))
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line) == ("P317", 8) and "the input" in d.message


def test_shard_map_passes_a_partition_spec_through():
    plan = plan_of("auto")
    mapped = plan.shard_map(lambda x: x + 1, in_specs=(plan.data_sharding(2).spec,),
                            out_specs=plan.data_sharding(2).spec)
    out = jax.jit(mapped)(jnp.zeros((4, 3)))
    assert out.sharding.is_equivalent_to(plan.data_sharding(2), 2)
    np.testing.assert_array_equal(np.asarray(out), 1.0)


def test_use_with_a_mesh_of_other_axis_types_is_refused():
    with pytest.raises(ValueError, match="auto in the mesh but explicit in the plan"):
        plan_of().use(plan_of("auto").mesh())
