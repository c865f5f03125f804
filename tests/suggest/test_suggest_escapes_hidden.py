"""`planc suggest` writes a plan a person reviews: a model path's characters that are not
plainly visible (a tab, U+202E, a zero-width or no-break space, a blank-drawn one) are
pattern escapes in it, never the characters themselves, and the plan still matches."""

import json

from planc.cli import main
from planc.diagnostics.text import has_hidden

PATHS = ["evil\u202etxt.exe/kernel", "tab\there/kernel", "zw\u200bsp/kernel",
         "nb\u00a0sp/kernel", "filler\u3164x/kernel"]


def test_suggested_patterns_escape_every_hidden_character(tmp_path, capsys):
    model = tmp_path / "m.json"
    model.write_text(json.dumps({"planc_manifest": 1, "variables": [
        {"path": p, "shape": [1024, 1024], "dtype": "float32"} for p in PATHS]}))
    plan = tmp_path / "s.kd"
    assert main(["suggest", "--model", str(model), "--devices", "8", "-o", str(plan)]) == 0
    text = plan.read_text(encoding="utf-8")
    assert not has_hidden(text, allowed="\n")
    for escape in (r"\u202e", r"\x09", r"\u200b", r"\xa0", r"\u3164"):
        assert escape in text
    capsys.readouterr()
    # the escapes match the paths: the plan lints clean, without a P135
    assert main(["lint", "--strict", "--model", str(model), "--devices", "8", "--",
                 str(plan)]) == 0
    assert "P135" not in capsys.readouterr().out
