"""`main` parses a command line that starts with a command with that command's parser
alone, documented only when help is shown; every command line must then give what the
whole parser gives: the same arguments, help, usage errors and exit codes."""

import contextlib
import io

import pytest

from planc.cli.dispatch import ALIASES, COMMANDS, build_parser

LINES = [
    ["lint", "a.kd", "--model", "m.json", "-D", "tp=2", "--devices", "8,64", "--format", "json"],
    ["lint"], ["lint", "--help"], ["lint", "-qh"], ["lint", "--he"], ["lint", "-V"],
    ["lint", "--format", "xml", "a.kd"], ["lint", "--bogus", "a.kd"], ["lint", "a.kd", "--model"],
    ["lint", "a.kd", "-D"], ["explain", "a.kd"], ["explain", "a.kd", "--model", "m", "--var", "x"],
    ["launch", "-n", "two"], ["launch", "-n", "2", "--", "python", "-c", "pass"],
    ["fmt", "a.kd", "--check", "--zz"], ["import", "x", "--bogus"], ["rule", "P301"], ["code", "P301"],
    ["compile", "a.kd", "--target", "tpu"], ["lsp", "extra"], ["cluster"], ["diff", "a"],
] + [[c, "--help"] for c in COMMANDS] + [[c] for c in COMMANDS]


def _outcome(parser, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            result = vars(parser.parse_args(argv))
        except SystemExit as exc:
            result = exc.code
    return result, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("argv", LINES, ids=" ".join)
def test_one_command_parser_reads_a_command_line_as_the_whole_parser(argv, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")  # argparse wraps help at the terminal's width
    assert _outcome(build_parser(argv[0], documented=False), argv) == \
        _outcome(build_parser(), argv)


def test_an_undocumented_parser_is_documented_when_help_is_first_shown():
    parser = build_parser("lint", documented=False)
    lint = next(iter(parser._subparsers._group_actions[0].choices.values()))
    assert any(not a.help for a in lint._actions)  # `plans` and `-D` get theirs from help_texts
    assert "exit codes: 0" in lint.format_help()
    assert all(a.help for a in lint._actions)


def test_commands_lists_every_command_in_order():
    choices = build_parser()._subparsers._group_actions[0].choices
    assert tuple(c for c in choices if c not in ALIASES) == COMMANDS


def test_an_alias_runs_the_command_it_names():
    assert set(ALIASES) <= set(build_parser()._subparsers._group_actions[0].choices)
    assert build_parser("rule").parse_args(["rule", "P301"]).code == "P301"
