r"""The `rename` statement: grammar, checker diagnostics, IR, `planc fmt`, JSON and fingerprint."""

import json
import textwrap

import pytest

import planc
from planc.check import check, format_text
from planc.check.formatting import without_spans
from planc.diagnostics import PlanError
from planc.ir import Rename
from planc.syntax import ast, parse
from planc.fingerprint import fingerprint
from planc.targets.emit.compiled_json import compiled_json

DP = "mesh(batch = auto)\ndata_parallel\n"


def plan(text: str) -> str:
    return DP + textwrap.dedent(text).lstrip("\n")


def errors(text: str):
    with pytest.raises(PlanError) as info:
        check(plan(text))
    return info.value.diagnostics


def where(d):
    s = d.span
    return (s.line, s.column, s.end_line, s.end_column)


# -- grammar and AST ------------------------------------------------------------------------

def test_a_rename_rule_is_a_pattern_an_arrow_a_template_and_options():
    m = parse(r'rename { "a\.(\d+)" -> "x/\1" transpose }')
    (section,) = m.statements
    assert isinstance(section, ast.RenameSection)
    (rule,) = section.rules
    assert (rule.pattern.value, rule.template.value) == (r"a\.(\d+)", r"x/\1")
    assert [o.text for o in rule.options] == ["transpose"]
    assert (rule.span.column, rule.span.end_column) == (10, 40)


def test_rename_rules_need_no_separator_and_an_empty_block_parses():
    m = parse('rename {\n "a" -> "b"\n "c" -> "d" transpose "e" -> "f"\n}\nrename {}\n')
    first, empty = m.statements
    assert [r.pattern.value for r in first.rules] == ["a", "c", "e"]
    assert [len(r.options) for r in first.rules] == [0, 1, 0]
    assert empty.rules == ()


def test_rename_is_a_keyword_and_not_a_name():
    with pytest.raises(PlanError) as info:
        parse("mesh(rename = 2)")
    assert info.value.diagnostics[0].code == "P001"


def test_a_layout_written_as_a_template_is_a_syntax_error_that_says_so():
    with pytest.raises(PlanError) as info:
        parse('rename { "a" (model, _) }')
    (d,) = info.value.diagnostics
    assert d.code == "P001" and (d.span.line, d.span.column) == (1, 14)
    assert d.help == ('a rename rule is written `"REGEX" -> "TEMPLATE"`',)


# -- checker -> IR --------------------------------------------------------------------------

def test_rules_become_renames_in_file_order_across_blocks():
    ir = check(plan(r'''
        rename { "a\.(\d+)" -> "x/\1" transpose }
        rename { "b" -> "y" }
    '''))
    assert ir.renames == (Rename(0, r"a\.(\d+)", r"x/\1", True), Rename(1, "b", "y", False))
    assert (ir.renames[0].span.line, ir.renames[0].pattern_span.column) == (3, 10)
    assert (ir.rename_span.line, ir.rename_span.column, ir.rename_span.end_column) == (3, 1, 7)


def test_a_plan_without_rename_has_no_renames():
    ir = check(DP)
    assert ir.renames == () and ir.rename_span is None


def test_rename_is_allowed_under_data_parallel_and_model_parallel_alike():
    mp = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"
    assert check(mp + 'rename { "a" -> "b" }').renames == check(DP + 'rename { "a" -> "b" }').renames


def test_invalid_regex_is_p106_at_the_column_of_the_fault():
    (d,) = errors('rename { "a[" -> "b" }')
    assert d.code == "P106" and where(d) == (3, 12, 3, 13)


def test_backreference_is_p107_as_in_layout():
    (d,) = errors(r'rename { "(\w)\1" -> "b" }')
    assert d.code == "P107" and where(d) == (3, 15, 3, 16)


def test_a_repeated_pattern_is_p111_pointing_at_both():
    (d,) = errors('''
        rename {
            "a" -> "x"
        }
        rename {
            "a" -> "y"
        }
    ''')
    assert d.code == "P111" and where(d) == (7, 5, 7, 8)
    assert [(s.span.line, s.message) for s in d.secondary] == [(4, "first rule here")]


def test_a_group_number_the_pattern_lacks_is_p126_at_the_reference():
    (d,) = errors(r'rename { "a(\d)(\d)" -> "x/\3" }')
    assert d.code == "P126" and where(d) == (3, 28, 3, 30)
    assert "`\\3` names group 3, but the pattern has 2 groups" in d.message


def test_a_group_name_the_pattern_lacks_is_p126_naming_the_groups_it_has():
    (d,) = errors(r'rename { "(?P<layer>\d+)" -> "x/\g<nope>" }')
    assert d.code == "P126" and where(d) == (3, 33, 3, 41)
    assert "named groups: `layer`" in d.message


def test_template_positions_count_escaped_quotes_as_written():
    (d,) = errors(r'rename { "(a)" -> "\"q\"\2" }')
    assert d.code == "P126" and where(d) == (3, 25, 3, 27)


@pytest.mark.parametrize("template, fault", [
    (r"x\n", r"unknown escape `\n`"),
    (r"x\0", "groups count from 1"),
    (r"x\g<1", r"`\g` must be followed"),
    ("", "the template is empty"),
])
def test_a_template_that_cannot_be_read_is_p126(template, fault):
    (d,) = errors(f'rename {{ "(a)" -> "{template}" }}')
    assert d.code == "P126" and fault in d.message


def test_named_numbered_and_whole_name_references_are_accepted():
    ir = check(plan(r'rename { "(?P<l>\d+)\.(w)" -> "\g<l>/\2/\g<0>/\g<1>\\" }'))
    assert ir.renames[0].template == r"\g<l>/\2/\g<0>/\g<1>\\"


def test_an_unknown_option_is_p119_with_a_suggestion():
    (d,) = errors('rename { "a" -> "b" transpos }')
    assert d.code == "P119" and where(d) == (3, 21, 3, 29)
    assert d.help == ("did you mean `transpose`?",)


def test_transpose_given_twice_is_p119():
    (d,) = errors('rename { "a" -> "b" transpose transpose }')
    assert d.code == "P119" and where(d) == (3, 31, 3, 40)


def test_every_problem_of_a_block_is_reported_at_once():
    found = errors(r'''
        rename {
            "a[" -> "x"
            "b(c)" -> "\2"
            "d" -> "y" flip
        }
    ''')
    assert [d.code for d in found] == ["P106", "P126", "P119"]


def test_rename_rules_in_an_included_file_keep_their_file_and_order(plan_file):
    plan_file('rename { "inc" -> "from/include" }\n', "names.kdi")
    main = plan_file(DP + 'rename { "top" -> "first" }\ninclude "names.kdi"\n')
    ir = planc.load_plan(main).ir
    assert [(r.pattern, r.index) for r in ir.renames] == [("top", 0), ("inc", 1)]
    assert ir.renames[1].span.file.endswith("names.kdi")


def test_a_bad_template_in_an_included_file_is_located_there(plan_file):
    plan_file(r'rename { "(a)" -> "\2" }' + "\n", "names.kdi")
    main = plan_file(DP + 'include "names.kdi"\n')
    with pytest.raises(PlanError) as info:
        planc.load_plan(main)
    (d,) = info.value.diagnostics
    assert d.code == "P126" and d.span.file.endswith("names.kdi") and d.span.column == 20


# -- planc fmt ------------------------------------------------------------------------------

MESSY = textwrap.dedent(r'''
    rename{   # names from the PyTorch checkpoint
      "model\.layers\.(\d+)\.q\.weight"->"layers/\1/q/kernel"   transpose # q
      # the embedding
      "model\.embed\.weight"  ->  "embed/embeddings"
    }
    mesh(batch=auto)  data_parallel
    rename {}
''').lstrip()

CANONICAL = textwrap.dedent(r'''
    mesh(batch = auto)

    data_parallel

    rename {  # names from the PyTorch checkpoint
        "model\.layers\.(\d+)\.q\.weight" -> "layers/\1/q/kernel" transpose  # q
        # the embedding
        "model\.embed\.weight"            -> "embed/embeddings"
    }

    rename {}
''').lstrip()


def test_fmt_puts_rename_last_one_rule_a_line_arrows_aligned():
    assert format_text(MESSY) == CANONICAL


def test_fmt_of_a_rename_plan_is_idempotent_and_keeps_its_meaning():
    once = format_text(MESSY)
    assert format_text(once) == once
    assert without_spans(check(once)) == without_spans(check(MESSY))


def test_fmt_keeps_rename_blocks_on_their_side_of_an_include(plan_file):
    plan_file('rename { "inc" -> "x" }\n', "names.kdi")
    text = 'rename { "top" -> "y" }\ninclude "names.kdi"\n' + DP
    path = plan_file(text)
    out = format_text(text, str(path))
    assert out.index('"top"') < out.index("include")
    assert without_spans(check(out, str(path))) == without_spans(check(text, str(path)))


# -- JSON and fingerprint -------------------------------------------------------------------

def test_compiled_json_lists_the_renames_in_file_order():
    ir = check(plan(r'rename { "a\.(\d+)" -> "x/\1" transpose  "b" -> "y" }'))
    doc = json.loads(compiled_json(ir))
    assert doc["renames"] == [{"pattern": r"a\.(\d+)", "template": r"x/\1", "transpose": True},
                              {"pattern": "b", "template": "y", "transpose": False}]


def test_fingerprint_changes_with_a_rename_rule_its_template_and_its_transpose():
    prints = {fingerprint(check(plan(t))) for t in (
        "", 'rename { "a" -> "x" }', 'rename { "a" -> "y" }', 'rename { "a" -> "x" transpose }',
        'rename { "b" -> "x" }')}
    assert len(prints) == 5


def test_fingerprint_of_a_plan_without_rename_leaves_renames_out():
    # So every fingerprint published before `rename` existed still holds.
    from planc.fingerprint import _canonical

    assert "renames" not in _canonical(check(DP))
    assert "renames" in _canonical(check(plan('rename { "a" -> "x" }')))


def test_fingerprint_ignores_where_the_rename_rules_stand():
    a = check(plan('rename { "a" -> "x" }'))
    b = check(plan('\n\n  rename {\n\n "a"   ->   "x"\n}'))
    assert fingerprint(a) == fingerprint(b)


def test_fmt_keeps_an_empty_rename_block_open_for_its_comment_as_layout_does():
    out = format_text(DP + "rename {  # note\n}\n")
    assert out.endswith("\nrename {  # note\n}\n")
    assert format_text(out) == out
