"""One registry documents every diagnostic code; `planc code` prints it and the code table
of docs/diagnostics.md is generated from it."""

import re
import subprocess
import sys

import pytest

from conftest import ROOT
from planc.diagnostics import CODES
from planc.diagnostics.codes import FAMILIES
from planc.diagnostics.docs import DOCS, describe, code_table, replace_table

PAGE = (ROOT / "docs" / "diagnostics.md").read_text()


def test_every_code_has_a_registry_entry_and_no_entry_lacks_a_code():
    assert sorted(DOCS) == sorted(CODES)


@pytest.mark.parametrize("code", sorted(DOCS))
def test_every_entry_says_what_why_example_and_fix(code):
    d = DOCS[code]
    assert d.severity and d.what and d.why and d.example and d.fix
    assert set(re.split(r" / ", d.severity)) <= {"error", "warning", "note"}


def test_the_docs_code_table_is_the_generated_one():
    assert code_table() in PAGE, (
        "regenerate it: .venv/bin/python -m planc.diagnostics.docs --write-docs")
    assert replace_table(PAGE) == PAGE


def test_replacing_the_table_changes_only_the_table():
    stale = PAGE.replace("P111 | error | duplicate rule |", "P111 | error | old text |")
    assert stale != PAGE
    assert replace_table(stale) == PAGE


def test_planc_rule_prints_the_entry():
    out = subprocess.run([sys.executable, "-m", "planc", "rule", "p306"], capture_output=True,
                         text=True)
    assert out.returncode == 0
    assert out.stdout == describe("P306")
    assert out.stdout.startswith("P306 (warning): rule matches no variable of the model\n")
    for heading in ("Why it matters", "Example", "Fix"):
        assert f"\n{heading}\n  " in out.stdout


def test_planc_rule_without_a_code_lists_every_code(capsys):
    from planc.cli.dispatch import main

    assert main(["rule"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(CODES)


def test_an_unknown_code_is_a_usage_error_with_a_did_you_mean(capsys):
    from planc.cli.dispatch import main

    assert main(["rule", "P3011"]) == 2
    assert capsys.readouterr().err == "planc: no diagnostic code `P3011`; did you mean P301?\n"


def test_an_unknown_code_with_control_characters_is_escaped(capsys):
    from planc.cli.dispatch import main

    assert main(["rule", "\x1b[31mP3"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\\x1b" in err


def test_no_code_appears_twice_in_the_registry_source():
    # A dict literal keeps the last of two equal keys silently, and two families merged
    # would too: two helpers adding the same code would lose one entry without this.
    keys = []
    for family in FAMILIES:
        text = open(family.__file__).read()
        keys += re.findall(r'^    ["\'](P\d{3})["\']: dict\(', text, re.M)
    assert len(keys) == len(set(keys)) == len(DOCS)


@pytest.mark.parametrize("family", FAMILIES, ids=lambda f: f.__name__.rsplit(".", 1)[1])
def test_each_family_holds_the_codes_of_its_hundreds_in_code_order(family):
    (hundreds,) = {code[:2] for code in family.ENTRIES}
    assert family.__doc__.startswith(f"{hundreds}xx: ")
    assert list(family.ENTRIES) == sorted(family.ENTRIES)


def _codes_in_source():
    """(path, line, code) of every string literal in planc/, outside the catalogue, that
    is a code, such as the first argument of each `error("P101", ...)`."""
    import ast

    catalogue = ROOT / "planc" / "diagnostics" / "codes"
    for path in sorted((ROOT / "planc").rglob("*.py")):
        if path.parent == catalogue:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and re.fullmatch(r"P\d{3}", node.value)):
                yield path.relative_to(ROOT), node.lineno, node.value


def test_every_code_planc_uses_is_registered_and_documented():
    used = list(_codes_in_source())
    assert len({code for _, _, code in used}) > 100  # the scan finds the codes it should
    unknown = [(str(p), line, code) for p, line, code in used if code not in CODES]
    assert unknown == []
    for code in {code for _, _, code in used}:
        assert describe(code).startswith(f"{code} (")
