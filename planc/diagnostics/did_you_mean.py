"""Did-you-mean: the known names nearest to a misspelt one.

Two measures for two kinds of name: `closest` (edit distance, an adjacent swap counting
as one edit) for short words such as keywords, axes and params, where a typo is one or
two edits; `similar` (difflib's ratio) for long paths such as variable names, where
what matters is how much of the path is shared.
"""

from __future__ import annotations


def distance(a: str, b: str) -> int:
    """Edit distance counting an adjacent swap as one edit (`pt` -> `tp` is 1)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        cur = [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            cost = a[i - 1] != b[j - 1]
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def closest(word: str, choices) -> str | None:
    """The choice nearest to `word`, if it is near enough to be a plausible typo.

    >>> closest("modle", ["batch", "model"])
    'model'
    >>> closest("xyz", ["batch", "model"]) is None
    True
    """
    if len(word) > 64:
        return None
    best, best_d = None, None
    for c in sorted(set(choices)):
        if c == word:
            continue
        d = distance(word.lower(), c.lower())
        if d <= max(1, min(len(word), len(c)) // 3) and (best_d is None or d < best_d):
            best, best_d = c, d
    return best


def did_you_mean(word: str, choices) -> str | None:
    c = closest(word, choices)
    return f"did you mean `{c}`?" if c else None


def similar(path: str, choices, n: int = 3) -> list[str]:
    """Up to `n` of `choices` that share most of `path`, best first.

    >>> similar("dense/kernal", ["dense/kernel", "dense/bias", "head/kernel"])
    ['dense/kernel', 'dense/bias', 'head/kernel']
    """
    import difflib  # only when a path is unknown: a clean run never loads it

    return difflib.get_close_matches(path, list(choices), n=n, cutoff=0.6)
