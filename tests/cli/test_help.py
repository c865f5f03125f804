"""Every command explains itself: each option, its exit codes, an example; the version,
and a did-you-mean for a mistyped command."""

import argparse
import subprocess
import sys

import pytest

from planc import __version__
from planc.cli.dispatch import ALIASES, build_parser, main


def _commands():
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {name: command for name, command in sub.choices.items() if name not in ALIASES}


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_option_of_every_command_has_help(name):
    command = _commands()[name]
    undocumented = [a.dest for a in command._actions if not a.help]
    assert undocumented == []


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_help_gives_exit_codes_and_an_example(name):
    text = _commands()[name].format_help()
    assert "exit codes: 0" in text
    example = text.split("example:\n", 1)[1]
    assert example.startswith(f"  planc {name}")


def test_the_top_level_help_gives_exit_codes_and_examples():
    text = build_parser().format_help()
    assert "exit codes: 0 clean" in text and "  planc code P301" in text


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flag_prints_the_version(flag, capsys):
    with pytest.raises(SystemExit) as exc:
        main([flag])
    assert exc.value.code == 0
    assert capsys.readouterr().out == f"planc {__version__}\n"


def test_a_mistyped_command_gets_a_did_you_mean():
    out = subprocess.run([sys.executable, "-m", "planc", "lnit", "x.kd"], capture_output=True,
                         text=True)
    assert out.returncode == 2
    assert out.stderr.splitlines()[-1].endswith("did you mean `planc lint`?")


def test_a_command_nothing_resembles_gets_no_guess(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["zzzzzz"])
    assert exc.value.code == 2
    assert "did you mean" not in capsys.readouterr().err


def test_help_lines_fit_80_columns_outside_the_usage():
    for name, command in _commands().items():
        epilog = command.epilog or ""
        assert all(len(line) <= 80 for line in epilog.splitlines()), name


def _example(name: str) -> str:
    from planc.cli.help_texts import EPILOGS

    return EPILOGS[name].split("example:\n", 1)[1].replace("\\\n", " ").strip()


@pytest.mark.parametrize("name", sorted(_commands()))
def test_every_command_help_example_runs_as_written(name, tmp_path):
    import os
    import shutil

    from conftest import ROOT

    for folder in ("plans", "examples"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}{os.pathsep}"
           f"{os.environ.get('PATH', '')}"}
    out = subprocess.run(_example(name), shell=True, cwd=tmp_path, env=env, text=True,
                         capture_output=True, stdin=subprocess.DEVNULL, timeout=300)
    expected = 1 if name == "diff" else 0  # diff: 1 when the tables differ, as here
    assert out.returncode == expected, out.stdout[-1500:] + out.stderr[-1500:]
