"""The overlap check's pre-test (`overlaps._ends_apart`): two patterns whose ends cannot
agree are disjoint without building automata. It must never call a pair disjoint that
some path matches, so P336 reports exactly what it reported without it."""

import itertools
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import PLANS, ROOT
from helpers import MP, problems
from planc.check import overlaps

ATOMS = ["a", "b", "/", "_", ".", "[ab]", "[^a]", "[a-c_]", r"\d", r"\w", r"\/", "(?i:a)",
         "^", "$", r"\b", "x", "1"]
QUANTIFIERS = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{0,2}", "*?", "{3,}", "+?"]


@st.composite
def patterns(draw, depth=0):
    parts = []
    for _ in range(draw(st.integers(1, 5))):
        if depth < 2 and draw(st.integers(0, 6)) == 0:
            branches = draw(st.lists(patterns(depth + 1), min_size=1, max_size=3))
            atom = "(" + "|".join(branches) + ")"
        else:
            atom = draw(st.sampled_from(ATOMS))
        if atom not in ("^", "$", r"\b"):
            atom += draw(st.sampled_from(QUANTIFIERS))
        parts.append(atom)
    return "".join(parts)


# Every string of up to 6 characters over an alphabet that tells the atoms apart.
STRINGS = [""] + ["".join(t) for n in range(1, 7) for t in itertools.product("ab/_1A", repeat=n)]


@settings(max_examples=300, deadline=None)
@given(patterns(), patterns())
def test_a_pair_called_disjoint_has_no_path_in_common(a, b):
    try:
        ra, rb = re.compile(a, re.ASCII), re.compile(b, re.ASCII)
    except re.error:
        return
    if overlaps._ends_apart(a, b):
        both = [s for s in STRINGS if ra.fullmatch(s) and rb.fullmatch(s)]
        assert both == [], (a, b)


@settings(max_examples=200, deadline=None)
@given(patterns(), patterns())
def test_a_pair_called_disjoint_is_disjoint_for_interegular_too(a, b):
    import interegular

    if not overlaps._ends_apart(a, b):
        return
    try:
        pa, pb = interegular.parse_pattern(a), interegular.parse_pattern(b)
        flags = interegular.REFlags(0)
        alphabet = interegular.fsm.Alphabet.union(pa.get_alphabet(flags),
                                                  pb.get_alphabet(flags))[0]
        fa, fb = pa.to_fsm(alphabet), pb.to_fsm(alphabet)
    except Exception:  # a construct interegular does not read: nothing to compare
        return
    assert fa.isdisjoint(fb), (a, b)


def _plan_patterns() -> list[list[str]]:
    out = []
    for path in sorted(PLANS.glob("*.kd")):
        found = re.findall(r'^\s*"((?:[^"\\]|\\.)*)"\s*->', path.read_text(), re.M)
        if len(found) >= 2:
            out.append(found)
    return out


PAIRS = [
    (r"dense_\d+/kernel", ".*kernel"), ("encoder/.*", ".*/bias"), ("dense.kernel", ".*kernel"),
    ("(?i)DENSE/bias", "dense/.*"), (r"block_\d+/attention/(query|key)/kernel",
                                      r"block_1\d/attention/.*/kernel"),
    ("enc/layer_[0-4]/.*", r"enc/layer_[5-9]/(q|k)"), ("a{2,}", "a"), ("(ab)*", "a"),
    ("x(y|yz)?", "xyz"), ("x.?", "x"), (r"\bkernel\b.*", ".*"), ("layer_(1|12)/w", "layer_1/w"),
]


def _findings(plan_patterns, pretest: bool, monkeypatch) -> list:
    overlaps._KNOWN_DISJOINT.clear()
    overlaps._pair_witness.cache_clear()
    with monkeypatch.context() as m:
        if not pretest:
            m.setattr(overlaps, "_ends_apart", lambda a, b: False)
        rules = "".join(f'    "{p}" -> replicated\n' for p in plan_patterns)
        found = [d for d in problems(MP + "layout {\n" + rules + "}\n") if d.code == "P336"]
    overlaps._KNOWN_DISJOINT.clear()
    overlaps._pair_witness.cache_clear()
    return found


@pytest.mark.parametrize("plan_patterns", _plan_patterns() + [list(p) for p in PAIRS]
                         + [[p for pair in PAIRS for p in pair]])
def test_p336_reports_the_same_with_and_without_the_pretest(plan_patterns, monkeypatch):
    assert _findings(plan_patterns, True, monkeypatch) == \
        _findings(plan_patterns, False, monkeypatch)


def test_pairs_that_meet_are_never_called_disjoint():
    for a, b in [(r"dense_\d+/kernel", ".*kernel"), ("encoder/.*", ".*/bias"),
                 ("(?i)DENSE/bias", "dense/.*"), ("a{2,}", "aaa"), ("x(y|yz)?", "xyz"),
                 ("layer_(1|12)/w", "layer_1/w"), ("(ab)*", "abab")]:
        assert not overlaps._ends_apart(a, b), (a, b)


def test_ends_that_differ_prove_a_pair_disjoint():
    assert overlaps._ends_apart("decoder_block.*attention.*(query|key|value).kernel",
                                "decoder_block.*attention_output.kernel")
    assert overlaps._ends_apart("decoder_block.*ffw_gating(_2)?.kernel",
                                "decoder_block.*ffw_linear.kernel")
    assert overlaps._ends_apart("enc/layer_[0-4]/.*", "enc/layer_[5-9]/(q|k)")
    assert overlaps._ends_apart("x.?", "xyz")  # lengths that cannot agree


def test_a_case_insensitive_pattern_is_not_followed():
    assert overlaps._end_profiles("(?i)dense/bias", True) is None
    assert overlaps._end_profiles("a(?i:b)", False) is None


def test_linting_gemma_settles_every_pair_without_interegular():
    code = ("import sys\nfrom planc.cli import main\n"
            f"code = main(['lint', {str(PLANS / 'gemma.kd')!r}, '-q'])\n"
            "print(code, 'interegular' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.stdout.split() == ["0", "False"], proc.stderr


def test_the_pairs_left_to_compare_are_those_literal_ends_do_not_keep_apart():
    import random

    from planc.check.overlaps import _apart, _candidate_pairs

    rng = random.Random(3)
    for _ in range(300):
        ends = [("".join(rng.choice("ab") for _ in range(rng.randrange(0, 4))),
                 "".join(rng.choice("ab") for _ in range(rng.randrange(0, 4))))
                for _ in range(rng.randrange(0, 30))]
        every = [(i, j) for i in range(len(ends)) for j in range(i + 1, len(ends))
                 if not _apart(ends[i], ends[j])]
        assert _candidate_pairs(ends) == every


def test_a_bar_counts_only_outside_every_group_and_class():
    import random

    from planc.matching.scan import has_top_level_bar

    def by_hand(pattern):  # one character at a time
        depth, i, in_class = 0, 0, False
        while i < len(pattern):
            c = pattern[i]
            if c == "\\":
                i += 2
                continue
            if in_class:
                in_class = c != "]"
            elif c == "[":
                in_class = True
                if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                    i += 2 if pattern[i + 1] == "]" else 3
                    continue
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            elif c == "|" and depth == 0:
                return True
            i += 1
        return False

    rng = random.Random(4)
    for _ in range(20_000):
        text = "".join(rng.choice("ab|()[]^\\") for _ in range(rng.randrange(0, 12)))
        assert has_top_level_bar(text) == by_hand(text), text
