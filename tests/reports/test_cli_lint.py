"""`planc lint` without a model: exit codes, formats, device counts."""

import json

from conftest import PLANS
from planc.cli import main

GOOD = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"


def test_clean_plans_exit_zero_and_print_nothing(capsys):
    assert main(["lint", *map(str, sorted(PLANS.glob("*.kd")))]) == 0
    assert capsys.readouterr().out == ""


def test_plan_with_errors_exits_one(plan_file, capsys):
    path = plan_file("mesh(batch = auto, model = 2)\nmodel_parallel(batch = bacth)\n")
    assert main(["lint", "--color", "never", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("error[P113]: batch axis `bacth` is not a mesh axis\n")
    assert out.rstrip().endswith("found 1 error")


def test_unreadable_plan_exits_two_with_one_line(tmp_path, capsys):
    assert main(["lint", str(tmp_path / "missing.kd")]) == 2
    err = capsys.readouterr().err
    assert err == f"planc: cannot read {tmp_path / 'missing.kd'}: No such file or directory\n"


def test_bad_usage_exits_two(capsys):
    try:
        main(["lint"])
    except SystemExit as exc:
        assert exc.code == 2
    else:
        raise AssertionError("argparse should exit")


def test_define_overrides_a_param(plan_file, capsys):
    path = plan_file("param tp = 2\nmesh(batch = 2, model = tp)\nmodel_parallel(batch = batch)\n"
                     'check tp <= 2, "tp at most 2"\n')
    assert main(["lint", str(path)]) == 0
    assert main(["lint", "-D", "tp=4", str(path)]) == 1
    assert "check failed: tp at most 2" in capsys.readouterr().out


def test_malformed_define_is_a_usage_error(plan_file, capsys):
    assert main(["lint", "-D", "tp", str(plan_file(GOOD))]) == 2
    assert "-D expects NAME=VALUE" in capsys.readouterr().err


def test_devices_that_do_not_fit_are_reported_per_count(plan_file, capsys):
    path = plan_file(GOOD)
    assert main(["lint", "--devices", "8,7", "--format", "json", str(path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert [(d["code"], d["devices"]) for d in doc["diagnostics"]] == [("P201", 7)]


def test_auto_check_without_a_count_is_noted(plan_file, capsys):
    path = plan_file(GOOD + 'check batch >= 2, "two replicas"\n')
    assert main(["lint", "--format", "json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [d["code"] for d in doc["diagnostics"]] == ["P202"]


def test_json_diagnostics_carry_structured_fields(plan_file, capsys):
    path = plan_file(GOOD + 'layout {\n    "k" -> (modle, _)\n}\n')
    main(["lint", "--format", "json", str(path)])
    (d,) = json.loads(capsys.readouterr().out)["diagnostics"]
    assert {k: d[k] for k in ("code", "severity", "line", "column", "end_line", "end_column")} == {
        "code": "P101", "severity": "error", "line": 4, "column": 13, "end_line": 4,
        "end_column": 18}
    assert d["file"] == str(path) and d["help"] == ["did you mean `model`?"]


def test_github_format_prints_workflow_commands(plan_file, capsys):
    path = plan_file(GOOD + 'layout {\n    "k" -> (modle, _)\n}\n')
    main(["lint", "--format", "github", str(path)])
    out = capsys.readouterr().out
    assert out.startswith(f"::error file={path},line=4,col=13,endLine=4,endColumn=18,title=P101::")


def test_sarif_format_is_sarif_2_1_0(plan_file, capsys):
    path = plan_file(GOOD + 'layout {\n    "k" -> (modle, _)\n}\n')
    main(["lint", "--format", "sarif", str(path)])
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.1.0"
    run = doc["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["P101"]
    region = run["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (4, 13)


def test_warnings_fail_only_under_strict(plan_file, capsys):
    path = plan_file(GOOD + 'layout {\n    "k" -> (_, model)\n}\n')
    model = plan_file('{"planc_manifest": 1, "variables": '
                      '[{"path": "other", "shape": [4, 4], "dtype": "float32"}]}', "m.json")
    args = ["lint", str(path), "--model", str(model), "--devices", "8"]
    main(args)  # P306 (rule matches nothing) is a warning; P301 unmatched is an error
    out = capsys.readouterr().out
    assert "P306" in out


def test_color_always_styles_and_never_does_not(plan_file, capsys):
    path = plan_file("mesh(batch = auto)\nmodel_parallel(batch = b)\n")
    main(["lint", "--color", "always", str(path)])
    assert "\x1b[" in capsys.readouterr().out
    main(["lint", "--color", "never", str(path)])
    assert "\x1b[" not in capsys.readouterr().out


def test_python_dash_m_planc_runs_the_cli():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "planc", "lint", "--quiet", str(PLANS / "gemma.kd")],
                         capture_output=True, text=True)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_an_unreadable_plan_does_not_stop_the_others_from_being_linted(plan_file, tmp_path,
                                                                         capsys):
    bad = plan_file("mesh(batch = auto)\nmodel_parallel(batch = b)\n")
    assert main(["lint", "--color", "never", str(tmp_path / "missing.kd"), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert "error[P113]" in out
    assert "cannot read" in err and "missing.kd" in err
