"""P135: a string or comment of a plan that holds a character a reviewer cannot see (a
bidi override, a zero-width or no-break space, a blank-drawn character) is a warning at
that character; the same character written as an escape is not."""

import json

import pytest

import planc
from planc.cli import main

MODEL = {"planc_manifest": 1, "variables": [
    {"path": "a\u202eb/kernel", "shape": [8, 8], "dtype": "float32"}]}


def plan(rule: str, comment: str = "") -> str:
    return (f"mesh(batch = auto, model = 2){comment}\nmodel_parallel(batch = batch)\n"
            f"layout {{\n    {rule} -> (_, model)\n}}\n")


def codes(text: str):
    return [(d.code, d.span.line, d.span.column) for d in planc.loads(text).diagnostics
            if d.code == "P135"]


@pytest.mark.parametrize("ch", ["\u202e", "\u200b", "\u00a0", "\u3164", "\ufeff",
                                "\u2066", "\x1b"])
def test_a_hidden_character_in_a_pattern_is_a_warning_at_it(ch):
    assert codes(plan(f'"a{ch}b/kernel"')) == [("P135", 4, 7)]


def test_one_warning_per_string_counts_the_rest():
    [d] = [d for d in planc.loads(plan('"\u202ea\u200bb\u200c"')).diagnostics
           if d.code == "P135"]
    assert d.message == ("string holds U+202E RIGHT-TO-LEFT OVERRIDE (and 2 more), which "
                         "is not plainly visible: the line does not read as what it is")
    assert d.help == ("remove it; in a pattern, `\\u202e` matches it and shows what it is",)


def test_a_comment_is_checked_too():
    assert codes(plan('"w"', comment="  # \u202e reversed")) == [("P135", 1, 34)]


def test_tabs_line_breaks_and_visible_text_are_not_warned():
    text = plan('"caf\u00e9/\u043a\u0435\u0440\u043d\u0435\u043b\u044c|x\\ty"', comment="\t# ok")
    assert codes(text) == []


def test_the_escape_matches_without_a_warning(tmp_path, capsys):
    model = tmp_path / "m.json"
    model.write_text(json.dumps(MODEL))
    escaped, raw = tmp_path / "escaped.kd", tmp_path / "raw.kd"
    escaped.write_text(plan('"a\\u202eb/kernel"'), encoding="utf-8")
    raw.write_text(plan('"a\u202eb/kernel"'), encoding="utf-8")
    assert main(["lint", "--strict", "--model", str(model), "--devices", "8", "--",
                 str(escaped)]) == 0
    assert "P135" not in capsys.readouterr().out
    assert main(["lint", "--model", str(model), "--devices", "8", "--", str(raw)]) == 0
    out = capsys.readouterr().out
    assert "warning[P135]" in out and "\u202e" not in out  # the excerpt shows no override
    assert main(["lint", "--strict", "--model", str(model), "--devices", "8", "--",
                 str(raw)]) == 1


def test_an_included_file_is_checked_too(tmp_path):
    (tmp_path / "part.kd").write_text('# part\u200b\n', encoding="utf-8")
    main_plan = tmp_path / "p.kd"
    main_plan.write_text('include "part.kd"\n' + plan('"w"'), encoding="utf-8")
    ir = planc.load_plan(main_plan)
    [d] = [d for d in ir.diagnostics if d.code == "P135"]
    assert d.span.file.endswith("part.kd") and d.message.startswith("comment holds U+200B")
