"""The quick fixes `planc lsp` offers (`planc.lsp.navigation.fixes`): each is what the
diagnostic's help or label suggests, and applying it makes that diagnostic go away."""

from __future__ import annotations

import pytest

from planc.lsp.analysis import analyse
from planc.lsp.navigation import fixes

HEAD = "mesh(batch = 2, model = 2)\nmodel_parallel(batch = batch)\n"
CASES = [
    ("P101", HEAD + 'layout {\n  "x" -> (modle,)\n}\n', "replace `modle` with `model`"),
    ("P006", "mseh(batch = 2)\ndata_parallel\n", "replace `mseh` with `mesh`"),
    ("P007", HEAD + 'layout {\n  "x": (_,)\n}\n', "replace `:` with `->`"),
    ("P008", HEAD + 'layout {\n  "x" -> (None,)\n}\n', "replace `None` with `_`"),
    ("P003", HEAD + "layout {\n  'x' -> (model,)\n}\n", 'write "x"'),
    ("P005", HEAD + 'layout {\n  "x" -> (model, , _)\n}\n', "write `_` for the missing dimension"),
]


def apply(text: str, span, new: str) -> str:
    lines = text.split("\n")
    line = lines[span.line - 1]
    lines[span.line - 1] = line[:span.column - 1] + new + line[span.end_column - 1:]
    return "\n".join(lines)


@pytest.mark.parametrize("code, text, title", CASES, ids=[c[0] for c in CASES])
def test_the_fix_a_diagnostic_suggests_removes_it(code, text, title):
    [d] = [d for d in analyse(text, "p.kd").diagnostics if d.code == code]
    [(got_title, new)] = fixes(d, text)
    assert got_title == title
    fixed = apply(text, d.span, new)
    assert code not in [x.code for x in analyse(fixed, "p.kd").diagnostics], fixed


def test_a_diagnostic_that_suggests_no_edit_has_no_fix():
    text = HEAD + 'layout {\n  "x" -> (model,)\n  "x" -> (model,)\n}\n'
    diags = analyse(text, "p.kd").diagnostics
    assert diags and all(fixes(d, text) == [] for d in diags)
