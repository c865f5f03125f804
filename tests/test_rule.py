"""One registry documents every diagnostic code; `planc rule` prints it and the code table
of docs/diagnostics.md is generated from it."""

import re
import subprocess
import sys

import pytest

from conftest import ROOT
from planc.diagnostics import CODES
from planc.diagnostics.docs import DOCS, code_table, describe, replace_table

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
    stale = PAGE.replace("| P111 | error | duplicate rule |", "| P111 | error | old text |")
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
    # A dict literal keeps the last of two equal keys silently: two helpers adding the
    # same code would lose one entry without this.
    import planc.diagnostics.docs as docs

    text = open(docs.__file__).read()
    keys = re.findall(r'^    ["\'](P\d{3})["\']: Doc\(', text, re.M)
    assert len(keys) == len(set(keys))
