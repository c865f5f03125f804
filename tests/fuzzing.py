"""Fuzzing planc's front end: no plan text may crash it, hang it or mislead it.

`python tests/fuzzing.py --cases N` (what `make fuzz` runs) feeds N inputs through the
front end and the CLI, says first how long that will take, prints its progress, then
how many ran and every failure, and exits 1 on a failure. The test suite
(`tests/robustness/test_fuzz.py`) runs a few thousand of the same cases.

Inputs come from four places:

* `plans()`: grammar-aware plans. Every statement of `grammar/planc.lark` with random
  names, sizes, patterns, layouts and expressions; with `near=True` (the default) about
  half of them get one token deleted, duplicated, swapped with its neighbour or replaced.
* `mutated_corpus()`: byte-level mutations of the example plans in `plans/`: deletions,
  insertions of hostile bytes (NUL, bad UTF-8, quotes, brackets), swaps, truncation,
  a byte-order mark, CRLF line ends, non-UTF-8 bytes.
* `hostile_inputs()`: fixed cases no random walk reaches: a 10 MB line, thousands of
  nested brackets, expressions thousands of operations deep, a plan of 50,000 rules.
* `tests/fuzzing_io.py`: what planc reads besides plans, checkpoint headers with extreme
  numbers or data outside the file, and the language server's framing.

`check_case` runs one input through `decode -> loads -> resolve -> fmt` and returns the
ways it misbehaved: any exception other than `PlanError`, a diagnostic without a
location (only P109, an override of an undeclared parameter, has none), a valid plan the
formatter refuses or formats differently the second time. `check_cli` runs `planc lint`
and `planc fmt --check` in-process and returns the same for the command line: an exit
code other than 0, 1 or 2, a traceback, or an "internal error".

It lives with the tests, not in the wheel: it needs hypothesis, a test dependency
(imported on first use).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import sys
import tempfile
import time
import traceback
from pathlib import Path

from planc import limits
from planc.syntax.files import decode_plan_bytes
from planc.diagnostics import CODES, PlanError
from planc.variables import Variable

__all__ = ["SUBPROCESS_CASES", "VARIABLES", "check_case", "check_cli", "check_subprocess",
           "cli_output_problems", "corpus", "hostile_inputs", "make_workspace", "mutate",
           "mutated_corpus", "plans", "run", "main"]

# What plans are resolved against: the shapes of real layers, paths of every style the
# example plans use, and paths that stress the matcher (long, empty, non-ASCII).
VARIABLES: tuple[Variable, ...] = (
    Variable("dense/kernel", (8, 16)),
    Variable("dense/bias", (16,)),
    Variable("token_embedding/embeddings", (256, 64)),
    Variable("decoder_block_0/attention/query/kernel", (8, 4, 16)),
    Variable("decoder_block_0/ffw_gating/kernel", (64, 128)),
    Variable("params/layers/attn/wq", (4, 64, 8, 8)),
    Variable("model.layers.0.self_attn.q_proj.weight", (64, 64)),
    Variable("lm_head.weight", (250, 64)),
    Variable("scalar", ()),
    Variable("", (3,)),
    Variable("wéight/ß", (6, 6)),
    Variable("a" * 20_000, (2, 2)),
    # Where regex engines part ways on non-ASCII text: case orbits that leave ASCII
    # (U+212A KELVIN SIGN, U+017F LONG S), letters that are `\w` only in Unicode, a
    # two-byte space where a byte-level search finds a `\B`, a Unicode digit.
    Variable("\u212a/kernel", (8, 8)),
    Variable("couche_entr\xe9e/kernel", (8, 8)),
    Variable("\u017f\xa0s/\u0663", (4, 4)),
    # Text a terminal or a markup renderer would act on, and a line break.
    Variable("emb[/]/x[red]RED\x1b[2J\u202e", (4, 4)),
    Variable("dense[0]/kernel", (8, 8)),
    Variable("a/kernel\n", (8, 8)),
)

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
                      string.map(lambda t: [t]), name.map(lambda t: [t]), env_call)

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
        kwargs(st.sampled_from(("per_device", "state", "per_devices"))).map(
            lambda k: ["budget", "("] + k + [")"]),
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
        "empty": b"",
        "only whitespace": b" \t\r\n\x0c" * 1000,
    }


# -- running one case -------------------------------------------------------------------------

def make_workspace(root: str | os.PathLike) -> Path:
    """Write the files fuzzed `include`s reach under `root`; return the plans' directory.

    `plan/` holds a good include, one in a subdirectory, one with a syntax error, a
    cycle, a chain deeper than the include limit, a non-UTF-8 file, a symlink out of the
    tree, a symlink loop and a file over the size limit; `outside.kd` sits beside it.
    """
    root = Path(root)
    plan_dir = root / "plan"
    (plan_dir / "sub").mkdir(parents=True, exist_ok=True)
    (root / "outside.kd").write_text("param outside = 1\n")
    files = {
        "inc.kd": 'param inc = 2\nlayout { "inc/.*" -> replicated }\n',
        "sub/inc.kd": 'check 1 == 1, "always"\n',
        "bad.kd": "mesh(batch = \n",
        "cycle.kd": 'include "cycle.kd"\n',
    }
    depth = limits.MAX_INCLUDE_DEPTH + 2
    for i in range(depth):
        files[f"chain{i}.kd"] = f'include "chain{i + 1}.kd"\n' if i + 1 < depth else ""
    for name, text in files.items():
        (plan_dir / name).write_text(text)
    (plan_dir / "binary.kd").write_bytes(b"param x = 1\n\xff\xfe\n")
    (plan_dir / "big.kd").write_bytes(b"#" * (limits.MAX_PLAN_BYTES + 1))
    for link, to in (("link_out.kd", "../outside.kd"), ("loop.kd", "loop.kd")):
        with contextlib.suppress(FileExistsError, OSError, NotImplementedError):
            os.symlink(to, plan_dir / link)
    return plan_dir


def check_case(data: bytes | str, file: str | os.PathLike = "fuzz.kd",
               variables=VARIABLES) -> list[str]:
    """Everything wrong with how planc handles `data` (empty when it behaves).

    bytes are decoded as a plan file is; `file` names the plan and anchors its includes.
    """
    file = os.fspath(file)
    problems: list[str] = []
    text = data if isinstance(data, str) else None
    if text is None:
        try:
            text = decode_plan_bytes(data, file)
        except PlanError as exc:
            return _diagnosis("decoding", exc)
        except BaseException as exc:  # noqa: BLE001 - the point is to catch everything
            return [_crash("decoding", exc)]
    plan = None
    try:
        from planc.plan import loads

        plan = loads(text, file=file)
    except PlanError as exc:
        problems += _diagnosis("loads", exc)
    except BaseException as exc:  # noqa: BLE001
        problems.append(_crash("loads", exc))
    if plan is not None:
        problems += _unlocated("loads (warnings)", plan.diagnostics, plan.ir.source_dict)
        problems += _resolve(plan, variables)
        problems += _engines_agree(plan, variables)
    problems += _format(text, file, valid=plan is not None)
    return problems


def _engines_agree(plan, variables) -> list[str]:
    """Where planc's matcher and Python's `re` (as the emitted modules call it: ASCII
    classes) disagree on a rule's pattern and a path. Patterns P314 reports are left
    out: Python may take years on them."""
    import re

    from planc.matching import Matcher
    from planc.matching.backtracking import exponential

    problems = []
    mode = plan.ir.match
    test = re.fullmatch if mode == "full" else re.search
    paths = [v.path for v in variables if len(v.path) < 200 and "\n" not in v.path]
    for rule in (*plan.ir.rules, *plan.ir.outputs):
        pattern = rule.pattern
        if pattern is None or exponential(pattern):
            continue
        try:
            matcher = Matcher([pattern], mode)
            for path in paths:
                ours = bool(matcher.match(path))
                theirs = test(pattern, path, re.ASCII) is not None
                if ours != theirs:
                    problems.append(f"engines disagree: {pattern!r} on {path!r} ({mode}): "
                                    f"planc {ours}, Python re {theirs}")
        except BaseException as exc:  # noqa: BLE001
            problems.append(_crash(f"matching {pattern!r}", exc))
    return problems


def _resolve(plan, variables) -> list[str]:
    from planc.resolve import Resolver

    problems = []
    stages = [("resolve", plan)]
    try:
        stages.append(("resolve on 8 devices", plan.with_devices(8)))
    except PlanError as exc:
        problems += _diagnosis("with_devices(8)", exc)
    except BaseException as exc:  # noqa: BLE001
        problems.append(_crash("with_devices(8)", exc))
    for what, p in stages:
        # The outputs block is resolved only where the plan writes one, as backends do.
        blocks = ("layout", "outputs") if p.ir.outputs or p.ir.outputs_default else ("layout",)
        for block in blocks:
            where = f"{what} ({block})"
            try:
                resolver = Resolver(p.ir, block)
                result = resolver.resolve_all(variables)
                problems += _unlocated(where, result.diagnostics, p.ir.source_dict,
                                       spanless=("P125",))
                for var in variables[:4]:
                    try:
                        resolver.layout(var)
                    except PlanError as exc:
                        problems += _diagnosis(where, exc)
            except BaseException as exc:  # noqa: BLE001
                problems.append(_crash(where, exc))
    return problems


def _format(text: str, file: str, valid: bool) -> list[str]:
    from planc.check import format_text

    try:
        out = format_text(text, file)
    except PlanError as exc:
        if valid:
            return [f"fmt refused a plan that checks: {exc.diagnostics[0].message}"]
        return _diagnosis("fmt", exc)
    except BaseException as exc:  # noqa: BLE001
        return [_crash("fmt", exc)]
    if not valid:  # fmt's own tests hold it to idempotence; here only crashes count
        return []
    try:
        again = format_text(out, file)
    except BaseException as exc:  # noqa: BLE001
        return [_crash("fmt of its own output", exc)]
    if again != out:
        return ["fmt is not idempotent: formatting its output changes it again"]
    return []


def _diagnosis(stage: str, exc: PlanError) -> list[str]:
    problems = _unlocated(stage, exc.diagnostics, exc.sources)
    if not exc.diagnostics:
        problems.append(f"{stage}: PlanError without diagnostics")
    if not any(d.is_error for d in exc.diagnostics):
        problems.append(f"{stage}: PlanError without an error")
    try:  # every renderer must take what the front end produced
        from planc.diagnostics import formats

        str(exc)
        formats.render_json(exc.diagnostics)
        formats.render_github(exc.diagnostics)
        formats.render_sarif(exc.diagnostics)
    except BaseException as e:  # noqa: BLE001
        problems.append(_crash(f"{stage}: rendering", e))
    return problems


def _unlocated(stage: str, diags, sources: dict, spanless: tuple[str, ...] = ()) -> list[str]:
    """A line for each diagnostic that does not point at real text in a known file."""
    out = []
    for d in diags:
        if d.code not in CODES:
            out.append(f"{stage}: {d.code} is not in the catalogue ({d.message[:80]})")
        if d.span is None:
            if d.code != "P109" and d.code not in spanless:
                out.append(f"{stage}: {d.code} has no location ({d.message[:80]})")
            continue
        for span in [d.span] + [label.span for label in d.secondary]:
            bad = _bad_span(span, sources)
            if bad:
                out.append(f"{stage}: {d.code} {bad} ({d.message[:80]})")
    return out


def _bad_span(span, sources: dict) -> str | None:
    if not isinstance(span.file, str) or not span.file:
        return f"names no file: {span!r}"
    if span.line < 1 or span.column < 1:
        return f"starts before the file: {span!r}"
    if (span.end_line, span.end_column) < (span.line, span.column):
        return f"ends before it starts: {span!r}"
    text = sources.get(span.file)
    if text and span.line > text.count("\n") + 1:
        return f"starts after the last line: {span!r}"
    return None


def _crash(stage: str, exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    where = frames[-1] if frames else None
    at = f" at {Path(where.filename).name}:{where.lineno} in {where.name}" if where else ""
    return f"{stage} raised {type(exc).__name__}{at}: {str(exc)[:200]}"


# -- the command line ------------------------------------------------------------------------

_LINT_FORMATS = ("text", "json", "github", "sarif")


def check_cli(path: str | os.PathLike, fmt_check: bool = True, model: bool = True) -> list[str]:
    """Run planc's commands in-process on the plan at `path`.

    `lint` in every format, `fmt --check`, and with `model` (the Gemma manifest in
    `plans/models`) `lint --model`, `explain` and `compile` to every target (written
    beside the plan).
    """
    from planc.cli import main

    plan = os.fspath(path)
    runs = [["lint", "--format", f, "--color", "never", plan] for f in _LINT_FORMATS]
    runs.append(["lint", "--devices", "8,3", "--color", "always", plan])
    if fmt_check:
        runs.append(["fmt", "--check", "--color", "never", plan])
    manifest = _manifest()
    if model and manifest:
        out = os.path.join(os.path.dirname(plan), "compiled.out")
        with_model = ["--model", manifest, "--devices", "8"]
        runs.append(["lint", "--format", "json", *with_model, plan])
        runs.append(["explain", "--color", "never", *with_model, plan])
        runs += [["compile", "--target", t, *with_model, "-o", out, plan]
                 for t in ("jax", "keras", "json")]
    problems = []
    for argv in runs:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(argv)
        except SystemExit as exc:
            code = exc.code
        except BaseException as exc:  # noqa: BLE001
            problems.append(_crash("planc " + " ".join(argv[:3]), exc))
            continue
        problems += cli_output_problems(argv, code, out.getvalue() + err.getvalue())
    return problems


def _manifest() -> str | None:
    """The Gemma 2B manifest of the example plans, if this is a source tree."""
    for root in (Path(__file__).resolve().parent.parent, Path.cwd()):
        found = root / "plans" / "models" / "gemma_2b.json"
        if found.is_file():
            return str(found)
    return None


def cli_output_problems(argv, code, output: str) -> list[str]:
    """What is wrong with one CLI run: its exit code or its output."""
    cmd = "planc " + " ".join(str(a) for a in argv[:-1])
    problems = []
    if code not in (0, 1, 2):
        problems.append(f"{cmd}: exit code {code!r}")
    for sign in ("Traceback", "internal error", "nested too deeply"):
        if sign in output:
            line = next(ln for ln in output.splitlines() if sign in ln)
            problems.append(f"{cmd}: printed {line[:200]!r}")
    return problems


# -- the campaign --------------------------------------------------------------------------------

def run(cases: int, seed: int = 0, *, jobs: int = 1, extras: bool = True,
        progress: bool = False) -> tuple[int, list]:
    """Run `cases` fuzz cases; return (cases run, [(input, problems), ...]).

    The cases split as: 45% grammar-aware plans (hypothesis), 35% byte-level mutations
    of the example plans, 10% through the CLI in-process, 10% checkpoint headers and
    language-server input (`fuzzing_io`); with `extras`, then every
    hostile input and a few CLI runs in real subprocesses. `jobs` processes share the
    cases, each with its own seed; a failure seen in several is reported once.
    """
    if jobs <= 1:
        return _run_part(cases, seed, extras, progress)
    from concurrent.futures import ProcessPoolExecutor

    shares = [cases // jobs + (1 if i < cases % jobs else 0) for i in range(jobs)]
    with ProcessPoolExecutor(jobs) as pool:
        parts = [pool.submit(_run_part, n, seed + 7919 * i, extras and i == 0, progress and i == 0)
                 for i, n in enumerate(shares) if n or (extras and i == 0)]
        results = [p.result() for p in parts]
    count, failures, seen = 0, [], set()
    for n, found in results:
        count += n
        for data, problems in found:
            fresh = [p for p in problems if _signature(p) not in seen]
            seen.update(_signature(p) for p in problems)
            if fresh:
                failures.append((data, fresh))
    return count, failures


def _run_part(cases: int, seed: int, extras: bool, progress: bool) -> tuple[int, list]:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    failures: list[tuple[object, list[str]]] = []
    seen: set[str] = set()
    count = 0
    started = time.monotonic()

    def record(data, problems):
        nonlocal count
        count += 1
        if progress and count % 1000 == 0:
            spent = time.monotonic() - started
            left = spent / count * (cases - count)
            print(f"  {count}/{cases} cases in this process, {_minutes(spent)}, "
                  f"about {_minutes(max(left, 0))} left", file=sys.stderr, flush=True)
        fresh = [p for p in problems if _signature(p) not in seen]
        seen.update(_signature(p) for p in problems)
        if fresh:
            failures.append((data, fresh))

    quick = dict(database=None, deadline=None, phases=[Phase.generate],
                 suppress_health_check=list(HealthCheck), derandomize=False)
    n_grammar = cases * 45 // 100
    n_cli = cases // 10
    n_io = cases // 10
    n_bytes = cases - n_grammar - n_cli - n_io
    with tempfile.TemporaryDirectory(prefix="planc-fuzz-") as tmp:
        plan_dir = make_workspace(tmp)
        file = plan_dir / "fuzz.kd"

        if n_grammar:
            @hseed(seed)
            @settings(max_examples=n_grammar, **quick)
            @given(plans())
            def grammar(text):
                record(text, check_case(text, file))

            grammar()

        rng = random.Random(seed)
        files = sorted(corpus().values())
        for _ in range(n_bytes):
            data = mutate(rng.choice(files), rng)
            record(data, check_case(data, file))

        if n_cli:
            @hseed(seed + 1)
            @settings(max_examples=n_cli, **quick)
            @given(plans())
            def cli(text):
                file.write_text(text, encoding="utf-8", errors="surrogatepass")
                # With a model, explain and compile run too: ten times the work, so 1 in 10.
                record(text, check_cli(file, model=count % 10 == 0))

            cli()

        if n_io:
            import fuzzing_io
            from hypothesis import strategies as st

            @hseed(seed + 2)
            @settings(max_examples=n_io, **quick)
            @given(st.data())
            def io_cases(data):
                if data.draw(st.booleans()):
                    path = data.draw(fuzzing_io.checkpoints(tmp))
                    record(path, fuzzing_io.check_checkpoint(path))
                else:
                    stream = data.draw(fuzzing_io.streams())
                    record(stream, fuzzing_io.check_stream(stream))

            io_cases()

        if extras:
            for name, data in hostile_inputs().items():
                file.write_bytes(data)
                record(name, check_case(data, file) + check_cli(file, model=False))
            for name in SUBPROCESS_CASES:
                file.write_bytes(hostile_inputs()[name])
                record(name, check_subprocess(file))
    return count, failures


# Hostile inputs also run through `python -m planc lint` in a real subprocess.
SUBPROCESS_CASES = ("10 MB line", "nested brackets in a check", "bad UTF-8",
                    "terminal escapes", "a chain of `not`")


def check_subprocess(path: str | os.PathLike) -> list[str]:
    """`planc lint PATH` in a real subprocess: exit code and output as a user sees them."""
    import subprocess

    argv = [sys.executable, "-m", "planc", "lint", os.fspath(path)]
    proc = subprocess.run(argv, capture_output=True, timeout=600,
                          env={**os.environ, "PYTHONHASHSEED": "random"})
    output = proc.stdout.decode("utf-8", "replace") + proc.stderr.decode("utf-8", "replace")
    return cli_output_problems(["lint", path], proc.returncode, output)


def _signature(problem: str) -> str:
    """A failure's kind, so one bug met a thousand times is reported once."""
    import re

    return re.sub(r"\(.*|\d+", "#", problem)


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


# Cases timed before a campaign to say how long it will run: enough to average the
# mix of grammar, byte and CLI cases, few enough to cost a few seconds.
_CALIBRATION_CASES = 200


def estimate(cases: int, jobs: int, seed: int) -> float:
    """Seconds `cases` cases will take on `jobs` processes, from timing a short run."""
    sample = min(cases, _CALIBRATION_CASES)
    started = time.monotonic()
    _run_part(sample, seed + 104_729, False, False)
    per_case = (time.monotonic() - started) / max(sample, 1)
    return per_case * cases / max(min(jobs, cases), 1)


def main(argv: list[str] | None = None) -> int:
    """`python tests/fuzzing.py --cases N [--seed S]`: 0 when every case behaved, else 1."""
    parser = argparse.ArgumentParser(prog="python tests/fuzzing.py", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--cases", type=int, default=10_000, help="how many cases to run")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8),
                        help="processes to run in parallel (default: the CPUs, at most 8)")
    parser.add_argument("--no-extras", dest="extras", action="store_false",
                        help="skip the fixed hostile inputs and the subprocess runs")
    parser.add_argument("--quiet", dest="progress", action="store_false",
                        help="no estimate and no progress lines, only the result")
    args = parser.parse_args(argv)
    if not corpus():
        print("planc fuzz: no example plans (plans/*.kd) to mutate; run it from the "
              "source tree", file=sys.stderr)
        return 2
    if args.progress:
        jobs = max(min(args.jobs, args.cases), 1)
        print(f"planc fuzz: {args.cases} cases on {jobs} process{'es' if jobs > 1 else ''}; "
              f"about {_minutes(estimate(args.cases, jobs, args.seed))} (timed on "
              f"{min(args.cases, _CALIBRATION_CASES)} cases), plus the hostile inputs",
              file=sys.stderr, flush=True)
    started = time.monotonic()
    count, failures = run(args.cases, args.seed, jobs=args.jobs, extras=args.extras,
                          progress=args.progress)
    elapsed = time.monotonic() - started
    print(f"planc fuzz: {count} cases in {elapsed:.0f} s, {len(failures)} failing")
    for data, problems in failures:
        shown = repr(data if len(data) <= 400 else data[:400] + (b"..." if isinstance(
            data, bytes) else "..."))
        print(f"\ninput: {shown}")
        for p in problems:
            print(f"  - {p}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
