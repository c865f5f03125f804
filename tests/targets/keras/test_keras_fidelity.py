"""Where Keras code meets planc's Keras objects, they behave as Keras's own: the rules are
the LayoutMap's keys, errors are the exceptions Keras raises, objects are built once, and
every layout Keras accepts is accepted."""

import functools

import pytest

keras = pytest.importorskip("keras")
import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import planc  # noqa: E402
from planc import keras_api  # noqa: E402

kd = keras.distribution
RULES = """mesh(batch = 2, model = 4)
model_parallel(batch = batch)
layout {
    "dense/kernel" -> (_, model)
    ".*bias" -> (model)
}
outputs { "dense" -> (batch, _) }
"""


@pytest.fixture(autouse=True)
def no_global_distribution():
    yield
    kd.set_distribution(None)


def test_layout_map_keys_are_the_plans_rules_in_file_order():
    layout_map = planc.loads(RULES).layout_map
    assert len(layout_map) == 3
    assert list(layout_map) == ["dense/kernel", ".*bias", "dense/output"]
    assert list(layout_map.keys()) == ["dense/kernel", ".*bias", "dense/output"]


def test_layout_map_items_give_each_rules_layout():
    items = dict(planc.loads(RULES).layout_map.items())
    assert items["dense/kernel"].axes == (None, "model")
    assert items[".*bias"].axes == ("model",)
    assert items["dense/output"].axes == ("batch", None)


def test_a_data_parallel_plan_has_no_keys():
    assert len(planc.loads("mesh(batch = 8)\ndata_parallel\n").layout_map) == 0


def test_layout_map_shares_the_plans_device_mesh():
    plan = planc.loads(RULES)
    assert plan.layout_map.device_mesh is plan.device_mesh
    assert plan.layout_map is plan.layout_map


def test_plan_errors_are_value_errors_as_in_keras():
    with pytest.raises(ValueError):
        planc.loads("mesh(batch = auto)\nmodel_parallel(batch = nope)\n")
    plan = planc.loads("mesh(batch = 3, model = 4)\nmodel_parallel(batch = batch)\n")
    with pytest.raises(ValueError):
        plan.mesh()  # 8 devices do not fit 3 x 4, a ValueError in Keras too


def test_an_ambiguous_lookup_is_a_value_error_as_in_keras():
    plan = planc.loads('mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n'
                       'layout {\n    "dense/.*" -> (_, model)\n    ".*/kernel" -> (model, _)\n}\n')
    with pytest.raises(ValueError):
        plan.layout_map["dense/kernel"]


def test_distribute_tensor_accepts_a_jax_format_as_keras_does():
    from jax.experimental import layout as jax_layout

    mesh = jax.sharding.Mesh(np.array(jax.devices()).reshape(2, 4), ("batch", "model"))
    target = jax_layout.Format(sharding=NamedSharding(mesh, P("batch", None)))

    @functools.partial(jax.jit, static_argnames="target")
    def place(x, target):
        return keras_api.distribute_tensor(x, target)

    result = place(jax.numpy.ones((8, 8)), target)
    assert result.sharding.is_equivalent_to(target.sharding, ndim=2)
