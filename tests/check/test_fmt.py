"""`planc fmt`: one canonical layout, every comment kept, meaning never changed."""

import os
import textwrap
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import planc.syntax.printer
from conftest import PLANS
from planc.check import FormatterBug, check, format_text
from planc.check.formatting import without_spans
from planc.cli import main
from planc.diagnostics import PlanError
from planc.syntax import parse
from planc.syntax.grammar import positioned_parser

EXAMPLES = sorted(PLANS.glob("*.kd"))
MP = "mesh(batch = auto, model = 2)\nmodel_parallel(batch = batch)\n"


def fmt(text: str) -> str:
    return format_text(textwrap.dedent(text).lstrip("\n"))


def canon(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def comment_texts(text: str) -> Counter:
    return Counter(c.text for c in parse(text).comments)


# Inputs written badly on purpose: every statement kind, comments in every position.
MESSY = [
    canon("""
        # header one

        # header two
        layout {   # variable rules
          # leading for a
          "a/kernel"->(model,_)|( _ ,model) # trailing a


          "b[0-9]+\\"x"   ->   ((data,model)[1_024], ...)
          default->replicated
          # end of block
        }  # after close
        param tp=4  # tp
        # about heads
        param heads = 1_6
        mesh(   # inner 1
          data=auto,   # inner 2
          model=tp,
        )
        check (heads+1)%model!=0 and not -tp>0,"msg \\d"
        budget(per_device=16GiB,state=3)
        cluster{coordinator=env("C","h:1")   processes=2,process_id=env("P")}
        outputs {}
        model_parallel(batch=(data,model))
        overlap first
        match search
        plan  messy
        slices(data=2)
        # footer

        # footer 2
        """),
    "mesh(batch=auto)data_parallel#dp\n\n\n",
    "# only a comment",
    "",
    canon("""
        mesh(batch = auto, model = 2) model_parallel(batch = batch) layout
        # between keyword and brace
        { "x" ->
          # inside a rule
          (model, _) # after the first line of a rule
          | (_, model)   # at its end
        }
        """),
    "layout { # opening only\n}\n" + MP,
    "layout { # opening\n} mesh( # inside the mesh\nbatch = auto)\ndata_parallel\n",
    MP + "layout {\n\n  # nothing but a comment\n\n}\n",
    canon(r"""
        rename{# checkpoint names
          "model\.layers\.(\d+)\.q\.weight"->"layers/\1/q/kernel"   transpose # q

          # the embedding
          "embed"->  "e/\g<0>"
        }  # after
        mesh(batch=auto) data_parallel rename {} rename { "x" -> "y" }
        """),
]


# -- layout -----------------------------------------------------------------------------------

def test_statements_are_put_in_canonical_order():
    out = fmt("""
        layout { default -> replicated }
        check model > 0, "m"
        budget(per_device = 1 GB)
        overlap first
        match search
        model_parallel(batch = batch)
        slices(batch = 2)
        mesh(batch = auto, model = 2)
        param p = 1
        plan p
        """)
    keywords = [line.split("(")[0].split()[0] for line in out.splitlines() if line
                and not line.startswith((" ", "}"))]
    assert keywords == ["plan", "param", "mesh", "slices", "model_parallel", "match",
                        "overlap", "budget", "check", "layout"]


def test_groups_are_separated_by_one_blank_line():
    assert fmt("plan p\n\n\n\nmesh(batch = auto)\ndata_parallel\n") == canon("""
        plan p

        mesh(batch = auto)

        data_parallel
        """)


def test_consecutive_params_and_checks_stay_together_in_order():
    out = fmt(MP + 'param b = 2\ncheck b > 0, "b"\n\nparam a = 1\n\ncheck a > 0, "a"\n')
    assert out == canon("""
        param b = 2
        param a = 1

        mesh(batch = auto, model = 2)

        model_parallel(batch = batch)

        check b > 0, "b"
        check a > 0, "a"
        """)


def test_spacing_is_normalised_inside_statements():
    out = fmt("""
        param  big=1_024
        param name="x"
        mesh( batch=auto ,model=2, )
        model_parallel( batch = ( batch , model ) )
        budget(per_device=16GiB,state=3)
        """)
    assert out == canon("""
        param big = 1_024
        param name = "x"

        mesh(batch = auto, model = 2)

        model_parallel(batch = (batch, model))

        budget(per_device = 16 GiB, state = 3)
        """)


def test_layouts_are_spelled_canonically():
    out = fmt(MP + 'layout{"a"->(model[1_28],_)|(_ ,(batch,model))"b"->(...,model)"c"->replicated}')
    assert out.endswith(canon("""
        layout {
            "a" -> (model[1_28], _) | (_, (batch, model))
            "b" -> (..., model)
            "c" -> replicated
        }
        """))


def test_strings_are_printed_exactly_as_written():
    out = fmt(MP + 'layout {\n  "a\\"b\\d+\\\\" -> replicated\n}\ninclude "sub dir/x\\".kd"\n')
    assert '"a\\"b\\d+\\\\" -> replicated' in out
    assert 'include "sub dir/x\\".kd"' in out


def test_arrows_align_to_the_longest_pattern_of_the_block_default_included():
    out = fmt(MP + 'layout {\n"a" -> replicated\n"abc" -> replicated\ndefault -> replicated\n}\n'
              'outputs {\n"long/pattern" -> replicated\n"x" -> replicated\n}\n')
    assert out.endswith(canon("""
        layout {
            "a"     -> replicated
            "abc"   -> replicated
            default -> replicated
        }

        outputs {
            "long/pattern" -> replicated
            "x"            -> replicated
        }
        """))


def test_empty_block_is_written_on_one_line():
    assert fmt(MP + "layout {\n\n}\n").endswith("\nlayout {}\n")


def test_cluster_block_has_one_setting_per_line_without_commas():
    out = fmt('cluster { coordinator = env("COORD", "h:1234"), processes = 2, process_id = 0 }\n')
    assert out == canon("""
        cluster {
            coordinator = env("COORD", "h:1234")
            processes = 2
            process_id = 0
        }
        """)


def test_commas_on_lines_of_their_own_are_not_blank_lines():
    out = fmt("cluster {\n  processes = 2\n  ,\n  process_id = 0\n}\n")
    assert out == "cluster {\n    processes = 2\n    process_id = 0\n}\n"


def test_check_spaces_operators_and_keeps_parentheses_as_written():
    out = fmt(MP + 'param h=8\ncheck (h+1)*2%model==0 and not -h>=0 or (h),"m"\n')
    assert 'check (h + 1) * 2 % model == 0 and not -h >= 0 or (h), "m"' in out


def test_crlf_input_gives_lf_output():
    text = "plan p\r\n\r\nmesh(batch = auto)  # m\r\n\r\ndata_parallel\r\n"
    assert format_text(text) == "plan p\n\nmesh(batch = auto)  # m\n\ndata_parallel\n"


def test_output_ends_with_one_newline_and_no_trailing_whitespace():
    for text in MESSY:
        out = format_text(text)
        if out:
            assert out.endswith("\n") and not out.endswith("\n\n")
        assert all(line == line.rstrip() for line in out.split("\n"))
        assert "\r" not in out


def test_empty_text_stays_empty():
    assert format_text("") == ""
    assert format_text("\n\n  \n") == ""


# -- comments -----------------------------------------------------------------------------------

def test_top_of_file_comments_stay_at_the_top_with_their_blank_line():
    out = fmt("""
        # about this plan

        data_parallel
        plan p
        """)
    assert out == "# about this plan\n\nplan p\n\ndata_parallel\n"


def test_top_of_file_comments_without_a_blank_line_stay_without_one():
    assert fmt("# about\nplan p\ndata_parallel\n") == "# about\nplan p\n\ndata_parallel\n"


def test_own_line_comment_moves_with_its_statement():
    out = fmt("""
        plan p
        # the distribution
        data_parallel
        # the mesh
        mesh(batch = auto)
        """)
    assert out == canon("""
        plan p

        # the mesh
        mesh(batch = auto)

        # the distribution
        data_parallel
        """)


def test_end_of_line_comment_stays_on_its_line_after_two_spaces():
    assert fmt("data_parallel    # dp\nmesh(batch=auto)# m\n") == (
        "mesh(batch = auto)  # m\n\ndata_parallel  # dp\n")


def test_comment_inside_a_multiline_statement_becomes_its_trailing_comment():
    out = fmt("""
        mesh(
            batch = auto,  # replicas
            model = 2,
        )
        data_parallel
        """)
    assert out == "mesh(batch = auto, model = 2)  # replicas\n\ndata_parallel\n"


def test_several_comments_inside_a_statement_are_all_kept_in_order():
    out = fmt("""
        mesh(
            batch = auto,  # replicas
            model = 2,  # tensor parallel
        )  # the mesh
        data_parallel
        """)
    assert out == canon("""
        # replicas
        # tensor parallel
        mesh(batch = auto, model = 2)  # the mesh

        data_parallel
        """)


def test_rule_comments_stay_with_their_rules():
    out = fmt(MP + """
        layout {  # variables
            # the embedding
            "emb" -> (model, _)  # vocab split

            "very/long/pattern" -> replicated
            # nothing after this
        }  # end
        """)
    assert out.endswith(canon("""
        layout {  # variables
            # the embedding
            "emb"               -> (model, _)  # vocab split

            "very/long/pattern" -> replicated
            # nothing after this
        }  # end
        """))


def test_comment_after_a_closing_brace_belongs_to_the_next_statement_on_that_line():
    out = fmt("layout {\n} mesh( # inside the mesh\nbatch = auto)\ndata_parallel\n")
    assert out == "mesh(batch = auto)  # inside the mesh\n\ndata_parallel\n\nlayout {}\n"


def test_comment_after_a_rule_on_the_brace_line_stays_with_the_rule():
    out = fmt(MP + 'layout { "a" -> replicated  # a\n}\n')
    assert out.endswith('layout {\n    "a" -> replicated  # a\n}\n')


def test_blank_lines_between_rules_collapse_to_one():
    out = fmt(MP + 'layout {\n\n\n"a" -> replicated\n\n\n\n"b" -> replicated\n\n}\n')
    assert out.endswith('layout {\n    "a" -> replicated\n\n    "b" -> replicated\n}\n')


def test_comment_in_an_empty_block_keeps_the_block_open():
    assert fmt(MP + "layout {\n# to do\n}\n").endswith("layout {\n    # to do\n}\n")
    assert fmt(MP + "layout { # to do\n}\n").endswith("layout {  # to do\n}\n")


def test_comments_after_the_last_statement_stay_at_the_end():
    out = fmt("data_parallel\n\n# one\n\n\n# two\nplan p\n# last\n")
    assert out == "# one\n\n# two\nplan p\n\ndata_parallel\n# last\n"
    assert fmt("data_parallel\nmesh(batch = auto)\n\n# end\n").endswith(
        "data_parallel\n\n# end\n")


@pytest.mark.parametrize("text", MESSY, ids=range(len(MESSY)))
def test_no_comment_is_ever_lost(text):
    assert comment_texts(format_text(text)) == comment_texts(text)


# -- idempotence and meaning -----------------------------------------------------------------------

@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_formatting_an_example_plan_twice_changes_nothing_more(path):
    once = format_text(path.read_text(), str(path))
    assert format_text(once, str(path)) == once


@pytest.mark.parametrize("text", MESSY, ids=range(len(MESSY)))
def test_formatting_messy_input_twice_changes_nothing_more(text):
    once = format_text(text)
    assert format_text(once) == once


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_formatted_example_plan_checks_to_the_same_plan(path):
    text = path.read_text()
    out = format_text(text, str(path))
    assert without_spans(check(out, str(path))) == without_spans(check(text, str(path)))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plans_are_already_canonical(path):
    assert format_text(path.read_text(), str(path)) == path.read_text()


def test_include_moves_to_the_top_when_that_keeps_the_meaning(plan_file):
    plan_file('param heads = 8\n', "base.kd")
    path = plan_file(MP + 'include "base.kd"\n')
    assert format_text(path.read_text(), str(path)).startswith('include "base.kd"\n\nmesh(')


def test_statements_keep_their_side_of_an_include_that_would_reorder_rules(plan_file):
    plan_file('layout {\n    "b" -> replicated\n}\n', "base.kd")
    path = plan_file('layout {\n    "a" -> replicated\n}\ninclude "base.kd"\noverlap first\n' + MP)
    out = format_text(path.read_text(), str(path))
    assert out == canon("""
        layout {
            "a" -> replicated
        }

        include "base.kd"

        mesh(batch = auto, model = 2)

        model_parallel(batch = batch)

        overlap first
        """)
    assert format_text(out, str(path)) == out
    assert [r.pattern for r in check(out, str(path)).rules] == ["a", "b"]


def test_plan_with_checker_errors_is_still_formatted():
    text = MP + 'layout{"x"->(modle,_)}\n'
    with pytest.raises(PlanError):
        check(text)
    assert format_text(text).endswith('layout {\n    "x" -> (modle, _)\n}\n')


def test_syntax_error_raises_the_plan_error():
    with pytest.raises(PlanError) as info:
        format_text("mesh(batch = auto\n", "bad.kd")
    assert info.value.diagnostics[0].code == "P001"
    assert info.value.diagnostics[0].span.file == "bad.kd"


def test_a_printer_that_changed_meaning_is_refused(monkeypatch):
    # Fault injection: a printer that drops every axis must never reach the user.
    monkeypatch.setattr(planc.syntax.printer._Printer, "entry", lambda self, e: "_")
    with pytest.raises(FormatterBug, match="changed its syntax tree"):
        format_text(MP + 'layout {\n    "a" -> (model, _)\n}\n')


def test_spans_do_not_count_when_comparing_plans():
    a = check("\n\n" + MP + 'check model > 0, "m"\n')
    b = check(MP + 'check model > 0, "m"\n')
    assert without_spans(a) == without_spans(b)
    assert without_spans(check(MP)) != without_spans(check(MP.replace("2", "4")))


# -- property tests ------------------------------------------------------------------------------

def _tokens(text):
    """(separator before, token text, token type) for each token, comments included."""
    out, pos = [], 0
    for tok in positioned_parser().lex(text, dont_ignore=True):
        if tok.type == "WS":
            continue
        out.append((text[pos:tok.start_pos], str(tok), tok.type))
        pos = tok.end_pos
    return out, text[pos:]


SOURCES = [p.read_text() for p in EXAMPLES] + [MESSY[0]]
_SEPARATORS = st.sampled_from([" ", "  ", "\t", "\n", " \n  ", "\n\t"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SOURCES))), st.data())
def test_whitespace_between_tokens_does_not_change_the_output(which, data):
    text = SOURCES[which]
    tokens, end = _tokens(text)
    pieces = []
    for k, (sep, tok, kind) in enumerate(tokens):
        after_comment = k > 0 and tokens[k - 1][2] == "COMMENT"
        # A comment's line and the blank lines around comments are part of the layout;
        # everything else between tokens is free.
        if kind == "COMMENT" or after_comment or k == 0 or "\n\n" in sep:
            pieces.append(sep)
        else:
            pieces.append(data.draw(_SEPARATORS))
        pieces.append(tok)
    shuffled = "".join(pieces) + end
    assert format_text(shuffled) == format_text(text)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(SOURCES))), st.data())
def test_comments_anywhere_are_kept_and_formatting_settles(which, data):
    tokens, end = _tokens(SOURCES[which])
    pieces = []
    for k, (sep, tok, _) in enumerate(tokens):
        pieces.append(sep)
        if data.draw(st.integers(0, 4)) == 0:
            newline_before = data.draw(st.booleans())
            pieces.append(("\n" if newline_before else " ") + f"# c{k}\n")
        pieces.append(tok)
    text = "".join(pieces) + end
    once = format_text(text)  # raises FormatterBug if a comment were lost
    assert comment_texts(once) == comment_texts(text)
    assert format_text(once) == once


# -- the command line ---------------------------------------------------------------------------

UGLY = "data_parallel\nmesh(batch=auto)\n"
PRETTY = "mesh(batch = auto)\n\ndata_parallel\n"


def test_check_exits_one_and_names_files_that_would_change(plan_file, capsys):
    ugly, pretty = plan_file(UGLY, "a.kd"), plan_file(PRETTY, "b.kd")
    assert main(["fmt", "--check", str(pretty), str(ugly)]) == 1
    assert capsys.readouterr().out == f"would reformat {ugly}\n"
    assert ugly.read_text() == UGLY


def test_check_exits_zero_when_everything_is_formatted(plan_file, capsys):
    assert main(["fmt", "--check", str(plan_file(PRETTY))]) == 0
    assert capsys.readouterr().out == ""


def test_diff_prints_a_unified_diff_and_writes_nothing(plan_file, capsys):
    path = plan_file(UGLY)
    assert main(["fmt", "--diff", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"--- {path}\n+++ {path}\n@@")
    assert "-mesh(batch=auto)\n" in out and "+mesh(batch = auto)\n" in out
    assert path.read_text() == UGLY


def test_fmt_rewrites_changed_files_and_leaves_formatted_ones_alone(plan_file, capsys):
    ugly, pretty = plan_file(UGLY, "a.kd"), plan_file(PRETTY, "b.kd")
    inode = os.stat(pretty).st_ino
    assert main(["fmt", str(ugly), str(pretty)]) == 0
    assert capsys.readouterr().out == f"reformatted {ugly}\n"
    assert ugly.read_text() == PRETTY
    assert os.stat(pretty).st_ino == inode  # not even rewritten with the same bytes


def test_crlf_file_is_rewritten_with_lf(plan_file, capsys):
    path = plan_file(PRETTY)
    path.write_bytes(PRETTY.replace("\n", "\r\n").encode())
    assert main(["fmt", str(path)]) == 0
    assert path.read_bytes() == PRETTY.encode()


def test_syntax_error_exits_one_and_leaves_the_file_untouched(plan_file, capsys):
    bad = "mesh(batch = auto\ndata_parallel\n"
    path, ugly = plan_file(bad, "bad.kd"), plan_file(UGLY, "ugly.kd")
    assert main(["fmt", "--color", "never", str(path), str(ugly)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error[P001]: ") and f"--> {path}:2:1" in err
    assert path.read_text() == bad
    assert ugly.read_text() == PRETTY  # the other file is still formatted


def test_unreadable_file_exits_two(tmp_path, capsys):
    missing = tmp_path / "missing.kd"
    assert main(["fmt", str(missing)]) == 2
    assert capsys.readouterr().err == f"planc: cannot read {missing}: No such file or directory\n"
