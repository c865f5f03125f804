"""`.pre-commit-hooks.yaml`: the real `pre-commit try-repo` runs planc's hooks from a local
clone of this working tree on a repository of plans.

pre-commit installs planc from the clone into its own environment (`language: python`),
from the package index pip is configured with; the first run takes a minute.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import ROOT

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
MODEL = '{"planc_manifest": 1, "variables": [{"path": "d/kernel", "shape": [4, 8], ' \
        '"dtype": "float32"}]}\n'
PLAN = ('model "m.json"\nmesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n'
        'layout {\n  "d/kernel" -> (_, model)\n}\n')

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")


def git(cwd, *args):
    subprocess.run(["git", "-c", "user.email=t@example.com", "-c", "user.name=t", *args],
                   cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """This working tree (tracked and untracked files git does not ignore) as a repo."""
    src = tmp_path_factory.mktemp("planc")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.split(b"\0")
    for name in filter(None, files):
        path = ROOT / os.fsdecode(name)
        if path.is_file():
            (src / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, src / os.fsdecode(name))
    git(src, "init", "-q")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "planc")
    return src


@pytest.fixture
def user_repo(tmp_path):
    repo = tmp_path / "user"
    repo.mkdir()
    (repo / "m.json").write_text(MODEL)
    (repo / "p.kd").write_text(PLAN)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    return repo


def try_repo(clone, repo, hook, home):
    # The hook runs the planc pre-commit installed from the clone: nothing of this
    # process's PYTHONPATH may stand in for it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PRE_COMMIT_HOME=str(home), PRE_COMMIT_COLOR="never")
    return subprocess.run([str(PRE_COMMIT), "try-repo", str(clone), hook, "--all-files"],
                          cwd=repo, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("pre-commit-home")


def test_the_hooks_file_declares_lint_and_fmt_on_plan_files():
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"planc-lint", "planc-fmt"}
    assert all(h["files"] == r"\.kd$" and h["entry"].startswith("planc ") for h in hooks.values())


def test_planc_lint_passes_a_plan_that_fits_its_model(clone, user_repo, home):
    result = try_repo(clone, user_repo, "planc-lint", home)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "planc lint" in result.stdout and "Passed" in result.stdout


def test_planc_lint_fails_a_plan_against_its_model(clone, user_repo, home):
    (user_repo / "p.kd").write_text(PLAN.replace('"d/kernel"', '"d/kernal"'))
    git(user_repo, "add", "-A")
    result = try_repo(clone, user_repo, "planc-lint", home)
    assert result.returncode == 1
    assert "error[P301]" in result.stdout and "warning[P306]" in result.stdout


def test_planc_fmt_rewrites_a_plan_and_fails_once(clone, user_repo, home, tmp_path):
    messy = PLAN.replace("mesh(batch = auto", "mesh(batch=auto")
    (user_repo / "p.kd").write_text(messy)
    git(user_repo, "add", "-A")
    result = try_repo(clone, user_repo, "planc-fmt", home)
    assert result.returncode == 1  # pre-commit fails a hook that changed files
    expected = tmp_path / "expected.kd"
    expected.write_text(messy)
    from planc.cli import main

    assert main(["fmt", str(expected)]) == 0
    assert (user_repo / "p.kd").read_text() == expected.read_text() != messy
    assert try_repo(clone, user_repo, "planc-fmt", home).returncode == 0


# A pull request may add a plan named like an option next to a module of its own: the
# hooks' entry ends with `--`, so the name pre-commit appends stays a file name and
# nothing is imported (tests/cli/test_dashed_operands.py).
EVIL = "--model=evilmod:x.kd"
EVILMOD = ('import pathlib\npathlib.Path(__file__).with_name("PWNED").write_text("ran")\n'
           'x = {}\n')
# In canonical form, so `planc fmt` leaves it as it is.
CANONICAL = ('model "m.json"\n\nmesh(batch = auto, model = 2)\n\n'
             'model_parallel(batch = batch)\n\nlayout {\n    "d/kernel" -> (_, model)\n}\n')


@pytest.fixture
def option_named(tmp_path):
    repo = tmp_path / "user"
    repo.mkdir()
    (repo / "m.json").write_text(MODEL)
    for name in ("p.kd", EVIL):
        (repo / name).write_text(CANONICAL)
    (repo / "evilmod.py").write_text(EVILMOD)
    return repo


@pytest.mark.parametrize("hook", ["planc-lint", "planc-fmt"])
def test_a_plan_named_like_an_option_is_passed_as_a_file(clone, option_named, home, hook):
    git(option_named, "init", "-q")
    git(option_named, "add", "-A")
    result = try_repo(clone, option_named, hook, home)
    assert not (option_named / "PWNED").exists(), "the hook imported the pull request's module"
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Passed" in result.stdout


def test_a_problem_in_a_plan_named_like_an_option_is_reported(clone, option_named, home):
    (option_named / EVIL).write_text(CANONICAL.replace('"d/kernel"', '"d/kernal"'))
    git(option_named, "init", "-q")
    git(option_named, "add", "-A")
    result = try_repo(clone, option_named, "planc-lint", home)
    assert not (option_named / "PWNED").exists()
    assert result.returncode == 1
    assert f"--> {EVIL}:" in result.stdout and "error[P301]" in result.stdout
