"""`planc.lazy`: the one place planc imports, or reads, a module named by a string."""

import sys

import pytest

from planc.lazy import module_found, module_source


def test_module_source_reads_a_module_without_running_it(tmp_path, monkeypatch):
    (tmp_path / "copied_not_run.py").write_text("raise SystemExit('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_source("copied_not_run") == "raise SystemExit('ran')\n"
    assert "copied_not_run" not in sys.modules


def test_module_source_of_a_missing_module_names_it():
    with pytest.raises(ModuleNotFoundError, match="no_such_planc_module"):
        module_source("no_such_planc_module")


def test_module_found_looks_a_module_up_without_importing_it(tmp_path, monkeypatch):
    (tmp_path / "found_not_run.py").write_text("raise SystemExit('ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_found("found_not_run") and "found_not_run" not in sys.modules
    assert not module_found("no_such_planc_module")
