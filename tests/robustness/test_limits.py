"""Every resource limit of `planc.limits` has a clear P125 when exceeded, at the place
that exceeds it, and never a RecursionError or MemoryError; input just inside a limit
is read as usual."""

import pytest

import planc
from planc import limits
from planc.check import format_text
from planc.syntax.parser import MAX_INT_DIGITS
from planc.resolve import Resolver
from planc.variables import Variable

HEAD = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"


def diagnostics(text, **kw):
    try:
        plan = planc.loads(text, **kw)
    except planc.PlanError as exc:
        return list(exc.diagnostics)
    return list(plan.diagnostics)


def one_p125(text, **kw):
    found = diagnostics(text, **kw)
    assert [d.code for d in found] == ["P125"], [(d.code, d.message) for d in found]
    return found[0]


# -- plan size ------------------------------------------------------------------------------

def test_plan_file_over_the_size_limit_is_refused_before_it_is_read_whole(tmp_path):
    path = tmp_path / "big.kd"
    path.write_bytes(b"data_parallel\n" + b"#" * limits.MAX_PLAN_BYTES)
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(path)
    (d,) = exc.value.diagnostics
    assert (d.code, d.span.line, d.span.column) == ("P125", 1, 1)
    assert str(limits.MAX_PLAN_BYTES) in d.message


def test_plan_file_of_exactly_the_size_limit_is_read(tmp_path):
    path = tmp_path / "full.kd"
    body = b"data_parallel\n"
    path.write_bytes(body + b"#" * (limits.MAX_PLAN_BYTES - len(body)))
    assert planc.load_plan(path).distribution_kind == "data_parallel"


def test_plan_text_over_the_size_limit_is_refused_by_loads():
    d = one_p125("data_parallel\n# " + "x" * limits.MAX_PLAN_BYTES)
    assert (d.span.line, d.span.column) == (1, 1)


def test_size_limit_counts_utf8_bytes_not_characters():
    # 300,000 three-byte characters: under the limit in characters, over it in bytes.
    one_p125("data_parallel\n# " + "\u20ac" * 350_000)


def test_formatter_refuses_text_over_the_size_limit():
    with pytest.raises(planc.PlanError) as exc:
        format_text("data_parallel\n#" + "x" * limits.MAX_PLAN_BYTES)
    assert [d.code for d in exc.value.diagnostics] == ["P125"]


def test_a_ten_megabyte_line_is_refused_as_too_large(tmp_path):
    path = tmp_path / "line.kd"
    path.write_bytes(b"plan " + b"x" * (10 << 20))
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(path)
    assert [d.code for d in exc.value.diagnostics] == ["P125"]


# -- includes ----------------------------------------------------------------------------------

def _chain(tmp_path, links: int):
    """main.kd includes c1.kd, which includes c2.kd, ... `links` includes deep."""
    for i in range(1, links + 1):
        nxt = f'include "c{i + 1}.kd"\n' if i < links else "param last = 1\n"
        (tmp_path / f"c{i}.kd").write_text(nxt)
    main = tmp_path / "main.kd"
    main.write_text('include "c1.kd"\ndata_parallel\n')
    return main


def test_includes_nested_deeper_than_the_limit_are_P125_at_the_include(tmp_path):
    main = _chain(tmp_path, limits.MAX_INCLUDE_DEPTH + 1)
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(main)
    (d,) = exc.value.diagnostics
    assert d.code == "P125"
    assert d.span.file.endswith(f"c{limits.MAX_INCLUDE_DEPTH}.kd") and d.span.line == 1


def test_includes_nested_exactly_to_the_limit_are_read(tmp_path):
    main = _chain(tmp_path, limits.MAX_INCLUDE_DEPTH)
    assert planc.load_plan(main).params == {"last": 1}


def test_more_included_files_than_the_limit_is_P125_at_the_first_one_too_many(tmp_path):
    (tmp_path / "empty.kd").write_text("# nothing\n")
    n = limits.MAX_INCLUDED_FILES + 1
    main = tmp_path / "main.kd"
    main.write_text("data_parallel\n" + 'include "empty.kd"\n' * n)
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(main)
    (d,) = exc.value.diagnostics
    assert (d.code, d.span.line) == ("P125", 2 + limits.MAX_INCLUDED_FILES)


def test_exactly_the_limit_of_included_files_is_read(tmp_path):
    (tmp_path / "empty.kd").write_text("# nothing\n")
    main = tmp_path / "main.kd"
    main.write_text("data_parallel\n" + 'include "empty.kd"\n' * limits.MAX_INCLUDED_FILES)
    assert planc.load_plan(main).distribution_kind == "data_parallel"


# -- rules -------------------------------------------------------------------------------------

def test_more_rules_than_the_limit_is_P125_at_the_first_rule_too_many():
    n = limits.MAX_RULES + 1
    text = HEAD + "layout {\n" + "".join(f'"r{i}" -> replicated\n' for i in range(n)) + "}\n"
    d = one_p125(text)
    assert d.span.line == 4 + limits.MAX_RULES  # two head lines, `layout {`, then the rules
    assert str(limits.MAX_RULES) in d.message


# -- integers ----------------------------------------------------------------------------------

def test_integer_literal_with_too_many_digits_is_P125_at_the_literal():
    d = one_p125("param n = " + "9" * (MAX_INT_DIGITS + 1) + "\ndata_parallel\n")
    assert (d.span.line, d.span.column) == (1, 11)


def test_integer_literal_with_the_most_digits_allowed_is_read():
    plan = planc.loads("param n = " + "9" * MAX_INT_DIGITS + "\ndata_parallel\n")
    assert plan.params["n"] == int("9" * MAX_INT_DIGITS)


def test_underscores_do_not_count_as_digits():
    plan = planc.loads("param n = " + "_".join(["999"] * 10) + "\ndata_parallel\n")
    assert plan.params["n"] == int("9" * 30)


def test_size_literal_with_too_many_digits_is_P125():
    d = one_p125("budget(per_device = " + "1" * 5_000 + " GiB)\ndata_parallel\n")
    assert d.span.line == 1


def test_a_hundred_thousand_digit_integer_is_refused_without_converting_it():
    d = one_p125("param n = " + "9" * 100_000 + "\ndata_parallel\n")
    assert "100000 digits" in d.message


def test_override_with_too_many_digits_is_refused():
    found = diagnostics("param n = 1\ndata_parallel\n", n="9" * 5_000)
    assert [d.code for d in found] == ["P110"]


# -- nesting -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, open_before", [
    (HEAD + "check " + "(" * 5_000 + "1" + ")" * 5_000 + ' == 1, "x"\n', 0),
    (HEAD + 'layout { "a" -> ' + "(" * 5_000 + "_" + ")" * 5_000 + " }\n", 1),  # the `{`
    ("(" * 5_000, 0),
    ("{" * 5_000, 0),
], ids=["check", "layout", "unclosed", "braces"])
def test_brackets_nested_deeper_than_the_limit_are_P125_at_the_first_bracket_too_deep(
        text, open_before):
    d = one_p125(text)
    run = text.index(text[-1] * 10 if text[-1] in "({" else "(" * 10)
    line_start = text.rfind("\n", 0, run) + 1
    assert d.span.column == run - line_start + 1 + limits.MAX_NESTING - open_before


def test_brackets_inside_strings_and_comments_do_not_count():
    deep = "(" * (limits.MAX_NESTING + 10)
    plan = planc.loads(HEAD + f"# {deep}\ncheck 1 == 1, \"{deep}\"\n")
    assert plan.ir.checks[0].message == deep


@pytest.mark.parametrize("what, expr", [
    ("not", "not " * 5_000 + "0"),
    ("minus", "-" * 5_000 + "1 < 0"),
    ("sum", " + ".join(["1"] * 5_000) + " > 0"),
    ("and", " and ".join(["1"] * 5_000)),
])
def test_expression_deeper_than_the_limit_is_P125_not_a_recursion_error(what, expr):
    d = one_p125(HEAD + f'check {expr}, "x"\n')
    assert d.span.line == 3
    assert str(limits.MAX_NESTING) in d.message


def test_expression_exactly_as_deep_as_the_limit_checks_formats_and_renders():
    # The deepest expression allowed must survive every recursive consumer of the AST:
    # the checker's evaluation, dataclass equality and hashing, the formatter.
    n = limits.MAX_NESTING - 1  # the comparison is one more level
    text = HEAD + "check " + "(" * n + "batch" + ")" * n + ' == 3, "batch is 3"\n'
    plan = planc.loads(text)
    assert plan == planc.loads(text) and hash(plan) == hash(planc.loads(text))
    with pytest.raises(planc.PlanError) as exc:
        plan.with_devices(8)
    assert [d.code for d in exc.value.diagnostics] == ["P118"]
    assert "batch is 3" in str(exc.value)
    formatted = format_text(text)
    assert format_text(formatted) == formatted
    assert planc.loads(formatted).ir.checks[0].names == ("batch",)


def test_pattern_nesting_groups_deeper_than_the_limit_is_P125_at_the_group():
    n = limits.MAX_PATTERN_NESTING + 1
    text = HEAD + 'layout { "' + "(" * 300 + "a" + ")" * 300 + '" -> replicated }\n'
    d = one_p125(text)
    quote = len('layout { "')
    assert (d.span.line, d.span.column) == (3, quote + n)


def test_pattern_nesting_groups_to_the_limit_is_compiled_and_matches():
    n = limits.MAX_PATTERN_NESTING
    text = HEAD + 'layout { "' + "(?:" * n + "a" + ")*" * n + '" -> replicated }\n'
    resolver = Resolver(planc.loads(text).ir)
    assert resolver.resolve(Variable("aaa", (2,)))[0].rule is not None


def test_brackets_inside_a_character_class_do_not_count_as_groups():
    text = HEAD + 'layout { "' + "[(]" * 300 + '" -> replicated }\n'
    assert len(planc.loads(text).rules) == 1


# -- variable paths ------------------------------------------------------------------------------

def test_variable_path_longer_than_the_limit_is_P125_naming_the_variable():
    resolver = Resolver(planc.loads(HEAD + 'layout { ".*" -> replicated }\n').ir)
    path = "a" * (limits.MAX_PATH_LENGTH + 1)
    assignment, found = resolver.resolve(Variable(path, (2, 2)))
    assert [d.code for d in found] == ["P125"]
    assert found[0].variable.startswith("aaaa") and len(found[0].variable) < 100
    assert assignment.rule is None


def test_variable_path_of_exactly_the_limit_is_matched():
    resolver = Resolver(planc.loads(HEAD + 'layout { ".*" -> replicated }\n').ir)
    assignment, found = resolver.resolve(Variable("a" * limits.MAX_PATH_LENGTH, (2, 2)))
    assert found == [] and assignment.rule is not None


def test_includes_larger_than_the_total_limit_together_are_P125_at_the_include(tmp_path):
    # Each file is within its own limit; together they pass the total.
    body = b"data_parallel\n" + b"#" * (limits.MAX_PLAN_BYTES - 100) + b"\n"
    (tmp_path / "big.kd").write_bytes(body)
    n = limits.MAX_TOTAL_BYTES // len(body) + 1
    main = tmp_path / "main.kd"
    main.write_text('include "big.kd"\n' * n)
    with pytest.raises(planc.PlanError) as exc:
        planc.load_plan(main)
    too_much = [d for d in exc.value.diagnostics if d.code == "P125"]
    assert [(d.span.file, d.span.line) for d in too_much] == [(str(main), n)]


def _squared(term: str, times: int) -> str:
    for _ in range(times):
        term = f"({term} * {term})"
    return term


def test_check_arithmetic_beyond_2_to_the_256_is_P122_not_a_long_computation():
    # 150 factors of a 30-digit parameter: a number of 4,500 digits, unbounded.
    text = (f"param a = {'9' * 30}\ncheck {' * '.join(['a'] * 150)} > 0, \"big\"\n"
            "mesh(batch = auto)\ndata_parallel\n")
    (d,) = diagnostics(text)
    assert d.code == "P122" and "overflows" in d.message and "2**256" in d.message


def test_check_arithmetic_within_2_to_the_256_is_exact():
    text = (f"param a = {'9' * 30}\ncheck a * a > a + 1, \"fine\"\n"
            "mesh(batch = auto)\ndata_parallel\n")
    assert planc.loads(text).params["a"] == int("9" * 30)


def test_the_compiled_module_bounds_check_arithmetic_too(tmp_path):
    import importlib.util

    from planc.cli import main

    plan = tmp_path / "p.kd"
    plan.write_text(f"param a = {'9' * 30}\ncheck {_squared('a', 2)} * mesh_batch > 0, \"x\"\n"
                    "mesh(batch = auto)\ndata_parallel\n".replace("mesh_batch", "batch"))
    out = tmp_path / "m.py"
    assert main(["compile", str(plan), "-o", str(out)]) == 0
    spec = importlib.util.spec_from_file_location("bounded_module", out)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with pytest.raises(ValueError, match="overflows"):
        module.make_mesh()
