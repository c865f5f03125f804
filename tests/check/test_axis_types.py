"""The `axis_types` statement: what it means, how it is checked, printed and compiled,
and the Keras target's refusal of explicit axes."""

import json

import jax
import pytest
from jax.sharding import AxisType

import planc
from planc.check import format_text
from planc.cli import main
from planc.fingerprint import fingerprint
from planc.targets.emit.compiled_json import compiled_json

MESH = "mesh(data = 2, model = 4)\nmodel_parallel(batch = data)\n"


def codes(text):
    with pytest.raises(planc.PlanError) as info:
        planc.loads(MESH + text)
    return [(d.code, d.span.line, d.span.column) for d in info.value.diagnostics]


def test_every_axis_is_auto_without_the_statement():
    plan = planc.loads(MESH)
    assert plan.axis_types == {"data": "auto", "model": "auto"}
    assert plan.ir.axis_types == ()


def test_axis_types_explicit_makes_every_axis_explicit():
    plan = planc.loads(MESH + "axis_types explicit")
    assert plan.axis_types == {"data": "explicit", "model": "explicit"}
    assert plan.mesh().axis_types == (AxisType.Explicit, AxisType.Explicit)


def test_per_axis_types_leave_the_axes_not_named_auto():
    plan = planc.loads(MESH + "axis_types(model = explicit)")
    assert plan.axis_types == {"data": "auto", "model": "explicit"}
    assert plan.mesh().axis_types == (AxisType.Auto, AxisType.Explicit)


def test_the_mesh_keeps_its_device_order_whatever_the_types():
    auto = planc.loads(MESH).mesh()
    explicit = planc.loads(MESH + "axis_types explicit").mesh()
    assert (auto.devices == explicit.devices).all()


def test_axis_types_under_data_parallel_apply_to_the_implied_batch_axis():
    plan = planc.loads("data_parallel\naxis_types explicit")
    assert plan.axis_types == {"batch": "explicit"}


def test_an_all_auto_statement_keeps_the_fingerprint_of_a_plan_without_it():
    assert fingerprint(planc.loads(MESH + "axis_types auto").ir) == \
        fingerprint(planc.loads(MESH).ir)
    assert fingerprint(planc.loads(MESH + "axis_types(data = auto)").ir) == \
        fingerprint(planc.loads(MESH).ir)


def test_explicit_axes_change_the_fingerprint():
    assert fingerprint(planc.loads(MESH + "axis_types explicit").ir) != \
        fingerprint(planc.loads(MESH).ir)


def test_compiled_json_lists_axis_types_only_when_one_is_explicit():
    assert "axis_types" not in json.loads(compiled_json(planc.loads(MESH).ir))
    doc = json.loads(compiled_json(planc.loads(MESH + "axis_types(data = explicit)").ir))
    assert doc["axis_types"] == ["explicit", "auto"]


def test_an_unknown_axis_type_is_p127_with_a_suggestion():
    with pytest.raises(planc.PlanError) as info:
        planc.loads(MESH + "axis_types(model = explict)")
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("P127", 3, 20)
    assert d.help == ("did you mean `explicit`?",)


def test_manual_is_refused_with_a_pointer_to_shard_map():
    with pytest.raises(planc.PlanError) as info:
        planc.loads(MESH + "axis_types manual")
    (d,) = info.value.diagnostics
    assert d.code == "P127" and "shard_map" in d.help[0]


def test_an_unknown_axis_is_p101():
    assert codes("axis_types(modle = explicit)") == [("P101", 3, 12)]


def test_an_axis_given_twice_is_p102():
    assert codes("axis_types(data = explicit, data = auto)") == [("P102", 3, 29)]


def test_a_second_statement_is_p114():
    assert codes("axis_types explicit\naxis_types auto") == [("P114", 4, 1)]


def test_axis_types_is_a_keyword():
    with pytest.raises(planc.PlanError) as info:
        planc.loads("param axis_types = 2\n" + MESH)
    assert info.value.diagnostics[0].code.startswith("P0")


@pytest.mark.parametrize("written, printed", [
    ("axis_types   explicit", "axis_types explicit"),
    ("axis_types(data=explicit,model = auto ,)", "axis_types(data = explicit, model = auto)"),
])
def test_fmt_prints_axis_types_after_the_mesh(written, printed):
    text = "model_parallel(batch = data)\n" + written + "\nmesh(data = 2, model = 4)\n"
    out = format_text(text)
    assert printed in out
    assert out.index("mesh(") < out.index("axis_types") < out.index("model_parallel")
    assert format_text(out) == out


def test_keras_refuses_explicit_axes_with_p315():
    plan = planc.loads(MESH + "axis_types(model = explicit)")
    with pytest.raises(planc.PlanError) as info:
        plan.to_keras()
    (d,) = info.value.diagnostics
    assert (d.code, d.span.line) == ("P315", 3) and "`model`" in d.message


def test_the_keras_module_refuses_explicit_axes(tmp_path, capsys):
    source = tmp_path / "p.kd"
    source.write_text(MESH + "axis_types explicit\n", encoding="utf-8")
    out = tmp_path / "p_keras.py"
    assert main(["compile", str(source), "--target", "keras", "-o", str(out)]) == 1
    assert "P315" in capsys.readouterr().err
    assert not out.exists()


def test_keras_takes_a_plan_whose_axes_are_all_auto():
    plan = planc.loads(MESH + "axis_types auto")
    assert plan.to_keras() is not None


def test_a_mesh_whose_types_differ_from_the_plan_is_refused():
    plan = planc.loads(MESH + "axis_types explicit")
    auto_mesh = planc.loads(MESH).mesh()
    with pytest.raises(ValueError, match="`data` is auto in the mesh but explicit in the plan"):
        plan.shardings({"w": jax.ShapeDtypeStruct((8,), "float32")}, mesh=auto_mesh)
