"""What a search's text shows a reviewer can be checked against what it shows: the budget
in one unit everywhere, and no line numbers of plans the text does not show (issue 62,
item 4). The marks on rows scored only analytically are in test_search_compiled.py,
beside the compiles they stand next to."""

import re

import pytest

from planc.suggest.search import search
from suggest.search.test_search_analytic import decoder


@pytest.fixture(scope="module")
def found():
    return search(decoder(), 16, tokens=16 * 4096)


def test_the_budget_reads_in_one_unit_in_the_plan_its_header_and_its_tables(found):
    (written,) = re.findall(r"budget\(per_device = ([^,)]+)", found.text)
    said = re.findall(r"fits (\S+ \S+) per device|limit (\S+ \S+) per device", found.text)
    assert written == "15803 MiB"
    assert len(said) == 2 and {a or b for a, b in said} == {written}


def test_why_not_rows_cite_no_line_of_a_plan_the_text_does_not_show(found):
    rows = [line for line in found.text.splitlines() if line.startswith("#   ") and ": " in line]
    assert any("[" in line for line in rows)  # rows that name their rule
    assert not any(re.search(r"\(line \d+\)", line) for line in rows)


def test_the_json_row_cites_the_line_of_its_rule_in_its_own_plan(found):
    cited = [r for r in found.to_dict()["why_not"] if r["rule"]]
    assert cited
    for row in cited:
        rule, line = re.fullmatch(r"(.*) \(line (\d+)\)", row["rule"]).groups()
        pattern = rule.split(" -> ")[0]
        assert row["plan"].splitlines()[int(line) - 1].strip().startswith(pattern)
