"""The inputs of the fuzzer (`tests/fuzzing.py`): grammar-aware plans, byte-level
mutations of the example plans, and fixed hostile inputs no random walk reaches.

* `plans()`: a hypothesis strategy for plan texts, every statement of
  `grammar/planc.lark` with random names, sizes, patterns, layouts and expressions; with
  `near=True` (the default) about half of them get one token deleted, duplicated,
  swapped with its neighbour or replaced.
* `corpus()`, `mutate()`, `mutated_corpus()`: the example plans in `plans/` and
  byte-level mutations of them (deletions, insertions of hostile bytes, swaps,
  truncation, a byte-order mark, CRLF line ends, non-UTF-8 bytes).
* `hostile_inputs()`: a 10 MB line, thousands of nested brackets, expressions thousands
  of operations deep, a plan of 50,000 rules, ...
"""

from __future__ import annotations

import os
import random
from pathlib import Path

__all__ = ["corpus", "hostile_inputs", "mutate", "mutated_corpus", "plans"]

# Words the generator draws names from: mesh axes, the words that mean something in
# one place, keywords (a syntax error where a name is expected), Python spellings.
_AXES = ("batch", "model", "data", "fsdp", "x")
_WORDS = _AXES + ("tp", "heads", "full", "search", "error", "first", "per_device", "state",
                  "coordinator", "processes", "process_id", "None", "auto", "default",
                  "layout", "_", "mesh", "replicated", "env", "and")
_PATTERNS = (
    "dense/kernel", ".*kernel", "dense/.*", ".*", "", "decoder_block.*(query|key).kernel",
    r"model\.layers\.\d+\.self_attn\.(q|k|v)_proj\.weight", r"params/layers/attn/w(q|k|v)",
    "(a+)+$", "(a|aa)+b", "(.*a){20}", "(x+x+)+y", "^(([a-z])+.)+[A-Z]([a-z])+$",
    "[", "(", "a{2000}", "(?=x)", r"(\w+)\1", "(?P<n>a)(?P=n)", "a**", r"\\", r"\"",
    "(?i)DENSE/KERNEL", r"\d+\Z", "wéight/ß", "[^/]+/[^/]+", "a{1000}{1000}",
    "(" * 300 + ")" * 300, r"\N{LATIN SMALL LETTER A}", "(?x) a b # c",
    r"(\w+_?)+/kernel", "a|(K|k)", r"(?:x|([Ss]))", r"\B", r".*\B.*", r"(?u)\w+",
    r"\w+/kernel", "kernel$", "dense[0]/kernel", r"(?i)k.*",
)
_INCLUDES = ("inc.kd", "sub/inc.kd", "bad.kd", "cycle.kd", "chain0.kd", "binary.kd",
             "link_out.kd", "loop.kd", "missing.kd", "../outside.kd", "sub/../inc.kd",
             "sub/../../outside.kd", "/etc/hostname", "", ".", "sub", "big.kd")
_UNITS = ("B", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB")
_OPS = ("+", "-", "*", "//", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or")
_SPARE_TOKENS = ("(", ")", "{", "}", "[", "]", ",", "=", "->", "|", "...", "_", '"',
                 "'x'", ":", "None", "#", "layout", "mesh", "0", "-1", "\\", "\x00", "\ufeff")


# -- inputs: grammar-aware plans ------------------------------------------------------------

def plans(near: bool = True):
    """A hypothesis strategy for plan texts: valid statements, and with `near` also
    near-valid ones (one token deleted, duplicated, swapped or replaced)."""
    from hypothesis import strategies as st

    ident = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
    name = st.one_of(st.sampled_from(_WORDS), ident)
    axis = st.one_of(st.sampled_from(_AXES), name)
    integer = st.one_of(st.integers(0, 64).map(str), st.sampled_from(
        ("1_000", "0", "00", "1" + "0" * 29, "9" * 31, "18446744073709551616")))
    size = st.builds(lambda n, sp, u: f"{n}{sp}{u}", integer, st.sampled_from(("", " ")),
                     st.sampled_from(_UNITS))
    string_body = st.one_of(
        st.sampled_from(_PATTERNS),
        st.text(st.characters(blacklist_characters='"\\\n\r', blacklist_categories=("Cs",)),
                max_size=12),
        st.lists(st.sampled_from(("a", "\\.", "\\\"", "\\d", ".", "*", "(", ")", "|", "é")),
                 max_size=8).map("".join))
    string = string_body.map(lambda b: '"' + _escape(b) + '"')
    env_call = st.builds(lambda v, d: ["env", "(", v] + ([",", d] if d else []) + [")"],
                         string, st.one_of(st.none(), integer, string, name))
    value = st.one_of(integer.map(lambda t: [t]), size.map(lambda t: [t]),
                      string.map(lambda t: [t]), name.map(lambda t: [t]), env_call,
                      st.sampled_from((["1f1b"], ["gpipe"], ["interleaved", "(", "2", ")"],
                                       ["interleaved", "(", "0", ")"], ["10%"], ["12.5 %"],
                                       ["0%"], ["120 ms"], ["looped_bfs", "(", "3", ")"],
                                       ["interleaved", "(", "3000000", ")"],
                                       ["looped_bfs", "(", "1000000000000", ")"])))

    def kwargs(keys):
        pair = st.builds(lambda k, v: [k, "="] + v, keys, value)
        return st.lists(pair, max_size=4).map(_comma_join)

    entry = st.one_of(
        st.just(["_"]), st.just(["..."]), axis.map(lambda a: [a]),
        st.builds(lambda a, b: [a, "[", b, "]"], axis, integer),
        st.builds(lambda axes, b: ["("] + _comma_join([[a] for a in axes]) + [")"] +
                  (["[", b, "]"] if b else []),
                  st.lists(axis, min_size=2, max_size=3), st.one_of(st.none(), integer)))
    alternative = st.one_of(
        st.just(["replicated"]),
        st.lists(entry, max_size=5).map(lambda es: ["("] + _comma_join(es) + [")"]))
    layout = st.lists(alternative, min_size=1, max_size=3).map(
        lambda alts: [t for i, a in enumerate(alts) for t in (["|"] if i else []) + a])
    rule = st.one_of(st.builds(lambda p, lay: [p, "->"] + lay, string, layout),
                     layout.map(lambda lay: ["default", "->"] + lay))
    rules = st.lists(rule, max_size=6).map(lambda rs: [t for r in rs for t in r])
    template = st.one_of(string, st.sampled_from(
        (r'"x/\1"', r'"\g<0>"', r'"\g<n>"', r'"\2"', '""', r'"a\\b"', r'"\g<1"', r'"\q"')))
    rename_rule = st.builds(lambda p, tpl, opt: [p, "->", tpl] + opt, string, template,
                            st.sampled_from(([], ["transpose"], ["transpos"],
                                             ["transpose", "transpose"])))
    renames = st.lists(rename_rule, max_size=4).map(lambda rs: [t for r in rs for t in r])

    def grow(sub):
        return st.one_of(
            st.builds(lambda a, op, b: a + [op] + b, sub, st.sampled_from(_OPS), sub),
            sub.map(lambda e: ["not"] + e), sub.map(lambda e: ["-"] + e),
            sub.map(lambda e: ["("] + e + [")"]))

    expr = st.recursive(st.one_of(integer, axis).map(lambda t: [t]), grow, max_leaves=8)

    targets = st.one_of(axis.map(lambda a: [a]), st.just(["_"]),
                        st.lists(axis, min_size=1, max_size=3).map(
                            lambda xs: ["("] + _comma_join([[x] for x in xs]) + [")"]))
    logical = st.lists(st.builds(lambda n, t: [n, "->"] + t, name, targets), max_size=4).map(
        lambda es: ["axes", "{"] + [t for e in es for t in e] + ["}"])
    stage = st.one_of(st.sampled_from((["first"], ["last"], ["\\1", "/", "2"], ["\\2"],
                                       ["\\1", "-", "1"], ["first", "+", "1"],
                                       ["\\1", "/", "0"], ["\\1", "%", "(", "2", "-", "2", ")"],
                                       ["\\1", "and", "2"], ["\\2", "/", "\\1"])), expr)
    stage_rules = st.lists(st.builds(lambda p, v: [p, "->"] + v, string, stage), max_size=4)
    stages = st.builds(
        lambda a, k, rs: ["stages", "(", a] + ([","] + k if k else []) + [")", "{"]
        + [t for r in rs for t in r] + ["}"],
        axis, kwargs(st.sampled_from(("microbatches", "schedule", "microbatch"))), stage_rules)

    mesh_axis = st.builds(lambda a, s: [a, "="] + s, axis,
                          st.one_of(integer.map(lambda t: [t]), st.just(["auto"]),
                                    name.map(lambda t: [t])))
    statement = st.one_of(
        name.map(lambda n: ["plan", n]),
        st.builds(lambda n, v: ["param", n, "="] + v, name, value),
        st.lists(mesh_axis, max_size=4).map(lambda a: ["mesh", "("] + _comma_join(a) + [")"]),
        kwargs(axis).map(lambda k: ["slices", "("] + k + [")"]),
        st.just(["data_parallel"]),
        st.just(["model_parallel"]),
        st.builds(lambda k, axes: ["model_parallel", "(", k, "="] + axes + [")"],
                  st.sampled_from(("batch", "batch", "bacth")),
                  st.one_of(axis.map(lambda a: [a]), st.lists(axis, min_size=1, max_size=3)
                            .map(lambda xs: ["("] + _comma_join([[x] for x in xs]) + [")"]))),
        st.builds(lambda m: ["match", m], st.sampled_from(("full", "search", "fulll"))),
        st.builds(lambda m: ["overlap", m], st.sampled_from(("error", "first", "last"))),
        rules.map(lambda r: ["layout", "{"] + r + ["}"]),
        rules.map(lambda r: ["outputs", "{"] + r + ["}"]),
        renames.map(lambda r: ["rename", "{"] + r + ["}"]),
        kwargs(st.sampled_from(("per_device", "state", "per_devices", "imbalance"))).map(
            lambda k: ["budget", "("] + k + [")"]),
        logical,
        stages,
        st.builds(lambda e, m: ["check"] + e + [",", m], expr, string),
        st.sampled_from(_INCLUDES).map(lambda p: ["include", '"' + _escape(p) + '"']),
        kwargs(st.sampled_from(("coordinator", "processes", "process_id", "nodes"))).map(
            lambda k: ["cluster", "{"] + k + ["}"]),
    )
    # Most plans start from a sound skeleton, so the checker and the resolver get past
    # the first missing statement and meet the interesting ones.
    skeleton = st.sampled_from((
        [],
        [["data_parallel"]],
        [["mesh", "(", "batch", "=", "auto", ",", "model", "=", "2", ")"],
         ["model_parallel", "(", "batch", "=", "batch", ")"]],
        [["param", "tp", "=", "4"],
         ["mesh", "(", "data", "=", "auto", ",", "model", "=", "tp", ")"],
         ["model_parallel", "(", "batch", "=", "data", ")"]],
    ))
    separator = st.sampled_from((" ", " ", "\n", "\t", "\r\n", "  # note\n", "\n\n"))

    @st.composite
    def plan_text(draw):
        stmts = draw(skeleton) + draw(st.lists(statement, max_size=6))
        order = draw(st.permutations(range(len(stmts))))
        tokens = [t for i in order for t in stmts[i]]
        if near and tokens and draw(st.booleans()):
            tokens = _near(tokens, draw(st.integers(0, len(tokens) - 1)),
                           draw(st.sampled_from(("delete", "duplicate", "swap", "replace"))),
                           draw(st.sampled_from(_SPARE_TOKENS)))
        out = []
        for t in tokens:
            out.append(t)
            out.append(draw(separator))
        return "".join(out)

    return plan_text()


def _comma_join(parts: list[list[str]]) -> list[str]:
    out: list[str] = []
    for i, p in enumerate(parts):
        if i:
            out.append(",")
        out += p
    return out


def _escape(body: str) -> str:
    """`body` as the inside of a planc string: a quote is written `\\"`."""
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\" and i + 1 < len(body):
            out.append(body[i:i + 2])
            i += 2
            continue
        out.append('\\"' if body[i] == '"' else "\\\\" if body[i] == "\\" else body[i])
        i += 1
    return "".join(out)


def _near(tokens: list[str], i: int, how: str, spare: str) -> list[str]:
    tokens = list(tokens)
    if how == "delete":
        del tokens[i]
    elif how == "duplicate":
        tokens.insert(i, tokens[i])
    elif how == "swap" and i + 1 < len(tokens):
        tokens[i], tokens[i + 1] = tokens[i + 1], tokens[i]
    else:
        tokens[i] = spare
    return tokens


# -- inputs: byte-level mutations of the example plans -----------------------------------------

_HOSTILE_BYTES = (b"\x00", b"\xff", b"\xc3", b"\xe2\x80", b"\xed\xa0\x80", b"\xef\xbb\xbf",
                  b'"', b"\\", b"(", b")", b"{", b"}", b"[", b"]", b"#", b"->", b"|", b"...",
                  b"\r", b"\r\n", b"\n", b"\t", b"\x1b[31m", b"\xe2\x80\xae", b"'", b":",
                  b"auto", b"_", b"include \"inc.kd\"\n", b"9" * 40, b"\xc2\x85")


def corpus(directory: str | os.PathLike | None = None) -> dict[str, bytes]:
    """The example plans (`plans/*.kd` of the source tree, or in `directory`), by name."""
    roots = [Path(directory)] if directory else [
        Path(__file__).resolve().parent.parent / "plans", Path.cwd() / "plans"]
    for root in roots:
        found = {p.name: p.read_bytes() for p in sorted(root.glob("*.kd"))}
        if found:
            return found
    return {}


def mutate(data: bytes, rng: random.Random, steps: int | None = None) -> bytes:
    """`data` after 1-4 random byte-level edits drawn from `rng`."""
    for _ in range(steps if steps is not None else rng.randint(1, 4)):
        data = _edit(data, rng.randrange(10), rng.randrange(max(len(data), 1)),
                     rng.randrange(1, 32), rng.randrange(len(_HOSTILE_BYTES)), rng.randrange(256))
    return data


def _edit(data: bytes, op: int, at: int, n: int, pick: int, byte: int) -> bytes:
    at = min(at, len(data))
    if op == 0:  # delete a run
        return data[:at] + data[at + n:]
    if op == 1:  # insert a hostile token
        return data[:at] + _HOSTILE_BYTES[pick] + data[at:]
    if op == 2:  # insert an arbitrary byte
        return data[:at] + bytes([byte]) + data[at:]
    if op == 3:  # swap two runs
        other = min(at + n, len(data))
        return data[:at] + data[other:other + n] + data[at + n:other] + data[at:at + n] + \
            data[other + n:]
    if op == 4:  # truncate
        return data[:at]
    if op == 5:  # duplicate a run
        return data[:at + n] + data[at:at + n] + data[at + n:]
    if op == 6:
        return b"\xef\xbb\xbf" + data
    if op == 7:
        return data.replace(b"\n", b"\r\n")
    if op == 8:  # old Mac line ends: a lone CR
        return data.replace(b"\n", b"\r")
    return data[:at] + bytes([byte | 0x80]) + data[at + 1:]  # a stray non-UTF-8 byte


def mutated_corpus(directory: str | os.PathLike | None = None):
    """A hypothesis strategy for byte-level mutations of the example plans."""
    from hypothesis import strategies as st

    files = corpus(directory)
    edit = st.tuples(st.integers(0, 9), st.integers(0, 4096), st.integers(1, 31),
                     st.integers(0, len(_HOSTILE_BYTES) - 1), st.integers(0, 255))

    def apply(args):
        data, edits = args
        for e in edits:
            data = _edit(data, *e)
        return data

    return st.tuples(st.sampled_from(sorted(files.values())),
                     st.lists(edit, min_size=1, max_size=4)).map(apply)


def hostile_inputs() -> dict[str, bytes]:
    """Inputs no random walk reaches, by name; each must be refused cleanly and quickly."""
    head = b"mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"
    deep = 5_000
    return {
        "10 MB line": head + b"# " + b"x" * (10 << 20) + b"\n",
        "10 MB name": b"plan " + b"x" * (10 << 20),
        "10 MB string": head + b'layout { "' + b"a" * (10 << 20) + b'" -> replicated }',
        "nested brackets in a check": head + b"check " + b"(" * deep + b"1" + b")" * deep +
                                      b' == 1, "x"',
        "nested brackets in a layout": head + b'layout { "a" -> ' + b"(" * deep + b"_" +
                                       b")" * deep + b" }",
        "unclosed brackets": b"(" * deep,
        "nested brackets in a pattern": head + b'layout { "' + b"(" * deep + b"a" +
                                        b")" * deep + b'" -> replicated }',
        "a chain of `not`": head + b"check " + b"not " * deep + b'1, "x"',
        "a chain of minus signs": head + b"check " + b"-" * deep + b'1 == 1, "x"',
        "a long sum": head + b"check " + b" + ".join([b"1"] * deep) + b' > 0, "x"',
        "a huge integer": b"param n = " + b"9" * 100_000 + b"\ndata_parallel\n",
        "a huge size": b"budget(per_device = " + b"9" * 5_000 + b" GiB)\ndata_parallel\n",
        "50,000 rules": head + b"layout {\n" + b"".join(b'"a%d" -> replicated\n' % i
                                                      for i in range(50_000)) + b"}\n",
        "byte-order mark": b"\xef\xbb\xbf" + head,
        "CRLF line ends": head.replace(b"\n", b"\r\n") + b'layout {\r\n "a" -> (_, model)\r\n}',
        "lone CR line ends": head.replace(b"\n", b"\r") + b'layout {\r "a" -> (nope)\r}',
        "30-digit products in a check": b"param a = " + b"9" * 30 + b"\n" + head +
                                        b"check " + b" * ".join([b"a"] * 190) + b' > 0, "x"',
        "30-digit products in many checks": b"param a = " + b"9" * 30 + b"\n" + head +
                                            b"".join(b"check " + b" * ".join([b"a"] * 150) +
                                                     b' > %d, "x"\n' % i for i in range(60)),
        "NUL bytes": head + b"\x00" * 100,
        "bad UTF-8": head + b"\xff\xfe\xfd",
        "a lone surrogate in UTF-8": head + b'layout { "\xed\xa0\x80" -> replicated }',
        "terminal escapes": head + b'check 1 == 2, "\x1b[2J\x1b[31mfine\xe2\x80\xae"',
        "a hundred million pipeline stages": b"mesh(pipe = 100000000, fsdp = 2)\n"
                                             b"model_parallel(batch = fsdp)\n"
                                             b"stages(pipe, microbatches = 8) {}\n",
        "10^12 virtual stages": head + b"stages(model, microbatches = 8, schedule = "
                                       b"interleaved(1000000000000)) {}\n",
        "100,000 slices": head + b"slices(batch = 100000)\n",
        "10,000 unused axis names": head + b"axes {\n" + b"".join(
            b"n%d -> model\n" % i for i in range(10_000)) + b"}\n",
        "two axes tables": head + b"axes {\n  a -> model\n}\naxes {\n  b -> model\n}\n",
        "empty": b"",
        "only whitespace": b" \t\r\n\x0c" * 1000,
    }
