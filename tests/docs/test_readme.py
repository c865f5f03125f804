"""The README stays true: it documents every diagnostic code and opens with the two commands."""

import re

from conftest import ROOT
from planc.diagnostics import CODES

README = (ROOT / "README.md").read_text()


def test_every_diagnostic_code_is_documented():
    documented = set(re.findall(r"^\| (P\d{3}) \|", README, re.M))
    assert documented == set(CODES)


def test_readme_opens_with_make_demo_and_make_test():
    head = "\n".join(README.splitlines()[:15])
    assert "make demo" in head and "make test" in head


def test_every_statement_keyword_is_in_the_language_reference():
    from planc.syntax.keywords import STATEMENT_KEYWORDS

    reference = README.split("## Language reference", 1)[1]
    for keyword in STATEMENT_KEYWORDS:
        assert f"`{keyword}" in reference, keyword
