"""A file named like an option (`--model=evilmod:x.kd`) must stay a file name.

Globs (the GitHub Action's `**/*.kd`) and hooks' file lists (pre-commit appends them to
the entry) hand planc whatever names a pull request adds. Before `--`, argparse reads
`--model=evilmod:x.kd` as `--model evilmod:x.kd`, and planc imports `evilmod.py` from the
working directory: the pull request's code runs in CI. The action and both hooks pass
the names after `--`, and every command refuses an operand that begins with `-` before
`--`. Each test puts an `evilmod.py` that leaves a mark when imported beside the plans.
"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

MODEL = '{"planc_manifest": 1, "variables": [{"path": "d/kernel", "shape": [4, 8], ' \
        '"dtype": "float32"}]}\n'
# In canonical form, so `planc fmt` leaves it as it is.
PLAN = ('model "m.json"\n\nmesh(batch = auto, model = 2)\n\nmodel_parallel(batch = batch)\n\n'
        'layout {\n    "d/kernel" -> (_, model)\n}\n')
EVIL = "--model=evilmod:x.kd"
EVILMOD = ('import pathlib\npathlib.Path(__file__).with_name("PWNED").write_text("ran")\n'
           'x = {}\n')
PLANC = [sys.executable, "-m", "planc"]


def _user_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "m.json").write_text(MODEL)
    (path / "p.kd").write_text(PLAN)
    (path / EVIL).write_text(PLAN)
    (path / "evilmod.py").write_text(EVILMOD)
    return path


def _planc(cwd, *words):
    return subprocess.run([*PLANC, *words], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(ROOT)))


# -- the command line ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["-x y.kd", "-1"])
def test_an_operand_that_begins_with_a_dash_is_refused_before_double_dash(tmp_path, name):
    # argparse takes these for operands (a space, a negative number): planc does not
    (tmp_path / "m.json").write_text(MODEL)
    (tmp_path / name).write_text(PLAN)
    result = _planc(tmp_path, "lint", name)
    assert result.returncode == 2 and result.stdout == ""
    assert f"planc lint: error: PLAN '{name}' begins with '-'" in result.stderr
    assert "put file names after `--`" in result.stderr
    after = _planc(tmp_path, "lint", "--devices", "8", "--", name)
    assert after.returncode == 0, after.stderr
    assert "checked 1 plan against `m.json`" in after.stderr


def test_every_command_refuses_a_dashed_operand_and_takes_it_after_double_dash(tmp_path):
    (tmp_path / "m.json").write_text(MODEL)
    (tmp_path / "-x y.kd").write_text(PLAN)
    for words in (["fmt", "--check"], ["explain", "--model", "m.json"],
                  ["compile", "--model", "m.json", "--devices", "8"], ["cluster"]):
        refused = _planc(tmp_path, *words, "-x y.kd")
        assert refused.returncode == 2 and "begins with '-'" in refused.stderr, words
        taken = _planc(tmp_path, *words, "--", "-x y.kd")
        assert "begins with '-'" not in taken.stderr, words
    # a name given both before and after `--` is refused once for the word before
    twice = _planc(tmp_path, "lint", "-x y.kd", "--", "-x y.kd")
    assert twice.returncode == 2 and "begins with '-'" in twice.stderr


def test_an_option_named_file_after_double_dash_is_a_plan(tmp_path):
    repo = _user_repo(tmp_path / "r")
    result = _planc(repo, "lint", "--devices", "8", "--", EVIL, "p.kd")
    assert result.returncode == 0, result.stderr
    assert "checked 2 plans" in result.stderr
    assert not (repo / "PWNED").exists()


# -- the GitHub Action -----------------------------------------------------------------

ACTION = yaml.safe_load((ROOT / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*inputs\.([\w-]+)\s*\}\}")


def _run_action_lint(repo: Path, **inputs):
    """The action's lint step as a runner runs it (see tests/integrations/test_action.py)."""
    (step,) = [s for s in ACTION["runs"]["steps"] if s.get("name") == "Lint"]
    values = {k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()}
    values.update(inputs)
    env = {k: EXPRESSION.sub(lambda m: values[m[1]], v) for k, v in step["env"].items()}
    output = repo / "github_output"
    output.write_text("")
    env = dict(os.environ, **env, GITHUB_OUTPUT=str(output), PYTHONPATH=str(ROOT),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c",
                             step["run"]], cwd=repo, env=env, capture_output=True, text=True,
                            timeout=300)
    return result, output.read_text()


@pytest.mark.parametrize("inputs", [{}, {"devices": "8", "strict": "true"},
                                    {"model": "m.json"}])
def test_the_action_lints_an_option_named_plan_as_a_plan(tmp_path, inputs):
    repo = _user_repo(tmp_path / "r")
    result, outputs = _run_action_lint(repo, **inputs)
    assert not (repo / "PWNED").exists(), "the action imported the pull request's module"
    assert result.returncode == 0, result.stdout + result.stderr
    assert outputs == "exit-code=0\n"
    results = json.loads((repo / "planc.sarif").read_text())["runs"][0]["results"]
    assert all(r["level"] != "error" for r in results)


def test_the_action_annotates_a_problem_in_an_option_named_plan(tmp_path):
    repo = _user_repo(tmp_path / "r")
    (repo / EVIL).write_text(PLAN.replace("(_, model)", "(model, _, _)"))
    result, outputs = _run_action_lint(repo, devices="8")
    assert not (repo / "PWNED").exists()
    assert result.returncode == 1 and outputs == "exit-code=1\n"
    assert "::error file=--model=evilmod%3Ax.kd,line=8," in result.stdout


# -- pre-commit's hooks -----------------------------------------------------------------

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hooks_clone(tmp_path_factory):
    """This working tree (tracked and untracked files git does not ignore) as a repo."""
    src = tmp_path_factory.mktemp("planc")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.split(b"\0")
    for name in filter(None, files):
        path = ROOT / os.fsdecode(name)
        if path.is_file():
            (src / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / os.fsdecode(name))
    _git(src, "init", "-q")
    _git(src, "add", "-A")
    _git(src, "commit", "-qm", "planc")
    return src


@pytest.fixture(scope="module")
def hooks_home(tmp_path_factory):
    return tmp_path_factory.mktemp("pre-commit-home")


def _try_repo(clone, repo, hook, home):
    # The hook runs the planc pre-commit installed from the clone: nothing of this
    # process's PYTHONPATH may stand in for it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    return subprocess.run([str(PRE_COMMIT), "try-repo", str(clone), hook, "--all-files"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)


@needs_git
@pytest.mark.parametrize("hook", ["planc-lint", "planc-fmt"])
def test_the_hooks_pass_an_option_named_plan_as_a_file(hooks_clone, hooks_home, tmp_path,
                                                       hook):
    repo = _user_repo(tmp_path / "user")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    result = _try_repo(hooks_clone, repo, hook, hooks_home)
    assert not (repo / "PWNED").exists(), "the hook imported the pull request's module"
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


@needs_git
def test_the_lint_hook_reports_a_problem_in_an_option_named_plan(hooks_clone, hooks_home,
                                                                tmp_path):
    repo = _user_repo(tmp_path / "user")
    (repo / EVIL).write_text(PLAN.replace('"d/kernel"', '"d/kernal"'))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    result = _try_repo(hooks_clone, repo, "planc-lint", hooks_home)
    assert not (repo / "PWNED").exists()
    assert result.returncode == 1
    assert f"--> {EVIL}:" in result.stdout and "error[P301]" in result.stdout
