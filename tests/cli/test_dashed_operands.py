"""A file named like an option (`--model=evilmod:x.kd`) stays a file name.

Globs (the GitHub Action's `**/*.kd`) and hooks' file lists (pre-commit appends them to
the entry) hand planc whatever names a pull request adds. Before `--`, argparse reads
`--model=evilmod:x.kd` as `--model evilmod:x.kd`, and planc would import `evilmod.py`
from the working directory: the pull request's code would run in CI. Every command
refuses an operand that begins with `-` before `--`; the action and the hooks pass the
names after `--` (tests/integrations/test_action.py, test_precommit.py).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

MODEL = '{"planc_manifest": 1, "variables": [{"path": "d/kernel", "shape": [4, 8], ' \
        '"dtype": "float32"}]}\n'
PLAN = ('model "m.json"\n\nmesh(batch = auto, model = 2)\n\nmodel_parallel(batch = batch)\n\n'
        'layout {\n    "d/kernel" -> (_, model)\n}\n')
EVIL = "--model=evilmod:x.kd"
# Leaves a mark when imported.
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
