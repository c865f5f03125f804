"""`planc lint --format sarif`: SARIF 2.1.0 that the official schema and GitHub code
scanning accept: every result located, related locations, rule metadata, fingerprints,
percent-encoded URIs relative to --base-dir, and failures that are not clean reports."""

import json
from pathlib import Path
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from planc.cli import main
from sarif_schema import check_sarif, schema_errors

BAD = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = bacth)\n"
OK = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"
TWICE = OK + 'layout {\n  "a" -> (model)\n  "a" -> (model)\n}\n'


def sarif(capsys, *args):
    code = main(["lint", "--format", "sarif", *map(str, args)])
    return code, check_sarif(capsys.readouterr().out)


def results(doc):
    return doc["runs"][0]["results"]


def test_the_vendored_schema_rejects_a_result_without_a_message():
    doc = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}},
                                         "results": [{"ruleId": "P1"}]}]}
    assert schema_errors(doc)


def test_a_plan_error_is_a_located_result(plan_file, capsys):
    path = plan_file(BAD)
    code, doc = sarif(capsys, path, "--base-dir", path.parent)
    (r,) = results(doc)
    loc = r["locations"][0]["physicalLocation"]
    assert code == 1 and r["ruleId"] == "P113" and r["level"] == "error"
    assert loc["artifactLocation"] == {"uri": "plan.kd", "uriBaseId": "SRCROOT"}
    assert loc["region"] == {"startLine": 2, "startColumn": 24, "endLine": 2, "endColumn": 29}


def test_srcroot_is_the_base_dir_as_a_file_uri(plan_file, capsys):
    path = plan_file(BAD)
    _, doc = sarif(capsys, path, "--base-dir", path.parent)
    assert doc["runs"][0]["originalUriBaseIds"]["SRCROOT"]["uri"] == \
        "file://" + str(path.parent) + "/"


def test_a_second_span_is_a_related_location(plan_file, capsys):
    path = plan_file(TWICE)
    _, doc = sarif(capsys, path, "--base-dir", path.parent)
    (r,) = [r for r in results(doc) if "relatedLocations" in r]
    assert r["relatedLocations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert r["relatedLocations"][0]["message"]["text"]


def test_rules_carry_descriptions_help_and_the_code_table_uri(plan_file, capsys):
    _, doc = sarif(capsys, plan_file(BAD))
    (rule,) = doc["runs"][0]["tool"]["driver"]["rules"]
    assert rule["id"] == "P113"
    assert rule["fullDescription"]["text"] and rule["help"]["text"]
    assert rule["helpUri"].endswith("/docs/diagnostics.md#p113")
    assert doc["runs"][0]["tool"]["driver"]["informationUri"].endswith("/README.md")


def test_fingerprints_survive_moving_the_problem_down_a_line(plan_file, capsys):
    _, before = sarif(capsys, plan_file(BAD))
    _, after = sarif(capsys, plan_file("# a comment\n" + BAD))
    assert results(before)[0]["partialFingerprints"] == results(after)[0]["partialFingerprints"]
    assert results(before)[0]["locations"] != results(after)[0]["locations"]


def test_a_define_typo_is_located_on_the_plan_it_was_given_for(plan_file, capsys):
    path = plan_file("param tp = 2\nmesh(batch = auto, model = tp)\nmodel_parallel(batch = batch)\n")
    code, doc = sarif(capsys, path, "-D", "tpp=4", "--base-dir", path.parent)
    (r,) = results(doc)
    assert code == 1 and r["ruleId"] == "P109"
    assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "plan.kd"
    assert r["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}


@pytest.mark.parametrize("name, uri", [
    ("my plan.kd", "my%20plan.kd"), ("a#b.kd", "a%23b.kd"), ("100%.kd", "100%25.kd"),
    ("tab\there.kd", "tab%09here.kd"), ("plän.kd", "pl%C3%A4n.kd"),
])
def test_uris_are_percent_encoded(plan_file, capsys, name, uri):
    path = plan_file(BAD, name=os.path.join("sub dir", name))
    _, doc = sarif(capsys, path, "--base-dir", path.parent.parent)
    loc = results(doc)[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc["uri"] == "sub%20dir/" + uri


def test_a_file_outside_the_base_dir_gets_an_absolute_file_uri(plan_file, capsys, tmp_path):
    path = plan_file(BAD)
    other = tmp_path / "elsewhere"
    other.mkdir()
    _, doc = sarif(capsys, path, "--base-dir", other)
    loc = results(doc)[0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert loc == {"uri": "file://" + str(path)}


def test_the_base_dir_defaults_to_the_repository_root(capsys, monkeypatch):
    monkeypatch.chdir(ROOT / "plans")
    main(["lint", "--format", "sarif", "-D", "nope=1", "gemma.kd"])
    doc = check_sarif(capsys.readouterr().out)
    assert results(doc)[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] \
        == "plans/gemma.kd"


def test_a_base_dir_that_is_not_a_directory_is_a_usage_error(plan_file, capsys):
    path = plan_file(BAD)
    assert main(["lint", "--format", "sarif", str(path), "--base-dir", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == f"planc: --base-dir {path}: not a directory\n"


def test_a_clean_run_is_successful_with_no_results(plan_file, capsys):
    code, doc = sarif(capsys, plan_file(OK))
    assert code == 0 and results(doc) == []
    assert doc["runs"][0]["invocations"] == [{"executionSuccessful": True}]


def test_an_unreadable_plan_makes_the_run_unsuccessful(plan_file, capsys, tmp_path):
    code, doc = sarif(capsys, plan_file(BAD), tmp_path / "missing.kd")
    (inv,) = doc["runs"][0]["invocations"]
    assert code == 2 and inv["executionSuccessful"] is False
    (note,) = inv["toolExecutionNotifications"]
    assert note["descriptor"]["id"] == "P325" and "missing.kd" in note["message"]["text"]
    assert [r["ruleId"] for r in results(doc)] == ["P113"]  # the readable plan still linted


def test_an_unreadable_model_still_writes_the_report(plan_file, tmp_path, capsys):
    out = tmp_path / "report.sarif"
    code = main(["lint", "--format", "sarif", "-o", str(out), str(plan_file(BAD)),
                 "--model", str(tmp_path / "nope.json")])
    doc = check_sarif(out.read_text(encoding="utf-8"))
    assert code == 2
    assert doc["runs"][0]["invocations"][0]["executionSuccessful"] is False
    assert "nope.json" in capsys.readouterr().err


def test_every_format_carries_an_unreadable_input(plan_file, tmp_path, capsys):
    missing = str(tmp_path / "missing.kd")
    for form in ("json", "github", "junit"):
        assert main(["lint", "--format", form, missing]) == 2
        out = capsys.readouterr().out
        assert "missing.kd" in out and "P325" in out, form
    assert json.loads((main(["lint", "--format", "json", missing]),
                       capsys.readouterr().out)[1])["complete"] is False


def test_a_non_utf8_file_name_is_a_valid_sarif_uri(tmp_path):
    name = os.fsdecode(os.path.join(os.fsencode(tmp_path), b"pl\xffan.kd"))
    with open(name, "w") as f:
        f.write(BAD)
    result = subprocess.run([sys.executable, "-m", "planc", "lint", "--format", "sarif",
                             "--base-dir", str(tmp_path), name],
                            capture_output=True, cwd=tmp_path)
    doc = check_sarif(result.stdout.decode("utf-8"))
    assert result.returncode == 1
    assert results(doc)[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] \
        == "pl%FFan.kd"


def test_each_rules_help_uri_leads_to_its_own_row_of_the_code_table():
    from planc.diagnostics import formats
    from planc.diagnostics.codes import DOCS

    page = (Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md").read_text()
    for code in ("P101", "P303", "P817"):
        rule = formats._rule(code, {})
        url, _, anchor = rule["helpUri"].partition("#")
        assert url == formats.CODES_URL and anchor == code.lower()
        assert f'<a id="{anchor}"></a>{code} |' in page
    assert len({formats._rule(c, {})["helpUri"] for c in DOCS}) == len(DOCS)
