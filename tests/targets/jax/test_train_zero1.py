"""Optimizer state by the plan's `state` rules, and layouts in host memory, on 8 simulated
CPU devices: a ZeRO-1 plan trains with optax Adam exactly as one device does, its slots
on their state layouts; slots `on host` stay in pinned host memory through init, a
training step and a load; the emitted JAX module lays state out as planc does; devices
without host memory are refused at the rule (P340)."""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from types import SimpleNamespace  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import models_jax as models  # noqa: E402
import planc  # noqa: E402
from planc.targets.jax.compat import _host_outputs_failure, require_host_memory  # noqa: E402
from planc.targets.jax.sharding import tree_paths  # noqa: E402
from targets.emit.test_compile import compile_cli, load_module  # noqa: E402
from targets.jax.test_train_e2e import MLP_DATA_MODEL  # noqa: E402

STEPS = 3
# The 2-D plan the end-to-end tests train under; the state rules are added to it.
LAYOUT = MLP_DATA_MODEL
# ZeRO-1: every slot split over `data` too, where the parameters are replicated over it.
ZERO1 = LAYOUT + """
state {
    "dense_0/kernel" -> (data, model)
    "dense_0/bias"   -> ((model, data))
    "dense_1/kernel" -> (model, data)
    "dense_1/bias"   -> (data)
}
"""
SLOTS = {"dense_0/kernel": P("data", "model"), "dense_0/bias": P(("model", "data")),
         "dense_1/kernel": P("model", "data"), "dense_1/bias": P("data")}
# The slots in pinned host memory: the kernels' split as ZeRO-1, the biases' mirrored
# from a default that keeps them whole.
OFFLOAD = LAYOUT + """
state {
    "dense_.*/kernel" -> (data, model) on host
    default           -> replicated on host
}
"""
OPT = optax.adam(1e-2)


def _batch():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((16, 16), np.float32),
            "y": rng.standard_normal((16, 8), np.float32)}


def _make(key):
    params = models.mlp_init(key)
    return params, OPT.init(params)


def _step(to_device=None):
    def step(params, state, batch):
        if to_device is not None:
            # Computation reads device memory: the state comes in from the host first.
            state = jax.device_put(state, to_device)
        loss, grads = jax.value_and_grad(models.mlp_loss)(params, batch)
        updates, state = OPT.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss
    return step


def _reference(initial):
    one = jax.devices()[0]
    params = jax.device_put(initial, one)
    state = OPT.init(params)
    step = jax.jit(_step())
    data = jax.device_put(_batch(), one)
    losses = []
    for _ in range(STEPS):
        params, state, loss = step(params, state, data)
        losses.append(float(loss))
    return losses, params


def _train(text):
    plan = planc.loads(text)
    mesh = plan.mesh()
    params, state = plan.init(_make, jax.random.key(0, impl="rbg"), mesh=mesh)
    born = state
    initial = jax.device_get(params)
    placement = (plan.shardings(params, mesh), plan.shardings(state, mesh, params=params))
    to_device = jax.tree.map(lambda s: s.with_memory_kind("device"), placement[1])
    step = jax.jit(_step(to_device), out_shardings=(*placement, None))
    data = plan.shard_batch(_batch(), mesh)
    losses = []
    for _ in range(STEPS):
        params, state, loss = step(params, state, data)
        losses.append(float(loss))
    return SimpleNamespace(plan=plan, mesh=mesh, born=born, initial=initial, params=params,
                           state=state, losses=losses, placement=placement)


@pytest.fixture(scope="module")
def zero1():
    return _train(ZERO1)


@pytest.fixture(scope="module")
def offload():
    failure = _host_outputs_failure(planc.loads(OFFLOAD).mesh())
    if failure is not None:  # jax 0.7.1 (`make test-oldest`): P340, tested below
        pytest.skip(f"jax {jax.__version__} cannot compile programs with outputs in host "
                    f"memory: {failure}")
    return _train(OFFLOAD)


def test_init_in_host_memory_compiles_or_is_p340_at_each_on_host():
    plan = planc.loads(OFFLOAD, file="p.kd")
    if _host_outputs_failure(plan.mesh()) is None:
        _, state = plan.init(_make, jax.random.key(0, impl="rbg"))
        assert {leaf.sharding.memory_kind for _, _, leaf in _slots(state)} == {"pinned_host"}
        return
    with pytest.raises(planc.PlanError) as info:
        plan.init(_make, jax.random.key(0, impl="rbg"))
    found = info.value.diagnostics
    assert [(d.code, d.span.line) for d in found] == [("P340", 12), ("P340", 13)]
    assert f"jax {jax.__version__} cannot compile a program" in found[0].message


def _slots(state):
    """(parameter path, slot name, leaf) of every Adam slot (`mu`, `nu`) of `state`."""
    out = []
    for path, leaf in tree_paths(state)[0]:
        parts = path.split("/")
        if "mu" in parts or "nu" in parts:
            at = parts.index("mu") if "mu" in parts else parts.index("nu")
            out.append(("/".join(parts[at + 1:]), parts[at], leaf))
    return out


@pytest.mark.parametrize("run", ["zero1", "offload"])
def test_training_losses_and_parameters_equal_the_single_device_run(run, request):
    got = request.getfixturevalue(run)
    losses, params = _reference(got.initial)
    np.testing.assert_allclose(got.losses, losses, rtol=1e-5)
    assert got.losses[-1] < got.losses[0]
    for (path, leaf), (_, ref) in zip(tree_paths(got.params)[0], tree_paths(params)[0]):
        np.testing.assert_allclose(np.asarray(leaf), np.asarray(ref), rtol=1e-4, atol=1e-6,
                                   err_msg=path)


def test_zero1_slots_are_born_and_stay_on_their_state_layouts(zero1):
    for state in (zero1.born, zero1.state):
        slots = _slots(state)
        assert len(slots) == 2 * len(SLOTS)
        for path, _, leaf in slots:
            assert leaf.sharding.spec == SLOTS[path], path
            assert leaf.sharding.memory_kind == "device", path
            # ZeRO-1: a device holds 1/size(data) of what it holds of the parameter
            layer, name = path.split("/")
            param = zero1.params[layer][name]
            assert (leaf.addressable_shards[0].data.size * zero1.mesh.shape["data"]
                    == param.addressable_shards[0].data.size), path
    count = zero1.state[0].count
    assert count.sharding.spec == P() and count.sharding.memory_kind == "device"


def test_on_explicit_axes_the_slots_state_layouts_are_their_types():
    plan = planc.loads(ZERO1 + "axis_types explicit\n")
    _, state = plan.init(_make, jax.random.key(0, impl="rbg"))
    for path, _, leaf in _slots(state):
        assert jax.typeof(leaf).sharding.spec == SLOTS[path], path


def test_zero1_parameters_keep_their_layout_rules(zero1):
    for path, leaf in tree_paths(zero1.params)[0]:
        assert leaf.sharding.spec == zero1.plan.partition_spec(path, leaf.shape), path
        assert leaf.sharding.memory_kind == "device"


def test_offloaded_slots_are_in_host_memory_after_init_and_after_steps(offload):
    for state in (offload.born, offload.state):
        slots = _slots(state)
        assert slots
        for path, _, leaf in slots:
            assert leaf.sharding.memory_kind == "pinned_host", path
            want = P("data", "model") if path.endswith("kernel") else P(None)
            assert leaf.sharding.spec == want, path
        # the step counter belongs to no parameter: replicated, on the devices
        assert state[0].count.sharding.memory_kind == "device"
    for path, leaf in tree_paths(offload.params)[0]:
        assert leaf.sharding.memory_kind == "device", path


def test_shard_places_optimizer_state_by_its_parameters(offload, zero1):
    for run in (offload, zero1):
        on_host = jax.device_get(run.state)
        placed = run.plan.shard(on_host, params=run.params)
        for (path, a), (_, b) in zip(tree_paths(placed)[0], tree_paths(run.state)[0]):
            assert (a.sharding.spec, a.sharding.memory_kind) == \
                (b.sharding.spec, b.sharding.memory_kind), path


def test_offloaded_state_is_in_host_memory_after_a_load(offload, tmp_path):
    pair = (offload.params, offload.state)
    like = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), pair)
    saved = {path: np.asarray(leaf) for path, leaf in tree_paths(pair)[0]}
    # Orbax, through plan.save; and an .npz, each device reading its own shard.
    offload.plan.save(pair, tmp_path / "ckpt")
    np.savez(tmp_path / "ckpt.npz", **saved)
    for source in (tmp_path / "ckpt", tmp_path / "ckpt.npz"):
        loaded = offload.plan.load(source, like=like)
        slots = 0
        for path, leaf in tree_paths(loaded)[0]:
            np.testing.assert_array_equal(np.asarray(leaf), saved[path], err_msg=path)
            is_slot = "/mu/" in path or "/nu/" in path
            slots += is_slot
            assert leaf.sharding.memory_kind == ("pinned_host" if is_slot else "device"), \
                (source.name, path)
        assert slots == 8
        assert loaded[1][0].mu["dense_0"]["kernel"].sharding.spec == P("data", "model")


@pytest.mark.parametrize("text", [ZERO1, OFFLOAD], ids=["zero1", "offload"])
def test_the_emitted_module_lays_state_out_as_planc_does(text, tmp_path):
    path = tmp_path / "plan.kd"
    path.write_text(text)
    assert compile_cli(path, "--target", "jax", "-o", tmp_path / "plan_sharding.py") == 0
    module = load_module(tmp_path / "plan_sharding.py", "plan_sharding_state")
    plan = planc.load_plan(path)
    mesh = plan.mesh()
    params, state = jax.eval_shape(_make, jax.random.key(0, impl="rbg"))
    for tree, of in ((params, None), (state, params)):
        ours = tree_paths(plan.shardings(tree, mesh, params=of))[0]
        theirs = tree_paths(module.shardings(tree, mesh, params=of))[0]
        assert [p for p, _ in ours] == [p for p, _ in theirs]
        for (leaf, a), (_, b) in zip(ours, theirs):
            assert (a.spec, a.memory_kind) == (b.spec, b.memory_kind), leaf
    placed = module.shard(jax.tree.map(lambda s: np.zeros(s.shape, s.dtype), state), mesh,
                          params=params)
    kinds = {leaf.sharding.memory_kind for _, _, leaf in _slots(placed)}
    assert kinds == ({"pinned_host"} if text is OFFLOAD else {"device"})


def test_a_state_rule_that_does_not_fit_the_slot_raises_before_anything_is_placed():
    plan = planc.loads(LAYOUT + 'state {\n    "dense_1/bias" -> (model, data)\n}\n',
                       file="p.kd")
    params, state = jax.eval_shape(_make, jax.random.key(0, impl="rbg"))
    with pytest.raises(planc.PlanError) as info:
        plan.shardings(state, params=params)
    [d] = info.value.diagnostics
    assert d.code == "P304" and d.span.line == 11
    assert "optimizer slots of `dense_1/bias`" in d.message


def _device(*kinds, platform="tpu"):
    """A stand-in for a device of a backend whose memories are `kinds` (none: a JAX that
    gives devices no memories at all)."""
    if not kinds:
        return SimpleNamespace(platform=platform)
    return SimpleNamespace(platform=platform, addressable_memories=lambda: [
        SimpleNamespace(kind=k) for k in kinds])


def test_the_cpu_devices_have_pinned_host_memory():
    kinds = {m.kind for m in jax.devices()[0].addressable_memories()}
    assert "pinned_host" in kinds
    plan = planc.loads(OFFLOAD)
    assert require_host_memory(plan.ir, plan.ir.host_rules(), jax.devices()[0]) is None


@pytest.mark.parametrize("device, why", [
    (_device("device"), "the tpu devices have no `pinned_host` memory (theirs: `device`)"),
    (_device(), f"jax {jax.__version__} gives its devices no memory kinds"),
])
def test_on_host_without_that_memory_is_p340_at_each_on_host(device, why):
    plan = planc.loads(OFFLOAD, file="p.kd")
    with pytest.raises(planc.PlanError) as info:
        require_host_memory(plan.ir, plan.ir.host_rules(), device)
    found = info.value.diagnostics
    assert [d.code for d in found] == ["P340", "P340"]
    lines = OFFLOAD.split("\n")
    assert [d.span.line for d in found] == [12, 13]
    assert {lines[d.span.line - 1][d.span.column - 1:d.span.end_column - 1]
            for d in found} == {"on host"}
    assert all(why in d.message for d in found)
    assert "on host" in str(info.value)


ACTIVATION = LAYOUT + 'outputs {\n    "hidden" -> (data, _) on host\n}\n'


def test_an_output_rule_on_host_places_the_activation_in_host_memory(tmp_path):
    plan = planc.loads(ACTIVATION)
    mesh = plan.mesh()
    sharding = plan.output_sharding("hidden", 2, mesh)
    assert (sharding.spec, sharding.memory_kind) == (P("data", None), "pinned_host")
    outside = plan.constrain(np.ones((16, 8), np.float32), "hidden", mesh)
    assert (outside.sharding.spec, outside.sharding.memory_kind) == (P("data", None), "pinned_host")
    path = tmp_path / "plan.kd"
    path.write_text(ACTIVATION)
    assert compile_cli(path, "--target", "jax", "-o", tmp_path / "act.py") == 0
    module = load_module(tmp_path / "act.py", "plan_sharding_activation")
    theirs = module.output_sharding("hidden", 2, mesh)
    assert (theirs.spec, theirs.memory_kind) == (sharding.spec, sharding.memory_kind)
    if _host_outputs_failure(mesh) is not None:
        pytest.skip(f"jax {jax.__version__} cannot compile programs writing host memory")
    for constrain in (lambda x: plan.constrain(x, "hidden", mesh),
                      lambda x: module.constrain(x, "hidden", mesh)):
        inside = jax.jit(lambda x, c=constrain: c(x * 2))(np.ones((16, 8), np.float32))
        assert inside.sharding.memory_kind == "pinned_host"
        assert inside.sharding.is_equivalent_to(sharding, 2)
