r"""Why a rule matches nothing (P306) and a variable no rule (P301): the near miss.

A typo in a pattern (`self_atention`) or a renamed layer shows up twice: the rule
matches nothing and the variables it was meant for match no rule. Both diagnostics name
the other side. The measure is edit distance over the literal parts of a pattern (the
text between its regex operators), each part against its best-matching stretch of the
path after the stretch of the part before it (the parts stay in the pattern's order): a
small distance is a near miss, and the stretch is "the differing part". `corrected`
writes the pattern with each differing part replaced by its stretch; the resolver
proposes it only where the plan's matcher confirms it matches the path it names.

>>> literal_parts(r"decoder_\d+/self_atention/(query|key)/kernel")
['decoder_', '/self_atention/', 'query', 'key', '/kernel']
>>> miss = near_miss(r"decoder_\d+/self_atention/kernel", "decoder_0/self_attention/kernel")
>>> miss.pattern_part, miss.path_part
('self_atention', 'self_attention')
>>> print(corrected(r"decoder_\d+/self_atention/kernel", "decoder_0/self_attention/kernel"))
decoder_\d+/self_attention/kernel
"""

from __future__ import annotations

from planc.frozen import Frozen

_OPERATORS = set(".^$*+?{}[]()|")
# Work is counted in cells of the distance table (each a few hundred nanoseconds of
# Python), so a model of 100,000 unmatched variables gets its hints for the first ones
# and lint stays within a second of what it takes without them.
CELL_BUDGET = 2_000_000
# A path or a pattern's literal text longer than this is no typo of the other.
MAX_TEXT = 512


class NearMiss(Frozen):
    # `pattern_part`: the literal part of the pattern that differs; `path_part`: the
    # stretch of the path it nearly matches.
    distance: int
    pattern_part: str
    path_part: str

    def sentence(self) -> str:
        if not self.path_part:
            return f"the pattern has `{self.pattern_part}` where the path has nothing"
        return (f"the pattern has `{self.pattern_part}` where the path has "
                f"`{self.path_part}`")


def literal_parts(pattern: str) -> list[str]:
    """The runs of literal text in `pattern`; an operator or a class ends a run, and a
    quantifier takes the character before it out of the run."""
    return [text for text, _, _ in _literal_runs(pattern)]


def _literal_runs(pattern: str) -> list[tuple[str, int, int]]:
    """`(text, start, end)` of each literal run: its text, and where it is written in
    `pattern` (an escaped character is one character of text and two of pattern)."""
    parts, cur = [], []  # cur: (character, start, end in the pattern)
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt.isalnum():  # \d, \w, \1 ...: not literal text
                _flush(parts, cur)
            else:
                cur.append((nxt, i, i + 2))
            i += 2
            continue
        if c == "[":
            _flush(parts, cur)
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c in "*+?{":
            if cur and c != "+":
                cur.pop()  # optional or counted: not certainly in the path
            _flush(parts, cur)
            if c == "{":
                close = pattern.find("}", i)
                i = close + 1 if close > 0 else i + 1
                continue
        elif c in _OPERATORS:
            _flush(parts, cur)
        else:
            cur.append((c, i, i + 1))
        i += 1
    _flush(parts, cur)
    return parts


def _flush(parts: list, cur: list) -> None:
    if cur:
        parts.append(("".join(c for c, _, _ in cur), cur[0][1], cur[-1][2]))
        cur.clear()


class Budget:
    def __init__(self, cells: int = CELL_BUDGET):
        self.cells = cells

    def spend(self, cells: int) -> bool:
        if cells > self.cells:
            self.cells = 0
            return False
        self.cells -= cells
        return True


def near_miss(pattern: str, path: str, budget: Budget | None = None) -> NearMiss | None:
    """How nearly `pattern`'s literal text appears in `path`; None when it is not near
    (more than a quarter of the literal text differs) or the budget is spent."""
    aligned = _aligned(pattern, path, budget)
    if aligned is None:
        return None
    distance, worst = 0, None
    for (part, _, _), (d, start, end) in aligned:
        distance += d
        if d and (worst is None or d > worst[0]):
            worst = (d, *_narrowed(part, path[start:end]))
    return NearMiss(distance, worst[1], worst[2])


def corrected(pattern: str, path: str, budget: Budget | None = None) -> str | None:
    """`pattern` with each literal part that differs from its stretch of `path` replaced
    by that stretch (escaped), when `pattern` is a near miss of `path`; else None. Not
    checked here: only a match of `path` shows that it is a fix."""
    aligned = _aligned(pattern, path, budget)
    if aligned is None:
        return None
    out, at = [], 0
    for (_, start, end), (d, lo, hi) in aligned:
        if d:
            out.append(pattern[at:start])
            out.append(escape_literal(path[lo:hi]))
            at = end
    out.append(pattern[at:])
    return "".join(out)


def escape_literal(text: str) -> str:
    r"""`text` as a pattern that matches it literally.

    >>> print(escape_literal("a.b(1)"))
    a\.b\(1\)
    """
    return "".join("\\" + c if c in _OPERATORS or c == "\\" else c for c in text)


def _aligned(pattern: str, path: str, budget: Budget | None):
    """`[(run, (distance, start, end))]`: each literal run of `pattern` with its nearest
    stretch of `path` after the stretch of the run before it; None when the pattern is
    not near the path (nothing differs, more than a quarter of the literal text does,
    or the budget is spent)."""
    runs = [r for r in _literal_runs(pattern) if r[0]]
    total = sum(len(r[0]) for r in runs)
    if not runs or total < 3 or total > MAX_TEXT or len(path) > MAX_TEXT:
        return None
    if budget is not None and not budget.spend(total * (len(path) + 1)):
        return None
    out, at, distance = [], 0, 0
    for run in runs:
        d, start, end = _best_stretch(run[0], path[at:])
        start, end = at + start, at + end
        if d:
            start, end = _widened(run[0], path, start, end, at)
        out.append((run, (d, start, end)))
        distance += d
        at = end
    if distance == 0 or distance > max(1, total // 4):
        return None
    return out


_SEPARATORS = "/."


def _narrowed(a: str, b: str) -> tuple[str, str]:
    """`a` and `b` without the path segments they share at either end."""
    p = 0
    while p < min(len(a), len(b)) and a[p] == b[p]:
        p += 1
    q = 0
    while q < min(len(a), len(b)) - p and a[-1 - q] == b[-1 - q]:
        q += 1
    # Widen to whole segments, so the parts read as names (`self_atention`).
    while p > 0 and a[p - 1] not in _SEPARATORS:
        p -= 1
    while q > 0 and a[len(a) - q] not in _SEPARATORS:
        q -= 1
    return a[p:len(a) - q] or a, b[p:len(b) - q] or b


def _widened(part: str, path: str, start: int, end: int, floor: int) -> tuple[int, int]:
    """The stretch `path[start:end]` grown to whole words (runs of letters and digits)
    at each end where `part` has a letter or digit: the nearest stretch of a renamed
    layer's name may stop inside a word (`decoder_laye` for `decoder_layer`)."""
    if part[:1].isalnum():
        while start > floor and path[start - 1].isalnum():
            start -= 1
    if part[-1:].isalnum():
        while end < len(path) and path[end].isalnum():
            end += 1
    return start, end


def _best_stretch(part: str, text: str) -> tuple[int, int, int]:
    """(distance, start, end) of the stretch of `text` nearest to `part` (Sellers'
    approximate substring match: a free start anywhere in `text`)."""
    n = len(text)
    prev = [0] * (n + 1)
    starts = list(range(n + 1))
    for i, pc in enumerate(part, 1):
        cur = [i] + [0] * n
        cur_starts = [0] * (n + 1)
        for j in range(1, n + 1):
            sub = prev[j - 1] + (pc != text[j - 1])
            dele = prev[j] + 1
            ins = cur[j - 1] + 1
            if sub <= dele and sub <= ins:
                cur[j], cur_starts[j] = sub, starts[j - 1]
            elif dele <= ins:
                cur[j], cur_starts[j] = dele, starts[j]
            else:
                cur[j], cur_starts[j] = ins, cur_starts[j - 1]
        prev, starts = cur, cur_starts
    end = min(range(n + 1), key=lambda j: (prev[j], -j))
    return prev[end], starts[end], end
