"""Between twins that take the same time (within `REMAT_TIE`), the search takes the one
without remat, and its header says how close the remat twin came. The twins are a real
one-device search's (narrow layers over many tokens, where remat scores faster); their
times are set apart by hand, as two compiles of one step would give them."""

from dataclasses import replace

import pytest

from planc.suggest.search import search
from planc.suggest.search.searcher import REMAT_TIE, chosen, remat_tie

from .test_search_analytic import decoder

TOKENS = 8 * 2048


@pytest.fixture(scope="module")
def twins():
    found = search(decoder(width=128), 1, tokens=TOKENS)
    by_remat = {o.candidate.remat: o for o in found.searched.outcomes}
    return found.searched, by_remat[True], by_remat[False]


def timed(outcome, seconds):
    return replace(outcome, score=replace(outcome.score, estimate_s=seconds))


def test_a_remat_twin_faster_by_less_than_the_tie_loses_to_the_twin_without_remat(twins):
    _, remat, plain = twins
    fast = timed(remat, 1.0)
    assert chosen([fast, timed(plain, 1.0 + REMAT_TIE / 2)]).candidate.remat is False


def test_a_remat_twin_faster_by_more_than_the_tie_wins(twins):
    _, remat, plain = twins
    fast = timed(remat, 1.0)
    assert chosen([fast, timed(plain, 1.0 + 2 * REMAT_TIE)]) is fast


def test_a_remat_winner_stands_when_its_twin_without_remat_does_not_fit(twins):
    _, remat, _ = twins
    assert chosen([remat]) is remat


def test_the_header_of_a_tie_says_how_much_faster_the_remat_twin_was(twins):
    searched, remat, plain = twins
    fast, slow = timed(remat, 1.0), timed(plain, 1.005)
    line = remat_tie(replace(searched, outcomes=[fast, slow], winner=slow))
    assert line.startswith("Without remat: its twin with remat is 0.50% faster (1 s analytic)")
    assert "within 1%" in line


def test_no_tie_line_when_the_twin_with_remat_is_slower(twins):
    searched, remat, plain = twins
    slow, fast = timed(remat, 1.1), timed(plain, 1.0)
    assert remat_tie(replace(searched, outcomes=[slow, fast], winner=fast)) is None
