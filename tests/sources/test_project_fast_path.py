"""`[tool.planc]` lookup: a pyproject.toml whose text cannot name `planc` is not parsed
(no `tomllib` at start-up); every other one is parsed, and is the project's only if its
TOML has a `tool.planc` key, however spelt. The lookup finds what parsing every
pyproject.toml on the way up finds."""

import tomllib

import pytest

from planc.sources.project import _nearest, may_name_planc, project_for

PARENT = "[tool.planc]\ndevices = [64]\n"
CHILD_TEXTS = [
    '[project]\nname = "x"\n',
    "[tool.planc]\ndevices = [8]\n",
    '[[tool.planc.plans]]\nfiles = "*.kd"\ndevices = [8]\n',
    "[tool]\nplanc = {devices = [8]}\n",
    "[tool]\nplanc.devices = [8]\n",
    '[ tool . "planc" ]\ndevices = [8]\n',
    "[tool.'planc']\ndevices = [8]\n",
    '[tool."\\u0070lanc"]\ndevices = [8]\n',
    '["tool"."\\U00000070lanc"]\ndevices = [8]\n',
    "tool.planc.devices = [8]\n",
    "tool = {planc = {devices = [8]}}\n",
    '# see tool.planc in the docs\n[project]\nname = "x"\n',
    '[project]\ndependencies = ["planc>=1"]\n',
    '[tool.other]\nx = "\\u00e9"\n',
    "tool = 3\n# planc\n",
    "[tool.plancx]\na = 1\n",
    "",
]


def slow_nearest(directory):
    """The nearest pyproject.toml on the way up whose parsed TOML has `tool.planc`."""
    while True:
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            tool = tomllib.loads(candidate.read_text()).get("tool")
            if isinstance(tool, dict) and "planc" in tool:
                return str(candidate)
        if directory.parent == directory:
            return None
        directory = directory.parent


@pytest.mark.parametrize("text", CHILD_TEXTS)
def test_the_nearest_project_is_the_one_parsing_every_pyproject_finds(tmp_path, text):
    (tmp_path / "pyproject.toml").write_text(PARENT)
    child = tmp_path / "child"
    child.mkdir()
    (child / "pyproject.toml").write_text(text)
    assert _nearest(str(child)) == slow_nearest(child)
    entry = project_for(str(child / "a.kd"))
    expected = (8,) if slow_nearest(child) == str(child / "pyproject.toml") else (64,)
    assert entry.devices == expected and entry.problems == ()


@pytest.mark.parametrize("text", CHILD_TEXTS)
def test_a_text_that_cannot_name_planc_has_no_tool_planc_key(text):
    if not may_name_planc(text):
        tool = tomllib.loads(text).get("tool")
        assert not (isinstance(tool, dict) and "planc" in tool)


def test_invalid_toml_that_may_name_planc_is_reported_and_one_that_cannot_is_passed_over(
        tmp_path):
    (tmp_path / "pyproject.toml").write_text(PARENT)
    for name, text in (("names", "[tool.planc]\ndevices = [8,\n"), ("not", "[x\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "pyproject.toml").write_text(text)
    assert [p.code for p in project_for(str(tmp_path / "names" / "a.kd")).problems] == ["P321"]
    assert project_for(str(tmp_path / "not" / "a.kd")).devices == (64,)


def test_a_lint_with_a_pyproject_that_cannot_name_planc_imports_no_tomllib(tmp_path):
    import subprocess
    import sys

    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "a.kd").write_text("mesh(batch = 8)\ndata_parallel(batch = batch)\n")
    code = ("import sys; from planc.sources.project import project_for; "
            f"project_for({str(tmp_path / 'a.kd')!r}); print('tomllib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=tmp_path).stdout
    assert out.strip() == "False"
