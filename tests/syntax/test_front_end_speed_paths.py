"""The front end's fast paths answer exactly as the slower ways they replace.

`planc.matching` reads simple rule patterns itself instead of through Python's `re`
parser, and leaves out RE2's check of what they translate to; `planc.syntax.parser` builds the
AST while lark parses, without a parse tree. Each path is held here to what the slower
way gives: the same translation or problem, RE2 accepting the result, the same spans.
"""

import dataclasses
import threading
from pathlib import Path

import pytest
import re2
from hypothesis import given, settings
from hypothesis import strategies as st

from planc.diagnostics import PlanError
from planc.matching import PatternProblem, check_pattern
from planc.matching.simple_reader import _simple_tree
from planc.matching.translate import (_options, _re2_accepts, _Refused, _translate,
                                      _translate_fully)
from planc.syntax import ast
from planc.syntax.grammar import positioned_parser
from planc.syntax.parser import parse

PLANS = Path(__file__).resolve().parents[2] / "plans"

# Pieces of rule patterns, the simple reader's and a few just beyond it (flags, counted
# repeats, hex escapes, bad sets), so that generated patterns take both paths.
PIECES = [
    "a", "b", "ab", "abc", "abd", "x_1", "/", "-", "é", "ü", " ", "#", "]", "}", ".",
    r"\.", r"\/", r"\-", r"\\", r"\é", r"\n", r"\t", r"\d", r"\w", r"\s", r"\W", r"\D",
    r"\S", "^", "$", r"\b", r"\B", r"\A", r"\Z", "[ab]", "[a-c]", "[^a]", "[a]", "[^a]",
    "[.]", r"[\d]", r"[\w-]", "[]a]", "[^]]", "[a-]", "[-a]", r"[\]]", r"[\n]", "[é-ü]",
    r"[\d-z]", "[z-a]", "[", "\\", "(?i)", "{2}", r"\x41", "(?=a)", r"\1",
]
QUANTIFIERS = ["*", "+", "?", "*?", "+?", "??", "*+"]


def _group(parts):
    opener, alternatives = parts
    return opener + "|".join(alternatives) + ")"


patterns = st.recursive(
    st.sampled_from(PIECES) | st.text(alphabet="ab/_é", min_size=1, max_size=4),
    lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=4).map("".join),
        st.lists(inner, min_size=2, max_size=4).map("|".join),
        st.tuples(st.sampled_from(["(", "(?:"]), st.lists(inner, min_size=1, max_size=4))
        .map(_group),
        st.tuples(inner, st.sampled_from(QUANTIFIERS)).map("".join),
    ),
    max_leaves=12,
)


def _outcome(translate, pattern):
    try:
        return translate(pattern)
    except _Refused as refused:
        return refused.problem


# ------------------------------------------------------------------- rule patterns

@settings(max_examples=300, deadline=None)
@given(pattern=patterns)
def test_every_pattern_translates_as_through_pythons_parser(pattern):
    assert _outcome(_translate, pattern) == _outcome(_translate_fully, pattern)


@pytest.mark.parametrize("pattern", [
    "ab|ac", "abc|abd|abe", "(abc|abd)x", "x(?:ab|ab)", "(a)b|(a)c", "a*b|a*c", "ab?|ac",
    "[ab]c|[ab]d", "a|b|[cd]", r"\d|\d", "ab|a", "a|", "|a", "(?:ab|ac)*", "é|éa",
    "decoder_block_3/moe/expert_(?:1[0-9]|1[0-9][0-9]|2[0-4])/ffw_linear/kernel",
    "(query|key|value)/kernel", "a(b(c(d|e)|cf)|bg)",
])
def test_alternatives_sharing_a_prefix_translate_as_through_pythons_parser(pattern):
    assert _simple_tree(pattern) is not None
    assert _translate(pattern) == _translate_fully(pattern)


@pytest.mark.parametrize("pattern", [
    "token_embedding/embeddings", r"decoder_block_\d+/attention/(query|key|value)/kernel",
    r"model\.layers\.\d+\.mlp\.(gate|up)_proj\.weight", ".*kernel", "[^/]+/bias$", "",
])
def test_usual_rule_patterns_take_the_simple_path(pattern):
    assert _simple_tree(pattern) is not None


@pytest.mark.parametrize("pattern", [
    "(?i)kernel", "a{2}", r"\x41", "(?=x)y", "a*+", "[z-a]", "a)", r"(a)\1", "a**",
    "[ab", "(?P<n>a)", r"\N{EM DASH}",
])
def test_patterns_beyond_the_simple_reader_take_the_full_path(pattern):
    assert _simple_tree(pattern) is None


@settings(max_examples=200, deadline=None)
@given(pattern=patterns)
def test_what_the_simple_path_accepts_compiles_in_re2(pattern):
    if _simple_tree(pattern) is not None:
        re2.compile(_translate(pattern), _options())


@pytest.mark.parametrize("unit", [
    ".", "[^é]", r"\W", r"\S", "é", "(.)*", "(?:[^é]|[^ü])+", "[^āăąćĉċčď]",
    "[^\u0800\u1000\u2000\u3000\u4000\u5000\u6000\u7000\u8000\u9000\U00010000\U00020000]",
])
def test_simple_patterns_as_large_as_the_unchecked_bounds_compile_in_re2(unit):
    pattern = unit
    while _re2_accepts(_translate(pattern + unit)):
        pattern += unit
    assert _simple_tree(pattern) is not None
    options = _options()
    options.max_mem = 1 << 20  # a 64th of what planc gives RE2: a wide margin
    re2.compile(_translate(pattern), options)


def test_a_variable_width_lookbehind_is_invalid_after_an_unsupported_construct_too():
    assert check_pattern(r"(a)\1(?<=a+)") == PatternProblem(
        "invalid", 5, "look-behind requires fixed-width pattern")


def test_a_fixed_width_lookbehind_after_a_backreference_reports_the_backreference():
    problem = check_pattern(r"(a)\1(?<=a)")
    assert (problem.kind, problem.offset) == ("unsupported", 3)


# ------------------------------------------------------------------------ the parser

EVERY_CONSTRUCT = '''plan every
param tp = 4
param budget_text = "x"
mesh(batch = auto, model = tp,)
slices(count = 2, axis = batch)
model_parallel(batch = (batch, model))
match full
overlap first
layout {
    "a.*" -> (model, _) | (_, ..., model[128]) | replicated
    "b" -> ((batch, model)[2], _)
    default -> replicated
}
outputs { "out" -> (batch, ...) }
budget(per_device = 80 GB, state = 3)
check -(batch + 2) * model // 2 >= 1 and not model == 3 or (tp % 2) != 0, "sizes"
include "common.kd"
cluster { coordinator = env("COORD", "h:1234") processes = 2 }
model_parallel
'''

# The lark rule behind each kind of AST node that lark's positions locate.
_NODES_BY_RULE = {
    ("pattern_rule", "default_rule"): (ast.PatternRule, ast.DefaultRule),
    ("layout",): (ast.LayoutExpr,),
    ("tuple_layout",): (ast.TupleLayout,),
    ("split_one", "split_many"): (ast.Split,),
    ("kwarg",): (ast.KwArg,),
    ("env_call",): (ast.EnvCall,),
    ("axis_decl",): (ast.AxisDecl,),
}


def _nodes(node):
    yield node
    if dataclasses.is_dataclass(node):
        for field in dataclasses.fields(node):
            yield from _nodes(getattr(node, field.name))
    elif isinstance(node, tuple):
        for item in node:
            yield from _nodes(item)


def _where(span_or_meta):
    return (span_or_meta.line, span_or_meta.column, span_or_meta.end_line,
            span_or_meta.end_column)


@pytest.mark.parametrize("text", [EVERY_CONSTRUCT] + [p.read_text() for p in
                                                      sorted(PLANS.glob("*.kd"))])
def test_ast_spans_are_larks_own_positions(text):
    tree = positioned_parser().parse(text)  # lark's tree, positions by propagate_positions
    module = parse(text, "t.kd")
    assert [_where(s.span) for s in module.statements] == [_where(t.meta)
                                                           for t in tree.children]
    nodes = list(_nodes(module.statements))
    for rules, types in _NODES_BY_RULE.items():
        from_lark = sorted(_where(t.meta) for t in tree.iter_subtrees() if t.data in rules)
        ours = sorted(_where(n.span) for n in nodes if isinstance(n, types))
        assert ours == from_lark, rules


def test_a_split_with_a_block_spans_to_its_closing_bracket():
    text = 'layout { "k" -> (model[4], (data, model)[128]) }'
    split, grouped = parse(text).statements[0].rules[0].layout.alternatives[0].entries
    assert text[split.span.column - 1:split.span.end_column - 1] == "model[4]"
    assert text[grouped.span.column - 1:grouped.span.end_column - 1] == "(data, model)[128]"


def test_parses_in_several_threads_keep_each_texts_file():
    failures = []

    def parse_many(name):
        for i in range(40):
            module = parse(f"plan p{i}\nmesh(batch = {i + 1})\n", name)
            files = {n.span.file for n in _nodes(module.statements) if isinstance(n, ast.Node)}
            if files != {name} or module.statements[1].axes[0].size.value != i + 1:
                failures.append((name, i, files))

    threads = [threading.Thread(target=parse_many, args=(f"t{k}.kd",)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_a_problem_found_while_parsing_does_not_carry_into_the_next_parse():
    with pytest.raises(PlanError) as refused:
        parse("param big = 1" + "0" * 40)
    assert [d.code for d in refused.value.diagnostics] == ["P125"]
    with pytest.raises(PlanError) as syntax:
        parse("param big = 1" + "0" * 40 + "\nmesh(")
    assert [d.code for d in syntax.value.diagnostics] == ["P001"]
    assert parse("param small = 1").statements[0].value.value == 1


def test_a_plan_path_opens_the_file_pathlib_names():
    # `read_plan_text` opens a str path as it is only where `pathlib.Path` would leave it
    # unchanged, and through `Path` otherwise (`a//b`, `./a`, `a/`, ``): the same file.
    import os

    from planc.syntax.files import _as_path_reads_it

    parts = ["", ".", "..", "a", "b.kd", "/", "//", "./", "/."]
    for x in parts:
        for y in parts:
            for z in ("", "/", "c.kd", "./c", "/."):
                path = x + y + z
                opened = _as_path_reads_it(path)
                assert os.fspath(opened) == str(Path(path)), path
    assert isinstance(_as_path_reads_it(Path("a")), Path)


def test_a_plans_stem_is_pathlibs():
    from planc.syntax.files import path_stem

    names = ["", ".", "..", "a", "a.kd", ".kd", "a.", "a.b.kd", "..kd", "/", "//", "./", "/."]
    for x in names:
        for y in names:
            path = x + "/" + y if x and y else x + y
            assert path_stem(path) == Path(path).stem, path


def test_a_plans_key_is_what_pathlib_resolves_it_to(tmp_path, monkeypatch):
    # `planc.syntax.includes._key` resolves a path as `Path.resolve` does, without pathlib:
    # through symlinks, `..` and `.`, for files that do not exist, and around a loop.
    import os

    from planc.syntax.includes import _key

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.kd").write_text("")
    os.symlink(tmp_path / "d", tmp_path / "link")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    monkeypatch.chdir(tmp_path)
    for path in ("", ".", "d/a.kd", "link/a.kd", "link/../d/./a.kd", "d//a.kd", "d/",
                 "missing/x.kd", str(tmp_path / "link" / "a.kd"), "loop1", "loop1/x.kd",
                 "/", "//x"):
        try:
            want = str(Path(path).resolve())
        except (OSError, RuntimeError):
            want = os.path.normpath(os.path.abspath(path))
        assert _key(path) == want, path
