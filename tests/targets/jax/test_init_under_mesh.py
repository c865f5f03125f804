"""`plan.init` where a mesh is current (`with plan.use():`, `with jax.set_mesh(...)`), as
a user writes it next to `plan.shard` (issue 26, item 1)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import planc
from planc.targets.jax import sharding as backend

PLAN = """
mesh(batch = auto, model = 2)
model_parallel(batch = batch)
layout {
    "dense_.*/kernel" -> (batch, model)
    "dense_.*/bias"   -> (model)
}
"""


def _init_fn(key):
    k0, k1 = jax.random.split(key)
    return {"dense_0": {"kernel": jax.random.normal(k0, (16, 32)), "bias": jnp.zeros(32)},
            "dense_1": {"kernel": jax.random.normal(k1, (32, 8)), "bias": jnp.zeros(8)}}


def _current(plan, how):
    return plan.use() if how == "use" else jax.set_mesh(plan.mesh())


@pytest.mark.parametrize("how", ["use", "set_mesh"])
def test_init_inside_a_current_mesh_gives_the_values_and_shardings_of_init_outside(how):
    plan = planc.loads(PLAN)
    outside = plan.init(_init_fn, jax.random.key(0))
    # The scheduler probe is cached per process: forgotten, so it runs under the mesh.
    backend._cpu_memory_scheduler.cache_clear()
    with _current(plan, how):
        inside = plan.init(_init_fn, jax.random.key(0))
    for path in (("dense_0", "kernel"), ("dense_0", "bias"), ("dense_1", "kernel")):
        a, b = outside[path[0]][path[1]], inside[path[0]][path[1]]
        assert b.sharding.spec == a.sharding.spec
        assert b.sharding.mesh.devices.tolist() == a.sharding.mesh.devices.tolist()
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))


def test_init_jit_inside_a_current_mesh_compiles_with_the_memory_scheduler():
    plan = planc.loads(PLAN)
    backend._cpu_memory_scheduler.cache_clear()
    with plan.use():
        jitted, out = backend.init_jit(plan.ir, _init_fn, jax.random.key(0))
        compiled = jitted.lower(jax.random.key(0)).compile()
    assert backend._cpu_memory_scheduler(plan.mesh()) is not None
    assert compiled.output_shardings["dense_0"]["kernel"].spec == out["dense_0"]["kernel"].spec


def test_init_in_groups_inside_a_current_mesh(monkeypatch):
    """Where XLA refuses the memory scheduler, the grouped programs run under the mesh too."""
    plan = planc.loads(PLAN)
    outside = plan.init(_init_fn, jax.random.key(0))
    monkeypatch.setattr(backend, "_cpu_memory_scheduler", lambda mesh=None: None)
    monkeypatch.setattr(backend, "INIT_GROUP_MIN_BYTES", 16 * 32 * 4)
    with plan.use():
        inside = plan.init(_init_fn, jax.random.key(0))
    np.testing.assert_array_equal(np.asarray(inside["dense_1"]["kernel"]),
                                  np.asarray(outside["dense_1"]["kernel"]))
    assert inside["dense_1"]["kernel"].sharding.spec == outside["dense_1"]["kernel"].sharding.spec
