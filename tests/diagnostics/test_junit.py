"""`planc lint --format junit`: a JUnit XML report, one test case per plan."""

import xml.etree.ElementTree as ET

from planc.cli import main

OK = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"
BAD = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = bacth)\n"


def junit(capsys, *args):
    code = main(["lint", "--format", "junit", *map(str, args)])
    return code, ET.fromstring(capsys.readouterr().out)


def test_each_plan_is_a_test_case(plan_file, capsys):
    code, root = junit(capsys, plan_file(OK, "a.kd"), plan_file(BAD, "b.kd"))
    suite = root.find("testsuite")
    assert code == 1
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "1", "0")
    names = [c.get("name").rsplit("/", 1)[-1] for c in suite.iter("testcase")]
    assert names == ["a.kd", "b.kd"]


def test_a_plan_with_errors_fails_with_its_diagnostics(plan_file, capsys):
    _, root = junit(capsys, plan_file(BAD))
    failure = root.find("testsuite/testcase/failure")
    assert failure.get("type") == "P113"
    assert "plan.kd:2:24: error[P113]: batch axis `bacth` is not a mesh axis" in failure.text


def test_warnings_pass_but_fail_under_strict(plan_file, capsys):
    path = plan_file(OK + 'layout {\n  "(a|a)*b" -> (model)\n}\n')
    code, root = junit(capsys, path)
    assert code == 0 and root.find("testsuite/testcase/failure") is None
    assert "warning[P314]" in root.find("testsuite/testcase/system-out").text
    code, root = junit(capsys, path, "--strict")
    assert code == 1 and root.find("testsuite/testcase/failure") is not None


def test_an_unreadable_plan_is_an_error_case(tmp_path, capsys):
    code, root = junit(capsys, tmp_path / "missing.kd")
    (case,) = root.iter("testcase")
    assert code == 2 and case.find("error").get("type") == "P325"
    assert root.find("testsuite").get("errors") == "1"


def test_control_characters_in_names_stay_out_of_the_xml(plan_file, capsys):
    path = plan_file(BAD, "bell\x07.kd")
    _, root = junit(capsys, path)  # ET.fromstring refuses control characters
    assert root.find("testsuite/testcase").get("name").endswith("bell\\x07.kd")
