"""On a terminal a long command shows what it is doing on stderr, and a command that
writes a file ends by naming it (`planc: wrote FILE`); piped, stderr stays quiet for
both (issue 62, item 2)."""

import pytest

from conftest import ROOT
from helpers import stderr_on_a_terminal
from planc.cli.dispatch import main as planc_main

SEARCH = ("suggest", "--search", "--model", str(ROOT / "examples/mlp.json"), "--devices", "8",
          "--tokens", "16384")
COMPILE = ("compile", str(ROOT / "examples/mlp_tp.kd"), "--target", "json")


def _last_line(shown: str) -> str:
    # rich leaves the erased progress line's escapes before the last line
    return shown.rstrip("\n").split("\n")[-1].split("\x1b[2K")[-1]


def test_a_command_that_writes_a_file_ends_by_naming_it(tmp_path):
    out = tmp_path / "mlp.json"
    code, shown = stderr_on_a_terminal(*COMPILE, "-o", str(out), cwd=ROOT)
    assert code == 0 and out.exists()
    assert _last_line(shown) == f"planc: wrote {out}"


def test_a_search_shows_the_candidates_it_scores_then_names_its_plan(tmp_path):
    out = tmp_path / "searched.kd"
    code, shown = stderr_on_a_terminal(*SEARCH, "-o", str(out), cwd=ROOT)
    assert code == 0
    assert "scoring" in shown and " candidates" in shown
    assert _last_line(shown) == f"planc: wrote {out}"


def test_aot_shows_its_compile():
    code, shown = stderr_on_a_terminal("aot", "examples/aot.kd", "--step",
                                       "examples.aot_step:build", "--topology", "cpu:8",
                                       cwd=ROOT)
    assert code == 0
    assert "compiling examples.aot_step:build for cpu:8" in shown


@pytest.mark.parametrize("argv", [COMPILE, SEARCH])
def test_piped_stderr_shows_neither_progress_nor_what_was_written(tmp_path, capfd, argv):
    out = tmp_path / "out"
    assert planc_main([*argv, "-o", str(out)]) == 0
    assert out.exists() and capfd.readouterr().err == ""
