"""One escaping policy for every human output: text from plans, file names and tensor
names reaches a terminal as data (no markup, no escape sequences), whatever it holds."""

import json

import pytest

from planc.cli import main

PLAN = 'mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\nlayout { ".*" -> (_, model) }\n'
MARKUP_PATHS = ["emb[/]", "x[red]RED", "[link=https://example.com]a[/link]", "b[bold]"]
ESC = "\x1b[2J\x07\u202e"


def files(tmp_path, paths, plan=PLAN):
    m = tmp_path / "model.json"
    m.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"dtype": "float32", "path": p, "shape": [8, 8]} for p in paths]}))
    p = tmp_path / "plan.kd"
    p.write_text(plan)
    return str(p), str(m)


def test_explain_prints_paths_that_look_like_markup_as_they_are(tmp_path, capsys):
    p, m = files(tmp_path, MARKUP_PATHS)
    assert main(["explain", p, "--model", m, "--devices", "8", "--color", "never"]) == 0
    out = capsys.readouterr().out
    for path in MARKUP_PATHS:
        assert path in out
    assert "\x1b]8;" not in out  # no hyperlink was made


def test_explain_escapes_control_characters_in_paths(tmp_path, capsys):
    p, m = files(tmp_path, [f"a{ESC}/kernel"])
    assert main(["explain", p, "--model", m, "--devices", "8", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b[2J" in out


def test_explain_var_escapes_control_characters(tmp_path, capsys):
    p, m = files(tmp_path, [f"a{ESC}/kernel"])
    assert main(["explain", p, "--model", m, "--devices", "8", "--color", "never",
                 "--var", f"a{ESC}/kernel"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out


def test_fmt_diff_escapes_control_characters_from_the_plan(tmp_path, capsys):
    p, _ = files(tmp_path, ["a"], plan=f"mesh(batch=auto)  # {ESC}\ndata_parallel\n")
    assert main(["fmt", "--diff", p]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[2J" in out


def test_a_model_source_error_escapes_the_tensor_name(tmp_path, capsys):
    p, m = files(tmp_path, [f"a{ESC}", f"a{ESC}"])  # the same path twice
    assert main(["lint", p, "--model", m]) == 2
    err = capsys.readouterr().err
    assert "two variables have the path" in err
    assert "\x1b" not in err and "\\x1b[2J" in err


@pytest.mark.parametrize("command", ["fmt", "lint"])
def test_a_file_name_with_control_characters_is_escaped(tmp_path, capsys, command):
    p = tmp_path / f"pl{ESC}an.kd"
    p.write_text("mesh(batch=auto)\nmodel_parallel(batch=nope)\n")
    main([command, "--color", "never", str(p)])
    captured = capsys.readouterr()
    assert "pl\\x1b[2J" in captured.out + captured.err
    assert "\x1b" not in captured.out + captured.err
