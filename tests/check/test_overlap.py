"""Rules whose patterns can match one path are found without a model (P336), with a
witness path both match, by intersecting the patterns' automata (interegular)."""

import re

import pytest

from helpers import MP, problems
from planc.matching import Matcher


def _plan(*patterns, head=""):
    rules = "".join(f'    "{p}" -> replicated\n' for p in patterns)
    return head + MP + "layout {\n" + rules + "}\n"


def _overlaps(*patterns, head=""):
    return [d for d in problems(_plan(*patterns, head=head)) if d.code == "P336"]


def _witness(d):
    return re.search(r"e\.g\. `([^`]*)`", d.message).group(1)


def test_a_catch_all_beside_a_specific_rule_is_a_warning_with_a_witness_path():
    [d] = _overlaps(r"dense_\d+/kernel", ".*kernel")
    assert d.severity.value == "warning"
    assert d.message == ('rules "dense_\\d+/kernel" and ".*kernel" can both match a path, '
                         "e.g. `dense_0/kernel`")
    assert (d.span.line, d.secondary[0].span.line) == (5, 4)


def test_the_witness_is_matched_by_both_patterns_in_planc_own_matcher():
    [d] = _overlaps("encoder/.*", ".*/bias")
    assert Matcher(["encoder/.*", ".*/bias"]).match(_witness(d)) == (0, 1)


def test_disjoint_patterns_are_not_reported():
    assert _overlaps("encoder/.*/kernel", "decoder/.*/kernel", r"head/(kernel|bias)") == []


def test_overlap_first_suppresses_it_because_file_order_decides():
    assert _overlaps("dense/.*", ".*kernel", head="overlap first\n") == []


def test_match_search_is_not_checked():
    # Under `match search` `a` and `b` both match `ab`: nearly every pair would warn.
    assert _overlaps("encoder", "kernel", head="match search\n") == []


def test_an_exact_path_rule_is_no_witness_of_its_own_overlap():
    # "dense/kernel" is taken by the literal rule wherever it stands (P308).
    assert _overlaps("dense/kernel", ".*kernel") == []


def test_a_literal_looking_pattern_with_a_dot_overlaps_on_other_paths():
    [d] = _overlaps("dense.kernel", ".*kernel")
    assert _witness(d) != "dense.kernel"


def test_case_insensitive_flags_are_understood():
    [d] = _overlaps("(?i)DENSE/bias", "dense/.*")
    assert Matcher(["(?i)DENSE/bias", "dense/.*"]).match(_witness(d)) == (0, 1)


def test_outputs_rules_are_checked_apart_from_layout_rules():
    text = MP + 'layout {\n    ".*kernel" -> replicated\n}\n' \
        'outputs {\n    "dense.*" -> (batch, _)\n    ".*output" -> (batch, _)\n}\n'
    found = [d for d in problems(text) if d.code == "P336"]
    assert [d.span.line for d in found] == [8]


@pytest.mark.parametrize("pattern", [r"\bkernel\b.*", r"\Akernel", r"^dense/kernel$"])
def test_a_pattern_the_library_cannot_read_is_left_out_of_the_check(pattern):
    # interegular reads no anchors or word boundaries: the pair is skipped, not guessed.
    found = problems(_plan(pattern, ".*"))
    assert [d.code for d in found] == []


@pytest.mark.parametrize("pattern", ["(a|b)*a(a|b){40}", "(a|b)*a" + "(a|b)" * 40])
def test_a_pattern_whose_automaton_could_be_huge_is_left_out(pattern):
    # Its DFA could need 2**40 states: building it would never finish.
    assert _overlaps(pattern, ".*") == []


def test_a_pattern_with_its_own_error_is_left_out():
    found = problems(_plan("dense/[kernel", ".*kernel", r"(\w+)/\1"))
    assert sorted(d.code for d in found) == ["P106", "P107"]


def test_every_overlapping_pair_is_one_warning():
    found = _overlaps("a.*", ".*z", "b.*")
    assert sorted((d.secondary[0].span.line, d.span.line) for d in found) == [(4, 5), (5, 6)]


def test_the_zoo_plans_have_no_overlap():
    from conftest import PLANS
    import planc

    for path in sorted(PLANS.glob("*.kd")):
        plan = planc.load_plan(path)
        assert [d for d in plan.diagnostics if d.code == "P336"] == [], path
