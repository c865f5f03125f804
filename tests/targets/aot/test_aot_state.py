"""`plan.aot` and `planc aot` with `state` rules and layouts `on host` (issue 27): ZeRO-1
slots are compiled at their state layouts, and what is `on host` is counted in the
report's `host_*` figures, not the device's. On `cpu:8`, with one compile for a TPU
topology (skipped without libtpu) where XLA counts host memory itself."""

import importlib.util
import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import planc
from planc.cli import main
from planc.targets.jax.compat import _host_outputs_failure

F32 = jnp.float32
D, H, B = 64, 256, 16
OPT = optax.adam(1e-3)


def loss_fn(p, b):
    return jnp.mean((jnp.tanh(b["x"] * p["norm"] @ p["w1"]) @ p["w2"] - b["y"]) ** 2)


def step(p, s, b):
    loss, g = jax.value_and_grad(loss_fn)(p, b)
    u, s = OPT.update(g, s, p)
    return optax.apply_updates(p, u), s, loss


PARAMS = {"w1": jax.ShapeDtypeStruct((D, H), F32), "w2": jax.ShapeDtypeStruct((H, D), F32),
          "norm": jax.ShapeDtypeStruct((D,), F32)}
STATE = jax.eval_shape(OPT.init, PARAMS)
BATCH = {"x": jax.ShapeDtypeStruct((B, D), F32), "y": jax.ShapeDtypeStruct((B, D), F32)}

LAYOUT = '''mesh(fsdp = 4, model = 2)
model_parallel(batch = fsdp)
layout {
    "w1"   -> (_, model)
    "w2"   -> (model, _)
    "norm" -> replicated
}
'''
ZERO1 = LAYOUT + '''state {
    "w1" -> (fsdp, model)
    "w2" -> (model, fsdp)
}
'''
OFFLOAD = ZERO1.replace("(fsdp, model)", "(fsdp, model) on host").replace(
    "(model, fsdp)", "(model, fsdp) on host")
# Adam's two slots (mu, nu) of each kernel, split over all 8 devices, per device.
SLOT_BYTES = 2 * 2 * D * H * 4 // 8


def by_hand(kind=None):
    """The ZeRO-1 step compiled as a hand-written loop compiles it: the kernels' slots at
    their state layouts (in `kind` memory), the norm's mirroring it, the count replicated."""
    mesh = Mesh(np.asarray(jax.devices()[:8]).reshape(4, 2), ("fsdp", "model"))
    on = lambda *spec: NamedSharding(mesh, P(*spec))  # noqa: E731
    ps = {"w1": on(None, "model"), "w2": on("model", None), "norm": on(None)}
    slot = {"w1": NamedSharding(mesh, P("fsdp", "model"), memory_kind=kind),
            "w2": NamedSharding(mesh, P("model", "fsdp"), memory_kind=kind), "norm": on(None)}
    ss = (optax.ScaleByAdamState(count=on(), mu=slot, nu=slot), optax.EmptyState())
    bs = {"x": on("fsdp", None), "y": on("fsdp", None)}
    return jax.jit(step, in_shardings=(ps, ss, bs), out_shardings=(ps, ss, on()),
                   donate_argnums=(0, 1)).trace(PARAMS, STATE, BATCH).lower().compile(
    ).memory_analysis()


@pytest.fixture(scope="module")
def zero1():
    return planc.loads(ZERO1, file="z.kd").aot(step, PARAMS, STATE, BATCH, topology="cpu:8")


def test_zero1_slots_are_compiled_at_their_state_layouts(zero1):
    hand = by_hand()
    for name in ("argument", "output", "alias", "temp", "host_argument", "host_output"):
        assert zero1.memory[name] == getattr(hand, f"{name}_size_in_bytes"), name
    assert zero1.ok
    rules = dict(zero1.largest_rules)
    # Each state rule lays out its kernel's two slots, counted under it, not the layout rule.
    assert rules['state "w1" -> (fsdp, model) at z.kd:9'] == SLOT_BYTES // 2
    assert rules['state "w2" -> (model, fsdp) at z.kd:10'] == SLOT_BYTES // 2
    assert rules['"w1" -> (_, model) at z.kd:4'] == D * H * 4 // 2


def offloaded():
    plan = planc.loads(OFFLOAD, file="o.kd")
    failure = _host_outputs_failure(Mesh(np.asarray(jax.devices()[:8]), ("d",)))
    if failure is None:
        return plan.aot(step, PARAMS, STATE, BATCH, topology="cpu:8")
    # jax 0.7.1's XLA:CPU compiles no program writing host memory on several devices.
    with pytest.raises(planc.PlanError) as info:
        plan.aot(step, PARAMS, STATE, BATCH, topology="cpu:8")
    assert [(d.code, d.span.line) for d in info.value.diagnostics] == [("P340", 9),
                                                                       ("P340", 10)]
    pytest.skip(f"jax {jax.__version__}: {failure}")


def test_slots_on_host_are_host_figures_and_leave_the_device_s(zero1):
    report = offloaded()
    m = report.memory
    assert m["host_argument"] == m["host_output"] == m["host_alias"] == SLOT_BYTES
    # The same program as ZeRO-1 in device memory, less the slots XLA:CPU counted there.
    for name in ("argument", "output", "alias"):
        assert m[name] == zero1.memory[name] - SLOT_BYTES, name
    assert report.estimate and report.peak == m["argument"] + m["output"] - m["alias"] + m["temp"]
    assert not [p for p, _ in report.largest_variables if "/mu/w" in p or "/nu/w" in p]
    assert not [r for r, _ in report.largest_rules if r.startswith("state")]
    assert report.to_dict()["memory"]["host_argument"] == SLOT_BYTES


def test_a_parameter_on_host_is_not_what_p807_suggests_splitting():
    text = LAYOUT.replace('"w1"   -> (_, model)', '"w1"   -> replicated on host') + \
        "budget(peak = 1 KiB)\n"
    plan = planc.loads(text, file="p.kd")
    if _host_outputs_failure(Mesh(np.asarray(jax.devices()[:8]), ("d",))) is not None:
        pytest.skip(f"jax {jax.__version__} compiles no program writing host memory here")
    report = plan.aot(step, PARAMS, STATE, BATCH, topology="cpu:8")
    (d,) = report.errors
    assert d.code == "P807"
    # w1 (64 KiB whole on each device's host, with its slots) would be the largest by far.
    assert "`params/w1`" not in " ".join(d.help) and "`params/w2`" in " ".join(d.help)
    assert report.memory["host_argument"] == 3 * D * H * 4


def test_keras_s_step_is_refused_with_state_rules_or_on_host_at_each_rule():
    keras = pytest.importorskip("keras")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(16, name="dense")])
    plan = planc.loads('mesh(batch = 4, model = 2)\nmodel_parallel(batch = batch)\n'
                       'layout {\n  "dense/kernel" -> (_, model) on host\n}\n'
                       'state {\n  "dense/kernel" -> (batch, model)\n}\n', file="k.kd")
    with pytest.raises(planc.PlanError) as info:
        plan.aot(model, batch=(jax.ShapeDtypeStruct((8, 8), F32),
                               jax.ShapeDtypeStruct((8, 16), F32)),
                 optimizer=keras.optimizers.Adam(), loss="mse", topology="cpu:8")
    found = [(d.code, d.span.line, d.span.column) for d in info.value.diagnostics]
    assert found == [("P311", 4, 32), ("P311", 7, 3)]


STEP_MODULE = '''
import jax, jax.numpy as jnp, optax
OPT = optax.adam(1e-3)


def step(p, s, b):
    g = jax.grad(lambda p: jnp.mean((b["x"] @ p["w1"] @ p["w2"] - b["y"]) ** 2))(p)
    u, s = OPT.update(g, s, p)
    return optax.apply_updates(p, u), s


def build():
    params = {"w1": jax.ShapeDtypeStruct((64, 256), jnp.float32),
              "w2": jax.ShapeDtypeStruct((256, 64), jnp.float32)}
    batch = {"x": jax.ShapeDtypeStruct((16, 64), jnp.float32),
             "y": jax.ShapeDtypeStruct((16, 64), jnp.float32)}
    return step, params, jax.eval_shape(OPT.init, params), batch
'''


def test_the_command_shows_the_host_rows(tmp_path, monkeypatch, capsys):
    if _host_outputs_failure(Mesh(np.asarray(jax.devices()[:8]), ("d",))) is not None:
        pytest.skip(f"jax {jax.__version__} compiles no program writing host memory here")
    (tmp_path / "offload_step.py").write_text(STEP_MODULE)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "o.kd").write_text(OFFLOAD.replace('    "norm" -> replicated\n', ""))
    args = ["aot", "o.kd", "--step", "offload_step:build", "--topology", "cpu:8"]
    code = main(args)
    out = capsys.readouterr().out
    assert code == 0, out
    assert "host arguments" in out and "host aliased" in out
    assert main(args + ["--format", "json"]) == 0
    memory = json.loads(capsys.readouterr().out)["memory"]
    assert memory["host_argument"] == SLOT_BYTES


@pytest.mark.skipif(importlib.util.find_spec("libtpu") is None,
                    reason="libtpu is not installed (pip install 'planc[tpu]')")
def test_on_a_tpu_topology_xla_counts_the_host_slots_itself():
    report = planc.loads(OFFLOAD).aot(step, PARAMS, STATE, BATCH, topology="v5e:2x4")
    assert not report.estimate and report.ok
    # XLA:TPU's own figures, left as they are: the slots in host memory, donated.
    assert report.memory["host_argument"] == report.memory["host_alias"] == SLOT_BYTES
