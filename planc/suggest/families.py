"""From one layout per variable to a few rules a person would write.

1. Generalise numbered layers: paths are grouped by their *skeleton* (the path with every
   run of digits taken out); a digit run that varies within a group becomes `\\d+`, one that
   does not stays literal (`decoder_block_\\d+/ffw_gating_2/kernel`). Two skeletons never
   match each other's paths, so the rules of different groups cannot overlap.
2. A group whose members need different layouts (a layer unlike the others) is split,
   each part naming its own numbers (`dense_(0|2)/kernel`), checked to match its members
   and nothing else in the group, else one rule per variable.
3. Families of one role are merged into one rule by aligning their patterns word by word
   (difflib) and writing each difference as a group: `attention/(query|key|value)/kernel`,
   `ffw_gating(_2)?`, `moe_block(_\\d+)?`. A merged pattern is kept only if, of all the
   model's paths, it matches exactly the families merged into it (and any later family of
   the same role it covers whole, which joins it). Members of one role whose layouts differ
   only where a count does not divide
   (key/value heads on a `model` axis larger than their head count) share one rule with
   alternatives, most split first, kept only when every member still resolves to its own
   layout.

Variables left whole (norms, biases, scalars) are not given rules: `default` covers them.

>>> from planc.variables import Variable
>>> from planc.suggest.roles import detect_roles
>>> vs = [Variable(f"blk_{i}/mlp/{n}", s) for i in range(3)
...       for n, s in (("up", (16, 48)), ("down", (48, 16)))]
>>> lays = [("fsdp", "model") if v.shape[0] == 16 else ("model", "fsdp") for v in vs]
>>> rules, whole = group_rules(vs, detect_roles(vs), lays, {"fsdp": 4, "model": 2})
>>> [(r.pattern, r.alternatives) for r in rules]
[('blk_\\\\d+/mlp/up', (('fsdp', 'model'),)), ('blk_\\\\d+/mlp/down', (('model', 'fsdp'),))]
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from planc.diagnostics.text import hidden

_RUN = re.compile(r"([0-9]+)")
_META = set(".^$*+?{}[]\\|()")
_SEPARATORS = {"/", "\\.", "_", "-", ":"}
_MAX_MIDDLE = 48  # characters a factored alternative may have before rules stay apart
_MAX_ALTERNATIVES = 3
_MERGE_BUDGET = 5_000_000

_KIND_LABEL = {
    "embedding": "embedding", "attention": "attention query/key/value",
    "attention_out": "attention output", "mlp": "MLP", "experts": "stacked experts",
    "router": "expert router", "norm": "norm scale", "bias": "bias", "scalar": "scalar",
    "other": "no known role",
}


@dataclass(frozen=True)
class RuleSpec:
    """One suggested rule: its pattern, its layouts (alternatives, best first), the role
    it serves, and the indices of the variables it lays out."""

    pattern: str
    alternatives: tuple
    kind: str
    label: str
    members: tuple[int, ...]


@dataclass
class _Family:
    atoms: list  # the pattern, one escaped character (or `\\d+`, or a group) each
    kind: str
    members: list


def _escape(ch: str) -> str:
    """`ch` as a pattern writes it: a person reviews the plan, so a character that is not
    plainly visible (a tab, U+202E, a zero-width space) is an escape Python's `re`
    reads, never the character itself."""
    if ch in _META:
        return "\\" + ch
    if ch == '"':
        return '\\"'
    if hidden(ch):
        n = ord(ch)
        return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"
    return ch


def _atoms(text: str) -> list:
    return [_escape(c) for c in text]


def group_rules(variables, roles, layouts, sizes: dict):
    """(rules, indices left to `default`): `layouts` has one layout per variable; `sizes`
    maps each axis to its size, to check that alternatives resolve as chosen."""
    whole = [i for i, lay in enumerate(layouts) if all(e is None for e in lay)]
    families = _families(variables, roles, layouts, set(whole))
    rules = _merge(families, variables, roles, layouts, sizes)
    rules.sort(key=lambda r: r.members[0])
    return rules, tuple(whole)


def _families(variables, roles, layouts, whole: set) -> list[_Family]:
    # Variables left whole are grouped too: a layer left whole must not be matched by the
    # `\d+` of its split neighbours.
    groups: dict[tuple, list[int]] = {}
    for i, v in enumerate(variables):
        parts = _RUN.split(v.path)
        groups.setdefault(tuple(parts[0::2]), []).append(i)
    out = []
    for skeleton, members in groups.items():
        classes: dict[tuple, list[int]] = {}
        for i in members:
            key = None if i in whole else (roles[i].kind, layouts[i])
            classes.setdefault(key, []).append(i)
        if len(classes) == 1 and None not in classes:
            out.append(_family(skeleton, members, members, variables, roles, layouts, True))
            continue
        for key, cls in classes.items():
            if key is None:
                continue
            fam = _family(skeleton, cls, members, variables, roles, layouts, True)
            if not _matches_only(fam, cls, members, variables):
                fam = _family(skeleton, cls, members, variables, roles, layouts, False)
            if _matches_only(fam, cls, members, variables):
                out.append(fam)
            else:
                out += [_Family(_atoms(variables[i].path), roles[i].kind, [i]) for i in cls]
    return out


def _family(skeleton, cls, group, variables, roles, layouts, loose: bool) -> _Family:
    runs = [_RUN.split(variables[i].path)[1::2] for i in cls]
    every = [_RUN.split(variables[i].path)[1::2] for i in group]
    atoms: list = []
    for pos, text in enumerate(skeleton):
        atoms += _atoms(text)
        if pos == len(skeleton) - 1:
            break
        values = sorted({r[pos] for r in runs}, key=lambda s: (len(s), s))
        if len(values) == 1:
            atoms += list(values[0])
        elif loose and set(values) == {r[pos] for r in every}:
            atoms.append(r"\d+")
        else:
            atoms.append("(" + "|".join(values) + ")")
    return _Family(atoms, roles[cls[0]].kind, list(cls))


def _matches_only(fam: _Family, cls, group, variables) -> bool:
    rx = re.compile("".join(fam.atoms).replace('\\"', '"'), re.ASCII)
    want = set(cls)
    return all(bool(rx.fullmatch(variables[i].path)) == (i in want) for i in group)


def _merge(families, variables, roles, layouts, sizes) -> list[RuleSpec]:
    paths = [v.path for v in variables]
    owner = {i: n for n, f in enumerate(families) for i in f.members}
    placed: set[int] = set()
    clusters: list[tuple[list, list[_Family]]] = []  # (pattern tokens, families)
    # Each try matches every path once; a model of many unrelated names stops merging
    # after this many path matches rather than try every pair.
    budget = _MERGE_BUDGET
    for n, fam in enumerate(families):
        if n in placed:
            continue
        placed.add(n)
        tokens = _tokens(fam.atoms)
        for c, (pattern, members) in enumerate(clusters):
            if budget < len(paths):
                clusters.append((tokens, [fam]))
                break
            if members[0].kind != fam.kind:
                continue
            merged = _aligned(pattern, tokens)
            budget -= len(tokens) + len(pattern)
            if merged is not None:
                budget -= len(paths)
            taken = None if merged is None else _absorbed(merged, members + [fam], families,
                                                          owner, placed, paths)
            if taken is not None and _mergeable(members + [fam] + taken, variables, layouts,
                                                sizes):
                placed.update(families.index(f) for f in taken)
                clusters[c] = (merged, members + [fam] + taken)
                break
        else:
            clusters.append((tokens, [fam]))
    return [_rule("".join(p), c, roles, layouts, sizes) for p, c in clusters]


def _absorbed(tokens: list, cluster, families, owner, placed, paths):
    """The families, not yet placed and of the cluster's kind, that `tokens` also matches
    whole (a merged pattern generalises ahead of them); None if it matches anything else."""
    rx = re.compile("".join(tokens).replace('\\"', '"'), re.ASCII)
    want = {i for f in cluster for i in f.members}
    extra: dict[int, set] = {}
    for i, p in enumerate(paths):
        hit = bool(rx.fullmatch(p))
        if hit and i not in want:
            n = owner.get(i)
            if n is None or n in placed or families[n].kind != cluster[0].kind:
                return None
            extra.setdefault(n, set()).add(i)
        elif not hit and i in want:
            return None
    if any(len(ids) != len(families[n].members) for n, ids in extra.items()):
        return None
    return [families[n] for n in sorted(extra)]


def _tokens(atoms: list) -> list:
    """Atoms grouped into words, separators and `\\d+`, the units rules are merged by."""
    out: list = []
    word = ""
    for a in atoms:
        if a in _SEPARATORS or a == r"\d+" or a.startswith("("):
            if word:
                out.append(word)
                word = ""
            out.append(a)
        else:
            word += a
    if word:
        out.append(word)
    return out


def _choices(tokens: list) -> list[str]:
    if len(tokens) == 1 and tokens[0].startswith("(") and tokens[0].endswith(")"):
        return _split_group(tokens[0][1:-1])
    return ["".join(tokens)]


def _split_group(inner: str) -> list[str]:
    out, depth, cur = [], 0, ""
    i = 0
    while i < len(inner):
        c = inner[i]
        if c == "\\":
            cur += inner[i:i + 2]
            i += 2
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "|" and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += c
        i += 1
    return out + [cur]


def _aligned(a: list, b: list):
    """`a` and `b` as one pattern: what they share kept, each place they differ a group of
    both choices (`(query|key)`, `(_2)?`, or `\\d+` for a number against `\\d+`); None
    when a choice would be too long to read."""
    out: list = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    groups = 0
    for op, i1, i2, j1, j2 in _coalesced(matcher.get_opcodes(), a):
        if op == "equal":
            out += a[i1:i2]
            continue
        x, y = a[i1:i2], b[j1:j2]
        if {"".join(x).isdigit(), "".join(y).isdigit()} <= {True} or \
                (x == [r"\d+"] and "".join(y).isdigit()) or (y == [r"\d+"] and "".join(x).isdigit()):
            out.append(r"\d+")
            continue
        (x, ox), (y, oy) = _unwrap(x), _unwrap(y)
        optional = ox or oy or not x or not y
        choices = []
        for side in (x, y):
            if side:
                for c in _choices(side):
                    if c not in choices:
                        choices.append(c)
        if any(len(c) > _MAX_MIDDLE for c in choices) or "" in choices:
            return None
        groups += 1
        out.append("(" + "|".join(choices) + (")?" if optional else ")"))
    if groups > 2 or not any(t not in _SEPARATORS and not t.startswith("(") for t in out):
        return None
    return out


def _coalesced(opcodes, a: list) -> list:
    """Differences separated only by separators are one difference: `(lm_head|embed_tokens)`
    reads better than `(lm|embed)_(head|tokens)`, and matches only what it should."""
    out: list = []
    for op in opcodes:
        if len(out) >= 2 and op[0] != "equal" and out[-1][0] == "equal" and \
                out[-2][0] != "equal" and all(t in _SEPARATORS for t in a[out[-1][1]:out[-1][2]]):
            out.pop()
            prev = out.pop()
            op = ("replace", prev[1], op[2], prev[3], op[4])
        out.append(op)
    return out


def _unwrap(side: list):
    """An optional group `(a|b)?` as the group `(a|b)` and True; anything else as is."""
    if len(side) == 1 and side[0].startswith("(") and side[0].endswith(")?"):
        return [side[0][:-1]], True
    return side, False


def _mergeable(cluster, variables, layouts, sizes) -> bool:
    alts = _alternatives(cluster, layouts, sizes)
    if len(alts) > _MAX_ALTERNATIVES:
        return False
    for f in cluster:
        for i in f.members:
            first = next((a for a in alts if _fits(a, variables[i].shape, sizes)), None)
            if first != layouts[i]:
                return False
    return True


def _alternatives(cluster, layouts, sizes) -> tuple:
    seen: dict = {}
    for f in cluster:
        for i in f.members:
            seen.setdefault(layouts[i], len(seen))
    return tuple(sorted(seen, key=lambda lay: (-_split(lay, sizes), seen[lay])))


def _split(layout, sizes) -> int:
    n = 1
    for e in layout:
        for name in ((e,) if isinstance(e, str) else (e or ())):
            n *= sizes.get(name, 1)
    return n


def _fits(layout, shape, sizes) -> bool:
    if len(layout) != len(shape):
        return False
    return all(d % _split((e,), sizes) == 0 for d, e in zip(shape, layout))


def _rule(pattern: str, cluster, roles, layouts, sizes) -> RuleSpec:
    members = tuple(sorted(i for f in cluster for i in f.members))
    labels = []
    for i in members:
        if roles[i].label not in labels:
            labels.append(roles[i].label)
    label = labels[0] if len(labels) == 1 else _KIND_LABEL.get(cluster[0].kind, labels[0])
    return RuleSpec(pattern, _alternatives(cluster, layouts, sizes), cluster[0].kind, label,
                    members)
