"""`planc diff`: axes only renamed are reported apart from moved shards, and `-D` applies
to each plan that declares the parameter (issue 26, item 7)."""

import json

import pytest

from planc.cli import main

from conftest import ROOT

MODEL = str(ROOT / "examples" / "mlp.json")
TP = """mesh(batch = auto, {model} = 2)
model_parallel(batch = batch)
layout {{
    "dense_0/.*" -> {first}
    "dense_1/kernel" -> (batch, {model})
    "dense_1/bias" -> ({model})
}}
"""


def _plan(plan_file, name, model="model", first="(batch, model) | (model)", text=TP):
    return str(plan_file(text.format(model=model, first=first.replace("model", model)), name))


def _diff(capsys, *args):
    code = main(["diff", *args, "--model", MODEL, "--devices", "8"])
    return code, capsys.readouterr().out


def test_a_renamed_axis_is_reported_apart_not_as_changed_variables(plan_file, capsys):
    old, new = _plan(plan_file, "old.kd"), _plan(plan_file, "new.kd", model="tp")
    code, out = _diff(capsys, old, new)
    assert code == 1  # the names differ: code that names an axis must follow
    lines = out.splitlines()
    assert lines[0] == ("= axes renamed: model -> tp (the same devices along each; 4 "
                        "variables placed as before under the new names)")
    assert not [ln for ln in lines if ln.startswith("~")]
    assert lines[-1] == "0 variables changed, 0 newly replicated; axes renamed: model -> tp"
    code, out = _diff(capsys, old, new, "--format", "json")
    doc = json.loads(out)
    assert doc["renamed_axes"] == {"model": "tp"} and doc["changes"] == []
    assert sorted(doc["renamed"]) == ["dense_0/bias", "dense_0/kernel", "dense_1/bias",
                                      "dense_1/kernel"]
    assert doc["identical"] is False


def test_a_rename_beside_a_real_change_reports_only_the_change(plan_file, capsys):
    old = _plan(plan_file, "old.kd")
    new = _plan(plan_file, "new.kd", model="tp", first="replicated")
    code, out = _diff(capsys, old, new, "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["renamed_axes"] == {"model": "tp"}
    assert [c["path"] for c in doc["changes"]] == ["dense_0/kernel", "dense_0/bias"]
    assert doc["renamed"] == ["dense_1/kernel", "dense_1/bias"]


def test_two_axes_of_one_size_swapping_names_place_every_shard_as_before(plan_file, capsys):
    text = """mesh({a} = 2, {b} = 4)
model_parallel(batch = {a})
layout {{
    ".*/kernel" -> ({a}, {b})
    ".*/bias" -> ({b})
}}
"""
    old = str(plan_file(text.format(a="x", b="y"), "old.kd"))
    new = str(plan_file(text.format(a="y", b="x"), "new.kd"))
    code, out = _diff(capsys, old, new, "--format", "json")
    doc = json.loads(out)
    assert doc["renamed_axes"] == {"x": "y", "y": "x"} and doc["changes"] == []


def test_meshes_of_other_sizes_are_no_rename(plan_file, capsys):
    old = _plan(plan_file, "old.kd")
    new = str(plan_file(TP.format(model="tp", first="(batch, tp) | (tp)").replace(
        "tp = 2", "tp = 4"), "new.kd"))
    code, out = _diff(capsys, old, new, "--format", "json")
    doc = json.loads(out)
    assert doc["renamed_axes"] == {} and doc["renamed"] == [] and len(doc["changes"]) == 4


PARAM = """param tp = 2
mesh(batch = auto, model = tp)
model_parallel(batch = batch)
layout {
    "dense_.*/kernel" -> (batch, model)
    "dense_.*/bias" -> (model)
}
"""


def test_d_applies_to_the_plan_that_declares_the_parameter(plan_file, capsys):
    fixed = str(ROOT / "examples" / "mlp_tp.kd")
    param = str(plan_file(PARAM, "param.kd"))
    code, out = _diff(capsys, fixed, param, "-D", "tp=2")
    assert (code, out.splitlines()[-1]) == (0, "identical")
    code, out = _diff(capsys, fixed, param, "-D", "tp=4")
    assert code == 1 and "per device: 464 B -> 424 B" in out


def test_d_naming_a_parameter_neither_plan_declares_is_p109(plan_file, capsys):
    fixed = str(ROOT / "examples" / "mlp_tp.kd")
    param = str(plan_file(PARAM, "param.kd"))
    code, out = _diff(capsys, fixed, param, "-D", "tq=4")
    assert code == 2 and "error[P109]" in out


def test_diff_help_says_where_d_applies(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "-D NAME=VALUE override a `param` in each plan that declares it" in out
