"""`plan.aot` on a real TPU topology, compile-only through libtpu (the `tpu` extra): a
two-layer MLP with Adam, FSDP 4 x model 2 on `v5e:2x4`.

TPU compiles cost tens of seconds here, so there are five: planc's, the same step
compiled by hand (the differential), one over two slices, one that does not fit in HBM
(which XLA refuses within seconds), and a tiny one the partitioner must rematerialize.
`test_aot_cpu.py` has the breadth.
"""

import importlib.util

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                                reason="libtpu is not installed (pip install 'planc[tpu]')")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

import planc  # noqa: E402

PLAN = '''
mesh(fsdp = 4, model = 2)
model_parallel(batch = fsdp)
layout {
    "w1" -> (fsdp, model)
    "w2" -> (model, fsdp)
}
budget(peak = 64 MiB)
'''
D, H, B = 1024, 4096, 64
OPT = optax.adam(1e-3)


def loss_fn(p, b):
    return jnp.mean((jnp.tanh(b["x"] @ p["w1"]) @ p["w2"] - b["y"]) ** 2)


def step(p, s, b):
    loss, g = jax.value_and_grad(loss_fn)(p, b)
    u, s = OPT.update(g, s, p)
    return optax.apply_updates(p, u), s, loss


PARAMS = {"w1": jax.ShapeDtypeStruct((D, H), jnp.float32),
          "w2": jax.ShapeDtypeStruct((H, D), jnp.float32)}
STATE = jax.eval_shape(OPT.init, PARAMS)
BATCH = {"x": jax.ShapeDtypeStruct((B, D), jnp.float32),
         "y": jax.ShapeDtypeStruct((B, D), jnp.float32)}


@pytest.fixture(scope="module")
def report():
    return planc.loads(PLAN, file="mlp.kd").aot(step, PARAMS, STATE, BATCH, topology="v5e:2x4")


@pytest.fixture(scope="module")
def by_hand():
    """The same step, compiled as the issue's hand-written loop compiles it."""
    from jax.experimental import topologies

    mesh = topologies.make_mesh(topologies.get_topology_desc("v5e:2x4", "tpu"), (4, 2),
                                ("fsdp", "model"))
    ps = {"w1": NamedSharding(mesh, P("fsdp", "model")),
          "w2": NamedSharding(mesh, P("model", "fsdp"))}
    ss = (optax.ScaleByAdamState(count=NamedSharding(mesh, P()), mu=ps, nu=ps),
          optax.EmptyState())
    bs = {"x": NamedSharding(mesh, P("fsdp", None)), "y": NamedSharding(mesh, P("fsdp", None))}
    rep = NamedSharding(mesh, P())
    return jax.jit(step, in_shardings=(ps, ss, bs), out_shardings=(ps, ss, rep),
                   donate_argnums=(0, 1)).trace(PARAMS, STATE, BATCH).lower(
        lowering_platforms=("tpu",)).compile().memory_analysis()


def test_the_figures_are_xla_s_for_the_same_step_byte_for_byte(report, by_hand):
    assert not report.estimate and report.platform == "tpu" and report.devices == 8
    for name in ("argument", "output", "alias", "temp", "generated_code", "peak",
                 "host_argument", "host_output", "host_alias", "host_temp"):
        field = "peak_memory_in_bytes" if name == "peak" else f"{name}_size_in_bytes"
        assert report.memory[name] == getattr(by_hand, field), name


def test_the_collectives_name_the_axes_of_the_topology_s_permuted_device_order(report):
    # JAX's v5e:2x4 mesh is not in device-id order (a ring: its third row is devices 7, 6),
    # so reading replica-group ids as device ids would put `fsdp`'s groups across both axes.
    kinds = {(c.kind, c.axes) for c in report.collectives}
    assert ("all-gather", ("fsdp",)) in kinds and ("reduce-scatter", ("fsdp",)) in kinds
    assert ("all-reduce", ("model",)) in kinds
    assert all(not c.partial for c in report.collectives)
    gathered = sum(c.bytes for c in report.collectives if c.kind == "all-gather")
    assert gathered >= 2 * D * H * 2 // 2  # both kernels, gathered over fsdp in bfloat16


def test_the_budget_gate_on_xla_s_peak(report):
    assert report.budget_peak == 64 * 2 ** 20
    assert report.fits is (report.peak <= report.budget_peak)
    assert report.ok is report.fits


def test_a_step_that_does_not_fit_in_hbm_is_p809():
    plan = planc.loads('mesh(data = 8)\nmodel_parallel(batch = data)\n'
                       'layout { "w" -> replicated }\nbudget(peak = 8 GiB)\n', file="oom.kd")
    params = {"w": jax.ShapeDtypeStruct((80_000, 80_000), jnp.float32)}  # 25.6 GB, whole

    def sgd(p, s, b):
        g = jax.grad(lambda p: jnp.sum(jnp.tanh(b["x"] @ p["w"])))(p)
        return jax.tree.map(lambda w, d: w - 0.1 * d, p, g), s

    with pytest.raises(planc.PlanError) as info:
        plan.aot(sgd, params, (), {"x": jax.ShapeDtypeStruct((8, 80_000), jnp.float32)},
                 topology="v5e:2x4")
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line) == ("P809", 4) and "HBM" in d.message
    assert "`params/w` 23.8 GiB" in d.help[-1]


def test_over_two_slices_the_dcn_axis_carries_the_gradients_reduction():
    plan = planc.loads("mesh(data = 1, fsdp = 4, model = 2)\nslices(data = 2)\n"
                       "model_parallel(batch = (data, fsdp))\n"
                       'layout { "w1" -> (fsdp, model)\n "w2" -> (model, fsdp) }\n')
    batch = {k: jax.ShapeDtypeStruct((2 * B, D), jnp.float32) for k in ("x", "y")}
    report = plan.aot(step, PARAMS, STATE, batch, topology="v5e:2x4")
    assert (report.topology, report.devices, report.slices) == ("2 slices of v5e:2x4", 16, 2)
    kinds = {(c.kind, c.axes): c for c in report.collectives}
    # Within a slice as on one (its program numbers its own 8 devices); across the two
    # slices, the megascale runtime's all-reduce of the gradients, over `data`.
    assert ("all-gather", ("fsdp",)) in kinds and ("all-reduce", ("model",)) in kinds
    dcn = kinds[("all-reduce", ("data",))]
    assert dcn.bytes >= 2 * D * H * 4 // 8  # both kernels' gradient shards


def test_p807_s_parts_add_up_to_the_peak_on_tpu():
    plan = planc.loads(PLAN.replace("budget(peak = 64 MiB)", "budget(peak = 1 KiB)"),
                       file="mlp.kd")
    report = plan.aot(step, PARAMS, STATE, BATCH, topology="v5e:2x4")
    [d] = [d for d in report.diagnostics if d.code == "P807"]
    m = report.memory
    listed = m["argument"] + max(m["output"] - m["alias"], 0) + m["temp"]
    assert d.help[0].startswith("the peak holds the arguments")
    if m["peak"] > listed:  # XLA:TPU's peak counts buffers it does not itemise
        from planc.resolve import human_bytes

        assert f"and {human_bytes(m['peak'] - listed)} more" in d.help[0]


def test_a_full_rematerialization_on_a_tpu_topology_is_p817_from_libtpus_log(capsys):
    # XLA:TPU writes the partitioner's warning to libtpu's log file, not to stderr.
    plan = planc.loads('mesh(a = 4, b = 2)\nmodel_parallel(batch = a)\n'
                       'layout { "w" -> ((a, b), _) }\n', file="remat.kd")

    def remat_step(params, opt_state, batch):
        w = jax.lax.with_sharding_constraint(params["w"] * 2, P(None, "b"))
        return {"w": jnp.sin(w)}, opt_state, None

    report = plan.aot(remat_step, {"w": jax.ShapeDtypeStruct((24, 40), jnp.float32)}, {},
                      jax.ShapeDtypeStruct((8, 4), jnp.float32), topology="v5e:2x4")
    found = [d for d in report.diagnostics if d.code == "P817"]
    assert any("`params/w`" in d.message for d in found), [d.message for d in report.diagnostics]
    assert "Involuntary full rematerialization" not in capsys.readouterr().err
