"""The JAX target: meshes, PartitionSpecs, NamedShardings, born-sharded init, batches.

Runs on 8 simulated CPU devices (tests/conftest.py sets XLA_FLAGS before jax loads).
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from collections import namedtuple  # noqa: E402
from types import SimpleNamespace  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import planc  # noqa: E402
from planc.targets.jax import sharding as backend  # noqa: E402
from planc.targets.devices import _device_grid  # noqa: E402

import models_jax  # noqa: E402

from conftest import PLANS  # noqa: E402

TP = """
mesh(data = auto, model = 2)
model_parallel(batch = data)
layout {
    "dense_0/kernel" -> (_, model)
    "dense_0/bias"   -> (model)
    "dense_1/kernel" -> (model, _)
    "dense_1/bias"   -> replicated
}
"""


def ids(mesh):
    return [[d.id for d in row] for row in mesh.devices]


def codes(exc):
    return sorted({d.code for d in exc.value.diagnostics})


@pytest.fixture(scope="module")
def tp():
    return planc.loads(TP, file="tp.kd")


# -- mesh ----------------------------------------------------------------------------------

def test_mesh_resolves_auto_over_all_devices(tp):
    mesh = tp.mesh()
    assert dict(mesh.shape) == {"data": 4, "model": 2}
    assert mesh.axis_names == ("data", "model")


def test_mesh_orders_cpu_devices_row_major():
    mesh = planc.loads("mesh(data = auto, model = 2)\nmodel_parallel(batch = data)").mesh()
    assert ids(mesh) == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_mesh_over_given_devices_resolves_auto_for_them(tp):
    mesh = tp.mesh(jax.devices()[:4])
    assert dict(mesh.shape) == {"data": 2, "model": 2}
    assert ids(mesh) == [[0, 1], [2, 3]]


def test_mesh_device_count_that_does_not_fit_is_p201():
    plan = planc.loads("mesh(data = 3, model = 2)\nmodel_parallel(batch = data)")
    with pytest.raises(planc.PlanError) as exc:
        plan.mesh()
    assert codes(exc) == ["P201"]
    assert "6 devices" in str(exc.value) and "not 8" in str(exc.value)


def test_mesh_auto_that_cannot_take_the_rest_is_p201():
    plan = planc.loads("mesh(data = auto, model = 3)\nmodel_parallel(batch = data)")
    with pytest.raises(planc.PlanError) as exc:
        plan.mesh()
    assert codes(exc) == ["P201"]


def test_mesh_with_slices_places_each_slice_as_a_contiguous_block():
    plan = planc.loads("mesh(data = 2, model = 2)\nslices(model = 2)\n"
                       "model_parallel(batch = data)")
    mesh = plan.mesh()
    assert dict(mesh.shape) == {"data": 2, "model": 4}
    # Devices 0-3 stand for slice 0 and 4-7 for slice 1, laid side by side along `model`
    # as create_hybrid_device_mesh lays slices out (a plain reshape would not).
    assert ids(mesh) == [[0, 1, 4, 5], [2, 3, 6, 7]]


def test_device_grid_groups_devices_by_slice_index():
    fake = [SimpleNamespace(id=i, platform="cpu", device_kind="cpu", process_index=0,
                            slice_index=i % 2) for i in range(8)]
    grid = _device_grid((4, 2), (2, 1), fake)
    assert [[d.id for d in row] for row in grid] == [[0, 2], [4, 6], [1, 3], [5, 7]]


def test_device_grid_groups_devices_by_process_without_slice_indices():
    fake = [SimpleNamespace(id=i, platform="cpu", device_kind="cpu", process_index=i // 4)
            for i in range(8)]
    grid = _device_grid((2, 4), (1, 2), fake)
    assert [[d.id for d in row] for row in grid] == [[0, 1, 4, 5], [2, 3, 6, 7]]


def test_mesh_whose_slices_the_devices_cannot_form_is_p201():
    plan = planc.loads("mesh(data = 2, model = 2)\nslices(model = 2)\n"
                       "model_parallel(batch = data)")
    fake = [SimpleNamespace(id=i, platform="cpu", device_kind="cpu", process_index=i % 4)
            for i in range(8)]
    with pytest.raises(planc.PlanError) as exc:
        plan.mesh(fake)
    assert codes(exc) == ["P201"]
    assert "4 process(es)" in str(exc.value)


def test_mesh_rejects_a_device_listed_twice(tp):
    d = jax.devices()
    with pytest.raises(ValueError, match="listed twice"):
        tp.mesh([d[0], d[0], d[1], d[2]])


# -- partition_spec ------------------------------------------------------------------------

def test_partition_spec_comes_from_the_resolver(tp):
    assert tp.partition_spec("dense_0/kernel", (16, 32)) == P(None, "model")
    assert tp.partition_spec("dense_1/bias", (8,)) == P(None)


def test_partition_spec_takes_the_first_alternative_that_fits():
    plan = planc.load_plan(os.path.join(PLANS, "gemma.kd"))
    assert plan.partition_spec("decoder_block_0/attention/query/kernel",
                               (8, 64, 16)) == P("model", "batch", None)
    # One KV head cannot be split over `model`: the fallback alternative is taken.
    assert plan.partition_spec("decoder_block_0/attention/key/kernel",
                               (1, 64, 16)) == P(None, "batch", None)


def test_partition_spec_splits_one_dimension_over_two_axes():
    plan = planc.loads('mesh(fsdp = 4, model = 2)\nmodel_parallel(batch = fsdp)\n'
                       'layout { "embed" -> ((fsdp, model), _) }')
    assert plan.partition_spec("embed", (64, 16)) == P(("fsdp", "model"), None)


def test_partition_spec_block_is_the_plain_axis():
    plan = planc.loads('mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n'
                       'layout { "w" -> (_, model[16]) }')
    assert plan.partition_spec("w", (8, 64)) == P(None, "model")


def test_partition_spec_block_demands_divisibility_by_block_times_axis():
    plan = planc.loads('mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n'
                       'layout { "w" -> (_, model[16]) }')
    with pytest.raises(planc.PlanError) as exc:
        plan.partition_spec("w", (8, 48))  # 48 is divisible by 2, not by 16 x 2
    assert codes(exc) == ["P303"]


def test_partition_spec_error_is_a_plan_error(tp):
    with pytest.raises(planc.PlanError) as exc:
        tp.partition_spec("dense_2/kernel", (4, 4))
    assert codes(exc) == ["P301"]


def test_partition_spec_sizes_auto_from_jax_devices():
    plan = planc.loads('mesh(data = auto, model = 2)\nmodel_parallel(batch = data)\n'
                       'layout { "w" -> (data, model) | (_, model) }')
    assert plan.partition_spec("w", (8, 2)) == P("data", "model")
    assert plan.partition_spec("w", (6, 2)) == P(None, "model")  # 6 % 4 != 0


def test_partition_spec_expands_ellipsis_for_stacked_layers():
    plan = planc.load_plan(os.path.join(PLANS, "jax_stacked.kd"))
    assert plan.partition_spec("params/layers/attn/wq", (3, 16, 4, 4)) == \
        P(None, "data", "model", None)


def test_data_parallel_plan_replicates_every_variable():
    plan = planc.load_plan(os.path.join(PLANS, "mlp_data_parallel.kd"))
    specs = plan.shardings(jax.eval_shape(models_jax.mlp_init, jax.random.key(0)))
    assert {s.spec for s in jax.tree_util.tree_leaves(specs)} == {P(None), P(None, None)}


# -- shardings / shard ------------------------------------------------------------------------

Pair = namedtuple("Pair", ["kernel", "bias"])


def test_shardings_keep_the_tree_structure_and_name_leaves_by_path():
    plan = planc.loads('mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\n'
                       'layout { "blocks/\\d+/kernel" -> (_, model)\n'
                       '         "head/kernel" -> (model, _)\n default -> replicated }')
    tree = {"blocks": [Pair(np.zeros((4, 8)), np.zeros(8)), Pair(np.zeros((4, 8)), None)],
            "head": {"kernel": jax.ShapeDtypeStruct((8, 2), jnp.float32)}, "step": 3}
    out = plan.shardings(tree)
    assert jax.tree_util.tree_structure(out) == jax.tree_util.tree_structure(tree)
    assert out["blocks"][1].kernel.spec == P(None, "model")
    assert out["blocks"][0].bias.spec == P(None)
    assert out["head"]["kernel"].spec == P("model", None)
    assert out["step"].spec == P()


def test_shardings_raise_every_error_together(tp):
    bad = {"dense_0": {"kernel": np.zeros((4, 3)), "bias": np.zeros(3)},
           "other": np.zeros((2, 2))}
    with pytest.raises(planc.PlanError) as exc:
        tp.shardings(bad)
    found = {(d.code, d.variable) for d in exc.value.errors}
    assert found == {("P303", "dense_0/kernel"), ("P303", "dense_0/bias"), ("P301", "other")}


def test_shard_gives_each_device_the_plan_shard_shape(tp):
    params = models_jax.mlp_init(jax.random.key(0))
    placed = tp.shard(params)
    kernel = placed["dense_0"]["kernel"]
    assert kernel.sharding.spec == P(None, "model")
    assert {s.data.shape for s in kernel.addressable_shards} == {(16, 16)}
    np.testing.assert_array_equal(np.asarray(kernel), np.asarray(params["dense_0"]["kernel"]))


def test_shardings_on_a_mesh_of_another_shape_is_an_error(tp):
    other = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    with pytest.raises(ValueError, match="`model` is 4 in the mesh but 2 in the plan"):
        tp.shardings({"dense_1": {"bias": np.zeros(8)}}, mesh=other)


def test_shardings_on_a_mesh_with_other_axes_is_an_error(tp):
    other = jax.sharding.Mesh(np.array(jax.devices()).reshape(4, 2), ("batch", "model"))
    with pytest.raises(ValueError, match="build the mesh with plan.mesh"):
        tp.shardings({}, mesh=other)


def test_optimizer_state_mirrors_parameter_layouts(tp):
    params = models_jax.mlp_init(jax.random.key(0))
    state = optax.adam(1e-3).init(params)
    out = tp.shardings(state, params=params)
    adam = out[0]
    assert adam.mu["dense_0"]["kernel"].spec == P(None, "model")
    assert adam.nu["dense_1"]["kernel"].spec == P("model", None)
    assert adam.count.spec == P()


def test_optimizer_leaf_of_another_shape_is_replicated(tp):
    params = models_jax.mlp_init(jax.random.key(0))
    state = {"factored": {"dense_0": {"kernel": np.zeros((16,))}}}
    assert tp.shardings(state, params=params)["factored"]["dense_0"]["kernel"].spec == P(None)


# -- init ------------------------------------------------------------------------------------

BIG = """
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
    "w" -> (data, model)
    "b" -> replicated
}
"""


def _big(key):
    return {"w": jax.random.normal(key, (512, 256), jnp.float32), "b": jnp.zeros((256,))}


def test_init_creates_parameters_with_the_plan_shardings():
    plan = planc.loads(BIG)
    params = plan.init(_big, jax.random.key(0))
    assert params["w"].sharding.spec == P("data", "model")
    assert {s.data.shape for s in params["w"].addressable_shards} == {(128, 128)}
    assert params["b"].sharding.spec == P(None)
    np.testing.assert_allclose(np.asarray(params["w"]), np.asarray(_big(jax.random.key(0))["w"]))


def test_init_compiles_with_out_shardings_so_no_device_holds_a_full_copy():
    plan = planc.loads(BIG)
    jitted, out = backend.init_jit(plan.ir, _big, jax.random.key(0))
    compiled = jitted.lower(jax.random.key(0)).compile()
    assert compiled.output_shardings["w"].spec == P("data", "model")
    # Per device, the program's outputs and temporaries together stay below the size of
    # the full `w`: each device generates only its own shard.
    memory = compiled.memory_analysis()
    full = 512 * 256 * 4
    assert memory.output_size_in_bytes + memory.temp_size_in_bytes < full


def test_init_shards_optimizer_state_like_the_parameters(tp):
    opt = optax.adam(1e-3)

    def make(key):
        params = models_jax.mlp_init(key)
        return params, opt.init(params)

    params, state = tp.init(make, jax.random.key(1))
    assert params["dense_1"]["kernel"].sharding.spec == P("model", None)
    assert state[0].mu["dense_1"]["kernel"].sharding.spec == P("model", None)
    assert state[0].count.sharding.spec == P()


def test_init_reports_plan_errors_before_running(tp):
    calls = []

    def make(key):
        calls.append(1)
        return {"unknown": jnp.zeros((4, 4))}

    with pytest.raises(planc.PlanError) as exc:
        tp.init(make, jax.random.key(0))
    assert codes(exc) == ["P301"]
    assert len(calls) == 1  # traced once by eval_shape, never run


# -- data --------------------------------------------------------------------------------------

def test_data_sharding_splits_dimension_0_over_the_batch_axis(tp):
    assert tp.data_sharding(3).spec == P("data", None, None)


def test_data_sharding_over_several_batch_axes_is_a_tuple():
    plan = planc.loads("mesh(data = 2, fsdp = 2, model = 2)\n"
                       "model_parallel(batch = (data, fsdp))")
    assert plan.data_sharding(2).spec == P(("data", "fsdp"), None)


def test_shard_batch_places_the_global_batch(tp):
    out = tp.shard_batch({"x": np.ones((8, 16), np.float32), "y": np.ones((8, 8), np.float32)})
    assert out["x"].sharding.spec == P("data", None)
    assert {s.data.shape for s in out["x"].addressable_shards} == {(2, 16)}


def test_shard_batch_indivisible_batch_is_p312_naming_the_leaf(tp):
    with pytest.raises(planc.PlanError) as exc:
        tp.shard_batch({"x": np.zeros((6, 16)), "y": np.zeros((8, 2))})
    [d] = exc.value.errors
    assert d.code == "P312" and d.variable == "x"
    assert "6" in d.message and "`data` (size 4)" in d.message


# -- outputs -----------------------------------------------------------------------------------

OUT = """
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout { default -> replicated }
outputs {
    "decoder_block_\\d+/attention" -> (data, _, model)
    "embed" -> (data, _)
}
"""


def test_output_sharding_matches_the_layer_path():
    plan = planc.loads(OUT)
    assert plan.output_sharding("decoder_block_3/attention", 3).spec == P("data", None, "model")


def test_output_sharding_is_none_when_no_output_rule_matches():
    assert planc.loads(OUT).output_sharding("decoder_block_3/ffw", 3) is None


def test_output_sharding_rank_must_fit():
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(OUT).output_sharding("embed", 3)
    assert codes(exc) == ["P304"]


def test_output_sharding_constrains_an_activation_xla_may_pad():
    plan = planc.loads(OUT)
    sharding = plan.output_sharding("embed", 2)

    @jax.jit
    def f(x):
        return jax.lax.with_sharding_constraint(x * 2, sharding)

    assert f(jnp.ones((8, 3))).sharding.is_equivalent_to(sharding, 2)
    y = f(jnp.ones((6, 3)))  # 6 is not divisible by `data` (4): XLA pads, no error
    np.testing.assert_array_equal(np.asarray(y), np.full((6, 3), 2.0))


SIX = 'mesh(data = 4, model = 2)\nmodel_parallel(batch = data)\nlayout {\n    "w/\\d+" -> (data, model)\n}\n'


def _six(key):
    return {"w": [jax.random.normal(k, (64, 32)) for k in jax.random.split(key, 6)]}


def _assert_same_as_one_plain_program(params):
    expected = jax.jit(_six)(jax.random.key(0))
    for a, b in zip(expected["w"], params["w"]):
        assert b.sharding.spec == P("data", "model")
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_large_model_on_the_cpu_is_one_memory_scheduled_program_with_the_same_values(
        monkeypatch):
    """Past `INIT_GROUP_MIN_BYTES`, `init` on the CPU compiles one program with the
    memory scheduler (no groups) and gives freed memory back; the values are exactly
    those of the plain program."""
    monkeypatch.setattr(backend, "INIT_GROUP_MIN_BYTES", 64 * 32 * 4 * 2)
    trims = []
    monkeypatch.setattr(backend, "_return_freed_memory", lambda: trims.append(1))

    def no_groups(sizes):
        raise AssertionError("grouped although the memory scheduler is available")

    monkeypatch.setattr(backend, "_init_groups", no_groups)
    _assert_same_as_one_plain_program(planc.loads(SIX).init(_six, jax.random.key(0)))
    assert trims == [1, 1]  # after compiling, and after running


def test_init_compiles_with_the_memory_scheduler_and_it_takes_effect():
    """The option `init_jit` passes is one the installed XLA both accepts and obeys:
    jaxlib 0.10 still accepts the old boolean but ignores it, which only the
    temporaries show."""
    assert backend._cpu_memory_scheduler() is not None
    plan = planc.loads(SIX)
    jitted, out = backend.init_jit(plan.ir, _six, jax.random.key(0))
    tuned = jitted.lower(jax.random.key(0)).compile().memory_analysis()
    plain = jax.jit(_six, out_shardings=out).lower(jax.random.key(0)).compile()
    assert tuned.temp_size_in_bytes < plain.memory_analysis().temp_size_in_bytes


def test_the_memory_scheduler_is_none_where_xla_refuses_every_spelling(monkeypatch):
    monkeypatch.setattr(backend, "_CPU_MEMORY_SCHEDULER", ({"xla_no_such_option": True},))
    backend._cpu_memory_scheduler.cache_clear()
    try:
        assert backend._cpu_memory_scheduler() is None
    finally:
        monkeypatch.undo()
        backend._cpu_memory_scheduler.cache_clear()
    assert backend._cpu_memory_scheduler() is not None


def test_a_large_model_is_initialised_in_groups_where_the_scheduler_is_refused(monkeypatch):
    """Without the memory scheduler, `init` on the CPU computes big models a group of
    outputs at a time; the values are exactly those of one program."""
    monkeypatch.setattr(backend, "_cpu_memory_scheduler", lambda mesh=None: None)
    monkeypatch.setattr(backend, "INIT_GROUP_MIN_BYTES", 64 * 32 * 4 * 2)
    groups = []
    split = backend._init_groups
    monkeypatch.setattr(backend, "_init_groups", lambda sizes: groups.append(split(sizes))
                        or groups[-1])
    _assert_same_as_one_plain_program(planc.loads(SIX).init(_six, jax.random.key(0)))
    assert groups == [[[0, 1], [2, 3], [4, 5]]]
