"""Rules whose patterns can match one path, found without a model (P336).

A model shows an ambiguity only when it has a variable both patterns match (P302); a
plan linted on its own, or a model that grows a layer later, does not. interegular turns
each pattern into a finite automaton and intersects them; a non-empty intersection is an
overlap, and its shortest string is the witness path. The witness is then matched by
planc's own matcher (RE2), so the warning never rests on a difference between the two
readers of a pattern; a pattern interegular cannot read is left out of the check.

Most pairs of a real plan differ near an end (`...query.kernel` and `...output.kernel`),
which Python's parse of the two patterns shows without an automaton: the characters
each can have at the k-th position from its start or end (`_end_profiles`). Disjoint
characters at one position, or lengths that cannot agree, prove the pair disjoint, so
interegular is imported, and automata built, only for the pairs that survive.

Under `overlap first` file order decides, so overlaps are not reported; under `match
search` almost any two patterns meet in some path (`a` and `b` in `ab`), so the check
runs under `match full` only. A pattern's own
text, when it is a path, is taken by the literal rule wherever it stands (P308), so it
is no witness.
"""

from __future__ import annotations

import functools
import re
from collections import deque

from planc.diagnostics import Diagnostic, Label, warning
from planc.ir import Rule
from planc.matching import Matcher, check_pattern
from planc.matching.python_re import sre, sre_parse
from planc.matching.scan import has_top_level_bar

# Pairs are compared one by one: a bound keeps a plan of thousands of rules from taking
# minutes at lint (such plans are generated, and overlaps there are P302's job).
MAX_RULES = 200
# interegular builds a DFA; a long pattern or a large counted repeat could make it huge.
MAX_PATTERN_LENGTH = 300
MAX_WITNESS = 200
# A DFA can need 2**k states for k ambiguous positions (`(a|b)*a(a|b)(a|b)...`); each
# `.`, class, `|` and quantifier, and each count of a counted repeat, weighs one. A
# pattern above MAX_WEIGHT is left out, and pairs are compared in file order while the
# sum of 2**weight over their patterns stays in budget, so no plan makes lint build huge
# automata. Real rule patterns weigh under 10 (`decoder_block.*attention.*(query|key|
# value).kernel` weighs 7).
MAX_WEIGHT = 12
WEIGHT_BUDGET = 2**16
# Pairs whose literal ends already keep them apart cost nothing.

# The longest run of characters that are not regex syntax at the start of a text (read
# backwards too, for the end of a pattern).
_LITERAL_RUN = re.compile(r"[^\\.^$*+?{}\[\]()|]*")


def _literal_ends(pattern: str) -> tuple[str, str]:
    """The literal text every path `pattern` matches starts and ends with ("" when
    unsure: a top-level `|`, an escape, a quantifier on the last character)."""
    if "(?" in pattern or has_top_level_bar(pattern):  # flags such as (?i) change what a
        return "", ""                                # literal matches
    head = _LITERAL_RUN.match(pattern).group()
    i = len(head)
    if i < len(pattern) and pattern[i] in "*?{":
        head = head[:-1]
    tail = _LITERAL_RUN.match(pattern[::-1]).group()[::-1]
    j = len(pattern) - len(tail)
    if j > 0 and pattern[j - 1] == "\\":
        tail = tail[1:]
    return head, tail


def _weight(pattern: str) -> int:
    weight = sum(pattern.count(c) for c in ".|*+?[")
    for count in re.findall(r"\{(\d*)(?:,(\d*))?\}", pattern):
        weight += max(int(n) for n in count if n) if any(count) else 1
    return weight


def _apart(a: tuple[str, str], b: tuple[str, str]) -> bool:
    """Whether literal ends alone show that no path matches both patterns."""
    (ha, ta), (hb, tb) = a, b
    return not (ha.startswith(hb) or hb.startswith(ha)) or \
        not (ta.endswith(tb) or tb.endswith(ta))


def _prefix_pairs(texts: list[str], limit: int | None = None) -> list[tuple[int, int]] | None:
    """Every pair (i, j), i < j, where one of `texts[i]`, `texts[j]` starts the other;
    None once there are more than `limit` of them.

    Sorted, a text's extensions follow it in one run, so each text is compared with its
    run only: n log n plus the pairs found, not every pair of n.
    """
    order = sorted(range(len(texts)), key=texts.__getitem__)
    out = []
    for k, i in enumerate(order):
        text = texts[i]
        for j in order[k + 1:]:
            if not texts[j].startswith(text):
                break
            out.append((i, j) if i < j else (j, i))
        if limit is not None and len(out) > limit:
            return None
    return out


def _candidate_pairs(ends: list[tuple[str, str]]) -> list[tuple[int, int]]:
    """The pairs (i, j), i < j, in file order, that literal ends do not keep `_apart`.

    The pairs whose heads are compatible (one starts the other), or else those whose
    tails are, are found by sorting and filtered by the other end: a plan whose patterns
    differ at one end costs no comparison per pair. Rule sets usually share one end (a
    `.*` start, a `/kernel` end), so the first set tried that stays small is taken.
    """
    limit = 4 * len(ends)
    few = _prefix_pairs([head for head, _ in ends], limit)
    if few is None:
        few = _prefix_pairs([tail[::-1] for _, tail in ends], limit)
    if few is None:
        few = _prefix_pairs([head for head, _ in ends])
    return sorted(pair for pair in few if not _apart(ends[pair[0]], ends[pair[1]]))


def overlap_findings(rules: tuple[Rule, ...], mode: str, overlap: str) -> list[Diagnostic]:
    """P336 for each pair of `rules` that can match one path, with a shortest witness."""
    if overlap == "first" or mode != "full" or not 2 <= len(rules) <= MAX_RULES:
        return []
    # A pattern the checker refused (P106, P107) has its own error; it is no witness.
    rules = [r for r in rules if r.pattern is not None and check_pattern(r.pattern) is None
             and len(r.pattern) <= MAX_PATTERN_LENGTH]
    pairs = _candidate_pairs([_literal_ends(r.pattern) for r in rules])
    if not pairs:
        return []
    # Weighed only now: most plans have no pair to compare. Leaving out a pattern too
    # heavy to compare leaves out its pairs, the same pairs as leaving it out first.
    light = [_weight(r.pattern) <= MAX_WEIGHT for r in rules]
    pairs = [(i, j) for i, j in pairs if light[i] and light[j]]
    rules_compared = [r for r, ok in zip(rules, light) if ok]
    out = []
    budget = WEIGHT_BUDGET
    shared = _SharedAutomata()
    for i, j in pairs:
        a, b = rules[i], rules[j]
        # Counted whether or not the answer is cached, so the output never depends
        # on what was checked before.
        budget -= 2 ** _weight(a.pattern) + 2 ** _weight(b.pattern)
        if budget < 0:
            return out
        if _disjoint(a.pattern, b.pattern, shared, rules_compared):
            continue
        witness = _pair_witness(a.pattern, b.pattern)
        if witness is not None:
            out.append(_finding(a, b, witness))
    return out


@functools.lru_cache(maxsize=4096)
def _pair_witness(a: str, b: str) -> str | None:
    """A shortest path both patterns match (not either's own text), or None.

    Cached: a language server re-checks a plan at each edit, and only the pairs of the
    rule that changed are new. The alphabet is the pair's own, so the witness does not
    depend on the plan's other rules.
    """
    import interegular  # only when there is a pair to compare

    pa, pb = _parsed(interegular, a), _parsed(interegular, b)
    if pa is None or pb is None:
        return None
    try:
        alphabet = interegular.fsm.Alphabet.union(
            pa.get_alphabet(interegular.REFlags(0)), pb.get_alphabet(interegular.REFlags(0)))[0]
    except Exception:
        return None
    fa, fb = _automaton(pa, alphabet), _automaton(pb, alphabet)
    if fa is None or fb is None:
        return None
    witness = _witness(fa, fb, {a, b})
    if witness is None or Matcher([a, b], "full").match(witness) != (0, 1):
        return None  # the two readers disagree: say nothing rather than guess
    return witness


# Pairs already settled, disjoint or not, so a plan checked again (a language server
# re-checks at each edit) builds no automata for them; emptied when full.
_KNOWN_DISJOINT: dict[tuple[str, str], bool] = {}
MAX_KNOWN_PAIRS = 16_384


def _disjoint(a: str, b: str, shared: _SharedAutomata, rules) -> bool:
    known = _KNOWN_DISJOINT.get((a, b))
    if known is None:
        known = shared.disjoint(a, b, rules)
        if len(_KNOWN_DISJOINT) >= MAX_KNOWN_PAIRS:
            _KNOWN_DISJOINT.clear()
        _KNOWN_DISJOINT[a, b] = known
    return known


class _SharedAutomata:
    """interegular's `Comparator` over every compared pattern, made on the first pair
    that needs it: one automaton per pattern over one alphabet, built when first used.

    Whether two patterns meet does not depend on the alphabet (any alphabet that tells
    apart the characters both name gives the same answer), so most pairs, the disjoint
    ones, are settled with n automata instead of two per pair. A pair that meets gets
    its witness from `_pair_witness` over the pair's own alphabet, so what is reported
    does not depend on the other rules.
    """

    def __init__(self):
        self._comparator = None

    def disjoint(self, a: str, b: str, rules) -> bool:
        """True only when the two patterns surely match no path in common."""
        if _ends_apart(a, b):
            return True
        if self._comparator is None:
            self._comparator = _comparator([r.pattern for r in rules])
        if self._comparator is False:
            return False
        try:
            fa, fb = self._comparator.get_fsm(a), self._comparator.get_fsm(b)
            # None: a pattern interegular cannot turn into an automaton; `_pair_witness`
            # then says nothing either.
            return fa is not None and fb is not None and bool(fa.isdisjoint(fb))
        except Exception:
            return False


# How far from each end a pattern's characters are followed, and how many alternative
# shapes (`(query|key|value)` has three) one end may have before it is not followed.
PROFILE_LENGTH = 24
MAX_PROFILES = 32
_ANY = None  # a position any character may take


def _ends_apart(a: str, b: str) -> bool:
    """Whether no path matches both patterns, as their ends show (False: not known).

    Sound for the language Python's `re` (so RE2, which planc hands the same reading)
    gives each pattern: every path a pattern matches fits one of its profiles.
    """
    for from_end in (False, True):
        pa, pb = _end_profiles(a, from_end), _end_profiles(b, from_end)
        if pa is not None and pb is not None and \
                not any(_can_meet(x, y) for x in pa for y in pb):
            return True
    return False


def _can_meet(x, y) -> bool:
    """Whether one path can fit both profiles (each is (positions, closed); see
    `_end_profiles`)."""
    (xs, x_closed), (ys, y_closed) = x, y
    for cx, cy in zip(xs, ys):
        if cx is not _ANY and cy is not _ANY and not cx & cy:
            return False
    if x_closed and y_closed:
        return len(xs) == len(ys)
    if x_closed:
        return len(xs) >= len(ys)
    if y_closed:
        return len(ys) >= len(xs)
    return True


@functools.lru_cache(maxsize=4096)
def _end_profiles(pattern: str, from_end: bool):
    """The shapes of the paths `pattern` matches, read from its start (or its end), or
    None where it is not followed (a case-insensitive flag, too many shapes, ...).

    A profile is (positions, closed): the set of characters each of the first
    `len(positions)` characters can be (`_ANY`: any), and whether the path ends there.
    An open profile's path has at least that many characters. Each path the pattern
    matches fits one profile; the converse need not hold (classes, repeats and
    assertions are widened), which only makes the test prove less.
    """
    try:
        parsed = sre_parse.parse(pattern)
    except Exception:  # the checker reports what Python cannot read
        return None
    if parsed.state.flags & sre.SRE_FLAG_IGNORECASE:
        return None
    return _sequence(list(parsed), from_end)


def _sequence(items, from_end: bool):
    profiles = [((), True)]
    for op, av in reversed(items) if from_end else items:
        if not any(closed for _, closed in profiles):
            break  # every profile is already open: what follows cannot narrow it
        item = _item(op, av, from_end)
        if item is None:
            return None
        profiles = _concatenated(profiles, item)
        if profiles is None:
            return None
    return profiles


def _concatenated(first, then):
    out = {}
    for positions, closed in first:
        if not closed:
            out[positions, closed] = None
            continue
        for more, more_closed in then:
            joined = positions + more
            if len(joined) > PROFILE_LENGTH:
                out[joined[:PROFILE_LENGTH], False] = None
            else:
                out[joined, more_closed] = None
    return list(out) if len(out) <= MAX_PROFILES else None


def _item(op, av, from_end: bool):
    """The profiles of one parsed item, or None if it is not followed."""
    if op is sre.LITERAL:
        return [((frozenset((chr(av),)),), True)]
    if op in (sre.ANY, sre.NOT_LITERAL):
        return [((_ANY,), True)]
    if op is sre.IN:
        return [((_class(av),), True)]
    if op is sre.AT:  # an anchor or word boundary matches no character
        return [((), True)]
    if op is sre.SUBPATTERN:
        _, add_flags, _, sub = av
        return None if add_flags & sre.SRE_FLAG_IGNORECASE else _sequence(list(sub), from_end)
    if op is sre.BRANCH:
        out = {}
        for branch in av[1]:
            one = _sequence(list(branch), from_end)
            if one is None:
                return None
            out.update(dict.fromkeys(one))
        return list(out) if len(out) <= MAX_PROFILES else None
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):  # lazy or greedy: the same paths
        low, high, sub = av
        once = _sequence(list(sub), from_end)
        if once is None:
            return None
        profiles = [((), True)]
        for _ in range(min(low, PROFILE_LENGTH + 1)):
            profiles = _concatenated(profiles, once)
            if profiles is None:
                return None
        if low > PROFILE_LENGTH + 1:  # copies left out can only lengthen the path
            profiles = [(p, False) for p, _ in profiles]
        if high == low + 1:  # `?`: then none or one copy
            profiles = _concatenated(profiles, [((), True)] + once)
        elif high > low:  # then none, or one copy and whatever follows
            profiles = _concatenated(profiles, [((), True)] + [(p, False) for p, _ in once])
        return profiles
    return None  # backreferences, lookaround, ...: refused by the checker anyway


def _class(items):
    """The characters of a class (`[a-c_]`), or `_ANY` for a negated, wide or named one."""
    chars = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < 256:
            chars.update(map(chr, range(av[0], av[1] + 1)))
        else:  # NEGATE, CATEGORY (\d, \w), a wide range
            return _ANY
    return frozenset(chars)


def _comparator(patterns: list[str]):
    """A `Comparator` of the patterns interegular reads, or False if it fails on them."""
    import interegular

    parsed = {}
    for pattern in dict.fromkeys(patterns):
        one = _parsed(interegular, pattern)
        if one is not None:
            parsed[pattern] = one
    try:
        return interegular.Comparator(parsed) if parsed else False
    except Exception:
        return False


def _parsed(interegular, pattern: str):
    try:
        return interegular.parse_pattern(pattern)
    except Exception:  # Unsupported, InvalidSyntax, or a construct it fails on
        return None


def _automaton(pattern, alphabet):
    try:
        return pattern.to_fsm(alphabet)
    except Exception:
        return None


def _witness(fa, fb, excluded: set[str]) -> str | None:
    """The shortest string both automata accept that is not in `excluded`, if any."""
    try:
        if fa.isdisjoint(fb):  # lazy: stops at the first shared final state
            return None
        both = fa & fb
    except Exception:
        return None
    return _shortest(both, excluded)


def _shortest(fsm, excluded: set[str]) -> str | None:
    """Breadth-first over (state, text) pairs; each state is kept for a few texts only,
    enough to step past the excluded literal texts."""
    symbols = {}
    for transition, chars in fsm.alphabet.by_transition.items():
        named = sorted((c for c in chars if isinstance(c, str)), key=lambda c: (c.isupper(), c))
        symbols[transition] = _readable(named, fsm.alphabet)
    seen: dict = {}
    queue = deque([(fsm.initial, "")])
    while queue:
        state, text = queue.popleft()
        if state in fsm.finals and text not in excluded:
            return text
        if len(text) >= MAX_WITNESS:
            continue
        for transition, nxt in sorted(fsm.map.get(state, {}).items(), key=lambda t: t[0]):
            char = symbols.get(transition)
            if char is None:
                continue
            visits = seen.get(nxt, 0)
            if visits > len(excluded):
                continue
            seen[nxt] = visits + 1
            queue.append((nxt, text + char))
    return None


def _readable(chars: list[str], alphabet) -> str | None:
    """One character standing for a transition: a letter or digit when it has one; for
    "anything else", a letter no pattern names."""
    for c in chars:
        if c.isalnum():
            return c
    for c in chars:
        if c.isprintable() and c != " ":
            return c
    if chars:
        return chars[0]
    named = {c for c in alphabet if isinstance(c, str)}
    return next((c for c in "xyzqjkabcdefghilmnoprstuvw" if c not in named), None)


def _finding(a: Rule, b: Rule, witness: str) -> Diagnostic:
    return warning(
        "P336", f"rules {a.label} and {b.label} can both match a path, e.g. `{witness}`",
        b.pattern_span, label=f"also matches `{witness}`",
        secondary=(Label(a.pattern_span, f"matches `{witness}`"),),
        help=("make the patterns disjoint (name the layers each is for), or write "
              "`overlap first` if file order should decide; with a model such a path is "
              "an error (P302)"),
        rule=b.where)
