"""Syntax errors a person can act on: where, what was found, what was expected, a fix."""

import pytest

import planc
from helpers import MP, only, problems


def first(text):
    d = problems(text)[0]
    return d


def test_missing_close_paren_says_what_was_expected_and_where_it_opened():
    text = "mesh(batch = auto, model = 2\nmodel_parallel(batch = batch)\n"
    d = first(text)
    assert (d.code, d.span.line, d.span.column) == ("P001", 2, 1)
    assert d.message == "expected `,` or `)`, found `model_parallel`"
    assert d.secondary[0].span.line == 1 and d.secondary[0].span.column == 5
    assert "not closed" in d.secondary[0].message


def test_missing_arrow_in_rule():
    d = first(MP + 'layout {\n    "dense/kernel" (_, model)\n}\n')
    assert (d.code, d.span.line, d.span.column) == ("P001", 4, 20)
    assert d.message == "expected `->`, found `(`"
    assert 'a rule is written `"REGEX" -> LAYOUT`' in d.help


def test_colon_instead_of_arrow():
    assert only(MP + 'layout {\n    "dense/kernel": (_, model)\n}\n') == ("P007", 4, 19, 20)


def test_colon_in_a_setting_is_not_called_an_arrow():
    code, *_ = only("mesh(batch: 2)\ndata_parallel\n")
    assert code == "P004"


@pytest.mark.parametrize("text, where, fix", [
    (MP + "layout {\n    'dense/kernel' -> (_, model)\n}\n", ("P003", 4, 5, 19),
     'write "dense/kernel"'),
    ("mseh(batch = auto)\ndata_parallel\n", ("P006", 1, 1, 5), "did you mean `mesh`?"),
    (MP + 'layout {\n    "k" -> (None, model)\n}\n', ("P008", 4, 13, 17),
     "replace `None` with `_`"),
], ids=["single-quoted-string-suggests-double-quotes",
        "unknown-statement-suggests-the-near-keyword",
        "none-for-unsplit-says-to-write-underscore"])
def test_a_slip_with_one_right_spelling_is_located_and_given_it(text, where, fix):
    d = first(text)
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == where
    assert d.help == (fix,)


def test_unterminated_string_spans_to_the_end_of_the_line():
    d = first(MP + 'layout {\n    "dense/kernel -> (_, model)\n}\n')
    assert (d.code, d.span.line, d.span.column, d.span.end_column) == ("P002", 4, 5, 32)


def test_unknown_statement_far_from_any_keyword_lists_them():
    d = first("shard everything\n")
    assert d.code == "P006"
    assert "statements start with one of" in d.help[0]


def test_empty_layout_entry():
    assert only(MP + 'layout {\n    "k" -> (model, , _)\n}\n') == ("P005", 4, 20, 21)


def test_empty_first_layout_entry():
    assert only(MP + 'layout {\n    "k" -> (, model)\n}\n')[0] == "P005"


def test_misspelled_keyword_inside_a_layout_gets_a_did_you_mean():
    d = first(MP + 'layout {\n    "k" -> replicate\n}\n')
    assert d.code == "P001"
    assert "did you mean `replicated`?" in d.help


def test_end_of_file_inside_a_block():
    d = first(MP + 'layout {\n    "k" -> (_, model)\n')
    assert d.code == "P001"
    assert d.message.endswith("found the end of the file")
    assert "`{` opened here is not closed" in d.secondary[0].message


def test_unexpected_character():
    d = first("mesh(batch = auto) $\n")
    assert (d.code, d.span.line, d.span.column) == ("P004", 1, 20)


def test_expected_words_are_english_not_terminal_names():
    d = first("param = 3\n")
    assert d.message == "expected a name, found `=`"


def test_plan_error_renders_like_a_compiler():
    try:
        planc.loads("mseh(batch = auto)\ndata_parallel\n", file="plans/x.kd")
    except planc.PlanError as exc:
        text = str(exc)
    assert text == (
        "error[P006]: unknown statement `mseh`\n"
        " --> plans/x.kd:1:1\n"
        "  |\n"
        "1 | mseh(batch = auto)\n"
        "  | ^^^^ not a statement\n"
        "  = help: did you mean `mesh`?\n"
        "\n"
        "found 1 error"
    )


def test_a_missing_value_names_what_may_stand_there_in_words():
    d = first("mesh(pipe = 4)\nmodel_parallel(batch = pipe)\nparam x =\n")
    assert "digitword" not in d.message and "`percent`" not in d.message
    assert "a word such as `1f1b`" in d.message and "a share such as `10%`" in d.message


def test_every_terminal_that_is_not_its_own_word_reads_in_words():
    import re

    from planc.syntax.errors import _WORDS
    from planc.syntax.grammar import grammar_text

    grammar = grammar_text()
    for name, body in re.findall(r"^([A-Z_]+)(?:\.\d+)?:\s*(.+)$", grammar, re.MULTILINE):
        if name in ("COMMENT", "WS") or name in _WORDS:
            continue
        # A keyword reads as itself: `"mesh"`, or `/stages(?=...)/` where it starts a statement.
        assert re.match(rf'"{name.lower()}"$|/{name.lower()}\(', body), name
