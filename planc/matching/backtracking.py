"""Which patterns a backtracking regex engine may take exponential time on.

planc matches with RE2, in linear time. Python's `re`, which the emitted modules and
Keras's `LayoutMap` use, backtracks: on a path it does not match, it tries every way the
pattern can match each prefix, and a pattern that can match one text in exponentially
many ways (`(\\w+_?)+/kernel`: each run of letters splits between the inner and the outer
`+` in 2^n ways) takes exponential time. That property, exponential ambiguity, is
decided here exactly for the pattern's automaton, not guessed from its look:

- The pattern becomes a Thompson automaton. Each character-consuming step is a
  *position*; an edge from position p to position q counts the distinct empty-string
  routes between them (0, 1, or 2 meaning "several"), because those routes are what a
  backtracker tries one by one.
- The pattern is exponentially ambiguous if and only if some position p can return to
  itself over one text in two different ways: either a cycle through p holds an edge
  with several routes, or two runs over the same text part from p and meet again at p.
  The second is a strongly connected component of the product automaton (pairs of
  positions reading the same character) that holds both a pair (p, p) and a pair
  (q1, q2) with q1 != q2.

Anchors and word boundaries are read as always passing, so a pattern that only an
anchor keeps unambiguous is still reported (an over-approximation, never a miss).
Polynomial blow-ups (`.*a.*b.*c`) are not reported: they grow with a power of the path
length, which stays small for paths.

>>> exponential("(\\\\w+_?)+/kernel"), exponential("(\\\\d+/)+kernel"), exponential("(a|a)*b")
(True, False, True)
"""

from __future__ import annotations

import functools
import re
import sys
import warnings

from planc.matching.python_re import sre, sre_parse

__all__ = ["exponential"]

# Beyond these sizes the analysis is skipped (no report): real rule patterns have tens
# of positions, and the product automaton grows with the square.
_MAX_POSITIONS = 400
_MAX_UNROLL = 16  # copies of a bounded repeat `{m,n}` before it is read as `{m,}`
_REPEATS = tuple(getattr(sre, n) for n in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")
                 if hasattr(sre, n))
# Quick refusal: without a group or class followed by a quantifier, or two quantifiers
# in a row, no repeat holds another repeat or a choice.
_NESTED_HINT = re.compile(r"[)\]][*+?{]|[*+?}][^*+?{]*[*+?{]")


@functools.lru_cache(maxsize=65536)
def exponential(pattern: str) -> bool:
    """Whether Python's `re` may take time exponential in the path length on `pattern`
    (see the module docstring). False for a pattern Python cannot parse."""
    if not _NESTED_HINT.search(pattern):
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = sre_parse.parse(pattern)
        except (re.error, ValueError, RecursionError, OverflowError):
            return False
    try:
        automaton = _Automaton(tree.state.flags)
        start, end = automaton.build(tree.data)
    except _TooLarge:
        return False
    return automaton.ambiguous(start, end)


class _TooLarge(Exception):
    pass


class _Automaton:
    """A Thompson automaton: empty edges between states, and consuming edges (the
    positions), each with the characters it reads as a predicate."""

    def __init__(self, flags: int):
        self.flags = flags
        self.empty: list[list[int]] = []   # state -> states reached reading nothing
        self.positions: list[tuple[int, int, object]] = []  # (from, to, atom)

    def state(self) -> int:
        self.empty.append([])
        return len(self.empty) - 1

    # -- construction ------------------------------------------------------------------

    def build(self, items) -> tuple[int, int]:
        start = self.state()
        end = start
        for op, av in items:
            a, b = self._item(op, av)
            self.empty[end].append(a)
            end = b
        return start, end

    def _item(self, op, av) -> tuple[int, int]:
        if op in (sre.LITERAL, sre.NOT_LITERAL, sre.ANY, sre.IN):
            a, b = self.state(), self.state()
            self.positions.append((a, b, (op, av)))
            if len(self.positions) > _MAX_POSITIONS:
                raise _TooLarge
            return a, b
        if op is sre.SUBPATTERN:
            return self.build(av[-1])
        if op is sre.BRANCH:
            a, b = self.state(), self.state()
            for branch in av[1]:
                s, e = self.build(branch)
                self.empty[a].append(s)
                self.empty[e].append(b)
            return a, b
        if op in _REPEATS:
            return self._repeat(*av)
        if op is getattr(sre, "ATOMIC_GROUP", None):
            return self.build(av)
        # AT (anchors, word boundaries) and anything else that reads nothing.
        a = self.state()
        return a, a

    def _repeat(self, low: int, high: int, body) -> tuple[int, int]:
        unbounded = high == sre.MAXREPEAT or high > _MAX_UNROLL
        low = min(low, _MAX_UNROLL)
        a = self.state()
        end = a
        for _ in range(low):
            s, e = self.build(body)
            self.empty[end].append(s)
            end = e
        if unbounded:
            # Thompson's star: in -> body | out, body end -> body start | out. The loop
            # goes straight back to the body, so an outer loop around it is a second,
            # distinct route, as a backtracker sees it.
            s, e = self.build(body)
            out = self.state()
            self.empty[end] += [s, out]
            self.empty[e] += [s, out]
            return a, out
        out = self.state()
        self.empty[end].append(out)
        for _ in range(high - low):
            s, e = self.build(body)
            self.empty[end].append(s)
            self.empty[e].append(out)
            end = e
        return a, out

    # -- analysis ----------------------------------------------------------------------

    def _routes_from(self, state: int) -> dict[int, int]:
        """For every state reachable from `state` reading nothing, how many distinct
        empty routes lead there (capped at 2); a route never visits a state twice."""
        counts: dict[int, int] = {}
        stack = [(state, frozenset((state,)))]
        while stack:
            here, seen = stack.pop()
            counts[here] = min(2, counts.get(here, 0) + 1)
            for nxt in self.empty[here]:
                if nxt not in seen and counts.get(nxt, 0) < 2:
                    stack.append((nxt, seen | {nxt}))
        return counts

    def ambiguous(self, start: int, end: int) -> bool:
        positions = self.positions
        if len(positions) < 1:
            return False
        by_source: dict[int, list[int]] = {}
        for index, (source, _, _) in enumerate(positions):
            by_source.setdefault(source, []).append(index)
        # follow[p]: (q, routes) for each position q that may read the next character
        follow: list[list[tuple[int, int]]] = []
        for _, target, _ in positions:
            routes = self._routes_from(target)
            follow.append([(q, n) for state, n in routes.items()
                           for q in by_source.get(state, ())])
        members = _Members(self.flags, [atom for _, _, atom in positions])
        components = _components(len(positions), lambda p: (q for q, _ in follow[p]))
        for p, edges in enumerate(follow):
            if any(n > 1 and components[q] == components[p] for q, n in edges):
                return True
        return _product_ambiguous(len(positions), follow, members, components)


def _product_ambiguous(count, follow, members, components) -> bool:
    """Whether two runs from one position can part and meet again over one text."""
    overlaps = members.overlaps

    def successors(pair):
        p, q = pair
        for p2, _ in follow[p]:
            for q2, _ in follow[q]:
                if (p2 == q2 or overlaps(p2, q2)) and components[p2] == components[q2]:
                    yield (p2, q2)

    # Only pairs inside one component of the automaton can cycle back to a diagonal.
    nodes = [(p, p) for p in range(count)]
    index = {node: i for i, node in enumerate(nodes)}
    edges: list[list[int]] = [[] for _ in nodes]
    frontier = list(range(len(nodes)))
    while frontier:
        i = frontier.pop()
        for nxt in successors(nodes[i]):
            j = index.get(nxt)
            if j is None:
                j = index[nxt] = len(nodes)
                nodes.append(nxt)
                edges.append([])
                frontier.append(j)
                if len(nodes) > _MAX_POSITIONS * _MAX_POSITIONS // 4:
                    return False
            edges[i].append(j)
    comp = _components(len(nodes), lambda i: edges[i])
    diagonal = {comp[i] for i, (p, q) in enumerate(nodes) if p == q}
    return any(p != q and comp[i] in diagonal for i, (p, q) in enumerate(nodes))


def _components(count: int, successors) -> list[int]:
    """Strongly connected components (Tarjan's algorithm, iterative): component ids,
    equal for nodes on a common cycle; a node on no cycle gets its own id."""
    index = [-1] * count
    low = [0] * count
    on_stack = [False] * count
    comp = [-1] * count
    stack: list[int] = []
    counter = 0
    ncomp = 0
    for root in range(count):
        if index[root] != -1:
            continue
        work = [(root, iter(successors(root)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack[root] = True
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if index[nxt] == -1:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack[nxt] = True
                    work.append((nxt, iter(successors(nxt))))
                    advanced = True
                    break
                if on_stack[nxt]:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack[member] = False
                    comp[member] = ncomp
                    if member == node:
                        break
                ncomp += 1
    return comp


class _Members:
    """Which characters each position reads, over an alphabet that tells them apart:
    every ASCII character, every non-ASCII character the pattern names, and one
    non-ASCII character it does not name."""

    def __init__(self, flags: int, atoms):
        named = set()
        for op, av in atoms:
            if op in (sre.LITERAL, sre.NOT_LITERAL):
                named.add(av)
            elif op is sre.IN:
                for kind, item in av:
                    if kind is sre.LITERAL:
                        named.add(item)
                    elif kind is sre.RANGE:
                        named.update(item)
        other = next(c for c in range(0x80, sys.maxunicode) if c not in named)
        alphabet = [chr(c) for c in sorted(set(range(128)) | named | {other})]
        self._sets = [frozenset(c for c in alphabet if test(c))
                      for test in (_tester(atom, flags) for atom in atoms)]

    def overlaps(self, p: int, q: int) -> bool:
        return not self._sets[p].isdisjoint(self._sets[q])


def _tester(atom, flags: int):
    """A test for whether one character is read by `atom` (a parsed pattern item)."""
    op, av = atom
    # The atoms of most patterns, without a regex compiled for each (a lint checks every
    # pattern of a plan): what `re` reads them as, case-sensitive.
    if not flags & re.IGNORECASE:
        if op is sre.LITERAL:
            return chr(av).__eq__
        if op is sre.NOT_LITERAL:
            return chr(av).__ne__
        if op is sre.ANY:
            return _any_character if flags & re.DOTALL else "\n".__ne__
    from planc.matching.python_re import compile_item

    return compile_item(atom, flags).fullmatch


def _any_character(c: str) -> bool:
    return True
