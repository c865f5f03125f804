"""Which parameter an optimizer leaf mirrors: by the parameters' structure first, then by
path and shape, exact or refused; planc's JAX target and its emitted module alike."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import PartitionSpec as P

import planc
from targets.emit.test_compile import compile_cli, load_module

PLAN = """
mesh(data = 4, model = 2)
model_parallel(batch = data)
layout {
    "kernel"    -> (data, model)
    "mu/kernel" -> (model, data) on host
    default     -> replicated
}
"""  # `on host`: the emitted module then carries its optimizer-state runtime

PARAMS = {"kernel": np.zeros((8, 8), np.float32), "mu": {"kernel": np.zeros((8, 8), np.float32)}}


@pytest.fixture(scope="module")
def emitted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slots")
    (folder / "slots.kd").write_text(PLAN)
    assert compile_cli(folder / "slots.kd", "-o", folder / "slots_sharding.py") == 0
    return load_module(folder / "slots_sharding.py", "slots_sharding")


def _specs(shardings):
    return {jax.tree_util.keystr(k): s.spec
            for k, s in jax.tree_util.tree_flatten_with_path(shardings)[0]}


def test_adams_mu_slot_of_kernel_takes_kernels_layout_not_mu_kernels(emitted):
    state = jax.eval_shape(optax.adam(1e-3).init, PARAMS)
    for specs in (_specs(planc.loads(PLAN).shardings(state, params=PARAMS)),
                  _specs(emitted.shardings(state, params=PARAMS))):
        assert specs["[0].mu['kernel']"] == P("data", "model")
        assert specs["[0].mu['mu']['kernel']"] == P("model", "data")
        assert specs["[0].nu['kernel']"] == P("data", "model")


def test_a_leaf_two_parameters_could_own_alike_is_p341(emitted):
    # Not shaped like the parameters: only the path ties it, to both `kernel` and `mu/kernel`.
    state = {"mu": {"kernel": np.zeros((8, 8), np.float32)}}
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(PLAN).shardings(state, params=PARAMS)
    [d] = exc.value.diagnostics
    assert d.code == "P341" and "`mu/kernel`" in d.message and "`kernel`" in d.message
    with pytest.raises(ValueError, match="could mirror any of the parameters"):
        emitted.shardings(state, params=PARAMS)


def test_state_whose_paths_tie_to_no_parameter_is_p342_not_replicated(emitted):
    params = {"encoder": {"w": np.zeros((8, 8), np.float32)}}
    state = {"moments": {"decoder_w": np.zeros((8, 8), np.float32)}}
    with pytest.raises(planc.PlanError) as exc:
        planc.loads(PLAN).shardings(state, params=params)
    assert [d.code for d in exc.value.diagnostics] == ["P342"]
    assert "`moments/decoder_w`" in exc.value.diagnostics[0].message
    with pytest.raises(ValueError, match="mirrors no parameter"):
        emitted.shardings(state, params=params)


def test_init_of_two_parameter_groups_in_a_tuple_is_p342_naming_the_first_slot():
    plan = planc.loads(PLAN)

    def two_groups():
        return ({"kernel": jnp.zeros((8, 8))}, {"decoder": {"w": jnp.zeros((8, 8))}})

    with pytest.raises(planc.PlanError) as exc:
        plan.init(two_groups)
    assert [d.code for d in exc.value.diagnostics] == ["P342"]
    assert "`decoder/w`" in exc.value.diagnostics[0].message


def test_a_factored_second_moment_alone_is_nobodys_and_replicated():
    params = {"w": np.zeros((8, 8), np.float32)}
    state = jax.eval_shape(optax.adafactor(1e-3, min_dim_size_to_factor=4).init, params)
    specs = _specs(planc.loads(PLAN.replace('"kernel"', '"w"')).shardings(state,
                                                                         params=params))
    assert all(spec == P() or all(e is None for e in spec) for spec in specs.values())
