"""`plan.aot` and `planc aot` on `cpu:8`: the breadth of the step compiled ahead of time.

The differential test compiles the same step by hand (`jax.jit(..., in_shardings,
out_shardings, donate_argnums).trace().lower().compile()`, shardings written out here)
and asserts planc's figures are `memory_analysis()`'s, byte for byte.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import planc
from planc.cli import main

from ..mlp_plans import FSDP_TP

F32 = jnp.float32
SGD_LR = 0.1


def mlp(width=64, hidden=256, batch=16, bias=True):
    params = {"dense_0": {"kernel": jax.ShapeDtypeStruct((width, hidden), F32)},
              "dense_1": {"kernel": jax.ShapeDtypeStruct((hidden, width), F32)}}
    if bias:
        params["dense_0"]["bias"] = jax.ShapeDtypeStruct((hidden,), F32)
        params["dense_1"]["bias"] = jax.ShapeDtypeStruct((width,), F32)
    data = {"x": jax.ShapeDtypeStruct((batch, width), F32),
            "y": jax.ShapeDtypeStruct((batch, width), F32)}
    return params, data


def loss_fn(p, b):
    h = b["x"] @ p["dense_0"]["kernel"] + p["dense_0"].get("bias", 0.0)
    y = jnp.tanh(h) @ p["dense_1"]["kernel"] + p["dense_1"].get("bias", 0.0)
    return jnp.mean((y - b["y"]) ** 2)


OPT = optax.adam(1e-3)


def adam_step(p, s, b):
    loss, g = jax.value_and_grad(loss_fn)(p, b)
    u, s = OPT.update(g, s, p)
    return optax.apply_updates(p, u), s, loss


def by_hand(mesh_shape, names, specs, batch_axes, step, params, state, data, donate=True):
    """The step compiled as a hand-written training loop compiles it."""
    mesh = Mesh(np.asarray(jax.devices()[:int(np.prod(mesh_shape))]).reshape(mesh_shape), names)
    ps = jax.tree_util.tree_map_with_path(
        lambda kp, _: NamedSharding(mesh, P(*specs["/".join(k.key for k in kp)])), params)

    def state_sharding(kp, leaf):
        path = "/".join(str(getattr(k, "key", getattr(k, "idx", getattr(k, "name", k))))
                        for k in kp)
        for p, spec in specs.items():
            if path.endswith(p) and leaf.ndim == len(spec):
                return NamedSharding(mesh, P(*spec))
        return NamedSharding(mesh, P())

    ss = jax.tree_util.tree_map_with_path(state_sharding, state)
    bs = jax.tree.map(lambda l: NamedSharding(mesh, P(batch_axes, *(None,) * (l.ndim - 1))),
                      data)
    rep = NamedSharding(mesh, P())
    compiled = jax.jit(step, in_shardings=(ps, ss, bs), out_shardings=(ps, ss, rep),
                       donate_argnums=(0, 1) if donate else ()).trace(
        params, state, data).lower().compile()
    return compiled.memory_analysis()


CASES = {
    "fsdp_tp": (FSDP_TP, (4, 2), ("fsdp", "model"), "fsdp",
                {"dense_0/kernel": ("fsdp", "model"), "dense_1/kernel": ("model", "fsdp"),
                 "dense_0/bias": (None,), "dense_1/bias": (None,)}),
    "data_parallel": ("mesh(batch = 8)\ndata_parallel\n", (8,), ("batch",), "batch",
                      {"dense_0/kernel": (None, None), "dense_1/kernel": (None, None),
                       "dense_0/bias": (None,), "dense_1/bias": (None,)}),
    "two_batch_axes": ('mesh(data = 2, fsdp = 2, model = 2)\nmodel_parallel(batch = (data, fsdp))\n'
                       'layout { ".*kernel" -> (fsdp, model)\n ".*bias" -> (model) }\n',
                       (2, 2, 2), ("data", "fsdp", "model"), ("data", "fsdp"),
                       {"dense_0/kernel": ("fsdp", "model"), "dense_1/kernel": ("fsdp", "model"),
                        "dense_0/bias": ("model",), "dense_1/bias": ("model",)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_planc_figures_are_the_hand_written_compile_s(case):
    text, shape, names, batch_axes, specs = CASES[case]
    params, data = mlp()
    state = jax.eval_shape(OPT.init, params)
    report = planc.loads(text).aot(adam_step, params, state, data, topology="cpu:8")
    hand = by_hand(shape, names, specs, batch_axes, adam_step, params, state, data)
    for name in ("argument", "output", "alias", "temp", "generated_code", "host_argument",
                 "host_output", "host_alias", "host_temp"):
        assert report.memory[name] == getattr(hand, f"{name}_size_in_bytes"), name
    assert report.estimate and report.peak == (hand.argument_size_in_bytes
                                               + hand.output_size_in_bytes
                                               - hand.alias_size_in_bytes
                                               + hand.temp_size_in_bytes)
    assert report.ok and report.devices == 8 and report.mesh == dict(zip(names, shape))


def test_without_donation_nothing_aliases_and_the_figures_still_agree():
    text, shape, names, batch_axes, specs = CASES["fsdp_tp"]
    params, data = mlp()
    state = jax.eval_shape(OPT.init, params)
    report = planc.loads(text).aot(adam_step, params, state, data, topology="cpu:8",
                                   donate=False)
    hand = by_hand(shape, names, specs, batch_axes, adam_step, params, state, data,
                   donate=False)
    assert report.memory["alias"] == hand.alias_size_in_bytes == 0
    assert report.memory["temp"] == hand.temp_size_in_bytes and not report.donate


@pytest.fixture(scope="module")
def fsdp_tp_report():
    params, data = mlp(width=128, hidden=512, batch=32)
    state = jax.eval_shape(OPT.init, params)
    return planc.loads(FSDP_TP, file="mlp.kd").aot(adam_step, params, state, data,
                                                   topology="cpu:8")


def test_collectives_are_read_by_kind_and_the_plan_s_axes(fsdp_tp_report):
    got = {(c.kind, c.axes) for c in fsdp_tp_report.collectives}
    # FSDP gathers the kernels over `fsdp` and reduces their gradients there; the
    # tensor-parallel matmul reduces its activations over `model`.
    assert ("all-gather", ("fsdp",)) in got and ("all-reduce", ("model",)) in got
    assert all(c.count >= 1 and c.bytes > 0 for c in fsdp_tp_report.collectives)
    gathered = sum(c.bytes for c in fsdp_tp_report.collectives
                   if c.kind == "all-gather" and c.axes == ("fsdp",))
    # Each kernel is gathered whole over `fsdp` at least once: (128 x 512) / 2 floats each.
    assert gathered >= 2 * 128 * 512 // 2 * 4


def test_the_largest_arguments_by_variable_and_by_rule(fsdp_tp_report):
    r = fsdp_tp_report
    shard = 128 * 512 * 4 // 8  # a kernel split 8 ways
    assert ("params/dense_0/kernel", shard) in r.largest_variables
    assert ("opt_state/0/mu/dense_0/kernel", shard) in r.largest_variables
    rules = dict(r.largest_rules)
    # The rule counts its parameter and the two Adam slots that mirror it.
    assert rules['"dense_0/kernel" -> (fsdp, model) at mlp.kd:5'] == 3 * shard
    assert rules["the batch: dimension 0 over `fsdp`"] == 2 * (32 // 4) * 128 * 4


def test_the_json_form_carries_the_object_s_names(fsdp_tp_report):
    doc = fsdp_tp_report.to_dict()
    assert doc["schema"] == "planc.aot/1" and doc["estimate"] is True
    assert list(doc["memory"]) == ["argument", "output", "alias", "temp", "generated_code",
                                   "peak", "host_argument", "host_output", "host_alias",
                                   "host_temp"]
    assert doc["memory"] == fsdp_tp_report.memory
    assert {"kind", "axes", "count", "bytes"} <= set(doc["collectives"][0])
    assert doc["largest_arguments"]["by_variable"][0]["path"].startswith(("params", "opt_state"))
    assert json.loads(json.dumps(doc)) == doc


def test_explicit_axes_compile_under_the_plan_s_mesh():
    params, data = mlp(bias=False)

    def sgd(p, s, b):
        g = jax.grad(loss_fn)(p, b)
        return jax.tree.map(lambda w, d: w - SGD_LR * d, p, g), s, None

    report = planc.loads(FSDP_TP.replace("model_parallel", "axis_types explicit\n"
                                         "model_parallel")).aot(sgd, params, (), data,
                                                                topology="cpu:8")
    assert report.ok and report.memory["argument"] > 0


# -- what stops before anything is compiled -------------------------------------------------------

def diagnostics_of(call):
    with pytest.raises(planc.PlanError) as info:
        call()
    return info.value.diagnostics


def test_the_plan_s_own_problems_come_first_and_the_step_is_never_traced():
    traced = []

    def step(p, s, b):
        traced.append(1)
        return p, s

    params, data = mlp(width=6)
    plan = planc.loads('mesh(fsdp = 4, model = 2)\nmodel_parallel(batch = fsdp)\n'
                       'layout { "dense_.*/kernel" -> (fsdp, model, _)\n'
                       '"dense_.*/bias" -> replicated }\n')
    found = diagnostics_of(lambda: plan.aot(step, params, {}, data, topology="cpu:8"))
    assert {d.code for d in found} == {"P304"} and traced == []
    found = diagnostics_of(lambda: planc.loads(FSDP_TP).aot(
        step, mlp(width=6)[0], {}, data, topology="cpu:8"))
    assert {d.code for d in found} == {"P303"} and traced == []


def test_a_batch_the_batch_axes_do_not_divide_is_p312():
    params, _ = mlp()
    data = {"x": jax.ShapeDtypeStruct((6, 64), F32), "y": jax.ShapeDtypeStruct((), F32)}
    found = diagnostics_of(lambda: planc.loads(FSDP_TP).aot(adam_step, params, {}, data,
                                                            topology="cpu:8"))
    assert [d.code for d in found] == ["P312", "P312"]
    assert "`batch/x`" in found[0].message and "scalar" in found[1].message


def test_a_step_that_does_not_trace_is_p805_with_jax_s_message():
    params, data = mlp()

    def broken(p, s, b):
        return p, s, b["x"] @ b["x"]  # (16, 64) @ (16, 64)

    (d,) = diagnostics_of(lambda: planc.loads(FSDP_TP).aot(broken, params, {}, data,
                                                           topology="cpu:8"))
    assert d.code == "P805" and "does not trace" in d.message and "dot_general" in d.message


@pytest.mark.parametrize("step, says", [
    (lambda p, s, b: (jnp.sum(b["x"]), p, s), "output 0 of the step does not match its `params`"),
    (lambda p, s, b: p, "a training step returns `(params, opt_state, ...)`"),
    (lambda p, s, b: ({**p, "dense_0": {"kernel": p["dense_0"]["kernel"][:8],
                                        "bias": p["dense_0"]["bias"]}}, s),
     "leaf `dense_0/kernel` is float32[8, 256], not float32[64, 256]"),
])
def test_outputs_that_break_the_convention_are_p806(step, says):
    params, data = mlp()
    (d,) = diagnostics_of(lambda: planc.loads(FSDP_TP).aot(step, params, {}, data,
                                                           topology="cpu:8"))
    assert d.code == "P806" and says in d.message, d.message


def test_a_leaf_that_is_not_an_array_is_p806():
    params, data = mlp()
    (d,) = diagnostics_of(lambda: planc.loads(FSDP_TP).aot(
        adam_step, params, {"lr": "fast"}, data, topology="cpu:8"))
    assert d.code == "P806" and "`opt_state/lr`" in d.message


def test_budget_peak_without_a_topology_is_p808_at_the_budget_line():
    plan = planc.loads(FSDP_TP + "budget(peak = 1 GiB)\n", file="b.kd")
    params, data = mlp()
    (d,) = diagnostics_of(lambda: plan.aot(adam_step, params, {}, data))
    assert (d.code, d.span.line) == ("P808", 9)
    with pytest.raises(TypeError, match="topology"):
        planc.loads(FSDP_TP).aot(adam_step, params, {}, data)


# -- the command --------------------------------------------------------------------------------

STEP_MODULE = '''
import jax, jax.numpy as jnp, optax
OPT = optax.adam(1e-3)
KERNEL = jnp.ones((4, 4))   # a module-level array, as real step modules have


def loss_fn(p, b):
    return jnp.mean((jnp.tanh(b["x"] @ p["w1"]) @ p["w2"] - b["y"]) ** 2)


def step(p, s, b):
    loss, g = jax.value_and_grad(loss_fn)(p, b)
    u, s = OPT.update(g, s, p)
    return optax.apply_updates(p, u), s, loss


def build():
    params = {"w1": jnp.zeros((64, 512)), "w2": jnp.zeros((512, 64))}  # never allocated
    batch = {"x": jax.ShapeDtypeStruct((32, 64), jnp.float32),
             "y": jax.ShapeDtypeStruct((32, 64), jnp.float32)}
    return step, params, OPT.init(params), batch


def three():
    return step, {}, {}


def leaky():
    scale = jnp.full((), 0.5)  # made by the builder and read by the step

    def scaled(p, s, b):
        return jax.tree.map(lambda w: w * scale, p), s
    _, params, _, batch = build()
    return scaled, params, {}, batch
'''

PLAN = '''mesh(fsdp = 4, model = 2)
model_parallel(batch = fsdp)
layout {
    "w1" -> (fsdp, _)
    "w2" -> (model, fsdp)
}
budget(peak = BUDGET)
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "mystep.py").write_text(STEP_MODULE)
    monkeypatch.chdir(tmp_path)

    def plan(budget="1 GiB"):
        path = tmp_path / "p.kd"
        path.write_text(PLAN.replace("BUDGET", budget))
        return str(path)
    return plan


def aot(capsys, *args):
    code = main(["aot", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_command_prints_the_table_and_fits_the_budget(project, capsys):
    code, out, err = aot(capsys, project(), "--step", "mystep:build", "--topology", "cpu:8")
    assert code == 0, err
    assert "plan `p` on cpu:8 (8 simulated CPU devices), mesh fsdp=4 x model=2" in out
    assert "budget 1.00 GiB: fits" in out and "all-gather" in out
    assert "params/w2" in out and '"w2" -> (model, fsdp) at' in out


def test_a_peak_over_the_budget_exits_1_at_the_budget_line_saying_what_helps(project, capsys):
    code, out, err = aot(capsys, project("16 KiB"), "--step", "mystep:build", "--topology",
                         "cpu:8")
    assert code == 1 and "OVER BUDGET" in out
    assert "error[P807]" in err and "p.kd:7:1" in err and "on cpu:8 (an XLA:CPU estimate)" in err
    # `w1` is laid out over `fsdp` only: over `model` as well it would halve, with its slots.
    assert "laying `params/w1` out as `(fsdp, model)`, over `model` as well, would save" in err
    assert "its 2 optimizer slots included" in err


def test_json_goes_to_the_output_file_whole(project, capsys, tmp_path):
    out_file = tmp_path / "aot.json"
    code, out, _ = aot(capsys, project(), "--step", "mystep:build", "--topology", "cpu:8",
                       "--format", "json", "-o", str(out_file))
    doc = json.loads(out_file.read_text())
    assert code == 0 and out == "" and doc["schema"] == "planc.aot/1"
    assert doc["budget"] == {"peak": 2 ** 30, "fits": True} and doc["ok"] is True


def test_a_step_reading_what_its_builder_made_is_built_for_real(project, capsys):
    # Under jax.eval_shape the builder's array is a tracer the step cannot use later.
    code, out, err = aot(capsys, project(), "--step", "mystep:leaky", "--topology", "cpu:8")
    assert code == 0 and "plan `p` on cpu:8" in out, err


@pytest.mark.parametrize("args, code, says", [
    (["--step", "nosuch:build", "--topology", "cpu:8"], 2, "cannot import module 'nosuch'"),
    (["--step", "mystep:three", "--topology", "cpu:8"], 1, "error[P806]"),
    (["--step", "mystep:build"], 2, "error[P808]"),
    (["--step", "mystep:build", "--topology", "v5litepod-8"], 2, "error[P801]"),
    (["--step", "mystep:build", "--topology", "cpu:3"], 1, "error[P201]"),
])
def test_bad_input_is_a_diagnostic_and_an_exit_code(project, capsys, args, code, says):
    got, out, err = aot(capsys, project(), *args)
    assert got == code and says in err, err
    assert "Traceback" not in err


def test_an_involuntary_full_rematerialization_is_p817_naming_the_parameter_and_rule(capsys):
    # The weight is laid out over both axes on its rows; the step asks for it over `b` on
    # its columns: the partitioner cannot get there without every device holding it all.
    plan = planc.loads('mesh(a = 4, b = 2)\nmodel_parallel(batch = a)\n'
                       'layout { "w" -> ((a, b), _) }\n', file="remat.kd")
    columns = NamedSharding(plan.mesh(), P(None, "b"))

    def step(params, opt_state, batch):
        w = jax.lax.with_sharding_constraint(params["w"] * 2, columns)
        return {"w": jnp.sin(w)}, opt_state, None

    params = {"w": jax.ShapeDtypeStruct((24, 40), F32)}
    report = plan.aot(step, params, {}, jax.ShapeDtypeStruct((8, 4), F32), topology="cpu:8")
    found = [d for d in report.diagnostics if d.code == "P817"]
    assert found and all(d.severity.value == "warning" for d in found)
    assert any("`params/w`" in d.message for d in found), [d.message for d in found]
    assert any('"w" -> ((a, b), _)' in h for d in found for h in d.help)
    assert "Involuntary full rematerialization" not in capsys.readouterr().err


def test_a_step_may_constrain_its_activations_by_axis_name():
    # MaxText's steps run under their mesh and constrain activations by name alone;
    # planc traces the step with the plan's mesh current, so such a step compiles.
    plan = planc.loads("mesh(fsdp = 4, model = 2)\nmodel_parallel(batch = fsdp)\n"
                       'layout {\n    "w" -> (fsdp, model)\n}\n')

    def step(params, opt_state, x):
        def loss(w):
            h = jax.lax.with_sharding_constraint(x @ w, P("fsdp", "model"))
            return jnp.mean(h ** 2)
        return {"w": params["w"] - 0.1 * jax.grad(loss)(params["w"])}, opt_state, None

    report = plan.aot(step, {"w": jax.ShapeDtypeStruct((64, 64), F32)}, {},
                      jax.ShapeDtypeStruct((32, 64), F32), topology="cpu:8")
    assert report.peak > 0
