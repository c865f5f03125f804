"""The version has one home, planc/_version.py: the wheel's metadata reads it from there and
the VS Code extension, released with planc, carries the same one."""

import json
import tomllib

from conftest import ROOT

from planc import __version__


def test_pyproject_reads_the_version_from_planc_version_and_writes_none_of_its_own():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {
        "attr": "planc._version.__version__"}


def test_the_vscode_extension_carries_plancs_version():
    manifest = json.loads((ROOT / "editors" / "vscode" / "package.json").read_text())
    assert manifest["version"] == __version__
