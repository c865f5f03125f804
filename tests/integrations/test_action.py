"""`action.yml`: the composite GitHub Action. Its lint step runs here as a runner runs it
(`bash --noprofile --norc -eo pipefail`, inputs as environment variables, planc on PATH),
on a repository of plans: annotations on stdout, a valid SARIF file, the exit code as an
output."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from sarif_schema import check_sarif

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
STEPS = {s.get("name", s.get("uses")): s for s in ACTION["runs"]["steps"]}
MODEL = '{"planc_manifest": 1, "variables": [{"path": "d/kernel", "shape": [4, 8], ' \
        '"dtype": "float32"}]}\n'
PLAN = ('model "../models/m.json"\nmesh(batch = auto, model = 2)\n'
        'model_parallel(batch = batch)\nlayout {\n  "d/kernel" -> (_, model)\n}\n')
EXPRESSION = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")


def run_lint(repo: Path, **inputs):
    step = STEPS["Lint"]
    values = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
    values.update(inputs)
    env = {k: EXPRESSION.sub(lambda m: values[m[1]], v) for k, v in step["env"].items()}
    output = repo / "github_output"
    output.write_text("")
    env = dict(os.environ, **env, GITHUB_OUTPUT=str(output),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                             step["run"]], cwd=repo, env=env, capture_output=True, text=True,
                            timeout=300)
    return result, dict(line.split("=", 1) for line in output.read_text().splitlines())


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "models").mkdir()
    (tmp_path / "plans" / "deep").mkdir(parents=True)
    (tmp_path / "models" / "m.json").write_text(MODEL)
    (tmp_path / "plans" / "a.kd").write_text(PLAN)
    (tmp_path / "plans" / "deep" / "b.kd").write_text(PLAN.replace('"../', '"../../'))
    return tmp_path


def test_the_action_is_composite_and_installs_planc_from_itself():
    assert ACTION["runs"]["using"] == "composite"
    assert STEPS["Install planc"]["env"]["PLANC_SOURCE"] == "${{ github.action_path }}"
    upload = STEPS["Upload SARIF"]
    assert upload["uses"].startswith("github/codeql-action/upload-sarif@")
    assert upload["if"].startswith("always()")


def test_run_scripts_never_expand_inputs_in_their_text():
    for step in ACTION["runs"]["steps"]:
        assert "${{" not in step.get("run", ""), step.get("name")


def test_clean_plans_pass_and_write_an_empty_sarif(repo):
    result, outputs = run_lint(repo, devices="8,64")
    assert result.returncode == 0, result.stderr
    assert outputs == {"exit-code": "0"}
    doc = check_sarif((repo / "planc.sarif").read_text())
    assert doc["runs"][0]["results"] == []


def test_problems_are_annotations_and_sarif_results(repo):
    (repo / "plans" / "deep" / "b.kd").write_text(PLAN.replace('"../', '"../../')
                                                  .replace("(_, model)", "(model, _, _)"))
    result, outputs = run_lint(repo, devices="8")
    assert result.returncode == 1 and outputs == {"exit-code": "1"}
    (line,) = [l for l in result.stdout.splitlines() if l.startswith("::error")]
    assert line.startswith("::error file=plans/deep/b.kd,line=5,")
    doc = check_sarif((repo / "planc.sarif").read_text())
    (r,) = doc["runs"][0]["results"]
    assert r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "plans/deep/b.kd"


def test_no_matching_plan_is_an_error(repo):
    result, outputs = run_lint(repo, plans="nothing/*.kd")
    assert result.returncode == 2 and outputs == {"exit-code": "2"}
    assert "::error title=planc::no plan matches" in result.stdout


def test_strict_fails_on_warnings(repo):
    (repo / "plans" / "a.kd").write_text(PLAN.replace("}\n", '  "(x|x)*y" -> (model)\n}\n'))
    assert run_lint(repo, devices="8")[0].returncode == 0
    assert run_lint(repo, devices="8", strict="true")[0].returncode == 1


# A pull request may add a plan named like an option next to a module of its own: the
# action passes plans after `--`, so the name stays a file name and nothing is imported
# (tests/cli/test_dashed_operands.py).
EVIL = "--model=evilmod:x.kd"
EVILMOD = ('import pathlib\npathlib.Path(__file__).with_name("PWNED").write_text("ran")\n'
           'x = {}\n')


@pytest.fixture
def option_named(tmp_path):
    (tmp_path / "m.json").write_text(MODEL)
    for name in ("p.kd", EVIL):
        (tmp_path / name).write_text(PLAN.replace("../models/", ""))
    (tmp_path / "evilmod.py").write_text(EVILMOD)
    return tmp_path


@pytest.mark.parametrize("inputs", [{}, {"devices": "8", "strict": "true"},
                                    {"model": "m.json"}])
def test_a_plan_named_like_an_option_is_linted_as_a_plan(option_named, inputs):
    result, outputs = run_lint(option_named, **inputs)
    assert not (option_named / "PWNED").exists(), "the action imported the pull request's module"
    assert result.returncode == 0, result.stdout + result.stderr
    assert outputs == {"exit-code": "0"}
    doc = check_sarif((option_named / "planc.sarif").read_text())
    assert all(r["level"] != "error" for r in doc["runs"][0]["results"])


def test_a_problem_in_a_plan_named_like_an_option_is_annotated(option_named):
    (option_named / EVIL).write_text(PLAN.replace("../models/", "")
                                     .replace("(_, model)", "(model, _, _)"))
    result, outputs = run_lint(option_named, devices="8")
    assert not (option_named / "PWNED").exists()
    assert result.returncode == 1 and outputs == {"exit-code": "1"}
    assert "::error file=--model=evilmod%3Ax.kd,line=5," in result.stdout
