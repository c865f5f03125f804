"""The resolver of the emitted modules that match paths (`--target jax`, `--target torch`).

Both modules carry a verbatim copy of the two sections below: `re2` (planc's own
engine where the `re2` module is importable) and `resolver`, a small resolver with
planc's semantics (`planc.resolve.Resolver`): match mode, overlap, literal precedence,
default, `...`, alternatives fitted by rank and divisibility. The differential tests
hold the two to the same answers. The code uses only `re` and the emitted module's
constants, which stand here for a plan of one `auto` axis, no rules and no default:
every variable is replicated. Writing a module reads this file without running it
(`planc.targets.emit.codegen`).
"""

from __future__ import annotations

import re

from planc.limits import MAX_PATH_LENGTH

DISTRIBUTION = "model_parallel"
MATCH = "full"
OVERLAP = "error"
RULES: tuple = ()
DEFAULT = None
OUTPUT_RULES: tuple = ()
OUTPUT_DEFAULT = None
RE2_RULES: tuple = ()
RE2_OUTPUT_RULES: tuple = ()
RE2_MAX_MEM = 64 << 20
TABLE = None
TABLE_SHAPES = None
TABLE_SIZES = None

# -- copied into emitted modules: re2 -----------------------------------------------------

def _import_re2():
    # planc's own engine, when it is installed: the patterns' RE2 translations (planc's
    # own, carried as data) match every rule in one pass, as planc does.
    try:
        import re2
    except ImportError:
        return None
    return re2


_re2 = _import_re2()


# -- copied into emitted modules: resolver ------------------------------------------------

_COMPILED = {}
_FITS = {}
_SENTINEL = r"(?s:.*)"  # always matches: an answer without it is an RE2 failure


def _matcher(rules):
    key = id(rules)
    if key not in _COMPILED:
        # ASCII: `\w`, `\d`, `\s`, `\b` and case folding as planc reads them.
        compiled = [re.compile(pattern, re.ASCII) for pattern, _ in rules]
        test = ([c.fullmatch for c in compiled] if MATCH == "full"
                else [c.search for c in compiled])
        literals = {}
        for index, (pattern, _) in enumerate(rules):
            literals.setdefault(pattern, index)
        texts = (RE2_RULES if rules is RULES else RE2_OUTPUT_RULES if rules is OUTPUT_RULES
                 else ())
        _COMPILED[key] = (test, literals, _re2_set(texts) if len(texts) == len(rules) else None)
    return _COMPILED[key]


def _re2_set(texts):
    """(Set.Match, sentinel index) over `texts`, or None: no re2, or it refuses."""
    if _re2 is None or not texts:
        return None
    try:
        options = _re2.Options()
        options.max_mem = RE2_MAX_MEM
        options.log_errors = False
        found = (_re2.Set.FullMatchSet(options) if MATCH == "full"
                 else _re2.Set.SearchSet(options))
        for text in texts:
            found.Add(text)
        sentinel = found.Add(_SENTINEL)
        found.Compile()
    except Exception:  # too large for RE2's memory, or an re2 of another API
        return None
    # google-re2's binding matches UTF-8 bytes; its Python wrapper costs a call and a
    # type test per path on top. Any other Set is matched through its own Match.
    raw = getattr(getattr(found, "_set", None), "Match", None)
    return (raw, sentinel, True) if callable(raw) else (found.Match, sentinel, False)


def _hits(test, found, path):
    """Indices of the rules that match `path`, ascending; under `overlap first`, the first.

    RE2 answers for non-empty ASCII paths (where its answers are Python's); else, or
    should it fail, each pattern is tried in file order.
    """
    if found is not None and path and path.isascii():
        match, sentinel, encoded = found
        hits = match(path.encode()) if encoded else match(path)
        if hits and sentinel in hits:
            hits.remove(sentinel)
            hits.sort()
            return hits[:1] if OVERLAP == "first" else hits
    if OVERLAP == "first":
        for i, matches in enumerate(test):
            if matches(path) is not None:
                return [i]
        return []
    return [i for i, matches in enumerate(test) if matches(path) is not None]


def _expand(alternative, rank):
    head, ellipsis, tail, replicated = alternative
    if replicated:
        return tuple(((), 1) for _ in range(rank))
    fixed = len(head) + len(tail)
    if ellipsis:
        if rank < fixed:
            return None
        return head + tuple(((), 1) for _ in range(rank - fixed)) + tail
    return head if rank == fixed else None


def _entry(axes):
    if not axes:
        return None
    return axes[0] if len(axes) == 1 else tuple(axes)


def _fit(pattern, alternatives, path, shape, sizes):
    """(entries, None) for the first alternative that fits, or (None, why not)."""
    reasons = []
    for alternative in alternatives:
        dims = _expand(alternative, len(shape))
        if dims is None:
            reasons.append(f"rank {len(shape)} does not fit")
            continue
        bad = None
        for k, ((axes, block), n) in enumerate(zip(dims, shape)):
            if not axes:
                continue
            product = 1
            for axis in axes:
                if sizes.get(axis) is None:
                    product = None
                    break
                product *= sizes[axis]
            if product is not None and n % (product * block):
                bad = (f"dimension {k} (size {n}) is not divisible by "
                       f"{block * product} ({' x '.join(axes)}"
                       + (f", blocks of {block}" if block != 1 else "") + ")")
                break
        if bad is None:
            return tuple(_entry(axes) for axes, _ in dims), None
        reasons.append(bad)
    what = ("its layout does not fit" if len(alternatives) == 1
            else "no alternative of its layout fits")
    return None, (f"`{path}` {list(shape)}: {what} (rule {pattern!r}): "
                  + "; ".join(reasons))


def _fits(sizes):
    """The `fits` of `_resolve` over the layout rules on a mesh of `sizes`, kept across
    calls for up to 64 meshes' sizes: a fit depends on the rule, the shape and the sizes
    alone. A model under 5,000 rules has 5,000 distinct (rule, shape) pairs, and fitting
    them afresh in every call was a tenth of `shardings` of 100k leaves (bench 13)."""
    key = tuple(sizes.items())
    fits = _FITS.get(key)
    if fits is None:
        fits = {}
        if len(_FITS) < 64:
            _FITS[key] = fits
    return fits


def _fitted(fits, index, pattern, alternatives, path, shape, sizes):
    """`_fit`'s answer, kept in `fits` (None: nothing kept) by rule index and shape: the
    many equal layers of a model are fitted once. A misfit, whose message names the
    path, is fitted afresh each time."""
    if fits is None:
        return _fit(pattern, alternatives, path, shape, sizes)
    key = (index, shape)
    answer = fits.get(key)
    if answer is None:
        answer = _fit(pattern, alternatives, path, shape, sizes)
        if answer[1] is None:
            fits[key] = answer
    return answer


def _resolve(rules, default, path, shape, sizes, fits=None):
    """(entries, matched, error): entries per dimension (None | axis | tuple of axes),
    whether a rule or the default applied, and an error message or None. `fits` (for the
    layout rules, `_fits(sizes)`) keeps each rule's fit per shape."""
    replicated = (None,) * len(shape)
    if DISTRIBUTION == "data_parallel":
        return replicated, True, None
    if len(path) > MAX_PATH_LENGTH:
        return replicated, False, (f"variable path is {len(path)} characters long "
                                   f"(limit {MAX_PATH_LENGTH})")
    if "\n" in path or "\r" in path:
        return replicated, False, (f"variable path {path!r} holds a line break, which no "
                                   "rule can match the same way in every target")
    if TABLE_SIZES is not None and rules is RULES and sizes == TABLE_SIZES \
            and TABLE_SHAPES.get(path) == shape:
        # A variable of the model the module was compiled against, on the mesh it was
        # resolved for: planc's own answer, embedded.
        return TABLE[path], True, None
    test, literals, found = _matcher(rules)
    index = literals.get(path)
    if index is None:
        hits = _hits(test, found, path)
        if not hits:
            if default is None:
                if len(shape) >= 2:
                    return replicated, False, (f"`{path}` {list(shape)} matches no rule and "
                                               "stays replicated")
                return replicated, False, None
            entries, why = _fitted(fits, -1, "default", default, path, shape, sizes)
            return (entries or replicated), True, why
        if len(hits) > 1 and OVERLAP == "error":
            names = ", ".join(repr(rules[i][0]) for i in hits)
            return replicated, True, f"`{path}` matches {len(hits)} rules: {names}"
        index = hits[0]
    pattern, alternatives = rules[index]
    entries, why = _fitted(fits, index, pattern, alternatives, path, shape, sizes)
    return (entries or replicated), True, why


# -- copied into emitted modules: quick ---------------------------------------------------

def _quick(sizes, convert):
    """`answer(path, shape)`: `convert(entries)` for the entries `_resolve` gives variable
    `path` of `shape` by the layout rules on a mesh of `sizes`, or None where it finds an
    error (the caller then takes `_resolve`'s own walk for the messages). `convert` is
    called once per distinct entries. Hand-tuned, as the profile of bench/shardings.py
    asks: where RE2 finds one rule (or none, and there is a default) for an ASCII path,
    the rule's answer for that shape is kept (converted for the call, fitted across
    calls: `_fits`), and the next such path is answered by the match and a lookup, not
    by `_resolve`."""
    test, literals, found = _matcher(RULES)
    table = TABLE if TABLE_SIZES is not None and sizes == TABLE_SIZES else None
    fits, made = _fits(sizes), {}

    def converted(entries):
        value = made.get(entries)
        if value is None:
            value = made[entries] = convert(entries)
        return value

    def general(path, shape):
        entries, _, why = _resolve(RULES, DEFAULT, path, shape, sizes, fits)
        return None if why is not None else converted(entries)

    if found is None or not found[2] or DISTRIBUTION == "data_parallel":
        return general
    match, sentinel, _ = found
    only_sentinel, limit = [sentinel], MAX_PATH_LENGTH
    default = -1 if DEFAULT is not None else None
    known = [{} for _ in range(len(RULES) + 1)]  # by rule (the default last), by shape

    def answer(path, shape):
        if (path and path not in literals and path.isascii() and len(path) <= limit
                and "\n" not in path and "\r" not in path):
            hits = match(path.encode())
            key = None
            if len(hits) == 2:
                a, b = hits
                key = a if b == sentinel else b if a == sentinel else None
            elif hits == only_sentinel:
                key = default
            if key is not None:
                value = known[key].get(shape)
                if value is None:
                    # A fit kept from an earlier call is this path's: one rule matched.
                    fit = fits.get((key, shape))
                    value = general(path, shape) if fit is None else converted(fit[0])
                    if value is not None:
                        known[key][shape] = value
                return value
        return general(path, shape)

    if table is None:
        return answer

    def answer_or_table(path, shape):
        # A variable of the model the module was compiled against: planc's own answer.
        if TABLE_SHAPES.get(path) == shape:
            return general(path, shape)
        return answer(path, shape)

    return answer_or_table
