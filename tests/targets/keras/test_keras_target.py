"""The Keras target's objects: DeviceMesh, LayoutMap, DataParallel / ModelParallel, the
distribution scope and the module-level functions, on 8 simulated CPU devices."""

import subprocess
import sys
import textwrap

import pytest

keras = pytest.importorskip("keras")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import planc  # noqa: E402
from planc import keras_api  # noqa: E402
from planc.targets.keras import distribution as backend  # noqa: E402
from planc.targets.keras.env import INSTALL_HINT  # noqa: E402
from planc.resolve import Resolver  # noqa: E402
from planc.variables import Variable  # noqa: E402

kd = keras.distribution
MESH = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"


def load(body: str, mesh: str = MESH):
    return planc.loads(mesh + body, file="t.kd")


@pytest.fixture(autouse=True)
def no_global_distribution():
    yield
    kd.set_distribution(None)


# -- DeviceMesh -----------------------------------------------------------------------------

def test_device_mesh_holds_the_jax_targets_devices_in_the_same_order():
    plan = load("")
    mesh = plan.device_mesh
    assert isinstance(mesh, kd.DeviceMesh)
    assert mesh.shape == (2, 4) and list(mesh.axis_names) == ["batch", "model"]
    assert mesh.devices.tolist() == plan.mesh().devices.tolist()


def test_device_mesh_keeps_a_multi_slice_order_that_is_not_row_major():
    plan = planc.loads("mesh(data = 2, model = 2)\nslices(model = 2)\nmodel_parallel(batch = data)")
    jax_order = plan.mesh().devices
    assert plan.device_mesh.devices.tolist() == jax_order.tolist()
    assert jax_order.tolist() != np.array(jax.devices()).reshape(2, 4).tolist()


def test_device_mesh_resolves_auto_for_the_devices_given():
    plan = planc.loads("mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)")
    assert backend.device_mesh(plan.ir, jax.devices()[:4]).shape == (2, 2)
    with pytest.raises(planc.PlanError) as caught:
        backend.device_mesh(plan.ir, jax.devices()[:3])
    assert caught.value.errors[0].code == "P201"


# -- LayoutMap ------------------------------------------------------------------------------

def test_layout_map_is_a_keras_layout_map_on_the_plans_mesh():
    plan = load('layout { "dense/kernel" -> (_, model) }')
    layout_map = plan.layout_map
    assert isinstance(layout_map, kd.LayoutMap)
    assert layout_map.device_mesh.devices.tolist() == plan.mesh().devices.tolist()


# Paths on which Keras <= 3.13 (re.search) and >= 3.14 (re.fullmatch) disagree.
DISAGREE = ["sequential/dense/kernel", "dense/kernel_1", "dense/kernel"]


@pytest.mark.parametrize("match", ["full", "search"])
def test_layout_map_answers_planc_whatever_the_keras_regex_mode(match):
    import re

    plan = load(f'match {match}\nlayout {{ "dense/kernel" -> (_, model) }}')
    layout_map = plan.layout_map
    resolver = Resolver(plan.ir)
    modes = {"search": re.search, "fullmatch": re.fullmatch}
    assert any(bool(modes["search"]("dense/kernel", p)) != bool(modes["fullmatch"](
        "dense/kernel", p)) for p in DISAGREE)
    for path in DISAGREE:
        assignment, _ = resolver.resolve(Variable(path, (8, 8)))
        got = layout_map[path]
        if assignment.rule is None:
            assert got is None, path
        else:
            assert got.axes == assignment.layout.axes, path
    # Under `match search` planc sees `sequential/dense/kernel`; installed Keras (3.15,
    # fullmatch) with the same key would not: the answer is planc's, not Keras's.
    stock = kd.LayoutMap(plan.device_mesh)
    stock["dense/kernel"] = (None, "model")
    if match == "search":
        assert stock["sequential/dense/kernel"] is None
        assert layout_map["sequential/dense/kernel"].axes == (None, "model")
    else:
        assert layout_map["sequential/dense/kernel"] is None


def test_variable_lookup_uses_the_shape_to_choose_an_alternative():
    layout_map = load('layout { "w" -> (model, _) | replicated }').layout_map
    assert layout_map.lookup("w", (8, 3)).axes == ("model", None)
    assert layout_map.lookup("w", (6, 3)).axes == (None, None)
    assert layout_map[Variable("w", (8, 3))].axes == ("model", None)
    assert layout_map[("w", (6, 3))].axes == (None, None)


def test_lookup_by_path_alone_of_a_shape_dependent_rule_is_p311():
    layout_map = load('layout { "w" -> (model, _) | replicated }').layout_map
    with pytest.raises(planc.PlanError) as caught:
        layout_map["w"]
    d = caught.value.errors[0]
    assert d.code == "P311" and d.variable == "w" and d.span.line == 3


def test_output_paths_resolve_against_output_rules_only():
    plan = load('layout { "dense.*" -> (_, model) }\noutputs { "dense" -> (batch, _) }')
    layout_map = plan.layout_map
    assert layout_map["dense/kernel"].axes == (None, "model")
    assert layout_map["dense/output"].axes == ("batch", None)
    # `dense.*` matches the path "dense_1/output", but a variable rule is not an output rule.
    assert layout_map["dense_1/output"] is None


def test_an_output_rule_never_lays_out_a_variable():
    plan = load('layout { default -> replicated }\noutputs { ".*" -> (batch, ...) }')
    layout_map = plan.layout_map
    assert layout_map.lookup("dense/kernel", (8, 8)).axes == (None, None)
    assert layout_map["anything/output"].axes == ("batch",)


def test_an_output_rule_that_depends_on_the_shape_is_p311_before_keras_runs():
    # Keras passes a layer output's path alone: alternatives cannot be chosen.
    with pytest.raises(planc.PlanError) as caught:
        load('layout { default -> replicated }\n'
             'outputs {\n    "ffw" -> (batch, _) | (batch, _, _)\n}').to_keras()
    d = caught.value.errors[0]
    assert d.code == "P311" and '"ffw"' in d.message and d.span.line == 5


def test_keys_planc_does_not_know_come_back_none_which_keras_replicates():
    layout_map = load('layout { "dense/kernel" -> (_, model) }').layout_map
    for path in ("adam/iteration", "loss/total", "seed_generator/seed_generator_state"):
        assert layout_map[path] is None
    dist = kd.ModelParallel(layout_map=layout_map)
    with dist.scope():
        step = keras.Variable(0, name="step")
    assert step.value.sharding.spec == P()


def test_a_resolution_error_raises_plan_error_naming_the_variable_and_the_rule_line():
    layout_map = load('layout {\n    "w" -> (_, model)\n}').layout_map
    with pytest.raises(planc.PlanError) as caught:
        layout_map.lookup("w", (8, 6))
    d = caught.value.errors[0]
    assert d.code == "P303" and d.variable == "w" and d.span.line == 4
    assert "t.kd:4" in str(caught.value)


def test_an_unmatched_matrix_is_the_error_planc_lint_reports():
    layout_map = load('layout { "w" -> (_, model) }').layout_map
    with pytest.raises(planc.PlanError) as caught:
        layout_map.lookup("other", (8, 8))
    assert caught.value.errors[0].code == "P301"


def test_layout_map_is_read_only():
    layout_map = load('layout { "w" -> (_, model) }').layout_map
    with pytest.raises(TypeError, match="add the rule to the plan"):
        layout_map["x"] = (None, "model")
    assert list(layout_map) == ["w"] and "anything" in layout_map


# -- DataParallel / ModelParallel -------------------------------------------------------------

def test_data_parallel_on_a_one_axis_mesh_is_keras_data_parallel():
    dist = planc.loads("data_parallel").to_keras()
    assert isinstance(dist, kd.DataParallel)
    assert dist.device_mesh.shape == (8,) and dist.batch_dim_name == "batch"


def test_data_parallel_over_several_axes_is_model_parallel_with_no_rules():
    # Keras's DataParallel raises a TypeError on any mesh of several axes.
    dist = planc.loads("mesh(a = 2, b = 4)\ndata_parallel").to_keras()
    assert isinstance(dist, kd.ModelParallel)
    assert dist.get_data_layout((16, 3)).backend_layout.spec == P(("a", "b"), None)
    assert dist.layout_map.lookup("dense/kernel", (8, 8)).axes == (None, None)
    assert dist.num_model_replicas == 8


def test_model_parallel_takes_the_plans_batch_axis():
    dist = load('layout { "w" -> (_, model) }').to_keras()
    assert isinstance(dist, kd.ModelParallel)
    assert dist.batch_dim_name == "batch" and dist.num_model_replicas == 2
    assert dist.get_data_layout((8, 5)).axes == ("batch", None)


def test_a_batch_the_batch_axes_do_not_divide_is_p312():
    dist = load("").to_keras()
    with pytest.raises(planc.PlanError) as caught:
        dist.get_data_layout((5, 16))
    assert caught.value.errors[0].code == "P312"


def test_a_multi_axis_dimension_becomes_a_named_sharding_on_the_jax_backend():
    plan = planc.loads("mesh(data = 2, fsdp = 2, model = 2)\nmodel_parallel(batch = data)\n"
                       'layout { "w" -> ((data, fsdp), model) }')
    with plan.activate():
        w = keras.Variable(np.zeros((8, 4), "float32"), name="w")
    assert w.value.sharding.spec == P(("data", "fsdp"), "model")
    layout = plan.layout_map.lookup("w", (8, 4))
    assert isinstance(layout, kd.TensorLayout)
    assert isinstance(layout.backend_layout, NamedSharding)


OTHER_BACKEND = textwrap.dedent("""
    import os, sys
    os.environ["KERAS_BACKEND"] = "numpy"
    import planc
    for text in sys.argv[1:]:
        plan = planc.loads(text, file="t.kd")
        try:
            plan.to_keras()
        except planc.PlanError as e:
            print(" ".join(f"{d.code}:{d.span.line}" for d in e.errors), "|",
                  str(e).replace("\\n", " "))
        except RuntimeError as e:
            print("RuntimeError |", e)
""")

MULTI_AXIS = ("mesh(data = 2, fsdp = 2, model = 2)\nmodel_parallel(batch = data)\n"
              'layout {\n    "w" -> ((data, fsdp), model)\n}\n')


@pytest.fixture(scope="module")
def other_backend():
    """What `to_keras()` says under KERAS_BACKEND=numpy: (multi-axis plan, plain plan)."""
    done = subprocess.run([sys.executable, "-c", OTHER_BACKEND, MULTI_AXIS, MESH],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_a_multi_axis_dimension_on_another_backend_is_p311_naming_the_rule(other_backend):
    codes, _, text = other_backend[0].partition(" | ")
    assert codes == "P311:4"
    assert '"w"' in text and "numpy" in text


def test_a_plan_on_a_backend_without_distribution_says_which_backend_to_use(other_backend):
    kind, _, text = other_backend[1].partition(" | ")
    assert kind == "RuntimeError" and "KERAS_BACKEND=jax" in text


def test_without_keras_the_api_says_in_one_line_how_to_install_it():
    code = ("import sys; sys.modules['keras'] = None\n"
            "import planc\n"
            "try:\n    planc.loads('data_parallel').to_keras()\n"
            "except ModuleNotFoundError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert done.stdout.strip() == INSTALL_HINT


# -- scope and module-level functions ----------------------------------------------------------

def test_activate_is_the_keras_distribution_scope():
    plan = load('layout { "w" -> (_, model) }')
    assert kd.distribution() is None
    with plan.activate() as dist:
        assert kd.distribution() is dist and dist.plan.ir == plan.ir
        w = keras.Variable(np.zeros((4, 8), "float32"), name="w")
    assert kd.distribution() is None
    assert w.value.sharding.spec == P(None, "model")


def test_set_distribution_and_distribution_map_onto_keras():
    plan = load("")
    dist = keras_api.set_distribution(plan)
    assert kd.distribution() is dist and keras_api.distribution() is dist
    keras_api.set_distribution(None)
    assert keras_api.distribution() is None
    with pytest.raises(TypeError):
        keras_api.set_distribution("plan.kd")


def test_list_devices_is_keras_list_devices():
    assert keras_api.list_devices() == kd.list_devices() and len(kd.list_devices()) == 8


def test_distribute_tensor_lays_out_axes_on_the_active_mesh():
    with load("").activate():
        x = keras_api.distribute_tensor(np.ones((8, 8), "float32"), ("batch", "model"))
        y = keras_api.distribute_tensor(np.ones((8, 8), "float32"), (("batch", "model"), None))
    assert x.sharding.spec == P("batch", "model")
    assert y.sharding.spec == P(("batch", "model"), None)
    with pytest.raises(ValueError, match="active distribution"):
        keras_api.distribute_tensor(np.ones((8, 8), "float32"), ("batch", None))
