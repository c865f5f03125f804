"""The parser's engine (`planc.syntax.lalr`) builds what lark builds.

The engine runs lark's own tables, scan and rule callbacks its own way, read from a built
parser or from the plain data the generator writes (`tables_of`, callbacks shaped as
lark's parse-tree builder shapes them); lark's parse with the same builder is the
reference. On every text both give the same AST and the same
builder problems, and the engine gives up (None) exactly where lark raises, so that
lark's exception still says what is wrong. The fast nesting scan of `planc.syntax.parser`
is held to the plain one it stands in front of, and `Lines` to `line_col`.
"""

import random
import re

import pytest

from conftest import PLANS
from fuzzing_inputs import corpus, mutate
from planc import limits
from planc.diagnostics import PlanError
from planc.syntax import parser
from planc.syntax.errors import syntax_diagnostic
from planc.syntax.files import decode_plan_bytes, one_line_ending
from planc.syntax.grammar import OPTIONS, UnexpectedInput, new_parser, read_grammar
from planc.syntax.lalr import Engine, tables_of
from planc.syntax.spans import Lines, line_col
from syntax.test_front_end_speed_paths import EVERY_CONSTRUCT

TEXTS = [EVERY_CONSTRUCT] + [p.read_text() for p in sorted(PLANS.glob("*.kd"))] + [
    "", "mesh(", "mesh(batch = @)", 'layout {\n    "a" -> (x, , y)\n}', "layot {}",
    "check 1 +", "check (1 + 2", "mesh(a = 2) # comment\nslices(", "model", "\x00",
    'layout { "a\\"b" -> (x[4], (y, z)[2], ..., _) | replicated default -> () }',
    "check not not -(1 + 2 * 3) // 4 % 5 <= 6 and 7 or 8, \"m\"",
]


def _texts(mutations: int, seed: int):
    rng = random.Random(seed)
    for text in TEXTS:
        yield text
    for data in corpus().values():
        for _ in range(mutations):
            try:
                yield decode_plan_bytes(mutate(data, rng), "m.kd")
            except PlanError:  # not UTF-8: never parsed
                pass


@pytest.fixture(scope="module")
def tables():
    """The grammar's tables as the generator writes them, from lark itself."""
    import lark

    data = tables_of(lark.Lark(read_grammar(), **OPTIONS))
    assert data is not None
    return data


def _engines(tables):
    """(name, engine) of each way to build one, all around one builder."""
    builder, _ = parser._building_parser()
    leaves = builder.leaves()
    return [("read from lark", Engine.of(parser._lark_parser(builder), leaves)),
            ("from the tables", Engine.of_tables(tables, builder, leaves))]


def _both(text: str, engine):
    """(engine's result, its problems), (lark's result, its problems), one builder."""
    builder, _ = parser._building_parser()
    lark = parser._lark_parser(builder)
    text = one_line_ending(text)
    builder.begin("t.kd", text)
    mine = engine.parse(text), list(builder.problems)
    builder.begin("t.kd", text)
    try:
        theirs = lark.parse(text), list(builder.problems)
    except UnexpectedInput:
        theirs = None, []
    builder.begin("t.kd", "")
    return mine, theirs


def test_the_engine_runs_plancs_grammar(tables):
    assert parser._building_parser()[1] is not None
    assert all(engine is not None for _, engine in _engines(tables))


def test_the_engine_reads_a_parser_it_cannot_run_as_none(tables):
    builder = parser._Builder("t.kd")
    leaves = builder.leaves()
    assert Engine.of(new_parser(transformer=builder), leaves) is not None
    # A terminal callback the leaves do not stand for: lark would call it, the engine not.
    assert Engine.of(new_parser(transformer=builder), {**leaves, "COMMA": None}) is None
    assert Engine.of(new_parser(transformer=builder, lexer_callbacks={"NAME": str}),
                     leaves) is None
    assert Engine.of_tables(tables, builder, {**leaves, "COMMA": None}) is None
    assert Engine.of_tables({**tables, "format": -1}, builder, leaves) is None


def test_tables_are_plain_data(tables):
    import ast

    for key, value in tables.items():
        assert ast.literal_eval(repr(value)) == value, key


class _NoKwarg(parser._Builder):
    """A builder without the `kwarg` callback: lark builds its own tree there."""

    @property
    def kwarg(self):
        raise AttributeError("kwarg")


def test_a_rule_lark_would_build_its_own_tree_for_is_left_to_lark(tables):
    builder = _NoKwarg("t.kd")
    engine = Engine.of_tables(tables, builder, builder.leaves())
    builder.begin("t.kd", "mesh(batch = auto)")
    assert engine.parse("mesh(batch = auto)") is not None
    builder.begin("t.kd", "budget(hbm = 16 GiB)")
    assert engine.parse("budget(hbm = 16 GiB)") is None


@pytest.mark.parametrize("way", [0, 1], ids=["read from lark", "from the tables"])
@pytest.mark.parametrize("seed", range(3))
def test_the_engine_builds_what_lark_builds(seed, way, tables):
    parsed = refused = 0
    engine = _engines(tables)[way][1]
    for text in _texts(40, seed):
        (mine, my_problems), (theirs, their_problems) = _both(text, engine)
        assert mine == theirs, text
        if mine is None:
            refused += 1
        else:
            assert my_problems == their_problems, text
            parsed += 1
    assert parsed > 50 and refused > 50  # both ways are exercised


def test_a_syntax_error_is_what_lark_raises_says():
    lark = new_parser()
    for text in ("mesh(batch = @)", "layot {}", 'layout {\n    "a" -> (x, , y)\n}', "check 1 +",
                 'layout { "a" -> (x) ', "\x00"):
        with pytest.raises(UnexpectedInput) as raised:
            lark.parse(text)
        with pytest.raises(PlanError) as caught:
            parser.parse(text, "t.kd")
        assert caught.value.diagnostics == (syntax_diagnostic(raised.value, text, "t.kd"),)


_SCAN = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"|#[^\n\r]*|[(\[{]|[)\]}]|"')


def _plain_too_deep(text: str):
    """The nesting scan as it was before its C-speed front: one match at a time."""
    if sum(text.count(c) for c in "([{") <= limits.MAX_NESTING:
        return None
    depth = 0
    for m in _SCAN.finditer(text):
        c = m.group()
        if c in "([{":
            depth += 1
            if depth > limits.MAX_NESTING:
                return m.start()
        elif c in ")]}":
            depth = max(depth - 1, 0)
        elif c == '"':
            return None
    return None


def test_the_fast_nesting_scan_finds_what_the_plain_scan_finds(monkeypatch):
    monkeypatch.setattr(limits, "MAX_NESTING", 3)
    rng = random.Random(0)
    deep = 0
    for _ in range(20_000):
        text = "".join(rng.choice('a"\\#\n((()){}[]]é') for _ in range(rng.randint(0, 24)))
        assert parser._too_deep(text) == _plain_too_deep(text), text
        deep += parser._too_deep(text) is not None
    assert deep > 1000


def test_the_comment_scan_reads_strings_as_the_grammar_does():
    grammar_string = re.compile(r'"(?:[^"\\\n\r]|\\[^\n\r])*"|#[^\n\r]*')
    rng = random.Random(1)
    for _ in range(20_000):
        text = "".join(rng.choice('ab"\\#\n\r ') for _ in range(rng.randint(0, 16)))
        assert ([m.span() for m in parser._STRING_OR_COMMENT.finditer(text)]
                == [m.span() for m in grammar_string.finditer(text)]), text


def test_lines_count_as_lark_does():
    text = "ab\ncd\n\n\nxyz é\n"
    lines = Lines("t.kd", text)
    for start in range(len(text) + 1):
        assert lines.point(start) == line_col(text, start)
        for end in range(start, len(text) + 1):
            span = lines.span(start, end)
            assert (span.line, span.column) == line_col(text, start)
            assert (span.end_line, span.end_column) == line_col(text, end)


def test_the_scanner_built_from_its_stored_program_is_the_one_re_compiles():
    import re

    from planc.syntax import _lalr_tables
    from planc.syntax.lalr import _UNLEXABLE, _scanner, scanner_code

    compiled = re.compile(f"{_lalr_tables.PATTERN}|(?P<{_UNLEXABLE}>(?s:.))")
    assert _lalr_tables.SCANNER == scanner_code(_lalr_tables.PATTERN)
    stored = _scanner(_lalr_tables.PATTERN, _lalr_tables.SCANNER)
    assert stored is not compiled  # built from the program, not found in re's cache
    assert stored == compiled  # the same text, flags and program
    assert (stored.groupindex, stored.groups) == (compiled.groupindex, compiled.groups)


def test_a_scanner_program_stamped_by_another_python_is_compiled_again():
    import re

    from planc.syntax import _lalr_tables
    from planc.syntax.lalr import _UNLEXABLE, _scanner

    code = _lalr_tables.SCANNER
    for stale in (((2, 7), *code[1:]), (code[0], code[1] - 1, *code[2:]),
                  (*code[:4], (999, 999), *code[5:])):
        assert _scanner(_lalr_tables.PATTERN, stale) == re.compile(
            f"{_lalr_tables.PATTERN}|(?P<{_UNLEXABLE}>(?s:.))")
