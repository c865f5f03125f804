"""A plan knows its model: `model "PATH"` in the plan, or `[tool.planc]` in pyproject.toml,
so `planc lint` with no `--model` validates each plan against its own model."""

import json

import pytest

from planc.check.checker import check, check_file
from planc.cli import main
from planc.diagnostics import PlanError

MODEL = {"planc_manifest": 1, "variables": [
    {"path": "dense/kernel", "shape": [16, 8], "dtype": "float32"}]}
OTHER = {"planc_manifest": 1, "variables": [
    {"path": "conv/kernel", "shape": [3, 4], "dtype": "float32"}]}
BODY = ('mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n'
        'layout {\n  "dense/kernel" -> (_, model)\n}\n')


@pytest.fixture
def project(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "plans").mkdir()
    (tmp_path / "models" / "m.json").write_text(json.dumps(MODEL))
    (tmp_path / "models" / "other.json").write_text(json.dumps(OTHER))
    return tmp_path


def lint(capsys, *args):
    code = main(["lint", "--color", "never", "--format", "json", *map(str, args)])
    out = capsys.readouterr()
    return code, json.loads(out.out), out.err


def codes(doc):
    return [d["code"] for d in doc["diagnostics"]]


def test_the_model_path_is_relative_to_the_plan_file(project):
    (project / "plans" / "p.kd").write_text('model "../models/m.json"\n' + BODY)
    ir = check_file(str(project / "plans" / "p.kd"))
    assert ir.model == str(project / "models" / "m.json")
    assert ir.model_span.line == 1


def test_model_stays_a_mesh_axis_name():
    ir = check('model "m.json"\n' + BODY)
    assert ir.mesh.names == ("batch", "model") and ir.model == "m.json"


def test_fmt_puts_the_statement_after_the_plan_name(plan_file, capsys):
    path = plan_file('mesh(model = 2)\nmodel   "m.json"\nplan p\n')
    assert main(["fmt", str(path)]) == 0
    assert path.read_text().startswith('plan p\n\nmodel "m.json"\n\nmesh(model = 2)\n')


def test_lint_without_model_uses_the_plans_own(project, capsys):
    (project / "plans" / "p.kd").write_text('model "../models/m.json"\n' + BODY)
    code, doc, err = lint(capsys, project / "plans" / "p.kd")
    assert (code, codes(doc)) == (0, ["P202"])
    assert "against `" + str(project / "models" / "m.json") + "` (1 variables)" in err


def test_the_command_line_model_overrides_the_plans(project, capsys):
    (project / "plans" / "p.kd").write_text('model "../models/m.json"\n' + BODY)
    code, doc, _ = lint(capsys, project / "plans" / "p.kd", "--model",
                        project / "models" / "other.json")
    assert code == 1 and "P301" in codes(doc)


def test_each_plan_is_checked_against_its_own_model(project, capsys):
    (project / "plans" / "a.kd").write_text('model "../models/m.json"\n' + BODY)
    (project / "plans" / "b.kd").write_text(
        'model "../models/other.json"\n' + BODY.replace("dense/kernel", "conv/kernel"))
    code, doc, err = lint(capsys, project / "plans" / "a.kd", project / "plans" / "b.kd",
                          "--devices", "8")
    assert (code, codes(doc)) == (0, [])
    assert "checked 2 plans against 2 models (2 variables)" in err


def test_an_unreadable_model_is_located_on_the_statement(project, capsys):
    (project / "plans" / "p.kd").write_text(BODY + 'model "../models/gone.json"\n')
    code, doc, _ = lint(capsys, project / "plans" / "p.kd")
    (d,) = doc["diagnostics"]
    assert (code, d["code"], d["line"]) == (1, "P320", 6)
    assert "gone.json" in d["message"]


def test_an_empty_model_is_an_error():
    with pytest.raises(PlanError) as exc:
        check('model ""\n' + BODY)
    assert [d.code for d in exc.value.diagnostics] == ["P133"]


def test_a_module_model_in_a_plan_is_refused():
    with pytest.raises(PlanError) as exc:
        check('model "mymodels:build"\n' + BODY)
    (d,) = exc.value.diagnostics
    assert d.code == "P134" and "pyproject.toml" in d.help[0]


def test_two_model_statements_are_an_error():
    with pytest.raises(PlanError) as exc:
        check('model "a.json"\nmodel "b.json"\n' + BODY)
    assert [d.code for d in exc.value.diagnostics] == ["P114"]


def test_pyproject_maps_plan_globs_to_models_and_counts(project, capsys):
    (project / "pyproject.toml").write_text(
        '[tool.planc]\ndevices = [8]\n\n[[tool.planc.plans]]\nfiles = "plans/*.kd"\n'
        'model = "models/m.json"\ndevices = [8, 64]\n')
    (project / "plans" / "p.kd").write_text(BODY)
    code, doc, err = lint(capsys, project / "plans" / "p.kd")
    assert (code, codes(doc)) == (0, [])
    assert "at 8, 64 devices" in err


def test_the_plans_own_model_wins_over_pyproject(project, capsys):
    (project / "pyproject.toml").write_text(
        '[[tool.planc.plans]]\nfiles = "plans/*.kd"\nmodel = "models/other.json"\n')
    (project / "plans" / "p.kd").write_text('model "../models/m.json"\n' + BODY)
    code, doc, _ = lint(capsys, project / "plans" / "p.kd", "--devices", "8")
    assert (code, codes(doc)) == (0, [])


def test_a_bad_tool_planc_table_is_located_in_pyproject(project, capsys):
    (project / "pyproject.toml").write_text(
        '[tool.planc]\ndevices = "many"\n')
    (project / "plans" / "p.kd").write_text(BODY)
    code, doc, _ = lint(capsys, project / "plans" / "p.kd")
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "P321"]
    assert code == 1 and d["file"].endswith("pyproject.toml") and d["line"] == 2


def test_invalid_toml_is_located_where_it_breaks(project, capsys):
    (project / "pyproject.toml").write_text('[tool.planc]\ndevices = [8,\n')
    (project / "plans" / "p.kd").write_text(BODY)
    code, doc, _ = lint(capsys, project / "plans" / "p.kd")
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "P321"]
    assert code == 1 and "not valid TOML" in d["message"]


def test_a_pyproject_model_that_cannot_be_read_points_at_its_entry(project, capsys):
    (project / "pyproject.toml").write_text(
        '[[tool.planc.plans]]\nfiles = "plans/*.kd"\nmodel = "models/gone.json"\n')
    (project / "plans" / "p.kd").write_text(BODY)
    code, doc, _ = lint(capsys, project / "plans" / "p.kd")
    (d,) = doc["diagnostics"]
    assert (code, d["code"], d["line"]) == (1, "P320", 3)
    assert d["file"].endswith("pyproject.toml")
