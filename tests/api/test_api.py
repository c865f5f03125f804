"""The Python API: load_plan / loads, PlanError, the Plan's view of the IR."""

import subprocess
import sys

import pytest

import planc
from conftest import PLANS


def test_load_plan_reads_a_file_and_names_the_plan_after_it(plan_file):
    path = plan_file("mesh(batch = auto)\ndata_parallel\n", "my_plan.kd")
    plan = planc.load_plan(path)
    assert plan.name == "my_plan" and plan.file == str(path)


def test_plan_statement_names_the_plan():
    assert planc.loads("plan gemma\ndata_parallel").name == "gemma"


def test_data_parallel_defaults_to_a_batch_mesh_over_all_devices():
    plan = planc.loads("data_parallel")
    assert plan.mesh_axes == {"batch": None}
    assert plan.batch_axes == ("batch",)
    assert plan.with_devices(8).mesh_axes == {"batch": 8}


def test_data_parallel_splits_the_batch_over_every_axis():
    assert planc.loads("mesh(a = 2, b = auto)\ndata_parallel").batch_axes == ("a", "b")


def test_bare_model_parallel_uses_the_first_axis_as_keras_does():
    plan = planc.loads("mesh(data = auto, model = 2)\nmodel_parallel")
    assert plan.batch_axes == ("data",)


def test_params_can_be_overridden_by_keyword():
    plan = planc.load_plan(PLANS / "gemma.kd", tp=4)
    assert plan.params == {"tp": 4} and plan.mesh_axes == {"batch": None, "model": 4}


def test_rules_carry_file_and_line():
    plan = planc.load_plan(PLANS / "gemma.kd")
    first = plan.rules[0]
    assert first.pattern == "token_embedding/embeddings"
    assert first.where == f"{PLANS / 'gemma.kd'}:13"
    assert plan.default is not None and plan.default.layout.text == "replicated"


def test_modes_default_to_full_match_and_error_on_overlap():
    plan = planc.loads("data_parallel")
    assert (plan.match, plan.overlap) == ("full", "error")


def test_plan_error_carries_every_diagnostic():
    with pytest.raises(planc.PlanError) as info:
        planc.loads("mesh(a = auto, b = auto, a = 2)\nmodel_parallel(batch = c)")
    assert sorted(d.code for d in info.value.diagnostics) == ["P102", "P103", "P113"]
    assert "error[P102]" in str(info.value)


def test_unreadable_path_raises_oserror(tmp_path):
    with pytest.raises(FileNotFoundError):
        planc.load_plan(tmp_path / "missing.kd")


def test_non_utf8_file_is_a_located_diagnostic(tmp_path):
    path = tmp_path / "bad.kd"
    path.write_bytes(b"mesh(batch = auto)\ndata_parallel # \xff\n")
    with pytest.raises(planc.PlanError) as info:
        planc.load_plan(path)
    d = info.value.diagnostics[0]
    assert (d.code, d.span.line, d.span.column) == ("P009", 2, 17)


def test_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.kd"
    path.write_bytes(b"\xef\xbb\xbfdata_parallel\n")
    assert planc.load_plan(path).distribution_kind == "data_parallel"


def test_plans_are_frozen_and_compare_by_meaning():
    a = planc.loads("mesh(batch = auto)\ndata_parallel")
    b = planc.loads("mesh(batch = auto)   # same meaning\ndata_parallel")
    assert a == b and hash(a) == hash(b)
    with pytest.raises(AttributeError):
        a.name = "x"


def test_include_inlines_rules_and_params(plan_file):
    plan_file('param tp = 2\nlayout {\n    "dense/kernel" -> (_, model)\n}\n', "common.kdi")
    path = plan_file('include "common.kdi"\nmesh(batch = auto, model = tp)\n'
                     "model_parallel(batch = batch)\n", "main.kd")
    plan = planc.load_plan(path)
    assert plan.params == {"tp": 2}
    assert plan.rules[0].pattern == "dense/kernel"
    assert plan.rules[0].span.file.endswith("common.kdi")


def test_include_cycle_is_reported(plan_file):
    plan_file('include "b.kd"\n', "a.kd")
    plan_file('include "a.kd"\n', "b.kd")
    path = plan_file('include "a.kd"\ndata_parallel\n', "main.kd")
    with pytest.raises(planc.PlanError) as info:
        planc.load_plan(path)
    assert [d.code for d in info.value.diagnostics] == ["P116"]


def test_missing_include_points_at_the_path(plan_file):
    path = plan_file('data_parallel\ninclude "nope.kd"\n')
    with pytest.raises(planc.PlanError) as info:
        planc.load_plan(path)
    d = info.value.diagnostics[0]
    assert (d.code, d.span.line, d.span.column) == ("P117", 2, 9)


def test_import_planc_and_lint_load_neither_jax_keras_nor_torch():
    code = ("import sys, planc, planc.cli\n"
            "planc.cli.main(['lint', '" + str(PLANS / "gemma.kd") + "'])\n"
            "heavy = {m.split('.')[0] for m in sys.modules}"
            " & {'jax', 'keras', 'tensorflow', 'torch'}\n"
            "print(sorted(heavy))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_plans_that_differ_only_in_layout_of_the_text_are_equal():
    text = (PLANS / "jax_stacked.kd").read_text()
    assert planc.loads(text) == planc.loads("\n\n" + text.replace("% model", "%   model"))
