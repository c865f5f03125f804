"""planc resolves exactly as a real `keras.distribution.LayoutMap` does.

For rules both can express (one layout per rule, one axis per dimension, dimensions
that divide), a LayoutMap built from a plan's rules must give every variable of a real
Keras model the same `axes` as planc; where Keras raises on a path matched by several
keys, planc reports P302 for that path.

Keras 3.14 and later (here: 3.15) look keys up with `re.fullmatch`, which is planc's
`match full`. Keras 3.0 to 3.13 used `re.search`; `SearchLayoutMap` below is that
lookup, copied from Keras 3.13's `LayoutMap.__getitem__`, to check `match search`.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import re
import textwrap

import keras
import pytest

import planc
from planc.resolve import Resolver
from planc.variables import Variable

MESH = "mesh(batch = 2, model = 4)\nmodel_parallel(batch = batch)\n"


class SearchLayoutMap(keras.distribution.LayoutMap):
    """The lookup of Keras 3.0-3.13: an exact key, else every key `re.search`ed."""

    def __getitem__(self, key):
        if key in self._layout_map:
            return self._layout_map[key]
        matching_keys = [k for k in self._layout_map if re.search(k, key)]
        if len(matching_keys) > 1:
            raise ValueError(f"Path '{key}' matches multiple layout specification keys: "
                             f"{matching_keys}.")
        if len(matching_keys) == 1:
            return self._layout_map[matching_keys[0]]
        return None


@pytest.fixture(scope="module")
def model():
    """A small transformer block, every layer named, so paths do not depend on order.

    Zero initializers: random ones compile an XLA program per shape (seconds each on a
    busy CPU), and the values play no part here."""
    zeros = {"kernel_initializer": "zeros"}
    tokens = keras.Input((5,), dtype="int32")
    x = keras.layers.Embedding(64, 16, name="tok", embeddings_initializer="zeros")(tokens)
    x = keras.layers.MultiHeadAttention(4, 8, name="mha", **zeros)(x, x)
    x = keras.layers.LayerNormalization(name="ln")(x)
    x = keras.layers.Dense(32, name="ffn_in", **zeros)(x)
    x = keras.layers.Dense(16, name="ffn_out", **zeros)(x)
    return keras.Model(tokens, x)


@pytest.fixture(scope="module")
def mesh():
    return keras.distribution.DeviceMesh((2, 4), ["batch", "model"],
                                         keras.distribution.list_devices())


def keras_layout_map(plan, mesh, cls=keras.distribution.LayoutMap):
    """A LayoutMap with one key per planc code, in file order (Keras has no `default`)."""
    layout_map = cls(mesh)
    for rule in plan.ir.rules:
        (alt,) = rule.layout.alternatives
        assert not alt.ellipsis and not alt.replicated
        layout_map[rule.pattern] = tuple(d.entry for d in alt.head)
    return layout_map


def keras_axes(layout_map, variable):
    """What `ModelParallel.get_variable_layout` gives: the map's layout or replicated."""
    distribution = keras.distribution.ModelParallel(layout_map=layout_map,
                                                    batch_dim_name="batch")
    return tuple(distribution.get_variable_layout(variable).axes)


def make_plan(text):
    return planc.loads(textwrap.dedent(text).lstrip("\n"), file="k.kd")


def assert_same_resolution(plan, layout_map, model):
    layouts = plan.resolve(model)
    assert [v.path for v in model.variables] == list(layouts)
    for variable in model.variables:
        assert layouts[variable.path].axes == keras_axes(layout_map, variable), variable.path


FULL_RULES = MESH + """\
layout {
    "tok/embeddings"                 -> (model, batch)
    ".*(query|key|value)/kernel"     -> (_, model, _)
    ".*(query|key|value)/bias"       -> (model, _)
    "mha/attention_output/kernel"    -> (model, _, _)
    ".*ffn_in/kernel"                -> (batch, model)
    ".*ffn_out/kernel"               -> (model, batch)
    ".*ffn_(in|out)/bias"            -> (_)
    default                          -> replicated
}
"""


def test_full_match_resolves_every_variable_as_keras_layout_map(model, mesh):
    plan = make_plan(FULL_RULES)
    assert_same_resolution(plan, keras_layout_map(plan, mesh), model)


def test_search_match_resolves_as_the_keras_3_13_lookup(model, mesh):
    plan = make_plan(MESH + """\
        match search
        layout {
            "embeddings"          -> (model, batch)
            "(query|key)/kernel"  -> (_, model, _)
            "value/kernel"        -> (_, _, model)
            "output/kernel"       -> (model, _, _)
            "ffn_in/kernel"       -> (batch, model)
            "ffn_out/k"           -> (model, batch)
            default               -> replicated
        }
        """)
    layout_map = keras_layout_map(plan, mesh, SearchLayoutMap)
    assert_same_resolution(plan, layout_map, model)
    # The same keys under Keras 3.15's fullmatch leave the embeddings unsharded.
    assert keras_axes(keras_layout_map(plan, mesh), model.get_layer("tok").embeddings) == \
        (None, None)


def test_exact_key_wins_over_regex_keys_in_both(model, mesh):
    plan = make_plan(MESH + """\
        layout {
            ".*kernel"          -> (_, model)
            "ffn_in/kernel"     -> (model, _)
            ".*/query/kernel"   -> (_, _, model)
            default             -> replicated
        }
        """)
    layout_map = keras_layout_map(plan, mesh)
    ffn_in = model.get_layer("ffn_in").kernel
    assert keras_axes(layout_map, ffn_in) == ("model", None)
    report = plan.validate(model)
    assert report.layouts["ffn_in/kernel"].axes == ("model", None)
    assert [d.variable for d in report.diagnostics if d.code == "P308"] == ["ffn_in/kernel"]


def test_where_keras_raises_on_several_matches_planc_reports_p302(model, mesh):
    plan = make_plan(MESH + """\
        layout {
            ".*kernel"      -> (_, model)
            ".*ffn.*"       -> (model, _)
            "tok/.*"        -> (model, _)
            default         -> replicated
        }
        """)
    layout_map = keras_layout_map(plan, mesh)
    resolver = Resolver(plan.ir)
    raised = []
    for variable in model.variables:
        keras_raises = False
        try:
            layout_map[variable.path]
        except ValueError as exc:
            assert "matches multiple layout specification keys" in str(exc)
            keras_raises = True
        _, problems = resolver.resolve(Variable(variable.path, tuple(variable.shape)))
        assert keras_raises == any(p.code == "P302" for p in problems), variable.path
        if keras_raises:
            raised.append(variable.path)
    assert raised == ["ffn_in/kernel", "ffn_out/kernel"]
    report = plan.validate(model)
    (p302,) = [d for d in report.diagnostics if d.code == "P302"]
    assert p302.variable == "ffn_in/kernel" and "and 1 more: `ffn_out/kernel`" in p302.message
    assert not report.ok


def test_keras_version_under_test_uses_fullmatch():
    # The premise of `match full` parity: if Keras changes its lookup again, this fails
    # first and says so.
    layout_map = keras.distribution.LayoutMap(None)
    layout_map["dense"] = (None, "model")
    assert layout_map["model/dense/kernel"] is None
    assert layout_map["dense"] is not None
